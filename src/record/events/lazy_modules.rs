//! Under `-a`, a module is read when a process mapping it is first sampled, not
//! when the mapping is reported: on a host that forks and execs all day (a CI
//! runner's compilers, a shell loop) most processes run between two samples, and
//! reading each new program's file (its symbol and unwind tables) at its MMAP2
//! record cost more than everything else the agent did. A mapping whose build-id
//! the kernel gave is written at once (the recording is complete without the
//! file) and bound to its module at the process's next sample, as is the vdso (read
//! from the process's memory, the same kernel's bytes in each); the mappings of a
//! process not yet bound are listed per process (a forked child inherits its
//! parent's list with its mappings).

use super::*;

impl EventHandler {
    /// Whether `m` may be bound to its module later: under `-a`, a mapping with the
    /// kernel's build-id, not the JVM's (whose handshake reads it at once), or the
    /// vdso (read from the process's memory, which lasts while it can be sampled:
    /// read at every exec, it was an eighth of a host agent's CPU beside a shell
    /// loop).
    pub(super) fn defers_module(&self, m: &Mapping) -> bool {
        self.bind.unbound.is_some()
            && (m.build_id.is_some() || m.path == "[vdso]")
            && !super::super::jvm::is_libjvm(&m.path)
    }

    /// Remembers that `pid`'s mapping at `start` is not bound to its module yet.
    pub(super) fn defer_module(&mut self, pid: u32, start: u64) {
        if let Some(unbound) = &mut self.bind.unbound {
            unbound.entry(pid).or_default().push(start);
        }
    }

    /// A forked child has its parent's mappings, bound or not.
    pub(super) fn fork_unbound(&mut self, parent: u32, child: u32) {
        if let Some(unbound) = &mut self.bind.unbound {
            match unbound.get(&parent).cloned() {
                Some(starts) => unbound.insert(child, starts),
                None => unbound.remove(&child),
            };
        }
    }

    /// The process exec'd or exited: its old mappings are gone.
    pub(super) fn forget_unbound(&mut self, pid: u32) {
        if let Some(unbound) = &mut self.bind.unbound {
            unbound.remove(&pid);
        }
    }

    /// Before `pid`'s sample is unwound: reads the modules of its mappings not bound
    /// yet (each file once for the whole host: the module cache holds it while a
    /// process maps it) and binds them.
    pub(super) fn bind_unbound(&mut self, pid: u32) {
        let Some(starts) = self.bind.unbound.as_mut().and_then(|u| u.remove(&pid)) else {
            return;
        };
        let proc = self.bind.proc_alias.get(&pid).copied().unwrap_or(pid);
        let base = self.writer.mapping_base();
        let mut refused = Vec::new();
        for start in starts {
            let Some(space) = self.bind.spaces.space(pid) else {
                return;
            };
            let Some((found, mapped)) = space.find(start) else {
                continue;
            };
            // Replaced since (a new mapping over it is bound on its own).
            if found != start || mapped.module.is_some() {
                continue;
            }
            let Some(i) = mapped.id.checked_sub(base).map(|i| i as usize) else {
                continue;
            };
            let Some(m) = self.writer.mappings().get(i).cloned() else {
                continue;
            };
            let Some(slot) = self.bind.mapping_modules.get(i) else {
                continue;
            };
            let module = match slot {
                // Bound already through another process mapping the same (a
                // parent and its forked child share the mapping's id).
                Some((lm, _)) => Some(Arc::clone(lm)),
                None => {
                    let got =
                        self.bind
                            .modules
                            .get(proc, m.start, m.end, &m.path, m.build_id.as_deref());
                    if self.bind.modules.refused_last() {
                        // Over the tables budget (`tables`): asked again later.
                        refused.push(start);
                    }
                    got
                }
            };
            let bound = bind::bind(m, module);
            let mapped = bound.mapped(mapped.id);
            self.bind.spaces.space_mut(pid).insert(start, mapped);
            if let Some(slot) = self.bind.mapping_modules.get_mut(i) {
                *slot = bound.module;
            }
            self.unbind_evicted();
        }
        for start in refused {
            self.defer_module(pid, start);
        }
    }
}
