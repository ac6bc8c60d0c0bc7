//! One sample's Python frames read from its process: the process's page cache made
//! ready (restored from a read ahead, kept for the round, or cleared), the memory the
//! reader sees built (the sample's stack copy, then the chain copied at its instant,
//! then the process within the sample's budgets), and the reader asked for one
//! segment of frame ids per eval frame.

use super::capture::{self, CapturedChain, Captures};
use super::{Copied, slots};
use crate::format::Frame;
use crate::interp::budget::{Metered, SampleBudget};
use crate::interp::python::walk::WalkError;
use crate::interp::python::{self, PythonProcess};
use crate::interp::{AtSample, Budgets, Memory, Overlay, PageMap, Pages};

/// Scratch kept between samples.
#[derive(Default)]
pub(super) struct Scratch {
    /// The index of each eval frame in a sample's frames.
    pub evals: Vec<usize>,
    /// Where each eval frame's C frame ends in the stack copy.
    pub ends: Vec<u64>,
    /// The return-address slots of the calls the innermost eval frame made.
    pub calls: Vec<u64>,
}

/// What a sample brings to its read.
pub(super) struct Sample<'s> {
    pub pid: u32,
    pub tid: u32,
    pub copy: Copied<'s>,
    /// The native stack was cut.
    pub cut: bool,
    /// What was read ahead for it ([`super::PythonFrames::read_ahead`]).
    pub ahead: Option<PageMap>,
    /// Its chain as copied at its instant.
    pub at_sample: Option<CapturedChain>,
}

/// What of the stage a read uses beside the process.
pub(super) struct Stage<'r> {
    pub captures: &'r mut Captures,
    pub budgets: &'r Budgets,
    pub scratch: &'r mut Scratch,
}

/// Makes `pages` ready for `s`: read ahead, the process as it was then, past it as
/// it is now; a round's later copied chains keep the round's pages.
fn prepare_pages<M: Memory>(captures: &mut Captures, pages: &Pages<M>, s: &mut Sample<'_>) {
    let keep = if s.at_sample.is_some() && s.ahead.is_none() {
        captures.keep_pages(s.pid)
    } else {
        captures.pages_used(s.pid);
        false
    };
    match s.ahead.take() {
        Some(p) => pages.restore(p),
        None if keep => {}
        None if s.at_sample.is_some() => {
            // A round's first copied chain: what the last round's read of the
            // process (its code objects), fetched again in one system call.
            let last = pages.pages_read();
            pages.clear();
            pages.prefetch(&last);
        }
        None => pages.clear(),
    }
}

/// The Python frames of sample `s` (whose native `frames` hold the eval frames
/// `stage.scratch.evals`) read from `process` through `pages`.
pub(super) fn read<M: Memory>(
    process: &mut PythonProcess,
    pages: &Pages<M>,
    stage: Stage<'_>,
    frames: &[Frame],
    mut s: Sample<'_>,
) -> Result<Vec<Vec<u64>>, WalkError> {
    let read_ahead = s.ahead.is_some();
    prepare_pages(stage.captures, pages, &mut s);
    let Copied {
        sp,
        stack,
        regs,
        steady,
        ..
    } = s.copy;
    let (tid, at_sample) = (s.tid, s.at_sample.as_ref());
    // Copied at the sample: its chain as it was then, past it as it is now.
    let pointers = at_sample.map_or([[0; 8]; 2], |c| {
        [c.first.to_le_bytes(), c.second.to_le_bytes()]
    });
    let regions = at_sample
        .map(|c| capture::regions(c, &pointers, &process.runtime.layout))
        .unwrap_or_default();
    // Within the sample's budgets of reads and CPU: past them every read fails,
    // and the frames not read by then are marked.
    let budget = SampleBudget::new(stage.budgets);
    let metered = Metered::new(pages, &budget);
    let live_inner = Metered::new(pages.inner(), &budget);
    let copied = AtSample {
        regions: &regions,
        rest: &metered,
    };
    let mem = Overlay {
        sp,
        stack,
        rest: &copied,
    };
    let Scratch { evals, ends, calls } = stage.scratch;
    slots::eval_frame_ends(sp, stack, frames, evals, ends);
    let calls = slots::inner_calls(sp, stack, frames, evals, ends, calls).then_some(&calls[..]);
    let at = python::SampleInstant {
        sp,
        stack,
        regs: &regs[..],
        ends,
        cut: s.cut,
        calls,
    };
    // `live`: the process as it was read ahead (past those pages, as it is now);
    // else as it is now, past the page cache this sample filled.
    let evals = evals.len();
    let read = if steady {
        process.steady_frames(&mem, tid, evals, s.cut)
    } else if let Some(c) = at_sample {
        // Everything the checks compare was as it is in the copy.
        let frames = c.frames.iter().map(|(a, b)| (*a, &b[..]));
        process.copied_at_instant(c.tstate, frames);
        // `live`, as it is now: read only past a copy cut short.
        process.frames(&mem, pages.inner(), tid, &at, evals)
    } else if read_ahead {
        process.frames(&mem, &metered, tid, &at, evals)
    } else {
        process.frames(&mem, &live_inner, tid, &at, evals)
    };
    process.trips.spent(budget.spent());
    if process.stale_copy()
        && let Some(start) = process.chain_start(&mem, tid)
    {
        stage.captures.register(tid, start);
    }
    read
}
