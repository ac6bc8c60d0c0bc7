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
    if let Some(f) = args.push_format {
        o.format = f.into();
    }
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
    let (headers, warnings) = headers(&args.push_header)?;
    for w in warnings {
        eprintln!("profile: warning: {}", profile::text::terminal_message(&w));
    }
    o.headers = headers;
    o.verbose = !args.quiet;
    o.ca = args.push_ca.clone();
    if let Some(n) = args.push_buffer {
        o.buffer = n as usize;
    }
    Ok(Some(Pusher::start(&o)?))
}

/// HTTP headers as (name, value) pairs.
type Headers = Vec<(String, String)>;

/// `--push-header` values: `Name: value`, or `@FILE` with one such line per line
/// (blank lines and `#` comments skipped), with warnings for a FILE others can read
/// or change. Errors and warnings never hold a value.
fn headers(given: &[String]) -> anyhow::Result<(Headers, Vec<String>)> {
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    for h in given {
        match h.strip_prefix('@') {
            Some(path) => {
                let file = std::fs::File::open(path)
                    .with_context(|| format!("--push-header @{path}: cannot read it"))?;
                if let Some(w) = file.metadata().ok().and_then(|m| exposed(path, &m)) {
                    warnings.push(w);
                }
                let text = std::io::read_to_string(file)
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
    Ok((out, warnings))
}

/// Why a header file's tokens are exposed: readable by its group or every user, or
/// owned by another user (who could change what is sent). None when it is private.
fn exposed(path: &str, meta: &std::fs::Metadata) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let mode = meta.mode() & 0o777;
    let mut why = Vec::new();
    if mode & 0o004 != 0 {
        why.push(format!("is readable by every user (mode {mode:o})"));
    } else if mode & 0o040 != 0 {
        why.push(format!("is readable by its group (mode {mode:o})"));
    }
    let me = profile::record::effective_uid();
    if meta.uid() != me {
        why.push(format!("belongs to another user (uid {})", meta.uid()));
    }
    (!why.is_empty()).then(|| {
        format!(
            "--push-header @{path} {}: the credentials in it are exposed; chmod 600 it",
            why.join(" and ")
        )
    })
}

/// The default application name: the target's process name (its `comm`), the
/// launched command's file name, or `system` with `-a`.
fn process_name(target: &Target) -> String {
    let comm = |id: u32| {
        std::fs::read(format!("/proc/{id}/comm"))
            .map(|s| String::from_utf8_lossy(&s).trim().to_owned())
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
    if s.rejected_in_part > 0 {
        writeln!(
            e,
            "profile: push: warning: the receiver took every sent window but rejected {} profile{} of them (partial success)",
            s.rejected_in_part,
            if s.rejected_in_part == 1 { "" } else { "s" }
        )?;
    }
    if s.sent < s.windows
        && let Some(err) = &s.last_error
    {
        writeln!(e, "profile: push: warning: the last failure: {err}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// Issue 26: a world-readable header file was used without a word.
    #[test]
    fn a_header_file_others_can_read_is_warned_about() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("headers");
        std::fs::write(&path, "Authorization: Bearer t0k3n\n").unwrap();
        let arg = format!("@{}", path.display());
        for (mode, want) in [
            (0o644, Some("readable by every user (mode 644)")),
            (0o640, Some("readable by its group (mode 640)")),
            (0o600, None),
        ] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let (h, warnings) = headers(std::slice::from_ref(&arg)).unwrap();
            assert_eq!(h, [("Authorization".into(), "Bearer t0k3n".into())]);
            match want {
                Some(w) => {
                    assert_eq!(warnings.len(), 1, "{warnings:?}");
                    assert!(warnings[0].contains(w), "{warnings:?}");
                    assert!(warnings[0].contains("chmod 600"), "{warnings:?}");
                    assert!(!warnings[0].contains("t0k3n"));
                }
                None => assert!(warnings.is_empty(), "{warnings:?}"),
            }
        }
        // Another user's file: they choose what is sent.
        std::os::unix::fs::chown(&path, Some(65534), None).unwrap();
        let (_, warnings) = headers(std::slice::from_ref(&arg)).unwrap();
        assert!(
            warnings[0].contains("belongs to another user (uid 65534)"),
            "{warnings:?}"
        );
    }
}
