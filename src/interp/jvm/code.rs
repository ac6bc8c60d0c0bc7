//! A JVM's JIT code as its own code heap describes it, for the readers that have no
//! perf map: `dump` (which asks the JVM nothing) and perf.data files (recorded by
//! perf, converted while the JVM still runs). The unwinder needs, for a pc in
//! anonymous code, what the code is ([`JitKind`]) and, for a return address, the
//! bytes before it. Here: a pc in HotSpot's interpreter is the interpreter; a pc in a
//! code blob whose header says `nmethod` is a compiled method, its frame read from
//! its prologue (as for a perf-map entry); any other blob is a stub. The blob is
//! found through the code heap's segment map and its header must hold the pc
//! ([`CodeCache::blob_code`]), so a pc in free space or in a header is no code.
//! What is learnt is remembered per address for the lookup's life (one dump, one
//! conversion): the code heap is read as it is now.

use std::cell::RefCell;
use std::collections::HashMap;

use super::JavaFrames;
use super::compiled::CodeCache;
use crate::interp::Memory;
use crate::unwind::{CodeModule, JitCode, JitKind, ModuleLookup, PROLOGUE_BYTES, decode_prologue};

/// Answers remembered before the caches start over.
const MAX_REMEMBERED: usize = 1 << 16;

/// A process's modules (`space`) plus the JIT code of its JVM, found in the code heap.
pub struct HeapCode<'a> {
    space: &'a dyn ModuleLookup,
    jvm: Option<(&'a dyn Memory, (u64, u64), &'a CodeCache)>,
    code: RefCell<HashMap<u64, Option<JitCode>>>,
}

impl<'a> HeapCode<'a> {
    /// `space` alone when `pid` is no JVM whose tables and code heaps were read.
    pub fn new(space: &'a dyn ModuleLookup, java: &'a JavaFrames, pid: u32) -> HeapCode<'a> {
        HeapCode {
            space,
            jvm: java.code_heap(pid),
            code: RefCell::default(),
        }
    }

    fn find(&self, pc: u64) -> Option<JitCode> {
        let (mem, (lo, hi), heap) = self.jvm?;
        if (lo..hi).contains(&pc) {
            return Some(JitCode {
                start: lo,
                kind: JitKind::Interpreter,
            });
        }
        if !heap.contains(pc) {
            return None;
        }
        let (start, end, nmethod) = heap.blob_code(mem, pc)?;
        let kind = if nmethod {
            let mut buf = [0u8; PROLOGUE_BYTES];
            let n = (end - start).min(PROLOGUE_BYTES as u64) as usize;
            if !mem.read(start, &mut buf[..n]) {
                return None;
            }
            JitKind::Method(decode_prologue(&buf[..n]))
        } else {
            JitKind::Stub
        };
        Some(JitCode { start, kind })
    }
}

impl ModuleLookup for HeapCode<'_> {
    fn lookup(&self, avma: u64) -> Option<CodeModule<'_>> {
        self.space.lookup(avma)
    }

    fn jit(&self, avma: u64) -> Option<JitCode> {
        self.jvm?;
        if let Some(&known) = self.code.borrow().get(&avma) {
            return known;
        }
        let found = self.find(avma);
        let mut cache = self.code.borrow_mut();
        if cache.len() >= MAX_REMEMBERED {
            cache.clear();
        }
        cache.insert(avma, found);
        found
    }

    fn jit_code_before(&self, ra: u64) -> Option<[u8; 7]> {
        let (mem, (lo, hi), heap) = self.jvm?;
        let at = ra.checked_sub(7)?;
        if !(lo..hi).contains(&at) && !heap.contains(at) {
            return None;
        }
        let mut code = [0u8; 7];
        mem.read(at, &mut code).then_some(code)
    }
}
