//! How much of a process's cgroup path root vouches for, read from the cgroup
//! directories' owners while recording. A directory's name is chosen by whoever may
//! write its parent, so a name is root's when every directory above it is root's;
//! below the first directory a user owns (what systemd's delegation, `Delegate=yes`
//! and `user@UID.service`, chowns to her) the names are hers. The walk goes from `/`
//! one component at a time, never through a link ([`crate::sys::dirfd`]), so a path
//! cannot lead it elsewhere.

use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;

use crate::format::Delegation;
use crate::sys::dirfd::{fs_type, open_dir_at, open_root};

/// `CGROUP2_SUPER_MAGIC` from `linux/magic.h`.
const CGROUP2_MAGIC: i64 = 0x6367_7270;

/// Where root stops vouching for the names of `path` in the hierarchy whose
/// controllers field (from `/proc/PID/cgroup`) is `controllers`: None when every
/// directory above the last component is root's; else the components before the
/// first directory a user owns, and her uid (the uid is None, and only the levels
/// read are vouched for, when a level cannot be read).
pub fn delegation(controllers: &str, path: &str) -> Option<Delegation> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let unread = |depth: usize| {
        Some(Delegation {
            depth: depth as u32,
            uid: None,
        })
    };
    let Ok(mut dir) = hierarchy_root(controllers) else {
        return unread(0);
    };
    for (i, name) in parts.iter().enumerate() {
        match dir.metadata() {
            Ok(m) if m.uid() == 0 => {}
            Ok(m) => {
                return Some(Delegation {
                    depth: i as u32,
                    uid: Some(m.uid()),
                });
            }
            Err(_) => return unread(i),
        }
        dir = match open_dir_at(&dir, name) {
            Ok(d) => d,
            Err(_) => return unread(i),
        };
    }
    None
}

/// The mount point of a hierarchy, opened from `/` without following links:
/// `/sys/fs/cgroup` itself when it is the unified hierarchy, else its `unified`,
/// `systemd` (for `name=systemd`) or controllers-named directory; it must be root's.
fn hierarchy_root(controllers: &str) -> io::Result<File> {
    let mut dir = open_root()?;
    for name in ["sys", "fs", "cgroup"] {
        dir = open_dir_at(&dir, name)?;
    }
    let sub = if controllers.is_empty() {
        (!is_cgroup2(&dir)).then_some("unified")
    } else {
        Some(controllers.strip_prefix("name=").unwrap_or(controllers))
    };
    if let Some(sub) = sub {
        dir = open_dir_at(&dir, sub)?;
    }
    if dir.metadata()?.uid() != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "the cgroup hierarchy is not root's",
        ));
    }
    Ok(dir)
}

fn is_cgroup2(dir: &File) -> bool {
    fs_type(dir).is_ok_and(|t| t == CGROUP2_MAGIC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_outside_any_hierarchy_is_not_vouched_for() {
        // No such controller is mounted: nothing can be read, nothing is vouched.
        assert_eq!(
            delegation("no-such-controller", "/system.slice/nginx.service"),
            Some(Delegation {
                depth: 0,
                uid: None
            })
        );
    }
}
