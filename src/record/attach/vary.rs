//! The periods of the sampling events, drawn around the nominal one and changed now
//! and then (docs/accounting.md): no thread keeps one period, nor one phase, for the
//! whole recording.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::os::fd::RawFd;
use std::time::Instant;

use super::super::accounting::{PeriodJitter, vary_after_ns, vary_interval};
use super::super::sys::{self, EventConfig, EventFd};

/// Draws each event's sample period, and which event gets a new one next.
pub(in crate::record) struct Variation {
    jitter: PeriodJitter,
    /// Each sampling event's id, and the CPU time its own thread had run under it at
    /// its last change of period, by descriptor.
    varied_at: HashMap<RawFd, (u64, u64)>,
    /// Where the next look at the events starts.
    next: usize,
    /// When the events were last looked at.
    last: Instant,
}

impl Variation {
    pub(super) fn new() -> Variation {
        Variation {
            jitter: PeriodJitter::new(sys::monotonic_ns() ^ u64::from(std::process::id()) << 32),
            varied_at: HashMap::new(),
            next: 0,
            last: Instant::now(),
        }
    }

    /// A period for a new event, drawn around `nominal`.
    pub(super) fn period(&mut self, nominal: u64) -> u64 {
        self.jitter.next(nominal)
    }

    /// An event closed: its count is forgotten (its descriptor may be reused).
    pub(super) fn forget(&mut self, fd: &EventFd) {
        self.varied_at.remove(&fd.raw());
    }

    /// Now and then gives a few of `events` a new random period: threads created afterwards
    /// inherit it, and the threads with events of their own do not keep one period
    /// for the whole recording, not even a short one: an event gets a new period once
    /// its thread has run 10 periods of CPU under it since the last (50 with estimated
    /// accounting; [`vary_after_ns`]), as `own_ran` (by event id) tells from the
    /// thread's samples, not as the event's count tells, which adds the time of every
    /// thread that inherited it ([`Accounting::own_ran`](super::super::accounting::Accounting::own_ran)); looked at in turn over all events at most every
    /// [`vary_interval`]. A change restarts the event's current period (the kernel
    /// sets `period_left` to 0) at a moment that has nothing to do with the target's
    /// work, so sampling restarts at a random phase too, and the part of the period
    /// already run is lost: counting in the thread's CPU time keeps that to half a
    /// period in ten, however little CPU the thread gets. Each change is an ioctl and
    /// an interrupt of the CPU the thread is on (the kernel waits for it: the
    /// recorder's dearest system call), so at most 8 events get one per call and an
    /// event whose thread did not run gets none. The
    /// kernel changes no inherited copy (docs/accounting.md): a thread created during
    /// the recording is varied once it has events of its own
    /// ([`TargetEvents::own_events`](super::TargetEvents::own_events)).
    ///
    /// Returns each change as (event id, CLOCK_MONOTONIC just after it, period): the
    /// kernel goes on reporting the period an event was opened with in its samples.
    pub(super) fn vary<'e>(
        &mut self,
        cfg: &EventConfig,
        events: impl Iterator<Item = &'e EventFd> + Clone,
        own_ran: impl Fn(u64) -> u64,
    ) -> Vec<(u64, u64, u64)> {
        const PER_ROUND: usize = 8;
        const LOOKS_PER_ROUND: usize = 64;

        let every = vary_interval(cfg.period_ns, cfg.exact);
        let mut set = Vec::new();
        if self.last.elapsed() < every {
            return set;
        }
        self.last = Instant::now();
        let nominal = cfg.period_ns;
        let after = vary_after_ns(nominal, cfg.exact);
        let total = events.clone().count();
        let start = self.next % total.max(1);
        let (mut changed, mut looked) = (0, 0);
        for fd in events.cycle().skip(start).take(total.min(LOOKS_PER_ROUND)) {
            looked += 1;
            let (id, base) = match self.varied_at.entry(fd.raw()) {
                Entry::Occupied(e) => e.into_mut(),
                // A thread that just exited refuses; nothing to vary then.
                Entry::Vacant(e) => match fd.id() {
                    Ok(id) => e.insert((id, 0)),
                    Err(_) => continue,
                },
            };
            let ran = own_ran(*id);
            if ran.saturating_sub(*base) < after {
                continue;
            }
            *base = ran;
            let period = self.jitter.next(nominal);
            if fd.set_period(period).is_ok() {
                set.push((*id, sys::monotonic_ns(), period));
            }
            changed += 1;
            if changed == PER_ROUND {
                break;
            }
        }
        self.next = start + looked;
        set
    }
}
