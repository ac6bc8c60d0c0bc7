//! `profile diff`: compare runs, print the verdicts, exit 3 on a regression.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;

use super::create;
use crate::cli;

/// `profile diff`: exit 3 on a regression, 4 on an inconclusive function with
/// `--fail-if-inconclusive`, 0 otherwise.
pub(crate) fn diff(args: &cli::DiffArgs) -> anyhow::Result<ExitCode> {
    use profile::diff::{self, Run};
    let (base_paths, new_paths) = args.inputs().map_err(anyhow::Error::msg)?;
    let read = |paths: &[std::path::PathBuf]| -> anyhow::Result<Vec<Run>> {
        paths
            .iter()
            .map(|p| {
                let run = Run::read_with(p, args.folded_unit())?;
                if let Some(w) = &run.warning {
                    eprintln!("profile: warning: {}", profile::text::terminal_message(w));
                }
                if let Some(n) = &run.note {
                    eprintln!("profile: {}", profile::text::terminal_message(n));
                }
                Ok(run)
            })
            .collect()
    };
    let (base, new) = (read(&base_paths)?, read(&new_paths)?);
    // Folded inputs whose counts were told apart on their own must agree.
    let folded: Vec<&Run> = base
        .iter()
        .chain(&new)
        .filter(|r| r.kind == diff::InputKind::Folded)
        .collect();
    if let (Some(w), Some(c)) = (
        folded.iter().find(|r| r.note.is_some()),
        folded.iter().find(|r| r.note.is_none()),
    ) && args.folded_unit.is_none()
    {
        anyhow::bail!(
            "the folded inputs disagree: {} looks weighted by a sampling period, {} looks like sample counts; pass --folded-unit samples or ns",
            w.source,
            c.source
        );
    }
    let c = diff::compare(&base, &new, args.to_options())?;
    let sides = diff::table::Sides {
        base: &base,
        new: &new,
    };
    if let Some(path) = &args.flamegraph {
        let mut out = create(path)?;
        diff::flamegraph::write(&base, &new, c.unit != diff::Unit::Share, &mut out)
            .and_then(|()| out.flush())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let path = args.output.as_deref().unwrap_or(Path::new("-"));
    let mut out = create(path)?;
    match args.format() {
        cli::DiffFormat::Table => {
            diff::table::write_table(&c, sides, args.top, args.verbose, &mut out)
        }
        cli::DiffFormat::Markdown => diff::table::write_markdown(&c, sides, args.top, &mut out),
        cli::DiffFormat::Json => diff::json::write(&c, sides, &mut out),
    }
    .and_then(|()| out.flush())
    .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(if c.regressions().next().is_some() {
        ExitCode::from(3)
    } else if args.fail_if_inconclusive && c.inconclusive().next().is_some() {
        ExitCode::from(4)
    } else {
        ExitCode::SUCCESS
    })
}
