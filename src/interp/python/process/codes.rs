//! The code objects a process's frames were met with, each read once and checked by
//! its fingerprint at every use, and the ids given to each distinct (function, file,
//! line) they name, which become the frames' addresses in the recording.

use super::{BUDGET, CHANGED, PythonProcess, RawFrame, SampleInstant};
use crate::interp::Memory;
use crate::interp::python::code::{self, Code, Fingerprint};

/// Code objects remembered at most, whatever their bytes: past it the caches start
/// again (besides the bytes budget, which lets the least recently used go).
const MAX_CODES: usize = 1 << 16;
/// (code object, instruction) sites whose id is remembered at most.
const MAX_SITES: usize = 1 << 18;
/// What one of those costs.
const SITE_BYTES: usize = 96;
/// Bytes from an instruction's start to the eval loop's pointer while it runs (its
/// code unit and inline caches: `LOAD_ATTR` has 9 in 3.12).
const MAX_INSTRUCTION: u64 = 2 * 12;

/// What the sample holds of the innermost eval call's instruction pointer.
pub(super) enum Pointer {
    /// Into this code object, at this offset (`frame` 0).
    Into(RawFrame),
    /// Into several code objects' bytecode: which one ran is not known.
    Ambiguous,
    /// Into no code object known.
    Nothing,
}

impl PythonProcess {
    /// Forgets every code object when [`MAX_CODES`] are remembered.
    pub(super) fn bound(&mut self) {
        if self.codes.len() >= MAX_CODES {
            self.codes.clear(&mut self.meter);
            self.bytecode.clear();
            self.sharing.clear();
            self.forget_sites();
        }
    }

    /// Forgets the ids remembered by site.
    fn forget_sites(&mut self) {
        self.meter.sub(self.by_site.len() * SITE_BYTES);
        self.by_site.clear();
    }

    /// Keeps code object `c` read at `code` (its bytecode at `start`, when known),
    /// within the bytes budgets: past them the sites' ids go first, then the code
    /// objects least recently used, with where their bytecode is.
    fn keep(&mut self, code: u64, start: Option<u64>, c: Code) {
        self.bound();
        if let Some(start) = start {
            self.remember(start, c.fingerprint.bytecode_len(), code);
        }
        if c.lines_refused {
            self.trips.refused += 1;
        }
        let bytes = c.bytes();
        self.codes.insert(&mut self.meter, code, c, bytes);
        if self.meter.excess() > 0 {
            self.forget_sites();
        }
        let mut gone = Vec::new();
        self.trips.evicted += self.codes.evict(&mut self.meter, |&k| gone.push(k)) as u64;
        for k in gone {
            self.bytecode.retain(|_, &mut (_, c)| c != k);
            self.sharing.retain(|_, codes| {
                codes.retain(|&c| c != k);
                !codes.is_empty()
            });
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
        let print = self.print(mem, code)?;
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
        self.keep(code, Some(start), c);
        Some(print)
    }

    /// The eval loop's instruction pointer as the sample holds it: the first word,
    /// among those where the sample holds the innermost eval call's own state
    /// ([`SampleInstant::held_words`]), that points into the bytecode of `leaf` (the
    /// code object read as running: its address, bytecode start and length) or of a
    /// code object met before and still the same; at the instruction it points to
    /// (the next one: the running one is the code unit before). Preferred: `leaf`'s.
    ///
    /// A word of another code object is that function's instruction pointer only if
    /// no word of a third one is held there too; the other words of the stack (the
    /// locals of the functions the eval loop called, where words of earlier calls at
    /// the same depth are left over: the thread ran that code before, not at the
    /// sample) count only for `leaf`, the instruction it records (`own`, its start)
    /// first. Else the sample does not tell which function it ran.
    pub(super) fn pointer(
        &mut self,
        mem: &impl Memory,
        at: &SampleInstant<'_>,
        leaf: Option<(u64, u64, u64)>,
        own: Option<u64>,
    ) -> Pointer {
        // The code object and bytecode start a word points into.
        let into = |v: u64| -> Option<(u64, u64)> {
            if let Some((code, start, len)) = leaf
                && start < v
                && v <= start.saturating_add(len)
            {
                return Some((code, start));
            }
            let (&start, &(end, code)) = self.bytecode.range(..v).next_back()?;
            (v <= end).then_some((code, start))
        };
        let at_offset = |code: u64, start: u64, next: u64| RawFrame {
            frame: 0,
            code,
            offset: Some(next.saturating_sub(start).saturating_sub(2)),
        };
        let held: Vec<(u64, u64, u64)> = at
            .held_words()
            .into_iter()
            .filter(|v| v & 1 == 0)
            .filter_map(|v| into(v).map(|(c, s)| (c, s, v)))
            .collect();
        let is_leaf = |c: u64| leaf.is_some_and(|l| l.0 == c);
        if let Some(&(c, s, v)) = held.iter().find(|h| is_leaf(h.0)) {
            if held.iter().any(|h| h.0 != c) {
                self.counts.marked.mixed += 1;
            }
            return Pointer::Into(at_offset(c, s, v));
        }
        if let Some(&(code, start, next)) = held.first() {
            if held.iter().any(|h| h.0 != code) {
                return Pointer::Ambiguous;
            }
            // Still that code object (its fingerprint as when it was read).
            let now = self.print(mem, code);
            return match self.codes.peek(&code) {
                Some(c) if Some(c.fingerprint) == now => {
                    Pointer::Into(at_offset(code, start, next))
                }
                _ => Pointer::Nothing,
            };
        }
        // Words left over: the leaf's own code only (the instruction it records
        // first), as the frame read is preferred above; another code object's pointer
        // there is one an earlier call left, and names nothing.
        let Some((code, start, len)) = leaf else {
            return Pointer::Nothing;
        };
        let left = at.left_words();
        let in_leaf = |v: u64| v & 1 == 0 && v > start && v <= start.saturating_add(len);
        let own_next =
            |v: u64| own.is_some_and(|o| v > o && v <= o.saturating_add(MAX_INSTRUCTION));
        let found = left
            .iter()
            .find(|&&v| in_leaf(v) && own_next(v))
            .or_else(|| left.iter().find(|&&v| in_leaf(v)));
        match found {
            Some(&v) => Pointer::Into(at_offset(code, start, v)),
            None if left.iter().any(|&v| v & 1 == 0 && into(v).is_some()) => Pointer::Ambiguous,
            None => Pointer::Nothing,
        }
    }

    /// The fingerprint of the code object at `code` as the sample being read shows
    /// it (read once a sample: a recursion names the same code object at each level).
    pub(super) fn print(&mut self, mem: &impl Memory, code: u64) -> Option<Fingerprint> {
        if let Some(&p) = self.prints.get(&code) {
            return p;
        }
        let rt = self.runtime;
        let p = code::fingerprint(mem, &rt.layout, rt.code_type, code);
        self.prints.insert(code, p);
        p
    }

    /// The id of one frame, checking its code object.
    pub(super) fn id(&mut self, mem: &impl Memory, f: &RawFrame) -> u64 {
        let rt = self.runtime;
        let Some(print) = self.print(mem, f.code) else {
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
        // Named from the code object read now before it is kept: keeping it may let
        // others go, and, past a tiny budget, itself.
        let named = {
            let c = match &fresh {
                Some(c) => c,
                None => match self.codes.get(&f.code) {
                    Some(c) => c,
                    None => {
                        self.counts.changed += 1;
                        return CHANGED;
                    }
                },
            };
            let line = c.line(&rt.layout, f.offset);
            self.names.id(&mut self.meter, &c.name, &c.file, line)
        };
        if let Some(c) = fresh {
            let start = code::bytecode_start(mem, &rt.layout, f.code);
            self.keep(f.code, start, c);
        }
        let Some(id) = named else {
            self.trips.names += 1;
            self.counts.changed += 1;
            return BUDGET;
        };
        if self.by_site.len() >= MAX_SITES {
            self.forget_sites();
        }
        if self
            .by_site
            .insert((f.code, f.offset), (print, id))
            .is_none()
        {
            self.meter.add(SITE_BYTES);
        }
        self.counts.named += 1;
        id
    }
}
