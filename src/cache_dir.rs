//! A cache directory of `profile`'s (debuginfod's downloads, the kernel's symbols, V8
//! layouts; [`default_dir`]), opened as root may open a directory another user
//! chose. `sudo -E` keeps `HOME`, `XDG_CACHE_HOME` and `DEBUGINFOD_CACHE_PATH`, so the
//! cache path can lead through a directory a user owns, a link they placed, or hold
//! an entry that is a link to `/etc/shadow`. The path is walked one component at a
//! time from `/` with `openat(O_NOFOLLOW)` ([`crate::sys::dirfd`]): a
//! component that is a link, or owned by someone other than the effective user (or
//! root, above the cache itself), refuses the whole cache with a note. Inside it
//! every entry is reached from its directory's descriptor, never by path: a cached
//! file is used only if it is a regular file of the effective user, a download is
//! written to a new file (`O_EXCL`) and renamed into place, and nothing is removed
//! but a regular file this process checked.
//!
//! Run as another user, links in the path above the cache are the user's own choice
//! (`/home` a link to `/var/home`) and nobody else's files are at stake: the existing
//! part of the path is resolved first, then walked with the same checks.

use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use crate::sys::dirfd;

/// The file name of a cached debug file inside its build-id directory.
const DEBUGINFO: &str = "debuginfo";

/// An open cache directory.
#[derive(Debug)]
pub(crate) struct CacheDir {
    dir: File,
    path: PathBuf,
    euid: u32,
    /// The file name of an entry's file in its directory, and its mode.
    leaf: &'static str,
    mode: u32,
}

/// Whether only the effective user can change a directory: theirs (or, above the
/// cache, root's); the cache and its entries also writable by no one else.
fn owned(f: &File, euid: u32, root_ok: bool) -> io::Result<bool> {
    let m = f.metadata()?;
    let mine = m.uid() == euid || (root_ok && m.uid() == 0);
    Ok(mine && (root_ok || m.mode() & 0o022 == 0))
}

/// The note for a directory that someone else can change.
fn not_owned(at: &Path, f: &File) -> CacheError {
    let (uid, mode) = f.metadata().map_or((u32::MAX, 0), |m| (m.uid(), m.mode()));
    CacheError::NotOwned {
        at: at.to_owned(),
        uid,
        mode: mode & 0o7777,
    }
}

/// Why the cache, or one of its entries, is not used; its words are the note's.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CacheError {
    /// A relative path, and no working directory to find it from.
    #[error("no working directory: {0}")]
    NoWorkingDirectory(io::Error),
    /// A component of the path that is not walked (`..`, not UTF-8).
    #[error("{}: {why}", .path.display())]
    Path { path: PathBuf, why: &'static str },
    /// A component or entry that could not be opened: a link (never followed), or
    /// the system's error.
    #[error("{}", refused_words(.at, .source))]
    Refused { at: PathBuf, source: io::Error },
    /// A directory that someone other than the effective user can change.
    #[error(
        "{} is not this user's alone (owner uid {uid}, mode {mode:o}): not used as the cache",
        crate::text::terminal_line(&.at.display().to_string())
    )]
    NotOwned { at: PathBuf, uid: u32, mode: u32 },
    /// An entry's file that is not a regular file of the effective user: `what` is
    /// done with it (not used, left alone).
    #[error(
        "{} is not a regular file of this user: {what}",
        crate::text::terminal_line(&.at.display().to_string())
    )]
    NotRegular { at: PathBuf, what: &'static str },
    /// No entry directory to store into.
    #[error("no cache entry")]
    NoEntry,
    /// The new file of an entry could not be created.
    #[error("cannot write in {}: {source}", .dir.display())]
    Create { dir: PathBuf, source: io::Error },
    /// Filling the new file failed: the writer's own error.
    #[error("{0}")]
    Write(io::Error),
    /// Reading an entry's metadata, syncing or renaming the new file failed.
    #[error("{0}")]
    Io(io::Error),
}

/// Why a walk stopped at `path`.
fn refused(path: &Path, e: io::Error) -> CacheError {
    CacheError::Refused {
        at: path.to_owned(),
        source: e,
    }
}

/// Why a walk stopped, in words for the note.
fn refused_words(path: &Path, e: &io::Error) -> String {
    let what = crate::text::terminal_line(&path.display().to_string()).into_owned();
    match e.raw_os_error() {
        Some(libc::ELOOP) | Some(libc::ENOTDIR) => {
            format!("{what} is a symbolic link (or not a directory): not followed")
        }
        _ => format!("{what}: {e}"),
    }
}

/// `path` with its longest existing prefix resolved (links followed), the rest kept.
fn resolve_existing(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut at = path;
    loop {
        if let Ok(real) = at.canonicalize() {
            return rest.iter().rev().fold(real, |p, c| p.join(c));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                at = parent;
            }
            _ => return path.to_owned(),
        }
    }
}

impl CacheDir {
    /// Opens `path` (relative to the working directory when relative), creating what
    /// is missing (mode 0700). An error (the note's words) when a component is a
    /// link, is not a directory, or has an owner other than the effective user (root
    /// is accepted above the last component).
    pub(super) fn open(path: &Path) -> Result<CacheDir, CacheError> {
        Self::open_for(path, DEBUGINFO, 0o644)
    }

    /// [`CacheDir::open`] for entries whose file is called `leaf`, written with `mode`.
    pub(crate) fn open_for(
        path: &Path,
        leaf: &'static str,
        mode: u32,
    ) -> Result<CacheDir, CacheError> {
        let euid = dirfd::euid();
        let mut full = if path.is_absolute() {
            path.to_owned()
        } else {
            std::env::current_dir()
                .map_err(CacheError::NoWorkingDirectory)?
                .join(path)
        };
        if euid != 0 {
            full = resolve_existing(&full);
        }
        let names: Vec<&str> = full
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n.to_str().ok_or("a component is not UTF-8")),
                Component::ParentDir => Some(Err("`..` in the path")),
                _ => None,
            })
            .collect::<Result<_, _>>()
            .map_err(|why| CacheError::Path {
                path: full.clone(),
                why,
            })?;
        let mut dir = dirfd::open_root().map_err(|e| refused(Path::new("/"), e))?;
        let mut at = PathBuf::from("/");
        for (i, name) in names.iter().enumerate() {
            at.push(name);
            let last = i + 1 == names.len();
            let next = match dirfd::open_dir_at(&dir, name) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    match dirfd::mkdir_at(&dir, name, 0o700) {
                        Ok(()) => {}
                        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                        Err(e) => return Err(refused(&at, e)),
                    }
                    dirfd::open_dir_at(&dir, name)
                }
                r => r,
            }
            .map_err(|e| refused(&at, e))?;
            if !owned(&next, euid, !last).map_err(|e| refused(&at, e))? {
                return Err(not_owned(&at, &next));
            }
            dir = next;
        }
        Ok(CacheDir {
            dir,
            path: full,
            euid,
            leaf,
            mode,
        })
    }

    /// Where the debug file of `hex` is, for messages and for the symbolizer's list
    /// of debug files read.
    pub(super) fn path_of(&self, hex: &str) -> PathBuf {
        self.path.join(hex).join(self.leaf)
    }

    /// The build-id directory `hex`, if it exists and is the effective user's, not
    /// reached through a link.
    fn entry_dir(&self, hex: &str, create: bool) -> Result<Option<File>, CacheError> {
        let at = self.path.join(hex);
        let dir = match dirfd::open_dir_at(&self.dir, hex) {
            Err(e) if e.kind() == io::ErrorKind::NotFound && create => {
                match dirfd::mkdir_at(&self.dir, hex, 0o755) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(refused(&at, e)),
                }
                dirfd::open_dir_at(&self.dir, hex)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            r => r,
        }
        .map_err(|e| refused(&at, e))?;
        if !owned(&dir, self.euid, false).map_err(|e| refused(&at, e))? {
            return Err(not_owned(&at, &dir));
        }
        Ok(Some(dir))
    }

    /// The cached debug file of `hex`, open: None when not cached; an error (the
    /// note's words) when the entry is a link, not a regular file, or another user's.
    pub(crate) fn cached(&self, hex: &str) -> Result<Option<File>, CacheError> {
        let Some(dir) = self.entry_dir(hex, false)? else {
            return Ok(None);
        };
        let at = self.path_of(hex);
        let file = match dirfd::open_at(&dir, self.leaf, libc::O_RDONLY | libc::O_NONBLOCK, 0) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            r => r.map_err(|e| refused(&at, e))?,
        };
        let meta = file.metadata().map_err(|e| refused(&at, e))?;
        if !meta.is_file() || meta.uid() != self.euid {
            return Err(CacheError::NotRegular {
                at,
                what: "not used",
            });
        }
        Ok(Some(file))
    }

    /// Stores the debug file of `hex`: `write` fills a new file beside the entry,
    /// which then replaces it (a cut download never looks cached). An entry that is a
    /// link or another user's is left alone (an error).
    pub(crate) fn store(
        &self,
        hex: &str,
        write: impl FnOnce(&mut File) -> io::Result<()>,
    ) -> Result<(), CacheError> {
        let dir = self.entry_dir(hex, true)?.ok_or(CacheError::NoEntry)?;
        // An existing entry that is not a plain file of ours is not replaced.
        match dirfd::open_at(&dir, self.leaf, libc::O_PATH, 0) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(refused(&self.path_of(hex), e)),
            Ok(f) => {
                let m = f.metadata().map_err(CacheError::Io)?;
                if !m.is_file() || m.uid() != self.euid {
                    return Err(CacheError::NotRegular {
                        at: self.path_of(hex),
                        what: "left alone",
                    });
                }
            }
        }
        let tmp = format!(".{}.{}.tmp", self.leaf, std::process::id());
        let mut file = dirfd::open_at(
            &dir,
            &tmp,
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
            self.mode,
        )
        .map_err(|source| CacheError::Create {
            dir: self.path.join(hex),
            source,
        })?;
        let written = write(&mut file)
            .map_err(CacheError::Write)
            .and_then(|()| file.sync_all().map_err(CacheError::Io))
            .and_then(|()| dirfd::rename_at(&dir, &tmp, self.leaf).map_err(CacheError::Io));
        if written.is_err() {
            let _ = dirfd::unlink_at(&dir, &tmp);
        }
        written
    }

    /// Removes the debug file of `hex` if it is a regular file of the effective user
    /// (one that turned out not to be the module's).
    pub(super) fn remove(&self, hex: &str) {
        if let Ok(Some(dir)) = self.entry_dir(hex, false)
            && let Ok(f) = dirfd::open_at(&dir, self.leaf, libc::O_PATH, 0)
            && f.metadata()
                .is_ok_and(|m| m.is_file() && m.uid() == self.euid)
        {
            let _ = dirfd::unlink_at(&dir, self.leaf);
        }
    }
}

/// Entries looked at by [`CacheDir::prune`] at most: a directory filled by someone
/// else costs a bounded listing.
const MAX_LISTED: usize = 4096;

impl CacheDir {
    /// Removes all but the `keep` newest entries (by their file's modification
    /// time), so that a cache filled one entry per binary stays bounded. An entry
    /// goes only when its file is a regular file of the effective user, reached
    /// through its directory's descriptor as every entry is; its directory then
    /// goes if it is empty. How many entries were removed.
    pub(crate) fn prune(&self, keep: usize) -> usize {
        use std::os::fd::AsRawFd;
        let listing = format!("/proc/self/fd/{}", self.dir.as_raw_fd());
        let Ok(list) = std::fs::read_dir(listing) else {
            return 0;
        };
        let mut entries: Vec<(i64, i64, String)> = Vec::new();
        for entry in list.flatten().take(MAX_LISTED) {
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if name.starts_with('.') {
                continue;
            }
            let Ok(Some(dir)) = self.entry_dir(&name, false) else {
                continue;
            };
            let Ok(meta) =
                dirfd::open_at(&dir, self.leaf, libc::O_PATH, 0).and_then(|f| f.metadata())
            else {
                continue;
            };
            if meta.is_file() && meta.uid() == self.euid {
                entries.push((meta.mtime(), meta.mtime_nsec(), name));
            }
        }
        entries.sort_unstable_by(|a, b| b.cmp(a));
        let mut removed = 0;
        for (_, _, name) in entries.iter().skip(keep) {
            self.remove(name);
            if let Ok(Some(dir)) = self.entry_dir(name, false)
                && dirfd::open_at(&dir, self.leaf, libc::O_PATH, 0).is_err()
            {
                removed += 1;
                let _ = dirfd::rmdir_at(&self.dir, name);
            }
        }
        removed
    }
}

/// Where `profile` keeps its caches (the kernel's symbols, V8 layouts):
/// `$XDG_CACHE_HOME/profile`, else `$HOME/.cache/profile`.
pub fn default_dir() -> Option<PathBuf> {
    let base = match std::env::var_os("XDG_CACHE_HOME").filter(|p| !p.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(std::env::var_os("HOME").filter(|p| !p.is_empty())?).join(".cache"),
    };
    base.is_absolute().then(|| base.join("profile"))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn entries_are_stored_read_and_removed_through_descriptors() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CacheDir::open(&dir.path().join("a/b/cache")).unwrap();
        assert!(cache.cached("ab01").unwrap().is_none());
        cache
            .store("ab01", |f| {
                use std::io::Write;
                f.write_all(b"debug")
            })
            .unwrap();
        let got = std::io::read_to_string(cache.cached("ab01").unwrap().unwrap()).unwrap();
        assert_eq!(got, "debug");
        // A failed download leaves nothing behind, not even its temporary file.
        assert!(
            cache
                .store("cd02", |_| Err(io::Error::other("cut")))
                .is_err()
        );
        let left: Vec<_> = std::fs::read_dir(dir.path().join("a/b/cache/cd02"))
            .unwrap()
            .collect();
        assert!(left.is_empty());
        cache.remove("ab01");
        assert!(cache.cached("ab01").unwrap().is_none());
    }

    #[test]
    fn pruning_keeps_the_newest_entries() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CacheDir::open_for(&dir.path().join("c"), "layout", 0o644).unwrap();
        let names = ["e1", "e2", "e3", "e4", "e5"];
        for (i, name) in names.iter().enumerate() {
            cache
                .store(name, |f| {
                    use std::io::Write;
                    f.write_all(b"x")
                })
                .unwrap();
            // Each entry older than the next by a second, whatever the clock's grain.
            let at = std::time::SystemTime::UNIX_EPOCH
                + std::time::Duration::from_secs(1_000_000 + i as u64);
            let file = std::fs::File::options()
                .write(true)
                .open(cache.path_of(name))
                .unwrap();
            file.set_modified(at).unwrap();
        }
        assert_eq!(cache.prune(2), 3);
        for name in &names[..3] {
            assert!(cache.cached(name).unwrap().is_none(), "{name} removed");
            assert!(
                !dir.path().join("c").join(name).exists(),
                "{name}'s directory"
            );
        }
        for name in &names[3..] {
            assert!(cache.cached(name).unwrap().is_some(), "{name} kept");
        }
        assert_eq!(cache.prune(2), 0);
    }

    #[test]
    fn links_are_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        symlink(&real, dir.path().join("link")).unwrap();
        if dirfd::euid() == 0 {
            let e = CacheDir::open(&dir.path().join("link/cache"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("link is a symbolic link"), "{e}");
            assert!(!real.join("cache").exists());
        }
        let cache = CacheDir::open(&dir.path().join("cache")).unwrap();
        std::fs::create_dir(dir.path().join("cache/ef03")).unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "s").unwrap();
        let entry = dir.path().join("cache/ef03/debuginfo");
        symlink(&secret, &entry).unwrap();
        assert!((cache.cached("ef03").unwrap_err().to_string()).contains("symbolic link"));
        assert!(cache.store("ef03", |_| Ok(())).is_err());
        cache.remove("ef03");
        assert!(entry.symlink_metadata().unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "s");
        // A build-id directory that is a link is refused too.
        symlink(&real, dir.path().join("cache/0a0b")).unwrap();
        assert!(cache.cached("0a0b").is_err());
        assert!(cache.store("0a0b", |_| Ok(())).is_err());
        assert_eq!(std::fs::read_dir(&real).unwrap().count(), 0);
    }
}
