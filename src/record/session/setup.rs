//! The first phase of a recording: the options checked into the events' attributes,
//! the rings and the output opened, the target found (or launched, held before its
//! exec), the recording's metadata written and a live consumer started.

use std::fs::File;
use std::io::BufWriter;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::super::attach::TargetEvents;
use super::super::events::{EventHandler, Keep, Writer};
use super::super::launch::{self, Launched};
use super::super::live::Live;
use super::super::output::PendingOutput;
use super::super::reorder::Reorder;
use super::super::rings::{CpuRing, open_rings};
use super::super::sys::{self, EventConfig, PidFd};
use super::super::taskstats::ExitListener;
use super::super::wakeups::Wakeups;
use super::super::{CallGraph, RecordError, RecordOptions, Target, read_sysctl};
use super::{LiveStart, Session};
use crate::format::{Meta, RecordingWriter};
use crate::process;
use crate::replay::decode::Layouts;
use crate::symbolize::frames as naming;
use crate::symbolize::kernel::KernelSymbols;

/// A recording set up: the rings, the output and the handler ready, the target found
/// or launched (held before its exec), nothing attached yet.
pub(super) struct Setup<'a> {
    pub opts: &'a RecordOptions,
    pub session: Session<'a>,
    /// Kills and reaps a launched command if attaching fails; dropped before it.
    pub guard: launch::KillOnError,
    /// The launched command, held before its exec.
    pub launched: Option<Launched>,
    /// Descendants already running that the inherited events do not reach.
    pub existing_descendants: Vec<(u32, String)>,
    /// How many of the session's pids were asked for (the rest are descendants).
    pub asked: usize,
    /// The output file, put in its place once recording begins.
    pub pending: Option<PendingOutput>,
    /// Set by Ctrl-C, SIGTERM (and SIGHUP if asked): recording stops.
    pub stop: Arc<AtomicBool>,
    /// Readable when a target process exits.
    pub pidfds: Vec<PidFd>,
    pub kallsyms: Option<KernelSymbols>,
    /// `--off-cpu`: why the wake-up events could not be opened.
    pub no_wakeups: Option<String>,
}

impl<'a> Setup<'a> {
    /// Checks `opts`, opens the rings and the output, finds or launches the target
    /// and starts a live consumer if one is given.
    pub(super) fn new(
        opts: &'a RecordOptions,
        live: Option<LiveStart<'a, '_>>,
    ) -> Result<Setup<'a>, RecordError> {
        let stop = stop_on_signals(opts);
        let mut cfg = event_config(opts)?;
        let dwarf = opts.call_graph == CallGraph::Dwarf;
        let fd_limit = sys::raise_fd_limit();
        let cpus = super::super::cpus::online_cpus();
        let kallsyms = spawn_kallsyms();
        let rings = open_rings(&cpus, opts, dwarf)?;
        // Before any thread of the target can exit.
        let exits = ExitListener::open().ok();
        if exits.is_none() && !opts.off_cpu && opts.target != Target::AllCpus {
            // No exit reports (no CAP_NET_ADMIN): the threads that exit have no clock,
            // and only counts in samples give their totals (docs/accounting.md).
            cfg.exact = true;
        }
        let (file, pending) = open_output(opts)?;
        let Targets {
            mut pids,
            command,
            launched,
            existing_descendants,
            asked,
        } = Targets::find(opts)?;
        // From here on a launched child must not be left waiting: KillOnError reaps
        // it if setting up fails.
        let guard = launch::KillOnError(launched.as_ref().map(|l| l.pid));
        let meta = meta(opts, &cfg, &pids, command);
        let mut writer: Writer =
            RecordingWriter::new(BufWriter::with_capacity(1 << 20, file), &meta)
                .map_err(|e| output_error(opts, e))?;
        if live.is_some() {
            writer.enable_live();
        }
        let pidfds = watch_pids(opts, &mut pids, asked)?;
        // Wake-ups before the target's events: none of its wake-ups is missed.
        let (wakeups, no_wakeups) = open_wakeups(opts, &rings, &cpus, &pids);
        let mut events = TargetEvents::new(cfg, cpus).with_fd_limit(fd_limit);
        if opts.off_cpu {
            events = events.with_off_cpu(super::super::offcpu::STACKS_HZ);
        }
        let session = Session {
            rings,
            reorder: Reorder::new(),
            layouts: (Layouts::default(), None),
            events,
            handler: event_handler(opts, writer, &pids),
            exits,
            pending_exits: Vec::new(),
            live: None,
            held: None,
            wakeups,
            pids,
        };
        let mut setup = Setup {
            opts,
            session,
            guard,
            launched,
            existing_descendants,
            asked,
            pending,
            stop,
            pidfds,
            kallsyms: kallsyms.and_then(|t| t.join().ok().flatten()),
            no_wakeups,
        };
        if let Some(live) = live {
            setup.start_live(live, meta);
        }
        Ok(setup)
    }

    /// Starts the live consumer's worker, with its namer.
    fn start_live(&mut self, (scope, sink): LiveStart<'a, '_>, meta: Meta) {
        let opts = self.opts;
        // Off-CPU classification keeps the kernel symbols it is given: the namer gets
        // a copy (copying is some 1 ms; reading /proc/kallsyms again 60 ms or more).
        let k = if opts.off_cpu {
            self.kallsyms.clone()
        } else {
            self.kallsyms.take()
        };
        let namer = naming::Namer::new(&opts.debug_dirs, k);
        // A host agent without a file keeps only what the coming windows need.
        let renew = opts.output.is_none() && !opts.off_cpu;
        if renew {
            self.session.handler.forget_exited_at_cuts();
        }
        self.session.live = Some(Live::new(
            scope,
            sink,
            meta,
            (namer, opts.tables_memory / 2),
            renew,
            opts.target == Target::AllCpus,
        ));
    }
}

/// `--off-cpu`'s wake-up events on every CPU, following `pids`; or why they could
/// not be opened.
fn open_wakeups(
    opts: &RecordOptions,
    rings: &[CpuRing],
    cpus: &[u32],
    pids: &[u32],
) -> (Option<Wakeups>, Option<String>) {
    if !opts.off_cpu {
        return (None, None);
    }
    match super::super::wakeups::open_for(rings, cpus, pids, only_tids(opts)) {
        Ok(w) => (Some(w), None),
        Err(why) => (None, Some(why.to_string())),
    }
}

/// The handler of the recording's records, writing into `writer`, keeping the samples
/// `opts` asks for of `pids`.
fn event_handler(opts: &RecordOptions, writer: Writer, pids: &[u32]) -> EventHandler {
    let keep = Keep {
        pids: (opts.target.is_attach() && !opts.children).then(|| pids.iter().copied().collect()),
        tids: only_tids(opts).map(|t| t.iter().copied().collect()),
    };
    EventHandler::new(writer, opts.call_graph == CallGraph::Dwarf, keep)
        .with_lazy_snapshots(opts.target == Target::AllCpus)
        .with_lifecycle(opts.target != Target::AllCpus)
        .with_jvm_perfmaps(opts.jvm_perfmap)
        .with_budgets(opts.runtime_budgets)
        .with_tables_budget(opts.tables_memory / 2)
}

/// Ctrl-C, SIGTERM and SIGHUP (if `opts` says so) stop the recording from now on: one
/// that arrives while setting up lets the setup finish, then ends the recording at
/// once with a whole file, instead of killing profile halfway.
fn stop_on_signals(opts: &RecordOptions) -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let hangup = opts.hangup_stops.then_some(signal_hook::consts::SIGHUP);
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM]
        .into_iter()
        .chain(hangup)
    {
        // Registration fails only for forbidden signals; these three are allowed.
        let _ = signal_hook::flag::register(sig, Arc::clone(&stop));
    }
    stop
}

/// A pidfd for each process of `pids` (readable when it exits), or for profile's own
/// process with `-a`. Descendants past the `asked` first that ended already leave
/// `pids`: nothing to record.
fn watch_pids(
    opts: &RecordOptions,
    pids: &mut Vec<u32>,
    asked: usize,
) -> Result<Vec<PidFd>, RecordError> {
    let mut pidfds = Vec::with_capacity(pids.len());
    let mut i = 0;
    while i < pids.len() {
        match PidFd::open(pids[i] as i32) {
            Ok(fd) => pidfds.push(fd),
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
    Ok(pidfds)
}

/// The threads `-t` names, alone recorded.
pub(super) fn only_tids(opts: &RecordOptions) -> Option<&[u32]> {
    match &opts.target {
        Target::Threads(tids) => Some(tids.as_slice()),
        _ => None,
    }
}

/// The error of writing the output.
pub(super) fn output_error(opts: &RecordOptions, source: std::io::Error) -> RecordError {
    RecordError::Output {
        path: output_name(opts),
        source,
    }
}

/// The processes a recording is of.
pub(super) struct Targets {
    pub pids: Vec<u32>,
    /// The command line the recording names.
    pub command: Vec<String>,
    /// The launched command, held before its exec.
    pub launched: Option<Launched>,
    /// Descendants already running that the inherited events do not reach (named in
    /// the summary; attached too with `--children=all`).
    pub existing_descendants: Vec<(u32, String)>,
    /// How many of `pids` were asked for; the rest are descendants, which may end
    /// before they are attached to.
    pub asked: usize,
}

impl Targets {
    /// Finds the processes `opts.target` names, or launches its command.
    pub(super) fn find(opts: &RecordOptions) -> Result<Targets, RecordError> {
        let mut t = Targets {
            pids: Vec::new(),
            command: Vec::new(),
            launched: None,
            existing_descendants: Vec::new(),
            asked: usize::MAX,
        };
        match &opts.target {
            Target::Pids(given) => {
                t.pids = process::tgids(given, RecordError::NoSuchProcess)?;
                t.command = process::cmdline(t.pids[0]);
                let older = process::descendants(&t.pids);
                if opts.children && opts.existing_children {
                    t.asked = t.pids.len();
                    t.pids.extend(older.into_iter().map(|(p, _)| p));
                } else {
                    t.existing_descendants = older;
                }
            }
            Target::Threads(tids) => {
                t.pids = process::tgids(tids, RecordError::NoSuchThread)?;
                t.command = process::cmdline(t.pids[0]);
            }
            Target::Command(argv) => {
                let l = launch::launch_suspended(argv, opts.run_as.as_ref(), &opts.launch_env)?;
                t.pids = vec![l.pid];
                t.command = argv.clone();
                t.launched = Some(l);
            }
            Target::AllCpus => t.command = vec![ALL_PROCESSES.to_owned()],
        }
        Ok(t)
    }
}

/// The output file, not yet in its place (see `output`); `/dev/null` without one (a
/// live consumer only: the events go nowhere).
pub(super) fn open_output(
    opts: &RecordOptions,
) -> Result<(File, Option<PendingOutput>), RecordError> {
    let output_err = |e| output_error(opts, e);
    let (file, pending) = match &opts.output {
        Some(path) => {
            let (file, pending) = super::super::output::create(path).map_err(output_err)?;
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
    Ok((file, pending))
}

/// Why a kernel thread records few or no samples: it has no user space, and task-clock
/// counts only the time it runs (most kernel threads sleep).
pub(super) fn kernel_thread_note(pid: u32) -> Option<String> {
    process::is_kernel_thread(pid).then(|| {
        let name = process::thread_name(pid, pid).unwrap_or_default();
        format!(
            "process {pid} ({name}) is a kernel thread: it has no user stacks, and it is \
             sampled only while it runs on a CPU (most kernel threads sleep); for the \
             kernel as a whole use `perf record -a`"
        )
    })
}

/// The event attributes for `opts`, after checking them.
pub(super) fn event_config(opts: &RecordOptions) -> Result<EventConfig, RecordError> {
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
        // A sampled function's frame (a leaf's locals, a prologue's pushes) is
        // rarely larger: enough to read its return address from.
        leaf_stack: if dwarf || sys::REGS_MASK == 0 { 0 } else { 256 },
        kernel: true,
        enable_on_exec: matches!(opts.target, Target::Command(_)),
        // Counts in samples only when asked (`--exact-weights`): they cost the target
        // the kernel's slow context switch (docs/accounting.md). Without them each
        // thread's total is still its own clock and samples weigh their period
        // (accounting.rs); with --off-cpu the SWITCH records give each thread's CPU
        // time. A CPU-wide event (-a) has no thread to count.
        exact: opts.exact_weights && !opts.off_cpu && opts.target != Target::AllCpus,
        // Per process: see `TargetEvents::wakes`.
        wake_each: false,
    })
}

/// The command a `-a` recording names.
const ALL_PROCESSES: &str = "all processes (-a)";

/// The shortest and longest `-c` period: the bounds of the frequency (100 kHz, 1 Hz).
const MIN_PERIOD_NS: u64 = 10_000;
const MAX_PERIOD_NS: u64 = 1_000_000_000;

/// Kernel symbols do not depend on what is sampled: read them (some 30 to 60 ms of
/// the kernel formatting /proc/kallsyms, 15 ms of parsing; the formatting saved when
/// the copy kept by the last recording is this boot's: `kernel_cache`) alongside the
/// setup, and have
/// them before the first sample. Not during the recording: a reader competing with
/// the target for a CPU costs the target samples (a busy thread beside a task-clock
/// sampled thread measurably lowers the share of its CPU time that samples cover),
/// and not after it, where the names are awaited.
pub(super) fn spawn_kallsyms() -> Option<std::thread::JoinHandle<Option<KernelSymbols>>> {
    std::thread::Builder::new()
        .name("kallsyms".into())
        .spawn(|| {
            let dir = crate::symbolize::kernel_cache::default_dir();
            crate::symbolize::kernel_cache::load(dir.as_deref()).ok()
        })
        .ok()
}

pub(super) fn meta(
    opts: &RecordOptions,
    cfg: &EventConfig,
    pids: &[u32],
    command: Vec<String>,
) -> Meta {
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
        call_graph: opts.call_graph.stored(),
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
pub(super) fn output_name(opts: &RecordOptions) -> String {
    opts.output.as_ref().map_or_else(
        || "(no output file)".to_owned(),
        |p| p.display().to_string(),
    )
}
