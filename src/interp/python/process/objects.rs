//! 3.8–3.10: one native eval call per Python frame, each frame a `PyFrameObject` on
//! the heap. Frame objects are recycled as soon as their call returns, so a chain
//! read after the sample is often not the sample's; each eval call's own C frame, in
//! the stack copy, is exact. So each eval call's function is read from its C frame
//! (searched from its own locals down, so that what its callees left is met last):
//! the eval loop's instruction pointer into a code object's bytecode, next to that
//! code object, its bytecode's start or a frame object of it, both held by that call (in its C frame, or in the
//! callee-saved registers its callee pushed; the innermost call also in the sample's
//! registers). An eval call whose C frame holds no such pair is one [`CHANGED`] frame.

use super::{CHANGED, PythonProcess, RawFrame, SampleInstant};
use crate::interp::Memory;
use crate::interp::python::code;
use crate::interp::python::layout::FrameShape;

/// Words of one eval call's C frame tried as frame objects to learn code objects
/// from, at most.
const MAX_CANDIDATES: usize = 64;
/// Callee-saved registers a function pushes at most on entry (rbx, rbp, r12–r15):
/// an eval call's register values at its call sit in the words right below its
/// callee's return address.
const PUSHED: u64 = 6 * 8;

impl PythonProcess {
    /// The Python frames of a sample with `evals` eval calls, one per call, innermost
    /// first, each read from its own C frame. `chain` is the thread's chain as read
    /// afterwards: its code objects are learnt, so that the instruction pointers in
    /// the C frames are recognised.
    pub(super) fn object_frames(
        &mut self,
        mem: &impl Memory,
        at: &SampleInstant<'_>,
        chain: &[RawFrame],
        evals: usize,
    ) -> Vec<Vec<u64>> {
        for f in chain {
            self.learn(mem, f.code);
        }
        let near = chain.first().map(|f| f.frame >> 30);
        let mut out = Vec::with_capacity(evals);
        for k in 0..evals {
            let (lo, hi) = at.eval_frame(k);
            if hi == u64::MAX {
                // Its C frame is not in the copy: nothing of the sample shows it.
                self.counts.changed += 1;
                self.counts.unconfirmed += u64::from(k == 0);
                out.push(vec![CHANGED]);
                continue;
            }
            // Its register values at its call are also in the words its callee
            // pushed on entry.
            let lo = if k == 0 {
                lo
            } else {
                lo.saturating_sub(PUSHED)
            };
            // The innermost call's code objects are learnt first: a stale pointer
            // into known code must not win over the running one, not known yet.
            if k == 0
                && let Some(near) = near
            {
                self.learn_from(mem, at, true, lo, hi, near);
            }
            let mut found = self.held_frame(mem, at, k == 0, lo, hi);
            if found.is_none()
                && k > 0
                && let Some(near) = near
            {
                self.learn_from(mem, at, k == 0, lo, hi, near);
                found = self.held_frame(mem, at, k == 0, lo, hi);
            }
            match found {
                Some(f) => out.push(vec![self.id(mem, &f)]),
                None => {
                    self.counts.changed += 1;
                    self.counts.unconfirmed += u64::from(k == 0);
                    out.push(vec![CHANGED]);
                }
            }
        }
        out
    }

    /// The frame an eval call held at the sample: the first word of `lo..hi` from the
    /// highest (then the registers, if `regs`) that points into the bytecode of a known code object,
    /// still the same, when a word of the same range is that code object, its
    /// bytecode's start or a frame object of it.
    fn held_frame(
        &self,
        mem: &impl Memory,
        at: &SampleInstant<'_>,
        regs: bool,
        lo: u64,
        hi: u64,
    ) -> Option<RawFrame> {
        let FrameShape::Object { code: f_code, .. } = self.runtime.layout.frame else {
            return None;
        };
        let rt = self.runtime;
        let mut found = None;
        at.find_down(
            |w| {
                let Some((&start, &(end, _))) = self.bytecode.range(..w).next_back() else {
                    return false;
                };
                if w > end {
                    return false;
                }
                let codes = self.sharing.get(&start).map_or(&[][..], Vec::as_slice);
                for &code in codes {
                    if !code::fingerprint(mem, &rt.layout, rt.code_type, code)
                        .is_some_and(|p| self.codes.get(&code).is_some_and(|c| c.fingerprint == p))
                    {
                        continue;
                    }
                    // The eval loop holds the code object or its frame object too
                    // (or the bytecode's start, if no other code object shares it).
                    let frame = at.find(
                        |v| {
                            v == code
                                || v == start && codes.len() == 1
                                || v.is_multiple_of(8)
                                    && mem.u64_at(v.wrapping_add(f_code)) == Some(code)
                        },
                        regs,
                        lo,
                        hi,
                    );
                    if let Some(frame) = frame {
                        found = Some(RawFrame {
                            frame,
                            code,
                            offset: Some(w - 2 - start),
                        });
                        return true;
                    }
                }
                false
            },
            regs,
            lo,
            hi,
        );
        found
    }

    /// Learns the code objects that the words of `lo..hi` (from the highest; then the
    /// registers, if `regs`) may be or hold as frame objects: user-space addresses,
    /// at most [`MAX_CANDIDATES`], those near the thread's other frames (`near`: their
    /// address's gigabyte).
    fn learn_from(
        &mut self,
        mem: &impl Memory,
        at: &SampleInstant<'_>,
        regs: bool,
        lo: u64,
        hi: u64,
        near: u64,
    ) {
        let FrameShape::Object { code: f_code, .. } = self.runtime.layout.frame else {
            return;
        };
        let mut codes = Vec::new();
        at.find_down(
            |v| {
                if v.is_multiple_of(8) && v >> 30 == near {
                    codes.push(v);
                    if let Some(c) = mem.u64_at(v.wrapping_add(f_code)) {
                        codes.push(c);
                    }
                }
                codes.len() >= MAX_CANDIDATES
            },
            regs,
            lo,
            hi,
        );
        for c in codes {
            self.learn(mem, c);
        }
    }
}
