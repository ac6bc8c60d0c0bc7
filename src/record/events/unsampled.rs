//! The `[unsampled]` samples: each kept thread's CPU time that no sample stands for,
//! written as one sample whose stack is that marker alone, at the end of the
//! recording and at each live window's cut.

use std::collections::HashMap;

use super::EventHandler;
use crate::format::{Frame, Sample, ThreadClock, Truncation};
use crate::record::accounting::{EndCounts, Remainder};

impl EventHandler {
    /// Writes each kept thread's `[unsampled]` remainder as one sample whose stack is
    /// that marker alone; returns how many `[unsampled]` samples the recording holds
    /// (live windows' ones included) and the CPU time they hold. Threads no sample
    /// stands for at all, each with less than `short_below` (a sample period) of CPU
    /// time, are counted ([`super::counters::Remainders::short_threads`]).
    pub(in crate::record) fn write_unsampled(
        &mut self,
        end: &EndCounts,
        end_time: u64,
        short_below: u64,
    ) -> (u64, u64) {
        let keep = &self.keep;
        let remainders = self
            .ledger
            .acct
            .remainders(end, end_time, |pid, tid| keep.thread(pid, tid));
        for r in remainders
            .iter()
            .filter(|r| r.no_sample && r.ns < short_below)
        {
            self.counters.remainders.short_threads += 1;
            self.counters.remainders.short_ns += r.ns;
        }
        self.counters.remainders.unclocked_threads =
            self.ledger.acct.unclocked(|pid, tid| keep.thread(pid, tid));
        for r in &remainders {
            let total = r.ns + self.ledger.acct.weighed(r.tid);
            if total >= 10 * short_below && r.ns * 2 > total {
                self.counters.remainders.undersampled_threads += 1;
                self.counters.remainders.undersampled_ns += r.ns;
            }
        }
        let (count, ns) = self.write_remainders(remainders);
        (
            count + self.ledger.window_unsampled.0,
            ns + self.ledger.window_unsampled.1,
        )
    }

    /// The summary's thread clocks: with `--off-cpu`, each kept thread's own clock
    /// over the recording beside its stretches between switches, where the kernel
    /// gave the clock; otherwise the kept threads whose samples weigh more than their
    /// clock, which readers scale to it.
    pub(in crate::record) fn thread_clocks(
        &self,
        end: &EndCounts,
        end_time: u64,
    ) -> Vec<ThreadClock> {
        let keep = &self.keep;
        self.ledger
            .acct
            .summary_clocks(end, end_time, |pid, tid| keep.thread(pid, tid))
    }

    /// At a live window's cut (`end_time`, everything before it handled): writes the
    /// `[unsampled]` time each kept thread accrued since the previous cut, from
    /// `alive`, the clocks of the threads still running read at `end_time`.
    pub(in crate::record) fn write_window_unsampled(
        &mut self,
        alive: &HashMap<u32, u64>,
        end_time: u64,
    ) {
        let keep = &self.keep;
        let remainders = self
            .ledger
            .acct
            .window_remainders(alive, end_time, |pid, tid| keep.thread(pid, tid));
        let (count, ns) = self.write_remainders(remainders);
        self.ledger.window_unsampled.0 += count;
        self.ledger.window_unsampled.1 += ns;
    }

    fn write_remainders(&mut self, remainders: Vec<Remainder>) -> (u64, u64) {
        if remainders.is_empty() {
            return (0, 0);
        }
        let count = remainders.len() as u64;
        let stack = self
            .writer
            .intern_stack(&[Frame::marker(Truncation::Unsampled)]);
        let mut total = 0;
        for r in remainders {
            total += r.ns;
            self.counters.pids.insert(r.pid);
            self.writer.sample(&Sample {
                time: r.time,
                pid: r.pid,
                tid: r.tid,
                cpu: r.cpu,
                weight: r.ns,
                stack,
            });
        }
        (count, total)
    }
}
