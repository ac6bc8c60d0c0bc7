//! The code objects a process's frames were met with, each read once and checked by
//! its fingerprint at every use, and the ids given to each distinct (function, file,
//! line) they name, which become the frames' addresses in the recording.

use super::{CHANGED, FrameName, PythonProcess, RawFrame, SampleInstant};
use crate::interp::Memory;
use crate::interp::python::code::{self, Fingerprint};

/// Code objects remembered at most: past it the caches start again (a process that
/// makes code without end costs the recorder bounded memory).
const MAX_CODES: usize = 1 << 16;
/// Distinct (function, file, line) named at most per process: past it, new ones are
/// [`CHANGED`] (the recording's names stay bounded).
const MAX_NAMES: usize = 1 << 20;

impl PythonProcess {
    /// Forgets every code object when [`MAX_CODES`] are remembered.
    pub(super) fn bound(&mut self) {
        if self.codes.len() >= MAX_CODES {
            self.codes.clear();
            self.bytecode.clear();
            self.sharing.clear();
            self.by_site.clear();
        }
    }

    /// Remembers where the bytecode of the code object at `code` is.
    fn remember(&mut self, start: u64, len: u64, code: u64) {
        self.bytecode
            .insert(start, (start.saturating_add(len), code));
        let codes = self.sharing.entry(start).or_default();
        if !codes.contains(&code) {
            codes.push(code);
        }
    }

    /// Reads the code object at `code` if it is not known yet (or changed), so that
    /// an instruction pointer into it is recognised. Returns its fingerprint when it
    /// is known now, as it is.
    pub(super) fn learn(&mut self, mem: &impl Memory, code: u64) -> Option<Fingerprint> {
        let rt = self.runtime;
        let print = code::fingerprint(mem, &rt.layout, rt.code_type, code)?;
        if self
            .codes
            .get(&code)
            .is_some_and(|c| c.fingerprint == print)
        {
            return Some(print);
        }
        let c = code::read(mem, &rt.layout, rt.code_type, code)?;
        let start = code::bytecode_start(mem, &rt.layout, code)?;
        if c.fingerprint != print {
            return None;
        }
        self.bound();
        self.remember(start, print.bytecode_len(), code);
        self.codes.insert(code, c);
        Some(print)
    }

    /// The code object met before that the sample's instruction pointer (in its
    /// registers, or its stack below `end`) points into, still the same: the function
    /// the thread ran at the sample, at that instruction.
    pub(super) fn known_code(
        &self,
        mem: &impl Memory,
        at: &SampleInstant<'_>,
        end: u64,
    ) -> Option<RawFrame> {
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

    /// The id of one frame, checking its code object.
    pub(super) fn id(&mut self, mem: &impl Memory, f: &RawFrame) -> u64 {
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
                self.remember(start, print.bytecode_len(), f.code);
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
