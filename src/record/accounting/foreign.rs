//! Samples whose count cannot be their thread's: the first count of an event
//! inherited into a thread above the thread's whole CPU time (its clock at exit, as
//! the kernel reported it, or as the kernel gives it now) is another thread's
//! (docs/accounting.md, "A count that is not its thread's"), and the exits the kernel
//! reported before their threads' records were handled, which give those clocks.

use super::{Accounting, thread_cpu_ns};

/// How far the first count of a thread's event may exceed the thread's clock before
/// the sample is taken for another thread's ([`Accounting::foreign`]): the counts of
/// a thread's per-CPU events exceed its clock by up to a tenth of a millisecond.
const FOREIGN_SLACK_NS: u64 = 1_000_000;

/// Reads a thread's clock (by pid and tid) as the kernel gives it now:
/// [`thread_cpu_ns`], or a stand-in in tests.
#[derive(Debug, Clone, Copy)]
pub(super) struct ClockReader(pub(super) fn(u32, u32) -> Option<u64>);

impl Default for ClockReader {
    fn default() -> ClockReader {
        ClockReader(thread_cpu_ns)
    }
}

impl Accounting {
    /// Thread `tid`'s clock as the kernel gives it: at its exit if it reported it,
    /// else as `/proc` gives it now, else as taskstats reported it (for a thread of
    /// `pid`). None when not known.
    pub(super) fn kernel_clock(&self, pid: u32, tid: u32) -> Option<u64> {
        self.exit_clock
            .get(&tid)
            .map(|e| e.0)
            .or_else(|| (self.read_clock.0)(pid, tid))
            .or_else(|| {
                let &(tgid, ns) = self.reported.get(&tid)?;
                tgid.is_none_or(|p| p == pid).then_some(ns)
            })
    }

    /// The kernel reported that thread `tid` (of `tgid`, if it said) exited with
    /// `ns` of CPU, before its records were handled: its clock then bounds the counts
    /// of its samples ([`Self::foreign`]) until [`Self::thread_exit`] takes it.
    pub(in crate::record) fn exit_reported(&mut self, tid: u32, tgid: Option<u32>, ns: u64) {
        // A clock of 0 says nothing (the thread ended between two updates of it).
        if ns > 0 {
            self.reported.insert(tid, (tgid, ns));
        }
    }

    /// The exit reported for `tid` was taken, or forgotten.
    pub(in crate::record) fn forget_exit(&mut self, tid: u32) {
        self.reported.remove(&tid);
    }

    /// Whether `count`, of the first sample of event `id` in thread `tid` (counts on,
    /// not `--off-cpu`), cannot be the thread's: an event inherited into the thread
    /// counts more than the thread's whole CPU time (its
    /// clock at exit, else as the kernel gives it now) less what its samples already
    /// weigh, by more than [`FOREIGN_SLACK_NS`]. The kernel can let a thread's
    /// sampling event run on into another thread it switches to (seen as a 2 ms thread
    /// sampled once with a count of 8.5 ms, about one period, on Linux 6.18 under
    /// load: the event's count and period were the thread's that ran before); such a
    /// sample's weight says nothing of its thread, so it is left out and its thread's
    /// time stays `[unsampled]`. A thread that ended before its sample is handled has
    /// its clock from the exit the kernel reported ([`Self::exit_reported`]). Only
    /// first samples are checked (one read of `/proc` per thread and CPU): later ones
    /// are weighed from the first.
    pub(super) fn foreign(&self, pid: u32, tid: u32, id: u64, count: u64) -> bool {
        if self.owners.get(&id) == Some(&tid) || self.started.contains_key(&tid) {
            return false;
        }
        let clock = self.kernel_clock(pid, tid);
        let sampled = self.threads.get(&tid).map_or(0, |t| t.sampled);
        clock.is_some_and(|c| count > c.saturating_sub(sampled) + FOREIGN_SLACK_NS)
    }
}
