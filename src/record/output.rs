//! The recording file, created safely. `profile` often runs as root in directories
//! other users can write to, and is often pointed at a file that already exists:
//!
//! - the recording is written to a fresh temporary file beside the final path (created
//!   exclusively, mode 0600 like perf's perf.data: it holds command lines, paths, host
//!   names and symbol names), and renamed over the final path only once attaching has
//!   succeeded. A failed start (no such pid, no permission) leaves an existing file
//!   whole, and rename(2) replaces a symlink planted at the final path instead of
//!   writing through it;
//! - from then on the final path holds the recording as it grows, so a recorder killed
//!   later still leaves everything flushed so far readable there;
//! - a path that is not a regular file where it ends (`/dev/null`, a pipe such as
//!   `/dev/stdout`) is written to directly, never renamed over: renaming a file over
//!   `/dev/null` as root replaced the device node with a regular file, for every
//!   program on the machine. That is done only when the special file (and any symlink
//!   on the way, such as `/dev/stdout`) belongs to root or to us: another user's FIFO
//!   would read the recording, another user's symlink could point anywhere (it is
//!   replaced, as above). A block device is refused. A symlink of root's or ours to a
//!   regular file (`/dev/stdout` redirected to a file) is followed, and the file it
//!   leads to is the final path.

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// A recording file not yet at its final path.
pub(super) struct PendingOutput {
    /// Deleted when dropped before [`PendingOutput::commit`].
    temp: Option<tempfile::TempPath>,
    path: PathBuf,
}

/// Creates the temporary file for a recording that will be at `path`.
pub(super) fn create(path: &Path) -> io::Result<(File, PendingOutput)> {
    let followed = followed(path);
    let path = followed.as_deref().unwrap_or(path);
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
        return Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            "it is a directory",
        ));
    }
    if let Some(file) = special(path)? {
        return Ok((
            file,
            PendingOutput {
                temp: None,
                path: path.to_owned(),
            },
        ));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "profile".into());
    // tempfile creates with O_EXCL and mode 0600.
    let temp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .tempfile_in(dir)?;
    let (file, temp) = temp.into_parts();
    Ok((
        file,
        PendingOutput {
            temp: Some(temp),
            path: path.to_owned(),
        },
    ))
}

/// Whether a file (or symlink) is root's or ours: no other user can have planted it.
fn trusted(m: &std::fs::Metadata) -> bool {
    m.uid() == 0 || m.uid() == crate::sys::euid()
}

/// Where `path` leads when it is a symlink of root's or ours (`/dev/stdout` to the
/// file standard output was redirected to): the recording goes there, and the link
/// stays. A symlink of another user's is not followed: it is replaced.
fn followed(path: &Path) -> Option<PathBuf> {
    let link = std::fs::symlink_metadata(path).ok()?;
    if !link.file_type().is_symlink() || !trusted(&link) {
        return None;
    }
    std::fs::canonicalize(path).ok()
}

/// The file to write directly when `path` ends at a special file (a character device
/// or a pipe) that root or we own, reached through no symlink of another user's; None
/// for a path to create or to a regular file (the temporary file and rename above).
fn special(path: &Path) -> io::Result<Option<File>> {
    let Ok(link) = std::fs::symlink_metadata(path) else {
        return Ok(None);
    };
    if link.file_type().is_symlink() && !trusted(&link) {
        return Ok(None);
    }
    let Ok(target) = std::fs::metadata(path) else {
        return Ok(None);
    };
    let kind = target.file_type();
    if kind.is_file() || kind.is_dir() {
        return Ok(None);
    }
    if kind.is_block_device() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "it is a block device",
        ));
    }
    if !trusted(&target) {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "it is a special file of another user's",
        ));
    }
    std::fs::OpenOptions::new().write(true).open(path).map(Some)
}

impl PendingOutput {
    /// Moves the recording to its final path (replacing what is there, a symlink
    /// itself rather than its target).
    pub(super) fn commit(&mut self) -> io::Result<()> {
        if let Some(temp) = self.temp.take() {
            temp.persist(&self.path).map_err(|e| e.error)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{PermissionsExt, symlink};

    use super::*;

    #[test]
    fn nothing_reaches_the_final_path_before_commit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keep.prof");
        std::fs::write(&path, b"precious").unwrap();
        let (_, pending) = create(&path).unwrap();
        drop(pending);
        assert_eq!(std::fs::read(&path).unwrap(), b"precious");
        // The temporary file is gone too.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    /// A symlink another user planted at the path is replaced, its target left alone.
    #[test]
    fn commit_replaces_a_symlink_not_its_target_and_is_private() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"root-owned").unwrap();
        let path = dir.path().join("out.prof");
        symlink(&victim, &path).unwrap();
        // As another user's (nobody): root's own symlinks are followed (below).
        if crate::sys::is_root() {
            std::os::unix::fs::lchown(&path, Some(65534), Some(65534)).unwrap();
        }
        let (mut file, mut pending) = create(&path).unwrap();
        file.write_all(b"recording").unwrap();
        pending.commit().unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"root-owned");
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.is_file());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read(&path).unwrap(), b"recording");
    }

    /// `/dev/null` is written to, not replaced: renaming over it as root made it a
    /// regular file for the whole machine.
    #[test]
    fn a_character_device_is_written_to_not_renamed_over() {
        use std::io::Write;
        let null = Path::new("/dev/null");
        let before = std::fs::symlink_metadata(null).unwrap();
        assert!(before.file_type().is_char_device());
        let (mut file, mut pending) = create(null).unwrap();
        file.write_all(b"recording").unwrap();
        pending.commit().unwrap();
        let after = std::fs::symlink_metadata(null).unwrap();
        assert!(after.file_type().is_char_device());
        assert_eq!(after.ino(), before.ino());
    }

    /// A FIFO of ours is written to (a pipe the user set up); one of another user's
    /// is refused (it would read the recording).
    #[test]
    fn a_fifo_is_written_to_when_ours() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pipe");
        let made = std::process::Command::new("mkfifo").arg(&path).status();
        assert!(made.unwrap().success());
        // A reader, so that opening for writing does not block.
        let reader = std::thread::spawn({
            let path = path.clone();
            move || std::fs::read(path).unwrap()
        });
        let (file, mut pending) = create(&path).unwrap();
        pending.commit().unwrap();
        drop(file);
        reader.join().unwrap();
        assert!(
            std::fs::symlink_metadata(&path)
                .unwrap()
                .file_type()
                .is_fifo()
        );
    }

    /// A symlink of ours (`/dev/stdout` to a file) is followed: the recording lands
    /// in its target, and the link stays.
    #[test]
    fn our_own_symlink_is_followed() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.prof");
        std::fs::write(&target, b"old").unwrap();
        let path = dir.path().join("link");
        symlink(&target, &path).unwrap();
        let (mut file, mut pending) = create(&path).unwrap();
        file.write_all(b"recording").unwrap();
        pending.commit().unwrap();
        assert!(
            std::fs::symlink_metadata(&path)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read(&target).unwrap(), b"recording");
    }

    #[test]
    fn a_directory_at_the_path_is_refused_up_front() {
        let dir = tempfile::tempdir().unwrap();
        let err = create(dir.path()).err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::IsADirectory);
    }
}
