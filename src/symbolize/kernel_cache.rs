//! The running kernel's symbols kept between recordings. The kernel formats all of
//! `/proc/kallsyms` (some 120,000 lines) at every read: 30 to 60 ms of system time,
//! a third of a short recording's whole cost (docs/measurements/recorder-cost.md).
//! What it lists changes only when the machine reboots or a module comes or goes,
//! apart from BPF programs and trampolines: so a copy is kept under the user's cache
//! directory (`$XDG_CACHE_HOME/profile`, else `~/.cache/profile`), one entry per
//! kernel release, boot and module list, its file `kallsyms` of mode 0600 (it holds
//! the kernel's real addresses). The directory is walked as debuginfod's cache is
//! ([`crate::cache_dir`]): a link, or a component or entry of another user,
//! and the copy is neither read nor written.
//!
//! A table read from the copy names only what it covers: the core kernel's text and
//! the modules loaded now (from `/proc/modules`). An address outside them (a BPF
//! program loaded since, a trampoline) has [`Symbolizer`](super::Symbolizer) read
//! `/proc/kallsyms` again before naming.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::kernel::{KernelSymbols, KernelSymbolsError};
use crate::cache_dir::CacheDir;
pub use crate::cache_dir::default_dir;

/// The file name of a cached copy in its entry.
const LEAF: &str = "kallsyms";

/// A cached copy larger than this is not read (kallsyms is some 5 MiB).
const MAX_COPY: u64 = 64 << 20;

/// The running kernel's symbols: from the copy in `dir` when it is this kernel's,
/// boot's and module list's, else read from `/proc/kallsyms` and kept there.
pub fn load(dir: Option<&Path>) -> Result<KernelSymbols, KernelSymbolsError> {
    let proc = Path::new("/proc/kallsyms");
    let Some((key, modules)) = identity() else {
        return KernelSymbols::load(proc);
    };
    let cache = dir.and_then(|d| CacheDir::open_for(d, LEAF, 0o600).ok());
    if let Some(c) = &cache
        && let Ok(Some(file)) = c.cached(&key)
        && let Some(text) = read_bounded(file)
        && let Ok(k) = KernelSymbols::parse_bytes_for(&text, &c.path_of(&key).display().to_string())
    {
        return Ok(k.covering(&modules));
    }
    let text = std::fs::read(proc).map_err(|source| KernelSymbolsError::Read {
        path: proc.display().to_string(),
        source,
    })?;
    let k = KernelSymbols::parse_bytes_for(&text, "/proc/kallsyms")?;
    if let Some(c) = &cache {
        // Best effort: a copy not kept costs the next recording the read.
        let _ = c.store(&key, |f| std::io::Write::write_all(f, &text));
    }
    Ok(k)
}

/// The kernel's identity (release, boot, module list) as a file name, and the
/// modules' ranges; None when it cannot be read whole.
fn identity() -> Option<(String, Vec<(u64, u64)>)> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    // A kernel built without modules has no /proc/modules.
    let modules = match std::fs::read_to_string("/proc/modules") {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        r => r.ok()?,
    };
    let ranges = module_ranges(&modules)?;
    let key = format!(
        "{:016x}",
        fnv1a(&[release.as_bytes(), boot.as_bytes(), modules.as_bytes()])
    );
    Some((key, ranges))
}

/// Each module's (start, end) from `/proc/modules` (`NAME SIZE REFS DEPS STATE
/// ADDRESS ...`); None when one is hidden (address 0) or unreadable.
pub(super) fn module_ranges(text: &str) -> Option<Vec<(u64, u64)>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let size: u64 = f.get(1)?.parse().ok()?;
            let base = u64::from_str_radix(f.get(5)?.trim_start_matches("0x"), 16).ok()?;
            (base != 0).then_some((base, base.saturating_add(size)))
        })
        .collect()
}

/// A cached copy's bytes, if it is not too large.
fn read_bounded(file: std::fs::File) -> Option<Vec<u8>> {
    let meta = file.metadata().ok()?;
    if meta.size() > MAX_COPY || meta.mode() & 0o077 != 0 {
        return None;
    }
    let mut text = Vec::with_capacity(meta.size() as usize);
    file.take(MAX_COPY).read_to_end(&mut text).ok()?;
    Some(text)
}

/// FNV-1a over several byte strings (each followed by a separator).
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in p.iter().chain(&[0u8]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_ranges_come_from_proc_modules_lines() {
        let text = "nf_tables 364544 0 - Live 0xffffffffc0a00000\n\
                    xfs 2523136 1 - Live 0xffffffffc0b00000 (E)\n";
        assert_eq!(
            module_ranges(text),
            Some(vec![
                (0xffffffffc0a00000, 0xffffffffc0a00000 + 364544),
                (0xffffffffc0b00000, 0xffffffffc0b00000 + 2523136)
            ])
        );
        // Hidden addresses: not known.
        assert_eq!(
            module_ranges("xfs 2523136 1 - Live 0x0000000000000000\n"),
            None
        );
        assert_eq!(module_ranges(""), Some(vec![]));
    }

    #[test]
    fn the_second_load_comes_from_the_copy_and_names_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("c");
        let fresh = load(Some(&cache)).unwrap();
        assert!(fresh.is_fresh());
        let (key, _) = identity().unwrap();
        let copy = cache.join(&key).join(LEAF);
        let meta = std::fs::metadata(&copy).unwrap();
        assert_eq!(
            meta.mode() & 0o777,
            0o600,
            "the copy holds kernel addresses"
        );
        let cached = load(Some(&cache)).unwrap();
        assert!(!cached.is_fresh());
        for name in ["do_sys_openat2", "__x64_sys_read", "ksys_read", "schedule"] {
            if let Some(a) = fresh.address_of(name) {
                assert!(cached.covers(a + 4), "{name}");
                assert_eq!(cached.lookup(a + 4), fresh.lookup(a + 4), "{name}");
            }
        }
        // Far past the core kernel and every module: not covered by the copy.
        assert!(!cached.covers(u64::MAX - 16));
        // A copy someone else can read is not used.
        std::fs::set_permissions(&copy, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .unwrap();
        assert!(load(Some(&cache)).unwrap().is_fresh());
    }
}
