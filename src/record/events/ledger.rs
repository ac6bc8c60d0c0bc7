//! The handler's ledger: each thread's CPU accounting (sample weights, `[unsampled]`
//! remainders, exits as the kernel reports them) and the CPU time the written samples
//! stand for.

use super::EventHandler;
use crate::record::accounting::Accounting;

/// Per-thread CPU accounting, and what the written samples stand for.
pub(in crate::record) struct Ledger {
    /// Sample weights and `[unsampled]` remainders.
    pub acct: Accounting,
    /// CPU time the written samples' stacks stand for.
    pub sampled_ns: u64,
    /// `[unsampled]` samples written at live windows' cuts, and the time they hold.
    pub window_unsampled: (u64, u64),
}

impl EventHandler {
    /// The per-thread CPU accounting.
    pub(in crate::record) fn accounting(&self) -> &Accounting {
        &self.ledger.acct
    }

    /// Puts the accounting of the opened events in place, once they are attached.
    pub(in crate::record) fn set_accounting(&mut self, acct: Accounting) {
        self.ledger.acct = acct;
    }

    /// Gives the accounting a thread's exit as the kernel reported it (and with
    /// `--off-cpu`, its run-queue delay); false when the thread is not known (yet).
    pub(in crate::record) fn thread_exited(
        &mut self,
        tid: u32,
        tgid: Option<u32>,
        cpu_ns: u64,
        run_delay_ns: u64,
    ) -> bool {
        let known = self.ledger.acct.thread_exit(tid, tgid, cpu_ns);
        if known && let Some(o) = self.off_cpu.as_mut() {
            o.delay_at_exit(tid, run_delay_ns);
        }
        known
    }

    /// The kernel reported that thread `tid` exited with `cpu_ns` of CPU, perhaps
    /// before its records are handled (`Accounting::exit_reported`).
    pub(in crate::record) fn exit_reported(&mut self, tid: u32, tgid: Option<u32>, cpu_ns: u64) {
        self.ledger.acct.exit_reported(tid, tgid, cpu_ns);
    }

    /// The recorder gave event `id` a new sampling `period` at `time`
    /// (`Accounting::period_set`).
    pub(in crate::record) fn period_set(&mut self, id: u64, time: u64, period: u64) {
        self.ledger.acct.period_set(id, time, period);
    }

    /// The exit reported for `tid` was taken, or forgotten.
    pub(in crate::record) fn forget_exit(&mut self, tid: u32) {
        self.ledger.acct.forget_exit(tid);
    }

    /// Sampling ended at `end_ns`: records past it count as at the end.
    pub(in crate::record) fn sampling_ended(&mut self, end_ns: u64) {
        self.ledger.acct.set_end(end_ns);
        if let Some(o) = self.off_cpu.as_mut() {
            let from = o.tracker.window.map_or(0, |w| w.0);
            o.tracker.window = Some((from, end_ns));
        }
    }
}
