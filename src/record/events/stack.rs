//! A sample's stack: the native frames unwound (held for a JVM's newer perf map
//! when they run into code the map does not name yet), then the frames of the
//! interpreters read from outside put in place of their native ones: HotSpot's
//! interpreted methods, V8's JavaScript functions and CPython's functions.

use super::{EventHandler, Held};
use crate::format::StackId;
use crate::record::jit::Lookup;
use crate::replay::python::Copied;
use crate::replay::{decode, merge};
use crate::unwind;
use crate::unwind::addrspace::Space;

impl EventHandler {
    /// A sample's stack, leaf first in `self.frames` (kernel frames, then user frames
    /// unwound from the stack copy or the kernel's frame-pointer walk), interned; or, if
    /// `may_hold`, [`Held`] when the JIT tracker holds the sample for a newer map.
    pub(super) fn stack(
        &mut self,
        s: &decode::Sample,
        may_hold: bool,
    ) -> Result<Option<StackId>, Held> {
        self.bind_unbound(s.pid);
        self.stacks.begin(s);
        let empty = Space::default();
        let java = self.runtimes.java.wants(s.pid);
        let lookup = Lookup {
            space: self.bind.spaces.space(s.pid).unwrap_or(&empty),
            jit: self.jit.get(s.pid),
            java: java.then_some((&self.runtimes.java, s.pid)),
        };
        let with_regs = java || self.runtimes.v8.wants(s.pid);
        let end = self.stacks.unwind(s, &lookup, with_regs);
        if let (Some(end), Some(jit)) = (end, lookup.jit) {
            let cut = end == unwind::UnwindEnd::Truncated(unwind::TruncateReason::NoUnwindInfo);
            let holdable = may_hold && self.jit.can_hold(s.pid);
            // Once a newer map is asked for, only a sample that may be held needs the
            // checks below (they look up every frame: a few µs a sample).
            if holdable || !jit.pacing.wants_refresh {
                // In code neither the map nor the drains name: a frame found, or (the
                // stack was cut: a return address into new code fails validation) a
                // word of the stack copy.
                let unnamed = |pc: u64| {
                    lookup
                        .space
                        .find(pc)
                        .is_some_and(|(_, m)| m.module.is_none())
                        && !jit.covers(pc)
                        && lookup
                            .java
                            .is_none_or(|(j, pid)| j.jit_code(pid, pc).is_none())
                };
                let in_frames = self
                    .stacks
                    .addrs()
                    .iter()
                    .any(|a| unnamed(a.lookup_address()));
                let new_code = in_frames
                    || cut
                        && holdable
                        && s.stack
                            .chunks_exact(8)
                            .map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()))
                            .any(|w| unnamed(w) && jit.follows_call(w));
                // Hold the sample for a newer map, or ask for one for the samples to
                // come.
                if new_code && holdable && self.jit.hold(s.pid, s.time) {
                    if let Some([ip, sp, bp]) = s.regs {
                        self.runtimes
                            .java
                            .warm(s.pid, s.time, (ip, sp, bp, s.stack));
                    }
                    return Err(Held);
                }
                if (in_frames || cut)
                    && let Some(jit) = self.jit.get_mut(s.pid)
                {
                    jit.pacing.wants_refresh = true;
                }
            }
        }
        self.stacks.finish(s.pid, &self.bind.spaces);
        let cut = self.stacks.was_cut();
        // Frame-pointer mode copies a few words of stack: no interpreter frame is read
        // from those (docs/runtimes.md).
        let stack = if self.dwarf { s.stack } else { &[] };
        // HotSpot's frames become the Java methods they ran (read from their frames in
        // the stack copy, each frame's registers from the unwind, and the perf map),
        // CPython's eval-loop frames the Python frames they ran (read from the
        // registers and stack copy of the sample and the process's memory now).
        let map = (self.jit.get(s.pid)).map(|j| &j.map as &dyn crate::interp::CodeRegions);
        let captured = merge::Captured {
            pid: s.pid,
            tid: s.tid,
            copy: Copied {
                stack,
                ..Copied::of(s)
            },
            java: merge::JavaAt::Copy {
                time: s.time,
                r13: s.reg(decode::REG_R13),
                map,
            },
            cut,
        };
        let stages = merge::Stages {
            java: Some(&mut self.runtimes.java),
            python: Some(&mut self.runtimes.python),
            v8: Some(&mut self.runtimes.v8),
            ruby: Some(&mut self.runtimes.ruby),
        };
        // The tables hold this generation's mappings: ids count from its base.
        let bound = merge::Bound::new(&self.bind.mapping_modules, self.writer.mappings())
            .with_base(self.writer.mapping_base());
        merge::merge(stages, &mut self.stacks, captured, bound);
        if cut {
            self.counters.truncated += 1;
        }
        Ok(self.writer.intern_stack(self.stacks.frames()))
    }
}
