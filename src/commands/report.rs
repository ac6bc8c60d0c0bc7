//! `profile report`: read a recording, filter it, write every output asked for.

use std::io::{self, Write};
use std::path::Path;

use anyhow::Context;

use super::create;
use crate::cli::ReportArgs;
use profile::output;
use profile::profile::{Profile, ProfileOptions};

pub(crate) fn report(args: &ReportArgs) -> anyhow::Result<()> {
    let to_stdout = outputs(args)
        .iter()
        .filter(|(p, _)| *p == Path::new("-"))
        .count();
    if to_stdout > 1 {
        anyhow::bail!(
            "more than one output goes to stdout (`-` or --json without a path); give the others file paths"
        );
    }
    // The top table is the default output, and what --top asks for when stdout is
    // free; with --json on stdout, --top limits the JSON instead.
    let table = to_stdout == 0 && (args.top.is_some() || outputs(args).is_empty());
    let progress = Progress::new();
    let full = read(args, &progress)?;
    let view = filter(args, full, &progress)?;
    write_outputs(args, &view, &progress)?;
    progress.finish();
    if table {
        write_table(args, &view)?;
    }
    Ok(())
}

/// The outputs asked for with their paths (`-`: stdout), in the order of the
/// arguments.
fn outputs(args: &ReportArgs) -> Vec<(&Path, Output)> {
    [
        (&args.folded, Output::Folded),
        (&args.flamegraph, Output::FlameGraph),
        (&args.pprof, Output::Pprof),
        (&args.otlp, Output::Otlp),
        (&args.speedscope, Output::Speedscope),
        (&args.json, Output::Json),
        (&args.timeline, Output::Timeline),
    ]
    .into_iter()
    .filter_map(|(p, o)| Some((p.as_deref()?, o)))
    .collect()
}

/// The input's recording, its frames named on this machine when they need it, as a
/// profile.
fn read(args: &ReportArgs, progress: &Progress) -> anyhow::Result<Profile> {
    progress.stage(format!(
        "reading {}",
        profile::text::terminal(&args.input.display().to_string(), usize::MAX)
    ));
    let mut rec = profile::input::open(&args.input)?;
    if let Some(d) = &rec.damage {
        progress.note(&format!("profile: warning: {d}"));
    }
    if profile::symbolize::late::needs_names(&rec) {
        progress.stage("naming frames from the binaries on this machine".to_owned());
        if let Some(note) = profile::symbolize::late::complete_names(&mut rec) {
            progress.note(&format!("profile: note: {note}"));
        }
    }
    progress.stage(format!(
        "building the profile of {} samples",
        rec.samples.len()
    ));
    let mut popts = ProfileOptions::default();
    popts.lines = args.lines;
    Ok(Profile::from_recording(&rec, popts))
}

/// The profile the outputs show: filtered when asked, with what the filter did.
struct View {
    profile: Profile,
    /// CPU samples before the filter, counted as every output counts them (not the
    /// `[unsampled]` remainders, not the off-CPU intervals).
    before: u64,
    /// What the filter left out, when there is a filter.
    note: Option<String>,
}

/// `full` through the arguments' filter; an error when the filter asks for what the
/// recording cannot hold or leaves no sample.
fn filter(args: &ReportArgs, full: Profile, progress: &Progress) -> anyhow::Result<View> {
    let filter = args.filter();
    if !full.meta.off_cpu
        && let Some(s) = filter.states.iter().find(|s| s.is_off_cpu())
    {
        anyhow::bail!(
            "--state {} needs an off-CPU recording: {} holds CPU samples only (record it with --off-cpu)",
            s.name(),
            args.input.display()
        );
    }
    let idle = if filter.hide_idle {
        let n = full.idle_threads().iter().filter(|&&i| i).count();
        progress.note(&format!(
            "profile: note: {n} of {} threads idle for the whole recording left out (--hide-idle)",
            full.threads.len()
        ));
        Some(n)
    } else {
        None
    };
    let before = full.counts().samples;
    let had_any = !full.samples.is_empty();
    let profile = if filter.is_empty() {
        full
    } else {
        progress.stage("filtering".to_owned());
        full.filter(&filter)?
    };
    if profile.samples.is_empty() && had_any {
        anyhow::bail!(
            "the filters ({}) left none of the {before} samples",
            filter.describe()
        );
    }
    let note = (!filter.is_empty()).then(|| match idle {
        Some(n) => filter.describe().replace(
            "idle threads left out",
            &format!("{n} idle threads left out"),
        ),
        None => filter.describe(),
    });
    Ok(View {
        profile,
        before,
        note,
    })
}

/// Every output asked for: files first, then what goes to stdout (`| head` closing
/// the pipe early must not cost the files).
fn write_outputs(args: &ReportArgs, view: &View, progress: &Progress) -> anyhow::Result<()> {
    let profile = &view.profile;
    let note = &view.note;
    // A recording of several attached processes (`record -p A,B`) or of every process
    // (`record -a`) roots stacks at their processes' names: processes of one program
    // merge into one tower, as perf's pipeline shows them; --per-process splits them
    // by pid.
    let several_processes = profile.meta.pids.len() > 1 || profile.meta.all_cpus();
    let mut outputs = outputs(args);
    outputs.sort_by_key(|(p, _)| *p == Path::new("-"));
    for (path, what) in outputs {
        match what {
            Output::Folded => {
                progress.stage("writing folded stacks".to_owned());
                let mut opts = args.folded_options();
                opts.per_program |= several_processes;
                write_to(path, |out| Ok(output::folded::write(profile, opts, out)?))?;
            }
            Output::FlameGraph => {
                let mut opts = args.flamegraph_options(note.clone());
                opts.per_program |= several_processes;
                write_flamegraph(path, profile, &opts, progress)?;
            }
            Output::Pprof => {
                progress.stage("writing the pprof profile".to_owned());
                let mut opts = output::pprof::PprofOptions::default();
                opts.lines = !args.no_source_lines;
                write_to(path, |out| {
                    Ok(output::pprof::write_with(profile, &opts, out)?)
                })?;
            }
            Output::Otlp => {
                progress.stage("writing the OTLP profile".to_owned());
                let mut opts = output::otlp::OtlpOptions::default();
                opts.no_lines = args.no_source_lines;
                write_to(path, |out| Ok(output::otlp::write(profile, &opts, out)?))?;
            }
            Output::Speedscope => {
                progress.stage("writing the speedscope file".to_owned());
                write_to(path, |out| Ok(output::speedscope::write(profile, out)?))?;
            }
            Output::Timeline => {
                progress.stage("drawing the timeline".to_owned());
                let mut opts = output::timeline::TimelineOptions::default();
                opts.title = args.title.clone();
                opts.time = args.time.unwrap_or_default();
                opts.note = note.clone();
                write_to(path, |out| {
                    Ok(output::timeline::write(profile, &opts, out)?)
                })?;
            }
            Output::Json => {
                let desc = note.clone().unwrap_or_default();
                write_to(path, |out| {
                    Ok(output::json::write(profile, &desc, args.top, out)?)
                })?;
            }
        }
    }
    Ok(())
}

/// The flame graph, with a note when frames too narrow to show were merged.
fn write_flamegraph(
    path: &Path,
    profile: &Profile,
    opts: &output::flamegraph::FlameGraphOptions,
    progress: &Progress,
) -> anyhow::Result<()> {
    progress.stage(format!(
        "drawing the flame graph of {}",
        profile.counts().describe(profile.is_wall_time())
    ));
    let mut stats = None;
    write_to(path, |out| {
        stats = Some(output::flamegraph::write(profile, opts, out)?);
        Ok(())
    })?;
    if let Some(s) = stats
        && s.merged_frames > 0
    {
        progress.note(&format!(
            "profile: note: {} flame graph frames narrower than {}% of the total were merged (--min-width)",
            s.merged_frames, opts.min_width
        ));
    }
    Ok(())
}

/// The top table on stdout, with the flame graph's and coverage's lines, the
/// recorder's notes, the filter and a hint.
fn write_table(args: &ReportArgs, view: &View) -> anyhow::Result<()> {
    let profile = &view.profile;
    let mut out = io::stdout().lock();
    output::top::write(profile, args.top.unwrap_or(20), &mut out)?;
    writeln!(out, "\n{}", output::flamegraph::describe(profile))?;
    writeln!(out, "{}", profile.coverage().describe())?;
    // What the recorder said of the naming and the runtimes, said again here.
    for note in output::notes(profile) {
        writeln!(out, "Note: {}", profile::text::terminal_message(note))?;
    }
    if let Some(n) = &view.note {
        writeln!(
            out,
            "Filtered: {n} ({} of {} samples)",
            profile.counts().samples,
            view.before
        )?;
    }
    if args.top.is_none() {
        writeln!(
            out,
            "For a flame graph: profile report -i {} --flamegraph profile.svg",
            args.input.display()
        )?;
    }
    Ok(())
}

/// The outputs `report` writes to paths.
#[derive(Clone, Copy)]
enum Output {
    Folded,
    FlameGraph,
    Pprof,
    Otlp,
    Speedscope,
    Json,
    Timeline,
}

/// Opens `path` (`-`: stdout), runs `f` on it and flushes, naming the path in errors.
fn write_to(
    path: &Path,
    f: impl FnOnce(&mut dyn Write) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut out = create(path)?;
    f(&mut out)
        .and_then(|()| Ok(out.flush()?))
        .with_context(|| format!("cannot write {}", path.display()))
}

/// A spinner with the current stage on stderr while a report runs, when stderr is a
/// terminal; nothing otherwise.
struct Progress(indicatif::ProgressBar);

impl Progress {
    fn new() -> Progress {
        use std::io::IsTerminal;
        if !io::stderr().is_terminal() {
            return Progress(indicatif::ProgressBar::hidden());
        }
        let bar = indicatif::ProgressBar::new_spinner();
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
        Progress(bar)
    }

    fn stage(&self, what: String) {
        self.0.set_message(what);
    }

    /// Prints a line on stderr without garbling the spinner.
    fn note(&self, line: &str) {
        // Notes embed file names and what a recording holds: escaped.
        self.0
            .suspend(|| eprintln!("{}", profile::text::terminal_message(line)));
    }

    fn finish(&self) {
        self.0.finish_and_clear();
    }
}
