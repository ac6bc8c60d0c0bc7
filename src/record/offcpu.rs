//! Off-CPU intervals from context switches (`record --off-cpu`).
//!
//! Two kernel sources, both per thread: the SWITCH records of `attr.context_switch`
//! (cheap, one per switch out and in, the out ones flagged
//! PERF_RECORD_MISC_SWITCH_OUT_PREEMPT when the task was still runnable), and the
//! samples of the `context-switches` software event, taken at switch-out in the
//! switched-out thread's context (its kernel callchain, user registers and stack),
//! at a rate the kernel bounds (frequency mode), so each sample stands for the
//! `period` switch-outs since the previous one. [`Tracker`] pairs them per thread:
//! a stack sample waits for the SWITCH-out that follows it, the SWITCH-out opens an
//! interval, the next SWITCH-in of that thread closes it.
//!
//! Every interval is written, stack or not; its state is `runnable` when the
//! SWITCH-out says preempted, else the state its stack's kernel frames name
//! (`crate::profile::classify`), else (no stack taken for it) the state of the
//! thread's last classified block. A stacked interval's weight is its duration
//! times its sample's period (each switch-out was sampled with probability about
//! 1/period, so this is the Horvitz-Thompson estimate of the time its stack stands
//! for); unstacked ones weigh 0. Reports scale the weights per thread and class
//! (runnable, blocked) so the class totals equal the measured durations; see
//! docs/off-cpu.md for the rule and its error.

use std::collections::HashMap;

use crate::format::{OffCpu, StackId, ThreadState};

/// A stack sample waiting for its SWITCH-out record.
#[derive(Debug, Clone, Copy)]
struct Pending {
    time: u64,
    stack: Option<StackId>,
    /// The blocked state its kernel frames name (used unless preempted).
    state: ThreadState,
    period: u64,
}

/// An interval that has begun (SWITCH-out seen) and not ended.
#[derive(Debug, Clone, Copy)]
struct Open {
    time: u64,
    pid: u32,
    cpu: u32,
    state: ThreadState,
    stack: Option<StackId>,
    period: u64,
}

/// Pairs switch-out samples and SWITCH records into off-CPU intervals, per thread.
#[derive(Debug, Default)]
pub struct Tracker {
    pending: HashMap<u32, Pending>,
    open: HashMap<u32, Open>,
    /// Each thread's last classified blocked state, for blocks without a stack.
    last_blocked: HashMap<u32, ThreadState>,
    /// SWITCH-outs that were followed by another SWITCH-out of the same thread (the
    /// SWITCH-in between was lost): the first interval's end is unknown, so it is
    /// not written.
    pub unmatched: u64,
    /// Intervals written.
    pub intervals: u64,
    /// Intervals written with a stack.
    pub stacked: u64,
}

/// A stack sample waits this long at most for its SWITCH-out (they are taken in the
/// same scheduler call, microseconds apart).
const PAIRING_WINDOW_NS: u64 = 10_000_000;

impl Tracker {
    /// A `context-switches` sample of `tid` at `time`: where it is leaving the CPU.
    pub fn stack_sample(
        &mut self,
        tid: u32,
        time: u64,
        stack: Option<StackId>,
        state: ThreadState,
        period: u64,
    ) {
        self.pending.insert(
            tid,
            Pending {
                time,
                stack,
                state,
                period: period.max(1),
            },
        );
    }

    /// A SWITCH-out record of `tid`.
    pub fn switch_out(&mut self, pid: u32, tid: u32, cpu: u32, time: u64, preempted: bool) {
        let pending = self
            .pending
            .remove(&tid)
            .filter(|p| p.time <= time && time - p.time <= PAIRING_WINDOW_NS);
        let state = if preempted {
            ThreadState::Runnable
        } else {
            match pending {
                // A blocked task whose kernel frames look like a preemption (a
                // cond_resched in a blocking path) is counted as `other`, never as
                // runnable: the flag is the authority.
                Some(p) if p.state == ThreadState::Runnable => ThreadState::Other,
                Some(p) => {
                    self.last_blocked.insert(tid, p.state);
                    p.state
                }
                None => self
                    .last_blocked
                    .get(&tid)
                    .copied()
                    .unwrap_or(ThreadState::Other),
            }
        };
        let open = Open {
            time,
            pid,
            cpu,
            state,
            stack: pending.and_then(|p| p.stack),
            period: pending.map_or(0, |p| p.period),
        };
        if self.open.insert(tid, open).is_some() {
            self.unmatched += 1;
        }
    }

    /// A SWITCH-in record of `tid`: ends its open interval, if any.
    pub fn switch_in(&mut self, tid: u32, time: u64) -> Option<OffCpu> {
        let o = self.open.remove(&tid)?;
        Some(self.close(tid, o, time))
    }

    /// The thread ended: nothing of it stays open.
    pub fn thread_exit(&mut self, tid: u32) {
        self.pending.remove(&tid);
        self.open.remove(&tid);
        self.last_blocked.remove(&tid);
    }

    /// Closes every interval still open at the end of the recording (threads still
    /// blocked then), in time order.
    pub fn finish(&mut self, end: u64) -> Vec<OffCpu> {
        let mut open: Vec<(u32, Open)> = self.open.drain().collect();
        open.sort_by_key(|(tid, o)| (o.time, *tid));
        open.into_iter()
            .map(|(tid, o)| self.close(tid, o, end.max(o.time)))
            .collect()
    }

    fn close(&mut self, tid: u32, o: Open, end: u64) -> OffCpu {
        let duration = end.saturating_sub(o.time);
        self.intervals += 1;
        if o.stack.is_some() {
            self.stacked += 1;
        }
        OffCpu {
            time: o.time,
            pid: o.pid,
            tid,
            cpu: o.cpu,
            duration,
            state: o.state,
            weight: if o.period > 0 {
                duration.saturating_mul(o.period)
            } else {
                0
            },
            stack: o.stack,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_and_its_switch_records_make_one_interval() {
        let mut t = Tracker::default();
        t.stack_sample(7, 1_000, Some(3), ThreadState::Lock, 1);
        t.switch_out(1, 7, 0, 1_010, false);
        let o = t.switch_in(7, 51_010).unwrap();
        assert_eq!(
            o,
            OffCpu {
                time: 1_010,
                pid: 1,
                tid: 7,
                cpu: 0,
                duration: 50_000,
                state: ThreadState::Lock,
                weight: 50_000,
                stack: Some(3),
            }
        );
        assert_eq!(
            t.switch_in(7, 60_000),
            None,
            "a switch-in alone opens nothing"
        );
    }

    #[test]
    fn the_preempt_flag_makes_it_runnable_whatever_the_stack() {
        let mut t = Tracker::default();
        t.stack_sample(7, 100, Some(1), ThreadState::Io, 1);
        t.switch_out(1, 7, 0, 100, true);
        assert_eq!(t.switch_in(7, 300).unwrap().state, ThreadState::Runnable);
        // Not preempted, but the kernel frames look like a preemption: other.
        t.stack_sample(7, 400, Some(1), ThreadState::Runnable, 1);
        t.switch_out(1, 7, 0, 400, false);
        assert_eq!(t.switch_in(7, 500).unwrap().state, ThreadState::Other);
    }

    #[test]
    fn unsampled_blocks_carry_the_last_state_and_no_weight() {
        let mut t = Tracker::default();
        t.stack_sample(7, 100, Some(1), ThreadState::Sleep, 4);
        t.switch_out(1, 7, 0, 100, false);
        let first = t.switch_in(7, 1_100).unwrap();
        assert_eq!(first.weight, 4_000, "duration x period");
        t.switch_out(1, 7, 0, 2_000, false);
        let second = t.switch_in(7, 2_500).unwrap();
        assert_eq!(
            (second.state, second.weight, second.stack),
            (ThreadState::Sleep, 0, None)
        );
        assert_eq!((t.intervals, t.stacked), (2, 1));
    }

    #[test]
    fn a_stale_sample_is_not_paired_and_a_lost_switch_in_is_counted() {
        let mut t = Tracker::default();
        t.stack_sample(7, 100, Some(1), ThreadState::Lock, 1);
        t.switch_out(1, 7, 0, 100 + PAIRING_WINDOW_NS + 1, false);
        t.switch_out(1, 7, 0, 200 + PAIRING_WINDOW_NS, false);
        assert_eq!(t.unmatched, 1);
        let o = t.switch_in(7, 300 + PAIRING_WINDOW_NS).unwrap();
        assert_eq!((o.stack, o.state), (None, ThreadState::Other));
    }

    #[test]
    fn threads_still_blocked_at_the_end_are_closed_there() {
        let mut t = Tracker::default();
        t.switch_out(1, 8, 1, 500, false);
        t.switch_out(1, 7, 0, 100, true);
        let rest = t.finish(1_000);
        assert_eq!(rest.len(), 2);
        assert_eq!((rest[0].tid, rest[0].duration), (7, 900));
        assert_eq!((rest[1].tid, rest[1].duration), (8, 500));
        t.switch_out(1, 9, 0, 100, false);
        t.thread_exit(9);
        assert!(t.finish(2_000).is_empty());
    }
}
