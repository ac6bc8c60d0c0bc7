//! The target's perf events: one `task-clock` event per (thread, CPU) on every thread
//! that exists at attach (or on the launched child), each redirected into its CPU's
//! ring. Threads created later inherit them in the kernel. Dropping [`TargetEvents`]
//! closes every event, which detaches the inherited copies too: the target is left as
//! it was.

use std::collections::{HashMap, HashSet};

use super::rings::CpuRing;
use super::sys::{EventConfig, EventFd};
use super::{RecordError, kernel_error, read_sysctl, target};

/// The events opened on the target, by thread.
pub(super) struct TargetEvents {
    pub cfg: EventConfig,
    cpus: Vec<u32>,
    /// One event per CPU (in `cpus` order) for each thread opened.
    opened: HashMap<u32, Vec<EventFd>>,
}

impl TargetEvents {
    pub fn new(cfg: EventConfig, cpus: Vec<u32>) -> TargetEvents {
        TargetEvents {
            cfg,
            cpus,
            opened: HashMap::new(),
        }
    }

    /// Opens events on every thread of `pid`, rescanning until no new thread appears
    /// (threads created by instrumented threads are inherited by the kernel).
    /// Returns a note when kernel frames had to be left out.
    pub fn attach(
        &mut self,
        pid: u32,
        rings: &[CpuRing],
        fd_limit: u64,
    ) -> Result<Option<String>, RecordError> {
        let mut note = None;
        let mut first = true;
        // Threads that ended between listing and opening. A zombie leader (the main
        // thread exited, others run on: `pthread_exit` in main, Go) stays listed in
        // /proc/PID/task but refuses events with ESRCH; without this set it was listed
        // as new on every rescan and attaching never ended.
        let mut gone: HashSet<u32> = HashSet::new();
        loop {
            let tids = match target::list_tids(pid) {
                Ok(t) => t,
                Err(_) if first => return Err(RecordError::NoSuchProcess(pid)),
                Err(_) => return Err(RecordError::ExitedDuringAttach(pid)),
            };
            let new: Vec<u32> = tids
                .into_iter()
                .filter(|t| !self.opened.contains_key(t) && !gone.contains(t))
                .collect();
            if new.is_empty() {
                break;
            }
            let threads = self.opened.len() + new.len();
            let needed = (threads * self.cpus.len() + rings.len() + 64) as u64;
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
                match self.open_thread(tid, rings) {
                    Ok(n) => note = note.or(n),
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

    /// Opens one event per CPU on `tid`, redirected into the CPU rings. Falls back to
    /// user-only sampling when kernel callchains are not permitted.
    pub fn open_thread(
        &mut self,
        tid: u32,
        rings: &[CpuRing],
    ) -> Result<Option<String>, RecordError> {
        let mut fds = Vec::with_capacity(self.cpus.len());
        for (&cpu, ring) in self.cpus.iter().zip(rings) {
            let fd = match EventFd::open(&self.cfg, tid as i32, cpu as i32) {
                Ok(fd) => fd,
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
                    return self.open_thread(tid, rings).map(|n| n.or(Some(note)));
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
            fds.push(fd);
        }
        self.opened.insert(tid, fds);
        Ok(None)
    }

    fn events(&self) -> impl Iterator<Item = &EventFd> {
        self.opened.values().flatten()
    }

    /// Stops sampling on every event (and its inherited copies).
    pub fn disable(&self) {
        for fd in self.events() {
            let _ = fd.disable();
        }
    }

    /// CPU time the target used while sampled, from the events' counts (each count
    /// includes the threads that inherited the event), nanoseconds.
    pub fn cpu_time_ns(&self) -> u64 {
        self.events().filter_map(|fd| fd.read_count().ok()).sum()
    }

    /// Perf event descriptors open on the target.
    pub fn fd_count(&self) -> usize {
        self.opened.values().map(Vec::len).sum()
    }
}
