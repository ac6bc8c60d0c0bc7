//! The target's perf events: one `task-clock` event per (thread, CPU) on every thread
//! that exists at attach (or on the launched child), each redirected into its CPU's
//! ring. Threads created later inherit them in the kernel, from their first
//! instruction; with `--exact-weights`, once the recorder reads a thread's creation
//! it gives the thread events of its own, whose period it varies, and a kernel-side
//! filter
//! ([`sys::ThreadFilter`]) drops the inherited copies' samples of that thread from
//! then on (their counts stay). Dropping [`TargetEvents`] closes every event, which
//! detaches the inherited copies too: the target is left as it was.

use std::collections::HashMap;

use super::rings::CpuRing;
use super::sys::{self, EventConfig, EventFd};
use super::{RecordError, kernel_error, read_sysctl};
use switches::SwitchEvents;
use vary::Variation;

mod switches;
mod vary;

/// The events opened on the target, by thread.
pub(super) struct TargetEvents {
    pub cfg: EventConfig,
    cpus: Vec<u32>,
    /// One event per CPU (in `cpus` order) for each thread opened.
    opened: HashMap<u32, Vec<EventFd>>,
    /// One event per CPU for each thread created during the recording and still
    /// alive, not inherited ([`TargetEvents::own_events`]).
    own: HashMap<u32, Vec<EventFd>>,
    /// Drops the inherited samples of the threads in `own`: None until the first
    /// event is opened, then the filter, or nothing when the kernel refused it (no
    /// CAP_BPF): threads created later then keep the period they inherited.
    filter: Option<Option<sys::ThreadFilter>>,
    /// In dwarf mode, the filter's program also copies each registered thread's
    /// interpreter frames at its samples ([`sys::StackCapture`]): None when the
    /// kernel refused it (then why, in `capture_refused`).
    capture: Option<sys::StackCapture>,
    pub capture_refused: Option<String>,
    /// The descriptors the recorder may hold (RLIMIT_NOFILE).
    fd_limit: u64,
    /// With `-a`: one event per CPU for every task.
    cpu_wide: Vec<EventFd>,
    /// With `--off-cpu`: the `context-switches` events of each thread opened.
    switches: SwitchEvents,
    /// What the accounting needs to know of the events opened.
    pub opened_for: ForAccounting,
    /// Threads created during the recording that the filter had no room for (it
    /// holds [`sys::FILTER_CAPACITY`] at once): they kept their inherited samples.
    pub filter_full: u64,
    /// Draws each event's sample period, and which event gets a new one next.
    variation: Variation,
    /// Whether each process met runs CPython: its sampling events wake the recorder
    /// at each sample (dwarf mode; see [`TargetEvents::wakes`]).
    cpython: HashMap<u32, bool>,
    /// Whether each process met runs CRuby: its sampling events wake the recorder at
    /// each sample too, its frames being read at the drain whatever BPF copies.
    ruby: HashMap<u32, bool>,
}

/// What the accounting needs to know of the events opened at the attach.
#[derive(Default)]
pub(super) struct ForAccounting {
    /// (pid, tid, event id) of every event opened.
    pub ids: Vec<(u32, u32, u64)>,
    /// The clock of each thread found at attach just after its events were opened
    /// (None when /proc did not say).
    pub started: Vec<(u32, Option<u64>)>,
    /// Why accounting is estimated, when the kernel refused per-thread counts.
    pub note: Option<String>,
}

impl TargetEvents {
    pub(super) fn new(cfg: EventConfig, cpus: Vec<u32>) -> TargetEvents {
        TargetEvents {
            cfg,
            cpus,
            opened: HashMap::new(),
            own: HashMap::new(),
            filter: None,
            capture: None,
            capture_refused: None,
            filter_full: 0,
            fd_limit: u64::MAX,
            cpu_wide: Vec::new(),
            switches: SwitchEvents::new(None),
            opened_for: ForAccounting::default(),
            variation: Variation::new(),
            cpython: HashMap::new(),
            ruby: HashMap::new(),
        }
    }

    /// Process `pid` runs CPython (or not), whatever /proc says of it now: the
    /// launched child, opened before it executes its command.
    pub(super) fn runs_cpython(&mut self, pid: u32, yes: bool) {
        self.cpython.insert(pid, yes);
    }

    /// Process `pid` runs CRuby (or not), whatever /proc says of it now.
    pub(super) fn runs_ruby(&mut self, pid: u32, yes: bool) {
        self.ruby.insert(pid, yes);
    }

    /// Whether the sampling events of process `pid` wake the recorder at each sample:
    /// those of a CPython process in dwarf mode, whose Python frames are read from its
    /// memory when the sample is drained, and the sooner the more of them are still
    /// the sample's (record/python.rs). Its threads and child processes created later
    /// inherit that, and the threads get events of their own that do too.
    fn wakes(&mut self, pid: u32) -> bool {
        self.cfg.stack_size > 0
            && *self
                .cpython
                .entry(pid)
                .or_insert_with(|| super::python::runs_cpython(pid))
    }

    /// The descriptors the recorder may hold: threads created during the recording
    /// get events of their own only within it.
    pub(super) fn with_fd_limit(mut self, limit: u64) -> TargetEvents {
        self.fd_limit = limit;
        self
    }

    /// Also opens the off-CPU events (`record --off-cpu`) on every thread.
    pub(super) fn with_off_cpu(mut self, stacks_hz: u64) -> TargetEvents {
        self.switches = SwitchEvents::new(Some(stacks_hz));
        self
    }

    /// The ids of the off-CPU state events and stack events, which their samples
    /// carry.
    pub(super) fn switch_ids(&self) -> (Vec<u64>, Vec<u64>) {
        self.switches.ids()
    }

    /// Opens events on every thread of `pid` (or only on those in `only`, `-t`),
    /// rescanning until no new thread appears (threads created by instrumented threads
    /// are inherited by the kernel). Returns a note when kernel frames had to be left
    /// out.
    pub(super) fn attach(
        &mut self,
        pid: u32,
        only: Option<&[u32]>,
        rings: &[CpuRing],
    ) -> Result<Option<String>, RecordError> {
        let fd_limit = self.fd_limit;
        let mut note = None;
        let mut first = true;
        // Threads that ended between listing and opening (a zombie stays listed
        // until reaped): not retried, or a target that exits while we attach would
        // keep this loop going forever.
        let mut gone = std::collections::HashSet::new();
        loop {
            let tids = match crate::process::list_tids(pid) {
                Ok(t) => t,
                Err(_) if first => return Err(RecordError::NoSuchProcess(pid)),
                Err(_) => return Err(RecordError::ExitedDuringAttach(pid)),
            };
            let new: Vec<u32> = tids
                .into_iter()
                .filter(|t| !self.opened.contains_key(t) && !gone.contains(t))
                .filter(|t| only.is_none_or(|o| o.contains(t)))
                .collect();
            if new.is_empty() {
                break;
            }
            let threads = self.opened.len() + new.len();
            let per_thread = if self.switches.hz.is_some() { 3 } else { 1 };
            let needed = (threads * self.cpus.len() * per_thread + rings.len() + 64) as u64;
            if needed > fd_limit {
                return Err(RecordError::TooManyFiles {
                    needed,
                    needed_plus: needed.next_power_of_two(),
                    threads,
                    cpus: self.cpus.len(),
                    limit: fd_limit,
                });
            }
            for tid in new {
                match self.open_thread(pid, tid, rings) {
                    Ok(n) => {
                        self.opened_for
                            .started
                            .push((tid, super::accounting::thread_cpu_ns(pid, tid)));
                        note = note.or(n);
                    }
                    // The thread ended between listing and opening: nothing to sample.
                    Err(RecordError::NoSuchProcess(_)) => {
                        gone.insert(tid);
                    }
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

    /// `-a`: opens one `cpu-clock` event per CPU for every task, redirected into that
    /// CPU's ring. Refused without root or CAP_PERFMON when perf_event_paranoid > 0.
    pub(super) fn attach_all_cpus(&mut self, rings: &[CpuRing]) -> Result<(), RecordError> {
        // The program's capture part copies the registered threads' Python chains
        // (its filter part has no thread to drop here).
        self.load_filter(rings);
        for (&cpu, ring) in self.cpus.iter().zip(rings) {
            let fd = EventFd::open_cpu_wide(&self.cfg, cpu as i32).map_err(|e| {
                match e.raw_os_error() {
                    Some(libc::EACCES) | Some(libc::EPERM) => RecordError::AllCpusPermission {
                        paranoid: read_sysctl("perf_event_paranoid"),
                        cause: e,
                    },
                    _ => RecordError::Kernel {
                        context: format!("cannot open the -a event of CPU {cpu}"),
                        source: e,
                    },
                }
            })?;
            fd.set_output(&ring.owner)
                .map_err(|e| RecordError::Kernel {
                    context: "cannot redirect a perf event into its CPU's ring buffer".into(),
                    source: e,
                })?;
            if self.capture.is_some()
                && let Some(Some(f)) = &self.filter
                && let Err(e) = f.attach(&fd)
            {
                self.capture = None;
                self.capture_refused = Some(e.to_string());
            }
            self.cpu_wide.push(fd);
        }
        Ok(())
    }

    /// Opens one event per CPU on `tid` of `pid`, redirected into the CPU rings, each
    /// with its own period drawn around the nominal one (see [`super::accounting::PeriodJitter`]). Falls
    /// back to user-only sampling when kernel callchains are not permitted, and to
    /// estimated accounting when the kernel cannot give per-thread counts.
    pub(super) fn open_thread(
        &mut self,
        pid: u32,
        tid: u32,
        rings: &[CpuRing],
    ) -> Result<Option<String>, RecordError> {
        let mut fds = Vec::with_capacity(self.cpus.len());
        self.load_filter(rings);
        // Frames copied at the sample need no early read: no wake-up per sample.
        let ruby = *(self.ruby.entry(pid)).or_insert_with(|| super::python::runs_ruby(pid));
        let wake_each = self.wakes(pid) && self.capture.is_none() || ruby;
        for (&cpu, ring) in self.cpus.iter().zip(rings) {
            let cfg = EventConfig {
                period_ns: self.variation.period(self.cfg.period_ns),
                wake_each,
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
                    self.opened_for.note = Some(format!(
                        "--exact-weights: this kernel ({}) cannot give each thread's own count in samples (PERF_SAMPLE_READ with inherit needs Linux 6.12): samples weigh their period, under each thread's clock",
                        read_sysctl("osrelease")
                    ));
                    drop(fds);
                    return self.open_thread(pid, tid, rings);
                }
                Err(e)
                    if self.cfg.kernel
                        && matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM)) =>
                {
                    // Events opened so far on this thread had kernel frames: redo them.
                    self.cfg.kernel = false;
                    let note = format!(
                        "kernel frames are not recorded: not permitted with perf_event_paranoid = {} (run as root or with CAP_PERFMON for them)",
                        read_sysctl("perf_event_paranoid")
                    );
                    drop(fds);
                    return self.open_thread(pid, tid, rings).map(|n| n.or(Some(note)));
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
            fd.set_output(&ring.owner)
                .map_err(|e| RecordError::Kernel {
                    context: "cannot redirect a perf event into its CPU's ring buffer".into(),
                    source: e,
                })?;
            if let Ok(id) = fd.id() {
                self.opened_for.ids.push((pid, tid, id));
            }
            // Copies inherited from here on run the filter; without it they keep
            // their samples.
            if let Some(Some(f)) = &self.filter
                && f.attach(&fd).is_err()
            {
                self.filter = Some(None);
                self.capture = None;
            }
            fds.push(fd);
        }
        self.opened.insert(tid, fds);
        (self.switches).open(&self.cfg, &self.cpus, tid, rings)?;
        Ok(None)
    }

    /// Loads the filter's program, the first time: with the interpreter-frame capture
    /// in dwarf mode when the kernel allows it, else without.
    fn load_filter(&mut self, rings: &[CpuRing]) {
        if self.filter.is_some() {
            return;
        }
        if self.cfg.stack_size > 0 && std::env::var_os("PROFILE_NO_CAPTURE").is_none() {
            let owners: Vec<&EventFd> = rings.iter().map(|r| &r.owner).collect();
            let loaded = sys::StackCapture::new(&self.cpus, &owners)
                .and_then(|c| c.filter().map(|f| (f, c)));
            match loaded {
                Ok((f, c)) => {
                    self.filter = Some(Some(f));
                    self.capture = Some(c);
                    return;
                }
                Err(e) => self.capture_refused = Some(e.to_string()),
            }
        }
        self.filter = Some(sys::ThreadFilter::new().ok());
    }

    /// The interpreter-frame capture, when loaded.
    pub(super) fn capture(&self) -> Option<&sys::StackCapture> {
        self.capture.as_ref()
    }

    /// Gives thread `tid` of `pid`, created during the recording (its copies of the
    /// events inherited from the thread that created it keep the period drawn then
    /// for its whole life), events of its own on every CPU with periods drawn and
    /// varied like those of the threads opened at the start, and has the filter drop
    /// the samples of its inherited copies, which go on counting (its total at
    /// exit). The filter is told first: the moments between are the thread's
    /// `[unsampled]` time rather than counted twice. Returns whether it did: not
    /// without the filter, past its capacity or the descriptor limit, or when the
    /// thread already ended (it then keeps its inherited samples).
    ///
    /// Only with counts in samples (`--exact-weights`): an event opened on one thread
    /// makes its perf context no longer a clone of its siblings', so every switch
    /// between them takes the kernel's slow path, with two sampling timers to stop and
    /// start (docs/accounting.md, "What a context switch costs").
    pub(super) fn own_events(&mut self, pid: u32, tid: u32, rings: &[CpuRing]) -> bool {
        if !self.cfg.exact
            || !matches!(self.filter, Some(Some(_)))
            || self.opened.contains_key(&tid)
            || self.own.contains_key(&tid)
        {
            return false;
        }
        // Room for the rings, the off-CPU events and what else the recorder opens.
        if (self.fd_count() + self.cpus.len() + 64) as u64 > self.fd_limit {
            return false;
        }
        let wake_each = self.wakes(pid) && self.capture.is_none();
        let Some(Some(filter)) = &self.filter else {
            return false;
        };
        if let Err(e) = filter.exclude(tid) {
            // The kernel says E2BIG when a hash map is full.
            if e.raw_os_error() == Some(libc::E2BIG) {
                self.filter_full += 1;
            }
            return false;
        }
        let mut fds = Vec::with_capacity(self.cpus.len());
        for (&cpu, ring) in self.cpus.iter().zip(rings) {
            let cfg = EventConfig {
                period_ns: self.variation.period(self.cfg.period_ns),
                wake_each,
                ..self.cfg
            };
            match EventFd::open_own(&cfg, tid as i32, cpu as i32) {
                Ok(fd) if fd.set_output(&ring.owner).is_ok() && filter.attach_own(&fd).is_ok() => {
                    fds.push(fd)
                }
                _ => {
                    drop(fds);
                    let _ = filter.include(tid);
                    return false;
                }
            }
        }
        self.own.insert(tid, fds);
        true
    }

    /// Thread `tid` of `pid` ended: its own events are closed and the filter forgets
    /// it (its id may be given to a new thread, whose inherited samples must be
    /// kept); a process's end, whether it ran CPython.
    pub(super) fn thread_ended(&mut self, pid: u32, tid: u32) {
        if pid == tid {
            self.cpython.remove(&pid);
        }
        let Some(fds) = self.own.remove(&tid) else {
            return;
        };
        for fd in &fds {
            self.variation.forget(fd);
        }
        if let Some(Some(f)) = &self.filter {
            let _ = f.include(tid);
        }
    }

    /// Now and then gives a few events a new random period (see
    /// [`Variation::vary`]; `own_ran`: the CPU time an event's own thread ran under
    /// it, by event id); returns each change as (event id, CLOCK_MONOTONIC just after
    /// it, period).
    pub(super) fn vary_periods(&mut self, own_ran: impl Fn(u64) -> u64) -> Vec<(u64, u64, u64)> {
        if self.opened.is_empty() && self.own.is_empty() {
            return Vec::new();
        }
        let events = self.opened.values().chain(self.own.values()).flatten();
        self.variation.vary(&self.cfg, events, own_ran)
    }

    /// The sum of each opened thread's events' counts (its own CPU time plus that of
    /// every thread that inherited them), nanoseconds.
    pub(super) fn counts_by_thread(&self) -> HashMap<u32, u64> {
        self.opened
            .iter()
            .map(|(&tid, fds)| (tid, fds.iter().filter_map(|fd| fd.read_count().ok()).sum()))
            .collect()
    }

    /// The CPU-time sampling events: those opened at the start and the threads' own.
    fn sampling(&self) -> impl Iterator<Item = &EventFd> + Clone {
        self.opened.values().chain(self.own.values()).flatten()
    }

    /// Stops sampling on every event (and its inherited copies).
    pub(super) fn disable(&self) {
        for fd in self
            .sampling()
            .chain(self.switches.fds())
            .chain(&self.cpu_wide)
        {
            let _ = fd.disable();
        }
    }

    /// Perf event descriptors open on the target.
    pub(super) fn fd_count(&self) -> usize {
        self.opened
            .values()
            .chain(self.own.values())
            .map(Vec::len)
            .sum::<usize>()
            + self.switches.count()
            + self.cpu_wide.len()
    }
}
