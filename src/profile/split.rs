//! Running and runnable as the kernel splits them, in an `--off-cpu` recording
//! (docs/off-cpu.md, "The kernel's split of running and runnable").
//!
//! The recording measures each thread's stretches on a CPU and its waits from the
//! scheduler's switches; the summary also holds its own CPU clock where the kernel gave
//! it. The two accounts agree on the sum (on a CPU or waiting for one) but not always
//! on the split: after a wake-up that preempts the running thread, the kernel leaves its
//! run-queue clock un-updated until the switch, so it counts the time the preempted
//! thread runs on as that thread's run-queue delay and as the woken thread's CPU time
//! (`rq_clock_skip_update`). A thread's running is its clock, as everywhere else: its
//! CPU samples are scaled to it, and the difference from its stretches moves to or from
//! its runnable time, which so matches the kernel's run-queue delay, and its states
//! still add up to its life in the recording.
//!
//! Without `--off-cpu` the summary names only the threads whose samples weigh more
//! than their clock (docs/accounting.md, "Weights without counts"): their samples are
//! scaled down to it.

use std::collections::HashMap;

use crate::format::{Recording, ThreadClock};

/// The largest difference between a thread's clock and its stretches taken for the
/// kernel's split, as a share of the larger: the shift seen on PostgreSQL backends
/// switching 8,000 times a second was up to 15% of their CPU time. A larger one is
/// something else (a clock of another thread that reused the id), left alone.
const MOST_SHIFT: f64 = 0.5;

/// How one thread's running and runnable are re-split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Resplit {
    /// Its CPU samples' weights are scaled by `clock / have`.
    pub clock: u64,
    pub have: u64,
    /// Nanoseconds added to (or, negative, taken from) its measured runnable time.
    pub runnable: i64,
    /// The time of its last CPU sample: where runnable time goes that no runnable
    /// interval of it can carry.
    pub at: u64,
}

impl Resplit {
    /// A CPU sample's weight, scaled to the thread's clock.
    pub(super) fn running(&self, weight: u64) -> u64 {
        if self.have == 0 {
            return weight;
        }
        let scaled = u128::from(weight) * u128::from(self.clock) / u128::from(self.have);
        u64::try_from(scaled).unwrap_or(u64::MAX)
    }

    /// The thread's runnable time, from what its intervals measured.
    pub(super) fn runnable(&self, measured: u64) -> u64 {
        measured.saturating_add_signed(self.runnable)
    }
}

/// Each thread's re-split, by (pid, tid): threads the summary gives a clock for, whose
/// CPU samples weigh something. Runnable is moved only when no record was lost (a lost
/// switch leaves a wait unmeasured, and the difference would be booked as runnable).
pub(super) fn resplits(rec: &Recording) -> HashMap<(u32, u32), Resplit> {
    let Some(summary) = rec.summary.as_ref() else {
        return HashMap::new();
    };
    if summary.thread_clocks.is_empty() {
        return HashMap::new();
    }
    let mut have: HashMap<(u32, u32), (u64, u64)> = HashMap::new();
    for s in &rec.samples {
        let e = have.entry((s.pid, s.tid)).or_default();
        e.0 = e.0.saturating_add(s.weight);
        e.1 = e.1.max(s.time);
    }
    if !rec.meta.off_cpu {
        return scaled_down(&summary.thread_clocks, &have);
    }
    if rec.off_cpu.is_empty() {
        return HashMap::new();
    }
    let mut runnable: HashMap<(u32, u32), u64> = HashMap::new();
    for o in rec
        .off_cpu
        .iter()
        .filter(|o| o.state == crate::format::ThreadState::Runnable)
    {
        let e = runnable.entry((o.pid, o.tid)).or_default();
        *e = e.saturating_add(o.duration);
    }
    let complete = rec.lost == 0 && summary.lost == 0;
    let mut out = HashMap::new();
    for c in &summary.thread_clocks {
        let key = (c.pid, c.tid);
        let Some(&(have, at)) = have.get(&key).filter(|h| h.0 > 0) else {
            continue;
        };
        let larger = c.clock_ns.max(c.ran_ns).max(1);
        if c.clock_ns.abs_diff(c.ran_ns) as f64 > MOST_SHIFT * larger as f64 {
            continue;
        }
        let (clock, shift) = if complete {
            // Runnable takes the difference, never more than it measured; what it
            // cannot take stays in running, so that the states still add up.
            let measured = runnable.get(&key).copied().unwrap_or(0);
            let d = i128::from(c.ran_ns) - i128::from(c.clock_ns);
            let shift = d.max(-i128::from(measured));
            let clock = (i128::from(c.ran_ns) - shift).max(0);
            (
                u64::try_from(clock).unwrap_or(u64::MAX),
                i64::try_from(shift).unwrap_or(0),
            )
        } else {
            (c.clock_ns, 0)
        };
        out.insert(
            key,
            Resplit {
                clock,
                have,
                runnable: shift,
                at,
            },
        );
    }
    out
}

/// Without `--off-cpu`: the threads the summary names had samples weighing more than
/// their own clock (periods the kernel's context swap moved from another thread, the
/// hypervisor's steal counted in task-clock): each one's samples are scaled to its
/// clock, keeping their shares. A thread whose samples weigh no more than its clock
/// (the summary's figure from another reading) is left as it is.
fn scaled_down(
    clocks: &[ThreadClock],
    have: &HashMap<(u32, u32), (u64, u64)>,
) -> HashMap<(u32, u32), Resplit> {
    clocks
        .iter()
        .filter_map(|c| {
            let key = (c.pid, c.tid);
            let &(have, at) = have.get(&key).filter(|h| h.0 > c.clock_ns)?;
            Some((
                key,
                Resplit {
                    clock: c.clock_ns,
                    have,
                    runnable: 0,
                    at,
                },
            ))
        })
        .collect()
}

#[cfg(test)]
#[path = "split_tests.rs"]
mod tests;
