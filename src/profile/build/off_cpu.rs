//! The off-CPU intervals of a recording as samples: each ending in its state's frame,
//! weighted so that each thread's states add up to their measured time, runnable as
//! the kernel splits it from running (`profile::split`).

use std::collections::HashMap;

use super::{Builder, ThreadNames, ThreadTable};
use crate::format::{OffCpu, StackId, ThreadState};
use crate::profile::split::Resplit;
use crate::profile::{Interval, ProfileSample};

impl Builder<'_> {
    /// The recording's off-CPU intervals, in recording order, each weighted sample
    /// pushed to `samples`.
    pub(super) fn off_cpu(
        &mut self,
        threads: &mut ThreadTable,
        names: &ThreadNames,
        resplits: &HashMap<(u32, u32), Resplit>,
        samples: &mut Vec<ProfileSample>,
    ) -> Vec<Interval> {
        let rec = self.rec;
        let start = rec.meta.start_time_ns;
        let states = self.shown_states();
        let scales = Scales::of(&rec.off_cpu, &states, resplits);
        let mut intervals = Vec::with_capacity(rec.off_cpu.len());
        for (o, &state) in rec.off_cpu.iter().zip(&states) {
            let thread = threads.get(names, o.pid, o.tid, o.time);
            let stack = o.stack.map(|leaf| self.off_cpu_stack(leaf, state));
            let time = o.time.saturating_sub(start);
            let weight = scales.weight(o, state);
            if weight > 0 {
                // An interval without a stack still counts: its time goes under the
                // state frame alone.
                let stack = stack.unwrap_or_else(|| self.off_cpu_stack_none(state));
                samples.push(ProfileSample {
                    time,
                    thread,
                    weight,
                    stack,
                    state,
                });
            }
            intervals.push(Interval {
                thread,
                time,
                duration: o.duration,
                state,
                stack,
            });
        }
        // Runnable time of a thread none of whose intervals was runnable: under the
        // state's frame alone.
        let mut alone: Vec<_> = (scales.runnable_to.iter())
            .filter(|(_, r)| r.1 == 0 && r.0 > 0)
            .collect();
        alone.sort_unstable();
        for (&(pid, tid), &(to, _)) in alone {
            let at = resplits[&(pid, tid)].at;
            samples.push(ProfileSample {
                time: at.saturating_sub(start),
                thread: threads.get(names, pid, tid, at),
                weight: to,
                stack: self.off_cpu_stack_none(ThreadState::Runnable),
                state: ThreadState::Runnable,
            });
        }
        intervals
    }

    /// Each interval's state as reports show it: the recorded one, told apart by the
    /// user stack where the kernel frames cannot say (classify::refine).
    fn shown_states(&mut self) -> Vec<ThreadState> {
        let rec = self.rec;
        let mut seen: HashMap<(Option<StackId>, ThreadState), ThreadState> = HashMap::new();
        rec.off_cpu
            .iter()
            .map(|o| {
                *seen
                    .entry((o.stack, o.state))
                    .or_insert_with(|| self.shown_state(o.stack, o.state))
            })
            .collect()
    }
}

/// How intervals are weighed. Stacks taken at a bounded rate stand for the intervals
/// without one: per thread and state, the stacked intervals' weights are scaled so
/// that they add up to the state's measured time (docs/off-cpu.md); runnable time
/// as the kernel splits it from running.
struct Scales {
    /// Per (pid, tid, state): the time measured, and the weights of its stacked
    /// intervals.
    measured: HashMap<(u32, u32, ThreadState), (u64, u64)>,
    /// Per thread: its runnable time as the kernel splits it, and as recorded.
    runnable_to: HashMap<(u32, u32), (u64, u64)>,
}

impl Scales {
    fn of(
        off_cpu: &[OffCpu],
        states: &[ThreadState],
        resplits: &HashMap<(u32, u32), Resplit>,
    ) -> Scales {
        let mut measured: HashMap<(u32, u32, ThreadState), (u64, u64)> = HashMap::new();
        for (o, &state) in off_cpu.iter().zip(states) {
            let e = measured.entry((o.pid, o.tid, state)).or_default();
            e.0 = e.0.saturating_add(o.duration);
            if o.stack.is_some() {
                e.1 = e.1.saturating_add(o.weight);
            }
        }
        let mut runnable_to: HashMap<(u32, u32), (u64, u64)> = HashMap::new();
        for (&(pid, tid), r) in resplits {
            let raw = measured
                .get(&(pid, tid, ThreadState::Runnable))
                .map_or(0, |m| m.0);
            runnable_to.insert((pid, tid), (r.runnable(raw), raw));
        }
        Scales {
            measured,
            runnable_to,
        }
    }

    /// The weight of interval `o` shown in `state`.
    fn weight(&self, o: &OffCpu, state: ThreadState) -> u64 {
        let (mut total, stacked) = self.measured[&(o.pid, o.tid, state)];
        let mut duration = o.duration;
        if state == ThreadState::Runnable
            && let Some(&(to, raw)) = self.runnable_to.get(&(o.pid, o.tid))
        {
            let scaled = u128::from(duration) * u128::from(to) / u128::from(raw.max(1));
            duration = u64::try_from(scaled).unwrap_or(u64::MAX);
            total = to;
        }
        if stacked == 0 {
            // No stack in this state: each interval counts its own time.
            duration
        } else if o.stack.is_some() {
            let scaled = u128::from(o.weight) * u128::from(total) / u128::from(stacked);
            u64::try_from(scaled).unwrap_or(u64::MAX)
        } else {
            0
        }
    }
}
