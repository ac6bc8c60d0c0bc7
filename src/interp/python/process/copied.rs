//! A thread's chain of frames copied by the kernel at the sample instant (3.11+; the
//! recorder's BPF program, `sys::StackCapture`): where the copy starts for each
//! thread ([`ChainStart`], registered with the kernel), and the copy taken as the
//! thread's "now" for the checks of [`PythonProcess::frames`].

use std::collections::HashMap;

use super::PythonProcess;
use crate::interp::Memory;
use crate::interp::python::layout::FrameShape;

/// Where a thread's chain of frames starts and how it goes on, for a copy of it
/// taken at the sample instant: the thread state, the offset there of the first
/// pointer, the offset of the innermost frame's pointer in what that points to
/// (3.11, 3.12's `_PyCFrame`), the offset of `previous` in a frame.
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
}

impl PythonProcess {
    /// The chain start of thread state `tstate` (3.11+; None before).
    fn start_at(&self, tstate: u64) -> Option<ChainStart> {
        let l = &self.runtime.layout;
        let FrameShape::Interpreter { previous, .. } = l.frame else {
            return None;
        };
        Some(ChainStart {
            tstate,
            first: l.tstate_frame,
            second: l.cframe_current_frame,
            previous,
        })
    }

    /// Where thread `tid`'s chain starts (3.11+; None before, or when the thread has
    /// no thread state).
    pub fn chain_start(&mut self, mem: &impl Memory, tid: u32) -> Option<ChainStart> {
        self.start_at(0)?;
        let tstate = self.thread_state(mem, tid)?;
        self.start_at(tstate)
    }

    /// Where each thread's chain starts, for every thread of the process now (3.11+;
    /// empty before).
    pub fn chain_starts(&mut self, mem: &impl Memory) -> Vec<(u32, ChainStart)> {
        if self.start_at(0).is_none() {
            return Vec::new();
        }
        self.threads = self.runtime.thread_states(mem);
        (self.threads.iter())
            .filter_map(|(&tid, &tstate)| Some((tid, self.start_at(tstate)?)))
            .collect()
    }

    /// The next [`PythonProcess::frames`] is of a sample whose chain the kernel
    /// copied at the sample instant, from thread state `tstate` (the one registered
    /// for the thread): `frames`, innermost first, each frame's address and first
    /// bytes. That chain is the thread's "now" for the checks, as it is the sample's:
    /// not read again from the process.
    pub fn copied_at_instant<'a>(
        &mut self,
        tstate: u64,
        frames: impl IntoIterator<Item = (u64, &'a [u8])>,
    ) {
        let FrameShape::Interpreter { code, .. } = self.runtime.layout.frame else {
            return;
        };
        let code = code as usize;
        let mut now = HashMap::new();
        let mut first = None;
        for (addr, bytes) in frames {
            let Some(c) = bytes.get(code..code + 8) else {
                break;
            };
            first.get_or_insert(addr);
            now.insert(addr, u64::from_le_bytes(c.try_into().unwrap_or_default()));
        }
        self.copied = Some((tstate, now, first));
    }
}
