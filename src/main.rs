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
    let rec = Recording::read_file(&args.input)?;
    if let Some(d) = &rec.damage {
        eprintln!("profile: warning: {d}");
    }
    let profile = Profile::from_recording(&rec, ProfileOptions::default());
    let mut wrote = false;
    if let Some(path) = &args.folded {
        let mut out = create(path)?;
        let opts = output::folded::FoldedOptions::per_thread(args.per_thread);
        output::folded::write(&profile, opts, &mut out)
            .with_context(|| format!("cannot write {}", path.display()))?;
        wrote = true;
    }
    if let Some(path) = &args.flamegraph {
        let mut out = create(path)?;
        let mut opts = output::flamegraph::FlameGraphOptions::default();
        opts.per_thread = args.per_thread;
        output::flamegraph::write(&profile, &opts, &mut out)
            .with_context(|| format!("cannot write {}", path.display()))?;
        out.flush()?;
        wrote = true;
    }
    if !wrote || args.top.is_some() {
        let mut out = io::stdout().lock();
        output::top::write(&profile, args.top.unwrap_or(20), &mut out)?;
        if !wrote {
            writeln!(
                out,
                "\n{}\nFor a flame graph: profile report -i {} --flamegraph profile.svg",
                output::flamegraph::describe(&profile),
                args.input.display()
            )?;
        }
    }
    Ok(())
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
