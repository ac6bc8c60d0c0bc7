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

use super::accounting::{self, Accounting, EndCounts};
use super::attach::TargetEvents;
use super::events::{EventHandler, Keep, Writer};
use super::live::{Live, LiveSink};
use super::offcpu::OffCpuRecorder;
use super::rings::{CpuRing, Reorder, open_rings};
use super::status::StatusLine;
use super::summary::{OffCpuSummary, RecordSummary, StopReason};
use super::sys::{self, EventConfig, PidFd};
use super::target;
use super::taskstats::{ExitListener, ThreadExit};
use super::wakeups::Wakeups;
use super::{CallGraph, RecordError, RecordOptions, Target, read_sysctl};
use crate::format::{Meta, RecordingWriter, Summary};
use crate::replay::decode::{Layouts, Record};
use crate::symbolize::kernel::KernelSymbols;

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
pub fn run(opts: &RecordOptions) -> Result<RecordSummary, RecordError> {
    run_with(opts, None)
}

/// Records as `opts` says and hands `sink` a window of what was recorded every
/// [`LiveSink::interval`] (see [`super::live`]).
pub fn run_live(
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
    let cfg = event_config(opts)?;
    let dwarf = opts.call_graph == CallGraph::Dwarf;
    let fd_limit = sys::raise_fd_limit();
    let cpus = target::online_cpus();
    let kallsyms = spawn_kallsyms();
    let rings = open_rings(&cpus, opts, dwarf)?;
    // Before any thread of the target can exit.
    let exits = ExitListener::open().ok();
    let output_err = |source| RecordError::Output {
        path: output_name(opts),
        source,
    };
    // Without an output (a live consumer only), the events go nowhere.
    let (file, mut pending) = match &opts.output {
        Some(path) => {
            let (file, pending) = super::output::create(path).map_err(output_err)?;
            (file, Some(pending))
        }
        None => (
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/null")
                .map_err(output_err)?,
            None,
        ),
    };
    if let Some(user) = &opts.run_as {
        // The recording is theirs to read (still 0600).
        std::os::unix::fs::fchown(&file, Some(user.uid), Some(user.gid)).map_err(output_err)?;
    }
    // Attached processes' descendants already running are not reached by the
    // inherited events: attached too with --children=all, else named in the summary.
    let mut existing_descendants = Vec::new();
    // How many of `pids` were asked for; the rest are descendants, which may end
    // before they are attached to.
    let mut asked = usize::MAX;
    let (mut pids, command, mut launched) = match &opts.target {
        Target::Pids(given) => {
            let mut pids = target::tgids(given, RecordError::NoSuchProcess)?;
            let command = target::cmdline(pids[0]);
            let older = target::descendants(&pids);
            if opts.children && opts.existing_children {
                asked = pids.len();
                pids.extend(older.into_iter().map(|(p, _)| p));
            } else {
                existing_descendants = older;
            }
            (pids, command, None)
        }
        Target::Threads(tids) => {
            let pids = target::tgids(tids, RecordError::NoSuchThread)?;
            let command = target::cmdline(pids[0]);
            (pids, command, None)
        }
        Target::Command(argv) => {
            let l = target::launch_suspended(argv, opts.run_as.as_ref(), &opts.launch_env)?;
            (vec![l.pid], argv.clone(), Some(l))
        }
        Target::AllCpus => (Vec::new(), vec![ALL_PROCESSES.to_owned()], None),
    };
    let pid = pids.first().copied().unwrap_or(0);
    let only_tids = match &opts.target {
        Target::Threads(tids) => Some(tids.as_slice()),
        _ => None,
    };
    // From here on a launched child must not be left waiting: KillOnError reaps it
    // if setting up fails.
    let mut guard = target::KillOnError(launched.as_ref().map(|l| l.pid));
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
            Err(why) => (None, Some(why)),
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
        },
        handler: EventHandler::new(writer, dwarf, keep)
            .with_lazy_snapshots(opts.target == Target::AllCpus),
        exits,
        pending_exits: Vec::new(),
        live: None,
        held: None,
        wakeups,
        pids: pids.clone(),
    };
    s.handler.jit.enabled = opts.jvm_perfmap;
    let mut kallsyms = kallsyms.and_then(|t| t.join().ok().flatten());
    if let Some((scope, sink)) = live {
        // Off-CPU classification keeps the kernel symbols it is given: the namer gets
        // a copy (copying is some 1 ms; reading /proc/kallsyms again 60 ms or more).
        let k = if opts.off_cpu {
            kallsyms.clone()
        } else {
            kallsyms.take()
        };
        let namer = super::symbols::Namer::new(&opts.debug_dirs, k);
        // A host agent without a file keeps only what the coming windows need.
        let renew = opts.output.is_none() && !opts.off_cpu;
        s.live = Some(Live::new(scope, sink, meta.clone(), namer, renew));
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
                s.handler.snapshot_process(pid);
            }
            note
        }
        Target::Command(argv) => {
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
            for pid in target::all_pids() {
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
    // Attached: the recording's states begin here. Launched: at the exec, where the
    // events are enabled (records before it cannot be).
    let states_from = if opts.target.is_attach() { begin } else { 0 };
    s.handler.acct = if opts.off_cpu {
        Accounting::from_switches(states_from)
    } else {
        Accounting::new(s.events.cfg.exact)
    };
    for &(pid, tid, id) in &s.events.ids {
        s.handler.acct.opened(pid, tid, id);
    }
    for &(tid, ns) in &s.events.started {
        s.handler.acct.started(tid, ns);
    }
    if !s.handler.acct.is_exact() {
        s.exits = None;
    }
    if opts.off_cpu {
        let mut rec = OffCpuRecorder::new(s.events.switch_ids(), kallsyms.take());
        rec.attached_ns = begin;
        rec.tracker.window = Some((states_from, u64::MAX));
        rec.wakeups = s.wakeups.as_ref().map(|w| w.samples.clone());
        rec.no_wakeups = no_wakeups;
        if opts.target.is_attach() {
            let mut read_stacks = BLOCKED_STACKS;
            // Threads already blocked when the events were enabled switch in first.
            for &pid in &pids {
                for tid in target::list_tids(pid).unwrap_or_default() {
                    if only_tids.is_some_and(|t| !t.contains(&tid)) {
                        continue;
                    }
                    if let Some(d) = accounting::thread_run_delay_ns(pid, tid) {
                        rec.delay_at_start.insert(tid, (pid, d));
                    }
                    if let Some(state) = super::offcpu::state_now(pid, tid) {
                        // Its stack as `dump` reads it, for the first threads (a few
                        // hundred microseconds each, while the rings fill).
                        let stack = (read_stacks > 0)
                            .then(|| s.handler.stack_of_blocked(pid, tid, None))
                            .flatten();
                        read_stacks = read_stacks.saturating_sub(1);
                        rec.tracker
                            .blocked_at_start(pid, tid, rec.attached_ns, state, stack);
                    }
                }
            }
        } else {
            // The launched command's one thread, to check its runnable time at its
            // exit or the end (its threads to come start from zero).
            for &pid in &pids {
                if let Some(d) = accounting::thread_run_delay_ns(pid, pid) {
                    rec.delay_at_start.insert(pid, (pid, d));
                }
            }
        }
        s.handler.off_cpu = Some(rec);
    }

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

/// Why a kernel thread records few or no samples: it has no user space, and task-clock
/// counts only the time it runs (most kernel threads sleep).
fn kernel_thread_note(pid: u32) -> Option<String> {
    target::is_kernel_thread(pid).then(|| {
        let name = target::thread_name(pid, pid).unwrap_or_default();
        format!(
            "process {pid} ({name}) is a kernel thread: it has no user stacks, and it is \
             sampled only while it runs on a CPU (most kernel threads sleep); for the \
             kernel as a whole use `perf record -a`"
        )
    })
}

/// The event attributes for `opts`, after checking them.
fn event_config(opts: &RecordOptions) -> Result<EventConfig, RecordError> {
    if opts.frequency == 0 || opts.frequency > 100_000 {
        return Err(RecordError::Invalid(format!(
            "frequency {} Hz is outside 1..=100000",
            opts.frequency
        )));
    }
    if let Some(p) = opts.period_ns
        && !(MIN_PERIOD_NS..=MAX_PERIOD_NS).contains(&p)
    {
        return Err(RecordError::Invalid(format!(
            "period {p} ns is outside {MIN_PERIOD_NS}..={MAX_PERIOD_NS} (one sample per 10 us to 1 s of a thread's CPU time)"
        )));
    }
    match &opts.target {
        Target::Pids(p) | Target::Threads(p) if p.is_empty() => {
            return Err(RecordError::Invalid("no pid or tid given".into()));
        }
        Target::Threads(_) if opts.children => {
            return Err(RecordError::Invalid(
                "-t records only the given threads, not the processes they start; use -p PID --children to follow a process's children".into(),
            ));
        }
        Target::AllCpus if opts.off_cpu => {
            return Err(RecordError::Invalid(
                "-a samples CPUs, not threads: --off-cpu needs a target (-p PID or a COMMAND)"
                    .into(),
            ));
        }
        Target::AllCpus if opts.children => {
            return Err(RecordError::Invalid(
                "-a already records every process: --children is for -p PID".into(),
            ));
        }
        _ => {}
    }
    let dwarf = opts.call_graph == CallGraph::Dwarf;
    if dwarf && sys::REGS_MASK == 0 {
        return Err(RecordError::Invalid(format!(
            "--call-graph dwarf is not supported on {}: profile records the user registers \
             DWARF unwinding needs on x86_64 only; use --call-graph fp",
            std::env::consts::ARCH
        )));
    }
    let stack_size = if dwarf {
        // A multiple of 8 that keeps a whole sample record under the u16 size limit.
        (opts.stack_size.clamp(8, 63 * 1024) + 7) & !7
    } else {
        0
    };
    Ok(EventConfig {
        period_ns: opts
            .period_ns
            .unwrap_or((1_000_000_000 / opts.frequency).max(1)),
        stack_size,
        kernel: true,
        enable_on_exec: matches!(opts.target, Target::Command(_)),
        // With --off-cpu the SWITCH records give each thread's CPU time exactly
        // (accounting.rs): no count in samples, so the kernel keeps its cheap context
        // switch between the target's threads (docs/off-cpu.md, "Cost"). A CPU-wide
        // event (-a) has no thread to count: each sample weighs one period.
        exact: !opts.off_cpu && opts.target != Target::AllCpus,
    })
}

/// The command a `-a` recording names.
const ALL_PROCESSES: &str = "all processes (-a)";

/// The shortest and longest `-c` period: the bounds of the frequency (100 kHz, 1 Hz).
const MIN_PERIOD_NS: u64 = 10_000;
const MAX_PERIOD_NS: u64 = 1_000_000_000;

/// Kernel symbols do not depend on what is sampled: read them (some 60 ms of the
/// kernel formatting /proc/kallsyms, 15 ms of parsing) alongside the setup, and have
/// them before the first sample. Not during the recording: a reader competing with
/// the target for a CPU costs the target samples (a busy thread beside a task-clock
/// sampled thread measurably lowers the share of its CPU time that samples cover),
/// and not after it, where the names are awaited.
fn spawn_kallsyms() -> Option<std::thread::JoinHandle<Option<KernelSymbols>>> {
    std::thread::Builder::new()
        .name("kallsyms".into())
        .spawn(|| KernelSymbols::load(std::path::Path::new("/proc/kallsyms")).ok())
        .ok()
}

fn meta(opts: &RecordOptions, cfg: &EventConfig, pids: &[u32], command: Vec<String>) -> Meta {
    let attach = opts.target.is_attach();
    let all = opts.target == Target::AllCpus;
    Meta {
        all_cpus: all,
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        command,
        pid: pids.first().copied(),
        launched: !attach && !all,
        pids: if attach && pids.len() > 1 {
            pids.to_vec()
        } else {
            Vec::new()
        },
        tids: match &opts.target {
            Target::Threads(t) => t.clone(),
            _ => Vec::new(),
        },
        event: if all {
            Meta::ALL_CPUS_EVENT
        } else {
            "task-clock"
        }
        .to_owned(),
        sample_period_ns: cfg.period_ns,
        // With -c, the rate the period stands for.
        frequency_hz: match opts.period_ns {
            Some(p) => (1_000_000_000 / p).max(1),
            None => opts.frequency,
        },
        call_graph: opts.call_graph.name().to_owned(),
        stack_size: cfg.stack_size,
        start_time_ns: sys::monotonic_ns(),
        start_unix_ns: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
        hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default(),
        kernel: read_sysctl("osrelease"),
        cpu_model: crate::format::cpu_model(),
        off_cpu: opts.off_cpu,
    }
}

/// The output's name for messages.
fn output_name(opts: &RecordOptions) -> String {
    opts.output.as_ref().map_or_else(
        || "(no output file)".to_owned(),
        |p| p.display().to_string(),
    )
}

impl Session<'_> {
    /// Reads the rings until the duration, a signal, a write error or the exit of
    /// every target process; flushes a chunk at least every half second.
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
            if self.handler.jit.waiting() {
                // A JVM's map is on its way: take it as soon as it comes.
                timeout = timeout.min(5);
            }
            if self.handler.python.any() {
                // Python frames are read after their sample: the sooner, the more of
                // them are still the sample's (see record/python.rs).
                timeout = timeout.min(super::python::POLL_MS);
            }
            if sys::poll_readable(&fds, timeout, &mut ready).is_err() {
                std::thread::sleep(Duration::from_millis(10));
            }
            let round_start = sys::monotonic_ns();
            if let Some(live) = self.live.as_mut() {
                // A due window ends here: its threads' clocks are read now.
                live.prepare(&self.handler.acct, round_start);
            }
            self.events.vary_periods();
            self.handler.jit.poll(Duration::ZERO);
            if self.handler.jit.prune_due() {
                // Exited JVMs keep only the names their frames need.
                let h = &mut self.handler;
                h.jit.prune(h.writer.frames());
            }
            // Records up to the previous round's start are all in the rings by now.
            let handled = self.process(watermark, true);
            // Long waits without a stack: read while they last.
            self.handler
                .stack_long_waits(handled.saturating_sub(LONG_WAIT_NS));
            self.take_exits(false);
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
            if self.handler.write_error.is_some() {
                break StopReason::Error;
            }
            if last_flush.elapsed() > Duration::from_millis(500)
                || self.handler.writer.pending_bytes() > 1 << 18
            {
                if let Err(e) = self.handler.writer.flush_chunk() {
                    self.handler.write_error = Some(e);
                    break StopReason::Error;
                }
                last_flush = Instant::now();
            }
            if super::events::debug_tables_every().is_some_and(|e| last_tables.elapsed() >= e) {
                eprintln!("profile: tables: {}", self.handler.table_sizes());
                last_tables = Instant::now();
            }
            if last_status.elapsed() > Duration::from_millis(250) {
                let c = &self.handler.counters;
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
                    exit_code = target::wait_child(pid, true);
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
        // Made again only when new tracepoint events were opened, not every round.
        let ids = self.wakeups.as_ref().map_or(0, |w| w.ids.len());
        if self.layouts.1 != Some(ids) {
            let mut layouts = Layouts::one(sys::sample_layout(&self.events.cfg));
            if let Some(w) = &self.wakeups {
                layouts.add(sys::tracepoint_layout(), w.ids.iter().copied());
            }
            self.layouts = (layouts, Some(ids));
        }
        let layouts = &self.layouts.0;
        let first_new = self.reorder.drain(&mut self.rings, layouts);
        if self.handler.java.any() {
            // Samples may be unwound only after the JVM exited (waiting behind a held
            // one, or drained at its exit): read their Java methods while it lives
            // (see `JavaFrames::warm`).
            let java = &mut self.handler.java;
            // Those drained before a JVM's tables could be read, again.
            let from = if java.rewarm_due() { 0 } else { first_new };
            self.reorder.peek_from(from, layouts, |rec| {
                if let Record::Sample(s) = rec
                    && let Some([ip, sp, bp]) = s.regs
                {
                    java.warm(s.pid, (ip, sp, bp, s.stack));
                }
            });
        }
        // After the drain: a count of unloaded classes read now vouches for every
        // sample drained so far, even if the JVM exits before they are unwound.
        self.handler.java.tick();
        if may_hold
            && let Some(t) = self.held
            && self.handler.jit.waiting()
            && self.reorder.buffered() < MAX_HELD_BYTES
        {
            return t.saturating_sub(1).min(upto);
        }
        let handler = &mut self.handler;
        // Held records wait in memory: never more than this.
        handler.jit.holding = may_hold && self.reorder.buffered() < MAX_HELD_BYTES;
        let mut dropped = 0;
        let held = self.reorder.release(
            upto,
            layouts,
            |rec| handler.handle(rec).is_ok(),
            || dropped += 1,
        );
        handler.counters.dropped += dropped;
        self.held = held;
        held.map_or(upto, |t| t.saturating_sub(1).min(upto))
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
                tids.extend(target::list_tids(pid).unwrap_or_default());
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

    /// Gives the accounting the exits the kernel reported, once it knows their
    /// threads; exits of other processes are forgotten after a few seconds, and all
    /// unmatched ones at the `last` call.
    fn take_exits(&mut self, last: bool) {
        let Some(listener) = self.exits.as_mut() else {
            return;
        };
        let now = Instant::now();
        let pending = &mut self.pending_exits;
        listener.drain(|e| pending.push((e, now)));
        let acct = &mut self.handler.acct;
        let off_cpu = &mut self.handler.off_cpu;
        pending.retain(|(e, at)| {
            let known = acct.thread_exit(e.tid, e.tgid, e.cpu_ns);
            if known && let Some(o) = off_cpu.as_mut() {
                o.delay_at_exit(e.tid, e.run_delay_ns);
            }
            !known && !last && now.duration_since(*at) < Duration::from_secs(3)
        });
    }

    /// Stops sampling, handles what the rings still hold, names every frame and
    /// writes the summary.
    fn finish(
        mut self,
        opts: &RecordOptions,
        stopped: Stopped,
        child: Option<u32>,
        mut kallsyms: Option<KernelSymbols>,
        kernel_note: Option<String>,
    ) -> Result<RecordSummary, RecordError> {
        // What the threads still running used, from their own clocks, as close as can
        // be to the moment sampling stops (accounting.md).
        let alive: std::collections::HashMap<u32, u64> = if self.handler.acct.is_exact() {
            let threads: Vec<(u32, u32)> = self.handler.acct.threads().collect();
            threads
                .into_iter()
                .filter_map(|(pid, tid)| Some((tid, accounting::thread_cpu_ns(pid, tid)?)))
                .collect()
        } else {
            Default::default()
        };
        // The kernel's run-queue delays now, as near the end as the clocks above.
        let delays_now: std::collections::HashMap<u32, u64> = self
            .handler
            .off_cpu
            .as_ref()
            .map_or_else(Default::default, |o| {
                o.delay_at_start
                    .iter()
                    .map(|(&tid, &(pid, _))| (tid, pid))
                    .chain(o.tracker.born.keys().map(|&t| (t, t)))
                    .filter_map(|(tid, pid)| {
                        Some((tid, accounting::thread_run_delay_ns(pid, tid)?))
                    })
                    .collect()
            });
        self.events.disable();
        // Records of the last moments, past the end, count as at the end.
        self.handler.acct.set_end(stopped.end_time_ns);
        if let Some(o) = self.handler.off_cpu.as_mut() {
            let from = o.tracker.window.map_or(0, |w| w.0);
            o.tracker.window = Some((from, stopped.end_time_ns));
        }
        let refiltered = self.wakeups.as_ref().map_or(0, |w| w.refiltered);
        // Closed: no more wake-ups; their ids stay known for the records in the rings.
        if let Some(w) = self.wakeups.as_mut() {
            w.close();
        }
        // The last maps first, so that samples still held are unwound with them.
        let jit_maps = self.handler.jit.finish();
        self.process(u64::MAX, false);
        self.take_exits(true);
        let thread_clocks = self.exits.take().is_some();
        self.handler.finish_off_cpu(stopped.end_time_ns);
        let unclassified = !self.events.cfg.kernel;
        let off_cpu = self.handler.off_cpu.as_mut().map(|o| {
            kallsyms = kallsyms.take().or_else(|| o.kallsyms.take());
            OffCpuSummary {
                intervals: o.tracker.intervals,
                stacked: o.tracker.stacked,
                borrowed: o.tracker.borrowed,
                unmatched: o.tracker.unmatched,
                unclassified,
                woken: o.tracker.woken,
                off_cpu_ns: o.tracker.off_cpu_ns,
                stacked_ns: o.tracker.stacked_ns,
                read_from_proc: o.tracker.read_from_proc,
                no_wakeups: o.no_wakeups.clone(),
                refiltered,
                runnable_check: {
                    o.check_at_end(stopped.end_time_ns, |pid, tid| {
                        delays_now
                            .get(&tid)
                            .copied()
                            .or_else(|| accounting::thread_run_delay_ns(pid, tid))
                    });
                    o.check.summary()
                },
            }
        });
        let opened = self.events.counts_by_thread();
        let cpu_time_ns = opened.values().sum();
        let (unsampled_samples, unsampled_ns) = self
            .handler
            .write_unsampled(&EndCounts { opened, alive }, stopped.end_time_ns);
        let exact = self.handler.acct.is_exact();
        let acct_note = self.events.acct_note.take();
        let event_fds = self.events.fd_count() + self.rings.len();
        let ring_bytes = self.rings.iter().map(|r| r.ring.bytes()).sum();
        let rings = self.rings.len();
        let period_ns = self.events.cfg.period_ns;
        drop(self.events); // closes every event: the target is left as it was

        let mut exit_code = stopped.exit_code;
        if let Some(pid) = child
            && exit_code.is_none()
        {
            exit_code = target::finish_child(pid);
        }
        let h = &mut self.handler;
        let summary = Summary {
            end_time_ns: stopped.end_time_ns,
            // Every SAMPLE in the file, the [unsampled] ones included.
            samples: h.counters.samples + unsampled_samples,
            lost: h.counters.lost,
            throttled: h.counters.throttled,
            dropped: h.counters.dropped,
            cpu_time_ns,
            exit_code,
            stop_reason: stopped.reason.as_str().to_owned(),
            attached_ns: h.off_cpu.as_ref().map_or(0, |o| o.attached_ns),
            cpu_accounting: if exact { "exact" } else { "estimated" }.to_owned(),
        };
        // Name every unique frame once, while the target's files are reachable.
        let (symbols, symbol_stats) = match self.live.as_mut() {
            // Live without a file: the windows had their names.
            Some(live) if opts.output.is_none() => {
                live.cut(h, stopped.end_time_ns.max(live.start_ns()), true);
                live.finish(h, false);
                (Vec::new(), super::SymbolStats::default())
            }
            _ => {
                if let Some(live) = self.live.as_mut() {
                    // The last window first; the file gets every name below.
                    live.cut(h, stopped.end_time_ns.max(live.start_ns()), true);
                    live.finish(h, false);
                }
                let (symbols, mut stats) = super::symbols::symbolize(
                    h.writer.frames(),
                    h.writer.mappings(),
                    h.mapping_modules(),
                    &opts.debug_dirs,
                    kallsyms,
                    &h.counters.uids,
                    &jit_maps,
                );
                stats.perf_map_notes.extend(h.jit.notes());
                let mut symbols = symbols;
                symbols.extend(h.python.symbols(h.writer.frames()));
                symbols.sort_by_key(|s| s.frame);
                stats.python_notes = h.python.notes();
                super::symbols::name_java(&mut symbols, &mut stats, h.writer.frames(), &h.java);
                (symbols, stats)
            }
        };
        if h.write_error.is_none()
            && let Err(e) = h.writer.symbols(&symbols)
        {
            h.write_error = Some(e);
        }
        let output_err = |source| RecordError::Output {
            path: output_name(opts),
            source,
        };
        let EventHandler {
            writer,
            counters: c,
            write_error,
            sampled_ns,
            ..
        } = self.handler;
        if let Some(e) = write_error {
            return Err(output_err(e));
        }
        let out = writer.finish(&summary).map_err(output_err)?;
        let bytes = out.get_ref().metadata().map(|m| m.len()).unwrap_or(0);
        Ok(RecordSummary {
            output: opts.output.clone(),
            samples: c.samples,
            lost: c.lost,
            throttled: c.throttled,
            dropped: c.dropped,
            threads: c.per_thread.len(),
            processes: c.pids.len(),
            duration: stopped.duration,
            bytes,
            stop_reason: stopped.reason,
            exit_code,
            event_fds,
            ring_bytes,
            rings,
            cpu_time_ns,
            period_ns,
            exact,
            thread_clocks,
            sampled_ns,
            unsampled_ns,
            truncated_stacks: c.truncated,
            other_process_samples: c.other_process_samples,
            other_thread_samples: c.other_thread_samples,
            existing_descendants: Vec::new(),
            kernel_note: kernel_note
                .or(symbol_stats.kernel_note.clone())
                .or(acct_note),
            target_note: None,
            symbols: symbol_stats,
            off_cpu,
        })
    }
}
