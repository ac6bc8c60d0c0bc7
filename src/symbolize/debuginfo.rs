//! Finding a module's separate debug file, the way gdb and binutils do: by build-id
//! (`.build-id/xx/yyyy.debug` under `/usr/lib/debug` in our root and in the target's
//! root, and under every `--debug-dir`), then by `.gnu_debuglink` (the module's
//! directory, its `.debug/` subdirectory, `/usr/lib/debug/<dir>/`, and the debug dirs).
//! A candidate is accepted only when it proves it belongs to the module: the same
//! build-id, or for debuglink candidates of modules without one, the CRC the link
//! states. It must also carry DWARF, since that is what it is looked for.

use std::path::{Path, PathBuf};

use object::{Object, ObjectSection};

use crate::elf::{ElfInfo, Image, build_id_hex, read_whole};

/// A debug file that matched its module.
pub(super) struct DebugFile {
    pub path: PathBuf,
    pub image: Image,
}

/// Everything the search needs to know about the module.
pub(super) struct Wanted<'a> {
    pub info: &'a ElfInfo,
    /// Path of the module as the target sees it.
    pub path: &'a str,
    /// The target's root (`/proc/PID/root`), if it differs from ours.
    pub root: Option<&'a Path>,
    pub debug_dirs: &'a [PathBuf],
}

/// The first matching debug file, or `None`.
pub(super) fn find_debug_file(wanted: &Wanted<'_>) -> Option<DebugFile> {
    if let Some(id) = wanted.info.build_id.as_deref().filter(|id| id.len() >= 2) {
        for path in build_id_candidates(wanted, id) {
            if let Some(image) = open_if(&path, |data| same_build_id(data, id)) {
                return Some(DebugFile { path, image });
            }
        }
    }
    let (link, crc) = wanted.info.debuglink.as_ref()?;
    if link.is_empty() || link.contains('/') {
        return None;
    }
    for path in debuglink_candidates(wanted, link) {
        let accept = |data: &[u8]| match wanted.info.build_id.as_deref() {
            Some(id) => same_build_id(data, id),
            None => crc32fast::hash(data) == *crc,
        };
        if let Some(image) = open_if(&path, accept) {
            return Some(DebugFile { path, image });
        }
    }
    None
}

/// `<base>/.build-id/xx/yyyy.debug` for every base directory, in search order.
fn build_id_candidates(wanted: &Wanted<'_>, id: &[u8]) -> Vec<PathBuf> {
    let hex = build_id_hex(id);
    let rel = format!(".build-id/{}/{}.debug", &hex[..2], &hex[2..]);
    let mut out = Vec::new();
    for dir in wanted.debug_dirs {
        out.push(dir.join(&rel));
        if let Some(base) = Path::new(wanted.path).file_name() {
            let mut name = base.to_os_string();
            name.push(".debug");
            out.push(dir.join(name));
        }
    }
    out.push(Path::new("/usr/lib/debug").join(&rel));
    if let Some(root) = wanted.root {
        out.push(root.join("usr/lib/debug").join(&rel));
    }
    out
}

/// The usual debuglink places, first in the target's root, then in ours.
fn debuglink_candidates(wanted: &Wanted<'_>, link: &str) -> Vec<PathBuf> {
    let module = Path::new(wanted.path);
    let dir = module.parent().unwrap_or(Path::new("/"));
    let rel_dir = dir.strip_prefix("/").unwrap_or(dir);
    let mut out: Vec<PathBuf> = wanted.debug_dirs.iter().map(|d| d.join(link)).collect();
    let mut roots: Vec<&Path> = Vec::new();
    if let Some(root) = wanted.root {
        roots.push(root);
    }
    roots.push(Path::new("/"));
    for root in roots {
        let base = root.join(rel_dir);
        out.push(base.join(link));
        out.push(base.join(".debug").join(link));
        out.push(root.join("usr/lib/debug").join(rel_dir).join(link));
    }
    // Never take the module itself for its own debug file.
    out.retain(|p| p != module);
    out
}

/// The debug file already open as `file` (found at `path`), if it is ELF with DWARF
/// and has `build_id`.
pub(super) fn open_matching_file(
    file: std::fs::File,
    path: &Path,
    build_id: &[u8],
) -> Option<DebugFile> {
    let image = crate::elf::read_open_file(file).ok()?;
    let data: &[u8] = (*image).as_ref();
    let has_dwarf = object::File::parse(data)
        .ok()?
        .section_by_name(".debug_info")
        .is_some_and(|s| s.size() > 0);
    (has_dwarf && same_build_id(data, build_id)).then(|| DebugFile {
        path: path.to_owned(),
        image,
    })
}

/// Maps `path` if it exists, is ELF with DWARF, and satisfies `accept`.
fn open_if(path: &Path, accept: impl Fn(&[u8]) -> bool) -> Option<Image> {
    if !path.is_file() {
        return None;
    }
    let image = read_whole(path).ok()?;
    let data: &[u8] = (*image).as_ref();
    let file = object::File::parse(data).ok()?;
    let has_dwarf = file
        .section_by_name(".debug_info")
        .is_some_and(|s| s.size() > 0);
    (has_dwarf && accept(data)).then_some(image)
}

fn same_build_id(data: &[u8], id: &[u8]) -> bool {
    object::File::parse(data)
        .ok()
        .and_then(|f| f.build_id().ok().flatten().map(|b| b == id))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_cover_the_usual_places() {
        let info = ElfInfo {
            build_id: Some(vec![0xab, 0xcd, 0xef]),
            segments: Vec::new(),
            debuglink: Some(("app.debug".into(), 0)),
        };
        let dirs = [PathBuf::from("/dbg")];
        let wanted = Wanted {
            info: &info,
            path: "/opt/app/bin/app",
            root: Some(Path::new("/proc/7/root")),
            debug_dirs: &dirs,
        };
        let by_id = build_id_candidates(&wanted, &[0xab, 0xcd, 0xef]);
        let by_id: Vec<_> = by_id.iter().map(|p| p.to_str().unwrap()).collect();
        assert_eq!(
            by_id,
            [
                "/dbg/.build-id/ab/cdef.debug",
                "/dbg/app.debug",
                "/usr/lib/debug/.build-id/ab/cdef.debug",
                "/proc/7/root/usr/lib/debug/.build-id/ab/cdef.debug",
            ]
        );
        let by_link = debuglink_candidates(&wanted, "app.debug");
        let by_link: Vec<_> = by_link.iter().map(|p| p.to_str().unwrap()).collect();
        assert_eq!(
            by_link,
            [
                "/dbg/app.debug",
                "/proc/7/root/opt/app/bin/app.debug",
                "/proc/7/root/opt/app/bin/.debug/app.debug",
                "/proc/7/root/usr/lib/debug/opt/app/bin/app.debug",
                "/opt/app/bin/app.debug",
                "/opt/app/bin/.debug/app.debug",
                "/usr/lib/debug/opt/app/bin/app.debug",
            ]
        );
    }

    #[test]
    fn finds_libc_debug_file_by_build_id() {
        let libc = "/lib/x86_64-linux-gnu/libc.so.6";
        let Ok(data) = std::fs::read(libc) else {
            return;
        };
        let info = ElfInfo::parse(&data).unwrap();
        let wanted = Wanted {
            info: &info,
            path: libc,
            root: None,
            debug_dirs: &[],
        };
        let found = find_debug_file(&wanted).expect("libc6-dbg is installed");
        assert!(found.path.starts_with("/usr/lib/debug/.build-id"));
    }
}
