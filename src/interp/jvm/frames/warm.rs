//! Reading a sample's Java frames as it is drained, before it is unwound: the
//! methods of its interpreter frames, recognized in its stack copy, and its compiled
//! frames, each pc of the copy in the code heaps resolved to its nmethod's chain
//! ([`super::super::ahead`]).

use super::{BCP_SLOT, JavaFrames, METHOD_SLOT};
use crate::interp::jvm::ahead::Reader;
use crate::interp::jvm::method::{line_table, read_method};

impl JavaFrames {
    /// Reads ahead the methods of the interpreter frames in a sample's stack copy
    /// (`sp`, `stack`; `ip` and `bp` its registers) as it is drained: it may be
    /// unwound only after the JVM exited or unloaded classes (held for a newer perf
    /// map, or drained at the exit), when its methods can no longer be read or
    /// trusted. The leaf's frame, if `ip` is in the interpreter, is the one `bp` points
    /// to (its saved frame pointer may not be written yet); its callers are recognized by their shape (a saved
    /// frame pointer and sender sp above, locals pointer above, a `Method*` in its
    /// slot). Each candidate `Method*` is read once per epoch and kept (at the next
    /// [`JavaFrames::tick`], if no class was unloaded meanwhile) only if it checks
    /// out, so this never names a frame by itself. The sample's compiled frames are
    /// read now too ([`super::super::ahead`]): `time` is the sample's, what keys them
    /// until it is unwound.
    pub fn warm(&mut self, pid: u32, time: u64, (ip, sp, bp, stack): (u64, u64, u64, &[u8])) {
        let Some(jvm) = self.jvms.get_mut(&pid) else {
            return;
        };
        let Some(ready) = jvm.ready.as_ref() else {
            return;
        };
        if let Some(code) = ready.code.as_ref() {
            let r = Reader {
                mem: &*jvm.mem,
                code,
                layout: &ready.layout,
                interpreter: ready.interpreter,
                epoch: jvm.epochs.current(),
            };
            jvm.ahead.queue_sample(&r, time, (ip, sp, stack));
        }
        // The reads are kept at the next tick if the count last read still holds.
        let Some(epoch) = jvm.pending_epoch.or(jvm.epochs.current()) else {
            return;
        };
        jvm.pending_epoch = Some(epoch);
        let end = sp.saturating_add(stack.len() as u64);
        let word = |i: usize| {
            let b = stack.get(i * 8..i * 8 + 8)?;
            Some(u64::from_le_bytes(b.try_into().ok()?))
        };
        let on_stack = |v: u64| (sp..end.saturating_add(1 << 20)).contains(&v);
        let mut candidates = Vec::new();
        let (lo, hi) = ready.interpreter;
        if (lo..hi).contains(&ip)
            && let Some(off) = bp.checked_sub(sp)
            && off.is_multiple_of(8)
            && let Some(m) = (off / 8)
                .checked_sub(METHOD_SLOT)
                .and_then(|i| word(i as usize))
        {
            candidates.push(m);
        }
        let words = stack.len() / 8;
        for i in BCP_SLOT as usize..words {
            let at = sp.wrapping_add(8 * i as u64);
            // The saved frame pointer first: most words are not one.
            if !word(i).is_some_and(|link| link > at && on_stack(link)) {
                continue;
            }
            let (Some(sender), Some(method), Some(locals)) =
                (word(i - 1), word(i - METHOD_SLOT as usize), word(i - 7))
            else {
                continue;
            };
            if sender > at && on_stack(sender) && locals > at && on_stack(locals) {
                candidates.push(method);
            }
        }
        for method in candidates {
            if method == 0
                || !method.is_multiple_of(8)
                || on_stack(method)
                || jvm.named.methods.peek(&(method, epoch)).is_some()
            {
                continue;
            }
            let tried = &mut jvm.named.tried;
            if tried.len() >= 1 << 20 || !tried.insert((method, epoch)) {
                continue;
            }
            if let Some(m) = read_method(&*jvm.mem, &ready.layout, method) {
                let lines = line_table(&*jvm.mem, &ready.layout, &m);
                jvm.pending.push((method, m, lines));
            }
        }
    }
}

impl super::Jvm {
    /// Resolves the compiled frames of the samples queued this drain (see
    /// [`crate::interp::jvm::ahead::Ahead::flush`]), with the count of unloaded
    /// classes they were queued under.
    pub(super) fn flush_ahead(&mut self) {
        let Some(ready) = self.ready.as_ref() else {
            return;
        };
        let Some(code) = ready.code.as_ref() else {
            return;
        };
        let r = Reader {
            mem: &*self.mem,
            code,
            layout: &ready.layout,
            interpreter: ready.interpreter,
            epoch: self.epochs.current(),
        };
        self.ahead.flush(&r, &mut self.named);
    }
}
