//! Where each eval frame's C frame ends in a sample's stack copy, and the slots of
//! the calls the innermost one made: what [`super::PythonFrames::merge`] tells the
//! Python readers of the sample instant.

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
