//! The perf maps the recording made JVMs write, removed when the recording is done
//! with them: a JVM asked for its map (`jcmd Compiler.perfmap`) writes
//! `/tmp/perf-<PID>.map` and never removes it, so every attach would leave a file of
//! up to tens of megabytes in the target's `/tmp`.
//!
//! Only a map that was not there when the recording first asked (or was an earlier
//! process's, written before this JVM started: the JVM overwrites it) is removed, so a
//! map the user or another tool had the JVM write stays. The target's `/tmp` is held
//! open from that first look (its name is not looked up again, whatever the pid names
//! by then), and the file is removed with the target user's filesystem ids, only if
//! it is a regular file of theirs: the most a hostile user can have it remove is a
//! name of their own.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::PathBuf;
use std::time::SystemTime;

use super::ThreadAsUser;

/// A perf map this recording caused a JVM to write: removed when dropped.
#[derive(Debug)]
pub(crate) struct CausedMap {
    /// The target's `/tmp`, opened `O_PATH` at the first look.
    dir: OwnedFd,
    /// `perf-<PID>.map`, with the pid the JVM knows itself by.
    name: String,
    /// The target user's effective uid and gid at the first look.
    uid: u32,
    gid: u32,
}

impl CausedMap {
    /// Looks at the perf map of JVM `pid` before the first request: `Some` when there
    /// is none, or only an earlier process's (written before `started`), so that what
    /// the JVM writes now is ours to remove. `None` when a current map is there, or
    /// the target's `/tmp` cannot be opened (a link, a process gone).
    pub(crate) fn before_first_request(pid: u32, started: Option<SystemTime>) -> Option<Self> {
        let (uid, gid) = super::effective_ids(pid)?;
        let ns = crate::symbolize::perfmap::ns_pid(pid).unwrap_or(pid);
        let dir: OwnedFd = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC | libc::O_NOFOLLOW)
            .open(format!("/proc/{pid}/root/tmp"))
            .ok()?
            .into();
        let caused = CausedMap {
            dir,
            name: format!("perf-{ns}.map"),
            uid,
            gid,
        };
        match std::fs::symlink_metadata(caused.path()) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(caused),
            Ok(meta) if written_before(&meta, started) => Some(caused),
            _ => None,
        }
    }

    /// The map's name, through the held directory.
    fn path(&self) -> PathBuf {
        PathBuf::from(format!(
            "/proc/thread-self/fd/{}/{}",
            self.dir.as_raw_fd(),
            self.name
        ))
    }
}

impl Drop for CausedMap {
    /// Removes the map if it is a regular file of the target user's.
    fn drop(&mut self) {
        let _as_target = ThreadAsUser::enter(self.uid, self.gid);
        let path = self.path();
        if std::fs::symlink_metadata(&path)
            .is_ok_and(|meta| meta.file_type().is_file() && meta.uid() == self.uid)
        {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Whether a file was last written before `started` (with the slack of coarse file
/// times): an earlier process's, as `open_perf_map` judges a stale map.
fn written_before(meta: &std::fs::Metadata, started: Option<SystemTime>) -> bool {
    let slack = crate::symbolize::perfmap::STALE_SLACK;
    meta.modified()
        .ok()
        .zip(started)
        .is_some_and(|(written, started)| written + slack < started)
}
