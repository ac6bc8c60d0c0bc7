//! The off-CPU intervals of each thread, from the recorder's switch records and
//! state samples: opened at a SWITCH-out with the state and stack the thread left in,
//! split at its wake-up, ended where the kernel picked it again (its `sched_switch`
//! sample, the switch-out of the thread it followed, or its SWITCH-in record).

use std::collections::{HashMap, HashSet};

use crate::format::{OffCpu, StackId, ThreadState};

/// A state sample waiting for its SWITCH-out record.
#[derive(Debug, Clone, Copy)]
struct StateSample {
    time: u64,
    /// The blocked state its kernel frames name (used unless preempted); None when
    /// it has none (dwarf mode: the stack event's samples carry them).
    state: Option<ThreadState>,
    /// Where in user space it blocked: user IP and SP (0, 0 when unknown).
    site: (u64, u64),
    /// Its whole stack (frame-pointer mode).
    stack: Option<StackId>,
}

/// A stack sample waiting for its SWITCH-out record: time, stack, the state its
/// kernel frames name, its site.
type StackSample = (u64, Option<StackId>, ThreadState, (u64, u64));

/// An interval that has begun (SWITCH-out seen) and not ended.
#[derive(Debug, Clone, Copy)]
struct Open {
    time: u64,
    pid: u32,
    cpu: u32,
    state: ThreadState,
    stack: Option<StackId>,
    /// When the kernel woke the thread (`sched:sched_wakeup`): from then on it was
    /// runnable, waiting for a CPU.
    woken: Option<u64>,
    /// Where in user space it blocked (user IP and SP; 0, 0 when unknown), and
    /// whether its stack was looked for in /proc already.
    site: (u64, u64),
    looked: bool,
}

/// What the tracker's intervals were, for the summary.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct IntervalCounts {
    /// SWITCH-outs that were followed by another SWITCH-out of the same thread (the
    /// SWITCH-in between was lost): the first interval's end is unknown, so it is
    /// not written.
    pub unmatched: u64,
    /// Blocked intervals whose switch-out sample was lost (ring full): their state is
    /// unknown, written as `other`.
    pub unnamed: u64,
    /// Blocked intervals whose own samples carried no kernel frames, named by the
    /// state kernel frames last named at their blocking site, and those whose site
    /// had none yet (written as `other`).
    pub named_by_site: u64,
    pub site_unnamed: u64,
    /// Intervals written.
    pub intervals: u64,
    /// Intervals written with their own stack, and with the stack of their site.
    pub stacked: u64,
    pub borrowed: u64,
    /// Intervals whose stack was read from /proc while they lasted.
    pub read_from_proc: u64,
    /// Blocked intervals split at their wake-up.
    pub woken: u64,
    /// Nanoseconds of the intervals written, and of those with a stack.
    pub off_cpu_ns: u64,
    pub stacked_ns: u64,
}

/// Pairs switch-out samples and SWITCH records into off-CPU intervals, per thread.
#[derive(Debug, Default)]
pub(crate) struct Tracker {
    states: HashMap<u32, StateSample>,
    stacks: HashMap<u32, StackSample>,
    open: HashMap<u32, Open>,
    /// Threads that were blocked when recording began (attach): an interval from the
    /// start, ended by their first SWITCH-in, or dropped by a SWITCH-out first (the
    /// thread was running after all).
    blocked_at_start: HashMap<u32, Open>,
    /// The last stack of each (thread, state, user IP, user SP).
    sites: HashMap<(u32, ThreadState, u64, u64), StackId>,
    /// The blocked state last named by kernel frames at each (thread, user IP, user
    /// SP): a switch-out sampled without them (dwarf mode's state samples) takes it.
    pub(super) site_states: HashMap<(u32, u64, u64), ThreadState>,
    /// Threads of the recording seen so far and not exited.
    pub(super) seen: HashSet<u32>,
    /// What the intervals written were, for the summary.
    pub counts: IntervalCounts,
    /// The recording: intervals are clipped to it (records of the events' first and
    /// last moments fall outside). None: no bounds.
    pub window: Option<(u64, u64)>,
    /// Runnable nanoseconds written per thread.
    pub runnable: HashMap<u32, u64>,
    /// Threads created during the recording, and when.
    pub born: HashMap<u32, u64>,
    /// When the kernel last began switching each thread in (`sched:sched_switch`),
    /// until its SWITCH-in record comes.
    switching: HashMap<u32, u64>,
    /// The last switch-out on each CPU, until a SWITCH-in there: the thread and when
    /// it left (its switch-out sample) and its SWITCH-out record's time. A thread of
    /// the recording switched in straight after was picked when it left.
    handoff: HashMap<u32, (u32, u64, u64)>,
}

/// A sample waits this long at most for its SWITCH-out (they are taken in the same
/// scheduler call, microseconds apart).
const PAIRING_WINDOW_NS: u64 = 10_000_000;

/// A SWITCH-in this soon after another thread's SWITCH-out on the same CPU is its
/// direct successor (the context switch and the scheduling-in of its events lie
/// between: microseconds).
const HANDOFF_WINDOW_NS: u64 = 100_000;

impl Tracker {
    /// A state sample of `tid` at `time`: why it is leaving the CPU and where.
    pub(crate) fn state_sample(
        &mut self,
        tid: u32,
        time: u64,
        state: Option<ThreadState>,
        site: (u64, u64),
        stack: Option<StackId>,
    ) {
        self.states.insert(
            tid,
            StateSample {
                time,
                state,
                site,
                stack,
            },
        );
    }

    /// A stack sample of `tid` at `time`: the stack it is leaving the CPU with, and
    /// the blocked state its kernel frames name.
    pub(crate) fn stack_sample(
        &mut self,
        tid: u32,
        time: u64,
        stack: Option<StackId>,
        state: ThreadState,
        site: (u64, u64),
    ) {
        self.stacks.insert(tid, (time, stack, state, site));
    }

    /// `tid` was off the CPU in `state` when recording began at `start` (attach),
    /// with `stack` (read from /proc) if known.
    pub(crate) fn blocked_at_start(
        &mut self,
        pid: u32,
        tid: u32,
        start: u64,
        state: ThreadState,
        stack: Option<StackId>,
    ) {
        self.blocked_at_start.insert(
            tid,
            Open {
                time: start,
                pid,
                cpu: 0,
                state,
                stack,
                woken: None,
                site: (0, 0),
                looked: true,
            },
        );
        self.seen.insert(tid);
    }

    /// `tid` of `pid` was created at `time` (FORK record): runnable until it first
    /// runs.
    pub(crate) fn new_thread(&mut self, pid: u32, tid: u32, time: u64) {
        self.seen.insert(tid);
        self.born.insert(tid, time);
        self.open.entry(tid).or_insert(Open {
            time,
            pid,
            cpu: 0,
            state: ThreadState::Runnable,
            stack: None,
            woken: None,
            site: (0, 0),
            looked: true,
        });
    }

    /// The kernel woke `tid` at `time` (`sched:sched_wakeup`, in the waker's
    /// context): if it is blocked, the rest of its interval is runnable. Duplicates and
    /// wake-ups of a thread that is not blocked change nothing. Returns whether `tid`
    /// is a thread of the recording.
    pub(crate) fn wakeup(&mut self, tid: u32, time: u64) -> bool {
        let open = match self.open.get_mut(&tid) {
            Some(o) => Some(o),
            None => self.blocked_at_start.get_mut(&tid),
        };
        if let Some(o) = open
            && o.state != ThreadState::Runnable
            && o.woken.is_none()
            && time >= o.time
        {
            o.woken = Some(time);
        }
        self.seen.contains(&tid)
    }

    /// The kernel is switching `tid` in at `time` (`sched:sched_switch`, before the
    /// context switch): its wait ends here, not at the SWITCH-in record that follows
    /// the switch. Returns whether `tid` is a thread of the recording.
    pub(crate) fn switching_in(&mut self, tid: u32, time: u64) -> bool {
        let ours = self.seen.contains(&tid);
        if ours {
            self.switching.insert(tid, time);
        }
        ours
    }

    /// A SWITCH-out record of `tid`.
    pub(crate) fn switch_out(&mut self, pid: u32, tid: u32, cpu: u32, time: u64, preempted: bool) {
        self.blocked_at_start.remove(&tid);
        self.seen.insert(tid);
        let fresh = |t: u64| t <= time && time - t <= PAIRING_WINDOW_NS;
        let sample = self.states.remove(&tid).filter(|s| fresh(s.time));
        let stack_sample = self.stacks.remove(&tid).filter(|s| fresh(s.0));
        let own = stack_sample
            .and_then(|s| s.1)
            .or(sample.and_then(|s| s.stack));
        // When both events sample the same switch-out the kernel delivers the stack
        // event's sample only (they share one sample buffer in the scheduler's
        // software-event call); its kernel frames name the state then.
        let site = sample
            .map(|s| s.site)
            .or(stack_sample.map(|s| s.3))
            .unwrap_or((0, 0));
        let named = sample.and_then(|s| s.state).or(stack_sample.map(|s| s.2));
        let named = self.name_at_site(tid, site, named, sample.as_ref(), preempted);
        let state = self.state_named(named, preempted);
        let stack = self.site_stack((tid, state, site.0, site.1), own);
        self.counts.stacked += u64::from(own.is_some());
        // The thread left the CPU when its switch-out was sampled: the SWITCH-out
        // record comes after the samples (a callchain, perhaps a stack copy).
        let left = [sample.map(|s| s.time), stack_sample.map(|s| s.0)]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(time);
        let open = Open {
            time: left,
            pid,
            cpu,
            state,
            stack,
            woken: None,
            site,
            looked: false,
        };
        if self.open.insert(tid, open).is_some() {
            self.counts.unmatched += 1;
        }
        self.handoff.insert(cpu, (tid, left, time));
    }

    /// The state a switch-out at `site` (its kernel frames' two innermost
    /// addresses; (0, 0) when it has none) is `named` by its samples, learnt for the
    /// site or taken from it.
    fn name_at_site(
        &mut self,
        tid: u32,
        site: (u64, u64),
        mut named: Option<ThreadState>,
        sample: Option<&StateSample>,
        preempted: bool,
    ) -> Option<ThreadState> {
        if site != (0, 0) {
            let at = (tid, site.0, site.1);
            match named {
                // Learnt from a blocked switch-out's own kernel frames.
                Some(s) if !preempted && s != ThreadState::Runnable => {
                    self.site_states.insert(at, s);
                }
                Some(_) => {}
                // Sampled without kernel frames: the state last named at its site.
                None if sample.is_some() && !preempted => {
                    named = self.site_states.get(&at).copied();
                    if named.is_some() {
                        self.counts.named_by_site += 1;
                    } else {
                        self.counts.site_unnamed += 1;
                        named = Some(ThreadState::Other);
                    }
                }
                None => {}
            }
        } else if sample.is_some_and(|s| s.state.is_none()) && !preempted && named.is_none() {
            self.counts.site_unnamed += 1;
            named = Some(ThreadState::Other);
        }
        named
    }

    /// The state of a switch-out `named` so: runnable when `preempted`.
    fn state_named(&mut self, named: Option<ThreadState>, preempted: bool) -> ThreadState {
        if preempted {
            return ThreadState::Runnable;
        }
        match named {
            // A blocked task whose kernel frames look like a preemption (a
            // cond_resched in a blocking path) is `other`: the flag is the
            // authority on runnable.
            Some(ThreadState::Runnable) => ThreadState::Other,
            None => {
                self.counts.unnamed += 1;
                ThreadState::Other
            }
            Some(s) => s,
        }
    }

    /// The stack of a switch-out keyed (tid, state, site): its `own`, kept for the
    /// site, else the one last kept there.
    fn site_stack(
        &mut self,
        key: (u32, ThreadState, u64, u64),
        own: Option<StackId>,
    ) -> Option<StackId> {
        let at_site = (key.2, key.3) != (0, 0);
        match own {
            Some(st) => {
                if at_site {
                    self.sites.insert(key, st);
                }
                Some(st)
            }
            None if at_site => {
                let borrowed = self.sites.get(&key).copied();
                self.counts.borrowed += u64::from(borrowed.is_some());
                borrowed
            }
            None => None,
        }
    }

    /// [`Tracker::switched_in`]'s intervals alone.
    #[cfg(test)]
    pub(crate) fn switch_in(&mut self, tid: u32, cpu: u32, time: u64) -> Vec<OffCpu> {
        self.switched_in(tid, cpu, time).0
    }

    /// A SWITCH-in record of `tid` on `cpu`: ends its open interval, if any, as one
    /// interval or, when it was woken, two: the wait up to the wake-up, then runnable.
    /// The wait ends where the kernel picked the thread: its `sched_switch` sample,
    /// or, when it came straight after another thread of the recording on that CPU
    /// (whose switch-outs the `sched_switch` filter leaves out), where that thread
    /// left; else at this record. Returns them, and where the kernel picked the thread
    /// when that is known (at or before `time`): where its CPU clock started, and so
    /// its stretch on the CPU (`Accounting::switch_from`).
    pub(crate) fn switched_in(
        &mut self,
        tid: u32,
        cpu: u32,
        time: u64,
    ) -> (Vec<OffCpu>, Option<u64>) {
        let mut out = Vec::new();
        let handed = self
            .handoff
            .remove(&cpu)
            .filter(|&(prev, left, out)| {
                prev != tid && left <= time && out <= time && time - out <= HANDOFF_WINDOW_NS
            })
            .map(|(_, left, _)| left);
        let begun = self
            .switching
            .remove(&tid)
            .filter(|&t| t <= time && time - t <= PAIRING_WINDOW_NS)
            .or(handed);
        if let Some(o) = self
            .open
            .remove(&tid)
            .or_else(|| self.blocked_at_start.remove(&tid))
        {
            let end = begun.map_or(time, |t| t.max(o.time));
            self.close(tid, o, end, &mut out);
            return (out, Some(end));
        }
        (out, begun)
    }

    /// Up to `most` threads blocked since before `before`, without a stack, at a known
    /// site whose stack was not looked for yet: pid, tid, site (user IP and SP). Their
    /// stacks can be read from /proc while they stay blocked there.
    pub(crate) fn unstacked_waits(&self, before: u64, most: usize) -> Vec<(u32, u32, (u64, u64))> {
        let mut waits: Vec<(u64, u32, u32, (u64, u64))> = self
            .open
            .iter()
            .filter(|(_, o)| {
                !o.looked
                    && o.stack.is_none()
                    && o.woken.is_none()
                    && o.site != (0, 0)
                    && o.state != ThreadState::Runnable
                    && o.time < before
            })
            .map(|(&tid, o)| (o.time, o.pid, tid, o.site))
            .collect();
        // The longest first.
        waits.sort_unstable();
        waits.truncate(most);
        waits.into_iter().map(|(_, p, t, s)| (p, t, s)).collect()
    }

    /// The stack `tid` is blocked with now, read from /proc at the site of its open
    /// interval (None: it could not be read): the interval's, and its site's for the
    /// intervals to come.
    pub(crate) fn blocked_stack(&mut self, tid: u32, stack: Option<StackId>) {
        let Some(o) = self.open.get_mut(&tid) else {
            return;
        };
        o.looked = true;
        if let (None, Some(st)) = (o.stack, stack) {
            o.stack = Some(st);
            self.counts.read_from_proc += 1;
            self.sites.insert((tid, o.state, o.site.0, o.site.1), st);
        }
    }

    /// The threads of the recording seen so far and not exited.
    pub(crate) fn threads(&self) -> impl Iterator<Item = u32> + '_ {
        self.seen.iter().copied()
    }

    /// The thread ended: nothing of it stays open.
    pub(crate) fn thread_exit(&mut self, tid: u32) {
        self.states.remove(&tid);
        self.stacks.remove(&tid);
        self.open.remove(&tid);
        self.blocked_at_start.remove(&tid);
        self.switching.remove(&tid);
        self.sites.retain(|k, _| k.0 != tid);
        self.site_states.retain(|k, _| k.0 != tid);
        self.seen.remove(&tid);
        // Checked against the kernel at its exit (`OffCpuRecorder::thread_exit`).
        self.runnable.remove(&tid);
        self.born.remove(&tid);
    }

    /// Closes every interval still open at the end of the recording (threads still
    /// blocked then), in time order.
    pub(crate) fn finish(&mut self, end: u64) -> Vec<OffCpu> {
        let mut open: Vec<(u32, Open)> = self.open.drain().collect();
        // A thread found running or runnable at the start with no record since ran
        // the whole recording (or was gone already): no interval. One that waited for
        // a CPU all along is the rarer case, and its time is left out rather than
        // booked as waiting when it may have run.
        open.extend(
            self.blocked_at_start
                .drain()
                .filter(|(_, o)| o.state != ThreadState::Runnable),
        );
        open.sort_by_key(|(tid, o)| (o.time, *tid));
        let mut out = Vec::new();
        for (tid, o) in open {
            self.close(tid, o, end.max(o.time), &mut out);
        }
        out
    }

    /// Ends `o` at `end`: one interval, or two when it was woken in between (the
    /// runnable part keeps the stack the thread blocked with).
    fn close(&mut self, tid: u32, o: Open, end: u64, out: &mut Vec<OffCpu>) {
        let (lo, hi) = self.window.unwrap_or((0, u64::MAX));
        let mut piece = |time: u64, end: u64, state: ThreadState| {
            let (time, end) = (time.clamp(lo, hi), end.clamp(lo, hi));
            if end <= time && (lo, hi) != (0, u64::MAX) {
                // Wholly outside the recording.
                return;
            }
            let duration = end.saturating_sub(time);
            self.counts.intervals += 1;
            self.counts.off_cpu_ns += duration;
            if o.stack.is_some() {
                self.counts.stacked_ns += duration;
            }
            if state == ThreadState::Runnable {
                *self.runnable.entry(tid).or_default() += duration;
            }
            out.push(OffCpu {
                time,
                pid: o.pid,
                tid,
                cpu: o.cpu,
                duration,
                state,
                weight: if o.stack.is_some() { duration } else { 0 },
                stack: o.stack,
            });
        };
        match o.woken {
            Some(w) if w > o.time && w < end => {
                piece(o.time, w, o.state);
                piece(w, end, ThreadState::Runnable);
                self.counts.woken += 1;
            }
            _ => piece(o.time, end, o.state),
        }
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
