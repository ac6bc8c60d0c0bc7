//! The target's perf events: one `task-clock` event per (thread, CPU) on every thread
//! that exists at attach (or on the launched child), each redirected into its CPU's
//! ring. Threads created later inherit them in the kernel. Dropping [`TargetEvents`]
//! closes every event, which detaches the inherited copies too: the target is left as
//! it was.

use std::collections::HashMap;

use super::accounting::{PeriodJitter, vary_interval};
use super::rings::CpuRing;
use super::sys::{self, EventConfig, EventFd};
use super::{RecordError, kernel_error, read_sysctl, target};

/// The events opened on the target, by thread.
pub(super) struct TargetEvents {
    pub cfg: EventConfig,
    cpus: Vec<u32>,
    /// One event per CPU (in `cpus` order) for each thread opened.
    opened: HashMap<u32, Vec<EventFd>>,
    /// With `-a`: one event per CPU for every task.
    cpu_wide: Vec<EventFd>,
    /// With `--off-cpu`: the switch-out stacks per second per event, and the
    /// `context-switches` events of each thread opened: per CPU, the state event,
    /// then in dwarf mode the stack event.
    off_cpu_hz: Option<u64>,
    switches: HashMap<u32, Vec<EventFd>>,
    /// Ids of the state events and of the stack events.
    state_ids: Vec<u64>,
    stack_ids: Vec<u64>,
    /// (pid, tid, event id) of every event opened, for the accounting.
    pub ids: Vec<(u32, u32, u64)>,
    /// The clock of each thread found at attach just after its events were opened
    /// (None when /proc did not say), for the accounting.
    pub started: Vec<(u32, Option<u64>)>,
    /// Why accounting is estimated, when the kernel refused per-thread counts.
    pub acct_note: Option<String>,
    /// Draws each event's sample period, and which event gets a new one next.
    jitter: PeriodJitter,
    vary_next: usize,
    last_vary: std::time::Instant,
}

impl TargetEvents {
    pub(super) fn new(cfg: EventConfig, cpus: Vec<u32>) -> TargetEvents {
        TargetEvents {
            cfg,
            cpus,
            opened: HashMap::new(),
            cpu_wide: Vec::new(),
            off_cpu_hz: None,
            switches: HashMap::new(),
            state_ids: Vec::new(),
            stack_ids: Vec::new(),
            ids: Vec::new(),
            started: Vec::new(),
            acct_note: None,
            jitter: PeriodJitter::new(sys::monotonic_ns() ^ u64::from(std::process::id()) << 32),
            vary_next: 0,
            last_vary: std::time::Instant::now(),
        }
    }

    /// Also opens the off-CPU events (`record --off-cpu`) on every thread.
    pub(super) fn with_off_cpu(mut self, stacks_hz: u64) -> TargetEvents {
        self.off_cpu_hz = Some(stacks_hz);
        self
    }

    /// The ids of the off-CPU state events and stack events, which their samples
    /// carry.
    pub(super) fn switch_ids(&self) -> (Vec<u64>, Vec<u64>) {
        (self.state_ids.clone(), self.stack_ids.clone())
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
        fd_limit: u64,
    ) -> Result<Option<String>, RecordError> {
        let mut note = None;
        let mut first = true;
        // Threads that ended between listing and opening (a zombie stays listed
        // until reaped): not retried, or a target that exits while we attach would
        // keep this loop going forever.
        let mut gone = std::collections::HashSet::new();
        loop {
            let tids = match target::list_tids(pid) {
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
            let per_thread = if self.off_cpu_hz.is_some() { 3 } else { 1 };
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
                        self.started
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
            self.cpu_wide.push(fd);
        }
        Ok(())
    }

    /// Opens one event per CPU on `tid` of `pid`, redirected into the CPU rings, each
    /// with its own period drawn around the nominal one (see [`PeriodJitter`]). Falls
    /// back to user-only sampling when kernel callchains are not permitted, and to
    /// estimated accounting when the kernel cannot give per-thread counts.
    pub(super) fn open_thread(
        &mut self,
        pid: u32,
        tid: u32,
        rings: &[CpuRing],
    ) -> Result<Option<String>, RecordError> {
        let mut fds = Vec::with_capacity(self.cpus.len());
        for (&cpu, ring) in self.cpus.iter().zip(rings) {
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
                    self.acct_note = Some(format!(
                        "CPU totals are estimates (samples x period): this kernel ({}) cannot give each thread's own count (PERF_SAMPLE_READ with inherit needs Linux 6.12)",
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
                self.ids.push((pid, tid, id));
            }
            fds.push(fd);
        }
        self.opened.insert(tid, fds);
        if let Some(hz) = self.off_cpu_hz {
            self.open_switches(tid, hz, rings)?;
        }
        Ok(None)
    }

    /// Opens the off-CPU event per CPU on `tid`, redirected into the CPU rings.
    fn open_switches(&mut self, tid: u32, hz: u64, rings: &[CpuRing]) -> Result<(), RecordError> {
        let mut fds = Vec::with_capacity(self.cpus.len());
        let stacks = self.cfg.stack_size > 0;
        let opens = self.cpus.iter().zip(rings).flat_map(|(&cpu, ring)| {
            let states = (false, cpu, ring);
            let stack = stacks.then_some((true, cpu, ring));
            std::iter::once(states).chain(stack)
        });
        for (is_stack, cpu, ring) in opens {
            let opened = if is_stack {
                EventFd::open_switch_stacks(&self.cfg, hz, tid as i32, cpu as i32)
            } else {
                EventFd::open_switch_states(&self.cfg, tid as i32, cpu as i32)
            };
            let fd = match opened {
                Ok(fd) => fd,
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                    return Err(RecordError::NoSuchProcess(tid));
                }
                Err(e) => {
                    return Err(RecordError::Kernel {
                        context: switch_refusal(&e, is_stack, hz, tid),
                        source: e,
                    });
                }
            };
            fd.set_output(&ring.owner)
                .map_err(|e| RecordError::Kernel {
                    context: "cannot redirect a perf event into its CPU's ring buffer".into(),
                    source: e,
                })?;
            let id = fd.id().map_err(|e| RecordError::Kernel {
                context: "cannot read the id of a perf event".into(),
                source: e,
            })?;
            if is_stack {
                self.stack_ids.push(id);
            } else {
                self.state_ids.push(id);
            }
            fds.push(fd);
        }
        self.switches.insert(tid, fds);
        Ok(())
    }

    /// Now and then gives a few events a new random period: threads created afterwards
    /// inherit it, and the opened threads themselves do not keep one period for the
    /// whole recording, not even a short one ([`vary_interval`]: every 10 periods, or
    /// 50 with estimated accounting, and at most every 20 ms). A change restarts the
    /// event's current period (the kernel sets `period_left` to 0) at a moment that
    /// has nothing to do with the target's work, so sampling restarts at a random
    /// phase too. Each change is an ioctl and an interrupt of the CPU the thread is on
    /// (the kernel waits for it: the recorder's dearest system call), so a bounded
    /// number of events get one per call, in turn over all of them, to keep the cost
    /// flat with 1,000 threads. The kernel changes no inherited copy: see
    /// docs/accounting.md.
    pub(super) fn vary_periods(&mut self) {
        const PER_ROUND: usize = 8;

        let every = vary_interval(self.cfg.period_ns, self.cfg.exact);
        if self.opened.is_empty() || self.last_vary.elapsed() < every {
            return;
        }
        self.last_vary = std::time::Instant::now();
        let nominal = self.cfg.period_ns;
        // Every event in turn, running or not: changing only the running threads'
        // events restarted their periods so often that a busy thread lost up to 17%
        // of its samples under load (each change drops the part of the period run),
        // and changing them less often left one draw for long stretches (+20%).
        let total: usize = self.opened.values().map(Vec::len).sum();
        let start = self.vary_next % total.max(1);
        for fd in self
            .opened
            .values()
            .flatten()
            .cycle()
            .skip(start)
            .take(PER_ROUND.min(total))
        {
            // A thread that just exited refuses; nothing to vary then.
            let _ = fd.set_period(self.jitter.next(nominal));
        }
        self.vary_next = start + PER_ROUND;
    }

    /// The sum of each opened thread's events' counts (its own CPU time plus that of
    /// every thread that inherited them), nanoseconds.
    pub(super) fn counts_by_thread(&self) -> HashMap<u32, u64> {
        self.opened
            .iter()
            .map(|(&tid, fds)| (tid, fds.iter().filter_map(|fd| fd.read_count().ok()).sum()))
            .collect()
    }

    fn events(&self) -> impl Iterator<Item = &EventFd> {
        self.opened.values().flatten()
    }

    /// Stops sampling on every event (and its inherited copies).
    pub(super) fn disable(&self) {
        for fd in self
            .events()
            .chain(self.switches.values().flatten())
            .chain(&self.cpu_wide)
        {
            let _ = fd.disable();
        }
    }

    /// Perf event descriptors open on the target.
    pub(super) fn fd_count(&self) -> usize {
        self.opened
            .values()
            .chain(self.switches.values())
            .map(Vec::len)
            .sum::<usize>()
            + self.cpu_wide.len()
    }
}

/// What the kernel's refusal of an off-CPU event on `tid` means, and what to do.
fn switch_refusal(e: &std::io::Error, is_stack: bool, hz: u64, tid: u32) -> String {
    let which = if is_stack {
        "switch-out stack"
    } else {
        "context-switch state"
    };
    let head = format!("--off-cpu: the kernel refused the {which} event on thread {tid}");
    let tail = "; record without --off-cpu for CPU time only";
    let max_rate: Option<u64> = read_sysctl("perf_event_max_sample_rate").parse().ok();
    let why = match e.raw_os_error() {
        // perf_event_open refuses a frequency above the sysctl (the kernel also lowers
        // it by itself when sampling interrupts take too long).
        Some(libc::EINVAL) if is_stack && max_rate.is_some_and(|r| r < hz) => format!(
            "it allows {} samples a second per event (kernel.perf_event_max_sample_rate) and \
             --off-cpu takes up to {hz} switch-out stacks a second: raise it \
             (sysctl -w kernel.perf_event_max_sample_rate={hz})",
            max_rate.unwrap_or(0)
        ),
        Some(libc::EINVAL) => "this kernel does not support it (a `context-switches` software \
             event with context_switch records: Linux 4.3 or later, 4.17 for the preempted flag)"
            .to_owned(),
        Some(libc::EOVERFLOW) => format!(
            "it allows {} kernel frames per callchain (kernel.perf_event_max_stack) and the \
             state event asks for 16: raise it (sysctl -w kernel.perf_event_max_stack=127)",
            read_sysctl("perf_event_max_stack")
        ),
        Some(libc::EACCES) | Some(libc::EPERM) => format!(
            "not permitted with perf_event_paranoid = {} (run as root or with CAP_PERFMON)",
            read_sysctl("perf_event_paranoid")
        ),
        Some(libc::EMFILE) | Some(libc::ENFILE) => {
            "out of file descriptors (each thread takes one event per CPU and role): raise \
             the open-file limit (ulimit -n)"
                .to_owned()
        }
        _ => return format!("{head}{tail}"),
    };
    format!("{head}: {why}{tail}")
}
