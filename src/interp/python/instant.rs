//! What a sample holds of the Python frames it ran, exact at its instant: the stack
//! copy and callee-saved registers ([`SampleInstant`]), where the eval loop keeps its
//! instruction pointer and, in 3.11 and 3.12, the current frame (`_PyCFrame` is a local
//! of the eval call); and which frames of a chain read afterwards can be trusted for
//! the sample ([`trusted_from`]): those the thread still runs, read the same twice.

use std::collections::HashMap;

use super::code;
use super::layout::{self, FrameShape};
use super::walk::{RawFrame, Runtime};
use crate::interp::{AddrMap, Memory};

/// `_PyCFrame`s followed at most from the thread state to the innermost eval call's.
pub(super) const MAX_CFRAMES: usize = 256;

/// What the sample itself holds, as it was at its instant: the stack copy and the
/// callee-saved registers, where the eval loop keeps its instruction pointer.
#[derive(Debug, Clone, Copy)]
pub struct SampleInstant<'a> {
    /// The stack pointer: the address of `stack[0]`.
    pub sp: u64,
    /// The copied stack.
    pub stack: &'a [u8],
    /// Register values (RBX, RBP, R12 to R15), zero when not copied.
    pub regs: &'a [u64],
    /// For each native eval frame, innermost first: the address its C frame ends at
    /// (the slot of its return address; u64::MAX when not found in the copy).
    pub ends: &'a [u64],
    /// The native stack was cut: its outermost eval calls are not among them.
    pub cut: bool,
    /// The stack slots of the return addresses of the native calls the innermost
    /// eval call made, down to the sample's leaf, from the eval loop's callee inward
    /// (highest first); empty when the leaf is the eval loop itself; None when they
    /// are not all in the copy. They tell where the eval loop's own values are held
    /// ([`SampleInstant::held_words`]) from words left over by earlier calls.
    pub calls: Option<&'a [u64]>,
}

/// Words a function saves its caller's registers in, right under its return
/// address (rbp, rbx, r12 to r15 on x86-64).
const SAVE_AREA: u64 = 6 * 8;

impl SampleInstant<'_> {
    /// The first value that `wanted` accepts: among the registers if `regs`, then
    /// among the stack words at `lo..hi`, from the lowest.
    pub(super) fn find(
        &self,
        mut wanted: impl FnMut(u64) -> bool,
        regs: bool,
        lo: u64,
        hi: u64,
    ) -> Option<u64> {
        let words = self
            .stack
            .chunks_exact(8)
            .enumerate()
            .map(|(i, w)| (self.sp.saturating_add(8 * i as u64), w))
            .skip_while(|&(a, _)| a < lo)
            .take_while(|&(a, _)| a < hi)
            .map(|(_, w)| u64::from_le_bytes(w.try_into().unwrap_or_default()));
        let regs = if regs { self.regs } else { &[] };
        regs.iter()
            .copied()
            .chain(words)
            .find(|&v| v & 1 == 0 && wanted(v))
    }

    /// As [`SampleInstant::find`], the stack words from the highest (an eval call's
    /// own C frame before what the calls it made left below it), then the registers
    /// if `regs`.
    pub(super) fn find_down(
        &self,
        mut wanted: impl FnMut(u64) -> bool,
        regs: bool,
        lo: u64,
        hi: u64,
    ) -> Option<u64> {
        let first = lo.saturating_sub(self.sp).div_ceil(8);
        let last = hi.saturating_sub(self.sp) / 8;
        let words = self
            .stack
            .chunks_exact(8)
            .take(usize::try_from(last).unwrap_or(usize::MAX))
            .skip(usize::try_from(first).unwrap_or(usize::MAX))
            .rev()
            .map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()));
        let regs = if regs { self.regs } else { &[] };
        words
            .chain(regs.iter().copied())
            .find(|&v| v & 1 == 0 && wanted(v))
    }

    /// Whether the sample's leaf function is the innermost eval call itself (not a
    /// function it called).
    pub(super) fn in_eval(&self) -> bool {
        self.calls.is_some_and(|c| c.is_empty())
    }

    /// The word at `addr` of the copy.
    fn word(&self, addr: u64) -> Option<u64> {
        let i = usize::try_from(addr.checked_sub(self.sp)?).ok()?;
        let w = self.stack.get(i..i.checked_add(8)?)?;
        Some(u64::from_le_bytes(w.try_into().ok()?))
    }

    /// The values where the sample holds the innermost eval call's own state at its
    /// instant, in the order a search takes them: the eval loop's C frame below the
    /// registers it saved for its caller (its spill slots, from the lowest), the
    /// registers (what no function it called saved over), then the words under each
    /// return address of the calls it made, where each saved its caller's registers
    /// (from the eval loop's callee inward). Without [`SampleInstant::calls`], the
    /// registers alone. The other words of its stack ([`SampleInstant::left_words`])
    /// are the locals of the functions it called, where words of earlier calls at the
    /// same depth are left over: an instruction pointer of another function than the
    /// one the sample ran.
    pub(super) fn held_words(&self) -> Vec<u64> {
        self.held().into_iter().map(|(_, v)| v).collect()
    }

    /// The words of the innermost eval call's stack (from the stack pointer to its
    /// end) that [`SampleInstant::held_words`] does not take, from the lowest.
    pub(super) fn left_words(&self) -> Vec<u64> {
        let mut held: Vec<u64> = self.held().into_iter().filter_map(|(a, _)| a).collect();
        held.sort_unstable();
        let end = self.eval_frame(0).1;
        let words = (self.stack.len() / 8) as u64;
        (0..words)
            .map(|i| self.sp.saturating_add(8 * i))
            .take_while(|&a| a < end)
            .filter(|a| held.binary_search(a).is_err())
            .filter_map(|a| self.word(a))
            .collect()
    }

    /// [`SampleInstant::held_words`] with the address of each stack word.
    fn held(&self) -> Vec<(Option<u64>, u64)> {
        let mut out = Vec::new();
        let Some(calls) = self.calls else {
            out.extend(self.regs.iter().map(|&r| (None, r)));
            return out;
        };
        let end = self.eval_frame(0).1;
        let top = calls.first().map_or(self.sp, |s| s.saturating_add(8));
        // The eval call's own frame, past the registers it saved for its caller (an
        // outer eval call's instruction pointer, in 3.11 and 3.13 builds).
        let own_end = end
            .saturating_sub(SAVE_AREA)
            .min(self.sp.saturating_add(self.stack.len() as u64));
        // From the stack pointer at the lowest: a call slot below it (which no sample
        // gives, a hostile one may) must not make this a walk over the address space.
        let mut a = top.max(self.sp);
        while a < own_end {
            if let Some(w) = self.word(a) {
                out.push((Some(a), w));
            }
            let Some(next) = a.checked_add(8) else { break };
            a = next;
        }
        out.extend(self.regs.iter().map(|&r| (None, r)));
        for &slot in calls {
            let mut a = slot;
            while a > slot.saturating_sub(SAVE_AREA) && a > self.sp {
                let Some(prev) = a.checked_sub(8) else { break };
                a = prev;
                if let Some(w) = self.word(a) {
                    out.push((Some(a), w));
                }
            }
        }
        out
    }

    /// Where the C frame of the `k`th eval call (innermost first) lies in the stack:
    /// from the end of the one inside it (or the stack pointer) to its own end.
    pub(super) fn eval_frame(&self, k: usize) -> (u64, u64) {
        let lo = match k {
            0 => self.sp,
            k => self.ends.get(k - 1).copied().unwrap_or(u64::MAX),
        };
        (lo, self.ends.get(k).copied().unwrap_or(u64::MAX))
    }
}

/// The frame the innermost eval call of the sample was running, exact at the sample
/// instant, where the sample holds it (3.11 and 3.12): the `_PyCFrame` of each eval
/// call is a local of its C frame and keeps `current_frame` up to date with every call
/// and return, so the innermost call's, found in the stack copy by following the
/// thread's `cframe` chain (read `live`, as it is now: calls made since the sample
/// are passed over), holds it as it was at the sample. None in 3.13+ (no `_PyCFrame`)
/// or when the innermost eval call has returned since.
pub fn sample_frame(
    rt: &Runtime,
    mem: &impl Memory,
    live: &impl Memory,
    tstate: u64,
    at: &SampleInstant<'_>,
) -> Option<u64> {
    let current = rt.layout.cframe_current_frame?;
    // `previous` follows `current_frame` in `_PyCFrame` (3.11: after `use_tracing`).
    let previous = current + 8;
    let (lo, hi) = at.eval_frame(0);
    if hi == u64::MAX {
        return None;
    }
    let mut cframe = live.u64_at(tstate.checked_add(rt.layout.tstate_frame)?)?;
    for _ in 0..MAX_CFRAMES {
        if cframe == 0 || !cframe.is_multiple_of(8) {
            return None;
        }
        if cframe >= lo && cframe.saturating_add(previous + 8) <= hi {
            // From the copy: as it was at the sample.
            return mem.u64_at(cframe.wrapping_add(current)).filter(|&f| f != 0);
        }
        if cframe >= hi {
            // Past the innermost eval call: it has returned since the sample.
            return None;
        }
        cframe = live.u64_at(cframe.checked_add(previous)?)?;
    }
    None
}

/// The words of a frame of each code object met (3.11+), by the object's address:
/// fixed for the object's life, so a chain read twice reads them once.
pub type FrameSizes = HashMap<u64, Option<u64>>;

/// The frames of the thread's chain as it is now (`live`), by address: their
/// code objects; and the current frame. Empty when the chain was not read whole at one
/// moment: the current frame changed during the walk, or a frame of the data stack
/// does not lie right after its caller's (a frame read after the thread returned
/// through it and pushed another there: `worker -> hot_a -> deep` read while the
/// recursion unwound and `hot_a` was called). `sizes` holds the frame sizes of the
/// code objects read so far (read from `live` for the others, and kept).
pub fn live_chain(
    rt: &Runtime,
    live: &impl Memory,
    tstate: u64,
    sizes: &mut FrameSizes,
) -> (AddrMap<u64>, Option<u64>) {
    let (flat, now) = live_frames(rt, live, tstate, sizes);
    (flat.iter().map(|f| (f.frame, f.code)).collect(), now)
}

/// [`live_chain`]'s frames in their order, innermost first.
pub fn live_frames(
    rt: &Runtime,
    live: &impl Memory,
    tstate: u64,
    sizes: &mut FrameSizes,
) -> (Vec<RawFrame>, Option<u64>) {
    let Some(now) = rt.current_frame(live, tstate) else {
        return (Vec::new(), None);
    };
    let Ok((segs, _)) = rt.segments(live, now, 0) else {
        return (Vec::new(), Some(now));
    };
    let flat: Vec<RawFrame> = segs.into_iter().flatten().collect();
    if rt.current_frame(live, tstate) != Some(now)
        || flat
            .windows(2)
            .any(|w| !follows(rt, live, sizes, &w[1], &w[0]))
    {
        return (Vec::new(), Some(now));
    }
    (flat, Some(now))
}

/// Whether `callee` can have been pushed by `caller` (3.11+): both in the thread's
/// data stack, the callee right after the caller's frame or first in a new chunk.
/// True when either lives elsewhere (a generator's frame) or the size is unknown.
fn follows(
    rt: &Runtime,
    mem: &impl Memory,
    sizes: &mut FrameSizes,
    caller: &RawFrame,
    callee: &RawFrame,
) -> bool {
    let FrameShape::Interpreter { owner, .. } = rt.layout.frame else {
        return true;
    };
    let in_stack = |f: &RawFrame| {
        let mut b = [0u8; 1];
        mem.read(f.frame.wrapping_add(owner), &mut b) && b[0] == layout::OWNED_BY_THREAD
    };
    if !in_stack(caller) || !in_stack(callee) {
        return true;
    }
    let words = *sizes
        .entry(caller.code)
        .or_insert_with(|| code::frame_words(mem, &rt.layout, caller.code));
    let Some(words) = words else {
        return true;
    };
    caller.frame.wrapping_add(words.wrapping_mul(8)) == callee.frame
        || callee.frame & 0xfff == layout::CHUNK_FIRST_FRAME
}

/// Where the trusted outer part of `chain` (leaf first, read after the sample)
/// starts: the frames from that index on are all on the thread's chain now, with the
/// same code objects (`now`, read after `chain`): read the same twice and still
/// running, they are the sample's callers. The leaf (index 0) is never counted: the
/// sample confirms it by its instruction pointer.
pub fn trusted_from(chain: &[&RawFrame], now: &AddrMap<u64>) -> usize {
    let mut t = chain.len();
    while t > 1 && now.get(&chain[t - 1].frame) == Some(&chain[t - 1].code) {
        t -= 1;
    }
    t
}
