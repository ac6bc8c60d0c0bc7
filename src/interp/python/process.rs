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
mod callers;
use callers::Kept;
mod confirm;
mod copied;
mod leaf;
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
        let mut start = self.start(mem, live, tid, at)?;
        let copy = start.copy_cut.then_some(&start.now);
        let segments = self.chain_segments(mem, live, start.frame, at, copy);
        if let FrameShape::Object { .. } = self.runtime.layout.frame {
            let chain: Vec<RawFrame> = match segments {
                Ok((s, _)) => s.into_iter().flatten().collect(),
                Err(_) => Vec::new(),
            };
            let copied = start.instant.then_some(&start.now);
            return Ok(self.object_frames(mem, live, start.tstate, at, &chain, evals, copied));
        }
        // Past a native stack cut, the segments of its outermost eval calls follow.
        let mut segments = match segments {
            Ok((s, _)) if evals > 0 && (s.len() == evals || at.cut && s.len() > evals) => s,
            _ => return Ok(self.unmatched_chain(evals)),
        };
        // Past a copy cut short, frames read afterwards: checked as read without one.
        let copied_len = start.now.len();
        if start.copy_cut {
            self.join_live(live, start.tstate, &segments, &mut start.now);
        }
        let leaf = self.place_leaf(mem, at, &start, &mut segments[0]);
        let flat: Vec<&RawFrame> = segments.iter().flatten().collect();
        let trusted = self.trusted_callers(mem, &start, &leaf, &flat, segments[0].len());
        let kept = Kept {
            trusted,
            copied_len,
        };
        Ok(self.ids(mem, &segments, &start, &leaf, kept))
    }

    /// The chain read has not one segment per eval frame of the native stack: every
    /// eval frame gets one [`CHANGED`] frame.
    fn unmatched_chain(&mut self, evals: usize) -> Vec<Vec<u64>> {
        self.counts.changed += evals as u64;
        self.counts.marked.chain += evals as u64;
        self.counts.unconfirmed += 1;
        vec![vec![CHANGED]; evals]
    }
}
