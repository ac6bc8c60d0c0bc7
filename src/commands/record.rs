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
        let per_sample = if s.samples > 0 {
            s.bytes as f64 / s.samples as f64
        } else {
            0.0
        };
        let mut e = io::stderr().lock();
        writeln!(
            e,
            "profile: {} from {} in {:.2} s, {} lost, {} throttled ({}) -> {} ({:.0} KiB, {:.0} B/sample)",
            profile::output::plural(s.samples as usize, "sample", "samples"),
            profile::output::plural(s.threads, "thread", "threads"),
            s.duration.as_secs_f64(),
            s.lost,
            s.throttled,
            s.stop_reason.describe(),
            s.output.as_deref().map_or_else(
                || "no file".into(),
                // The caller's own path: escaped, never cut (it is to be copied).
                |p| profile::text::terminal(&p.display().to_string(), usize::MAX).into_owned()
            ),
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
        if s.exact {
            let total = s.sampled_ns + s.unsampled_ns;
            if total > 0 {
                writeln!(
                    e,
                    "profile: the target used {:.3} s of CPU (each thread's own {}); stacks cover {:.1}% of it, the rest is [unsampled] (one sample per {:.2} ms of a thread's CPU)",
                    total as f64 / 1e9,
                    if s.thread_clocks { "clock" } else { "count" },
                    s.sampled_ns as f64 * 100.0 / total as f64,
                    s.period_ns as f64 / 1e6
                )?;
            }
        } else if s.cpu_time_ns > 0 {
            let sampled = s.samples * s.period_ns;
            writeln!(
                e,
                "profile: the target used {:.3} s of CPU; samples cover {:.1}% of it (one sample per {:.2} ms of a thread's CPU); per-thread totals are estimates (samples x period)",
                s.cpu_time_ns as f64 / 1e9,
                (sampled as f64 * 100.0 / s.cpu_time_ns as f64).min(100.0),
                s.period_ns as f64 / 1e6
            )?;
        }
        let covered = if s.exact {
            s.sampled_ns
        } else {
            s.samples * s.period_ns
        };
        let used = if s.exact {
            s.sampled_ns + s.unsampled_ns
        } else {
            s.cpu_time_ns
        };
        // When the work is in processes or threads that were left out, that is the
        // whole explanation (said below): a higher -F would not help.
        let left_out = s.other_process_samples + s.other_thread_samples;
        if used > 0 && covered * 2 < used && left_out == 0 {
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
                "profile: note: left out {} of processes the target started; pass --children to keep them",
                profile::output::plural(s.other_process_samples as usize, "sample", "samples")
            )?;
        }
        if !s.existing_descendants.is_empty() {
            writeln!(
                e,
                "profile: note: {} the target started before attach ({}) not recorded; pass --children=all to record the whole process tree",
                profile::output::plural(s.existing_descendants.len(), "process", "processes"),
                by_name(&s.existing_descendants)
            )?;
        }
        if s.other_thread_samples > 0 {
            writeln!(
                e,
                "profile: note: left out {} of threads the chosen threads started (-t keeps only the threads given); use -p PID for every thread of the process",
                profile::output::plural(s.other_thread_samples as usize, "sample", "samples")
            )?;
        }
        if let Some(o) = &s.off_cpu {
            writeln!(
                e,
                "profile: off-CPU: {} intervals, {} with a stack copy, {} with their blocking site's stack{} ({:.1}% of the time off the CPU){}",
                o.intervals,
                o.stacked,
                o.borrowed,
                if o.read_from_proc > 0 {
                    format!(", {} read from /proc while they lasted", o.read_from_proc)
                } else {
                    String::new()
                },
                100.0 * o.stacked_ns as f64 / o.off_cpu_ns.max(1) as f64,
                if o.unmatched > 0 {
                    format!(
                        ", {} left out (their switch-in record was lost)",
                        o.unmatched
                    )
                } else {
                    String::new()
                }
            )?;
            if let Some(c) = &o.runnable_check {
                let checked = match (c.threads, c.at_exit) {
                    (n, 0) => format!("{n} threads alive at the end"),
                    (0, x) => format!("{x} threads at their exit"),
                    (n, x) => format!("{n} threads alive at the end and {x} at their exit"),
                };
                let farthest = format!(
                    "farthest off tid {}, {} against {}",
                    c.tid,
                    profile::output::top::human_time(c.ours_ns),
                    profile::output::top::human_time(c.kernel_ns)
                );
                if c.within {
                    writeln!(
                        e,
                        "profile: off-CPU: runnable time of the {checked} against the kernel's run-queue delay (schedstat): {farthest}"
                    )?;
                } else {
                    writeln!(
                        e,
                        "profile: warning: off-CPU: runnable time of {} of the {checked} is off the kernel's run-queue delay (schedstat) by more than 5% of their life or 30 ms ({farthest}){}: states of those threads are not exact",
                        c.off,
                        if s.lost > 0 {
                            "; records were lost"
                        } else {
                            ""
                        }
                    )?;
                }
            }
            if let Some(why) = &o.no_wakeups {
                writeln!(
                    e,
                    "profile: note: runnable time counts only preemptions, not the wait for a CPU after a wake-up: {why}"
                )?;
            }
            if o.unclassified {
                writeln!(
                    e,
                    "profile: note: off-CPU states other than runnable are not classified (shown as `other`): switch-out stacks need kernel sampling (root, CAP_PERFMON or perf_event_paranoid <= 1); each thread's runnable and blocked time is still exact"
                )?;
            }
        }
        if let Some(note) = &s.kernel_note {
            writeln!(
                e,
                "profile: note: {}",
                profile::text::terminal_message(note)
            )?;
        }
        if let Some(note) = &s.target_note {
            writeln!(
                e,
                "profile: note: {}",
                profile::text::terminal_message(note)
            )?;
        }
        if s.samples == 0 && s.cpu_time_ns == 0 {
            writeln!(
                e,
                "profile: note: no samples: the target used no CPU time while it was recorded"
            )?;
        }
        for note in &s.symbols.perf_map_notes {
            writeln!(
                e,
                "profile: warning: {}",
                profile::text::terminal_message(note)
            )?;
        }
        for note in &s.symbols.python_notes {
            writeln!(
                e,
                "profile: note: {}",
                profile::text::terminal_message(note)
            )?;
        }
        if s.symbols.debuginfod_fetched > 0 {
            writeln!(
                e,
                "profile: note: debug info of {} modules downloaded from debuginfod (DEBUGINFOD_URLS)",
                s.symbols.debuginfod_fetched
            )?;
        }
        for note in &s.symbols.debuginfod_notes {
            writeln!(
                e,
                "profile: note: {}",
                profile::text::terminal_message(note)
            )?;
        }
        if s.samples > 0
            && let Some(path) = &s.output
        {
            writeln!(
                e,
                "profile: next: profile report -i {} --flamegraph profile.svg",
                profile::text::terminal(&path.display().to_string(), usize::MAX)
            )?;
        }
    }
    Ok(match s.exit_code {
        Some(code) => ExitCode::from(code.clamp(0, 255) as u8),
        None => ExitCode::SUCCESS,
    })
}

/// Processes in words by name, the most frequent first: `postgres ×5, bash`.
fn by_name(processes: &[(u32, String)]) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for (_, name) in processes {
        match counts.iter_mut().find(|(n, _)| *n == name.as_str()) {
            Some(c) => c.1 += 1,
            None => counts.push((name, 1)),
        }
    }
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    const SHOWN: usize = 4;
    let mut parts: Vec<String> = counts
        .iter()
        .take(SHOWN)
        .map(|&(n, k)| {
            let n = profile::text::terminal_line(n);
            if k == 1 {
                n.into_owned()
            } else {
                format!("{n} ×{k}")
            }
        })
        .collect();
    if counts.len() > SHOWN {
        parts.push(format!("{} more", counts.len() - SHOWN));
    }
    parts.join(", ")
}
