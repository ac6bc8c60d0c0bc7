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
use crate::interp::python::code;
use crate::interp::python::layout::FrameShape;
use crate::interp::{AddrMap, Memory};

/// Words of one eval call's C frame tried as frame objects to learn code objects
/// from, at most.
const MAX_CANDIDATES: usize = 256;
/// Callee-saved registers a function pushes at most on entry (rbx, rbp, r12–r15):
/// an eval call's register values at its call sit in the words right below its
/// callee's return address. `_PyEval_EvalFrameDefault` of 3.8–3.10 pushes all six
/// first thing.
const PUSHED: u64 = 6 * 8;

/// An eval call's words in the stack copy (from, to), when copied.
type Words = Option<(u64, u64)>;

impl PythonProcess {
    /// The Python frames of a sample with `evals` eval calls, one per call, innermost
    /// first. `chain` is the thread's chain: when the kernel copied it at the sample
    /// instant (`copied`: the frames copied, by address) whole, with one frame per
    /// eval call, it is the sample's, each frame that of the eval call at its place.
    /// Else each call's frame is read from its own C frame, and `chain`, read
    /// afterwards, only has its code objects learnt, so that the instruction pointers
    /// in the C frames are recognised. When the native stack was cut (`at.cut`), one
    /// more segment follows: the Python callers past it, from `chain` (see
    /// [`PythonProcess::past_native`]; `live`: the process as it is now, `tstate`
    /// the thread's state).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn object_frames(
        &mut self,
        mem: &impl Memory,
        live: &impl Memory,
        tstate: u64,
        at: &SampleInstant<'_>,
        chain: &[RawFrame],
        evals: usize,
        copied: Option<&AddrMap<u64>>,
    ) -> Vec<Vec<u64>> {
        // An eval call sets the thread's current frame to its own first thing, and
        // back to its caller's last thing: a sample in between has one frame fewer in
        // the chain than eval calls on the stack, and is read from the C frames. A
        // copy cut short (its outermost frame read afterwards) is not whole.
        if let Some(c) = copied
            && chain.len() == evals
            && chain.last().is_none_or(|f| c.contains_key(&f.frame))
        {
            return chain.iter().map(|f| vec![self.id(mem, f)]).collect();
        }
        for f in chain {
            self.learn(mem, f.code);
        }
        let near = chain.first().map(|f| f.frame >> 30);
        let (found_all, regions) = self.candidates(mem, at, evals, near);
        let mut chosen = self.choose(mem, at, &found_all, &regions);
        let past = if at.cut {
            self.past_native(mem, live, tstate, chain, copied, &mut chosen)
        } else {
            Vec::new()
        };
        let mut out = Vec::with_capacity(evals);
        for (k, found) in chosen.into_iter().enumerate() {
            match found {
                Some(f) => out.push(vec![self.id(mem, &f)]),
                None => {
                    self.counts.changed += 1;
                    self.counts.unconfirmed += u64::from(k == 0);
                    out.push(vec![CHANGED]);
                }
            }
        }
        if !past.is_empty() {
            out.push(past);
        }
        out
    }

    /// Each of the `evals` eval calls' candidate frames, best first, and its words
    /// (its C frame and what its callees pushed) when copied. `near`: the top bits
    /// of the chain's frames' addresses, where frame objects are looked for.
    fn candidates(
        &mut self,
        mem: &impl Memory,
        at: &SampleInstant<'_>,
        evals: usize,
        near: Option<u64>,
    ) -> (Vec<Vec<RawFrame>>, Vec<Words>) {
        let mut found_all: Vec<Vec<RawFrame>> = Vec::with_capacity(evals);
        let mut regions: Vec<Words> = Vec::with_capacity(evals);
        for k in 0..evals {
            let (lo, hi) = at.eval_frame(k);
            if hi == u64::MAX {
                // Its C frame is not in the copy: nothing of the sample shows it.
                found_all.push(Vec::new());
                regions.push(None);
                continue;
            }
            // Its register values at its call are also in the words its callee
            // pushed on entry; the words it pushed on its own entry hold its
            // caller's (the eval call outside it: `worker` seen in `exists` while
            // `os.stat` runs), so they are not its.
            let lo = if k == 0 {
                lo
            } else {
                lo.saturating_sub(PUSHED)
            };
            let hi = hi.saturating_sub(PUSHED).max(lo);
            regions.push(Some((lo, hi)));
            // The innermost call's code objects are learnt first: a stale pointer
            // into known code must not win over the running one, not known yet.
            if k == 0
                && let Some(near) = near
            {
                self.learn_from(mem, at, true, lo, hi, near);
            }
            let mut found = self.held_frames(mem, at, k == 0, lo, hi);
            if found.is_empty()
                && k > 0
                && let Some(near) = near
            {
                self.learn_from(mem, at, k == 0, lo, hi, near);
                found = self.held_frames(mem, at, k == 0, lo, hi);
            }
            found_all.push(found);
        }
        (found_all, regions)
    }

    /// From the outermost call in: each call's first candidate that is not an echo
    /// of the call outside it. One with the very frame object of the call outside it
    /// is that call's (a frame object is one call's), seen in a register its callees
    /// saved, unless that call is the inner one of a recursion (its frame object's
    /// caller runs the same code): a call of a recursion can be given the frame
    /// object of the one inside it, which its callee holds, the name the same. The
    /// call's own is then the frame object its words hold that was called from that
    /// one (`f_back`), if they hold one.
    fn choose(
        &mut self,
        mem: &impl Memory,
        at: &SampleInstant<'_>,
        found_all: &[Vec<RawFrame>],
        regions: &[Words],
    ) -> Vec<Option<RawFrame>> {
        let mut chosen: Vec<Option<RawFrame>> = vec![None; found_all.len()];
        for k in (0..found_all.len()).rev() {
            let outer = chosen.get(k + 1).copied().flatten();
            let plain = found_all[k]
                .iter()
                .find(|f| outer.is_none_or(|g| !self.echo(mem, f, &g)))
                .copied();
            chosen[k] = match (plain, outer, regions[k]) {
                (Some(f), Some(g), Some((lo, hi)))
                    if f.frame == g.frame && self.outer_echo(mem, &g) =>
                {
                    self.linked_frame(mem, at, k == 0, lo, hi, g.frame)
                }
                _ => plain,
            };
        }
        chosen
    }

    /// Whether `f`, found for an eval call, is an echo of `g`, found for the call
    /// outside it: the same code at the same instruction, without distinct frame
    /// objects telling the calls apart (a recursion has one frame object per call). What the outer call left in the inner one's C
    /// frame (stale words, the registers the inner call saved on entry) is not the
    /// inner call's.
    fn echo(&self, mem: &impl Memory, f: &RawFrame, g: &RawFrame) -> bool {
        f.code == g.code
            && f.offset == g.offset
            && (f.frame == g.frame || !self.frame_object(mem, f) || !self.frame_object(mem, g))
    }

    /// Whether a candidate with `g`'s frame object, found for the call inside `g`'s,
    /// is `g`'s own call seen again: `g`'s frame is a frame object of `g`'s code
    /// whose caller (`f_back`, as it is now) runs other code.
    fn outer_echo(&self, mem: &impl Memory, g: &RawFrame) -> bool {
        let FrameShape::Object {
            back, code: f_code, ..
        } = self.runtime.layout.frame
        else {
            return false;
        };
        self.frame_object(mem, g)
            && mem
                .u64_at(g.frame.wrapping_add(back))
                .is_some_and(|b| b == 0 || mem.u64_at(b.wrapping_add(f_code)) != Some(g.code))
    }

    /// A frame object among the words of `lo..hi` (and the registers, if `regs`)
    /// called from `outer` (its `f_back`), of a code object still the same: the frame
    /// of an eval call whose C frame holds no instruction pointer next to it. Its
    /// instruction is the instruction pointer into its bytecode among those words if
    /// there is one, else its `f_lasti` as it is now.
    fn linked_frame(
        &mut self,
        mem: &impl Memory,
        at: &SampleInstant<'_>,
        regs: bool,
        lo: u64,
        hi: u64,
        outer: u64,
    ) -> Option<RawFrame> {
        let FrameShape::Object {
            back,
            code: f_code,
            lasti,
            lasti_in_units,
        } = self.runtime.layout.frame
        else {
            return None;
        };
        let mut linked = Vec::new();
        at.find(
            |v| {
                if v != outer
                    && v.is_multiple_of(8)
                    && mem.u64_at(v.wrapping_add(back)) == Some(outer)
                    && let Some(code) = mem.u64_at(v.wrapping_add(f_code))
                {
                    linked.push((v, code));
                }
                linked.len() >= 4
            },
            regs,
            lo,
            hi,
        );
        let rt = self.runtime;
        for (frame, code) in linked {
            let Some(print) = self.learn(mem, code) else {
                continue;
            };
            let Some(start) = code::bytecode_start(mem, &rt.layout, code) else {
                continue;
            };
            let end = start.saturating_add(print.bytecode_len());
            let offset = at
                .find_down(|w| w > start && w <= end, regs, lo, hi)
                .map(|w| w - 2 - start)
                .or_else(|| {
                    // An int: -1 before the first instruction.
                    let l = mem.u32_at(frame.wrapping_add(lasti))?.cast_signed();
                    let l = u64::try_from(l).ok()?;
                    Some(if lasti_in_units { l * 2 } else { l })
                });
            return Some(RawFrame {
                frame,
                code,
                offset,
            });
        }
        None
    }

    /// Whether `f.frame` is a frame object of `f.code` (not the code object or its
    /// bytecode's start, which are the other evidence [`Self::held_frames`] takes).
    pub(super) fn frame_object(&self, mem: &impl Memory, f: &RawFrame) -> bool {
        let FrameShape::Object { code: f_code, .. } = self.runtime.layout.frame else {
            return false;
        };
        f.frame != f.code && mem.u64_at(f.frame.wrapping_add(f_code)) == Some(f.code)
    }

    /// The frames an eval call may have held at the sample, best first: the first value that points into
    /// the bytecode of a known code object, still the same, when a word of `lo..hi`
    /// (or a register, if `regs`) is that code object, its bytecode's start or a
    /// frame object of it. Looked for among the registers first, if `regs` (the
    /// innermost call: the words of its C frame may hold what an earlier call at that
    /// depth left, such as the call outside it), then the words of `lo..hi` from the
    /// highest (what its callees left is met last), then the registers.
    fn held_frames(
        &self,
        mem: &impl Memory,
        at: &SampleInstant<'_>,
        regs: bool,
        lo: u64,
        hi: u64,
    ) -> Vec<RawFrame> {
        let mut out = Vec::with_capacity(2);
        if regs && let Some(f) = self.held_frame_at(mem, at, regs, (hi, hi), lo, hi) {
            out.push(f);
        }
        if let Some(f) = self.held_frame_at(mem, at, regs, (lo, hi), lo, hi)
            && !out.contains(&f)
        {
            out.push(f);
        }
        out
    }

    /// As [`Self::held_frames`], one candidate: the instruction pointer looked for in the words of
    /// `words` from the highest, then the registers if `regs`.
    fn held_frame_at(
        &self,
        mem: &impl Memory,
        at: &SampleInstant<'_>,
        regs: bool,
        words: (u64, u64),
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
                        .is_some_and(|p| self.codes.peek(&code).is_some_and(|c| c.fingerprint == p))
                    {
                        continue;
                    }
                    // The eval loop holds a frame object of that code too (taken
                    // first: it tells calls of the same code apart), or the code
                    // object (or the bytecode's start, if no other code object
                    // shares it).
                    let frame = at
                        .find(
                            |v| {
                                v != code
                                    && v.is_multiple_of(8)
                                    && mem.u64_at(v.wrapping_add(f_code)) == Some(code)
                            },
                            regs,
                            lo,
                            hi,
                        )
                        .or_else(|| {
                            at.find(
                                |v| v == code || v == start && codes.len() == 1,
                                regs,
                                lo,
                                hi,
                            )
                        });
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
            words.0,
            words.1,
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
