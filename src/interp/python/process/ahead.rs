//! Reading a thread's Python state ahead of its sample's turn (3.11+): the recorder
//! hands samples out in time order a round after it drained them, and by then the
//! thread has often returned from the frames the sample ran (a `_PyInterpreterFrame`
//! is a reused slot of the thread's data stack: a chain read late is not the
//! sample's). [`PythonProcess::read_ahead`] reads, as soon as the sample is drained,
//! what [`PythonProcess::frames`] reads of the process "as it is now": the thread
//! state, its chain and the code objects on it, the `_PyCFrame` chain (3.11, 3.12),
//! through a page cache whose pages the caller keeps for that sample. The checks made
//! on them when the sample is handled are the same: reading earlier only makes them
//! fail less often.

use super::PythonProcess;
use crate::interp::Memory;
use crate::interp::python::instant::{self, MAX_CFRAMES};
use crate::interp::python::layout::FrameShape;

impl PythonProcess {
    /// Whether [`PythonProcess::read_ahead`] reads anything for this process's
    /// version (3.11+: 3.8–3.10 chain frame objects that do not move).
    pub fn reads_ahead(&self) -> bool {
        matches!(self.runtime.layout.frame, FrameShape::Interpreter { .. })
    }

    /// Reads through `mem` (a page cache over the process as it is now) what the
    /// sample of thread `tid` just drained will be checked against: its thread state,
    /// the chain of frames it runs (each frame's head and code object), the code
    /// object it runs (learnt, so that the sample's instruction pointer into it is
    /// recognised), and the chain of `_PyCFrame`s from the thread state. False when
    /// the chain was not read whole at one moment (the thread pushed or popped a
    /// frame meanwhile): the caller reads again. `direct` reads the process again,
    /// past the cache (or through pages of its own, each read after every page `mem`
    /// read): the chain read through `mem` must be the one read again through it, as
    /// [`PythonProcess::frames`] checks a chain read at two moments (the pages of a
    /// cache are each read at their own moment). `checked`: the pages the check read
    /// for this thread's last sample, fetched in one go once the first read is done.
    /// The check takes the frame sizes of the code objects from the first read (they
    /// are fixed for an object's life; whether each frame still runs the same object
    /// is what it compares), so it reads the thread state and the chain's frames only.
    pub fn read_ahead(
        &mut self,
        mem: &impl Memory,
        direct: &impl Memory,
        tid: u32,
        checked: &[u64],
    ) -> bool {
        self.prints.clear();
        if !self.reads_ahead() {
            return true;
        }
        let Some(tstate) = self.thread_state(mem, tid) else {
            return true;
        };
        let rt = self.runtime;
        let mut sizes = instant::FrameSizes::new();
        let (now, current) = instant::live_chain(&rt, mem, tstate, &mut sizes);
        if let Some(&code) = current.and_then(|f| now.get(&f)) {
            self.learn(mem, code);
        }
        // The second read's pages, all read after the first read's, in one go.
        direct.prefetch(checked);
        let whole = (!now.is_empty() || current.is_none_or(|f| f == 0))
            && instant::live_chain(&rt, direct, tstate, &mut sizes) == (now, current);
        let Some(current_frame) = rt.layout.cframe_current_frame else {
            return whole;
        };
        // `previous` follows `current_frame` in `_PyCFrame`.
        let previous = current_frame + 8;
        let mut cframe = tstate
            .checked_add(rt.layout.tstate_frame)
            .and_then(|a| mem.u64_at(a));
        for _ in 0..MAX_CFRAMES {
            match cframe {
                Some(c) if c != 0 && c.is_multiple_of(8) => {
                    cframe = c.checked_add(previous).and_then(|a| mem.u64_at(a));
                }
                _ => break,
            }
        }
        whole
    }
}
