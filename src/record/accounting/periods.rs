//! Sample periods varied at random around the nominal one, and how often, so that a
//! thread whose work has a rhythm near the period is not sampled in lock-step with it
//! (docs/accounting.md), and the period each varied event had when its samples were
//! taken.

use std::collections::{HashMap, VecDeque};

/// How often the recorder gives a few events a new random period
/// ([`PeriodJitter`]): every 10 periods with exact accounting, every 50 when
/// totals are samples x period (a change restarts the event's period, and there the
/// partial period before it is lost from the totals), and never more often than every
/// 20 ms (each change is an ioctl and an interrupt of the thread if it runs). A change
/// also restarts sampling at a phase unrelated to the target's work, so a run is a
/// string of short stretches with independent periods and phases: a rhythm that locks
/// with one stretch's period biases that stretch only, not the whole run (a 1.5 s CI
/// benchmark used to keep one period throughout; docs/ci.md, power on real recordings).
pub(crate) fn vary_interval(period_ns: u64, exact: bool) -> std::time::Duration {
    std::time::Duration::from_nanos(vary_after_ns(period_ns, exact))
        .max(std::time::Duration::from_millis(20))
}

/// The CPU time an event's thread must have run since the event's last change before
/// it gets another: the same 10 (or 50) periods, counted in the thread's own time.
/// Counted in wall time, a thread that gets a tenth of a CPU on a loaded machine had
/// its period restarted every period or so, and lost a third of its samples (half a
/// period at each change).
pub(crate) fn vary_after_ns(period_ns: u64, exact: bool) -> u64 {
    let periods = if exact { 10 } else { 50 };
    period_ns.saturating_mul(periods)
}

/// Sample periods drawn at random within 25% of the nominal one, so that a thread whose
/// work repeats with a rhythm in CPU time near a multiple of the period is not sampled
/// in lock-step (always at the same phase of its cycle, which biases which functions
/// its samples see). Weights come from the counts, so a varied period costs nothing in
/// accuracy; the rate stays the asked one on average. A xorshift generator: no
/// statistical quality is needed beyond breaking lock-step.
#[derive(Debug, Clone)]
pub(crate) struct PeriodJitter {
    state: u64,
}

impl PeriodJitter {
    pub(crate) fn new(seed: u64) -> PeriodJitter {
        PeriodJitter { state: seed | 1 }
    }

    /// A period in `nominal` x [0.75, 1.25).
    pub(crate) fn next(&mut self, nominal: u64) -> u64 {
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state = x;
        let quarter = nominal / 4;
        if quarter == 0 {
            return nominal.max(1);
        }
        nominal - quarter + x % (2 * quarter)
    }
}

/// What the recorder's period changes need from the accounting: the periods it gave
/// the events it opened, and how much CPU time each event's own thread ran since.
#[derive(Debug, Default)]
pub(super) struct Varied {
    /// The periods given since, by event id: (when, period), oldest first.
    set: HashMap<u64, VecDeque<(u64, u64)>>,
    /// What the samples of each opened event's own thread weigh, by event id.
    own_ns: HashMap<u64, u64>,
}

impl super::Accounting {
    /// The weight of a sample of event `id` (the one the recorder opened; `fired`:
    /// the one that took the sample, that or an inherited copy, when samples say)
    /// ([`Self::weigh`]), noted as CPU time run under the opened event
    /// ([`Self::own_ran`]); None when the sample is left out.
    #[allow(clippy::too_many_arguments)] // the fields of one sample, kept flat for tests
    pub(in crate::record) fn sample(
        &mut self,
        pid: u32,
        tid: u32,
        id: u64,
        fired: Option<u64>,
        count: Option<u64>,
        period: u64,
        time: u64,
        cpu: u32,
    ) -> Option<u64> {
        let weight = self.weigh(pid, tid, id, fired, count, period, time, cpu)?;
        if self.opened_fired(id, tid, fired) {
            let ran = self.periods.own_ns.entry(id).or_default();
            *ran = ran.saturating_add(weight);
        }
        Some(weight)
    }

    /// The CPU time run under event `id`, one the recorder opened, as the samples it
    /// took so far weigh: when the event is due a new period ([`vary_after_ns`]).
    /// Not the event's count, which adds the time of every copy the kernel inherited
    /// from it: a launched Go program's main thread, one of two busy threads, had
    /// its period restarted twice as often as meant and lost the part already run
    /// each time (4.5% of its samples, against none for the other thread).
    pub(in crate::record) fn own_ran(&self, id: u64) -> u64 {
        self.periods.own_ns.get(&id).copied().unwrap_or(0)
    }

    /// Whether event `id`, one the recorder opened, took a sample of thread `tid`
    /// itself rather than a copy the kernel inherited from it: as `fired` (its
    /// STREAM_ID) says, else when `tid` is the thread it was opened on. The two
    /// differ when the kernel swaps the perf contexts of two threads at a context
    /// switch (they are clones of one another): the events go on with the thread
    /// switched to, and a copy's period is not the opened event's.
    pub(super) fn opened_fired(&self, id: u64, tid: u32, fired: Option<u64>) -> bool {
        fired.map_or_else(|| self.owners.get(&id) == Some(&tid), |f| f == id)
    }

    /// The recorder gave event `id` (one it opened) a new `period` at `time`
    /// (CLOCK_MONOTONIC, right after the ioctl). The kernel goes on reporting in that
    /// event's samples the period it was opened with (an hrtimer event's
    /// `hw.last_period`), so its samples from then on weigh this one.
    pub(in crate::record) fn period_set(&mut self, id: u64, time: u64, period: u64) {
        self.periods
            .set
            .entry(id)
            .or_default()
            .push_back((time, period));
    }

    /// The period event `id` had at `time`, if the recorder changed it before then;
    /// changes older than the latest one before `time` are forgotten (samples are
    /// handled in time order).
    pub(super) fn period_at(&mut self, id: u64, time: u64) -> Option<u64> {
        let changes = self.periods.set.get_mut(&id)?;
        while changes.len() > 1 && changes[1].0 <= time {
            changes.pop_front();
        }
        changes.front().filter(|c| c.0 <= time).map(|c| c.1)
    }
}
