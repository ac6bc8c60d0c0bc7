//! Opening the files a target has mapped, as the target sees them. A path from
//! `/proc/PID/maps` is a path in the target's mount namespace: containers, chroots and
//! private mounts make it a different file (or no file) in ours, and a binary rebuilt
//! or deleted while it runs is gone from every namespace. So: `/proc/PID/root/PATH`
//! first, then `/proc/PID/map_files/START-END` (the mapped inode itself, even when
//! deleted; needs root or CAP_SYS_ADMIN), then the path in our own namespace, each
//! checked against the build-id the recorder saw when one is known. The vdso has no file
//! at all and is copied out of the target's memory.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use object::Object;

use crate::elf::{
    Image, build_id_hex, image_from_vec, read_module_leaving_names, read_module_within,
};

/// Which way the file was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpenedVia {
    /// `/proc/PID/root/PATH`.
    TargetRoot,
    /// `/proc/PID/map_files/START-END`.
    MapFiles,
    /// PATH in our own mount namespace (the target may be gone).
    Direct,
}

/// A mapped file, opened.
pub(crate) struct Located {
    /// The file's bytes.
    pub image: Image,
    /// The path it was opened through (the tests pin down which way each case takes).
    #[cfg_attr(not(test), allow(dead_code))]
    pub via: OpenedVia,
    /// The file's build-id, if it has one.
    #[cfg_attr(not(test), allow(dead_code))]
    pub build_id: Option<Vec<u8>>,
}

/// Why a mapped file or the vdso could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LocateError {
    #[error("{path} of process {pid} could not be opened from {tried:?}")]
    /// No path to the file opened.
    NotFound {
        /// The target process.
        pid: u32,
        /// The path the target mapped.
        path: String,
        /// The paths tried.
        tried: Vec<PathBuf>,
    },
    #[error(
        "{path} of process {pid} was replaced: build-id {found} found, {expected} expected \
         (looked in {tried:?})"
    )]
    /// The file at the path is not the one mapped (another build-id).
    BuildIdMismatch {
        /// The target process.
        pid: u32,
        /// The path the target mapped.
        path: String,
        /// The build-id of the mapped file.
        expected: String,
        /// The build-id of the file found.
        found: String,
        /// The paths tried.
        tried: Vec<PathBuf>,
    },
    #[error("cannot read the vdso of process {pid} at {start:#x}-{end:#x}: {source}")]
    /// The vdso could not be copied out of the target's memory.
    Vdso {
        /// The target process.
        pid: u32,
        /// First address of the vdso.
        start: u64,
        /// Address just past it.
        end: u64,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

const DELETED: &str = " (deleted)";

/// Opens a file mapped by `pid` as the target sees it. See the module docs for the
/// order; a candidate whose build-id differs from `expected_build_id` is passed over.
#[cfg(test)]
pub(crate) fn open_mapped_file(
    pid: u32,
    path: &str,
    map_range: (u64, u64),
    expected_build_id: Option<&[u8]>,
) -> Result<Located, LocateError> {
    open_mapped_file_within(pid, path, map_range, expected_build_id, usize::MAX)
}

/// `open_mapped_file`, reading no file whose tables take more than `max` bytes
/// (`elf::read_module_within`): such a file is not found.
pub(crate) fn open_mapped_file_within(
    pid: u32,
    path: &str,
    map_range: (u64, u64),
    expected_build_id: Option<&[u8]>,
    max: usize,
) -> Result<Located, LocateError> {
    let deleted = path.ends_with(DELETED);
    let clean = path.strip_suffix(DELETED).unwrap_or(path);
    let rel = clean.strip_prefix('/').unwrap_or(clean);
    // Node's symbol names are read only to name the few hundred addresses of a
    // recording's end: they stay on disk (`elf::read_module_leaving_names`).
    let names_left = is_node(clean);
    let mut candidates = Vec::new();
    if !deleted {
        candidates.push((
            PathBuf::from(format!("/proc/{pid}/root")).join(rel),
            OpenedVia::TargetRoot,
        ));
    }
    candidates.push((
        PathBuf::from(format!(
            "/proc/{pid}/map_files/{:x}-{:x}",
            map_range.0, map_range.1
        )),
        OpenedVia::MapFiles,
    ));
    if !deleted {
        candidates.push((PathBuf::from(clean), OpenedVia::Direct));
    }

    let mut mismatch = None;
    let tried: Vec<PathBuf> = candidates.iter().map(|(p, _)| p.clone()).collect();
    for (candidate, via) in candidates {
        let Some(image) = open_regular(&candidate, max, names_left) else {
            continue;
        };
        let build_id = build_id_of((*image).as_ref());
        match (expected_build_id, build_id.as_deref()) {
            (Some(want), Some(found)) if want != found => {
                mismatch.get_or_insert_with(|| build_id_hex(found));
            }
            (Some(_), None) => {
                mismatch.get_or_insert_with(|| "none".to_owned());
            }
            _ => {
                return Ok(Located {
                    image,
                    via,
                    build_id,
                });
            }
        }
    }
    match (mismatch, expected_build_id) {
        (Some(found), Some(want)) => Err(LocateError::BuildIdMismatch {
            pid,
            path: path.to_owned(),
            expected: build_id_hex(want),
            found,
            tried,
        }),
        _ => Err(LocateError::NotFound {
            pid,
            path: path.to_owned(),
            tried,
        }),
    }
}

/// Reads `path` when it is a regular, non-empty file whose tables fit `max` bytes;
/// `names_left`: its symbol names left on disk.
fn open_regular(path: &Path, max: usize, names_left: bool) -> Option<Image> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() == 0 {
        return None;
    }
    if names_left {
        return read_module_leaving_names(path, max).ok();
    }
    read_module_within(path, max).ok()
}

fn build_id_of(data: &[u8]) -> Option<Vec<u8>> {
    let file = object::File::parse(data).ok()?;
    file.build_id().ok().flatten().map(<[u8]>::to_vec)
}

/// A copy of the target's vdso, read from `/proc/PID/mem` at its `[vdso]` mapping.
pub(crate) fn read_vdso(pid: u32, start: u64, end: u64) -> Result<Image, LocateError> {
    let err = |source| LocateError::Vdso {
        pid,
        start,
        end,
        source,
    };
    let len = end
        .checked_sub(start)
        .filter(|&l| l > 0 && l <= 1 << 24)
        .ok_or_else(|| err(std::io::Error::other("not a plausible vdso range")))?;
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).map_err(err)?;
    let mut buf = vec![0u8; len as usize];
    mem.read_exact_at(&mut buf, start).map_err(err)?;
    Ok(image_from_vec(buf))
}

/// Whether the file at `path` may be a Node binary by its name (`node`, `node20`,
/// `libnode.so.115`): only those are searched for V8's description, and have their
/// symbol names left on disk.
pub(crate) fn is_node(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or_default();
    let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    file.strip_prefix("node").is_some_and(digits) || file.starts_with("libnode.so")
}

#[cfg(test)]
#[path = "locate_tests.rs"]
mod tests;
