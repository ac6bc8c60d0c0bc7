//! Off-CPU intervals from context switches (`record --off-cpu`).
//!
//! Per thread and CPU, two `context-switches` software events, both sampled at
//! switch-out in the switched-out thread's context:
//!
//! - the **state event**, period 1, with `attr.context_switch`: its PERF_RECORD_SWITCH
//!   records (cheap: header and sample id) mark every switch out and in, the out ones
//!   flagged PERF_RECORD_MISC_SWITCH_OUT_PREEMPT when the task was still runnable; its
//!   samples carry the user registers alone (the blocking site: user IP and SP): a
//!   kernel callchain at every switch-out was the largest cost per switch. In
//!   frame-pointer mode its samples carry the whole callchain, kernel and user.
//! - the **stack event** (dwarf mode), in frequency mode at [`STACKS_HZ`]: the user
//!   stack copy and the kernel callchain (which names the wait), unwound like a CPU
//!   sample's, at a rate the kernel bounds.
//!
//! [`Tracker`] pairs them per thread: the samples wait for the SWITCH-out that
//! follows them (same scheduler call), the SWITCH-out opens an interval, the next
//! SWITCH-in closes it. So every interval's start, duration and state are exact:
//! `runnable` when preempted, else what its kernel frames name
//! (`crate::profile::classify`), or, for a switch-out the stack event did not sample,
//! what they last named at the same blocking site. Its stack is its own when the stack event sampled
//! that switch-out, else the last stack the same thread had at the same blocking site
//! (state, user IP and SP), else none. An interval with a stack weighs its duration;
//! reports spread the time of a thread's unstacked intervals of a state over its
//! stacked ones of the same state (docs/off-cpu.md), so state totals stay exact.

use std::collections::{HashMap, HashSet};

use crate::format::{Frame, FrameKind, ThreadState};
use crate::profile::classify;
use crate::symbolize::kernel::KernelSymbols;

/// Switch-out stacks per second per stack event (thread and CPU) at most: the bound
/// on user stack copies. A thread that switches less often gets a stack copy for
/// every interval.
pub(crate) const STACKS_HZ: u64 = 1000;

/// The off-CPU part of the event handler: which samples are which, how to name
/// kernel frames, and the intervals being paired.
#[derive(Default)]
pub(crate) struct OffCpuRecorder {
    state_ids: HashSet<u64>,
    stack_ids: HashSet<u64>,
    /// Kernel symbols to classify blocked states with (None: everything blocked is
    /// `other`).
    pub kallsyms: Option<KernelSymbols>,
    pub tracker: Tracker,
    /// When every event was attached (CLOCK_MONOTONIC).
    pub attached_ns: u64,
    /// The wake-up and switch-in events' ids and where their samples name the thread
    /// (None: no wake-up events, runnable is known after preemptions only).
    pub wakeups: Option<super::wakeups::TraceSamples>,
    /// Wake-ups of threads outside the recording (let through by the filter), since
    /// the filter was last made.
    pub stray_wakeups: u64,
    /// Why there are no wake-up events, when there are none.
    pub no_wakeups: Option<String>,
    /// The kernel's run-queue delay (schedstat) of each thread alive at the start, by
    /// tid, read then (with its pid): to check runnable time against.
    pub delay_at_start: HashMap<u32, (u32, u64)>,
    /// Runnable time against the kernel's run-queue delay, at exits and the end.
    pub check: check::RunnableChecker,
}

/// What a sample of the off-CPU events is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SwitchSample {
    State,
    Stack,
    /// `sched:sched_wakeup`, on a CPU.
    Wakeup,
}

impl OffCpuRecorder {
    pub(crate) fn new(
        ids: (Vec<u64>, Vec<u64>),
        kallsyms: Option<KernelSymbols>,
    ) -> OffCpuRecorder {
        OffCpuRecorder {
            state_ids: ids.0.into_iter().collect(),
            stack_ids: ids.1.into_iter().collect(),
            kallsyms,
            ..OffCpuRecorder::default()
        }
    }

    /// Which off-CPU event a sample with this id came from, if any.
    pub(crate) fn kind(&self, id: u64) -> Option<SwitchSample> {
        if self.state_ids.contains(&id) {
            Some(SwitchSample::State)
        } else if self.stack_ids.contains(&id) {
            Some(SwitchSample::Stack)
        } else if self.wakeups.as_ref().is_some_and(|w| w.contains(id)) {
            Some(SwitchSample::Wakeup)
        } else {
            None
        }
    }

    /// A sample of the per-CPU tracepoints (event `id`), its raw fields, at `time`:
    /// the woken thread is runnable, or the thread switched in stops waiting.
    pub(crate) fn wakeup(&mut self, id: u64, raw: &[u8], time: u64) {
        use super::wakeups::Traced;
        let ours = match self.wakeups.as_ref().and_then(|w| w.read(id, raw)) {
            Some(Traced::Woken(tid)) => self.tracker.wakeup(tid, time),
            Some(Traced::SwitchedIn(tid)) => self.tracker.switching_in(tid, time),
            None => return,
        };
        if !ours {
            self.stray_wakeups += 1;
        }
    }

    /// Where `tid`'s runnable time began to count in the recording, and its run-queue
    /// delay then; None for a thread neither there at the start nor born since.
    fn counted_from(&self, tid: u32) -> Option<(u64, u64)> {
        let from = self.attached_ns.max(self.tracker.window.map_or(0, |w| w.0));
        match (self.delay_at_start.get(&tid), self.tracker.born.get(&tid)) {
            (Some(&(_, delay)), _) => Some((from, delay)),
            (None, Some(&born)) => Some((born.max(from), 0)),
            (None, None) => None,
        }
    }

    /// Thread `tid` exited at `time` (EXIT record): its runnable total is final, to
    /// be checked against the kernel's figure at its exit.
    pub(crate) fn thread_exit(&mut self, tid: u32, time: u64) {
        let ours = self.tracker.runnable.get(&tid).copied().unwrap_or(0);
        if let Some((from, base)) = self.counted_from(tid) {
            self.check
                .exited(tid, ours, base, time.saturating_sub(from));
        }
        self.tracker.thread_exit(tid);
    }

    /// The kernel's run-queue delay of `tid` at its exit (taskstats).
    pub(crate) fn delay_at_exit(&mut self, tid: u32, delay: u64) {
        let ours = self.counted_from(tid).is_some() && self.tracker.seen.contains(&tid);
        self.check.delay_at_exit(tid, delay, ours);
    }

    /// Checks the threads alive at `end` against their run-queue delay now (`now`
    /// reads it for a pid and tid), and the exited ones whose figure never came.
    pub(crate) fn check_at_end(&mut self, end: u64, now: impl Fn(u32, u32) -> Option<u64>) {
        let mut alive: Vec<(u32, u32)> = self
            .delay_at_start
            .iter()
            .map(|(&tid, &(pid, _))| (pid, tid))
            .chain(self.tracker.born.keys().map(|&t| (t, t)))
            .collect();
        alive.sort_unstable();
        alive.dedup();
        for (pid, tid) in alive {
            if self.check.exited_already(tid) {
                continue;
            }
            let (Some((from, base)), Some(delay)) = (self.counted_from(tid), now(pid, tid)) else {
                continue;
            };
            let ours = self.tracker.runnable.get(&tid).copied().unwrap_or(0);
            self.check.alive_at_end(
                tid,
                ours,
                delay.saturating_sub(base),
                end.saturating_sub(from),
            );
        }
        self.check.finish_exited(|tid| now(tid, tid));
    }

    /// The blocked state interned kernel frames (leaf first) name.
    pub(crate) fn classify_frames(&self, frames: &[Frame]) -> ThreadState {
        let Some(k) = &self.kallsyms else {
            return ThreadState::Other;
        };
        classify::from_kernel(
            frames
                .iter()
                .filter(|f| f.kind == FrameKind::Kernel)
                .filter_map(|f| k.lookup(f.addr)),
        )
    }
}

mod tracker;

pub(crate) use tracker::Tracker;

pub(crate) mod check;
