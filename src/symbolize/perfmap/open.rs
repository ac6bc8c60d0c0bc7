//! Opening a perf map (or any file a target process's user controls) the way perf
//! opens it, and more strictly: as that user, inside the target's root, never
//! through a symlink, never a FIFO, only a regular file owned by the target's user
//! and written since the target started.
//! See the module docs of [`super`].

use std::fs::File;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

use super::{MAX_PERF_MAP, Merged, PerfMap};

/// Whose perf map is read: the users the file may belong to, and the filesystem ids it
/// is opened with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetUser {
    /// The target's real, effective, saved and filesystem uids.
    pub uids: Vec<u32>,
    /// Its filesystem uid and gid; None when unknown (then, as root, nothing is read).
    pub fs: Option<(u32, u32)>,
}

impl TargetUser {
    /// Process `pid`'s, from /proc/PID/status (empty once it is gone).
    pub fn of(pid: u32) -> TargetUser {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let ids = |key: &str| -> Vec<u32> {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .map(|v| {
                    v.split_whitespace()
                        .filter_map(|x| x.parse().ok())
                        .collect()
                })
                .unwrap_or_default()
        };
        let (uid, gid) = (ids("Uid:"), ids("Gid:"));
        let fs = uid.get(3).copied().zip(gid.get(3).copied());
        let mut uids = uid;
        uids.sort_unstable();
        uids.dedup();
        TargetUser { uids, fs }
    }
}

/// Why a perf map was not used. `Display` is the sentence for the summary.
#[derive(Debug, thiserror::Error)]
pub enum PerfMapSkip {
    /// There is none (the usual case: the target is no JIT runtime).
    #[error("no perf map at {0}")]
    Missing(PathBuf),
    /// The path is a symlink (opened with O_NOFOLLOW).
    #[error("{0} is a symbolic link; perf maps are not followed through links")]
    Symlink(PathBuf),
    /// A FIFO, a device, a directory.
    #[error("{0} is not a regular file")]
    NotRegular(PathBuf),
    /// Not the target's user's.
    #[error("{path} is owned by uid {owner}, not by the target's user ({target})")]
    Owner {
        /// The file.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// The target's uids, as text (`unknown` when the target was never seen).
        target: String,
    },
    /// Last written before its process started: an earlier process's, whose pid
    /// the target now has (pids are reused; /tmp outlives processes).
    #[error(
        "{0} was last written before process {1} started: an earlier process's with the same pid"
    )]
    Stale(PathBuf, u32),
    /// Larger than [`MAX_PERF_MAP`].
    #[error("{path} is {size} bytes, more than the {MAX_PERF_MAP} read")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        size: u64,
    },
    /// Another error opening or reading it.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// A perf map opened past the checks of [`open_perf_map`], to be parsed as a stream
/// ([`PerfMap::merge_from`]).
#[derive(Debug)]
pub struct PerfMapFile {
    /// Where it was opened (in our namespace: `/proc/PID/root/...` or `/tmp/...`).
    pub path: PathBuf,
    /// The open file.
    pub file: File,
    /// When it was last written, when known.
    pub modified: Option<std::time::SystemTime>,
}

impl PerfMapFile {
    /// The whole map, parsed within `budget` (see [`PerfMap::merge_from`]).
    pub fn parse(mut self, budget: usize) -> std::io::Result<(PerfMap, Merged)> {
        let mut map = PerfMap::default();
        let merged = map.merge_from(&mut self.file, budget)?;
        Ok((map, merged))
    }
}

/// Opens the perf map of process `pid` as `user` (see [`TargetUser`]; the file must
/// be theirs). The target's own `/tmp` is used while the target lives (through
/// `/proc/PID/root`, symlinks resolved inside that root); after it exited, ours.
///
/// The runtime names the file by the pid it knows itself by: in a container, its pid in
/// its own PID namespace (the last `NSpid` of /proc/PID/status).
///
/// While the process lives, a map last written before it started is an earlier
/// process's ([`PerfMapSkip::Stale`]): its names would be another program's.
pub fn open_perf_map(pid: u32, user: &TargetUser) -> Result<PerfMapFile, PerfMapSkip> {
    let root = PathBuf::from(format!("/proc/{pid}/root"));
    let started = crate::sys::started_at(pid);
    let (root, own_pid) = if root.exists() {
        (root, ns_pid(pid).unwrap_or(pid))
    } else {
        (PathBuf::from("/"), pid)
    };
    let rel = PathBuf::from(format!("tmp/perf-{own_pid}.map"));
    let file = open_in_root(&root, &rel, user)?;
    if file
        .modified
        .zip(started)
        .is_some_and(|(written, started)| written + STALE_SLACK < started)
    {
        return Err(PerfMapSkip::Stale(file.path, pid));
    }
    Ok(file)
}

/// How much earlier than its process's start a perf map may seem written and still
/// be its own: the start time is known to a clock tick, the boot moment to a few
/// microseconds, and file times to the kernel's coarse clock.
pub const STALE_SLACK: std::time::Duration = std::time::Duration::from_millis(100);

/// The pid process `pid` has in its innermost PID namespace.
pub fn ns_pid(pid: u32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))?
        .split_whitespace()
        .last()?
        .parse()
        .ok()
}

/// [`open_perf_map`] for the file `rel` under `root`: every step (the links of the
/// directory, the open) taken with `user`'s filesystem ids.
pub fn open_in_root(
    root: &Path,
    rel: &Path,
    user: &TargetUser,
) -> Result<PerfMapFile, PerfMapSkip> {
    // Whether there is a file at all is asked first (a look at the name, nothing
    // read): a process that had no map is no reason for a note, even when its user
    // cannot be known (it exited before it was seen, as a fork storm's processes).
    if user.fs.is_none() && !exists_in_root(root, rel) {
        return Err(PerfMapSkip::Missing(root.join(rel)));
    }
    as_user(user, || open_checked(root, rel, &user.uids)).unwrap_or_else(|why| {
        Err(PerfMapSkip::Io {
            path: root.join(rel),
            source: std::io::Error::new(std::io::ErrorKind::PermissionDenied, why),
        })
    })
}

/// Runs `f` with `user`'s filesystem ids: on a thread of its own that takes them when
/// this process runs as root (the credentials of no other thread change); as it is
/// otherwise (then our own rights are no more than our user's). Err when, as root, the
/// target's ids are unknown or cannot be taken.
#[cfg(target_os = "linux")]
fn as_user<T: Send>(user: &TargetUser, f: impl FnOnce() -> T + Send) -> Result<T, AsUserError> {
    use crate::sys::{ThreadAsUser, is_root};
    if !is_root() {
        return Ok(f());
    }
    match user.fs {
        None => Err(AsUserError::UnknownUser),
        Some((0, _)) => Ok(f()),
        Some((uid, gid)) => std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("perfmap-as-user".into())
                .spawn_scoped(s, move || {
                    let _as = ThreadAsUser::enter(uid, gid).ok_or(AsUserError::CannotTake(uid))?;
                    Ok(f())
                })
                .map_err(|source| AsUserError::NoThread { uid, source })?
                .join()
                .unwrap_or(Err(AsUserError::ThreadFailed))
        }),
    }
}

/// Why a perf map was not read as its target's user.
#[derive(Debug, thiserror::Error)]
enum AsUserError {
    /// Running as root, and the target's ids are not known.
    #[error("the target's user is unknown; not read as root")]
    UnknownUser,
    /// The kernel refused the reading thread the target's ids.
    #[error("cannot take uid {0} to read it")]
    CannotTake(u32),
    /// No thread could be started to take them.
    #[error("no thread to read it as uid {uid}: {source}")]
    NoThread { uid: u32, source: std::io::Error },
    /// The reading thread panicked.
    #[error("the reading thread failed")]
    ThreadFailed,
}

/// Whether there is anything at `rel` under `root`, its directory's links resolved
/// inside `root` (what the target would open).
fn exists_in_root(root: &Path, rel: &Path) -> bool {
    let (Some(dir), Some(name)) = (rel.parent(), rel.file_name()) else {
        return false;
    };
    resolve_in_root(root, dir, MAX_LINKS).is_some_and(|d| {
        !matches!(std::fs::symlink_metadata(d.join(name)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound)
    })
}

#[cfg(not(target_os = "linux"))]
fn as_user<T: Send>(_user: &TargetUser, f: impl FnOnce() -> T + Send) -> Result<T, AsUserError> {
    Ok(f())
}

fn open_checked(root: &Path, rel: &Path, owners: &[u32]) -> Result<PerfMapFile, PerfMapSkip> {
    let shown = root.join(rel);
    let Some(dir) = rel
        .parent()
        .and_then(|d| resolve_in_root(root, d, MAX_LINKS))
    else {
        return Err(PerfMapSkip::Missing(shown));
    };
    let Some(name) = rel.file_name() else {
        return Err(PerfMapSkip::Missing(shown));
    };
    let path = dir.join(name);
    let file = std::fs::OpenOptions::new()
        .read(true)
        // A FIFO must not block the open, a link must not be followed.
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(&path)
        .map_err(|source| match source.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::ENOTDIR) => PerfMapSkip::Missing(path.clone()),
            Some(libc::ELOOP) => PerfMapSkip::Symlink(path.clone()),
            _ => PerfMapSkip::Io {
                path: path.clone(),
                source,
            },
        })?;
    let io = |source| PerfMapSkip::Io {
        path: path.clone(),
        source,
    };
    let meta = file.metadata().map_err(io)?;
    if !meta.file_type().is_file() {
        return Err(PerfMapSkip::NotRegular(path));
    }
    // Root's own file is the target's only when the target is root's.
    if !owners.contains(&meta.uid()) {
        let target = owners
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        return Err(PerfMapSkip::Owner {
            owner: meta.uid(),
            target: if target.is_empty() {
                "unknown".into()
            } else {
                target
            },
            path,
        });
    }
    if meta.len() > MAX_PERF_MAP {
        return Err(PerfMapSkip::TooLarge {
            size: meta.len(),
            path,
        });
    }
    Ok(PerfMapFile {
        file,
        path,
        modified: meta.modified().ok(),
    })
}

/// Symlink hops allowed while resolving, as the kernel's own limit.
const MAX_LINKS: u32 = 40;

/// `dir` (relative to `root`) with every symlink in it resolved inside `root`: an
/// absolute link target starts again at `root`, `..` never climbs above it. What the
/// kernel's `RESOLVE_IN_ROOT` does, without a syscall the standard library lacks.
/// `None` when a component is missing or the links go round.
fn resolve_in_root(root: &Path, dir: &Path, mut budget: u32) -> Option<PathBuf> {
    let mut parts: Vec<std::ffi::OsString> = Vec::new();
    let mut pending: Vec<std::ffi::OsString> = dir
        .components()
        .rev()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_owned()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect();
    while let Some(part) = pending.pop() {
        if part == ".." {
            parts.pop();
            continue;
        }
        let here: PathBuf = std::iter::once(root.as_os_str().to_owned())
            .chain(parts.iter().cloned())
            .chain(std::iter::once(part.clone()))
            .collect();
        let meta = std::fs::symlink_metadata(&here).ok()?;
        if meta.file_type().is_symlink() {
            budget = budget.checked_sub(1)?;
            let target = std::fs::read_link(&here).ok()?;
            if target.is_absolute() {
                parts.clear();
            }
            for c in target.components().rev() {
                match c {
                    Component::Normal(n) => pending.push(n.to_owned()),
                    Component::ParentDir => pending.push("..".into()),
                    _ => {}
                }
            }
        } else if meta.is_dir() {
            parts.push(part);
        } else {
            return None;
        }
    }
    Some(
        std::iter::once(root.as_os_str().to_owned())
            .chain(parts)
            .collect(),
    )
}
