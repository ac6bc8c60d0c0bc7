//! One recording from start to end: open the events, read the per-CPU rings in time
//! order, turn kernel records into recording events (unwinding user stacks on the
//! way), stop on duration, signal or target exit, and leave the target exactly as it
//! was: every event is disabled and closed by the owners' `Drop`, whatever way this
//! function returns.

use std::collections::HashMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::accounting::{self, Accounting, EndCounts, PeriodJitter};
use super::addrspace::AddressSpaces;
use super::events::LoadedModule;
use super::parse::{parse_record_as, record_time, split_records};
use super::status::StatusLine;
use super::sys::{self, EventConfig, EventFd, PidFd, Ring};
use super::target::{self, Launched};
use super::{CallGraph, RecordError, RecordOptions, Target, read_sysctl};
use crate::format::{
    Frame, FrameKind, Meta, RecordingWriter, Sample, Summary, ThreadEvent, Truncation,
};
use crate::unwind::Unwinder;

/// What a finished recording holds; the CLI prints it.
#[derive(Debug, Clone, Default)]
pub struct RecordSummary {
    pub output: PathBuf,
    pub samples: u64,
    pub lost: u64,
    pub throttled: u64,
    /// Kernel records profile could not decode (counted, never silently dropped).
    pub dropped: u64,
    /// Threads that had at least one sample.
    pub threads: usize,
    pub processes: usize,
    pub duration: Duration,
    pub bytes: u64,
    pub stop_reason: String,
    /// The launched command's exit code (128 + signal if killed by one).
    pub exit_code: Option<i32>,
    /// Perf event file descriptors opened, and bytes of ring buffer mapped.
    pub event_fds: usize,
    pub ring_bytes: usize,
    /// Ring buffers (one per CPU).
    pub rings: usize,
    /// CPU time the target used while sampled (from the events' counts), nanoseconds.
    pub cpu_time_ns: u64,
    /// CPU nanoseconds one sample stands for (with exact accounting, on average).
    pub period_ns: u64,
    /// Whether each thread's samples and `[unsampled]` remainder add up to its own CPU
    /// time (false on kernels before 6.12: samples weigh one period each).
    pub exact: bool,
    /// CPU time the samples' stacks stand for, and the `[unsampled]` rest.
    pub sampled_ns: u64,
    pub unsampled_ns: u64,
    /// Samples whose user stack was cut (marked in the recording).
    pub truncated_stacks: u64,
    /// Samples of other processes than the attached one, left out (attach mode
    /// without `children`).
    pub other_process_samples: u64,
    /// Set when kernel frames could not be recorded (not permitted).
    pub kernel_note: Option<String>,
    /// Unique frames named and left unnamed, and the time naming them took.
    pub symbols: super::symbols::SymbolStats,
}

/// Per-CPU ring plus the dummy event that owns it.
pub(super) struct CpuRing {
    owner: EventFd,
    ring: Ring,
}

/// The events opened on one thread that existed at attach (or on the launched child).
pub(super) struct ThreadFds {
    fds: Vec<EventFd>,
}

type Writer = RecordingWriter<BufWriter<File>>;

pub(super) struct Session {
    pub(super) cfg: EventConfig,
    pub(super) cpus: Vec<u32>,
    pub(super) rings: Vec<CpuRing>,
    pub(super) opened: HashMap<u32, ThreadFds>,
    pub(super) writer: Writer,
    pub(super) output: PathBuf,
    pub(super) spaces: AddressSpaces,
    pub(super) modules: HashMap<String, Option<Arc<LoadedModule>>>,
    /// The loaded module and bias of every mapping, by mapping id.
    pub(super) mapping_modules: Vec<Option<(Arc<LoadedModule>, u64)>>,
    pub(super) unwinder: Unwinder,
    pub(super) dwarf: bool,
    // Reordering: raw records from all rings, and (time, offset, len) of each.
    pub(super) raw: Vec<u8>,
    pub(super) index: Vec<(u64, usize, usize)>,
    // Scratch for one sample.
    pub(super) frames: Vec<Frame>,
    pub(super) addrs: Vec<u64>,
    // Counters.
    pub(super) samples: u64,
    pub(super) lost: u64,
    pub(super) throttled: u64,
    pub(super) dropped: u64,
    pub(super) truncated: u64,
    pub(super) per_thread: HashMap<u32, u64>,
    pub(super) pids: std::collections::HashSet<u32>,
    /// Keep only this process's samples (attach mode without `children`).
    pub(super) only_pid: Option<u32>,
    pub(super) other_process_samples: u64,
    pub(super) write_error: Option<std::io::Error>,
    pub(super) acct: Accounting,
    /// Draws each event's sample period (see [`PeriodJitter`]), and which opened
    /// event gets a new one next.
    pub(super) jitter: PeriodJitter,
    pub(super) vary_next: usize,
    /// Explains why accounting is estimated, when the kernel refused exact counts.
    pub(super) acct_note: Option<String>,
    pub(super) sampled_ns: u64,
}

pub fn run(opts: &RecordOptions) -> Result<RecordSummary, RecordError> {
    if opts.frequency == 0 || opts.frequency > 100_000 {
        return Err(RecordError::Invalid(format!(
            "frequency {} Hz is outside 1..=100000",
            opts.frequency
        )));
    }
    let dwarf = opts.call_graph == CallGraph::Dwarf;
    let stack_size = if dwarf {
        // A multiple of 8 that keeps a whole sample record under the u16 size limit.
        (opts.stack_size.clamp(8, 63 * 1024) + 7) & !7
    } else {
        0
    };
    let fd_limit = sys::raise_fd_limit();
    let cpus = target::online_cpus();
    let cfg = EventConfig {
        period_ns: (1_000_000_000 / opts.frequency).max(1),
        stack_size,
        kernel: true,
        enable_on_exec: matches!(opts.target, Target::Command(_)),
        exact: true,
    };

    // Kernel symbols do not depend on what is sampled: read them (some 60 ms of the
    // kernel formatting /proc/kallsyms, 15 ms of parsing) alongside the setup, and have
    // them before the first sample. Not during the recording: a reader competing with
    // the target for a CPU costs the target samples (a busy thread beside a task-clock
    // sampled thread measurably lowers the share of its CPU time that samples cover),
    // and not after it, where the names are awaited.
    let kallsyms = std::thread::Builder::new()
        .name("kallsyms".into())
        .spawn(|| {
            crate::symbolize::kernel::KernelSymbols::load(std::path::Path::new("/proc/kallsyms"))
                .ok()
        })
        .ok();
    let rings = open_rings(&cpus, opts, dwarf)?;
    let file = File::create(&opts.output).map_err(|source| RecordError::Output {
        path: opts.output.display().to_string(),
        source,
    })?;
    let output_err = |source| RecordError::Output {
        path: opts.output.display().to_string(),
        source,
    };

    let mut launched: Option<Launched> = None;
    let (pid, command) = match &opts.target {
        Target::Pid(pid) => {
            let tgid = target::tgid_of(*pid).map_err(|_| RecordError::NoSuchProcess(*pid))?;
            (tgid, target::cmdline(tgid))
        }
        Target::Command(argv) => {
            let l = target::launch_suspended(argv)?;
            let pid = l.pid;
            launched = Some(l);
            (pid, argv.clone())
        }
    };
    // From here on a launched child must not be left waiting: KillOnError reaps it
    // if setting up fails.
    let mut guard = target::KillOnError(launched.as_ref().map(|l| l.pid));

    let meta = Meta {
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        command: command.clone(),
        pid: matches!(opts.target, Target::Pid(_)).then_some(pid),
        event: "task-clock".to_owned(),
        sample_period_ns: cfg.period_ns,
        frequency_hz: opts.frequency,
        call_graph: opts.call_graph.name().to_owned(),
        stack_size,
        start_time_ns: sys::monotonic_ns(),
        start_unix_ns: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
        hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default(),
        kernel: read_sysctl("osrelease"),
    };
    let writer =
        RecordingWriter::new(BufWriter::with_capacity(1 << 20, file), &meta).map_err(output_err)?;

    let pidfd = PidFd::open(pid as i32).map_err(|_| RecordError::NoSuchProcess(pid))?;
    let mut s = Session {
        cfg,
        cpus,
        rings,
        opened: HashMap::new(),
        writer,
        output: opts.output.clone(),
        spaces: AddressSpaces::default(),
        modules: HashMap::new(),
        mapping_modules: Vec::new(),
        unwinder: Unwinder::new(),
        dwarf,
        raw: Vec::with_capacity(1 << 20),
        index: Vec::new(),
        frames: Vec::with_capacity(256),
        addrs: Vec::with_capacity(256),
        samples: 0,
        lost: 0,
        throttled: 0,
        dropped: 0,
        truncated: 0,
        per_thread: HashMap::new(),
        pids: std::collections::HashSet::new(),
        only_pid: matches!(opts.target, Target::Pid(_))
            .then_some(pid)
            .filter(|_| !opts.children),
        other_process_samples: 0,
        write_error: None,
        acct: Accounting::new(true),
        jitter: PeriodJitter::new(sys::monotonic_ns() ^ u64::from(std::process::id()) << 32),
        vary_next: 0,
        acct_note: None,
        sampled_ns: 0,
    };

    let kallsyms = kallsyms.and_then(|t| t.join().ok().flatten());
    let kernel_note = match &opts.target {
        Target::Pid(_) => {
            let note = s.attach(pid, fd_limit)?;
            s.snapshot_process(pid);
            note
        }
        Target::Command(argv) => {
            let note = s.open_thread(pid, pid)?;
            if let Some(l) = launched.as_mut() {
                l.release(&argv.join(" "))?;
            }
            note
        }
    };
    guard.0 = None;

    let stop = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        // Registration fails only for forbidden signals; these three are allowed.
        let _ = signal_hook::flag::register(sig, Arc::clone(&stop));
    }

    let started = Instant::now();
    let status = StatusLine::new(opts.progress, pid, launched.is_some());
    let mut exit_code = None;
    let stop_reason = s.main_loop(
        opts,
        &pidfd,
        &stop,
        started,
        &status,
        &mut exit_code,
        launched.as_ref().map(|l| l.pid),
    );
    let duration = started.elapsed();
    // Sampling ends here; reaping a launched command and naming frames come after.
    let end_time_ns = sys::monotonic_ns();
    status.clear();

    // What the threads still running used, from their own clocks, as close as can be
    // to the moment sampling stops; then stop sampling and collect what the rings
    // still hold.
    let alive: HashMap<u32, u64> = if s.acct.is_exact() {
        let threads: Vec<(u32, u32)> = s.acct.threads().collect();
        threads
            .into_iter()
            .filter(|(_, tid)| !s.opened.contains_key(tid))
            .filter_map(|(pid, tid)| Some((tid, accounting::thread_cpu_ns(pid, tid)?)))
            .collect()
    } else {
        HashMap::new()
    };
    for t in s.opened.values() {
        for fd in &t.fds {
            let _ = fd.disable();
        }
    }
    s.drain_rings();
    s.process_pending(u64::MAX);
    let opened_counts: HashMap<u32, u64> = s
        .opened
        .iter()
        .map(|(&tid, t)| {
            let n = t.fds.iter().filter_map(|fd| fd.read_count().ok()).sum();
            (tid, n)
        })
        .collect();
    let cpu_time_ns: u64 = opened_counts.values().sum();
    let unsampled_ns = s.write_unsampled(
        &EndCounts {
            opened: opened_counts,
            alive,
        },
        end_time_ns,
    );
    let event_fds = s.opened.values().map(|t| t.fds.len()).sum::<usize>() + s.rings.len();
    let cpus_count = s.rings.len();
    let ring_bytes = s.rings.iter().map(|r| r.ring.bytes()).sum();
    s.opened.clear(); // closes every event: the target is left as it was

    if let Some(pid) = launched.as_ref().map(|l| l.pid)
        && exit_code.is_none()
    {
        exit_code = target::finish_child(pid);
    }

    let summary = Summary {
        end_time_ns,
        samples: s.samples,
        lost: s.lost,
        throttled: s.throttled,
        dropped: s.dropped,
        cpu_time_ns,
        exit_code,
        stop_reason: stop_reason.clone(),
        cpu_accounting: if s.acct.is_exact() {
            "exact"
        } else {
            "estimated"
        }
        .to_owned(),
    };
    let exact = s.acct.is_exact();
    let sampled_ns = s.sampled_ns;
    let acct_note = s.acct_note.take();
    // Name every unique frame once, while the target's files are reachable.
    let (symbols, symbol_stats) = super::symbols::symbolize(
        s.writer.frames(),
        s.writer.mappings(),
        &s.mapping_modules,
        &opts.debug_dirs,
        kallsyms,
    );
    if s.write_error.is_none()
        && let Err(e) = s.writer.symbols(&symbols)
    {
        s.write_error = Some(e);
    }
    let Session {
        writer,
        samples,
        lost,
        throttled,
        dropped,
        truncated,
        per_thread,
        pids,
        write_error,
        output,
        other_process_samples,
        ..
    } = s;
    if let Some(e) = write_error {
        return Err(output_err(e));
    }
    let out = writer.finish(&summary).map_err(output_err)?;
    let bytes = out.get_ref().metadata().map(|m| m.len()).unwrap_or(0);
    Ok(RecordSummary {
        output,
        samples,
        lost,
        throttled,
        dropped,
        threads: per_thread.len(),
        processes: pids.len(),
        duration,
        bytes,
        stop_reason,
        exit_code,
        event_fds,
        ring_bytes,
        rings: cpus_count,
        cpu_time_ns,
        period_ns: cfg.period_ns,
        exact,
        sampled_ns,
        unsampled_ns,
        truncated_stacks: truncated,
        other_process_samples,
        kernel_note: kernel_note
            .or(symbol_stats.kernel_note.clone())
            .or(acct_note),
        symbols: symbol_stats,
    })
}

fn open_rings(
    cpus: &[u32],
    opts: &RecordOptions,
    dwarf: bool,
) -> Result<Vec<CpuRing>, RecordError> {
    let page = sys::page_size();
    let mlock_kb = read_sysctl("perf_event_mlock_kb");
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let pages = opts.ring_pages.unwrap_or_else(|| {
        // Root is exempt from the mlock limit: give dwarf mode room for bursts of
        // stack copies. Otherwise stay within perf_event_mlock_kb per CPU.
        let want: usize = if dwarf { 1024 } else { 128 };
        if root {
            want
        } else {
            let allowed = mlock_kb.parse::<usize>().unwrap_or(516) * 1024 / page;
            let fit = allowed.saturating_sub(1).max(1);
            want.min(1 << (usize::BITS - 1 - fit.leading_zeros()))
        }
    });
    if !pages.is_power_of_two() {
        return Err(RecordError::Invalid(format!(
            "--mmap-pages {pages} is not a power of two"
        )));
    }
    let mut rings = Vec::with_capacity(cpus.len());
    for &cpu in cpus {
        let owner = EventFd::open_ring_owner(cpu as i32)
            .map_err(|e| kernel_error(e, "open the ring-buffer event", "this process"))?;
        let ring = Ring::map(&owner, pages).map_err(|cause| RecordError::RingBuffer {
            kib: pages * page / 1024,
            mlock_kb: mlock_kb.clone(),
            cause,
        })?;
        rings.push(CpuRing { owner, ring });
    }
    Ok(rings)
}

fn kernel_error(e: std::io::Error, context: &str, what: &str) -> RecordError {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => RecordError::Permission {
            what: what.to_owned(),
            paranoid: read_sysctl("perf_event_paranoid"),
            cause: e,
        },
        _ => RecordError::Kernel {
            context: format!("cannot {context}"),
            source: e,
        },
    }
}

impl Session {
    /// Opens events on every thread of `pid`, rescanning until no new thread appears
    /// (threads created by instrumented threads are inherited by the kernel).
    fn attach(&mut self, pid: u32, fd_limit: u64) -> Result<Option<String>, RecordError> {
        let mut note = None;
        let mut first = true;
        loop {
            let tids = match target::list_tids(pid) {
                Ok(t) => t,
                Err(_) if first => return Err(RecordError::NoSuchProcess(pid)),
                Err(_) => return Err(RecordError::ExitedDuringAttach(pid)),
            };
            let new: Vec<u32> = tids
                .into_iter()
                .filter(|t| !self.opened.contains_key(t))
                .collect();
            if new.is_empty() {
                break;
            }
            let needed =
                ((self.opened.len() + new.len()) * self.cpus.len() + self.rings.len() + 64) as u64;
            if needed > fd_limit {
                return Err(RecordError::TooManyFiles {
                    needed,
                    needed_plus: needed.next_power_of_two(),
                    threads: self.opened.len() + new.len(),
                    cpus: self.cpus.len(),
                    limit: fd_limit,
                });
            }
            for tid in new {
                match self.open_thread(pid, tid) {
                    Ok(n) => note = note.or(n),
                    // The thread ended between listing and opening: nothing to sample.
                    Err(RecordError::NoSuchProcess(_)) => {}
                    Err(e) => return Err(e),
                }
            }
            first = false;
        }
        if self.opened.is_empty() {
            return Err(RecordError::ExitedDuringAttach(pid));
        }
        Ok(note)
    }

    /// Opens one event per CPU on `tid`, redirected into the CPU rings. Falls back to
    /// user-only sampling when kernel callchains are not permitted.
    fn open_thread(&mut self, pid: u32, tid: u32) -> Result<Option<String>, RecordError> {
        let mut note = None;
        let mut fds = Vec::with_capacity(self.cpus.len());
        for (i, &cpu) in self.cpus.iter().enumerate() {
            let cfg = EventConfig {
                period_ns: self.jitter.next(self.cfg.period_ns),
                ..self.cfg
            };
            let fd = match EventFd::open(&cfg, tid as i32, cpu as i32) {
                Ok(fd) => fd,
                // Kernels before 6.12 refuse per-thread counts in samples of inherited
                // events: sample as before, each sample weighing one period.
                Err(e)
                    if self.cfg.exact
                        && self.opened.is_empty()
                        && e.raw_os_error() == Some(libc::EINVAL) =>
                {
                    self.cfg.exact = false;
                    self.acct = Accounting::new(false);
                    self.acct_note = Some(format!(
                        "CPU totals are estimates (samples x period): this kernel ({}) cannot give each thread's own count (PERF_SAMPLE_READ with inherit needs Linux 6.12)",
                        read_sysctl("osrelease")
                    ));
                    fds.clear();
                    return self.open_thread(pid, tid);
                }
                Err(e)
                    if self.cfg.kernel
                        && matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM)) =>
                {
                    self.cfg.kernel = false;
                    note = Some(format!(
                        "kernel frames are not recorded: not permitted with perf_event_paranoid = {} (run as root or with CAP_PERFMON for them)",
                        read_sysctl("perf_event_paranoid")
                    ));
                    // Events opened so far on this thread had kernel frames: redo them.
                    fds.clear();
                    return self.open_thread(pid, tid).map(|n| n.or(note));
                }
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                    return Err(RecordError::NoSuchProcess(tid));
                }
                Err(e) => {
                    return Err(kernel_error(
                        e,
                        &format!("open a perf event on thread {tid}"),
                        &format!("thread {tid}"),
                    ));
                }
            };
            fd.set_output(&self.rings[i].owner)
                .map_err(|e| RecordError::Kernel {
                    context: "cannot redirect a perf event into its CPU's ring buffer".into(),
                    source: e,
                })?;
            if let Ok(id) = fd.id() {
                self.acct.opened(pid, tid, id);
            }
            fds.push(fd);
        }
        self.opened.insert(tid, ThreadFds { fds });
        Ok(note)
    }

    /// Writes each kept thread's `[unsampled]` remainder as one sample whose stack is
    /// that marker alone; returns the CPU time they hold.
    fn write_unsampled(&mut self, end: &EndCounts, end_time: u64) -> u64 {
        let only = self.only_pid;
        let remainders = self
            .acct
            .remainders(end, end_time, |pid| only.is_none_or(|p| p == pid));
        if remainders.is_empty() {
            return 0;
        }
        let stack = self.writer.intern_stack(&[Frame {
            kind: FrameKind::Truncated,
            pid: 0,
            addr: Truncation::Unsampled as u64,
            mapping: None,
        }]);
        let mut total = 0;
        for r in remainders {
            total += r.ns;
            self.pids.insert(r.pid);
            self.writer.sample(&Sample {
                time: r.time,
                pid: r.pid,
                tid: r.tid,
                cpu: r.cpu,
                weight: r.ns,
                stack,
            });
        }
        total
    }

    /// Records what the attached process has mapped and what its threads are called.
    fn snapshot_process(&mut self, pid: u32) {
        let now = sys::monotonic_ns();
        if let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/maps")) {
            for m in target::parse_maps(&text)
                .into_iter()
                .filter(|m| m.executable)
            {
                self.add_mapping(pid, m.start, m.end, m.offset, m.path, None, 0);
            }
        }
        for tid in target::list_tids(pid).unwrap_or_default() {
            if let Some(name) = target::thread_name(pid, tid) {
                self.writer.thread_event(&ThreadEvent::Name {
                    time: now,
                    pid,
                    tid,
                    name,
                });
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn main_loop(
        &mut self,
        opts: &RecordOptions,
        pidfd: &PidFd,
        stop: &AtomicBool,
        started: Instant,
        status: &StatusLine,
        exit_code: &mut Option<i32>,
        child: Option<u32>,
    ) -> String {
        let mut fds: Vec<i32> = self.rings.iter().map(|r| r.owner.raw()).collect();
        fds.push(pidfd.raw());
        let mut ready = Vec::new();
        let mut watermark = 0u64;
        let mut last_flush = Instant::now();
        let mut last_status = Instant::now();
        loop {
            if stop.load(Ordering::Relaxed) {
                return "signal".into();
            }
            let mut timeout = 100i32;
            if let Some(d) = opts.duration {
                let left = d.saturating_sub(started.elapsed());
                if left.is_zero() {
                    return "duration".into();
                }
                timeout = timeout.min(left.as_millis() as i32 + 1);
            }
            if sys::poll_readable(&fds, timeout, &mut ready).is_err() {
                std::thread::sleep(Duration::from_millis(10));
            }
            let round_start = sys::monotonic_ns();
            self.vary_periods();
            self.drain_rings();
            // Records up to the previous round's start are all in the rings by now.
            self.process_pending(watermark);
            watermark = round_start;
            if self.write_error.is_some() {
                return "error".into();
            }
            if last_flush.elapsed() > Duration::from_millis(500)
                || self.writer.pending_bytes() > 1 << 18
            {
                if let Err(e) = self.writer.flush_chunk() {
                    self.write_error = Some(e);
                    return "error".into();
                }
                last_flush = Instant::now();
            }
            if last_status.elapsed() > Duration::from_millis(250) {
                status.show(
                    started.elapsed(),
                    self.samples,
                    self.per_thread.len(),
                    self.lost,
                );
                last_status = Instant::now();
            }
            if ready.last() == Some(&true) {
                if let Some(pid) = child {
                    *exit_code = target::wait_child(pid, true);
                }
                return "target-exited".into();
            }
        }
    }

    /// Gives a few opened events a new random period each round: threads created
    /// afterwards inherit it, and the opened threads themselves do not keep one period
    /// for the whole recording. A bounded number per round keeps the cost flat with
    /// 1,000 threads (each change is an ioctl, and an interrupt of the thread if it runs).
    fn vary_periods(&mut self) {
        const PER_ROUND: usize = 8;
        let total: usize = self.opened.values().map(|t| t.fds.len()).sum();
        if total == 0 {
            return;
        }
        let start = self.vary_next % total;
        let fds: Vec<&EventFd> = self
            .opened
            .values()
            .flat_map(|t| &t.fds)
            .cycle()
            .skip(start)
            .take(PER_ROUND.min(total))
            .collect();
        for fd in fds {
            // A thread that just exited refuses; nothing to vary then.
            let _ = fd.set_period(self.jitter.next(self.cfg.period_ns));
        }
        self.vary_next = start + PER_ROUND;
    }

    fn drain_rings(&mut self) {
        for r in &mut self.rings {
            let start = self.raw.len();
            r.ring.drain_into(&mut self.raw);
            let mut off = start;
            for rec in split_records(&self.raw[start..]) {
                let len = rec.len();
                let time = record_time(rec);
                self.index.push((time, off, len));
                off += len;
            }
        }
    }

    /// Handles buffered records with time <= `upto`, in time order; keeps the rest.
    fn process_pending(&mut self, upto: u64) {
        self.index.sort_by_key(|&(t, off, _)| (t, off));
        let n = self.index.partition_point(|&(t, _, _)| t <= upto);
        let raw = std::mem::take(&mut self.raw);
        let index = std::mem::take(&mut self.index);
        for &(_, off, len) in &index[..n] {
            match parse_record_as(&raw[off..off + len], self.cfg.exact) {
                Ok(rec) => self.handle(rec),
                Err(_) => self.dropped += 1,
            }
        }
        // Keep the records not yet due, compacted.
        let mut rest = Vec::with_capacity(raw.len());
        for &(t, off, len) in &index[n..] {
            self.index.push((t, rest.len(), len));
            rest.extend_from_slice(&raw[off..off + len]);
        }
        self.raw = rest;
    }
}
