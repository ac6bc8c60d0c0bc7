//! One CPython process as the recorder sees it across samples: its runtime, each
//! thread's state (found once, checked at each use), the code objects met (named once,
//! fingerprinted at each use) and the ids given to each distinct (function, file,
//! line), which become the frames' addresses in the recording. Reads a sample's
//! Python frames as segments, one per native eval call, and says which could not be
//! trusted.

use std::collections::HashMap;

use super::code::{self, Code, Fingerprint};
use super::walk::{RawFrame, Runtime, WalkError};
use crate::interp::Memory;

/// The id of the frame that stands for a Python frame that could not be validated.
pub const CHANGED: u64 = 0;
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

/// Counts for the summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Python frames given a name.
    pub named: u64,
    /// Python frames marked [`CHANGED_NAME`].
    pub changed: u64,
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
    /// innermost first. When the chain does not end where the native stack says (the
    /// thread moved on since the sample) every eval frame gets one [`CHANGED`] frame;
    /// a frame whose code object does not check out is [`CHANGED`] itself.
    pub fn frames(
        &mut self,
        mem: &impl Memory,
        tid: u32,
        sp: u64,
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
        let segments = match self.runtime.segments(mem, frame, sp) {
            Ok(s) if s.len() == evals => s,
            _ => {
                self.counts.changed += evals as u64;
                return Ok(vec![vec![CHANGED]; evals]);
            }
        };
        Ok(segments
            .iter()
            .map(|seg| seg.iter().map(|f| self.id(mem, f)).collect())
            .collect())
    }

    /// The id of one frame, checking its code object.
    fn id(&mut self, mem: &impl Memory, f: &RawFrame) -> u64 {
        let rt = self.runtime;
        let Some(print) = code::fingerprint(mem, &rt.layout, rt.code_type, f.code) else {
            self.counts.changed += 1;
            return CHANGED;
        };
        // The instruction must be inside the bytecode.
        if f.offset.is_some_and(|o| o >= print.len()) {
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
            None => {
                self.names.push(name.clone());
                let id = self.names.len() as u64;
                self.ids.insert(name, id);
                id
            }
        };
        self.by_site.insert((f.code, f.offset), (print, id));
        self.counts.named += 1;
        id
    }
}
