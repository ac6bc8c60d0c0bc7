//! What each traced process has mapped executable, as the recorder learns it from
//! `/proc/PID/maps` at attach and from MMAP2 records after (and the perf.data reader
//! from perf's MMAP records): which mapping an address
//! falls in, and for DWARF unwinding, that module's CFI and load bias. A forked child
//! starts with a copy of its parent's mappings (the kernel reports none for it) and an
//! exec starts from nothing.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::format::MappingId;
use crate::unwind::{CodeModule, ModuleCfi, ModuleLookup};

/// One executable mapping of a process.
#[derive(Clone)]
pub struct Mapped {
    pub end: u64,
    pub id: MappingId,
    /// CFI and bias of the module, when its file could be read and parsed.
    pub module: Option<(Arc<ModuleCfi>, u64)>,
}

/// The executable mappings of one process, by start address.
#[derive(Clone, Default)]
pub struct Space {
    maps: BTreeMap<u64, Mapped>,
}

impl Space {
    /// Adds a mapping, replacing whatever overlapped it (the kernel did the same).
    pub fn insert(&mut self, start: u64, m: Mapped) {
        let end = m.end;
        let overlapping: Vec<u64> = self
            .maps
            .range(..end)
            .rev()
            .take_while(|(_, old)| old.end > start)
            .map(|(&s, _)| s)
            .collect();
        for s in overlapping {
            self.maps.remove(&s);
        }
        self.maps.insert(start, m);
    }

    /// The mapping containing `addr`.
    pub fn find(&self, addr: u64) -> Option<(u64, &Mapped)> {
        let (&start, m) = self.maps.range(..=addr).next_back()?;
        (addr < m.end).then_some((start, m))
    }
}

impl ModuleLookup for Space {
    fn lookup(&self, avma: u64) -> Option<CodeModule<'_>> {
        let (_, m) = self.find(avma)?;
        let (cfi, bias) = m.module.as_ref()?;
        Some(CodeModule { cfi, bias: *bias })
    }
}

/// Every traced process's [`Space`].
#[derive(Default)]
pub struct AddressSpaces {
    spaces: HashMap<u32, Space>,
}

impl AddressSpaces {
    pub fn space(&self, pid: u32) -> Option<&Space> {
        self.spaces.get(&pid)
    }

    pub fn space_mut(&mut self, pid: u32) -> &mut Space {
        self.spaces.entry(pid).or_default()
    }

    /// A new process starts with its parent's mappings.
    pub fn fork(&mut self, parent: u32, child: u32) {
        if let Some(space) = self.spaces.get(&parent).cloned() {
            self.spaces.insert(child, space);
        }
    }

    /// The process replaced its image: its old mappings are gone.
    pub fn exec(&mut self, pid: u32) {
        self.spaces.insert(pid, Space::default());
    }

    /// Calls `f` on every mapping of every process (a mapping a child inherited is
    /// its own copy).
    pub fn for_each_mapped_mut(&mut self, mut f: impl FnMut(&mut Mapped)) {
        for space in self.spaces.values_mut() {
            space.maps.values_mut().for_each(&mut f);
        }
    }

    /// Calls `f` on every mapping of every process with its process and start.
    pub fn for_each_start_mut(&mut self, mut f: impl FnMut(u32, u64, &mut Mapped)) {
        for (&pid, space) in &mut self.spaces {
            for (&start, m) in &mut space.maps {
                f(pid, start, m);
            }
        }
    }

    /// The processes that have a space.
    pub fn pids(&self) -> impl Iterator<Item = u32> + '_ {
        self.spaces.keys().copied()
    }

    /// The process is gone: its space is dropped.
    pub fn remove(&mut self, pid: u32) {
        self.spaces.remove(&pid);
    }

    /// How many processes have a space.
    pub fn len(&self) -> usize {
        self.spaces.len()
    }

    pub fn lookup(&self, pid: u32, addr: u64) -> Option<MappingId> {
        Some(self.spaces.get(&pid)?.find(addr)?.1.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(end: u64, id: MappingId) -> Mapped {
        Mapped {
            end,
            id,
            module: None,
        }
    }

    #[test]
    fn lookup_replace_fork_exec() {
        let mut a = AddressSpaces::default();
        let s = a.space_mut(1);
        s.insert(0x1000, m(0x3000, 0));
        s.insert(0x5000, m(0x6000, 1));
        assert_eq!(a.lookup(1, 0x1000), Some(0));
        assert_eq!(a.lookup(1, 0x2fff), Some(0));
        assert_eq!(a.lookup(1, 0x3000), None);
        assert_eq!(a.lookup(1, 0x5800), Some(1));
        // A new mapping over part of the first replaces it.
        a.space_mut(1).insert(0x2000, m(0x2800, 2));
        assert_eq!(a.lookup(1, 0x1800), None);
        assert_eq!(a.lookup(1, 0x2400), Some(2));
        assert_eq!(a.lookup(1, 0x5800), Some(1));
        a.fork(1, 2);
        assert_eq!(a.lookup(2, 0x5800), Some(1));
        a.exec(2);
        assert_eq!(a.lookup(2, 0x5800), None);
        assert_eq!(a.lookup(1, 0x5800), Some(1));
        assert_eq!(a.lookup(3, 0x5800), None);
    }
}
