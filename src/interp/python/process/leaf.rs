//! Where a sample starts and what it ran: the thread's state and current frame as
//! the sample shows them ([`Start`]), then the innermost eval call's running
//! function, confirmed by the sample itself or placed by the rules that explain a
//! frame read afterwards that ran another function ([`Leaf`]).

use super::{Confirmed, PythonProcess, RawFrame, SampleInstant, WalkError, code, instant};
use crate::interp::python::layout::FrameShape;
use crate::interp::{AddrMap, Memory};

/// Where the thread's chain is read from for one sample.
pub(super) struct Start {
    /// The thread's state.
    pub tstate: u64,
    /// The chain as it is now (or as copied at the sample instant): each frame's
    /// code object by the frame's address.
    pub now: AddrMap<u64>,
    /// The innermost frame of `now`.
    pub now_current: Option<u64>,
    /// The innermost call's frame as it was at the sample, when known.
    pub current: Option<u64>,
    /// `current`, or the frame found among the sample's registers and stack.
    pub exact: Option<u64>,
    /// The frame the chain is read from.
    pub frame: u64,
    /// The chain was copied at the sample instant.
    pub instant: bool,
    /// That copy was cut short.
    pub copy_cut: bool,
}

/// The innermost eval call's running function as placed.
pub(super) struct Leaf {
    /// What the sample says of it.
    pub confirmed: Confirmed,
    /// Its frame was placed in a slot a sibling (or a callee since) reused.
    pub sibling: bool,
    /// The sample held pointers into several code objects.
    pub ambiguous: bool,
}

impl PythonProcess {
    /// The thread's state, its chain as it is now and the frame to read the
    /// sample's chain from.
    pub(super) fn start(
        &mut self,
        mem: &impl Memory,
        live: &impl Memory,
        tid: u32,
        at: &SampleInstant<'_>,
    ) -> Result<Start, WalkError> {
        let copied = self.copy_for(mem, tid);
        let instant = copied.is_some();
        let copy_cut = copied.as_ref().is_some_and(|c| c.cut);
        let Some(tstate) = copied
            .as_ref()
            .map(|c| c.tstate)
            .or_else(|| self.thread_state(mem, tid))
        else {
            self.counts.no_thread += 1;
            return Err(WalkError::NoThreadState);
        };
        // 3.11, 3.12: the innermost call's frame as it was at the sample.
        // The chain as it is now: the callers still on it, read the same, are the
        // sample's (copied at the sample instant: the sample's own).
        let (now, now_current) = match copied {
            Some(c) => (c.now, c.first),
            None => instant::live_chain(&self.runtime, live, tstate, &mut Default::default()),
        };
        // What the thread runs now is learnt, so that a sample's instruction pointer
        // into it is recognised when the frame it ran in is gone.
        if let Some(code) = now_current.and_then(|f| now.get(&f)) {
            self.learn(mem, *code);
        }
        // The innermost frame of a chain copied at the sample instant is the sample's
        // current frame (3.13 has no `_PyCFrame` on the C stack to find it by).
        let current = if instant {
            now_current
        } else {
            instant::sample_frame(&self.runtime, mem, live, tstate, at)
        };
        let exact = current.or_else(|| self.scan_frame(mem, tstate, at));
        let frame = match exact {
            Some(f) => f,
            None => self
                .runtime
                .current_frame(mem, tstate)
                .ok_or(WalkError::Unreadable)?,
        };
        Ok(Start {
            tstate,
            now,
            now_current,
            current,
            exact,
            frame,
            instant,
            copy_cut,
        })
    }

    /// The innermost call's running function (`seg`: the innermost eval call's
    /// frames, leaf first), confirmed by the sample: by the copy made at its instant
    /// (the frame's code and instruction then), else by the eval loop's instruction
    /// pointer the sample holds. When that pointer is into another function, the
    /// rules below place it in `seg`, or the leaf is not confirmed.
    pub(super) fn place_leaf(
        &mut self,
        mem: &impl Memory,
        at: &SampleInstant<'_>,
        start: &Start,
        seg: &mut Vec<RawFrame>,
    ) -> Leaf {
        let ambiguous_before = self.counts.ambiguous;
        let mut confirmed = match seg.first_mut() {
            Some(_) if start.instant => Confirmed::Yes,
            Some(leaf) => self.confirm(mem, at, leaf),
            None => Confirmed::No,
        };
        let mut sibling = false;
        if let Confirmed::Other(o) = confirmed {
            if caught_calling(at, seg, &o) || self.caught_returning(mem, seg, &o) {
                confirmed = Confirmed::Yes;
            } else if self.reused_by_sibling(mem, at, start, seg, &o)
                || start.exact.is_none() && self.pinned(mem, at, start, seg, &o)
            {
                confirmed = Confirmed::Yes;
                sibling = true;
            } else if seg.iter().skip(1).any(|f| f.code == o.code) {
                // Placed by no rule above, another function's pointer names the
                // sample's frame only if none of its callers runs that code: a
                // caller's pointer is one the eval loop held before the call (left
                // in a spill slot), not the sample's.
                self.counts.ambiguous += 1;
                confirmed = Confirmed::No;
            }
        }
        Leaf {
            confirmed,
            sibling,
            ambiguous: self.counts.ambiguous > ambiguous_before,
        }
    }

    /// Caught returning (the current frame is the caller again, the instruction
    /// pointer still the callee's `o`): the callee's frame, just popped, lies right
    /// after its caller's, where the callee's code still shows. It is put back.
    fn caught_returning(&self, mem: &impl Memory, seg: &mut Vec<RawFrame>, o: &RawFrame) -> bool {
        let FrameShape::Interpreter { code: f_code, .. } = self.runtime.layout.frame else {
            return false;
        };
        let Some(caller) = seg.first() else {
            return false;
        };
        let callee = code::frame_words(mem, &self.runtime.layout, caller.code)
            .and_then(|words| caller.frame.checked_add(words.saturating_mul(8)));
        let Some(callee) = callee else {
            return false;
        };
        if mem.u64_at(callee.wrapping_add(f_code)) != Some(o.code) {
            return false;
        }
        seg.insert(
            0,
            RawFrame {
                frame: callee,
                code: o.code,
                offset: o.offset,
            },
        );
        true
    }

    /// Whether the leaf's frame was reused since by a sibling (another callee of
    /// the same caller, pushed at the same slot: `hot_b` where `hot_a` ran): the code
    /// read there cannot call the sample's function `o`, and the caller under it,
    /// still running and pushed right before it, can. The sample's function was that
    /// caller's callee: it takes the slot. Without the sample's own current frame
    /// (3.13+), the sample must hold the slot's address (the eval loop's frame, in a
    /// register or its C frame) for that slot to be the sample's frame.
    fn reused_by_sibling(
        &self,
        mem: &impl Memory,
        at: &SampleInstant<'_>,
        start: &Start,
        seg: &mut [RawFrame],
        o: &RawFrame,
    ) -> bool {
        let (Some(&there), Some(&caller)) = (seg.first(), seg.get(1)) else {
            return false;
        };
        let layout = &self.runtime.layout;
        let end = at.eval_frame(0).1;
        let held = || at.find(|v| v == there.frame, true, at.sp, end).is_some();
        let reused = (start.current.is_some() || held())
            && start.now.get(&caller.frame) == Some(&caller.code)
            && code::frame_words(mem, layout, caller.code)
                .and_then(|w| caller.frame.checked_add(w.checked_mul(8)?))
                == Some(there.frame)
            && code::can_name(mem, layout, there.code, o.code) == Some(false)
            && code::can_name(mem, layout, caller.code, o.code) == Some(true);
        if reused {
            seg[0] = RawFrame {
                frame: there.frame,
                code: o.code,
                offset: o.offset,
            };
        }
        reused
    }

    /// Without the sample's own current frame (3.13+, or the innermost eval call
    /// has returned), the sample's frame may still be pinned by its address: the
    /// slot right after a frame the thread still runs, whose code can name the
    /// sample's function `o`, held by the sample (the eval loop's frame, in a
    /// register or its C frame). The innermost such caller is the sample's; the
    /// frames inside it, pushed since, are not.
    fn pinned(
        &self,
        mem: &impl Memory,
        at: &SampleInstant<'_>,
        start: &Start,
        seg: &mut Vec<RawFrame>,
        o: &RawFrame,
    ) -> bool {
        let end = at.eval_frame(0).1;
        let Some((k, slot)) = self.pinned_caller(mem, at, end, seg, &start.now, o.code) else {
            return false;
        };
        seg.drain(..k);
        seg.insert(
            0,
            RawFrame {
                frame: slot,
                code: o.code,
                offset: o.offset,
            },
        );
        true
    }

    /// Among `seg` (the innermost eval call's frames read now, leaf first), the
    /// innermost frame the thread still runs (`now`) whose code can name `code` and
    /// the slot right after which (where it pushes its callees) the sample holds, in
    /// its registers or its stack below `end`: its index and that slot.
    fn pinned_caller(
        &self,
        mem: &impl Memory,
        at: &SampleInstant<'_>,
        end: u64,
        seg: &[RawFrame],
        now: &AddrMap<u64>,
        code: u64,
    ) -> Option<(usize, u64)> {
        let layout = &self.runtime.layout;
        seg.iter().enumerate().find_map(|(k, f)| {
            if now.get(&f.frame) != Some(&f.code)
                || code::can_name(mem, layout, f.code, code) != Some(true)
            {
                return None;
            }
            let slot = f
                .frame
                .checked_add(code::frame_words(mem, layout, f.code)?.checked_mul(8)?)?;
            at.find(|v| v == slot, true, at.sp, end)?;
            Some((k, slot))
        })
    }
}

/// Caught between a call's push of the new frame and its first instruction (the
/// current frame is the callee, the instruction pointer `o` still the caller's): the
/// caller is the running function. That is inside the eval loop itself: in a
/// function it called, the caller's instruction pointer is the one it made that call
/// from, and the frame read is another call's.
fn caught_calling(at: &SampleInstant<'_>, seg: &mut Vec<RawFrame>, o: &RawFrame) -> bool {
    if !at.in_eval() || seg.get(1).is_none_or(|caller| caller.code != o.code) {
        return false;
    }
    seg.remove(0);
    seg[0].offset = o.offset;
    true
}
