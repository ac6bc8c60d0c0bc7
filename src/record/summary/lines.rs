//! What `profile record` says at the end: the lines of its summary, each whole
//! (`profile: ...`, `profile: note: ...`, `profile: warning: ...`), decided here from
//! the [`RecordSummary`] so that the policy (which hint, when) is tested without a
//! terminal. Text from outside (paths, process names, notes) is escaped for one.

use super::RecordSummary;

impl RecordSummary {
    /// The summary's lines, in the order they are printed.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.totals(&mut out);
        self.coverage(&mut out);
        if let Some(o) = &self.off_cpu {
            self.off_cpu_lines(o, &mut out);
        }
        self.notes(&mut out);
        out
    }

    /// What was recorded, in what, and the CPU time the samples cover.
    fn totals(&self, out: &mut Vec<String>) {
        let s = self;
        let per_sample = if s.samples > 0 {
            s.bytes as f64 / s.samples as f64
        } else {
            0.0
        };
        out.push(format!("profile: {} from {} in {:.2} s, {} lost, {} throttled ({}) -> {} ({:.0} KiB, {:.0} B/sample)",
        crate::output::plural(s.samples as usize, "sample", "samples"),
        crate::output::plural(s.threads, "thread", "threads"),
        s.duration.as_secs_f64(),
        s.lost,
        s.throttled,
        s.stop_reason.describe(),
        s.output.as_deref().map_or_else(
            || "no file".into(),
            // The caller's own path: escaped, never cut (it is to be copied).
            |p| crate::text::terminal(&p.display().to_string(), usize::MAX).into_owned()
        ),
        s.bytes as f64 / 1024.0,
        per_sample,
    ));
        out.push(format!(
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
        ));
        let sym = &s.symbols;
        if sym.named + sym.unnamed > 0 {
            out.push(format!(
                "profile: named {} of {} unique frames in {:.0} ms",
                sym.named,
                sym.named + sym.unnamed,
                sym.time.as_secs_f64() * 1e3
            ));
        }
        if s.exact {
            let total = s.sampled_ns + s.unsampled_ns;
            if total > 0 {
                out.push(format!("profile: the target used {:.3} s of CPU (each thread's own {}); stacks cover {:.1}% of it, the rest is [unsampled] (one sample per {:.2} ms of a thread's CPU)",
                total as f64 / 1e9,
                if s.thread_clocks { "clock" } else { "count" },
                s.sampled_ns as f64 * 100.0 / total as f64,
                s.period_ns as f64 / 1e6
            ));
            }
            if let Some(w) = s.sample_weights {
                let scaled = if s.scaled_ns > 0 {
                    format!(
                        " ({:.1} ms of samples past their threads' own clocks scaled to them: \
                         the hypervisor's steal counts in a period and not in the clock, and \
                         a period can begin in another thread)",
                        s.scaled_ns as f64 / 1e6
                    )
                } else {
                    String::new()
                };
                out.push(format!("profile: {}{scaled}", w.describe()));
            }
        } else if s.cpu_time_ns > 0 {
            let sampled = s.samples * s.period_ns;
            out.push(format!("profile: the target used {:.3} s of CPU; samples cover {:.1}% of it (one sample per {:.2} ms of a thread's CPU); per-thread totals are estimates (samples x period)",
            s.cpu_time_ns as f64 / 1e9,
            (sampled as f64 * 100.0 / s.cpu_time_ns as f64).min(100.0),
            s.period_ns as f64 / 1e6
        ));
        }
    }

    /// Whether the samples stand for the target's CPU time, and what was left out.
    fn coverage(&self, out: &mut Vec<String>) {
        let s = self;
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
        // When the work is in processes or threads that were left out (or in the
        // target's children that were running before attach: an idle pre-fork
        // master's workers), that is the whole explanation (said below): a higher -F
        // would not help.
        let left_out =
            s.other_process_samples + s.other_thread_samples + s.existing_descendants.len() as u64;
        // Threads that lived less than a period of CPU time are never sampled, however
        // long the recording: say so when they hold a tenth of the time or more.
        let (short, short_ns) = s.short_threads;
        if used > 0 && left_out == 0 && short >= 2 && short_ns * 10 >= used {
            out.push(format!("profile: hint: {} used less CPU than one sample period ({:.2} ms) each and have no stack: {:.3} s, {:.1}% of the CPU. A thread is first sampled after a whole period of its own CPU time, so short-lived threads (one per request or task) are missed however long the recording; a higher -F samples shorter ones, and `profile record -a` samples each CPU by its own clock and sees them all (then `report --service NAME`)",
                crate::output::plural(short as usize, "thread", "threads"),
                s.period_ns as f64 / 1e6,
                short_ns as f64 / 1e9,
                short_ns as f64 * 100.0 / used as f64,
            ));
        } else if let (n @ 1.., ns) = s.undersampled_threads
            && s.sample_weights == Some(crate::format::SampleWeights::Periods)
            && ns * 20 >= used
        {
            out.push(format!("profile: hint: stacks cover less than half of the CPU time of {} (each of ten sample periods or more): {:.3} s [unsampled], {:.1}% of the CPU. The kernel's cheap context switch between a process's threads hands the running sample period to the thread switched to, so a thread that keeps waiting for threads it just started (spawn and join) rarely completes one; `record --exact-weights` samples each thread by its own clock, at the cost of a slower context switch (docs/accounting.md)",
                crate::output::plural(n as usize, "thread", "threads"),
                ns as f64 / 1e9,
                ns as f64 * 100.0 / used as f64,
            ));
        } else if used > 0 && covered * 2 < used && left_out == 0 {
            out.push("profile: hint: the threads used less CPU than one sample period each; sample more often with a higher -F, or record for longer".to_owned());
        }
        if s.unclocked_threads > 0 {
            out.push(format!("profile: note: {} ended within a scheduler tick of their last switch, before the kernel brought their clocks up to date: the kernel's exit reports say 0, and their CPU time (under a tick each) is in no thread's total; `record --exact-weights` counts it",
                crate::output::plural(s.unclocked_threads as usize, "thread", "threads"),
            ));
        }
        if s.lost > 0 {
            out.push(format!("profile: warning: the kernel dropped {} samples (ring buffer full); try a larger --mmap-pages or a lower -F",
            s.lost
        ));
        }
        if s.dropped > 0 {
            out.push(format!(
                "profile: warning: {} kernel records could not be decoded and were skipped",
                s.dropped
            ));
        }
        if s.other_process_samples > 0 {
            out.push(format!("profile: note: left out {} of processes the target started; pass --children to keep them",
            crate::output::plural(s.other_process_samples as usize, "sample", "samples")
        ));
        }
        if !s.existing_descendants.is_empty() {
            out.push(format!("profile: note: {} the target started before attach ({}) not recorded; pass --children=all to record the whole process tree",
            crate::output::plural(s.existing_descendants.len(), "process", "processes"),
            crate::text::by_name(&s.existing_descendants)
        ));
        }
        if s.other_thread_samples > 0 {
            out.push(format!("profile: note: left out {} of threads the chosen threads started (-t keeps only the threads given); use -p PID for every thread of the process",
            crate::output::plural(s.other_thread_samples as usize, "sample", "samples")
        ));
        }
        if s.foreign_counts > 0 {
            out.push(format!("profile: note: left out {} whose weight would have passed their thread's own clock (the hypervisor's steal, a period begun in another thread, or a count that was another thread's); that time is [unsampled]",
            crate::output::plural(s.foreign_counts as usize, "sample", "samples")
        ));
        }
    }

    /// The notes and warnings: what limited the kernel side, the names and the
    /// runtime readers.
    fn notes(&self, out: &mut Vec<String>) {
        let s = self;
        if s.filter_full > 0 {
            out.push(format!(
                "profile: note: the thread filter was full ({} threads at once): {} {} created meanwhile kept the sampling period drawn at {} creation, so samples of work with a steady rhythm may fall in step with it (docs/accounting.md)",
                crate::sys::FILTER_CAPACITY,
                s.filter_full,
                if s.filter_full == 1 { "thread" } else { "threads" },
                if s.filter_full == 1 { "its" } else { "their" },
            ));
        }
        if let Some(note) = &s.kernel_note {
            out.push(format!(
                "profile: note: {}",
                crate::text::terminal_message(note)
            ));
        }
        if let Some(note) = &s.target_note {
            out.push(format!(
                "profile: note: {}",
                crate::text::terminal_message(note)
            ));
        }
        if s.samples == 0 && s.cpu_time_ns == 0 {
            out.push(
                "profile: note: no samples: the target used no CPU time while it was recorded"
                    .to_owned(),
            );
        }
        for note in &s.symbols.perf_map_notes {
            out.push(format!(
                "profile: warning: {}",
                crate::text::terminal_message(note)
            ));
        }
        for note in &s.symbols.runtime_notes {
            out.push(format!(
                "profile: note: {}",
                crate::text::terminal_message(note)
            ));
        }
        if s.symbols.debuginfod_fetched > 0 {
            out.push(format!("profile: note: debug info of {} modules downloaded from debuginfod (DEBUGINFOD_URLS)",
            s.symbols.debuginfod_fetched
        ));
        }
        for note in &s.symbols.debuginfod_notes {
            out.push(format!(
                "profile: note: {}",
                crate::text::terminal_message(note)
            ));
        }
        if s.samples > 0
            && let Some(path) = &s.output
        {
            out.push(format!(
                "profile: next: profile report -i {} --flamegraph profile.svg",
                crate::text::terminal(&path.display().to_string(), usize::MAX)
            ));
        }
    }

    /// The off-CPU part: intervals, stacks, wake-ups and the runnable check.
    fn off_cpu_lines(&self, o: &super::OffCpuSummary, out: &mut Vec<String>) {
        let s = self;
        out.push(format!("profile: off-CPU: {} intervals, {} with a stack copy, {} with their blocking site's stack{} ({:.1}% of the time off the CPU){}",
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
        ));
        if o.named_by_site + o.site_unnamed > 0 {
            let unknown = if o.site_unnamed > 0 {
                format!(
                    ", {} at a site not sampled yet, shown as `other`",
                    o.site_unnamed
                )
            } else {
                String::new()
            };
            out.push(format!(
                    "profile: off-CPU: {} named by the state last sampled at their blocking site (switch-outs beyond the stack event's rate){unknown}",
                    crate::output::plural((o.named_by_site + o.site_unnamed) as usize, "wait", "waits"),
                ));
        }
        if o.unnamed > 0 {
            out.push(format!(
                "profile: off-CPU: {} lost the sample that names their state (the kernel dropped records): shown as `other`",
                crate::output::plural(o.unnamed as usize, "wait", "waits")
            ));
        }
        if let Some(c) = &o.runnable_check {
            let checked = match (c.threads, c.at_exit) {
                (n, 0) => format!("{n} threads alive at the end"),
                (0, x) => format!("{x} threads at their exit"),
                (n, x) => format!("{n} threads alive at the end and {x} at their exit"),
            };
            let farthest = format!(
                "farthest off tid {}, {} against {}",
                c.tid,
                crate::output::top::human_time(c.ours_ns),
                crate::output::top::human_time(c.kernel_ns)
            );
            if c.within {
                out.push(format!("profile: off-CPU: runnable time of the {checked} against the kernel's run-queue delay (schedstat): {farthest}"
                ));
            } else {
                out.push(format!("profile: warning: off-CPU: runnable time of {} of the {checked} is off the kernel's run-queue delay (schedstat) by more than 5% of their life or 30 ms ({farthest}){}: states of those threads are not exact",
                    c.off,
                    if s.lost > 0 {
                        "; records were lost"
                    } else {
                        ""
                    }
                ));
            }
        }
        if let Some(why) = &o.no_wakeups {
            out.push(format!("profile: note: runnable time counts only preemptions, not the wait for a CPU after a wake-up: {why}"
            ));
        }
        if o.unclassified {
            out.push("profile: note: off-CPU states other than runnable are not classified (shown as `other`): switch-out stacks need kernel sampling (root, CAP_PERFMON or perf_event_paranoid <= 1); each thread's runnable and blocked time is still exact".to_owned());
        }
    }
}
#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::{RecordSummary, StopReason};

    /// A recording of one thread that used 1 s of CPU, all of it under stacks.
    fn summary() -> RecordSummary {
        RecordSummary {
            output: Some("out.prof".into()),
            samples: 1000,
            lost: 0,
            throttled: 0,
            dropped: 0,
            threads: 1,
            processes: 1,
            duration: Duration::from_secs(2),
            bytes: 100 << 10,
            stop_reason: StopReason::TargetExited,
            exit_code: Some(0),
            event_fds: 2,
            ring_bytes: 2 << 20,
            rings: 2,
            cpu_time_ns: 1_000_000_000,
            period_ns: 1_000_000,
            exact: true,
            sample_weights: Some(crate::format::SampleWeights::Periods),
            scaled_ns: 0,
            thread_clocks: true,
            sampled_ns: 1_000_000_000,
            unsampled_ns: 0,
            truncated_stacks: 0,
            other_process_samples: 0,
            existing_descendants: Vec::new(),
            other_thread_samples: 0,
            foreign_counts: 0,
            short_threads: (0, 0),
            undersampled_threads: (0, 0),
            unclocked_threads: 0,
            filter_full: 0,
            kernel_note: None,
            target_note: None,
            symbols: Default::default(),
            off_cpu: None,
        }
    }

    fn has(lines: &[String], text: &str) -> bool {
        lines.iter().any(|l| l.contains(text))
    }

    #[test]
    fn a_clean_recording_says_what_it_holds_and_what_next() {
        let l = summary().lines();
        assert!(l[0].starts_with("profile: 1000 samples from 1 thread in 2.00 s"));
        assert!(has(&l, "each thread's own clock); stacks cover 100.0%"));
        assert!(has(&l, "profile: next: profile report -i out.prof"));
        assert!(
            !l.iter()
                .any(|l| l.contains("warning") || l.contains("hint"))
        );
        assert!(l.iter().all(|l| l.starts_with("profile: ")));
    }

    #[test]
    fn the_frequency_hint_only_when_samples_miss_most_and_nothing_was_left_out() {
        let mut s = summary();
        s.sampled_ns = 300_000_000;
        s.unsampled_ns = 700_000_000;
        assert!(has(&s.lines(), "profile: hint: the threads used less CPU"));
        // Work in processes left out is the whole explanation: no hint then.
        s.other_process_samples = 5;
        let l = s.lines();
        assert!(!has(&l, "hint:"));
        assert!(has(
            &l,
            "left out 5 samples of processes the target started"
        ));
        // An idle master attached without its running workers: the note on the
        // workers, not a higher -F.
        s.other_process_samples = 0;
        s.existing_descendants = vec![(41, "worker".into()), (42, "worker".into())];
        let l = s.lines();
        assert!(!has(&l, "hint:"), "{l:?}");
        assert!(has(&l, "pass --children=all"), "{l:?}");
    }

    #[test]
    fn short_lived_threads_get_their_own_hint_not_record_for_longer() {
        let mut s = summary();
        s.sampled_ns = 200_000_000;
        s.unsampled_ns = 800_000_000;
        // 1,000 threads of 0.5 ms each, none sampled at a 1 ms period.
        s.short_threads = (1000, 500_000_000);
        let l = s.lines();
        assert!(
            has(
                &l,
                "profile: hint: 1000 threads used less CPU than one sample period (1.00 ms) each and have no stack: 0.500 s, 50.0% of the CPU"
            ),
            "{l:?}"
        );
        assert!(has(&l, "`profile record -a` samples each CPU"));
        assert!(!has(&l, "record for longer"), "{l:?}");
        // A few short threads holding little of the time: the general hint.
        s.short_threads = (3, 30_000_000);
        let l = s.lines();
        assert!(
            has(&l, "record for longer") && !has(&l, "3 threads"),
            "{l:?}"
        );
        // Short threads holding a tenth of the time get the hint though the stacks
        // cover most of it.
        let mut s = summary();
        s.sampled_ns = 850_000_000;
        s.unsampled_ns = 150_000_000;
        s.short_threads = (40, 120_000_000);
        assert!(has(&s.lines(), "40 threads used less CPU"));
    }

    #[test]
    fn threads_their_switches_left_unsampled_get_the_exact_weights_hint() {
        let mut s = summary();
        s.sample_weights = Some(crate::format::SampleWeights::Periods);
        s.sampled_ns = 700_000_000;
        s.unsampled_ns = 300_000_000;
        s.undersampled_threads = (1, 250_000_000);
        let l = s.lines();
        assert!(
            has(
                &l,
                "profile: hint: stacks cover less than half of the CPU time of 1 thread (each of ten sample periods or more): 0.250 s [unsampled], 25.0% of the CPU"
            ),
            "{l:?}"
        );
        assert!(has(&l, "`record --exact-weights`"), "{l:?}");
        // Counts in samples already: nothing to suggest.
        s.sample_weights = Some(crate::format::SampleWeights::Counts);
        assert!(!has(&s.lines(), "--exact-weights`"), "{:?}", s.lines());
        // A small share of the CPU is not worth a hint.
        s.sample_weights = Some(crate::format::SampleWeights::Periods);
        s.undersampled_threads = (1, 20_000_000);
        assert!(!has(&s.lines(), "--exact-weights`"), "{:?}", s.lines());
    }

    #[test]
    fn threads_without_a_clock_at_exit_are_said() {
        let mut s = summary();
        s.unclocked_threads = 4999;
        let l = s.lines();
        assert!(
            has(
                &l,
                "profile: note: 4999 threads ended within a scheduler tick"
            ) && has(&l, "`record --exact-weights` counts it"),
            "{l:?}"
        );
    }

    #[test]
    fn losses_are_warnings_and_no_samples_is_said() {
        let mut s = summary();
        s.lost = 7;
        s.dropped = 2;
        let l = s.lines();
        assert!(has(&l, "profile: warning: the kernel dropped 7 samples"));
        assert!(has(
            &l,
            "profile: warning: 2 kernel records could not be decoded"
        ));
        let mut s = summary();
        s.samples = 0;
        s.cpu_time_ns = 0;
        s.sampled_ns = 0;
        let l = s.lines();
        assert!(has(&l, "profile: note: no samples"));
        assert!(!has(&l, "next:"));
    }

    #[test]
    fn a_full_thread_filter_is_said_once() {
        let l = summary().lines();
        assert!(!has(&l, "thread filter"));
        let mut s = summary();
        s.filter_full = 3;
        let l = s.lines();
        let said: Vec<&String> = l.iter().filter(|x| x.contains("thread filter")).collect();
        assert_eq!(said.len(), 1, "{l:?}");
        assert!(
            said[0].contains("full (16384 threads at once): 3 threads created meanwhile"),
            "{said:?}"
        );
    }

    #[test]
    fn names_and_notes_from_outside_are_escaped() {
        let mut s = summary();
        s.existing_descendants = vec![
            (10, "w\x1b[2Jorker".into()),
            (11, "w\x1b[2Jorker".into()),
            (12, "db".into()),
        ];
        s.kernel_note = Some("bad\x07bell".into());
        let l = s.lines();
        assert!(l.iter().all(|l| !l.contains('\x1b') && !l.contains('\x07')));
        assert!(
            has(&l, "3 processes the target started before attach"),
            "{l:?}"
        );
        assert!(has(&l, "×2, db"), "{l:?}");
    }
}
