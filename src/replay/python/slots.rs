//! Where each eval frame's C frame ends in a sample's stack copy, and the slots of
//! the calls the innermost one made: what [`super::PythonFrames::merge`] tells the
//! Python readers of the sample instant; and where their Python frames go in the
//! sample's stack ([`splice`]).

use crate::format::{Frame, FrameKind};

/// Where the C frame of each eval frame (`evals`: indices in `frames`, leaf first)
/// ends in the stack copy: the slot holding its return address (the next frame's
/// address), searched upwards from where the one inside it ended; u64::MAX when not
/// found (the copy ends first).
pub(super) fn eval_frame_ends(
    sp: u64,
    stack: &[u8],
    frames: &[Frame],
    evals: &[usize],
    out: &mut Vec<u64>,
) {
    out.clear();
    let mut from = 0usize;
    for &i in evals {
        let ret = frames
            .get(i + 1)
            .filter(|f| f.kind == FrameKind::Return)
            .map(|f| f.addr);
        let slot = ret.and_then(|ret| {
            stack
                .get(from..)?
                .chunks_exact(8)
                .position(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()) == ret)
        });
        match slot {
            Some(n) => {
                from += 8 * n + 8;
                out.push(sp + from as u64 - 8);
            }
            None => {
                from = stack.len();
                out.push(u64::MAX);
            }
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
