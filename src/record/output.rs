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
//!   later still leaves everything flushed so far readable there.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// A recording file not yet at its final path.
pub(super) struct PendingOutput {
    /// Deleted when dropped before [`PendingOutput::commit`].
    temp: Option<tempfile::TempPath>,
    path: PathBuf,
}

/// Creates the temporary file for a recording that will be at `path`.
pub(super) fn create(path: &Path) -> io::Result<(File, PendingOutput)> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
        return Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            "it is a directory",
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

    #[test]
    fn commit_replaces_a_symlink_not_its_target_and_is_private() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"root-owned").unwrap();
        let path = dir.path().join("out.prof");
        symlink(&victim, &path).unwrap();
        let (mut file, mut pending) = create(&path).unwrap();
        file.write_all(b"recording").unwrap();
        pending.commit().unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"root-owned");
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.is_file());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read(&path).unwrap(), b"recording");
    }

    #[test]
    fn a_directory_at_the_path_is_refused_up_front() {
        let dir = tempfile::tempdir().unwrap();
        let err = create(dir.path()).err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::IsADirectory);
    }
}
