//! `profile record`: run the recorder and print its summary.

use std::io::{self, Write};
use std::process::ExitCode;

use crate::cli;

pub(crate) fn record(args: &cli::RecordArgs) -> anyhow::Result<ExitCode> {
    let opts = args.to_options().map_err(anyhow::Error::msg)?;
    if args.user && opts.run_as.is_none() {
        anyhow::bail!(
            "--user runs the command as the user who ran sudo, but SUDO_UID/SUDO_GID are not set; \
             run `sudo profile record --user -- COMMAND`, or leave --user out"
        );
    }
    if !args.quiet
        && !args.command.is_empty()
        && !args.user
        && let Some(caller) = profile::record::RunAs::sudo_caller()
        && caller.uid != 0
    {
        eprintln!(
            "profile: note: the command runs as root; add --user to run it as {} (uid {})",
            if caller.name.is_empty() {
                "the sudo caller"
            } else {
                &caller.name
            },
            caller.uid
        );
    }
    if !args.quiet {
        for (k, v) in &opts.launch_env {
            eprintln!(
                "profile: the command runs with {}={} (--jvm-flags)",
                k.to_string_lossy(),
                v.to_string_lossy()
            );
        }
    }
    let pusher = super::push::start(args, &opts.target)?;
    let (s, pushed) = match pusher {
        None => (profile::record::record(&opts)?, None),
        Some(mut p) => {
            let interval = p.interval();
            let s = profile::record::record_live(&opts, &mut p);
            (s?, Some((p.finish(), interval)))
        }
    };
    if let Some((stats, interval)) = &pushed {
        // Refused windows and losses are worth saying even with -q.
        if !args.quiet || stats.sent < stats.windows {
            super::push::print_summary(&mut io::stderr().lock(), stats, *interval)?;
        }
    }
    if !args.quiet {
        let mut e = io::stderr().lock();
        for line in s.lines() {
            writeln!(e, "{line}")?;
        }
    }
    Ok(match s.exit_code {
        Some(code) => ExitCode::from(code.clamp(0, 255) as u8),
        None => ExitCode::SUCCESS,
    })
}
