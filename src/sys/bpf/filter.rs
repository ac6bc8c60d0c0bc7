//! A kernel-side sample filter by thread: a BPF program attached to the recorder's
//! inherited `task-clock` events that drops the samples of the threads in a map.
//!
//! Why: a thread created during a recording is sampled through copies of its
//! parent's events, which keep the period drawn when the thread was created
//! (PERF_EVENT_IOC_PERIOD reaches no inherited copy), so a thread whose work has a
//! rhythm commensurate with that draw is sampled in lock-step with it for its whole
//! life (docs/accounting.md). The recorder gives such a thread events of its own,
//! whose period it varies, and puts the thread in this map: its inherited copies go on
//! counting (the thread's exact total at exit) but their samples are dropped in the
//! kernel, before any stack is copied. A program attached to an event is inherited
//! with it (`perf_event_alloc()` takes the parent's `prog`), so one attach per opened
//! event covers every thread created later.
//!
//! The program (its listing: tests/data/bpf/programs.txt), assembled here with
//! [`super::asm`] (no compiler, no BTF):
//!
//! ```text
//! r6 = ctx
//! call get_current_pid_tgid         ; r0 = tgid << 32 | tid
//! *(u32 *)(r10 - 4) = r0            ; the key: the thread id
//! r0 = map_lookup_elem(threads, r10 - 4)
//! if r0 == 0 goto pass
//! r0 = 0; exit                       ; in the map: no sample
//! pass: r0 = 1; exit                 ; (or the capture's part, which ends so)
//! ```
//!
//! Loading needs CAP_BPF and CAP_PERFMON (or root): without them the recorder keeps
//! the inherited copies' samples, as before.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use super::asm::{Asm, AsmError, Cond, Helper, Map, Program, Reg, Size};
use super::capture_program::{CaptureMaps, capture_part};
use super::layout::stack;
use super::syscall::{self, MapKind};
use crate::sys::perf::EventFd;

/// Threads the map holds at most: a thread beyond keeps its inherited samples.
pub(crate) const FILTER_CAPACITY: u32 = 16_384;

/// The program of the module's doc over the map `threads`; with `capture`, a sample
/// the filter keeps goes on to the capture's part (`ctx` in r6, the tid at
/// [`stack::TID`]) instead of `pass`. Without `filter`, the capture part alone (for the
/// events of the threads in the map: their own samples).
pub(super) fn program(
    threads: Map,
    capture: Option<CaptureMaps>,
    filter: bool,
) -> Result<Program, AsmError> {
    let mut a = Asm::new();
    a.mov(Reg::R6, Reg::R1)
        .call(Helper::GetCurrentPidTgid)
        .store(Size::W, Reg::R10, stack::TID, Reg::R0);
    if filter {
        a.map_lookup(threads, stack::TID)
            .jump_if(Reg::R0, Cond::Eq, 0, "pass")
            .mov_imm(Reg::R0, 0)
            .exit()
            .label("pass");
    }
    match capture {
        Some(maps) => capture_part(&mut a, maps),
        None => {
            a.mov_imm(Reg::R0, 1).exit();
        }
    }
    a.finish()
}

/// The map of threads whose inherited samples are dropped, and the program that
/// drops them.
#[derive(Debug)]
pub(crate) struct ThreadFilter {
    map: OwnedFd,
    prog: OwnedFd,
    /// With a capture: its part alone, for the threads' own events.
    own: Option<OwnedFd>,
}

impl ThreadFilter {
    /// Creates the map and loads the program; refused without the privileges.
    pub(crate) fn new() -> io::Result<ThreadFilter> {
        ThreadFilter::with_capture(None)
    }

    /// Creates the map and loads the program, with the part of the capture over
    /// `capture`'s maps when given (see `super::StackCapture::filter`).
    pub(super) fn with_capture(capture: Option<CaptureMaps>) -> io::Result<ThreadFilter> {
        let map = syscall::create_map(MapKind::Hash, 4, 1, FILTER_CAPACITY)?;
        let threads = Map {
            name: "filtered",
            fd: map.as_raw_fd(),
        };
        let assemble = |filter| program(threads, capture, filter).map_err(io::Error::other);
        let prog = syscall::load(assemble(true)?.insns(), capture.is_some())?;
        let own = match capture {
            Some(_) => Some(syscall::load(assemble(false)?.insns(), true)?),
            None => None,
        };
        Ok(ThreadFilter { map, prog, own })
    }

    /// Runs the program at every sample of `event` and of the copies the kernel
    /// inherits from it afterwards.
    pub(crate) fn attach(&self, event: &EventFd) -> io::Result<()> {
        syscall::set_bpf(event, &self.prog)
    }

    /// Runs the capture (and no filter) at every sample of `event`, an event of a
    /// thread in the map; nothing without a capture.
    pub(crate) fn attach_own(&self, event: &EventFd) -> io::Result<()> {
        self.own
            .as_ref()
            .map_or(Ok(()), |p| syscall::set_bpf(event, p))
    }

    /// Drops the inherited samples of thread `tid` from now on. Fails when the map is
    /// full ([`FILTER_CAPACITY`]).
    pub(crate) fn exclude(&self, tid: u32) -> io::Result<()> {
        syscall::update(&self.map, &tid.to_ne_bytes(), &[1])
    }

    /// Keeps the inherited samples of thread `tid` again (it ended: its id may be
    /// reused).
    pub(crate) fn include(&self, tid: u32) -> io::Result<()> {
        syscall::delete(&self.map, &tid.to_ne_bytes())
    }
}
