//! `record --push`: the pusher from the command line's options, and its summary.

use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use profile::push::{PushOptions, PushStats, Pusher};
use profile::record::Target;

use crate::cli::RecordArgs;

/// Starts the pusher when `--push` was given.
pub(crate) fn start(args: &RecordArgs, target: &Target) -> anyhow::Result<Option<Pusher>> {
    let Some(url) = &args.push else {
        return Ok(None);
    };
    let per_service = *target == Target::AllCpus;
    let app = match &args.app {
        Some(a) => {
            profile::push::check_app(a).map_err(|e| anyhow::anyhow!("--app: {e}"))?;
            a.clone()
        }
        // With -a, each process's service names its series.
        None if per_service => String::new(),
        None => profile::push::app_from_process_name(&process_name(target)),
    };
    let mut o = PushOptions::new(url, &app);
    o.per_service = per_service;
    o.rules = args.push_rules.clone();
    o.dry_run = args.push_dry_run.clone();
    if o.rules.is_some() {
        // SIGHUP reads the rules again (the recorder leaves SIGHUP alone then).
        let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        signal_hook::flag::register(signal_hook::consts::SIGHUP, std::sync::Arc::clone(&flag))
            .context("cannot catch SIGHUP")?;
        o.reload = Some(flag);
    }
    o.interval = args.push_interval.unwrap_or(PushOptions::DEFAULT_INTERVAL);
    o.tags = args.tag.clone();
    o.headers = headers(&args.push_header)?;
    o.verbose = !args.quiet;
    o.ca = args.push_ca.clone();
    if let Some(n) = args.push_buffer {
        o.buffer = n as usize;
    }
    Ok(Some(Pusher::start(&o)?))
}

/// `--push-header` values: `Name: value`, or `@FILE` with one such line per line
/// (blank lines and `#` comments skipped). Errors never hold a value.
fn headers(given: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for h in given {
        match h.strip_prefix('@') {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("--push-header @{path}: cannot read it"))?;
                for (n, line) in text.lines().enumerate() {
                    let line = line.trim();
                    if line.is_empty() || line.starts_with('#') {
                        continue;
                    }
                    out.push(profile::push::parse_header(line).map_err(|e| {
                        anyhow::anyhow!("--push-header @{path}, line {}: {e}", n + 1)
                    })?);
                }
            }
            None => out.push(
                profile::push::parse_header(h)
                    .map_err(|e| anyhow::anyhow!("--push-header: {e}"))?,
            ),
        }
    }
    Ok(out)
}

/// The default application name: the target's process name (its `comm`), the
/// launched command's file name, or `system` with `-a`.
fn process_name(target: &Target) -> String {
    let comm = |id: u32| {
        std::fs::read_to_string(format!("/proc/{id}/comm"))
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    };
    match target {
        Target::Pids(p) | Target::Threads(p) => p.first().map(|&id| comm(id)).unwrap_or_default(),
        Target::Command(c) => c
            .first()
            .map(|c| c.rsplit('/').next().unwrap_or(c).to_owned())
            .unwrap_or_default(),
        // Not used: with -a each process's service names its series.
        Target::AllCpus => "system".to_owned(),
    }
}

/// One line: what reached the server and what did not.
pub(crate) fn print_summary(
    e: &mut dyn Write,
    s: &PushStats,
    interval: Duration,
) -> std::io::Result<()> {
    let per = if s.sent > 0 {
        s.bytes as f64 / s.sent as f64 / 1024.0
    } else {
        0.0
    };
    writeln!(
        e,
        "profile: push: {} of {} windows ({} s each) sent to {} ({:.0} KiB, {:.1} KiB per window, {} samples); {} retried, {} dropped (queue full), {} refused, {} unsent at exit",
        s.sent,
        s.windows,
        interval.as_secs_f64(),
        s.url,
        s.bytes as f64 / 1024.0,
        per,
        s.samples,
        s.retries,
        s.dropped,
        s.rejected,
        s.unsent
    )?;
    if s.sent < s.windows
        && let Some(err) = &s.last_error
    {
        writeln!(e, "profile: push: warning: the last failure: {err}")?;
    }
    Ok(())
}
