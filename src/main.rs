//! The `profile` binary: parse the command line, run the subcommand, turn errors into
//! a message and an exit status (0 ok, 2 error, 3 regression; a launched command's own
//! status for `record -- COMMAND`).

mod cli;

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use clap::{CommandFactory, Parser};

use cli::{Cli, Command, GenerateWhat, ReportArgs};
use profile::format::Recording;
use profile::output;
use profile::profile::{Profile, ProfileOptions};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("profile: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// `profile report | head` closing the pipe early is not an error.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Record(args) => record(&args),
        Command::Report(args) => report(&args).map(|()| ExitCode::SUCCESS),
        Command::Diff(args) => diff(&args),
        Command::Generate { what, dir } => generate(what, &dir).map(|()| ExitCode::SUCCESS),
    }
}

fn record(args: &cli::RecordArgs) -> anyhow::Result<ExitCode> {
    let opts = args.to_options();
    let s = profile::record::record(&opts)?;
    if !args.quiet {
        let per_sample = if s.samples > 0 {
            s.bytes as f64 / s.samples as f64
        } else {
            0.0
        };
        let mut e = io::stderr().lock();
        writeln!(
            e,
            "profile: {} samples from {} thread{} in {:.2} s, {} lost, {} throttled ({}) -> {} ({:.0} KiB, {:.0} B/sample)",
            s.samples,
            s.threads,
            if s.threads == 1 { "" } else { "s" },
            s.duration.as_secs_f64(),
            s.lost,
            s.throttled,
            match s.stop_reason.as_str() {
                "target-exited" => "target exited",
                "signal" => "stopped by signal",
                "duration" => "duration reached",
                other => other,
            },
            s.output.display(),
            s.bytes as f64 / 1024.0,
            per_sample,
        )?;
        writeln!(
            e,
            "profile: {} perf events open, {:.1} MiB of ring buffers ({} per CPU)",
            s.event_fds,
            s.ring_bytes as f64 / (1 << 20) as f64,
            if s.ring_bytes > 0 {
                format!(
                    "{:.0} KiB",
                    s.ring_bytes as f64 / 1024.0 / s.rings.max(1) as f64
                )
            } else {
                "none".into()
            }
        )?;
        let sym = &s.symbols;
        if sym.named + sym.unnamed > 0 {
            writeln!(
                e,
                "profile: named {} of {} unique frames in {:.0} ms",
                sym.named,
                sym.named + sym.unnamed,
                sym.time.as_secs_f64() * 1e3
            )?;
        }
        if s.cpu_time_ns > 0 {
            let sampled = s.samples * s.period_ns;
            writeln!(
                e,
                "profile: the target used {:.3} s of CPU; samples cover {:.1}% of it (one sample per {:.2} ms of a thread's CPU)",
                s.cpu_time_ns as f64 / 1e9,
                (sampled as f64 * 100.0 / s.cpu_time_ns as f64).min(100.0),
                s.period_ns as f64 / 1e6
            )?;
        }
        if s.cpu_time_ns > 0 && (s.samples * s.period_ns) * 2 < s.cpu_time_ns {
            writeln!(
                e,
                "profile: hint: the threads used less CPU than one sample period each; sample more often with a higher -F, or record for longer"
            )?;
        }
        if s.lost > 0 {
            writeln!(
                e,
                "profile: warning: the kernel dropped {} samples (ring buffer full); try a larger --mmap-pages or a lower -F",
                s.lost
            )?;
        }
        if s.dropped > 0 {
            writeln!(
                e,
                "profile: warning: {} kernel records could not be decoded and were skipped",
                s.dropped
            )?;
        }
        if s.other_process_samples > 0 {
            writeln!(
                e,
                "profile: note: left out {} samples of processes the target started; pass --children to keep them",
                s.other_process_samples
            )?;
        }
        if let Some(note) = &s.kernel_note {
            writeln!(e, "profile: note: {note}")?;
        }
        if s.samples > 0 {
            writeln!(
                e,
                "profile: next: profile report -i {} --flamegraph profile.svg",
                s.output.display()
            )?;
        }
    }
    Ok(match s.exit_code {
        Some(code) => ExitCode::from(code.clamp(0, 255) as u8),
        None => ExitCode::SUCCESS,
    })
}

/// Opens an output path; `-` is stdout.
fn create(path: &Path) -> anyhow::Result<Box<dyn Write>> {
    if path == Path::new("-") {
        return Ok(Box::new(io::stdout().lock()));
    }
    let f = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    Ok(Box::new(io::BufWriter::new(f)))
}

fn report(args: &ReportArgs) -> anyhow::Result<()> {
    let table = args.top.is_some()
        || [
            &args.folded,
            &args.flamegraph,
            &args.pprof,
            &args.speedscope,
            &args.json,
        ]
        .iter()
        .all(|o| o.is_none());
    let to_stdout = [
        &args.folded,
        &args.flamegraph,
        &args.pprof,
        &args.speedscope,
        &args.json,
    ]
    .iter()
    .filter(|o| o.as_deref() == Some(Path::new("-")))
    .count()
        + usize::from(table);
    if to_stdout > 1 {
        anyhow::bail!(
            "more than one output goes to stdout (`-`, --json without a path, or the top table with --top); give the others file paths"
        );
    }
    let progress = Progress::new();
    progress.stage(format!("reading {}", args.input.display()));
    let rec = Recording::read_file(&args.input)?;
    if let Some(d) = &rec.damage {
        progress.note(&format!("profile: warning: {d}"));
    }
    progress.stage(format!(
        "building the profile of {} samples",
        rec.samples.len()
    ));
    let mut popts = ProfileOptions::default();
    popts.lines = args.lines;
    let full = Profile::from_recording(&rec, popts);
    drop(rec);
    let filter = args.filter();
    let before = full.samples.len();
    let profile = if filter.is_empty() {
        full
    } else {
        progress.stage("filtering".to_owned());
        full.filter(&filter)?
    };
    if profile.samples.is_empty() && before > 0 {
        anyhow::bail!(
            "the filters ({}) left none of the {before} samples",
            filter.describe()
        );
    }
    let note = (!filter.is_empty()).then(|| filter.describe());
    // Files first, then what goes to stdout: `| head` closing the pipe early must not
    // cost the files.
    let mut outputs: Vec<(&Path, Output)> = [
        (&args.folded, Output::Folded),
        (&args.flamegraph, Output::FlameGraph),
        (&args.pprof, Output::Pprof),
        (&args.speedscope, Output::Speedscope),
        (&args.json, Output::Json),
    ]
    .into_iter()
    .filter_map(|(p, o)| Some((p.as_deref()?, o)))
    .collect();
    outputs.sort_by_key(|(p, _)| *p == Path::new("-"));
    for (path, what) in outputs {
        match what {
            Output::Folded => {
                progress.stage("writing folded stacks".to_owned());
                write_to(path, |out| {
                    Ok(output::folded::write(&profile, args.folded_options(), out)?)
                })?;
            }
            Output::FlameGraph => {
                progress.stage(format!(
                    "drawing the flame graph of {} samples",
                    profile.samples.len()
                ));
                let opts = args.flamegraph_options(note.clone());
                let mut stats = None;
                write_to(path, |out| {
                    stats = Some(output::flamegraph::write(&profile, &opts, out)?);
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
            }
            Output::Pprof => {
                progress.stage("writing the pprof profile".to_owned());
                write_to(path, |out| Ok(output::pprof::write(&profile, out)?))?;
            }
            Output::Speedscope => {
                progress.stage("writing the speedscope file".to_owned());
                write_to(path, |out| Ok(output::speedscope::write(&profile, out)?))?;
            }
            Output::Json => {
                let desc = note.clone().unwrap_or_default();
                write_to(path, |out| {
                    Ok(output::json::write(&profile, &desc, args.top, out)?)
                })?;
            }
        }
    }
    progress.finish();
    if table {
        let mut out = io::stdout().lock();
        output::top::write(&profile, args.top.unwrap_or(20), &mut out)?;
        writeln!(out, "\n{}", output::flamegraph::describe(&profile))?;
        if let Some(n) = &note {
            writeln!(
                out,
                "Filtered: {n} ({} of {before} samples)",
                profile.samples.len()
            )?;
        }
        if args.top.is_none() {
            writeln!(
                out,
                "For a flame graph: profile report -i {} --flamegraph profile.svg",
                args.input.display()
            )?;
        }
    }
    Ok(())
}

/// The outputs `report` writes to paths.
#[derive(Clone, Copy)]
enum Output {
    Folded,
    FlameGraph,
    Pprof,
    Speedscope,
    Json,
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
        self.0.suspend(|| eprintln!("{line}"));
    }

    fn finish(&self) {
        self.0.finish_and_clear();
    }
}

/// `profile diff`: exit 3 on a regression, 0 otherwise.
fn diff(args: &cli::DiffArgs) -> anyhow::Result<ExitCode> {
    use profile::diff::{self, Run};
    let (base_paths, new_paths) = args.inputs().map_err(anyhow::Error::msg)?;
    let read = |paths: &[std::path::PathBuf]| -> anyhow::Result<Vec<Run>> {
        paths
            .iter()
            .map(|p| {
                let run = Run::read(p)?;
                if let Some(w) = &run.warning {
                    eprintln!("profile: warning: {w}");
                }
                Ok(run)
            })
            .collect()
    };
    let (base, new) = (read(&base_paths)?, read(&new_paths)?);
    let c = diff::compare(&base, &new, args.to_options())?;
    let sides = diff::table::Sides {
        base: &base,
        new: &new,
    };
    if let Some(path) = &args.flamegraph {
        let mut out = create(path)?;
        diff::flamegraph::write(&base, &new, args.absolute, &mut out)
            .and_then(|()| out.flush())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let path = args.output.as_deref().unwrap_or(Path::new("-"));
    let mut out = create(path)?;
    match args.format() {
        cli::DiffFormat::Table => diff::table::write_table(&c, sides, args.top, &mut out),
        cli::DiffFormat::Markdown => diff::table::write_markdown(&c, sides, args.top, &mut out),
        cli::DiffFormat::Json => diff::json::write(&c, sides, &mut out),
    }
    .and_then(|()| out.flush())
    .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(if c.regressions().next().is_some() {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    })
}

fn generate(what: GenerateWhat, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut cmd = Cli::command();
    match what {
        GenerateWhat::Completions => {
            use clap_complete::Shell;
            for shell in [
                Shell::Bash,
                Shell::Zsh,
                Shell::Fish,
                Shell::Elvish,
                Shell::PowerShell,
            ] {
                clap_complete::generate_to(shell, &mut cmd, "profile", dir)
                    .with_context(|| format!("cannot write {shell} completions"))?;
            }
        }
        GenerateWhat::Man => {
            cmd.build();
            write_man(&cmd, "profile", dir)?;
            for sub in cmd
                .get_subcommands()
                .filter(|s| !s.is_hide_set() && s.get_name() != "help")
            {
                write_man(sub, &format!("profile-{}", sub.get_name()), dir)?;
            }
        }
    }
    Ok(())
}

fn write_man(cmd: &clap::Command, name: &str, dir: &Path) -> anyhow::Result<()> {
    let cmd = cmd.clone().name(name.to_owned());
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut buf)?;
    let path = dir.join(format!("{name}.1"));
    std::fs::write(&path, buf).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}
