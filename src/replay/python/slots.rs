//! Where each eval frame's C frame ends in a sample's stack copy, and the slots of
//! the calls the innermost one made: what [`super::PythonFrames::merge`] tells the
//! Python readers of the sample instant; and where their Python frames go in the
//! sample's stack ([`splice`]).

use crate::format::{Frame, FrameKind};

/// Where the C frame of each eval frame (`evals`: indices in `frames`, leaf first)
/// ends in the stack copy: the slot holding its return address (the next frame's
/// address); u64::MAX when not found (the copy ends first). The return addresses of
/// every frame from the leaf out are searched in turn, each upwards from the slot of
/// the one inside it: a call inside the innermost eval frame can have the same
/// return address as that eval frame (CPython 3.8's `function_code_fastcall` calls
/// `PyEval_EvalFrameEx` for each new frame, the eval loop's entry tail-called from
/// it), and its slot, lower, must not be taken for the eval frame's.
pub(super) fn eval_frame_ends(
    sp: u64,
    stack: &[u8],
    frames: &[Frame],
    evals: &[usize],
    out: &mut Vec<u64>,
) {
    out.clear();
    let Some(&last) = evals.last() else {
        return;
    };
    let first = frames.iter().position(|f| f.kind.is_user()).unwrap_or(0);
    let mut from = 0usize;
    let mut at = evals.iter().peekable();
    for j in first + 1..=last + 1 {
        let ends_eval = at.peek().is_some_and(|&&i| i + 1 == j);
        let ret = frames
            .get(j)
            .filter(|f| f.kind == FrameKind::Return)
            .map(|f| f.addr);
        let slot = ret.and_then(|ret| {
            stack
                .get(from..)?
                .chunks_exact(8)
                .position(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()) == ret)
        });
        match slot {
            Some(n) => from += 8 * n + 8,
            // An eval frame's end not found: nothing past it is known.
            None if ends_eval => from = stack.len(),
            // Another frame's (an inlined one has none): searched on from here.
            None => {}
        }
        if ends_eval {
            at.next();
            out.push(if slot.is_some() {
                sp + from as u64 - 8
            } else {
                u64::MAX
            });
        }
    }
}

/// The stack slots of the return addresses of the calls the innermost eval frame
/// (`evals[0]`, an index in `frames`, leaf first) made down to the sample's leaf, from
/// the eval loop's callee inward: each searched downwards from the one above it, the
/// first from where the eval frame's C frame ends (`ends[0]`). Empty when the leaf is
/// the eval loop itself; false when one (or that end) is not in the copy, or a frame
/// between is no call.
pub(super) fn inner_calls(
    sp: u64,
    stack: &[u8],
    frames: &[Frame],
    evals: &[usize],
    ends: &[u64],
    out: &mut Vec<u64>,
) -> bool {
    out.clear();
    let (Some(&eval), Some(leaf)) = (evals.first(), frames.iter().position(|f| f.kind.is_user()))
    else {
        return false;
    };
    let word = |i: usize| {
        let w = stack.get(8 * i..8 * i + 8)?;
        Some(u64::from_le_bytes(w.try_into().ok()?))
    };
    // Searched from where the eval frame's C frame ends, found (an outer eval call's
    // callee may hold the same return address higher up).
    let words = stack.len() / 8;
    let mut hi = match ends.first() {
        Some(&end) if end != u64::MAX => {
            usize::try_from(end.saturating_sub(sp) / 8).unwrap_or(words)
        }
        _ => return false,
    }
    .min(words);
    let Some(between) = frames.get(leaf + 1..eval + 1) else {
        return false;
    };
    for f in between.iter().rev() {
        if f.kind != FrameKind::Return {
            return false;
        }
        let Some(i) = (0..hi).rev().find(|&i| word(i) == Some(f.addr)) else {
            return false;
        };
        out.push(sp + 8 * i as u64);
        hi = i;
    }
    true
}

/// Rebuilds `frames` (a sample of `pid`, leaf first) in place: each eval frame
/// (`evals`: indices, leaf first) becomes its segment of Python frame ids. Segments
/// past the eval frames (the native stack was cut: the Python callers of its
/// outermost eval call) go after the native frames copied, before the cut's marker
/// (the native frames under them are not known).
pub(super) fn splice(pid: u32, frames: &mut Vec<Frame>, evals: &[usize], segments: &[Vec<u64>]) {
    let mut out = Vec::with_capacity(frames.len() + segments.iter().map(Vec::len).sum::<usize>());
    let python = |&addr: &u64| Frame {
        kind: FrameKind::Interpreted,
        pid,
        addr,
        mapping: None,
    };
    let mut next = 0;
    for (seg, &at) in segments.iter().zip(evals) {
        out.extend_from_slice(&frames[next..at]);
        out.extend(seg.iter().map(python));
        next = at + 1;
    }
    let marker = frames.last().filter(|f| f.kind == FrameKind::Truncated);
    let end = frames.len() - usize::from(marker.is_some());
    out.extend_from_slice(&frames[next.min(end)..end]);
    out.extend(segments.iter().skip(evals.len()).flatten().map(python));
    out.extend(marker.copied());
    *frames = out;
}
