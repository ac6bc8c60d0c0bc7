//! What the recorder's unwinder needs of a JVM's code, from the code heaps as the
//! samples' drains found them (no perf map needed): for a pc, whether it is the
//! interpreter, an nmethod (with the frame its prologue sets up) or a stub; for a
//! return address, the bytes before it and whether it follows a call. The answers
//! about a return address are kept with the blob it was in, and hold while that
//! blob does (a blob freed and its memory reused is found changed at the next drain).

use std::cell::RefCell;
use std::collections::HashMap;

use super::JavaFrames;
use crate::interp::jvm::vmstructs::VmError;
use crate::unwind::{JitCode, JitKind};

/// Answers kept per JVM before they start over.
const MAX_ANSWERS: usize = 1 << 16;

/// A blob's identity: its code start and, for an nmethod, its compile id.
type Blob = (u64, Option<u32>);

/// Return address → the blob it was in and what was learnt of it then.
type ByReturn<V> = RefCell<HashMap<u64, (Blob, V)>>;

/// The answers about return addresses learnt from one JVM's code.
#[derive(Default)]
pub(super) struct Returns {
    /// Return address → the blob it was in, the 7 bytes before it.
    before: ByReturn<Option<[u8; 7]>>,
    /// Return address → the blob it was in, whether it follows a call.
    answers: ByReturn<bool>,
}

fn remember<V>(map: &ByReturn<V>, ra: u64, blob: Blob, v: V) {
    let mut map = map.borrow_mut();
    if map.len() >= MAX_ANSWERS {
        map.clear();
    }
    map.insert(ra, (blob, v));
}

impl JavaFrames {
    /// The JIT code of JVM `pid` at `pc`: its interpreter, or a blob of its code heaps
    /// met by the drains (see [`super::super::ahead`]); None if `pc` is in neither, or
    /// the JVM's code heaps cannot be read (its perf map is then asked for instead).
    pub fn jit_code(&self, pid: u32, pc: u64) -> Option<JitCode> {
        let jvm = self.jvms.get(&pid)?;
        let ready = jvm.ready.as_ref()?;
        let (lo, hi) = ready.interpreter;
        if (lo..hi).contains(&pc) {
            return Some(JitCode {
                start: lo,
                kind: JitKind::Interpreter,
            });
        }
        ready.code.as_ref()?;
        jvm.ahead.jit_code(pc)
    }

    /// The blob of JVM `pid` whose code holds the call before return address `ra`.
    fn call_blob(&self, pid: u32, ra: u64) -> Option<Blob> {
        let jvm = self.jvms.get(&pid)?;
        let ready = jvm.ready.as_ref()?;
        let call = ra.checked_sub(1)?;
        let (lo, hi) = ready.interpreter;
        if (lo..hi).contains(&call) {
            return Some((lo, None));
        }
        ready.code.as_ref()?;
        jvm.ahead.blob_of(call)
    }

    /// The 7 bytes before return address `ra` in JVM `pid`'s JIT code, read from it
    /// once per blob holding them.
    pub fn jit_code_before(&self, pid: u32, ra: u64) -> Option<[u8; 7]> {
        let blob = self.call_blob(pid, ra)?;
        let jvm = self.jvms.get(&pid)?;
        if let Some(&(b, known)) = jvm.returns.before.borrow().get(&ra)
            && b == blob
        {
            return known;
        }
        let mut code = [0u8; 7];
        let read = jvm.mem.read(ra.checked_sub(7)?, &mut code).then_some(code);
        remember(&jvm.returns.before, ra, blob, read);
        read
    }

    /// Whether `ra` is a return address, as `check` finds, remembered per blob of
    /// JVM `pid`'s JIT code (an address outside it is checked each time).
    pub fn is_return(&self, pid: u32, ra: u64, check: &dyn Fn() -> bool) -> bool {
        let (Some(blob), Some(jvm)) = (self.call_blob(pid, ra), self.jvms.get(&pid)) else {
            return check();
        };
        if let Some(&(b, known)) = jvm.returns.answers.borrow().get(&ra)
            && b == blob
        {
            return known;
        }
        let answer = check();
        remember(&jvm.returns.answers, ra, blob, answer);
        answer
    }

    /// Whether JVM `pid`'s JIT code can be told from its code heaps (its tables and
    /// code heaps were read): Some(false) once its tables were read without them, or
    /// could not be read at all; None while that is not known yet.
    pub fn code_heap_readable(&self, pid: u32) -> Option<bool> {
        let jvm = self.jvms.get(&pid)?;
        match &jvm.ready {
            Some(ready) => Some(ready.code.is_some()),
            None if jvm.last_try == Some(u64::MAX)
                || matches!(jvm.last_error, Some(VmError::Missing(_))) =>
            {
                Some(false)
            }
            None => None,
        }
    }
}
