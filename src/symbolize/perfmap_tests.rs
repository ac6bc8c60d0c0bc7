//! Issue 14, item 1: hostile perf maps. `profile` runs as root and reads a file in a
//! world-writable directory; each way a third user could plant one is refused with a
//! reason, and none of them hangs or eats memory.

use std::os::unix::fs::{PermissionsExt, symlink};
use std::time::{Duration, Instant};

use std::path::Path;

use super::*;

const REL: &str = "tmp/perf-77.map";

/// The target's user in these tests.
const USER: u32 = 1234;

fn user() -> TargetUser {
    TargetUser {
        uids: vec![USER],
        fs: Some((USER, USER)),
    }
}

/// A directory the target's user may enter.
fn tempdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// `text` written at `path`, owned by the target's user.
fn write_theirs(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::os::unix::fs::chown(path, Some(USER), Some(USER)).unwrap();
}

/// The map's only region's name at address 1.
fn name_at_1(file: PerfMapFile) -> String {
    let (map, _) = file.parse(MAX_MAP_WEIGHT).unwrap();
    map.lookup(1).unwrap_or_default().to_owned()
}

fn root_with_tmp() -> tempfile::TempDir {
    let dir = tempdir();
    std::fs::create_dir(dir.path().join("tmp")).unwrap();
    std::fs::set_permissions(
        dir.path().join("tmp"),
        std::fs::Permissions::from_mode(0o1777),
    )
    .unwrap();
    dir
}

fn open(root: &Path) -> Result<PerfMapFile, PerfMapSkip> {
    open_in_root(root, Path::new(REL), &user())
}

/// The target's user's map is read; root's is not (issue 26: a user could bind-mount a
/// root-only file there from a namespace of their own), nor one that user cannot read.
#[test]
fn a_map_of_the_target_user_is_read_and_not_roots() {
    let root = root_with_tmp();
    let path = root.path().join(REL);
    write_theirs(&path, "1 10 jitted\n");
    let map = open(root.path()).unwrap();
    assert_eq!(map.path, path);
    assert_eq!(name_at_1(map), "jitted");
    std::os::unix::fs::chown(&path, Some(0), Some(0)).unwrap();
    let err = open(root.path()).unwrap_err();
    assert!(matches!(err, PerfMapSkip::Owner { owner: 0, .. }), "{err}");
    // Theirs but not readable by them: opened with their ids, it is not read.
    std::os::unix::fs::chown(&path, Some(USER), Some(USER)).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).unwrap();
    if crate::sys::is_root() {
        let err = open(root.path()).unwrap_err();
        assert!(matches!(err, PerfMapSkip::Io { .. }), "{err}");
        // A target whose user is unknown: nothing is read as root.
        let unknown = TargetUser {
            uids: vec![USER],
            fs: None,
        };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = open_in_root(root.path(), Path::new(REL), &unknown).unwrap_err();
        assert!(matches!(err, PerfMapSkip::Io { .. }), "{err}");
        // No file at all: nothing to refuse, nothing to note (a process that exited
        // before its user was seen, as a fork storm's).
        std::fs::remove_file(&path).unwrap();
        let err = open_in_root(root.path(), Path::new(REL), &unknown).unwrap_err();
        assert!(matches!(err, PerfMapSkip::Missing(_)), "{err}");
    }
}

#[test]
fn a_map_owned_by_another_user_is_refused() {
    let root = root_with_tmp();
    let path = root.path().join(REL);
    std::fs::write(&path, "1000 10 spoofed\n").unwrap();
    std::os::unix::fs::chown(&path, Some(4242), None).unwrap();
    let err = open(root.path()).unwrap_err();
    assert!(
        matches!(err, PerfMapSkip::Owner { owner: 4242, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("uid 4242"), "{err}");
    assert!(err.to_string().contains("(1234)"), "{err}");
    assert!(!err.to_string().contains("root"), "{err}");
}

#[test]
fn a_symlink_is_never_followed() {
    let root = root_with_tmp();
    let secret = root.path().join("secret");
    std::fs::write(&secret, "1000 10 root-only contents\n").unwrap();
    symlink(&secret, root.path().join(REL)).unwrap();
    let err = open(root.path()).unwrap_err();
    assert!(matches!(err, PerfMapSkip::Symlink(_)), "{err}");
    // Nor to a device that never ends.
    std::fs::remove_file(root.path().join(REL)).unwrap();
    symlink("/dev/zero", root.path().join(REL)).unwrap();
    assert!(matches!(open(root.path()), Err(PerfMapSkip::Symlink(_))));
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
    let err = open(root.path()).unwrap_err();
    assert!(matches!(err, PerfMapSkip::NotRegular(_)), "{err}");
    assert!(t.elapsed() < Duration::from_secs(1));
}

#[test]
fn a_huge_map_is_refused_without_reading_it() {
    let root = root_with_tmp();
    let path = root.path().join(REL);
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(MAX_PERF_MAP + 1).unwrap();
    std::os::unix::fs::chown(&path, Some(USER), Some(USER)).unwrap();
    let err = open(root.path()).unwrap_err();
    assert!(
        matches!(err, PerfMapSkip::TooLarge { size, .. } if size == MAX_PERF_MAP + 1),
        "{err}"
    );
}

/// A chrooted target's `/tmp` that is an absolute link resolves inside the target's
/// root, never ours (the kernel would resolve it against ours through /proc/PID/root).
#[test]
fn links_in_the_directory_resolve_inside_the_target_root() {
    let root = tempdir();
    std::fs::create_dir_all(root.path().join("var/tmp")).unwrap();
    symlink("/var/tmp", root.path().join("tmp")).unwrap();
    write_theirs(&root.path().join("var/tmp/perf-77.map"), "1 1 inside\n");
    let map = open(root.path()).unwrap();
    assert_eq!(map.path, root.path().join("var/tmp/perf-77.map"));
    assert_eq!(name_at_1(map), "inside");

    // `..` does not climb out of the root either.
    std::fs::remove_file(root.path().join("tmp")).unwrap();
    symlink("../../../../../../var/tmp", root.path().join("tmp")).unwrap();
    assert_eq!(name_at_1(open(root.path()).unwrap()), "inside");

    // Links that go round end.
    std::fs::remove_file(root.path().join("tmp")).unwrap();
    symlink("/tmp", root.path().join("tmp")).unwrap();
    assert!(matches!(open(root.path()), Err(PerfMapSkip::Missing(_))));
}

#[test]
fn a_missing_map_says_so() {
    let root = root_with_tmp();
    let err = open(root.path()).unwrap_err();
    assert!(matches!(err, PerfMapSkip::Missing(_)), "{err}");
}

/// A perf map left in /tmp by an earlier process whose pid the target now has is
/// not used: its names would be another program's. One the target wrote is.
#[test]
fn a_map_written_before_its_process_started_is_stale() {
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = child.id();
    let path = std::path::PathBuf::from(format!("/tmp/perf-{pid}.map"));
    std::fs::write(&path, "1 10 left_by_an_earlier_process\n").unwrap();
    let file = std::fs::File::options().write(true).open(&path).unwrap();
    let hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    file.set_modified(hour_ago).unwrap();
    let me = TargetUser::of(pid);
    let stale = open_perf_map(pid, &me);
    file.set_modified(std::time::SystemTime::now()).unwrap();
    let fresh = open_perf_map(pid, &me);
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_file(&path);
    let err = stale.unwrap_err();
    assert!(matches!(err, PerfMapSkip::Stale(_, p) if p == pid), "{err}");
    assert!(err.to_string().contains("before process"), "{err}");
    assert_eq!(name_at_1(fresh.unwrap()), "left_by_an_earlier_process");
}

/// A process's start on the wall clock is between the moments before and after it
/// was spawned, to a clock tick (10 ms at 100 Hz) and the kernel's coarse clock.
#[test]
fn a_process_start_is_on_the_wall_clock() {
    let before = std::time::SystemTime::now();
    let mut child = std::process::Command::new("sleep")
        .arg("5")
        .spawn()
        .unwrap();
    let after = std::time::SystemTime::now();
    let started = crate::sys::started_at(child.id());
    let _ = child.kill();
    let _ = child.wait();
    let started = started.unwrap();
    let tick = Duration::from_millis(20);
    assert!(started + tick >= before, "{started:?} before {before:?}");
    assert!(started <= after + tick, "{started:?} after {after:?}");
}
