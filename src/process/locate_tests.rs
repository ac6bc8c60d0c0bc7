//! Tests of [`super`] against live processes: a binary deleted while it runs, a binary
//! visible only inside the target's private mount namespace, and the vdso.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use super::*;
use crate::elf::ElfInfo;

use crate::test_fixture::Reaped;

fn build_fixture(dir: &Path) -> PathBuf {
    let out = dir.join("sleeper");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/symbolize/inline.c");
    crate::test_fixture::gcc(&src, &out, &["-O2", "-g"]);
    out
}

/// Starts `cmd`, waits for its "ready" line.
fn start(cmd: &mut Command) -> Reaped {
    let mut child = Reaped(
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn"),
    );
    let mut line = String::new();
    BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    child
}

/// The first mapping of `pid` whose path contains `needle`: (start, end, path).
fn find_mapping(pid: u32, needle: &str) -> (u64, u64, String) {
    let maps = crate::test_fixture::maps_of(pid);
    let m = maps
        .iter()
        .find(|m| m.path.contains(needle))
        .unwrap_or_else(|| panic!("no {needle} in {maps:#?}"));
    (m.start, m.end, m.path.clone())
}

fn build_id(path: &Path) -> Vec<u8> {
    ElfInfo::parse(&std::fs::read(path).unwrap())
        .unwrap()
        .build_id
        .unwrap()
}

#[test]
fn deleted_binary_opens_through_map_files() {
    let dir = tempfile::tempdir().unwrap();
    let bin = build_fixture(dir.path());
    let id = build_id(&bin);
    let child = start(Command::new(&bin).arg("sleep"));
    let pid = child.0.id();
    std::fs::remove_file(&bin).unwrap();
    let (start, end, path) = find_mapping(pid, "sleeper");
    assert!(path.ends_with("(deleted)"), "{path}");

    let found = open_mapped_file(pid, &path, (start, end), Some(&id)).unwrap();
    assert_eq!(found.via, OpenedVia::MapFiles);
    assert_eq!(found.build_id.as_deref(), Some(&id[..]));

    // A build-id that does not match is refused, naming both.
    let err = open_mapped_file(pid, &path, (start, end), Some(&[1, 2, 3, 4]))
        .err()
        .expect("mismatch");
    assert!(matches!(err, LocateError::BuildIdMismatch { .. }), "{err}");
    assert!(err.to_string().contains("01020304"));
}

#[test]
fn replaced_binary_falls_back_to_map_files() {
    let dir = tempfile::tempdir().unwrap();
    let bin = build_fixture(dir.path());
    let id = build_id(&bin);
    let child = start(Command::new(&bin).arg("sleep"));
    let pid = child.0.id();
    // Another file now sits at the path (a rebuild): same path, other build-id.
    let (start, end, path) = find_mapping(pid, "sleeper");
    std::fs::remove_file(&bin).unwrap();
    std::fs::copy("/bin/true", &bin).unwrap();
    let found = open_mapped_file(pid, &path, (start, end), Some(&id)).unwrap();
    assert_eq!(found.via, OpenedVia::MapFiles);
    // Without an expected build-id the path as the target sees it wins.
    let found = open_mapped_file(pid, &path, (start, end), None).unwrap();
    assert_eq!(found.via, OpenedVia::TargetRoot);
}

#[test]
fn private_mount_namespace_opens_through_target_root() {
    let dir = tempfile::tempdir().unwrap();
    let bin = build_fixture(dir.path());
    let id = build_id(&bin);
    let hidden = dir.path().join("private");
    std::fs::create_dir(&hidden).unwrap();
    // In its own mount namespace the target mounts a tmpfs over `private`, copies the
    // binary there and runs it: the path exists only in its namespace.
    let script = format!(
        "mount -t tmpfs none '{h}' && cp '{b}' '{h}/app' && exec '{h}/app' sleep",
        h = hidden.display(),
        b = bin.display()
    );
    let child = start(
        Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c"])
            .arg(&script),
    );
    let pid = child.0.id();
    let (start, end, path) = find_mapping(pid, "private/app");
    assert!(
        !Path::new(&path).exists(),
        "{path} must not exist in our namespace"
    );

    let found = open_mapped_file(pid, &path, (start, end), Some(&id)).unwrap();
    assert_eq!(found.via, OpenedVia::TargetRoot);
    assert_eq!(found.build_id.as_deref(), Some(&id[..]));
}

#[test]
fn vdso_of_a_live_process_is_elf_with_a_build_id() {
    let dir = tempfile::tempdir().unwrap();
    let bin = build_fixture(dir.path());
    let child = start(Command::new(&bin).arg("sleep"));
    let pid = child.0.id();
    let (start, end, _) = find_mapping(pid, "[vdso]");
    let image = read_vdso(pid, start, end).unwrap();
    let bytes: &[u8] = (*image).as_ref();
    assert_eq!(bytes.len() as u64, end - start);
    let info = ElfInfo::parse(bytes).unwrap();
    assert!(info.build_id.is_some_and(|id| !id.is_empty()));
    assert!(info.segments.iter().any(|s| s.executable));
    assert!(read_vdso(pid, end, start).is_err());
}
