//! The recorder's check of runnable time against the kernel's own account.
//!
//! The kernel keeps each thread's run-queue delay (`sched_info.run_delay`: the time
//! it spent on a run queue, waiting for a CPU; schedstat's second field). A thread's
//! runnable time in the recording must match the growth of that figure over the same
//! time: from the attach (its figure read then) or its creation (zero then) to its
//! exit (the figure the kernel's taskstats exit message carries, or /proc while the
//! thread is still there) or the end of the recording (/proc, read just before the
//! events are disabled). A thread off by more than 5% of its life in the recording, or
//! 30 ms when that is more, is counted, and the summary warns: lost records, a
//! wake-up the filter let by, a clock that disagrees would otherwise go unseen.

use std::collections::{HashMap, HashSet};

/// The tolerance: 5% of a thread's life in the recording, at least this.
const SLACK_NS: u64 = 30_000_000;

/// A thread that exited, waiting for the kernel's figure at its exit.
#[derive(Debug, Clone, Copy)]
struct Exited {
    /// Its runnable time in the recording.
    ours: u64,
    /// Its run-queue delay where the recording began to count it.
    base: u64,
    life: u64,
}

/// Runnable time against the kernel's run-queue delay, thread by thread.
#[derive(Debug, Default)]
pub(crate) struct RunnableChecker {
    exited: HashMap<u32, Exited>,
    delays_at_exit: HashMap<u32, u64>,
    checked: HashSet<u32>,
    /// Threads compared at their exit, and at the end.
    pub at_exit: usize,
    pub at_end: usize,
    /// Threads off by more than the tolerance.
    pub off: usize,
    /// The thread farthest off: tid, ours, the kernel's.
    pub worst: Option<(u32, u64, u64)>,
}

impl RunnableChecker {
    /// Thread `tid` exited with `ours` runnable ns in the recording, counted from
    /// where its run-queue delay was `base`, after `life` ns in the recording.
    pub(crate) fn exited(&mut self, tid: u32, ours: u64, base: u64, life: u64) {
        let e = Exited { ours, base, life };
        match self.delays_at_exit.remove(&tid) {
            Some(delay) => self.compare_exited(tid, e, delay),
            None => {
                self.exited.insert(tid, e);
            }
        }
    }

    /// The kernel's run-queue delay of `tid` at its exit (taskstats), which may come
    /// before or after its EXIT record is handled. `ours`: whether `tid` is a thread
    /// of the recording not yet handled as exited (else it is forgotten).
    pub(crate) fn delay_at_exit(&mut self, tid: u32, delay: u64, ours: bool) {
        match self.exited.remove(&tid) {
            Some(e) => self.compare_exited(tid, e, delay),
            None if ours => {
                self.delays_at_exit.insert(tid, delay);
            }
            None => {}
        }
    }

    /// Threads that exited and whose figure never came (no taskstats), read from
    /// /proc by `now` if it is still there.
    pub(crate) fn finish_exited(&mut self, now: impl Fn(u32) -> Option<u64>) {
        for (tid, e) in std::mem::take(&mut self.exited) {
            if let Some(delay) = now(tid) {
                self.compare_exited(tid, e, delay);
            }
        }
        self.delays_at_exit.clear();
    }

    /// Whether `tid` was compared already, or exited and waits for its figure.
    pub(crate) fn exited_already(&self, tid: u32) -> bool {
        self.checked.contains(&tid) || self.exited.contains_key(&tid)
    }

    fn compare_exited(&mut self, tid: u32, e: Exited, delay: u64) {
        self.at_exit += 1;
        self.compare(tid, e.ours, delay.saturating_sub(e.base), e.life);
    }

    /// A thread alive at the end: `ours` against the growth of its delay, `kernel`.
    pub(crate) fn alive_at_end(&mut self, tid: u32, ours: u64, kernel: u64, life: u64) {
        self.at_end += 1;
        self.compare(tid, ours, kernel, life);
    }

    fn compare(&mut self, tid: u32, ours: u64, kernel: u64, life: u64) {
        self.checked.insert(tid);
        let off = ours.abs_diff(kernel);
        if off > (life / 20).max(SLACK_NS) {
            self.off += 1;
        }
        if self.worst.is_none_or(|w| off > w.1.abs_diff(w.2)) {
            self.worst = Some((tid, ours, kernel));
        }
    }

    /// What the summary says, when any thread was compared.
    pub(crate) fn summary(&self) -> Option<crate::record::RunnableCheck> {
        let (tid, ours_ns, kernel_ns) = self.worst?;
        Some(crate::record::RunnableCheck {
            threads: self.at_end,
            at_exit: self.at_exit,
            off: self.off,
            within: self.off == 0,
            tid,
            ours_ns,
            kernel_ns,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_thread_off_by_more_than_its_tolerance_is_counted() {
        let mut c = RunnableChecker::default();
        // Exit record first, then the kernel's figure; 5% of 2 s is 100 ms.
        c.exited(7, 500 * MS, 40 * MS, 2000 * MS);
        assert_eq!(c.at_exit, 0, "waits for the kernel's figure");
        c.delay_at_exit(7, 620 * MS, true);
        // The figure first, then the exit: 300 ms against 150, a short life (30 ms).
        c.delay_at_exit(8, 150 * MS, true);
        c.exited(8, 300 * MS, 0, 100 * MS);
        // Not a thread of the recording: forgotten.
        c.delay_at_exit(9, 1, false);
        c.exited(9, 1, 0, 1);
        c.alive_at_end(10, 1000 * MS, 1020 * MS, 3000 * MS);
        let s = c.summary().unwrap();
        assert_eq!((s.at_exit, s.threads, s.off, s.within), (2, 1, 1, false));
        assert_eq!((s.tid, s.ours_ns, s.kernel_ns), (8, 300 * MS, 150 * MS));
        assert!(c.exited_already(7) && c.exited_already(9) && !c.exited_already(11));
    }

    #[test]
    fn within_five_percent_of_life_or_30_ms_is_agreement() {
        let mut c = RunnableChecker::default();
        c.alive_at_end(1, 129 * MS, 100 * MS, 200 * MS);
        c.exited(2, 0, 0, 10_000 * MS);
        c.delay_at_exit(2, 499 * MS, true);
        // Never a figure from taskstats: /proc, if the thread is still there.
        c.exited(3, 10 * MS, 5 * MS, 100 * MS);
        c.exited(4, 10 * MS, 5 * MS, 100 * MS);
        c.finish_exited(|tid| (tid == 3).then_some(20 * MS));
        let s = c.summary().unwrap();
        assert_eq!((s.at_exit, s.threads, s.off, s.within), (2, 1, 0, true));
        assert_eq!(s.tid, 2);
    }
}
