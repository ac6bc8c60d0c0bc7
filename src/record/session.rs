//! One recording from start to end, in four steps: set up (check the options, open the
//! rings and the output, find or launch the target), attach (open the events on its
//! threads), loop (read the rings in time order until the duration, a signal or the
//! target's exit), finish (collect what the rings still hold, name every frame, write
//! the summary). The target is left exactly as it was: every event is disabled and
//! closed by its owner's `Drop`, whatever way [`run`] returns.

use std::io::BufWriter;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::attach::TargetEvents;
use super::events::{EventHandler, Keep, Writer};
use super::live::{Live, LiveSink};
use super::reorder::Reorder;
use super::rings::{CpuRing, open_rings};
use super::status::StatusLine;
use super::summary::{RecordSummary, StopReason};
use super::sys::{self, PidFd};
use super::taskstats::{ExitListener, ThreadExit};
use super::wakeups::Wakeups;
use super::{CallGraph, RecordError, RecordOptions, Target, launch};
use crate::format::RecordingWriter;
use crate::process;
use crate::replay::decode::{Layouts, Record};
use crate::symbolize::frames as naming;
use setup::{
    Targets, event_config, kernel_thread_note, meta, open_output, output_name, spawn_kallsyms,
};

mod begin;
mod exits;
mod finish;
mod setup;

/// The live part of a recording: rings, reordering, the target's events and the
/// handler that turns records into the recording.
/// Records held in memory while a sample waits for a JVM's perf map, at most.
const MAX_HELD_BYTES: usize = 64 << 20;

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
    /// The processes whose threads the wake-up filter follows.
    pids: Vec<u32>,
}

/// What the loop watches to know when to stop.
struct Watch<'a> {
    started: Instant,
    duration: Option<Duration>,
    stop: Arc<AtomicBool>,
    /// Readable when a target process exits; recording stops when all have.
    pidfds: Vec<PidFd>,
    /// The launched command, reaped when it exits.
    child: Option<u32>,
    status: &'a StatusLine,
}

/// How the loop ended.
struct Stopped {
    reason: StopReason,
    exit_code: Option<i32>,
    duration: Duration,
    /// CLOCK_MONOTONIC when sampling stopped.
    end_time_ns: u64,
}

/// Records as `opts` says: setup, attach, loop, finish.
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

fn run_with<'scope, 'env>(
    opts: &RecordOptions,
    live: Option<LiveStart<'scope, 'env>>,
) -> Result<RecordSummary, RecordError> {
    // Setup. Ctrl-C, SIGTERM and SIGHUP stop the recording from now on: one that
    // arrives while setting up lets the setup finish, then ends the recording at once
    // with a whole file, instead of killing profile halfway.
    let stop = Arc::new(AtomicBool::new(false));
    let hangup = opts.hangup_stops.then_some(signal_hook::consts::SIGHUP);
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM]
        .into_iter()
        .chain(hangup)
    {
        // Registration fails only for forbidden signals; these three are allowed.
        let _ = signal_hook::flag::register(sig, Arc::clone(&stop));
    }
    let mut cfg = event_config(opts)?;
    let dwarf = opts.call_graph == CallGraph::Dwarf;
    let fd_limit = sys::raise_fd_limit();
    let cpus = super::cpus::online_cpus();
    let kallsyms = spawn_kallsyms();
    let rings = open_rings(&cpus, opts, dwarf)?;
    // Before any thread of the target can exit.
    let exits = ExitListener::open().ok();
    if exits.is_none() && !opts.off_cpu && opts.target != Target::AllCpus {
        // No exit reports (no CAP_NET_ADMIN): the threads that exit have no clock, and
        // only counts in samples give their totals (docs/accounting.md).
        cfg.exact = true;
    }
    let output_err = |source| RecordError::Output {
        path: output_name(opts),
        source,
    };
    let (file, mut pending) = open_output(opts)?;
    let Targets {
        mut pids,
        command,
        mut launched,
        existing_descendants,
        asked,
    } = Targets::find(opts)?;
    let pid = pids.first().copied().unwrap_or(0);
    let only_tids = match &opts.target {
        Target::Threads(tids) => Some(tids.as_slice()),
        _ => None,
    };
    // From here on a launched child must not be left waiting: KillOnError reaps it
    // if setting up fails.
    let mut guard = launch::KillOnError(launched.as_ref().map(|l| l.pid));
    let meta = meta(opts, &cfg, &pids, command);
    let mut writer: Writer =
        RecordingWriter::new(BufWriter::with_capacity(1 << 20, file), &meta).map_err(output_err)?;
    if live.is_some() {
        writer.enable_live();
    }
    let mut pidfds = Vec::with_capacity(pids.len());
    let mut i = 0;
    while i < pids.len() {
        match PidFd::open(pids[i] as i32) {
            Ok(fd) => pidfds.push(fd),
            // A descendant that ended already: nothing to record.
            Err(_) if i >= asked => {
                pids.remove(i);
                continue;
            }
            Err(_) => return Err(RecordError::NoSuchProcess(pids[i])),
        }
        i += 1;
    }
    if opts.target == Target::AllCpus {
        // No target to exit: the loop watches profile's own process, which outlives it.
        pidfds.push(
            PidFd::open(std::process::id() as i32).map_err(|e| RecordError::Kernel {
                context: "cannot open a pidfd".into(),
                source: e,
            })?,
        );
    }
    // Wake-ups before the target's events: none of its wake-ups is missed.
    let (wakeups, no_wakeups) = if opts.off_cpu {
        match super::wakeups::open_for(&rings, &cpus, &pids, only_tids) {
            Ok(w) => (Some(w), None),
            Err(why) => (None, Some(why.to_string())),
        }
    } else {
        (None, None)
    };
    let keep = Keep {
        pids: (opts.target.is_attach() && !opts.children).then(|| pids.iter().copied().collect()),
        tids: only_tids.map(|t| t.iter().copied().collect()),
    };
    let mut s = Session {
        rings,
        reorder: Reorder::new(),
        layouts: (Layouts::default(), None),
        events: if opts.off_cpu {
            TargetEvents::new(cfg, cpus.clone()).with_off_cpu(super::offcpu::STACKS_HZ)
        } else {
            TargetEvents::new(cfg, cpus.clone())
        }
        .with_fd_limit(fd_limit),
        handler: EventHandler::new(writer, dwarf, keep)
            .with_lazy_snapshots(opts.target == Target::AllCpus)
            .with_lifecycle(opts.target != Target::AllCpus)
            .with_jvm_perfmaps(opts.jvm_perfmap)
            .with_budgets(opts.runtime_budgets)
            .with_tables_budget(opts.tables_memory / 2),
        exits,
        pending_exits: Vec::new(),
        live: None,
        held: None,
        wakeups,
        pids: pids.clone(),
    };
    let mut kallsyms = kallsyms.and_then(|t| t.join().ok().flatten());
    if let Some((scope, sink)) = live {
        // Off-CPU classification keeps the kernel symbols it is given: the namer gets
        // a copy (copying is some 1 ms; reading /proc/kallsyms again 60 ms or more).
        let k = if opts.off_cpu {
            kallsyms.clone()
        } else {
            kallsyms.take()
        };
        let namer = naming::Namer::new(&opts.debug_dirs, k);
        // A host agent without a file keeps only what the coming windows need.
        let renew = opts.output.is_none() && !opts.off_cpu;
        if renew {
            s.handler.forget_exited_at_cuts();
        }
        s.live = Some(Live::new(
            scope,
            sink,
            meta.clone(),
            (namer, opts.tables_memory / 2),
            renew,
            opts.target == Target::AllCpus,
        ));
    }

    // Attach.
    let kernel_note = match &opts.target {
        Target::Pids(_) | Target::Threads(_) => {
            let mut note = None;
            for (i, &pid) in pids.iter().enumerate() {
                match s.events.attach(pid, only_tids, &s.rings, fd_limit) {
                    Ok(n) => note = note.or(n),
                    // A descendant that ended while attaching: nothing to record.
                    Err(RecordError::NoSuchProcess(_) | RecordError::ExitedDuringAttach(_))
                        if i >= asked =>
                    {
                        continue;
                    }
                    Err(e) => return Err(e),
                }
                s.keep_up();
                s.handler.snapshot_process(pid);
                // A CPython process's threads: their chains copied from the start.
                if s.events.capture().is_some() {
                    s.handler.python_prepare(pid);
                    register_captures(&s.events, &mut s.handler);
                }
                s.keep_up();
            }
            note
        }
        Target::Command(argv) => {
            // Not yet its command: what /proc says is the recorder's fork.
            let cpython = argv
                .first()
                .is_some_and(|p| super::python::command_runs_cpython(p));
            s.events.runs_cpython(pid, cpython);
            (s.events).runs_ruby(
                pid,
                argv.first()
                    .is_some_and(|p| super::python::command_runs_ruby(p)),
            );
            let note = s.events.open_thread(pid, pid, &s.rings)?;
            if let Some(l) = launched.as_mut() {
                l.release(&argv.join(" "))?;
            }
            note
        }
        Target::AllCpus => {
            // Every process's mappings and names before sampling starts: loading
            // their modules in the loop would leave the rings to overflow. Processes
            // started from here on are read at their first sample.
            for pid in process::all_pids() {
                s.handler.snapshot_process(pid);
            }
            s.events.attach_all_cpus(&s.rings)?;
            None
        }
    };
    // A JVM was asked for its perf map as its mappings were read: the first samples cut
    // in its code wait for that map (JitTracker::hold) while the rings are drained.
    // Recording has begun: the file takes its place (see `output`).
    if let Some(pending) = pending.as_mut() {
        pending.commit().map_err(output_err)?;
    }
    guard.0 = None;
    let begin = sys::monotonic_ns();
    // `-d` counts from here, where sampling has begun: attaching to many threads, or a
    // launch on a loaded machine, may take a second that is not the recording's.
    let begun = Instant::now();
    if let Some(live) = s.live.as_mut() {
        live.begin(begin);
    }
    let off_cpu_kallsyms = if opts.off_cpu { kallsyms.take() } else { None };
    s.begin_states(opts, begin, &pids, only_tids, off_cpu_kallsyms, no_wakeups);

    // Loop.
    let status = StatusLine::new(opts.progress, pid, pids.len(), launched.is_some());
    let watch = Watch {
        started: begun,
        duration: opts.duration,
        stop,
        pidfds,
        child: launched.as_ref().map(|l| l.pid),
        status: &status,
    };
    let stopped = s.main_loop(&watch);
    status.clear();

    // Finish.
    let target_note = if opts.target.is_attach() {
        pids.iter().find_map(|&p| kernel_thread_note(p))
    } else {
        None
    };
    let mut summary = s.finish(opts, stopped, watch.child, kallsyms, kernel_note)?;
    summary.target_note = target_note;
    summary.existing_descendants = existing_descendants;
    Ok(summary)
}

/// Threads blocked at the attach whose stacks are read from /proc, at most.
const BLOCKED_STACKS: usize = 512;

/// A wait this long without a stack copy has its stack read from /proc (dwarf mode).
const LONG_WAIT_NS: u64 = 20_000_000;
/// Buffered events past this many bytes are a chunk: at most this is lost to a full disk.
const CHUNK_BYTES: usize = 64 << 10;

impl Session<'_> {
    /// Reads the rings until the duration, a signal, a write error or the exit of
    /// every target process; flushes a chunk every half second or `CHUNK_BYTES`.
    fn main_loop(&mut self, w: &Watch) -> Stopped {
        let mut fds: Vec<i32> = self.rings.iter().map(|r| r.owner.raw()).collect();
        let rings = fds.len();
        fds.extend(w.pidfds.iter().map(PidFd::raw));
        let mut ready = Vec::new();
        let mut watermark = 0u64;
        let mut last_flush = Instant::now();
        let mut last_status = Instant::now();
        let mut last_tables = Instant::now();
        let mut exit_code = None;
        let reason = loop {
            if w.stop.load(Ordering::Relaxed) {
                break StopReason::Signal;
            }
            let mut timeout = 100i32;
            if let Some(d) = w.duration {
                let left = d.saturating_sub(w.started.elapsed());
                if left.is_zero() {
                    break StopReason::Duration;
                }
                timeout = timeout.min(left.as_millis() as i32 + 1);
            }
            if let Some(live) = &self.live {
                timeout = timeout.min(live.left().as_millis() as i32 + 1);
            }
            if self.handler.jit().waiting() {
                // A JVM's map is on its way: take it as soon as it comes.
                timeout = timeout.min(5);
            }
            if let Some(ms) = self.handler.python_poll_ms() {
                // Python frames are read after their sample: the sooner, the more of
                // them are still the sample's (see record/python.rs).
                timeout = timeout.min(ms);
            }
            if sys::poll_readable(&fds, timeout, &mut ready).is_err() {
                std::thread::sleep(Duration::from_millis(10));
            }
            let round_start = sys::monotonic_ns();
            if let Some(live) = self.live.as_mut() {
                // A due window ends here: its threads' clocks are read now.
                live.prepare(self.handler.accounting(), round_start);
            }
            for (id, time, period) in self.events.vary_periods() {
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
                    break StopReason::Requested;
                }
                if live.ready(handled) {
                    // Everything up to there is handled: the window ends there (where
                    // its clocks were read; later if records were held past that).
                    live.cut(&mut self.handler, handled, false);
                }
            }
            watermark = round_start;
            if self.handler.write_failed() {
                break StopReason::Error;
            }
            if last_flush.elapsed() > Duration::from_millis(500)
                || self.handler.writer().pending_bytes() > CHUNK_BYTES
            {
                if !self.handler.flush_chunk() {
                    break StopReason::Error;
                }
                last_flush = Instant::now();
            }
            if super::events::debug_tables_every().is_some_and(|e| last_tables.elapsed() >= e) {
                eprintln!("profile: tables: {}", self.handler.table_sizes());
                last_tables = Instant::now();
            }
            if last_status.elapsed() > Duration::from_millis(250) {
                let c = self.handler.counters();
                w.status
                    .show(w.started.elapsed(), c.samples, c.per_thread.len(), c.lost);
                last_status = Instant::now();
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

    /// Drains the rings and handles the records up to `upto`, in time order.
    /// Handles the records up to `upto`; returns the time up to which every record is
    /// handled: `upto`, or less when a sample is held for a JVM's perf map (see
    /// [`JitTracker::hold`](super::jit::JitTracker::hold)).
    /// `may_hold` is false at the end, when everything left is handled.
    fn process(&mut self, upto: u64, may_hold: bool) -> u64 {
        self.make_layouts();
        let layouts = &self.layouts.0;
        let first_new = self.reorder.drain(&mut self.rings, layouts);
        if self.handler.java().any() && self.handler.copies_stacks() {
            // Samples may be unwound only after the JVM exited (waiting behind a held
            // one, or drained at its exit): read their Java methods while it lives
            // (see `JavaFrames::warm`).
            let java = self.handler.java_mut();
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
        if self.handler.reads_ahead() {
            // Python frames move on as the thread runs: read what the samples just
            // drained will be checked against now, not a round later when they are
            // handled (see `PythonFrames::read_ahead`).
            let handler = &mut self.handler;
            self.reorder
                .peek_from(first_new, &self.rings, layouts, |rec| {
                    if let Record::Sample(s) = rec {
                        handler.python_drained(&s);
                    }
                });
        }
        register_captures(&self.events, &mut self.handler);
        // After the drain: a count of unloaded classes read now vouches for every
        // sample drained so far, even if the JVM exits before they are unwound.
        self.handler.java_mut().tick();
        if may_hold
            && let Some(t) = self.held
            && self.handler.jit().waiting()
            && self.reorder.buffered() < MAX_HELD_BYTES
        {
            // Nothing handled: the waiting records leave the rings if they crowd them.
            self.reorder.make_room(&mut self.rings);
            return t.saturating_sub(1).min(upto);
        }
        let handler = &mut self.handler;
        // Held records wait in memory: never more than this.
        handler.hold_for_jit_maps(may_hold && self.reorder.buffered() < MAX_HELD_BYTES);
        let mut dropped = 0;
        let held = self.reorder.release(
            &mut self.rings,
            upto,
            layouts,
            |rec| handler.handle(rec).is_ok(),
            || dropped += 1,
        );
        handler.count_dropped(dropped);
        handler.python_handled_upto(held.map_or(upto, |t| t.saturating_sub(1).min(upto)));
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
                self.handler.set_capture_ids(captures);
                self.handler.python_mut().capture_on();
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
        let (Some(w), Some(o)) = (self.wakeups.as_mut(), self.handler.off_cpu_mut()) else {
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

/// Threads the Python stage found (at their first sample without a copy, or when
/// their process was prepared): their chains are copied from now on; those that
/// ended (their EXIT records handled) are forgotten first, their ids free for others.
fn register_captures(events: &TargetEvents, handler: &mut EventHandler) {
    if let Some(c) = events.capture() {
        for tid in handler.python_mut().forgotten() {
            c.forget(tid);
        }
        for (tid, st) in handler.python_mut().registrations() {
            let _ = c.register(tid, &super::python::chain_entry(&st));
        }
    }
}
