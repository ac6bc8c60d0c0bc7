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
