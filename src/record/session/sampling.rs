//! The third phase: sampling. The rings are read in time order, round after round,
//! until the duration, a signal, a write error or the exit of every target process;
//! between rounds the recorder keeps the target's events, the wake-up filter and the
//! live windows up with what the records said.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::super::RecordOptions;
use super::super::launch;
use super::super::status::StatusLine;
use super::super::summary::StopReason;
use super::super::sys::{self, PidFd};
use super::{Attached, Session};
use crate::process;
use crate::symbolize::kernel::KernelSymbols;

/// A wait this long without a stack copy has its stack read from /proc (dwarf mode).
const LONG_WAIT_NS: u64 = 20_000_000;
/// Buffered events past this many bytes are a chunk: at most this is lost to a full disk.
const CHUNK_BYTES: usize = 64 << 10;

/// A recording whose sampling has stopped: what is left is to finish it.
pub(super) struct Sampled<'a> {
    pub opts: &'a RecordOptions,
    pub session: Session<'a>,
    pub stopped: Stopped,
    /// The launched command, to reap if it has not exited.
    pub child: Option<u32>,
    pub kallsyms: Option<KernelSymbols>,
    /// Why the kernel side of the recording is partial, when attaching found out.
    pub kernel_note: Option<String>,
    pub existing_descendants: Vec<(u32, String)>,
}

/// How sampling ended.
pub(super) struct Stopped {
    pub reason: StopReason,
    pub exit_code: Option<i32>,
    pub duration: Duration,
    /// CLOCK_MONOTONIC when sampling stopped.
    pub end_time_ns: u64,
}

/// What the loop watches to know when to stop.
struct Watch<'a> {
    started: Instant,
    duration: Option<Duration>,
    stop: &'a AtomicBool,
    /// Readable when a target process exits; recording stops when all have.
    pidfds: &'a [PidFd],
    /// The launched command, reaped when it exits.
    child: Option<u32>,
    status: &'a StatusLine,
}

impl<'a> Attached<'a> {
    /// Samples until the duration, a signal, a write error or the exit of every
    /// target process.
    pub(super) fn sample(self) -> Sampled<'a> {
        let Attached {
            opts,
            mut session,
            stop,
            pidfds,
            child,
            begun,
            kallsyms,
            kernel_note,
            existing_descendants,
        } = self;
        let pid = session.pids.first().copied().unwrap_or(0);
        let status = StatusLine::new(opts.progress, pid, session.pids.len(), child.is_some());
        let watch = Watch {
            started: begun,
            duration: opts.duration,
            stop: &stop,
            pidfds: &pidfds,
            child,
            status: &status,
        };
        let stopped = session.main_loop(&watch);
        status.clear();
        Sampled {
            opts,
            session,
            stopped,
            child,
            kallsyms,
            kernel_note,
            existing_descendants,
        }
    }
}

/// When the loop last did each of its periodic chores.
struct Chores {
    flush: Instant,
    status: Instant,
    tables: Instant,
}

impl Session<'_> {
    /// Reads the rings until the duration, a signal, a write error or the exit of
    /// every target process; flushes a chunk every half second or `CHUNK_BYTES`.
    fn main_loop(&mut self, w: &Watch) -> Stopped {
        let mut fds: Vec<i32> = self.rings.iter().map(|r| r.owner.raw()).collect();
        let rings = fds.len();
        fds.extend(w.pidfds.iter().map(PidFd::raw));
        let mut ready = Vec::new();
        let mut watermark = 0u64;
        let now = Instant::now();
        let mut chores = Chores {
            flush: now,
            status: now,
            tables: now,
        };
        let mut exit_code = None;
        let reason = loop {
            let timeout = match self.timeout(w) {
                Ok(ms) => ms,
                Err(reason) => break reason,
            };
            if sys::poll_readable(&fds, timeout, &mut ready).is_err() {
                std::thread::sleep(Duration::from_millis(10));
            }
            let round_start = sys::monotonic_ns();
            if let Some(reason) = self.round(watermark, round_start) {
                break reason;
            }
            watermark = round_start;
            if let Some(reason) = self.chores(w, &mut chores) {
                break reason;
            }
            // A pidfd stays readable once its process has exited: stop watching it.
            let mut i = 0;
            fds.retain(|_| {
                let exited = i >= rings && ready.get(i) == Some(&true);
                i += 1;
                !exited
            });
            if fds.len() == rings {
                if let Some(pid) = w.child {
                    exit_code = launch::wait_child(pid, true);
                }
                break StopReason::TargetExited;
            }
        };
        Stopped {
            reason,
            exit_code,
            duration: w.started.elapsed(),
            // Sampling ends here; reaping a launched command and naming come after.
            end_time_ns: sys::monotonic_ns(),
        }
    }

    /// How long the next wait for the rings may last, in milliseconds, or why the
    /// recording ends now (a signal, the duration).
    fn timeout(&self, w: &Watch) -> Result<i32, StopReason> {
        if w.stop.load(Ordering::Relaxed) {
            return Err(StopReason::Signal);
        }
        let mut timeout = 100i32;
        if let Some(d) = w.duration {
            let left = d.saturating_sub(w.started.elapsed());
            if left.is_zero() {
                return Err(StopReason::Duration);
            }
            timeout = timeout.min(left.as_millis() as i32 + 1);
        }
        if let Some(live) = &self.live {
            timeout = timeout.min(live.left().as_millis() as i32 + 1);
        }
        if self.handler.jit.waiting() {
            // A JVM's map is on its way: take it as soon as it comes.
            timeout = timeout.min(5);
        }
        if let Some(ms) = self.handler.runtimes.poll_ms(self.handler.host_wide()) {
            // Python frames are read after their sample: the sooner, the more of
            // them are still the sample's (see record/python.rs).
            timeout = timeout.min(ms);
        }
        Ok(timeout)
    }

    /// One round: the records up to the previous round's start (`watermark`) handled,
    /// and what they said acted on; a reason to stop when a live consumer asked to or
    /// writing failed.
    fn round(&mut self, watermark: u64, round_start: u64) -> Option<StopReason> {
        if let Some(live) = self.live.as_mut() {
            // A due window ends here: its threads' clocks are read now.
            live.prepare(self.handler.accounting(), round_start);
        }
        let acct = self.handler.accounting();
        for (id, time, period) in self.events.vary_periods(|id| acct.own_ran(id)) {
            self.handler.period_set(id, time, period);
        }
        self.handler.poll_jit_maps();
        // The exits reported so far, for the samples of threads that ended
        // (`Accounting::foreign`).
        self.drain_exits();
        // Records up to the previous round's start are all in the rings by now.
        let handled = self.process(watermark, true);
        // Long waits without a stack: read while they last.
        self.handler
            .stack_long_waits(handled.saturating_sub(LONG_WAIT_NS));
        self.take_exits(false);
        self.own_events();
        self.refresh_wakeups();
        if let Some(live) = self.live.as_mut() {
            if live.stop_requested() {
                return Some(StopReason::Requested);
            }
            if live.ready(handled) {
                // Everything up to there is handled: the window ends there (where
                // its clocks were read; later if records were held past that).
                live.cut(&mut self.handler, handled, false);
            }
        }
        self.handler.write_failed().then_some(StopReason::Error)
    }

    /// The chores due: a chunk flushed, the tables' sizes and the status line shown;
    /// a reason to stop when writing failed.
    fn chores(&mut self, w: &Watch, last: &mut Chores) -> Option<StopReason> {
        if last.flush.elapsed() > Duration::from_millis(500)
            || self.handler.writer().pending_bytes() > CHUNK_BYTES
        {
            if !self.handler.flush_chunk() {
                return Some(StopReason::Error);
            }
            last.flush = Instant::now();
        }
        if super::super::events::debug_tables_every().is_some_and(|e| last.tables.elapsed() >= e) {
            eprintln!("profile: tables: {}", self.handler.table_sizes());
            last.tables = Instant::now();
        }
        if last.status.elapsed() > Duration::from_millis(250) {
            let c = &self.handler.counters;
            w.status
                .show(w.started.elapsed(), c.samples, c.per_thread.len(), c.lost);
            last.status = Instant::now();
        }
        None
    }

    /// Threads created since the last round get events of their own, whose period
    /// varies (their inherited copies keep one period for life); ended ones give
    /// theirs back.
    fn own_events(&mut self) {
        for (born, pid, tid) in self.handler.take_lifecycle() {
            if born {
                self.events.own_events(pid, tid, &self.rings);
            } else {
                self.events.thread_ended(pid, tid);
            }
        }
    }

    /// Gives the wake-up events a fresh filter when the target has threads it does not
    /// cover or other processes' wake-ups crowd the rings (see `wakeups`).
    fn refresh_wakeups(&mut self) {
        let (Some(w), Some(o)) = (self.wakeups.as_mut(), self.handler.off_cpu.as_mut()) else {
            return;
        };
        let pids = &self.pids;
        let known = o.tracker.threads();
        let list = || {
            let mut tids: std::collections::BTreeSet<u32> = o.tracker.threads().collect();
            for &pid in pids {
                tids.extend(process::list_tids(pid).unwrap_or_default());
            }
            tids
        };
        match w.refresh(&self.rings, known, o.stray_wakeups, list) {
            Ok(true) => {
                o.stray_wakeups = 0;
                if let Some(ids) = o.wakeups.as_mut() {
                    ids.clone_from(&w.samples);
                }
            }
            Ok(false) => {}
            // The old events stay, with their filter.
            Err(_) => {}
        }
    }
}
