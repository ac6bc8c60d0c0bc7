//! Faults of the output file: a full disk, a start that fails over an existing
//! recording, a symlink planted at the output path, a recording cut before its names.
//! What was written stays readable and named; nothing is written through a link.

use super::*;

/// Mounts a tmpfs of `kib` KiB at `dir`; unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, kib: u32) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(dir)
            .status()
            .unwrap();
        assert!(status.success(), "mount tmpfs (the tests run as root)");
        Tmpfs(dir.to_owned())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// A full disk: `profile` stops with a clear error, the target is untouched, and the
/// chunks that fitted are readable and named.
#[test]
fn a_full_disk_stops_the_recording_with_a_clear_error() {
    let dir = scratch();
    // Room for the first chunks (metadata, mappings, a few batches of samples of at
    // most 64 KiB each) and not much more.
    let fs = Tmpfs::mount(&dir.path().join("small"), 256);
    let out = fs.0.join("x.prof");
    // Deep, varied stacks fill the disk fast.
    let target = Target::start(
        &build_c("chains.c", &["-O2", "-g"]),
        &["deep", "worker", "qsort"],
    );
    let mut rec = spawn_profile(&[
        "record",
        "-p",
        &target.pid().to_string(),
        "-F",
        "4999",
        // Long enough that the disk fills first however little CPU a loaded machine
        // leaves the target (it fills in seconds on a quiet one): a recording that
        // ended by its duration would not be this test.
        "-d",
        "600",
        "-q",
        "-o",
        out.to_str().unwrap(),
    ]);
    let status = wait_at_most(&mut rec, Duration::from_secs(630), "full disk");
    let err = child_stderr(&mut rec);
    assert!(!status.success(), "profile must fail on a full disk");
    assert!(err.contains("No space left on device"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(matches!(state(target.pid()), 'R' | 'S'));
    assert_eq!(perf_fds(target.pid()), 0);
    let r = read(&out);
    assert!(!r.samples.is_empty());
    assert!(r.damage.is_some());
    let (folded, _) = report_folded(&out);
    assert!(folded.contains("level_c"), "{folded}");
}

/// Issue 14, item 2: a start that fails (here: no such process) truncated an existing
/// output file before checking the target. Now nothing reaches the final path before
/// recording has begun, and no temporary file is left behind.
#[test]
fn a_failed_start_leaves_an_existing_recording_whole() {
    let dir = scratch();
    let keep = dir.path().join("keep.prof");
    std::fs::write(&keep, b"last week's recording").unwrap();
    let o = run_profile(&["record", "--pid", "999999", "-o", keep.to_str().unwrap()]);
    assert!(!o.status.success());
    assert_eq!(std::fs::read(&keep).unwrap(), b"last week's recording");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "{left:?}");
}

/// Issue 14, items 2 and 3: as root, a symlink planted at the output path made
/// `profile` write through it (emptying the file it points to), and recordings were
/// world-readable (0644) though they hold command lines, paths and names.
#[test]
fn recordings_are_private_and_never_written_through_a_symlink() {
    use std::os::unix::fs::{PermissionsExt, symlink};
    let dir = scratch();
    let victim = dir.path().join("shadow");
    std::fs::write(&victim, b"root:*:19000:0:99999:7:::\n").unwrap();
    let out = dir.path().join("out.prof");
    symlink(&victim, &out).unwrap();
    // Planted by another user (nobody): a symlink of root's own, such as
    // /dev/stdout, is followed.
    std::os::unix::fs::lchown(&out, Some(65534), Some(65534)).unwrap();
    let target = Target::start(&faults_bin(), &["spin"]);
    record_pid(target.pid(), "0.5", "99", &out, &[]);
    assert_eq!(
        std::fs::read(&victim).unwrap(),
        b"root:*:19000:0:99999:7:::\n"
    );
    let meta = std::fs::symlink_metadata(&out).unwrap();
    assert!(meta.is_file(), "the link was replaced by the recording");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert!(!read(&out).samples.is_empty());
}

/// The recording's bytes up to (not including) its SYMBOLS chunk: what a recorder
/// killed while naming leaves.
fn cut_before_names(bytes: &[u8]) -> &[u8] {
    let mut pos = 16;
    while pos + 12 <= bytes.len() {
        let kind = u32::from_le_bytes(bytes[pos..pos + 4].try_into().unwrap());
        let len = u32::from_le_bytes(bytes[pos + 4..pos + 8].try_into().unwrap()) as usize;
        if kind == 3 {
            return &bytes[..pos];
        }
        pos += 12 + len;
    }
    panic!("no SYMBOLS chunk");
}

/// Issue 14, item 7: a recording cut before its names (here exactly at a chunk
/// boundary, which read as whole, with no warning) made `diff` against a whole
/// recording of the same program report false regressions on `module+0x...` frames.
/// Now the cut is reported and the names come from the binaries.
#[test]
fn diff_of_a_cut_recording_names_it_from_the_binaries() {
    let dir = scratch();
    let whole = dir.path().join("whole.prof");
    let cut = dir.path().join("cut.prof");
    let target = Target::start(&build_c("chains.c", &["-O2", "-g"]), &["worker", "main"]);
    record_pid(target.pid(), "1.5", "299", &whole, &[]);
    let bytes = std::fs::read(&whole).unwrap();
    std::fs::write(&cut, cut_before_names(&bytes)).unwrap();
    let o = run_profile(&[
        "diff",
        whole.to_str().unwrap(),
        cut.to_str().unwrap(),
        "--verbose",
    ]);
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(err.contains("no closing chunk"), "{err}");
    assert!(
        err.contains("names resolved from the binaries on this machine"),
        "{err}"
    );
    assert!(!out.contains("chains-O2g+0x"), "{out}");
}
