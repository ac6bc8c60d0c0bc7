//! Which of a sample's Python callers, read after the sample, are kept, and the
//! frame ids the sample's segments become: the leaf as placed ([`Leaf`]), callers
//! the thread left since as [`CHANGED`] (one for each run of them when how many
//! there were is not known).

use super::leaf::{Leaf, Start};
use super::{CHANGED, Confirmed, PythonProcess, RawFrame, code, instant};
use crate::interp::Memory;

/// How much of a sample's chain is kept.
pub(super) struct Kept {
    /// The index (across the segments, leaf first) from which callers are kept.
    pub trusted: usize,
    /// The frames of the copy made at the sample instant: past them, frames were
    /// read afterwards.
    pub copied_len: usize,
}

impl PythonProcess {
    /// The index in `flat` (the sample's frames, leaf first; `leaf_len` of them in
    /// the innermost eval call) from which the callers are the sample's.
    ///
    /// The first caller kept must have called the frame inside it when that one is
    /// not the sample's leaf running still: a callee is pushed right after its
    /// caller's frame in the data stack, so a frame that the thread runs now but that
    /// took the place of the sample's caller (a chain read from frames that have
    /// returned, through a slot reused since) is not kept.
    pub(super) fn trusted_callers(
        &self,
        mem: &impl Memory,
        start: &Start,
        leaf: &Leaf,
        flat: &[&RawFrame],
        leaf_len: usize,
    ) -> usize {
        let now = &start.now;
        let mut trusted = instant::trusted_from(flat, now);
        while trusted < flat.len() {
            let inner = flat[trusted - 1];
            let running = now.get(&inner.frame) == Some(&inner.code)
                && (trusted > 1 || matches!(leaf.confirmed, Confirmed::Yes));
            let caller = flat[trusted];
            let pushed_by = || {
                let words = code::frame_words(mem, &self.runtime.layout, caller.code)?;
                caller.frame.checked_add(words.checked_mul(8)?)
            };
            if running
                || leaf.sibling && trusted == 1
                || pushed_by() == Some(inner.frame)
                    && self.same_call(mem, caller, inner, start.now_current)
            {
                break;
            }
            trusted += 1;
        }
        // Without the frame of the sample instant (3.13+, or the innermost eval call
        // has returned), the frame read as the leaf is the one running now: its
        // callers are the sample's only if the sample confirmed it and it still runs.
        let leaf_live = flat
            .first()
            .is_some_and(|l| now.get(&l.frame) == Some(&l.code));
        if start.exact.is_none()
            && !leaf.sibling
            && !(matches!(leaf.confirmed, Confirmed::Yes) && leaf_live)
        {
            trusted = trusted.max(leaf_len);
        }
        trusted
    }

    /// Whether `caller`, running now, is the invocation that called `inner` (pushed
    /// right after it, no longer running): a data stack slot is reused by every call
    /// made from the same frame, so the frame read there may be newer than the
    /// sample, or the sample's frame a call of an earlier invocation at the same
    /// slot. A caller with a callee running now (not `inner`) has called again since
    /// `inner`: no. A caller that is the thread's current frame (`now_current`) may
    /// be the one `inner` returned to: yes only if its code can name `inner`'s
    /// function, as a call does (`hot_a` reads no name `deep`).
    fn same_call(
        &self,
        mem: &impl Memory,
        caller: &RawFrame,
        inner: &RawFrame,
        now_current: Option<u64>,
    ) -> bool {
        let rt = &self.runtime;
        if rt.layout.code_names.is_none() {
            return true;
        }
        now_current == Some(caller.frame)
            && code::can_name(mem, &rt.layout, caller.code, inner.code) == Some(true)
    }

    /// The frame ids of `segments` (one list per eval call, leaf first).
    pub(super) fn ids(
        &mut self,
        mem: &impl Memory,
        segments: &[Vec<RawFrame>],
        start: &Start,
        leaf: &Leaf,
        kept: Kept,
    ) -> Vec<Vec<u64>> {
        let read_after = |i: usize| start.copy_cut && i > kept.copied_len;
        let mut out: Vec<Vec<u64>> = Vec::with_capacity(segments.len());
        let mut i = 0;
        for seg in segments {
            let mut ids = Vec::with_capacity(seg.len());
            for f in seg {
                let id = if i == 0 {
                    self.leaf_id(mem, f, leaf)
                } else if i >= kept.trusted {
                    self.id(mem, f)
                } else {
                    self.counts.changed += 1;
                    self.counts.marked.callers += 1;
                    CHANGED
                };
                i += 1;
                // The eval loop's current frame ran another function than the one
                // the sample's instruction pointer is in: it is the sample's running
                // frame, reused since, or its caller, the running function having
                // just returned. Which, is not known: it is one changed frame.
                if i == 1
                    && start.current.is_some()
                    && matches!(leaf.confirmed, Confirmed::Other(_))
                {
                    self.counts.changed += 1;
                    self.counts.marked.after_other += 1;
                    ids.push(id);
                    ids.push(CHANGED);
                    continue;
                }
                // Without the sample instant's frame, the callers that changed are
                // one frame: how many there were is not known.
                let run = id == CHANGED && i > 1 && ids.last() == Some(&CHANGED);
                if run && (start.exact.is_none() || read_after(i)) {
                    self.counts.changed -= 1;
                    if i - 1 < kept.trusted {
                        self.counts.marked.callers -= 1;
                    }
                    continue;
                }
                ids.push(id);
            }
            out.push(ids);
        }
        out
    }

    /// The id of the leaf frame `f` as placed.
    fn leaf_id(&mut self, mem: &impl Memory, f: &RawFrame, leaf: &Leaf) -> u64 {
        match leaf.confirmed {
            Confirmed::No => {
                self.counts.changed += 1;
                self.counts.unconfirmed += 1;
                if leaf.ambiguous {
                    self.counts.marked.leaf_ambiguous += 1;
                } else {
                    self.counts.marked.leaf_unheld += 1;
                }
                CHANGED
            }
            Confirmed::Other(other) => {
                self.counts.replaced += 1;
                self.id(mem, &other)
            }
            Confirmed::Yes => self.id(mem, f),
        }
    }
}
