//! Chains of Python frames copied at the sample instant (the recorder's BPF capture,
//! `sys::StackCapture`): each thread's capture waits for its sample, then stays with
//! it until the sample is handled, when [`super::PythonFrames::merge`] reads the chain
//! from the copy instead of the process (and checks it the same way). The stage also
//! says which threads to register for a capture: those whose samples came without one.

use std::collections::{HashMap, HashSet};

use std::sync::Arc;

use super::{LoadedModule, PythonFrames, State};
use crate::format::Mapping;
use crate::interp::Memory;
use crate::interp::python::{COPIED, ChainStart, Layout, copy_span};

/// A capture's chain as the record layer parsed it (`sys::parse_capture`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CapturedChain {
    pub tid: u32,
    pub tstate: u64,
    /// The pointers read from the thread state (see [`ChainStart`]; 0: not read).
    pub first: u64,
    pub second: u64,
    /// Each frame's address and the bytes copied of it, innermost first (the first
    /// [`copy_span`] says are the frame's: the rest are not).
    pub frames: Vec<(u64, [u8; COPIED])>,
}

/// A thread's capture is that of its next sample drained (the program runs in the
/// sample's interrupt, and writes its record before the sample's) when their times
/// are this close: the capture's is read a few microseconds after the sample's.
const MATCH_NS: u64 = 200_000;

/// Threads with a capture waiting for its sample at most (then all are forgotten).
const MAX_PENDING: usize = 4096;

#[derive(Debug, Default)]
pub(super) struct Captures {
    /// Whether the recorder copies chains at the sample instant.
    on: bool,
    /// Each thread's last capture not matched to its sample yet, with its time.
    pending: HashMap<u32, (u64, CapturedChain)>,
    /// Captures matched to their samples, by (tid, sample time), until handled.
    by_sample: HashMap<(u32, u64), CapturedChain>,
    /// Threads to register, with where their chains start.
    register: Vec<(u32, ChainStart)>,
    /// Threads registered, and those of them that ended since the last
    /// [`PythonFrames::forgotten`] (under `-a` nothing else tells the kernel).
    registered: HashSet<u32>,
    ended: Vec<u32>,
    /// Samples whose chain was copied at the instant.
    pub(super) matched: u64,
    /// Why the recorder could not copy chains in the kernel, if it tried.
    pub(super) refused: Option<String>,
    /// Rounds of the recorder's loop handled (see [`Captures::keep_pages`]).
    round: u64,
    /// The processes whose page cache holds only what samples with a copied chain
    /// read in this round, by pid, with the round.
    kept: HashMap<u32, u64>,
}

impl Captures {
    pub(super) fn on(&self) -> bool {
        self.on
    }

    /// Whether thread `tid`'s sample at `time` came with a capture: then it is kept
    /// for the sample.
    pub(super) fn take_for(&mut self, tid: u32, time: u64) -> bool {
        let Some((at, chain)) = self.pending.remove(&tid) else {
            return false;
        };
        if at > time + MATCH_NS {
            // A later sample's: it waits.
            self.pending.insert(tid, (at, chain));
            return false;
        }
        if time.abs_diff(at) > MATCH_NS || chain.frames.is_empty() {
            return false;
        }
        self.by_sample.insert((tid, time), chain);
        self.matched += 1;
        true
    }

    pub(super) fn register(&mut self, tid: u32, start: ChainStart) {
        if !self.register.contains(&(tid, start)) {
            self.register.push((tid, start));
        }
    }

    pub(super) fn remove(&mut self, tid: u32, time: u64) -> Option<CapturedChain> {
        self.by_sample.remove(&(tid, time))
    }

    /// Whether process `pid`'s page cache may serve the sample being handled, which
    /// came with its chain copied: it holds only what this round's samples with a
    /// copy read of the process after them (code objects, names, line tables; their
    /// chains are the copies'). A round's samples are handled together, each read
    /// after every one of them was taken: a page read for the first serves the next
    /// as it would have been read for it, and each code object's page is read once a
    /// round rather than once a sample (that was half the Python part of the
    /// recorder's CPU). If not, the cache is to be cleared, and then kept.
    pub(super) fn keep_pages(&mut self, pid: u32) -> bool {
        self.kept.insert(pid, self.round) == Some(self.round)
    }

    /// Process `pid`'s page cache is used otherwise: it is not kept.
    pub(super) fn pages_used(&mut self, pid: u32) {
        if !self.kept.is_empty() {
            self.kept.remove(&pid);
        }
    }

    pub(super) fn handled_upto(&mut self, time: u64) {
        self.round += 1;
        if !self.by_sample.is_empty() {
            self.by_sample.retain(|&(_, t), _| t > time);
        }
    }
}

/// The bytes a capture copied, by address (sorted), borrowed from it: the pointers
/// read from the thread state where `layout` says they are (`pointers`: their
/// bytes), then the bytes of each frame [`copy_span`] says were copied.
pub(super) fn regions<'c>(
    c: &'c CapturedChain,
    pointers: &'c [[u8; 8]; 2],
    layout: &Layout,
) -> Vec<(u64, &'c [u8])> {
    let mut out = Vec::with_capacity(c.frames.len() + 2);
    out.push((c.tstate.wrapping_add(layout.tstate_frame), &pointers[0][..]));
    if let Some(off) = layout.cframe_current_frame
        && c.first != 0
    {
        out.push((c.first.wrapping_add(off), &pointers[1][..]));
    }
    let (skip, len) = copy_span(layout);
    let len = (len as usize).min(COPIED);
    out.extend((c.frames.iter()).map(|(a, b)| (a.wrapping_add(skip), &b[..len])));
    out.sort_unstable_by_key(|r| r.0);
    out
}

impl<M: Memory> PythonFrames<M> {
    /// The recorder copies chains at the sample instant from now on: the threads to
    /// register are gathered ([`PythonFrames::registrations`]).
    pub(crate) fn capture_on(&mut self) {
        self.captures.on = true;
    }

    /// Reads process `pid` now, if it runs CPython (`mappings`, `modules`: the
    /// recording's, by mapping id), rather than at its first sample; with the copy
    /// on, every thread it has is registered at once, so that its first samples
    /// already come with their chains.
    pub(crate) fn prepare(
        &mut self,
        pid: u32,
        mappings: &[Mapping],
        modules: &[Option<(Arc<LoadedModule>, u64)>],
    ) {
        for (mapping, module) in mappings.iter().zip(modules) {
            let Some((lm, bias)) = module else { continue };
            if mapping.pid != pid {
                continue;
            }
            let Some(pm) = self.python_module(lm, &mapping.path) else {
                continue;
            };
            let open = &mut self.open;
            let meter = super::Meter::new(self.pool.clone(), self.budgets);
            let state = (self.procs.entry(pid))
                .or_insert_with(|| super::start(open(pid, 0, mapping), &pm, *bias, meter));
            if let State::Ready(ready) = state
                && self.captures.on
            {
                let (pages, process) = &mut **ready;
                self.captures.pages_used(pid);
                pages.clear();
                for (tid, start) in process.chain_starts(&*pages) {
                    self.captures.register(tid, start);
                }
            }
            return;
        }
    }

    /// A capture drained: it waits for its thread's sample.
    pub(crate) fn captured(&mut self, time: u64, chain: CapturedChain) {
        if !self.captures.on {
            return;
        }
        if self.captures.pending.len() >= MAX_PENDING {
            self.captures.pending.clear();
        }
        self.captures.pending.insert(chain.tid, (time, chain));
    }

    /// The threads to register for a capture since the last call, with where their
    /// chains start.
    pub(crate) fn registrations(&mut self) -> Vec<(u32, ChainStart)> {
        let list = std::mem::take(&mut self.captures.register);
        self.captures.registered.extend(list.iter().map(|r| r.0));
        list
    }

    /// Thread `tid` ended (its EXIT record): if it was registered, the kernel is to
    /// forget it, before its id is given to another thread.
    pub(crate) fn thread_exited(&mut self, tid: u32) {
        if self.captures.registered.remove(&tid) {
            self.captures.ended.push(tid);
        }
    }

    /// The registered threads that ended since the last call.
    pub(crate) fn forgotten(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.captures.ended)
    }

    /// The recorder could not copy chains in the kernel: why, for the summary.
    pub(crate) fn capture_refused(&mut self, why: String) {
        self.captures.refused = Some(why);
    }

    /// For the summary: how many samples came with their chain copied at the
    /// instant, or why none could.
    pub(super) fn capture_note(&self, samples: u64) -> Option<String> {
        if samples == 0 {
            return None;
        }
        if let Some(why) = &self.captures.refused {
            return Some(format!(
                "Python frames were read from the process after each sample: the kernel \
                 refused to copy them at the sample instant ({why}); more of them may show \
                 as {}",
                crate::interp::python::CHANGED_NAME
            ));
        }
        self.captures.on.then(|| {
            format!(
                "Python chains of {} of {samples} samples were copied in the kernel at the \
                 sample instant; the others were read from the process after it",
                self.captures.matched.min(samples)
            )
        })
    }
}
