//! Issue 14, item 1: hostile perf maps. `profile` runs as root and reads a file in a
//! world-writable directory; each way a third user could plant one is refused with a
//! reason, and none of them hangs or eats memory.

use std::os::unix::fs::{PermissionsExt, symlink};
use std::time::{Duration, Instant};

use super::*;

const REL: &str = "tmp/perf-77.map";

fn root_with_tmp() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("tmp")).unwrap();
    std::fs::set_permissions(
        dir.path().join("tmp"),
        std::fs::Permissions::from_mode(0o1777),
    )
    .unwrap();
    dir
}

fn open(root: &Path, owners: &[u32]) -> Result<PerfMapFile, PerfMapSkip> {
    open_in_root(root, Path::new(REL), owners)
}

#[test]
fn a_map_of_root_or_the_target_user_is_read() {
    let root = root_with_tmp();
    let path = root.path().join(REL);
    std::fs::write(&path, "1000 10 jitted\n").unwrap();
    let map = open(root.path(), &[1234]).unwrap();
    assert_eq!(map.text, "1000 10 jitted\n");
    assert_eq!(map.path, path);
    std::os::unix::fs::chown(&path, Some(1234), None).unwrap();
    assert!(open(root.path(), &[1234]).is_ok());
}

#[test]
fn a_map_owned_by_another_user_is_refused() {
    let root = root_with_tmp();
    let path = root.path().join(REL);
    std::fs::write(&path, "1000 10 spoofed\n").unwrap();
    std::os::unix::fs::chown(&path, Some(4242), None).unwrap();
    let err = open(root.path(), &[1234]).unwrap_err();
    assert!(
        matches!(err, PerfMapSkip::Owner { owner: 4242, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("uid 4242"), "{err}");
    assert!(err.to_string().contains("(1234)"), "{err}");
}

#[test]
fn a_symlink_is_never_followed() {
    let root = root_with_tmp();
    let secret = root.path().join("secret");
    std::fs::write(&secret, "1000 10 root-only contents\n").unwrap();
    symlink(&secret, root.path().join(REL)).unwrap();
    let err = open(root.path(), &[]).unwrap_err();
    assert!(matches!(err, PerfMapSkip::Symlink(_)), "{err}");
    // Nor to a device that never ends.
    std::fs::remove_file(root.path().join(REL)).unwrap();
    symlink("/dev/zero", root.path().join(REL)).unwrap();
    assert!(matches!(
        open(root.path(), &[]),
        Err(PerfMapSkip::Symlink(_))
    ));
}

#[test]
fn a_fifo_is_refused_without_blocking() {
    let root = root_with_tmp();
    let path = root.path().join(REL);
    let status = std::process::Command::new("mkfifo")
        .arg(&path)
        .status()
        .unwrap();
    assert!(status.success());
    let t = Instant::now();
    let err = open(root.path(), &[]).unwrap_err();
    assert!(matches!(err, PerfMapSkip::NotRegular(_)), "{err}");
    assert!(t.elapsed() < Duration::from_secs(1));
}

#[test]
fn a_huge_map_is_refused_without_reading_it() {
    let root = root_with_tmp();
    let path = root.path().join(REL);
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(MAX_PERF_MAP + 1).unwrap();
    let err = open(root.path(), &[]).unwrap_err();
    assert!(
        matches!(err, PerfMapSkip::TooLarge { size, .. } if size == MAX_PERF_MAP + 1),
        "{err}"
    );
}

/// A chrooted target's `/tmp` that is an absolute link resolves inside the target's
/// root, never ours (the kernel would resolve it against ours through /proc/PID/root).
#[test]
fn links_in_the_directory_resolve_inside_the_target_root() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("var/tmp")).unwrap();
    symlink("/var/tmp", root.path().join("tmp")).unwrap();
    std::fs::write(root.path().join("var/tmp/perf-77.map"), "1 1 inside\n").unwrap();
    let map = open(root.path(), &[]).unwrap();
    assert_eq!(map.text, "1 1 inside\n");
    assert_eq!(map.path, root.path().join("var/tmp/perf-77.map"));

    // `..` does not climb out of the root either.
    std::fs::remove_file(root.path().join("tmp")).unwrap();
    symlink("../../../../../../var/tmp", root.path().join("tmp")).unwrap();
    assert_eq!(open(root.path(), &[]).unwrap().text, "1 1 inside\n");

    // Links that go round end.
    std::fs::remove_file(root.path().join("tmp")).unwrap();
    symlink("/tmp", root.path().join("tmp")).unwrap();
    assert!(matches!(
        open(root.path(), &[]),
        Err(PerfMapSkip::Missing(_))
    ));
}

#[test]
fn a_missing_map_says_so() {
    let root = root_with_tmp();
    let err = open(root.path(), &[]).unwrap_err();
    assert!(matches!(err, PerfMapSkip::Missing(_)), "{err}");
}
