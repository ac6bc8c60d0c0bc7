//! One recording from start to end, as one value per phase, each consuming the last:
//! a [`Setup`] (the options checked, the rings and the output opened, the target found
//! or launched) attaches into an [`Attached`] session (the events open on the target's
//! threads, recording begun), which samples (reads the rings in time order until the
//! duration, a signal or the target's exit) into a [`Sampled`](sampling::Sampled) one, which finishes
//! (collects what the rings still hold, names every frame, writes the summary). The
//! target is left exactly as it was: every event is disabled and closed by its owner's
//! `Drop`, whatever way [`run`] returns.

use std::time::Instant;

use super::attach::TargetEvents;
use super::events::EventHandler;
use super::live::{Live, LiveSink};
use super::reorder::Reorder;
use super::rings::CpuRing;
use super::summary::RecordSummary;
use super::sys;
use super::taskstats::{ExitListener, ThreadExit};
use super::wakeups::Wakeups;
use super::{RecordError, RecordOptions};
use crate::replay::decode::{Layouts, Record};
use attached::Attached;
use setup::Setup;

mod attached;
mod begin;
mod exits;
mod finish;
mod sampling;
mod setup;

/// Records held in memory while a sample waits for a JVM's perf map, at most.
const MAX_HELD_BYTES: usize = 64 << 20;

/// The live part of a recording, which every phase from the setup on holds: rings,
/// reordering, the target's events and the handler that turns records into the
/// recording.
struct Session<'a> {
    rings: Vec<CpuRing>,
    reorder: Reorder,
    /// How each event's records are laid out, and the number of tracepoint ids it
    /// was made for (they only grow: a new count means new events to add).
    layouts: (Layouts, Option<usize>),
    events: TargetEvents,
    handler: EventHandler,
    /// Each exiting thread's own clock (accounting.md), when the kernel lets us listen.
    exits: Option<ExitListener>,
    /// Exits not yet matched to a thread of the recording (its FORK record may still be
    /// in a ring), with when they arrived.
    pending_exits: Vec<(ThreadExit, Instant)>,
    /// A live consumer's windows (`profile top`, `--push`).
    live: Option<Live<'a>>,
    /// The time of the sample held for a JVM's perf map, if one is.
    held: Option<u64>,
    /// `--off-cpu`: the per-CPU wake-up events, when they could be opened.
    wakeups: Option<Wakeups>,
    /// The processes recorded: those whose threads the events are opened on (and the
    /// wake-up filter follows); empty with `-a`.
    pids: Vec<u32>,
}

/// Records as `opts` says: setup, attach, sample, finish.
pub(super) fn run(opts: &RecordOptions) -> Result<RecordSummary, RecordError> {
    run_with(opts, None)
}

/// Records as `opts` says and hands `sink` a window of what was recorded every
/// [`LiveSink::interval`] (see [`super::live`]).
pub(super) fn run_live(
    opts: &RecordOptions,
    sink: &mut (dyn LiveSink + Send),
) -> Result<RecordSummary, RecordError> {
    std::thread::scope(|scope| run_with(opts, Some((scope, sink))))
}

/// A live consumer and the scope its worker thread lives in.
type LiveStart<'scope, 'env> = (
    &'scope std::thread::Scope<'scope, 'env>,
    &'env mut (dyn LiveSink + Send),
);

fn run_with<'a>(
    opts: &'a RecordOptions,
    live: Option<LiveStart<'a, '_>>,
) -> Result<RecordSummary, RecordError> {
    Setup::new(opts, live)?.attach()?.sample().finish()
}

impl Session<'_> {
    /// Drains the rings and handles the records up to `upto`, in time order; returns the time up to which every record is
    /// handled: `upto`, or less when a sample is held for a JVM's perf map (see
    /// [`JitTracker::hold`](super::jit::JitTracker::hold)).
    /// `may_hold` is false at the end, when everything left is handled.
    fn process(&mut self, upto: u64, may_hold: bool) -> u64 {
        self.make_layouts();
        let layouts = &self.layouts.0;
        let first_new = self.reorder.drain(&mut self.rings, layouts);
        if self.handler.runtimes.java.any() && self.handler.copies_stacks() {
            // Samples may be unwound only after the JVM exited (waiting behind a held
            // one, or drained at its exit): read their Java methods while it lives
            // (see `JavaFrames::warm`).
            let java = &mut self.handler.runtimes.java;
            // Those drained before a JVM's tables could be read, again.
            let from = if java.rewarm_due() { 0 } else { first_new };
            self.reorder.peek_from(from, &self.rings, layouts, |rec| {
                if let Record::Sample(s) = rec
                    && let Some([ip, sp, bp]) = s.regs
                {
                    java.warm(s.pid, s.time, (ip, sp, bp, s.stack));
                }
            });
        }
        if self
            .handler
            .runtimes
            .reads_ahead(self.handler.copies_stacks())
        {
            // Python's and Ruby's frames move on as the thread runs: read what the
            // samples just drained will be checked against now, not a round later
            // when they are handled (see `PythonFrames::read_ahead`).
            let handler = &mut self.handler;
            self.reorder
                .peek_from(first_new, &self.rings, layouts, |rec| {
                    if let Record::Sample(s) = rec {
                        handler.runtimes.drained(&s);
                    }
                });
        }
        register_captures(&self.events, &mut self.handler);
        // After the drain: a count of unloaded classes read now vouches for every
        // sample drained so far, even if the JVM exits before they are unwound.
        self.handler.runtimes.java.tick();
        if may_hold
            && let Some(t) = self.held
            && self.handler.jit.waiting()
            && self.reorder.buffered() < MAX_HELD_BYTES
        {
            // Nothing handled: the waiting records leave the rings if they crowd them.
            self.reorder.make_room(&mut self.rings);
            return t.saturating_sub(1).min(upto);
        }
        let handler = &mut self.handler;
        // Held records wait in memory: never more than this.
        handler.jit.holding = may_hold && self.reorder.buffered() < MAX_HELD_BYTES;
        let mut dropped = 0;
        let held = self.reorder.release(
            &mut self.rings,
            upto,
            layouts,
            |rec| handler.handle(rec).is_ok(),
            || dropped += 1,
        );
        handler.counters.dropped += dropped;
        (handler.runtimes).handled_upto(held.map_or(upto, |t| t.saturating_sub(1).min(upto)));
        self.held = held;
        held.map_or(upto, |t| t.saturating_sub(1).min(upto))
    }

    /// How each event's records are laid out; made again only when new tracepoint
    /// events were opened, not every round.
    fn make_layouts(&mut self) {
        let captures = self.events.capture().map_or(Vec::new(), |c| c.event_ids());
        let ids = self.wakeups.as_ref().map_or(0, |w| w.ids.len()) + (captures.len() << 20);
        if self.layouts.1 != Some(ids) {
            let mut layouts = Layouts::one(sys::sample_layout(&self.events.cfg).into());
            if let Some(w) = &self.wakeups {
                layouts.add(sys::tracepoint_layout().into(), w.ids.iter().copied());
            }
            if !captures.is_empty() {
                layouts.add(sys::tracepoint_layout().into(), captures.iter().copied());
                self.handler.runtimes.set_capture_ids(captures);
                self.handler.runtimes.python.capture_on();
            }
            self.layouts = (layouts, Some(ids));
        }
    }

    /// Moves what the rings hold into memory, to be handled once recording runs:
    /// while it starts (each process's modules and unwind information loaded, the
    /// stacks of blocked threads read) nobody drains them, and a busy target's
    /// switch records and stack copies overflowed them (issue 28: pgbench backends
    /// in DWARF mode).
    fn keep_up(&mut self) {
        self.make_layouts();
        self.reorder.drain(&mut self.rings, &self.layouts.0);
    }
}

/// Threads the Python stage found (at their first sample without a copy, or when
/// their process was prepared): their chains are copied from now on; those that
/// ended (their EXIT records handled) are forgotten first, their ids free for others.
fn register_captures(events: &TargetEvents, handler: &mut EventHandler) {
    if let Some(c) = events.capture() {
        for tid in handler.runtimes.python.forgotten() {
            c.forget(tid);
        }
        for (tid, st) in handler.runtimes.python.registrations() {
            let _ = c.register(tid, &super::python::chain_entry(&st));
        }
    }
}
