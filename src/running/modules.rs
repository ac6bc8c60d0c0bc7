//! The files mapped executable into the target, each loaded once while the target
//! surely still has it mapped: its bytes, ELF facts and unwind tables.
//! A file mapped by many processes (or many times) is one [`LoadedModule`].

use std::collections::HashMap;
use std::sync::Arc;

use crate::elf::ElfInfo;
use crate::process::locate;
use crate::unwind::ModuleCfi;

pub(crate) use crate::replay::bind::LoadedModule;

/// One cached file: its module (`None`: could not be read or parsed, or refused for
/// the budget), the bytes it holds, and when it was last asked for.
struct Entry {
    module: Option<Arc<LoadedModule>>,
    /// [`table_bytes`] of the module (0 without one).
    bytes: usize,
    /// The generation it was last asked for or used in ([`ModuleCache::prune`]).
    used: u64,
    /// The generation it was loaded in (not evicted in it: no module is read twice
    /// in one window).
    loaded: u64,
    /// Order of last use, for least-recently-used eviction.
    tick: u64,
    /// Refused in generation `used` for the budget: asked again in a later one.
    refused: bool,
}

/// Every module loaded so far, by file identity; `None` records a file that could
/// not be read or parsed, so it is not tried again. Each entry remembers the
/// generation it was last asked for in ([`ModuleCache::prune`]).
///
/// With a byte budget ([`ModuleCache::set_budget`]) the tables held, counted by
/// [`table_bytes`], stay within it: loading a module evicts the least recently used
/// others (not those loaded in the current generation), handed to the caller by
/// [`ModuleCache::take_evicted`] to unbind, so that their memory goes and they are
/// read again when a sample needs them; a module that does not fit even then is
/// refused for the rest of the generation.
pub(crate) struct ModuleCache {
    by_key: HashMap<String, Entry>,
    generation: u64,
    budget: usize,
    total: usize,
    tick: u64,
    evicted: Vec<Arc<LoadedModule>>,
    /// The last [`ModuleCache::get`] refused its module for the budget.
    refused_last: bool,
    /// Modules evicted and refused so far (for the summary and `PROFILE_DEBUG_TABLES`).
    pub(crate) evictions: u64,
    pub(crate) refusals: u64,
}

/// The memory a loaded module's tables hold, measured: the pages of its image that
/// were read (symbol tables, strings, CFI, headers; code and DWARF stay on disk) and
/// what its unwind tables own (decompressed sections, FDE indexes).
pub(crate) fn table_bytes(m: &LoadedModule) -> usize {
    let cfi = m.cfi.as_ref().map_or(0, |c| {
        // A CFI over another image (never, today) would hold that image too.
        let own = if Arc::ptr_eq(c.image(), &m.image) {
            0
        } else {
            c.image().resident_bytes()
        };
        own + c.heap_bytes()
    });
    m.image.resident_bytes() + cfi + std::mem::size_of::<LoadedModule>()
}

impl ModuleCache {
    pub(crate) fn new() -> ModuleCache {
        ModuleCache {
            by_key: HashMap::new(),
            generation: 0,
            budget: usize::MAX,
            total: 0,
            tick: 0,
            evicted: Vec::new(),
            refused_last: false,
            evictions: 0,
            refusals: 0,
        }
    }

    /// Keeps the loaded tables within `bytes` (see the type's docs).
    pub(crate) fn set_budget(&mut self, bytes: usize) {
        self.budget = bytes;
    }

    /// Starts a new generation and drops the modules nobody else holds (no mapping
    /// of a live process, no window being named) that were not asked for in the
    /// last `keep` generations, and the files that failed as long ago: a host
    /// agent's memory then follows the programs running, not every program that
    /// ever ran. Returns how many entries were dropped.
    pub(crate) fn prune(&mut self, keep: u64) -> usize {
        let now = self.generation;
        let before = self.by_key.len();
        let mut freed = 0;
        self.by_key.retain(|_, e| {
            let keep = now.saturating_sub(e.used) < keep
                || e.module.as_ref().is_some_and(|m| Arc::strong_count(m) > 1);
            if !keep {
                freed += e.bytes;
            }
            keep
        });
        self.total -= freed;
        self.generation += 1;
        before - self.by_key.len()
    }

    /// How many files are cached (loaded or not).
    pub(crate) fn len(&self) -> usize {
        self.by_key.len()
    }

    /// The bytes the loaded modules' tables hold ([`table_bytes`]).
    pub(crate) fn table_bytes(&self) -> usize {
        self.total
    }

    /// The bytes of the cached images, read or not (for `PROFILE_DEBUG_TABLES`).
    pub(crate) fn image_bytes(&self) -> usize {
        self.by_key
            .values()
            .filter_map(|e| e.module.as_ref())
            .map(|m| (*m.image).as_ref().len())
            .sum()
    }

    /// The modules evicted since the last call: the caller unbinds them wherever it
    /// holds them, so that their memory goes.
    pub(crate) fn take_evicted(&mut self) -> Vec<Arc<LoadedModule>> {
        std::mem::take(&mut self.evicted)
    }

    /// Whether the last [`ModuleCache::get`] refused its module for the budget (it
    /// may be asked for again in the next generation).
    pub(crate) fn refused_last(&self) -> bool {
        self.refused_last
    }

    /// Marks the modules a window's samples fell in as used now.
    pub(crate) fn touch<'a>(&mut self, used: impl Iterator<Item = &'a Arc<LoadedModule>>) {
        let used: Vec<&Arc<LoadedModule>> = used.collect();
        if used.is_empty() {
            return;
        }
        for e in self.by_key.values_mut() {
            if let Some(m) = &e.module
                && used.iter().any(|u| Arc::ptr_eq(u, m))
            {
                self.tick += 1;
                e.tick = self.tick;
                e.used = self.generation;
            }
        }
    }

    /// The module mapped at `start..end` of `pid` from `path`, loading it on first use.
    pub(crate) fn get(
        &mut self,
        pid: u32,
        start: u64,
        end: u64,
        path: &str,
        build_id: Option<&[u8]>,
    ) -> Option<Arc<LoadedModule>> {
        self.refused_last = false;
        if path.is_empty()
            || (path.starts_with('[') && path != "[vdso]")
            || path.starts_with("//anon")
        {
            return None;
        }
        let (key, image) = if path == "[vdso]" {
            // Every process has one, the same kernel's: known by its bytes, so a
            // host where processes come and go keeps one copy, not one per process.
            let Ok(image) = locate::read_vdso(pid, start, end) else {
                return None;
            };
            let bytes: &[u8] = (*image).as_ref();
            let key = format!("[vdso] {:08x} {}", crc32fast::hash(bytes), bytes.len());
            (key, Some(image))
        } else {
            (module_key(pid, path, start, end, build_id), None)
        };
        self.tick += 1;
        if let Some(e) = self.by_key.get_mut(&key) {
            if e.refused && e.used == self.generation {
                self.refused_last = true;
                return None;
            }
            if !e.refused {
                e.used = self.generation;
                e.tick = self.tick;
                return e.module.clone();
            }
        }
        // No file whose tables could not fit is read: the most it may take is the
        // budget less what cannot be evicted for it.
        let room = self.room(&key);
        let image = image.or_else(|| {
            locate::open_mapped_file_within(pid, path, (start, end), build_id, room)
                .ok()
                .map(|l| l.image)
        });
        let loaded = image.and_then(|image| {
            let info = ElfInfo::parse((*image).as_ref()).ok()?;
            // Unwind tables in every mode: frame-pointer mode reads the sampled
            // function's (`StackBuilder::unwind`).
            let cfi = Some(Arc::new(ModuleCfi::new(Arc::clone(&image))));
            Some(Arc::new(LoadedModule { image, info, cfi }))
        });
        let bytes = loaded.as_ref().map_or(0, |m| table_bytes(m));
        // A file not read for want of room is asked for again in a later window
        // (a file that cannot be read at all is then tried once a window).
        let fits = (loaded.is_some() || room >= self.budget) && self.make_room(bytes, &key);
        let (module, bytes, refused) = if fits {
            (loaded, bytes, false)
        } else {
            self.refusals += 1;
            self.refused_last = true;
            (None, 0, true)
        };
        self.total += bytes;
        let entry = Entry {
            module: module.clone(),
            bytes,
            used: self.generation,
            loaded: self.generation,
            tick: self.tick,
            refused,
        };
        if let Some(old) = self.by_key.insert(key, entry) {
            self.total -= old.bytes;
        }
        module
    }

    /// The bytes a module loaded now for `key` may take: the budget less what
    /// [`ModuleCache::make_room`] cannot evict.
    fn room(&self, key: &str) -> usize {
        if self.budget == usize::MAX {
            return usize::MAX;
        }
        let now = self.generation;
        let kept: usize = self
            .by_key
            .iter()
            .filter(|(k, e)| e.loaded == now || k.as_str() == key)
            .map(|(_, e)| e.bytes)
            .sum();
        self.budget.saturating_sub(kept)
    }

    /// Evicts the least recently used modules (not `key`, not those loaded in this
    /// generation) until `bytes` more fit the budget; false if they cannot.
    fn make_room(&mut self, bytes: usize, key: &str) -> bool {
        if self.total.saturating_add(bytes) <= self.budget {
            return true;
        }
        let now = self.generation;
        let mut candidates: Vec<(u64, usize, String)> = self
            .by_key
            .iter()
            .filter(|(k, e)| e.module.is_some() && e.loaded != now && k.as_str() != key)
            .map(|(k, e)| (e.tick, e.bytes, k.clone()))
            .collect();
        // Not worth evicting anything if all of them would not make room.
        let evictable: usize = candidates.iter().map(|c| c.1).sum();
        if self.total.saturating_sub(evictable).saturating_add(bytes) > self.budget {
            return false;
        }
        candidates.sort_unstable();
        for (_, _, k) in candidates {
            if self.total.saturating_add(bytes) <= self.budget {
                break;
            }
            if let Some(e) = self.by_key.remove(&k) {
                self.total -= e.bytes;
                self.evictions += 1;
                self.evicted.extend(e.module);
            }
        }
        true
    }
}

/// A mapped file's identity: its device and inode as the target sees it (so the same
/// path in two mount namespaces stays two files), else its build-id, else its path.
fn module_key(pid: u32, path: &str, start: u64, end: u64, build_id: Option<&[u8]>) -> String {
    use std::os::unix::fs::MetadataExt;
    let stat = std::fs::metadata(format!("/proc/{pid}/map_files/{start:x}-{end:x}"))
        .or_else(|_| std::fs::metadata(format!("/proc/{pid}/root{path}")));
    match (stat, build_id) {
        (Ok(m), _) => format!("{}:{}", m.dev(), m.ino()),
        (Err(_), Some(id)) => format!("build-id {}", crate::elf::build_id_hex(id)),
        (Err(_), None) => path.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prune_drops_entries_unused_for_the_generations_kept() {
        let mut c = ModuleCache::new();
        let me = std::process::id();
        // Files that cannot be read: cached as failures, by path.
        assert!(
            c.get(me, 0x1000, 0x2000, "/nonexistent/a.so", None)
                .is_none()
        );
        assert!(
            c.get(me, 0x3000, 0x4000, "/nonexistent/b.so", None)
                .is_none()
        );
        assert_eq!(c.len(), 2);
        assert_eq!(c.prune(2), 0);
        // b is asked for again in generation 1; a is not.
        assert!(
            c.get(me, 0x3000, 0x4000, "/nonexistent/b.so", None)
                .is_none()
        );
        assert_eq!(c.prune(2), 0, "a was asked for one generation ago");
        assert_eq!(c.prune(2), 1, "a, unused for two generations");
        assert_eq!(c.len(), 1);
        assert_eq!(c.prune(2), 1, "b, two generations after its last use");
        assert_eq!(c.len(), 0);
        // The vdso is one module for every process mapping the same bytes: the
        // test's own, read twice at its own address.
        let maps = crate::process::read_maps(me).unwrap();
        let Some(vdso) = maps.iter().find(|m| m.path == "[vdso]") else {
            return;
        };
        let (s, e) = (vdso.start, vdso.end);
        let one = c.get(me, s, e, "[vdso]", None);
        let two = c.get(me, s, e, "[vdso]", None);
        if let (Some(one), Some(two)) = (one, two) {
            assert!(Arc::ptr_eq(&one, &two));
            assert_eq!(c.len(), 1);
            // Held by the caller: kept however old.
            for _ in 0..3 {
                c.prune(1);
            }
            assert_eq!(c.len(), 1);
            drop((one, two));
            c.prune(1);
            assert_eq!(c.len(), 0);
        }
    }

    /// Loads `path` (a file of this machine) through the cache, as process `me` maps it.
    fn load(c: &mut ModuleCache, path: &str) -> Option<Arc<LoadedModule>> {
        c.get(std::process::id(), 0x1000, 0x2000, path, None)
    }

    /// The table bytes of each of `paths`, loaded without a budget.
    fn sizes(paths: &[&str]) -> Vec<usize> {
        paths
            .iter()
            .map(|p| {
                let mut c = ModuleCache::new();
                load(&mut c, p).expect("a system binary loads");
                c.table_bytes()
            })
            .collect()
    }

    const FILES: [&str; 3] = ["/bin/ls", "/bin/cat", "/bin/true"];

    #[test]
    fn table_bytes_count_the_pages_read_not_the_file() {
        let exe = std::env::current_exe().unwrap();
        let exe = exe.to_str().unwrap();
        let mut c = ModuleCache::new();
        let m = load(&mut c, exe).expect("the test binary loads");
        let len = (*m.image).as_ref().len();
        let bytes = c.table_bytes();
        assert_eq!(bytes, table_bytes(&m));
        // Code and DWARF stay on disk: the test binary is mostly both.
        assert!(bytes < len / 2, "{bytes} of {len}");
        // Its symbol table and CFI at least are counted.
        let info = object::File::parse((*m.image).as_ref()).unwrap();
        use object::{Object, ObjectSection};
        let needed: u64 = [".symtab", ".strtab", ".eh_frame"]
            .iter()
            .filter_map(|n| info.section_by_name(n))
            .map(|s| s.size())
            .sum();
        assert!(bytes as u64 >= needed, "{bytes} < {needed}");
        // Dropped whole with the cache's last reference.
        drop(m);
        assert_eq!(c.prune(0), 1);
        assert_eq!(c.table_bytes(), 0);
    }

    #[test]
    fn pages_touched_counts_each_page_once() {
        use crate::elf::pages_touched;
        assert_eq!(pages_touched([(0, 1), (10, 20)].into_iter(), 1 << 20), 4096);
        assert_eq!(pages_touched([(4095, 2)].into_iter(), 1 << 20), 8192);
        assert_eq!(
            pages_touched([(0, 8192), (4096, 8192), (1 << 19, 0)].into_iter(), 1 << 20),
            12288
        );
        // Clipped to the buffer.
        assert_eq!(pages_touched([(0, 1 << 30)].into_iter(), 10_000), 12288);
    }

    #[test]
    fn least_recently_used_is_evicted_and_loaded_again_when_needed() {
        let s = sizes(&FILES);
        let (ls, cat, tru) = (s[0], s[1], s[2]);
        let mut c = ModuleCache::new();
        // Room for ls and cat, not for true as well.
        c.set_budget(ls + cat + tru / 2);
        let a = load(&mut c, FILES[0]).unwrap();
        let b = load(&mut c, FILES[1]).unwrap();
        assert!(c.take_evicted().is_empty());
        c.prune(100);
        // ls was used in the new window, cat not: cat goes for true.
        c.touch([&a].into_iter());
        assert!(load(&mut c, FILES[2]).is_some());
        let evicted = c.take_evicted();
        assert_eq!(evicted.len(), 1);
        assert!(Arc::ptr_eq(&evicted[0], &b));
        assert_eq!(c.table_bytes(), ls + tru);
        assert!(c.table_bytes() <= ls + cat + tru / 2);
        assert_eq!(c.evictions, 1);
        drop((evicted, b));
        // cat again, in a later window: read again, evicting the least recent (ls).
        c.prune(100);
        let b2 = load(&mut c, FILES[1]).expect("read again");
        assert_eq!(c.take_evicted().len(), 1);
        assert!(!Arc::ptr_eq(&a, &b2), "a module of its own");
        assert_eq!(c.table_bytes(), cat + tru);
    }

    #[test]
    fn a_module_that_does_not_fit_is_refused_for_the_window() {
        let s = sizes(&FILES);
        let mut c = ModuleCache::new();
        c.set_budget(s[0] + s[1] / 2);
        assert!(load(&mut c, FILES[0]).is_some());
        // ls was read in this window: not evicted in it, so cat is refused...
        assert!(load(&mut c, FILES[1]).is_none());
        assert!(c.refused_last());
        assert_eq!(c.refusals, 1);
        // ... and not read again in the same window.
        assert!(load(&mut c, FILES[1]).is_none());
        assert_eq!(c.refusals, 1);
        assert_eq!(c.table_bytes(), s[0]);
        // The next window: cat is read, ls evicted.
        c.prune(100);
        assert!(load(&mut c, FILES[1]).is_some());
        assert!(!c.refused_last());
        assert_eq!(c.take_evicted().len(), 1);
        assert_eq!(c.table_bytes(), s[1]);
        // A module larger than the whole budget is never read (its headers only).
        let mut small = ModuleCache::new();
        small.set_budget(s[0] / 2);
        assert!(load(&mut small, FILES[0]).is_none());
        small.prune(100);
        assert!(load(&mut small, FILES[0]).is_none());
        assert_eq!(small.table_bytes(), 0);
        assert_eq!(small.len(), 1, "known as a file not to read");
    }
}
