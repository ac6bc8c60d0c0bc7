//! Sample periods varied at random around the nominal one, and how often, so that a
//! thread whose work has a rhythm near the period is not sampled in lock-step with it
//! (docs/accounting.md), and the period each varied event had when its samples were
//! taken.

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

impl super::Accounting {
    /// The recorder gave event `id` (one it opened) a new `period` at `time`
    /// (CLOCK_MONOTONIC, right after the ioctl). The kernel goes on reporting in that
    /// event's samples the period it was opened with (an hrtimer event's
    /// `hw.last_period`), so its samples from then on weigh this one.
    pub(in crate::record) fn period_set(&mut self, id: u64, time: u64, period: u64) {
        self.periods_set
            .entry(id)
            .or_default()
            .push_back((time, period));
    }

    /// The period event `id` had at `time`, if the recorder changed it before then;
    /// changes older than the latest one before `time` are forgotten (samples are
    /// handled in time order).
    pub(super) fn period_at(&mut self, id: u64, time: u64) -> Option<u64> {
        let changes = self.periods_set.get_mut(&id)?;
        while changes.len() > 1 && changes[1].0 <= time {
            changes.pop_front();
        }
        changes.front().filter(|c| c.0 <= time).map(|c| c.1)
    }
}
