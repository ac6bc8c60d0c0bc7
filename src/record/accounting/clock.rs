//! Each thread's own clock (`sum_exec_runtime`) over the recording, where the kernel
//! gives it: the total its samples and `[unsampled]` remainder add up to, and, with
//! `--off-cpu`, the figure a report splits a thread's time by beside the stretches the
//! SWITCH records give (docs/off-cpu.md, "The kernel's split of running and runnable").

use std::collections::HashMap;

use super::{Accounting, EndCounts, ThreadAccount, overlap};
use crate::format::ThreadClock;

impl Accounting {
    /// Each thread's CPU time during the recording from its own clock, where the
    /// kernel gives it and it is plausible against `counted` (its counts or
    /// stretches). With SWITCH records: the clock less what the thread ran outside
    /// the recording (the stretches tell), so that its states can add up to its life
    /// in the recording. The clock has the context switches' own time, which the
    /// counts miss.
    pub(super) fn clocks(
        &self,
        end: &EndCounts,
        end_time: u64,
        counted: &HashMap<u32, u64>,
    ) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        for (&tid, t) in &self.threads {
            let Some(clock) = self.clock_total(tid, t, end) else {
                continue;
            };
            let clock = if self.switches.is_some() {
                let (lo, hi) = self.window();
                // Its stretch still running at the end: its part outside the window.
                let (mut outside, mut before) = t.runs.on_cpu_since.map_or((0, 0), |s| {
                    let end = end_time.max(s);
                    (
                        end - s - overlap(s, end, lo, hi),
                        end.min(lo).saturating_sub(s),
                    )
                });
                outside += t.runs.outside;
                before += t.runs.before;
                // A clock read at the start has none of the time before it.
                if self.from_begin.contains(&tid) {
                    outside = outside.saturating_sub(before);
                }
                clock.saturating_sub(outside)
            } else {
                clock
            };
            // The counts of a thread's per-CPU events can exceed the clock (by up to
            // a tenth of a millisecond for a 2 ms thread under contention). An exit
            // the kernel did not name the process of could be another thread that
            // reused the id: taken only if near the counts.
            let named = self.exit_clock.get(&tid).is_none_or(|e| e.1);
            let plausible = named
                || counted.get(&tid).is_none_or(|&n| {
                    clock >= n / 2 && clock <= n.saturating_add(n / 2 + 50_000_000)
                });
            if plausible {
                out.push((tid, clock));
            }
        }
        out
    }

    /// The threads' clocks for the recording's summary, of every thread `keep`
    /// accepts whose clock is known:
    /// - with `--off-cpu`, each one's clock and its stretches (`ran_ns`): a report
    ///   gives running the clock and moves the difference to or from runnable;
    /// - otherwise, with exact accounting, the threads whose samples (with the
    ///   `[unsampled]` time live windows gave them) weigh more than their clock, and
    ///   what they weigh (`ran_ns`): readers scale such a thread's samples by
    ///   `clock_ns / ran_ns`, so that its total is its clock and its samples keep
    ///   their shares. That happens without counts in samples, where the kernel's
    ///   context swap moves periods between the target's threads, and with them too
    ///   where the hypervisor steals CPU time: task-clock counts it, the thread's
    ///   clock does not.
    ///
    /// Empty without exact accounting.
    pub(in crate::record) fn summary_clocks(
        &self,
        end: &EndCounts,
        end_time: u64,
        keep: impl Fn(u32, u32) -> bool,
    ) -> Vec<ThreadClock> {
        let switches = self.switches.is_some();
        if !switches && !self.exact {
            return Vec::new();
        }
        let counted = self.counted(end, end_time);
        let mut out: Vec<ThreadClock> = self
            .clocks(end, end_time, &counted)
            .into_iter()
            .filter_map(|(tid, clock)| {
                let t = self.threads.get(&tid)?;
                let ran = if switches {
                    counted.get(&tid).copied().unwrap_or(0)
                } else {
                    t.sampled + t.window.emitted
                };
                let named = switches || ran > clock;
                (named && keep(t.pid, tid)).then_some(ThreadClock {
                    pid: t.pid,
                    tid,
                    clock_ns: clock,
                    ran_ns: ran,
                })
            })
            .collect();
        out.sort_by_key(|c| (c.pid, c.tid));
        out
    }

    /// A thread's CPU time during the recording from its own clock: at its exit, or
    /// at the end if it still runs; less its clock at attach for a thread found then.
    ///
    /// A thread whose clock was read at the end with no EXIT record handled was alive
    /// then: an exit the kernel reports later (while the rings are emptied, which
    /// takes seconds after a recorder that fell behind) is after the end, and its
    /// clock has what the thread ran since, which no record takes off (issue 28:
    /// pgbench backends, whose clients ended meanwhile, 15 to 176% over their clocks).
    fn clock_total(&self, tid: u32, t: &ThreadAccount, end: &EndCounts) -> Option<u64> {
        let at_end = match (self.exit_clock.get(&tid), end.alive.get(&tid)) {
            (_, Some(&ns)) if !t.exit.gone => ns,
            (Some(&(ns, _)), _) => ns,
            (None, Some(&ns)) if !t.exit.exited_with_counts && !t.exit.exited => ns,
            (None, _) => return None,
        };
        let start = match self.started.get(&tid) {
            Some(&start) => start?,
            None => 0,
        };
        Some(at_end.saturating_sub(start))
    }

    /// The threads `keep` accepts whose exit the kernel reported with a clock of 0
    /// and that have no count of their own either: their CPU time (less than a tick
    /// each) is in no thread's total.
    pub(in crate::record) fn unclocked(&self, keep: impl Fn(u32, u32) -> bool) -> u64 {
        self.unclocked
            .iter()
            .filter(|tid| {
                self.threads
                    .get(tid)
                    .is_some_and(|t| !t.exit.exited_with_counts && keep(t.pid, **tid))
            })
            .count() as u64
    }
}
