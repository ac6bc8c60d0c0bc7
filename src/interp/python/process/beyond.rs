//! Python frames past what the sample holds: a chain deeper than the kernel's copy
//! of it (`sys::StackCapture` copies 128 frames), and on 3.8–3.10, where each Python
//! call is a native eval call, the callers past the native stack copy's reach (32 KiB
//! hold some 66 of them). The sample still gives the frame to start from (the last
//! copied frame's caller, or the outermost eval call's frame object, found in its C
//! frame); the rest of the chain is read from the process afterwards and kept only
//! as [`PythonProcess::frames`] keeps a chain read without a copy: each frame must be
//! on the thread's chain as it is now, read a second time whole at one moment, with
//! the same code object, and each code object must check out. A frame that does not
//! is [`CHANGED`], one for each run of them. Only chains cut that way pay these reads.

use super::{CHANGED, PythonProcess, RawFrame, SampleInstant, WalkError};
use crate::interp::python::instant::{self, FrameSizes};
use crate::interp::{AddrMap, Memory, Overlay, Pages};

/// A chain in segments, with the shims met ([`crate::interp::python::Runtime::segments`]).
type Segments = (Vec<Vec<RawFrame>>, Vec<u64>);

/// Reads of the thread's chain as it is now tried at most, for one caught while
/// it pushed or popped a frame.
const LIVE_TRIES: usize = 3;

impl PythonProcess {
    /// The thread's chain from `frame` in segments ([`crate::interp::python::Runtime::segments`]), read
    /// through `mem`; or, when the kernel's copy of it was cut short (`copy`: the
    /// frames copied), through `mem` for the frames copied and from the process as
    /// it is now (`live`, through a page cache of its own) past them: the copy's
    /// frames stay as they were at the sample instant, and a frame read afterwards
    /// that points back into the copy ends the walk.
    pub(super) fn chain_segments(
        &self,
        mem: &impl Memory,
        live: &impl Memory,
        frame: u64,
        at: &SampleInstant<'_>,
        copy: Option<&AddrMap<u64>>,
    ) -> Result<Segments, WalkError> {
        let rt = &self.runtime;
        let Some(copy) = copy else {
            return rt.segments(mem, frame, at.sp);
        };
        let pages = Pages::new(live);
        let after = Overlay {
            sp: at.sp,
            stack: at.stack,
            rest: &pages,
        };
        rt.segments_joined(mem, &after, frame, at.sp, |f| copy.contains_key(&f))
    }

    /// How much of the outer end of `chain` (innermost first; `chain[from..]` read
    /// after the sample) the thread's chain as it is now agrees with: read a second
    /// time whole at one moment ([`instant::live_frames`], through a page cache of
    /// its own over `live`, up to [`LIVE_TRIES`] times), the same frames with the
    /// same code objects at the same places from its outermost frame. The index in
    /// `chain` from which it agrees; `chain.len()` when nothing does.
    pub(super) fn agreed_from(
        &self,
        live: &impl Memory,
        tstate: u64,
        chain: &[RawFrame],
        from: usize,
    ) -> usize {
        let pages = Pages::new(live);
        let mut sizes = FrameSizes::new();
        let mut now = Vec::new();
        for _ in 0..LIVE_TRIES {
            pages.clear();
            now = instant::live_frames(&self.runtime, &pages, tstate, &mut sizes).0;
            if !now.is_empty() {
                break;
            }
        }
        let same = (chain.iter().rev())
            .zip(now.iter().rev())
            .take(chain.len().saturating_sub(from))
            .take_while(|(a, b)| a.frame == b.frame && a.code == b.code)
            .count();
        chain.len() - same
    }

    /// 3.11+, a chain copied at the sample instant but cut short (`segments`, read
    /// past the copied frames afterwards): the frames past the copy that the
    /// thread's chain as it is now agrees with ([`PythonProcess::agreed_from`]) join
    /// `now` (the copy's frames), so that [`instant::trusted_from`] keeps them, and
    /// only them: the last copied frame's caller, exact at the sample, is still the
    /// one running there, and so are its callers.
    pub(super) fn join_live(
        &self,
        live: &impl Memory,
        tstate: u64,
        segments: &[Vec<RawFrame>],
        now: &mut AddrMap<u64>,
    ) {
        let chain: Vec<RawFrame> = segments.iter().flatten().copied().collect();
        let copied = (chain.iter())
            .take_while(|f| now.get(&f.frame) == Some(&f.code))
            .count();
        let from = self.agreed_from(live, tstate, &chain, copied);
        for f in &chain[from..] {
            now.entry(f.frame).or_insert(f.code);
        }
    }

    /// 3.8–3.10, a native stack cut before the thread's outermost eval call: the
    /// Python frames past it, callers of its outermost eval call, innermost first;
    /// and the eval calls of the stack that their C frames did not name (`chosen`,
    /// innermost first, None for those) filled from the chain. `chain` is the
    /// thread's (copied at the sample instant for its frames in `copied`, read
    /// afterwards past them), one frame per eval call: it is taken only when its
    /// innermost frame is the innermost call's (its frame object or code, found in
    /// the sample's registers or its C frame) and each call named from its C frame
    /// runs the code `chain` says at its place. Empty otherwise.
    pub(super) fn past_native(
        &mut self,
        mem: &impl Memory,
        live: &impl Memory,
        tstate: u64,
        chain: &[RawFrame],
        copied: Option<&AddrMap<u64>>,
        chosen: &mut [Option<RawFrame>],
    ) -> Vec<u64> {
        let n = chosen.len();
        let innermost = chosen.first().copied().flatten().zip(chain.first());
        let aligned = innermost.is_some_and(|(c, g)| {
            c.code == g.code && (c.frame == g.frame || !self.frame_object(mem, &c))
        }) && (chosen.iter().zip(chain))
            .all(|(c, g)| c.is_none_or(|c| c.code == g.code));
        if !aligned || chain.len() <= n {
            return Vec::new();
        }
        // Exact: the innermost frame, and the frames copied at the sample instant.
        let copied_len = copied.map_or(0, |c| {
            (chain.iter())
                .take_while(|f| c.get(&f.frame) == Some(&f.code))
                .count()
        });
        let from = copied_len.max(1);
        let trusted = self.agreed_from(live, tstate, chain, from);
        let kept = |i: usize| i < from || i >= trusted;
        for (j, c) in chosen.iter_mut().enumerate() {
            if c.is_none() && kept(j) {
                *c = Some(chain[j]);
            }
        }
        let mut out = Vec::with_capacity(chain.len() - n);
        for (i, f) in chain.iter().enumerate().skip(n) {
            if kept(i) {
                out.push(self.id(mem, f));
            } else if out.last() != Some(&CHANGED) {
                self.counts.changed += 1;
                self.counts.marked.callers += 1;
                out.push(CHANGED);
            }
        }
        out
    }
}
