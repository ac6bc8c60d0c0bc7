//! `--off-cpu`'s events on each thread opened: per CPU, a `context-switches` event
//! whose records say each switch and its state, and in dwarf mode a second one that
//! samples switch-out stacks, both redirected into the CPU's ring.

use std::collections::HashMap;

use super::super::rings::CpuRing;
use super::super::sys::{EventConfig, EventFd};
use super::super::{RecordError, read_sysctl};

/// The off-CPU events, by thread.
pub(in crate::record) struct SwitchEvents {
    /// The switch-out stacks per second per event: None without `--off-cpu`.
    pub hz: Option<u64>,
    /// Per CPU, the state event, then in dwarf mode the stack event.
    by_thread: HashMap<u32, Vec<EventFd>>,
    /// Ids of the state events and of the stack events.
    state_ids: Vec<u64>,
    stack_ids: Vec<u64>,
}

impl SwitchEvents {
    /// No event yet; `hz` as [`SwitchEvents::hz`].
    pub(super) fn new(hz: Option<u64>) -> SwitchEvents {
        SwitchEvents {
            hz,
            by_thread: HashMap::new(),
            state_ids: Vec::new(),
            stack_ids: Vec::new(),
        }
    }

    /// The ids of the state events and stack events, which their samples carry.
    pub(super) fn ids(&self) -> (Vec<u64>, Vec<u64>) {
        (self.state_ids.clone(), self.stack_ids.clone())
    }

    /// Every event opened.
    pub(super) fn fds(&self) -> impl Iterator<Item = &EventFd> {
        self.by_thread.values().flatten()
    }

    /// How many events are open.
    pub(super) fn count(&self) -> usize {
        self.by_thread.values().map(Vec::len).sum()
    }

    /// Opens the off-CPU events per CPU on `tid` (none without `--off-cpu`),
    /// redirected into the CPU rings.
    pub(super) fn open(
        &mut self,
        cfg: &EventConfig,
        cpus: &[u32],
        tid: u32,
        rings: &[CpuRing],
    ) -> Result<(), RecordError> {
        let Some(hz) = self.hz else {
            return Ok(());
        };
        let mut fds = Vec::with_capacity(cpus.len());
        let stacks = cfg.stack_size > 0;
        let opens = cpus.iter().zip(rings).flat_map(|(&cpu, ring)| {
            let states = (false, cpu, ring);
            let stack = stacks.then_some((true, cpu, ring));
            std::iter::once(states).chain(stack)
        });
        for (is_stack, cpu, ring) in opens {
            let opened = if is_stack {
                EventFd::open_switch_stacks(cfg, hz, tid as i32, cpu as i32)
            } else {
                EventFd::open_switch_states(cfg, tid as i32, cpu as i32)
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
        self.by_thread.insert(tid, fds);
        Ok(())
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
