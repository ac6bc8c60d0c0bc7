//! A thread that did not run while it was read (`dump` reads a thread blocked in a
//! system call, and checks afterwards that it still is): its chain as it is now is
//! its chain at the read, so it is taken whole, each frame at the instruction the
//! frame itself records, with no sample instant to confirm it against. Each code
//! object is still checked, and the chain must have one segment per eval call of the
//! native stack (more when the native stack was cut: the callers past it follow),
//! else every eval call is one [`CHANGED`] frame.

use super::{CHANGED, PythonProcess};
use crate::interp::Memory;
use crate::interp::python::walk::WalkError;

impl PythonProcess {
    /// The Python frames of thread `tid`, blocked since its native stack (with `evals`
    /// eval calls; `cut`: its outermost calls are not among them) was read: one
    /// segment of frame ids (leaf first) per eval call, innermost first, then (`cut`)
    /// those of the outer calls the native stack does not hold.
    pub fn steady_frames(
        &mut self,
        mem: &impl Memory,
        tid: u32,
        evals: usize,
        cut: bool,
    ) -> Result<Vec<Vec<u64>>, WalkError> {
        self.prints.clear();
        let Some(tstate) = self.thread_state(mem, tid) else {
            self.counts.no_thread += 1;
            return Err(WalkError::NoThreadState);
        };
        let rt = self.runtime;
        let frame = rt.current_frame(mem, tstate).ok_or(WalkError::Unreadable)?;
        let read = rt.segments(mem, frame, 0);
        let still = rt.current_frame(mem, tstate) == Some(frame);
        let changed_before = self.counts.changed;
        let out = match read {
            Ok((segs, _))
                if still && evals > 0 && (segs.len() == evals || cut && segs.len() > evals) =>
            {
                segs.iter()
                    .map(|seg| seg.iter().map(|f| self.id(mem, f)).collect())
                    .collect()
            }
            _ => {
                self.counts.changed += evals as u64;
                self.counts.unconfirmed += 1;
                vec![vec![CHANGED]; evals]
            }
        };
        self.counts.samples += 1;
        self.counts.frames += out.iter().map(|s: &Vec<u64>| s.len() as u64).sum::<u64>();
        if self.counts.changed > changed_before {
            self.counts.samples_changed += 1;
        }
        Ok(out)
    }
}
