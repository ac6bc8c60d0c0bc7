//! Finding the binaries a perf.data file names, and whether its kernel addresses
//! are this machine's: see the module docs of [`super`].

use std::path::{Path, PathBuf};

use super::parse::PerfFile;
use crate::elf::{ElfInfo, Image, build_id_hex, read_module};
use crate::symbolize::frames::ForeignKernel;
use crate::symbolize::late::BinaryError;

/// perf's build-id cache directory: `$PERF_BUILDID_DIR`, else `~/.debug`.
fn buildid_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("PERF_BUILDID_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    Some(PathBuf::from(std::env::var_os("HOME")?).join(".debug"))
}

/// Where perf's build-id cache keeps a file: `.build-id/xx/yyyy/` holds `elf` (or
/// `vdso` for the vdso), as `perf buildid-cache` and `perf record` lay it out.
pub(crate) fn cache_candidates(dir: &Path, build_id: &[u8]) -> Vec<PathBuf> {
    let hex = build_id_hex(build_id);
    if hex.len() < 3 {
        return Vec::new();
    }
    let base = dir.join(".build-id").join(&hex[..2]).join(&hex[2..]);
    vec![base.join("elf"), base.join("vdso")]
}

/// Opens the binary recorded at `path` with `build_id`: from perf's build-id cache,
/// else the file at `path` if it is the same build (or, without a build-id, older
/// than the perf.data file).
pub(crate) fn open(
    path: &str,
    build_id: Option<&[u8]>,
    written_unix_ns: u64,
) -> Result<(Image, ElfInfo), BinaryError> {
    let parse = |image: Image| -> Result<(Image, ElfInfo), BinaryError> {
        let info = ElfInfo::parse((*image).as_ref())?;
        Ok((image, info))
    };
    if let Some(id) = build_id
        && let Some(dir) = buildid_dir()
    {
        for candidate in cache_candidates(&dir, id) {
            if let Ok(image) = read_module(&candidate)
                && let Ok((image, info)) = parse(image)
                && info.build_id.as_deref() == Some(id)
            {
                return Ok((image, info));
            }
        }
    }
    if !path.starts_with('/') {
        return Err(BinaryError::NotCached);
    }
    let image = crate::symbolize::late::open_same_file(path, build_id, written_unix_ns)?;
    parse(image)
}

/// Ok when the kernel addresses in the recording are the running kernel's: the same
/// kernel build (perf's build-id table against /sys/kernel/notes) and the same
/// `_text` address (KASLR moves it at each boot). Else why kernel frames stay
/// unnamed.
pub(crate) fn same_kernel(file: &PerfFile, kernel_text: Option<u64>) -> Result<(), ForeignKernel> {
    let recorded_id = file
        .build_ids
        .iter()
        .find(|b| b.kernel && b.path.starts_with("[kernel.kallsyms]"))
        .map(|b| b.build_id.clone());
    let running_id = std::fs::read("/sys/kernel/notes")
        .ok()
        .and_then(|notes| gnu_build_id_note(&notes));
    if let (Some(a), Some(b)) = (&recorded_id, &running_id)
        && a != b
    {
        return Err(ForeignKernel::OtherBuild {
            recorded: a.clone(),
            running: b.clone(),
        });
    }
    let Some(text) = kernel_text else {
        return Err(ForeignKernel::NoText);
    };
    let running_text = std::fs::read_to_string("/proc/kallsyms")
        .ok()
        .and_then(|k| {
            k.lines().find_map(|l| {
                let mut f = l.split_whitespace();
                let addr = f.next()?;
                let _kind = f.next()?;
                (f.next()? == "_text").then(|| u64::from_str_radix(addr, 16).ok())?
            })
        });
    match running_text {
        Some(t) if t == text => Ok(()),
        Some(0) | None => Err(ForeignKernel::Hidden),
        Some(_) => Err(ForeignKernel::Moved),
    }
}

/// The GNU build-id in a sequence of ELF notes (the format of /sys/kernel/notes).
fn gnu_build_id_note(mut notes: &[u8]) -> Option<Vec<u8>> {
    let word = |b: &[u8], i: usize| -> Option<usize> {
        Some(u32::from_le_bytes(b.get(i..i + 4)?.try_into().ok()?) as usize)
    };
    let align = |n: usize| n.checked_add(3).map(|n| n & !3);
    while notes.len() >= 12 {
        let (namesz, descsz, kind) = (word(notes, 0)?, word(notes, 4)?, word(notes, 8)?);
        let name_end = 12usize.checked_add(align(namesz)?)?;
        let desc_end = name_end.checked_add(align(descsz)?)?;
        let name = notes.get(12..12 + namesz)?;
        let desc = notes.get(name_end..name_end + descsz)?;
        // NT_GNU_BUILD_ID
        if kind == 3 && name.starts_with(b"GNU") {
            return Some(desc.to_vec());
        }
        notes = notes.get(desc_end..)?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_id_note_is_found_after_other_notes() {
        let mut notes = Vec::new();
        // A Xen note first (name "Xen", type 5, 4-byte desc), then the build-id.
        for (name, kind, desc) in [
            (&b"Xen\0"[..], 5u32, &[1u8, 2, 3, 4][..]),
            (b"GNU\0", 3, &[0xab, 0xcd, 0xef, 0x01, 0x23][..]),
        ] {
            notes.extend((name.len() as u32).to_le_bytes());
            notes.extend((desc.len() as u32).to_le_bytes());
            notes.extend(kind.to_le_bytes());
            notes.extend(name);
            notes.resize(notes.len().next_multiple_of(4), 0);
            notes.extend(desc);
            notes.resize(notes.len().next_multiple_of(4), 0);
        }
        assert_eq!(
            gnu_build_id_note(&notes),
            Some(vec![0xab, 0xcd, 0xef, 0x01, 0x23])
        );
        assert_eq!(gnu_build_id_note(&notes[..20]), None);
    }

    #[test]
    fn cache_layout_is_perfs() {
        let c = cache_candidates(Path::new("/root/.debug"), &[0x12, 0x34, 0x56]);
        assert_eq!(
            c,
            vec![
                PathBuf::from("/root/.debug/.build-id/12/3456/elf"),
                PathBuf::from("/root/.debug/.build-id/12/3456/vdso")
            ]
        );
    }
}
