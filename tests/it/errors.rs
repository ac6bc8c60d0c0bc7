//! Bad input gets a clear message and exit status 2, never a panic.

use crate::common::*;

fn fails_with(args: &[&str], needle: &str) {
    let o = run_profile(args);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(needle),
        "{args:?}: expected {needle:?} in: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn record_errors() {
    let dir = scratch();
    let out = dir.path().join("x.prof");
    let out = out.to_str().unwrap();
    fails_with(
        &["record", "--pid", "999999999", "-d", "1", "-o", out],
        "no process with pid 999999999",
    );
    fails_with(
        &["record", "-o", out, "--", "/nonexistent/command"],
        "cannot run /nonexistent/command",
    );
    fails_with(
        &[
            "record",
            "-o",
            "/nonexistent/dir/x.prof",
            "--pid",
            &std::process::id().to_string(),
        ],
        "cannot write the recording",
    );
    fails_with(
        &[
            "record",
            "-F",
            "0",
            "-o",
            out,
            "--pid",
            &std::process::id().to_string(),
        ],
        "frequency",
    );
}

#[test]
fn report_errors() {
    let dir = scratch();
    fails_with(
        &["report", "-i", "/nonexistent.prof"],
        "cannot read /nonexistent.prof",
    );
    let not = dir.path().join("not.prof");
    std::fs::write(&not, b"hello, this is not a recording").unwrap();
    fails_with(
        &["report", "-i", not.to_str().unwrap()],
        "not a profile recording",
    );
    let newer = dir.path().join("newer.prof");
    std::fs::write(&newer, b"PROFREC\0\x09\0\0\0\0\0\0\0").unwrap();
    fails_with(
        &["report", "-i", newer.to_str().unwrap()],
        "newer than this build",
    );
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &["record"][..],
        &["record", "-p", "1", "--", "ls"],
        &["report", "--bogus"],
    ] {
        let o = run_profile(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
    }
}

/// An unprivileged user attaching to root's process is told what to do.
#[test]
fn attaching_without_permission_gives_advice() {
    let target = crate::common::Target::start(
        &build_c("threads.c", &["-O2", "-g", "-fno-omit-frame-pointer"]),
        &["w:5:5"],
    );
    let dir = scratch();
    // The scratch dir must be writable by nobody for the output file.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let out = dir.path().join("x.prof");
    let o = std::process::Command::new("setpriv")
        .args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            profile_bin(),
            "record",
            "-p",
        ])
        .arg(target.pid().to_string())
        .args(["-d", "1", "-o", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("not permitted to profile"), "{err}");
    assert!(
        err.contains("CAP_PERFMON") && err.contains("perf_event_paranoid"),
        "{err}"
    );
}

/// Too low an open-file limit for threads x CPUs events is a clear error, not a
/// half-attached target.
#[test]
fn too_few_file_descriptors_is_a_clear_error() {
    let specs: Vec<String> = (0..60).map(|i| format!("t{i}:1:50")).collect();
    let specs: Vec<&str> = specs.iter().map(String::as_str).collect();
    let target = crate::common::Target::start(
        &build_c("threads.c", &["-O2", "-g", "-fno-omit-frame-pointer"]),
        &specs,
    );
    let dir = scratch();
    let out = dir.path().join("x.prof");
    let cmd = format!(
        "ulimit -n 100; exec {} record -p {} -d 1 -o {}",
        profile_bin(),
        target.pid(),
        out.display()
    );
    let o = std::process::Command::new("bash")
        .args(["-c", &cmd])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("too many open files") && err.contains("RLIMIT_NOFILE is 100"),
        "{err}"
    );
}
