//! One CPython process as the recorder sees it across samples: its runtime, each
//! thread's state (found once, checked at each use), the code objects met (named once,
//! fingerprinted at each use) and the ids given to each distinct (function, file,
//! line), which become the frames' addresses in the recording. Reads a sample's
//! Python frames as segments, one per native eval call, and says which could not be
//! trusted.

use std::collections::{BTreeMap, HashMap};

use super::code::{self, Code, Fingerprint};
use super::layout::FrameShape;
use super::walk::{RawFrame, Runtime, WalkError};
use crate::interp::Memory;

/// The id of the frame that stands for a Python frame that could not be validated.
pub const CHANGED: u64 = 0;
/// Words of the innermost eval call's C frame tried as the frame object it ran
/// (3.8–3.10), at most.
const MAX_CANDIDATES: usize = 64;

/// Code objects remembered at most: past it the caches start again (a process that
/// makes code without end costs the recorder bounded memory).
const MAX_CODES: usize = 1 << 16;
/// Distinct (function, file, line) named at most per process: past it, new ones are
/// [`CHANGED`] (the recording's names stay bounded).
const MAX_NAMES: usize = 1 << 20;

/// Its name.
pub const CHANGED_NAME: &str = "[python: changed]";

/// A Python frame's name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FrameName {
    /// The qualified name (3.11+) or the name.
    pub function: String,
    /// The source file.
    pub file: String,
    /// The line of the instruction, when the table gives one.
    pub line: Option<u32>,
}

/// What the sample itself holds, as it was at its instant: the stack copy and the
/// callee-saved registers, where the eval loop keeps its instruction pointer.
#[derive(Debug, Clone, Copy)]
pub struct SampleInstant<'a> {
    /// The stack pointer: the address of `stack[0]`.
    pub sp: u64,
    /// The copied stack.
    pub stack: &'a [u8],
    /// Register values (RBX, RBP, R12 to R15), zero when not copied.
    pub regs: &'a [u64],
    /// For each native eval frame, innermost first: the address its C frame ends at
    /// (the slot of its return address; u64::MAX when not found in the copy).
    pub ends: &'a [u64],
    /// The native stack was cut: its outermost eval calls are not among them.
    pub cut: bool,
}

impl SampleInstant<'_> {
    /// The first value that `wanted` accepts: among the registers if `regs`, then
    /// among the stack words at `lo..hi`, from the lowest.
    fn find(
        &self,
        mut wanted: impl FnMut(u64) -> bool,
        regs: bool,
        lo: u64,
        hi: u64,
    ) -> Option<u64> {
        let words = self
            .stack
            .chunks_exact(8)
            .enumerate()
            .map(|(i, w)| (self.sp.saturating_add(8 * i as u64), w))
            .skip_while(|&(a, _)| a < lo)
            .take_while(|&(a, _)| a < hi)
            .map(|(_, w)| u64::from_le_bytes(w.try_into().unwrap_or_default()));
        let regs = if regs { self.regs } else { &[] };
        regs.iter()
            .copied()
            .chain(words)
            .find(|&v| v & 1 == 0 && wanted(v))
    }

    /// Where the C frame of the `k`th eval call (innermost first) lies in the stack:
    /// from the end of the one inside it (or the stack pointer) to its own end.
    fn eval_frame(&self, k: usize) -> (u64, u64) {
        let lo = match k {
            0 => self.sp,
            k => self.ends.get(k - 1).copied().unwrap_or(u64::MAX),
        };
        (lo, self.ends.get(k).copied().unwrap_or(u64::MAX))
    }
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
}

/// The state kept for one process.
pub struct PythonProcess {
    /// Where the interpreter is and how it is laid out.
    pub runtime: Runtime,
    threads: HashMap<u32, u64>,
    /// Code objects by address.
    codes: HashMap<u64, Code>,
    /// The bytecode of each code object met, by its first byte: its end and the
    /// code object's address.
    bytecode: BTreeMap<u64, (u64, u64)>,
    /// Frame ids by (code object, offset) for the code object's current fingerprint.
    by_site: HashMap<(u64, Option<u64>), (Fingerprint, u64)>,
    /// Ids by name, and names by id (index `id - 1`).
    ids: HashMap<FrameName, u64>,
    names: Vec<FrameName>,
    /// What was found so far.
    pub counts: Counts,
}

impl PythonProcess {
    /// An empty state for the process whose runtime this is.
    pub fn new(runtime: Runtime) -> PythonProcess {
        PythonProcess {
            runtime,
            threads: HashMap::new(),
            codes: HashMap::new(),
            bytecode: BTreeMap::new(),
            by_site: HashMap::new(),
            ids: HashMap::new(),
            names: Vec::new(),
            counts: Counts::default(),
        }
    }

    /// The name of frame id `id` (ids start at 1; [`CHANGED`] has none).
    pub fn name(&self, id: u64) -> Option<&FrameName> {
        self.names.get(usize::try_from(id.checked_sub(1)?).ok()?)
    }

    /// The thread state of kernel thread `tid`, checked.
    fn thread_state(&mut self, mem: &impl Memory, tid: u32) -> Option<u64> {
        if let Some(&t) = self.threads.get(&tid)
            && self.runtime.tid_of(mem, t) == Some(tid)
        {
            return Some(t);
        }
        self.threads = self.runtime.thread_states(mem);
        self.threads.get(&tid).copied()
    }

    /// The Python frames of thread `tid` for a sample whose native stack holds `evals`
    /// eval-loop frames: one segment of frame ids (leaf first) per eval frame,
    /// innermost first.
    ///
    /// The chain is read after the sample, so it is checked against what the sample
    /// itself holds: the running function of the innermost eval call must be the one
    /// the eval loop's instruction pointer (in a register or a stack word of the
    /// sample) pointed into, and its line is taken from that pointer; otherwise that
    /// call's frames are one [`CHANGED`] frame. When the chain does not end where the
    /// native stack says (the thread moved on since the sample) every eval frame gets
    /// one [`CHANGED`] frame; a frame whose code object does not check out is
    /// [`CHANGED`] itself.
    pub fn frames(
        &mut self,
        mem: &impl Memory,
        live: &impl Memory,
        tid: u32,
        at: &SampleInstant<'_>,
        evals: usize,
    ) -> Result<Vec<Vec<u64>>, WalkError> {
        let Some(tstate) = self.thread_state(mem, tid) else {
            self.counts.no_thread += 1;
            return Err(WalkError::NoThreadState);
        };
        let frame = self
            .runtime
            .current_frame(mem, tstate)
            .ok_or(WalkError::Unreadable)?;
        let segments = self.runtime.segments(mem, frame, at.sp);
        if let FrameShape::Object { .. } = self.runtime.layout.frame {
            let chain: Vec<RawFrame> = match segments {
                Ok((s, _)) => s.into_iter().flatten().collect(),
                Err(_) => Vec::new(),
            };
            return Ok(self.object_frames(mem, at, &chain, evals));
        }
        let mut segments = match segments {
            Ok((s, _)) if evals > 0 && (s.len() == evals || at.cut && s.len() > evals) => {
                s.into_iter().take(evals).collect::<Vec<_>>()
            }
            _ => {
                self.counts.changed += evals as u64;
                return Ok(vec![vec![CHANGED]; evals]);
            }
        };
        let end = at.eval_frame(0).1;
        // The innermost call's running function, confirmed by the sample.
        let mut confirmed = match segments[0].first_mut() {
            Some(leaf) => self.confirm(mem, at, leaf, end),
            None => Confirmed::No,
        };
        // The sampled frame must still be on the thread's chain as it is now (3.11,
        // 3.12 find it in the sample's stack copy): else the frames read from it are
        // left over from calls that have returned, their callers not the sample's.
        if let Confirmed::Yes = confirmed
            && let Some(leaf) = segments[0].first()
            && !self
                .runtime
                .current_frame(live, tstate)
                .is_some_and(|now| self.runtime.reaches(live, now, leaf.frame))
        {
            let mut other = *leaf;
            other.frame = 0;
            confirmed = Confirmed::Other(other);
        }
        // The chain was read a page at a time while the thread ran on: read it again,
        // as it is now, and keep its callers only if both reads agree (a chain read
        // across pages at two moments can join the callers of one call to the frames
        // of another).
        if let Confirmed::Yes = confirmed
            && !self.reads_again(live, frame, at.sp, &segments)
            && let Some(leaf) = segments[0].first()
        {
            let mut other = *leaf;
            other.frame = 0;
            confirmed = Confirmed::Other(other);
        }
        let mut out: Vec<Vec<u64>> = Vec::with_capacity(segments.len());
        for (i, seg) in segments.iter().enumerate() {
            if i == 0 {
                match confirmed {
                    Confirmed::No => {
                        self.counts.changed += 1;
                        self.counts.unconfirmed += 1;
                        out.push(vec![CHANGED]);
                        continue;
                    }
                    Confirmed::Other(leaf) => {
                        self.counts.changed += 1;
                        self.counts.replaced += 1;
                        out.push(vec![self.id(mem, &leaf), CHANGED]);
                        continue;
                    }
                    Confirmed::Yes => {}
                }
            }
            out.push(seg.iter().map(|f| self.id(mem, f)).collect());
        }
        Ok(out)
    }

    /// Whether the chain from `frame`, read again from `live`, has the frames and
    /// code objects of `segments` (and the same instruction in every caller).
    fn reads_again(
        &self,
        live: &impl Memory,
        frame: u64,
        sp: u64,
        segments: &[Vec<RawFrame>],
    ) -> bool {
        let Ok((again, _)) = self.runtime.segments(live, frame, sp) else {
            return false;
        };
        let first: Vec<&RawFrame> = segments.iter().flatten().collect();
        let second: Vec<&RawFrame> = again.iter().flatten().take(first.len()).collect();
        first.len() == second.len()
            && first.iter().zip(&second).enumerate().all(|(i, (a, b))| {
                a.frame == b.frame && a.code == b.code && (i == 0 || a.offset == b.offset)
            })
    }

    /// Whether the sample holds the eval loop's instruction pointer into `leaf`'s
    /// bytecode (in its registers or its stack below `end`): then `leaf` takes its
    /// offset. Else, whether it points into another code object met before (the
    /// thread ran that one at the sample, and another since).
    fn confirm(
        &mut self,
        mem: &impl Memory,
        at: &SampleInstant<'_>,
        leaf: &mut RawFrame,
        end: u64,
    ) -> Confirmed {
        let rt = self.runtime;
        self.learn(mem, leaf.code);
        // The loop's pointer is to the next instruction (or just past the bytecode,
        // at its last): the running one is the code unit before it.
        if let Some(print) = code::fingerprint(mem, &rt.layout, rt.code_type, leaf.code)
            && let Some(start) = code::bytecode_start(mem, &rt.layout, leaf.code)
        {
            let inside = |v: u64| start < v && v <= start + print.bytecode_len();
            if let Some(next) = at.find(inside, true, at.sp, end) {
                leaf.offset = Some(next - 2 - start);
                return Confirmed::Yes;
            }
        }
        match self.known_code(mem, at, end) {
            Some(mut other) => {
                other.frame = leaf.frame;
                Confirmed::Other(other)
            }
            None => Confirmed::No,
        }
    }

    /// Forgets every code object when [`MAX_CODES`] are remembered.
    fn bound(&mut self) {
        if self.codes.len() >= MAX_CODES {
            self.codes.clear();
            self.bytecode.clear();
            self.by_site.clear();
        }
    }

    /// Reads the code object at `code` if it is not known yet (or changed), so that
    /// an instruction pointer into it is recognised.
    fn learn(&mut self, mem: &impl Memory, code: u64) {
        let rt = self.runtime;
        let Some(print) = code::fingerprint(mem, &rt.layout, rt.code_type, code) else {
            return;
        };
        if self
            .codes
            .get(&code)
            .is_some_and(|c| c.fingerprint == print)
        {
            return;
        }
        if let Some(c) = code::read(mem, &rt.layout, rt.code_type, code)
            && c.fingerprint == print
            && let Some(start) = code::bytecode_start(mem, &rt.layout, code)
        {
            self.bound();
            self.bytecode
                .insert(start, (start.saturating_add(print.bytecode_len()), code));
            self.codes.insert(code, c);
        }
    }

    /// The code object met before that the sample's instruction pointer (in its
    /// registers, or its stack below `end`) points into, still the same: the function
    /// the thread ran at the sample, at that instruction.
    fn known_code(&self, mem: &impl Memory, at: &SampleInstant<'_>, end: u64) -> Option<RawFrame> {
        let rt = self.runtime;
        let known = |v: u64| {
            self.bytecode
                .range(..v)
                .next_back()
                .is_some_and(|(_, &(e, _))| v <= e)
        };
        let next = at.find(known, true, at.sp, end)?;
        let (&start, &(_, code)) = self.bytecode.range(..next).next_back()?;
        // Still that code object (its fingerprint as when it was read).
        let now = code::fingerprint(mem, &rt.layout, rt.code_type, code)?;
        (self.codes.get(&code)?.fingerprint == now).then_some(RawFrame {
            frame: 0,
            code,
            offset: Some(next - 2 - start),
        })
    }

    /// 3.8–3.10, one frame object per eval call: the chain is taken from a frame
    /// object that the innermost eval call held at the sample (in a register or its C
    /// frame), and must have one frame per eval call, each held by its own call's C
    /// frame; each frame takes the instruction its call's C frame pointed at, where it
    /// holds one. `chain` is the thread's chain as read afterwards: its frames are
    /// tried first, then other words of the innermost C frame that point near them.
    fn object_frames(
        &mut self,
        mem: &impl Memory,
        at: &SampleInstant<'_>,
        chain: &[RawFrame],
        evals: usize,
    ) -> Vec<Vec<u64>> {
        let rt = self.runtime;
        // An eval call's registers are saved by the calls it made: anywhere below the
        // end of its C frame.
        let held = |f: u64, k: usize| {
            let (_, hi) = at.eval_frame(k);
            at.find(|v| v == f, true, at.sp, hi).is_some()
        };
        // A cut native stack shows only the innermost eval calls: the chain may go on.
        let whole = |c: &[RawFrame]| {
            (c.len() == evals || at.cut && c.len() > evals)
                && c.iter()
                    .take(evals)
                    .enumerate()
                    .all(|(k, f)| held(f.frame, k))
        };
        let mut found: Option<Vec<RawFrame>> = None;
        if let Some(j) = chain.len().checked_sub(evals)
            && evals > 0
            && whole(&chain[j..])
        {
            found = Some(chain[j..].to_vec());
        }
        if found.is_none()
            && evals > 0
            && let Some(near) = chain.first().map(|f| f.frame >> 30)
        {
            let (lo, hi) = at.eval_frame(0);
            let mut tried = 0;
            let mut candidate = |v: u64| {
                if found.is_some()
                    || !v.is_multiple_of(8)
                    || v >> 30 != near
                    || tried >= MAX_CANDIDATES
                {
                    return false;
                }
                tried += 1;
                if let Ok((segs, _)) = rt.segments(mem, v, at.sp) {
                    let c: Vec<RawFrame> = segs.into_iter().flatten().collect();
                    if whole(&c) {
                        found = Some(c.into_iter().take(evals).collect());
                    }
                }
                false
            };
            at.find(&mut candidate, true, lo, hi);
        }
        let Some(chain) = found else {
            for f in chain {
                self.learn(mem, f.code);
            }
            // The frames have moved on: the running function still shows in the
            // instruction pointer the sample holds, if it points into known code.
            let (_, hi) = at.eval_frame(0);
            let mut out = vec![vec![CHANGED]; evals];
            self.counts.changed += evals as u64;
            match self.known_code(mem, at, hi) {
                Some(leaf) if evals > 0 => {
                    self.counts.changed -= 1;
                    self.counts.replaced += 1;
                    out[0] = vec![self.id(mem, &leaf)];
                }
                _ => self.counts.unconfirmed += 1,
            }
            return out;
        };
        let mut out = Vec::with_capacity(evals);
        for (k, f) in chain.iter().enumerate() {
            let mut f = *f;
            if let Some(print) = code::fingerprint(mem, &rt.layout, rt.code_type, f.code)
                && let Some(start) = code::bytecode_start(mem, &rt.layout, f.code)
            {
                let (lo, hi) = at.eval_frame(k);
                let inside = |v: u64| start < v && v <= start + print.bytecode_len();
                if let Some(next) = at.find(inside, k == 0, lo, hi) {
                    f.offset = Some(next - 2 - start);
                }
            }
            out.push(vec![self.id(mem, &f)]);
        }
        out
    }

    /// The id of one frame, checking its code object.
    fn id(&mut self, mem: &impl Memory, f: &RawFrame) -> u64 {
        let rt = self.runtime;
        let Some(print) = code::fingerprint(mem, &rt.layout, rt.code_type, f.code) else {
            self.counts.changed += 1;
            return CHANGED;
        };
        // The instruction must be inside the bytecode.
        if f.offset.is_some_and(|o| o >= print.bytecode_len()) {
            self.counts.changed += 1;
            return CHANGED;
        }
        if let Some(&(p, id)) = self.by_site.get(&(f.code, f.offset))
            && p == print
        {
            self.counts.named += 1;
            return id;
        }
        let fresh = match self.codes.get(&f.code) {
            Some(c) if c.fingerprint == print => None,
            _ => match code::read(mem, &rt.layout, rt.code_type, f.code) {
                Some(c) if c.fingerprint == print => Some(c),
                _ => {
                    self.counts.changed += 1;
                    return CHANGED;
                }
            },
        };
        if let Some(c) = fresh {
            self.bound();
            if let Some(start) = code::bytecode_start(mem, &rt.layout, f.code) {
                self.bytecode
                    .insert(start, (start.saturating_add(print.bytecode_len()), f.code));
            }
            self.codes.insert(f.code, c);
        }
        let c = &self.codes[&f.code];
        let name = FrameName {
            function: c.name.clone(),
            file: c.file.clone(),
            line: c.line(&rt.layout, f.offset),
        };
        let id = match self.ids.get(&name) {
            Some(&id) => id,
            None if self.names.len() >= MAX_NAMES => {
                self.counts.changed += 1;
                return CHANGED;
            }
            None => {
                self.names.push(name.clone());
                let id = self.names.len() as u64;
                self.ids.insert(name, id);
                id
            }
        };
        if self.by_site.len() >= MAX_NAMES {
            self.by_site.clear();
        }
        self.by_site.insert((f.code, f.offset), (print, id));
        self.counts.named += 1;
        id
    }
}
