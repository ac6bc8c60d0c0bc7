//! The files mapped executable into the target, each loaded once while the target
//! surely still has it mapped: its bytes, ELF facts and unwind tables.
//! A file mapped by many processes (or many times) is one [`LoadedModule`].

use std::collections::HashMap;
use std::sync::Arc;

use crate::elf::ElfInfo;
use crate::symbolize::locate;
use crate::unwind::ModuleCfi;

pub(crate) use crate::replay::bind::LoadedModule;

/// Every module loaded so far, by file identity; `None` records a file that could
/// not be read or parsed, so it is not tried again. Each entry remembers the
/// generation it was last asked for in ([`ModuleCache::prune`]).
pub(crate) struct ModuleCache {
    by_key: HashMap<String, (Option<Arc<LoadedModule>>, u64)>,
    generation: u64,
}

impl ModuleCache {
    pub(crate) fn new() -> ModuleCache {
        ModuleCache {
            by_key: HashMap::new(),
            generation: 0,
        }
    }

    /// Starts a new generation and drops the modules nobody else holds (no mapping
    /// of a live process, no window being named) that were not asked for in the
    /// last `keep` generations, and the files that failed as long ago: a host
    /// agent's memory then follows the programs running, not every program that
    /// ever ran. Returns how many entries were dropped.
    pub(crate) fn prune(&mut self, keep: u64) -> usize {
        let now = self.generation;
        let before = self.by_key.len();
        self.by_key.retain(|_, (m, used)| {
            now.saturating_sub(*used) < keep || m.as_ref().is_some_and(|m| Arc::strong_count(m) > 1)
        });
        self.generation += 1;
        before - self.by_key.len()
    }

    /// How many files are cached (loaded or not).
    pub(crate) fn len(&self) -> usize {
        self.by_key.len()
    }

    /// The bytes of the cached images, read or not (for `PROFILE_DEBUG_TABLES`).
    pub(crate) fn image_bytes(&self) -> usize {
        self.by_key
            .values()
            .filter_map(|(m, _)| m.as_ref())
            .map(|m| (*m.image).as_ref().len())
            .sum()
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
        if let Some((m, used)) = self.by_key.get_mut(&key) {
            *used = self.generation;
            return m.clone();
        }
        let image = image.or_else(|| {
            locate::open_mapped_file(pid, path, (start, end), build_id)
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
        self.by_key.insert(key, (loaded.clone(), self.generation));
        loaded
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
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let Some(vdso) = maps.lines().find(|l| l.ends_with("[vdso]")) else {
            return;
        };
        let range = vdso.split_whitespace().next().unwrap();
        let (s, e) = range.split_once('-').unwrap();
        let (s, e) = (
            u64::from_str_radix(s, 16).unwrap(),
            u64::from_str_radix(e, 16).unwrap(),
        );
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
}
