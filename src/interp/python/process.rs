//! One CPython process as the recorder sees it across samples: its runtime, each
//! thread's state (found once, checked at each use), the code objects met (named once,
//! fingerprinted at each use) and the ids given to each distinct (function, file,
//! line), which become the frames' addresses in the recording. Reads a sample's
//! Python frames as segments, one per native eval call, and says which could not be
//! trusted.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::code::{self, Code, Fingerprint};
use super::instant::{self, SampleInstant};
use super::layout::FrameShape;
use super::walk::{RawFrame, Runtime, WalkError};
use crate::interp::budget::{Lru, Meter, Pool, Trips};
use crate::interp::{AddrMap, Budgets, Memory};

mod ahead;
mod beyond;
mod confirm;
mod copied;
pub use copied::{COPIED, ChainStart, copy_span};
mod codes;
mod names;
pub use names::{BUDGET, BUDGET_NAME};
mod objects;
mod steady;
#[cfg(test)]
mod tests;
mod threads;

/// The id of the frame that stands for a Python frame that could not be validated.
pub const CHANGED: u64 = 0;

/// Its name.
pub const CHANGED_NAME: &str = "[python: changed]";

/// A Python frame's name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FrameName {
    /// The qualified name (3.11+) or the name.
    pub function: Arc<str>,
    /// The source file.
    pub file: Arc<str>,
    /// The line of the instruction, when the table gives one.
    pub line: Option<u32>,
}

/// What the sample says of the innermost eval call's running function.
enum Confirmed {
    /// The function read afterwards, at the instruction the sample gives.
    Yes,
    /// Another function, met before: the thread ran it at the sample.
    Other(RawFrame),
    /// Nothing the sample holds points into known code.
    No,
}

/// Counts for the summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Python frames given a name.
    pub named: u64,
    /// Python frames marked [`CHANGED_NAME`].
    pub changed: u64,
    /// Of these, eval calls whose running function the sample did not confirm.
    pub unconfirmed: u64,
    /// Samples whose running function was found from the sample itself though the
    /// frame read afterwards ran another: its callers in that eval call are marked.
    pub replaced: u64,
    /// Samples with eval frames whose thread had no Python thread state.
    pub no_thread: u64,
    /// Of the unconfirmed, eval calls whose instruction pointer the sample held
    /// into several code objects' bytecode: which function ran is not known.
    pub ambiguous: u64,
    /// Samples whose Python frames were read (named or marked).
    pub samples: u64,
    /// Of these, samples with at least one frame marked [`CHANGED_NAME`].
    pub samples_changed: u64,
    /// Python frames put in samples (named or marked).
    pub frames: u64,
    /// The frames marked, by cause.
    pub marked: Marked,
}

/// Frames marked [`CHANGED_NAME`] by cause, for measuring what is left
/// (`PROFILE_DEBUG_PYTHON=1` has the summary print them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Marked {
    /// The chain read had not one segment per eval call of the native stack.
    pub chain: u64,
    /// A running function whose instruction pointer the sample did not hold.
    pub leaf_unheld: u64,
    /// A running function for which the sample held pointers into several code
    /// objects, or its caller's.
    pub leaf_ambiguous: u64,
    /// Callers read after the sample that the thread had left since (a recursion
    /// unwound, a slot reused).
    pub callers: u64,
    /// The frame under a running function found from the sample itself (its own,
    /// reused since, or its caller's).
    pub after_other: u64,
    /// Elsewhere: code objects that did not check out, names past the bound, the
    /// 3.8–3.10 walker's.
    pub other: u64,
    /// Not a mark: running functions confirmed while the sample held pointers into
    /// other code objects too (left over, or the confirmed one is).
    pub mixed: u64,
}

impl Marked {
    fn sum(&self) -> u64 {
        self.chain
            + self.leaf_unheld
            + self.leaf_ambiguous
            + self.callers
            + self.after_other
            + self.other
    }
}

/// The state kept for one process.
pub struct PythonProcess {
    /// Where the interpreter is and how it is laid out.
    pub runtime: Runtime,
    threads: HashMap<u32, u64>,
    /// When the thread list was last walked whole (CLOCK_MONOTONIC ns), and the
    /// interval before the next walk may be made.
    walked: Option<(u64, u64)>,
    /// Code objects by address, within the process's bytes budget.
    codes: Lru<u64, Code>,
    /// The bytecode of each code object met, by its first byte: its end and the
    /// code object's address.
    bytecode: BTreeMap<u64, (u64, u64)>,
    /// The code objects met by their bytecode's start: 3.8–3.10 share one bytes
    /// object between code objects of the same bytecode.
    sharing: HashMap<u64, Vec<u64>>,
    /// Frame ids by (code object, offset) for the code object's current fingerprint.
    by_site: HashMap<(u64, Option<u64>), (Fingerprint, u64)>,
    /// The names given, by id.
    names: names::Names,
    /// What this process's readers keep, against its budgets.
    meter: Meter,
    /// What was found so far.
    pub counts: Counts,
    /// The budgets that tripped.
    pub trips: Trips,
    /// The next sample's chain as the kernel copied it ([`Self::copied_at_instant`]).
    copied: Option<copied::Copy>,
    /// The last copy came from a thread state not the thread's: `stale_copy`.
    stale: bool,
    /// Each code object's fingerprint as the sample being read shows it.
    prints: AddrMap<Option<Fingerprint>>,
}

impl PythonProcess {
    /// An empty state for the process whose runtime this is, with the default
    /// budgets and a pool of its own.
    pub fn new(runtime: Runtime) -> PythonProcess {
        PythonProcess::with_meter(runtime, Meter::new(Pool::default(), Budgets::default()))
    }

    /// An empty state for the process whose runtime this is, keeping what it reads on
    /// `meter`.
    pub fn with_meter(runtime: Runtime, meter: Meter) -> PythonProcess {
        PythonProcess {
            runtime,
            threads: HashMap::new(),
            walked: None,
            codes: Lru::default(),
            bytecode: BTreeMap::new(),
            sharing: HashMap::new(),
            by_site: HashMap::new(),
            names: names::Names::default(),
            meter,
            counts: Counts::default(),
            trips: Trips::default(),
            copied: None,
            stale: false,
            prints: AddrMap::default(),
        }
    }

    /// The name of frame id `id` (ids start at 1; [`CHANGED`] and [`BUDGET`] have
    /// none).
    pub fn name(&self, id: u64) -> Option<&FrameName> {
        self.names.get(id)
    }

    /// The budgets this process is read within.
    pub fn budgets(&self) -> &Budgets {
        self.meter.budgets()
    }

    /// Bytes kept of what was read from this process.
    pub fn kept(&self) -> usize {
        self.meter.kept()
    }

    /// The Python frames of thread `tid` for a sample whose native stack holds `evals`
    /// eval-loop frames: one segment of frame ids (leaf first) per eval frame,
    /// innermost first, then (`at.cut`) the Python callers past the native stack.
    /// `mem` reads the process through the sample's stack copy, `live` as it is now.
    ///
    /// The chain is read after the sample, so it is checked against what the sample
    /// itself holds: the running function of the innermost eval call must be the one
    /// the eval loop's instruction pointer (in a register or a stack word of the
    /// sample) pointed into, and its line is taken from that pointer. Its callers are
    /// kept from the first one that the thread still runs now, read the same twice
    /// (see [`instant::trusted_from`]); those that changed are each one [`CHANGED`]
    /// frame. When the chain does not have one segment per eval frame of the native
    /// stack, every eval frame gets one [`CHANGED`] frame; a frame whose code object
    /// does not check out is [`CHANGED`] itself.
    pub fn frames(
        &mut self,
        mem: &impl Memory,
        live: &impl Memory,
        tid: u32,
        at: &SampleInstant<'_>,
        evals: usize,
    ) -> Result<Vec<Vec<u64>>, WalkError> {
        self.prints.clear();
        let changed_before = self.counts.changed;
        let marked_before = self.counts.marked.sum();
        let out = self.frames_inner(mem, live, tid, at, evals);
        let counted = self.counts.marked.sum() - marked_before;
        let changed = self.counts.changed - changed_before;
        self.counts.marked.other += changed.saturating_sub(counted);
        if let Ok(segs) = &out {
            self.counts.samples += 1;
            self.counts.frames += segs.iter().map(|s| s.len() as u64).sum::<u64>();
            if self.counts.changed > changed_before {
                self.counts.samples_changed += 1;
            }
        }
        out
    }

    fn frames_inner(
        &mut self,
        mem: &impl Memory,
        live: &impl Memory,
        tid: u32,
        at: &SampleInstant<'_>,
        evals: usize,
    ) -> Result<Vec<Vec<u64>>, WalkError> {
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
        let (mut now, now_current) = match copied {
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
        let copy = copy_cut.then_some(&now);
        let segments = self.chain_segments(mem, live, frame, at, copy);
        if let FrameShape::Object { .. } = self.runtime.layout.frame {
            let chain: Vec<RawFrame> = match segments {
                Ok((s, _)) => s.into_iter().flatten().collect(),
                Err(_) => Vec::new(),
            };
            let copied = instant.then_some(&now);
            return Ok(self.object_frames(mem, live, tstate, at, &chain, evals, copied));
        }
        // Past a native stack cut, the segments of its outermost eval calls follow.
        let mut segments = match segments {
            Ok((s, _)) if evals > 0 && (s.len() == evals || at.cut && s.len() > evals) => s,
            _ => {
                self.counts.changed += evals as u64;
                self.counts.marked.chain += evals as u64;
                self.counts.unconfirmed += 1;
                return Ok(vec![vec![CHANGED]; evals]);
            }
        };
        // Past a copy cut short, frames read afterwards: checked as read without one.
        let copied_len = now.len();
        if copy_cut {
            self.join_live(live, tstate, &segments, &mut now);
        }
        let read_after = |i: usize| copy_cut && i > copied_len;
        let ambiguous_before = self.counts.ambiguous;
        let end = at.eval_frame(0).1;
        // The innermost call's running function, confirmed by the sample: by the copy
        // made at its instant (the frame's code and instruction then), else by the
        // eval loop's instruction pointer the sample holds.
        let mut confirmed = match segments[0].first_mut() {
            Some(_) if instant => Confirmed::Yes,
            Some(leaf) => self.confirm(mem, at, leaf),
            None => Confirmed::No,
        };
        // Caught between a call's push of the new frame and its first instruction
        // (the current frame is the callee, the instruction pointer still the
        // caller's): the caller is the running function. That is inside the eval
        // loop itself: in a function it called, the caller's instruction pointer is
        // the one it made that call from, and the frame read is another call's.
        if let Confirmed::Other(o) = confirmed
            && at.in_eval()
            && segments[0]
                .get(1)
                .is_some_and(|caller| caller.code == o.code)
        {
            segments[0].remove(0);
            segments[0][0].offset = o.offset;
            confirmed = Confirmed::Yes;
        }
        // Or caught returning (the current frame is the caller again, the
        // instruction pointer still the callee's): the callee's frame, just popped,
        // lies right after its caller's, where the callee's code still shows.
        if let Confirmed::Other(o) = confirmed
            && let FrameShape::Interpreter { code: f_code, .. } = self.runtime.layout.frame
            && let Some(caller) = segments[0].first()
            && let Some(words) = code::frame_words(mem, &self.runtime.layout, caller.code)
            && let Some(callee) = caller.frame.checked_add(words.saturating_mul(8))
            && mem.u64_at(callee.wrapping_add(f_code)) == Some(o.code)
        {
            segments[0].insert(
                0,
                RawFrame {
                    frame: callee,
                    code: o.code,
                    offset: o.offset,
                },
            );
            confirmed = Confirmed::Yes;
        }
        // Or its frame was reused since by a sibling (another callee of the same
        // caller, pushed at the same slot: `hot_b` where `hot_a` ran): the code read
        // there cannot call the sample's function, and the caller under it, still
        // running and pushed right before it, can. The sample's function was that
        // caller's callee.
        // Without the sample's own current frame (3.13+), the sample must hold the
        // slot's address (the eval loop's frame, in a register or its C frame) for
        // that slot to be the sample's frame.
        let mut sibling = false;
        if let Confirmed::Other(o) = confirmed
            && let (Some(&there), Some(&caller)) = (segments[0].first(), segments[0].get(1))
            && (current.is_some() || at.find(|v| v == there.frame, true, at.sp, end).is_some())
            && now.get(&caller.frame) == Some(&caller.code)
            && code::frame_words(mem, &self.runtime.layout, caller.code)
                .and_then(|w| caller.frame.checked_add(w.checked_mul(8)?))
                == Some(there.frame)
            && code::can_name(mem, &self.runtime.layout, there.code, o.code) == Some(false)
            && code::can_name(mem, &self.runtime.layout, caller.code, o.code) == Some(true)
        {
            segments[0][0] = RawFrame {
                frame: there.frame,
                code: o.code,
                offset: o.offset,
            };
            confirmed = Confirmed::Yes;
            sibling = true;
        }
        // Without the sample's own current frame (3.13+, or the innermost eval call
        // has returned), the sample's frame may still be pinned by its address: the
        // slot right after a frame the thread still runs, whose code can name the
        // sample's function, held by the sample (the eval loop's frame, in a register
        // or its C frame). The innermost such caller is the sample's; the frames
        // inside it, pushed since, are not.
        if exact.is_none()
            && let Confirmed::Other(o) = confirmed
            && let Some((k, slot)) = self.pinned_caller(mem, at, end, &segments[0], &now, o.code)
        {
            segments[0].drain(..k);
            segments[0].insert(
                0,
                RawFrame {
                    frame: slot,
                    code: o.code,
                    offset: o.offset,
                },
            );
            confirmed = Confirmed::Yes;
            sibling = true;
        }
        // Placed by no rule above, another function's pointer names the sample's
        // frame only if none of its callers runs that code: a caller's pointer is
        // one the eval loop held before the call (left in a spill slot), not the
        // sample's.
        if let Confirmed::Other(o) = confirmed
            && segments[0].iter().skip(1).any(|f| f.code == o.code)
        {
            self.counts.ambiguous += 1;
            confirmed = Confirmed::No;
        }
        let ambiguous = self.counts.ambiguous > ambiguous_before;
        let flat: Vec<&RawFrame> = segments.iter().flatten().collect();
        let mut trusted = instant::trusted_from(&flat, &now);
        // The first caller kept must have called the frame inside it when that one
        // is not the sample's leaf running still: a callee is pushed right after its
        // caller's frame in the data stack, so a frame that the thread runs now but
        // that took the place of the sample's caller (a chain read from frames that
        // have returned, through a slot reused since) is not kept.
        while trusted < flat.len() {
            let inner = flat[trusted - 1];
            let running = now.get(&inner.frame) == Some(&inner.code)
                && (trusted > 1 || matches!(confirmed, Confirmed::Yes));
            let caller = flat[trusted];
            let pushed_by = || {
                let words = code::frame_words(mem, &self.runtime.layout, caller.code)?;
                caller.frame.checked_add(words.checked_mul(8)?)
            };
            if running
                || sibling && trusted == 1
                || pushed_by() == Some(inner.frame)
                    && self.same_call(mem, caller, inner, now_current)
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
        if exact.is_none() && !sibling && !(matches!(confirmed, Confirmed::Yes) && leaf_live) {
            trusted = trusted.max(segments[0].len());
        }
        let mut out: Vec<Vec<u64>> = Vec::with_capacity(segments.len());
        let mut i = 0;
        for seg in &segments {
            let mut ids = Vec::with_capacity(seg.len());
            for f in seg {
                let id = if i == 0 {
                    match confirmed {
                        Confirmed::No => {
                            self.counts.changed += 1;
                            self.counts.unconfirmed += 1;
                            if ambiguous {
                                self.counts.marked.leaf_ambiguous += 1;
                            } else {
                                self.counts.marked.leaf_unheld += 1;
                            }
                            CHANGED
                        }
                        Confirmed::Other(leaf) => {
                            self.counts.replaced += 1;
                            self.id(mem, &leaf)
                        }
                        Confirmed::Yes => self.id(mem, f),
                    }
                } else if i >= trusted {
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
                if i == 1 && current.is_some() && matches!(confirmed, Confirmed::Other(_)) {
                    self.counts.changed += 1;
                    self.counts.marked.after_other += 1;
                    ids.push(id);
                    ids.push(CHANGED);
                    continue;
                }
                // Without the sample instant's frame, the callers that changed are
                // one frame: how many there were is not known.
                let run = id == CHANGED && i > 1 && ids.last() == Some(&CHANGED);
                if run && (exact.is_none() || read_after(i)) {
                    self.counts.changed -= 1;
                    if i - 1 < trusted {
                        self.counts.marked.callers -= 1;
                    }
                    continue;
                }
                ids.push(id);
            }
            out.push(ids);
        }
        Ok(out)
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
