//! The host agent's byte budget over its symbol and unwind tables (issue 46): under
//! `-a`, the module cache keeps the tables it holds within `--tables-memory`
//! (least recently used first, by file); a module it evicts is unbound here from
//! every address space and window slot holding it, so its memory goes, and is read
//! again at the next sample of a process mapping it. A module refused for the budget
//! leaves its mapping unbound (frame pointers unwind its frames, which are named by
//! mapping and offset) and is asked for again at that process's next sample, read
//! at most once per window.

use super::*;

impl EventHandler {
    /// Under `-a`: keeps the loaded tables within `bytes` (see the module docs).
    /// Elsewhere every module a recording maps is kept (its processes are few).
    pub(in crate::record) fn with_tables_budget(mut self, bytes: usize) -> EventHandler {
        if self.bind.unbound.is_some() {
            self.bind.modules.set_budget(bytes);
            sys::map_large_allocations();
        }
        self
    }

    /// Unbinds the modules the cache evicted: their mappings read them again at
    /// their process's next sample.
    pub(super) fn unbind_evicted(&mut self) {
        let evicted = self.bind.modules.take_evicted();
        if evicted.is_empty() {
            return;
        }
        let is_evicted = |cfi: &Arc<crate::unwind::ModuleCfi>| {
            evicted
                .iter()
                .any(|m| m.cfi.as_ref().is_some_and(|c| Arc::ptr_eq(c, cfi)))
        };
        let mut rebind = Vec::new();
        self.bind.spaces.for_each_start_mut(|pid, start, mapped| {
            if mapped
                .module
                .as_ref()
                .is_some_and(|(cfi, _)| is_evicted(cfi))
            {
                mapped.module = None;
                rebind.push((pid, start));
            }
        });
        for (pid, start) in rebind {
            self.defer_module(pid, start);
        }
        for slot in &mut self.bind.mapping_modules {
            if slot
                .as_ref()
                .is_some_and(|(lm, _)| evicted.iter().any(|e| Arc::ptr_eq(e, lm)))
            {
                *slot = None;
            }
        }
    }

    /// The modules a window's samples fell in were used now (for the eviction order).
    pub(in crate::record) fn touch_modules(&mut self, used: &[Option<(Arc<LoadedModule>, u64)>]) {
        self.bind
            .modules
            .touch(used.iter().filter_map(|m| m.as_ref().map(|(lm, _)| lm)));
    }

    /// The tables held, in bytes, and the modules evicted and refused so far.
    pub(in crate::record) fn tables_usage(&self) -> (usize, u64, u64) {
        (
            self.bind.modules.table_bytes(),
            self.bind.modules.evictions,
            self.bind.modules.refusals,
        )
    }
}
