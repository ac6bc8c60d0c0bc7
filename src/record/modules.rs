//! The files mapped executable into the target, each loaded once while the target
//! surely still has it mapped: its bytes, ELF facts and (in dwarf mode) unwind tables.
//! A file mapped by many processes (or many times) is one [`LoadedModule`].

use std::collections::HashMap;
use std::sync::Arc;

use crate::elf::ElfInfo;
use crate::symbolize::locate;
use crate::unwind::ModuleCfi;

/// One mapped file, loaded once: its bytes, ELF facts and unwind tables.
pub(crate) struct LoadedModule {
    pub image: crate::elf::Image,
    pub info: ElfInfo,
    /// Unwind tables, in dwarf mode.
    pub cfi: Option<Arc<ModuleCfi>>,
}

/// Every module loaded so far, by file identity; `None` records a file that could
/// not be read or parsed, so it is not tried again.
pub(crate) struct ModuleCache {
    /// Parse unwind tables (dwarf mode).
    with_cfi: bool,
    by_key: HashMap<String, Option<Arc<LoadedModule>>>,
}

impl ModuleCache {
    pub fn new(with_cfi: bool) -> ModuleCache {
        ModuleCache {
            with_cfi,
            by_key: HashMap::new(),
        }
    }

    /// The module mapped at `start..end` of `pid` from `path`, loading it on first use.
    pub fn get(
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
        let key = module_key(pid, path, start, end, build_id);
        if let Some(m) = self.by_key.get(&key) {
            return m.clone();
        }
        let image = if path == "[vdso]" {
            locate::read_vdso(pid, start, end).ok()
        } else {
            locate::open_mapped_file(pid, path, (start, end), build_id)
                .ok()
                .map(|l| l.image)
        };
        let loaded = image.and_then(|image| {
            let info = ElfInfo::parse((*image).as_ref()).ok()?;
            let cfi = self
                .with_cfi
                .then(|| Arc::new(ModuleCfi::new(Arc::clone(&image))));
            Some(Arc::new(LoadedModule { image, info, cfi }))
        });
        self.by_key.insert(key, loaded.clone());
        loaded
    }
}

/// A mapped file's identity: its device and inode as the target sees it (so the same
/// path in two mount namespaces stays two files), else its build-id, else its path.
fn module_key(pid: u32, path: &str, start: u64, end: u64, build_id: Option<&[u8]>) -> String {
    use std::os::unix::fs::MetadataExt;
    if path == "[vdso]" {
        return format!("[vdso] of {pid}");
    }
    let stat = std::fs::metadata(format!("/proc/{pid}/map_files/{start:x}-{end:x}"))
        .or_else(|_| std::fs::metadata(format!("/proc/{pid}/root{path}")));
    match (stat, build_id) {
        (Ok(m), _) => format!("{}:{}", m.dev(), m.ino()),
        (Err(_), Some(id)) => format!("build-id {}", crate::elf::build_id_hex(id)),
        (Err(_), None) => path.to_owned(),
    }
}
