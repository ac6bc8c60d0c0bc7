//! Which thread state each kernel thread runs on: found by walking the interpreter's
//! thread list, remembered, and checked at each use. The list is the target's to
//! make: a walk meets each node once and at most the walk budget's nodes, and a
//! process is walked whole at most once per [`WALK_INTERVAL`] (once a second after a
//! walk that met a loop or its bound), so a thread with no state, or a list made to
//! loop, costs one walk per interval, not one per sample.

use super::PythonProcess;
use crate::interp::Memory;
use crate::interp::budget::Walk;

/// The least time between two walks of a process's thread list.
const WALK_INTERVAL: u64 = 20_000_000;

/// The least time between two walks after one that met a loop or its bound.
const HOSTILE_INTERVAL: u64 = 1_000_000_000;

impl PythonProcess {
    /// The thread state of kernel thread `tid`, checked.
    pub(super) fn thread_state(&mut self, mem: &impl Memory, tid: u32) -> Option<u64> {
        if let Some(&t) = self.threads.get(&tid)
            && self.runtime.tid_of(mem, t) == Some(tid)
        {
            return Some(t);
        }
        self.walk_threads(mem, false);
        self.threads.get(&tid).copied()
    }

    /// Walks the thread list whole and remembers what it found, unless it was walked
    /// less than its interval ago and `force` is false.
    pub(super) fn walk_threads(&mut self, mem: &impl Memory, force: bool) {
        let now = crate::interp::budget::monotonic_ns();
        if let Some((at, interval)) = self.walked
            && !force
            && now.saturating_sub(at) < interval
        {
            return;
        }
        let mut walk = Walk::new(self.meter.budgets().walk_nodes);
        self.threads = self.runtime.thread_states(mem, &mut walk);
        self.trips.looped += u64::from(walk.looped);
        self.trips.bounded += u64::from(walk.bounded);
        let interval = if walk.looped || walk.bounded {
            HOSTILE_INTERVAL
        } else {
            WALK_INTERVAL
        };
        self.walked = Some((now, interval));
    }
}
