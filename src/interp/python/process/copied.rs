//! A thread's chain of frames copied by the kernel at the sample instant (the
//! recorder's BPF program, `sys::StackCapture`): where the copy starts for each
//! thread and what it copies of each frame ([`ChainStart`], registered with the
//! kernel), and the copy taken as the thread's "now" for the checks of
//! [`PythonProcess::frames`].

use crate::interp::AddrMap;

use super::PythonProcess;
use crate::interp::Memory;
use crate::interp::python::Layout;
use crate::interp::python::layout::FrameShape;

/// Bytes of each frame the kernel copies at most: every field read of a frame lies
/// in them, from [`copy_span`]'s start.
pub const COPIED: usize = 88;

/// Which bytes of each frame of `layout` the kernel copies: (where in the frame they
/// start, how many). 3.11+: a `_PyInterpreterFrame`'s first 72 bytes, every field
/// the checks read of it (the code object, the caller, the instruction, the owner);
/// 3.8–3.10: a frame object's from `f_back` to the end of `f_lasti` (past its object
/// header), rounded to a word.
pub fn copy_span(layout: &Layout) -> (u64, u64) {
    match layout.frame {
        FrameShape::Interpreter { .. } => (0, 72),
        FrameShape::Object {
            back, code, lasti, ..
        } => {
            let skip = back.min(code).min(lasti);
            let end = (back.max(code) + 8).max(lasti + 4);
            (skip, (end - skip).next_multiple_of(8).min(COPIED as u64))
        }
    }
}

/// Where a thread's chain of frames starts and how it goes on, for a copy of it
/// taken at the sample instant: the thread state, the offset there of the first
/// pointer, the offset of the innermost frame's pointer in what that points to
/// (3.11, 3.12's `_PyCFrame`), the offset of the caller's frame pointer in a frame,
/// and the bytes of each frame copied ([`copy_span`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainStart {
    /// The thread state's address.
    pub tstate: u64,
    /// The offset there of the pointer read first.
    pub first: u64,
    /// The offset of the innermost frame's pointer in what the first points to.
    pub second: Option<u64>,
    /// The offset of the caller's frame pointer in a frame.
    pub previous: u64,
    /// Where in a frame the bytes copied start.
    pub skip: u64,
    /// How many bytes of a frame are copied.
    pub len: u64,
}

/// A sample's chain as the kernel copied it at the sample instant.
pub(super) struct Copy {
    /// The thread state it was copied from.
    pub tstate: u64,
    /// Each frame's code object, by the frame's address.
    pub now: AddrMap<u64>,
    /// The innermost frame.
    pub first: Option<u64>,
    /// The copy was cut short (the kernel's bound on frames, or a fault): its last
    /// frame has a caller.
    pub cut: bool,
}

impl PythonProcess {
    /// The chain start of thread state `tstate`.
    fn start_at(&self, tstate: u64) -> ChainStart {
        let l = &self.runtime.layout;
        let previous = match l.frame {
            FrameShape::Interpreter { previous, .. } => previous,
            FrameShape::Object { back, .. } => back,
        };
        let (skip, len) = copy_span(l);
        ChainStart {
            tstate,
            first: l.tstate_frame,
            second: l.cframe_current_frame,
            previous,
            skip,
            len,
        }
    }

    /// Where thread `tid`'s chain starts (None when the thread has no thread state).
    pub fn chain_start(&mut self, mem: &impl Memory, tid: u32) -> Option<ChainStart> {
        let tstate = self.thread_state(mem, tid)?;
        Some(self.start_at(tstate))
    }

    /// Where each thread's chain starts, for every thread of the process now.
    pub fn chain_starts(&mut self, mem: &impl Memory) -> Vec<(u32, ChainStart)> {
        self.walk_threads(mem, true);
        (self.threads.iter())
            .map(|(&tid, &tstate)| (tid, self.start_at(tstate)))
            .collect()
    }

    /// The next [`PythonProcess::frames`] is of a sample whose chain the kernel
    /// copied at the sample instant, from thread state `tstate` (the one registered
    /// for the thread): `frames`, innermost first, each frame's address and first
    /// bytes ([`copy_span`]). That chain is the thread's "now" for the checks, as it
    /// is the sample's: not read again from the process. A copy cut short (its last
    /// frame has a caller) goes on with frames read from the process, checked as a
    /// chain read without a copy is (`beyond`).
    pub fn copied_at_instant<'a>(
        &mut self,
        tstate: u64,
        frames: impl IntoIterator<Item = (u64, &'a [u8])>,
    ) {
        let (code, previous) = match self.runtime.layout.frame {
            FrameShape::Interpreter { code, previous, .. } => (code, previous),
            FrameShape::Object { code, back, .. } => (code, back),
        };
        let skip = copy_span(&self.runtime.layout).0;
        let (Some(code), Some(previous)) = (code.checked_sub(skip), previous.checked_sub(skip))
        else {
            return;
        };
        let (code, previous) = (code as usize, previous as usize);
        let word = |bytes: &[u8], at: usize| {
            let w = bytes.get(at..at.checked_add(8)?)?;
            Some(u64::from_le_bytes(w.try_into().ok()?))
        };
        let mut now = AddrMap::default();
        let mut first = None;
        let mut cut = false;
        for (addr, bytes) in frames {
            let Some(c) = word(bytes, code) else {
                break;
            };
            first.get_or_insert(addr);
            now.insert(addr, c);
            cut = word(bytes, previous).is_some_and(|p| p != 0);
        }
        self.copied = Some(Copy {
            tstate,
            now,
            first,
            cut,
        });
    }

    /// The chain copied for the sample being read, if its thread state is still
    /// thread `tid`'s: a registration left from an ended thread whose id a new thread
    /// took copies from the old thread state, which is not the sample's (then the
    /// chain is read from the process, and [`PythonProcess::stale_copy`] says so).
    pub(super) fn copy_for(&mut self, mem: &impl Memory, tid: u32) -> Option<Copy> {
        let copied = self.copied.take()?;
        if self.runtime.tid_of(mem, copied.tstate) == Some(tid) {
            return Some(copied);
        }
        self.stale = true;
        self.threads.remove(&tid);
        None
    }

    /// Whether the chain copied for the last sample read came from a thread state
    /// that is not its thread's: the thread is to be registered again.
    pub fn stale_copy(&mut self) -> bool {
        std::mem::take(&mut self.stale)
    }
}
