//! Sample weights without counts in the samples (the default, docs/accounting.md
//! "Weights without counts"): each sample weighs the period it reports, but never so
//! much that its thread's samples pass the thread's own clock as the kernel gives it
//! when the sample is handled. The kernel's cheap context switch between the target's
//! threads swaps their perf contexts, and with them the running sampling timer, so a
//! period one thread began can fire in another: that thread's samples would then weigh
//! more than it ran. Capping at its clock keeps the invariant the totals rely on: a
//! thread's samples and its `[unsampled]` remainder add up to its own clock, the
//! remainder never negative.

use super::Accounting;

impl Accounting {
    /// The weight of a sample of `tid` that reports `period` and carries no count:
    /// the period, less whatever would take the thread's samples (and the `[unsampled]`
    /// time live windows gave it) past its clock now. None when nothing is left under
    /// the clock, or the clock cannot be known (a thread gone whose exit the kernel has
    /// not reported yet): the sample is left out and its time is the thread's
    /// `[unsampled]`.
    ///
    /// The clock is read (from `/proc`, a few microseconds) only when the last one
    /// read would not hold the sample: the samples are handled a round (up to some
    /// hundred milliseconds) after they were taken, and the clock has grown since.
    #[allow(clippy::too_many_arguments)] // the fields of one sample, as `sample` has them
    pub(super) fn capped(
        &mut self,
        pid: u32,
        tid: u32,
        id: u64,
        period: u64,
        time: u64,
        cpu: u32,
    ) -> Option<u64> {
        let (claimed, credit) = self
            .threads
            .get(&tid)
            .map_or((0, 0), |t| (t.sampled + t.emitted, t.credit));
        let room = |clock: u64| (clock + credit).saturating_sub(claimed);
        let known = self.clock_seen.get(&tid).copied();
        let clock = match known {
            Some(c) if room(c) >= period => c,
            _ => {
                let now = self.clock_now(pid, tid)?;
                let now = now.max(known.unwrap_or(0));
                self.clock_seen.insert(tid, now);
                now
            }
        };
        let weight = period.min(room(clock));
        if weight < period {
            self.capped_ns += period - weight;
        }
        if weight == 0 {
            return None;
        }
        Some(self.thread(pid, tid, id, time, cpu).add_sampled(weight))
    }

    /// Thread `tid`'s clock over the recording so far: at its exit if the kernel
    /// reported it, else as `/proc` gives it now, less its clock when its events were
    /// opened for a thread found at attach. None when not known.
    fn clock_now(&self, pid: u32, tid: u32) -> Option<u64> {
        let clock = self.kernel_clock(pid, tid)?;
        let start = match self.started.get(&tid) {
            Some(&start) => start?,
            None => 0,
        };
        Some(clock.saturating_sub(start))
    }

    /// CPU time the samples reported beyond their threads' clocks, taken off their
    /// weights ([`Self::capped`]), nanoseconds.
    pub(in crate::record) fn capped_ns(&self) -> u64 {
        self.capped_ns
    }
}
