//! Asking a JVM for its perf map (`--jvm-perfmap`) where its user or its flags stand
//! in the way: a JVM of another user is asked as that user, one whose attach
//! mechanism is off is never signalled. Chain.java as in [`crate::java`].

use std::path::Path;

use crate::common::*;
use crate::java::{chain_command, classes, one_jvm_at_a_time, start_logged};

/// A JVM of another user, attached by root: the handshake runs as that user (as their
/// own `jcmd` would), and the JVM answers it.
#[test]
fn java_of_another_user_is_asked_as_that_user() {
    use std::os::unix::process::CommandExt;
    let _one_jvm = one_jvm_at_a_time();
    let Some(classes) = classes() else { return };
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to start a JVM as another user");
        return;
    }
    let dir = scratch();
    let log = dir.path().join("jvm.log");
    let mut cmd = chain_command(classes, &[]);
    // nobody:nogroup, in a directory it cannot write: the trigger goes to its /tmp.
    cmd.uid(65534).gid(65534).current_dir("/");
    let jvm = start_logged(cmd, &log);
    let out = dir.path().join("other.prof");
    record_pid(jvm.0.id(), "2", "999", &out, &["--jvm-perfmap"]);
    let stacks = stacks(&out);
    assert!(
        stacks
            .iter()
            .any(|(f, _)| f.last().map(String::as_str) == Some("long Chain.spin(long)_[j]")),
        "no Java names: the JVM did not answer"
    );
    // The map it wrote for us was removed, as its user.
    assert!(!Path::new(&format!("/tmp/perf-{}.map", jvm.0.id())).exists());
    // The trigger file is gone, and the JVM printed no thread dump.
    assert!(!Path::new(&format!("/tmp/.attach_pid{}", jvm.0.id())).exists());
    assert!(
        !std::fs::read_to_string(&log)
            .unwrap()
            .contains("Full thread dump")
    );
}

/// A JVM whose attach mechanism is off would only print a thread dump at each SIGQUIT:
/// asked for its perf map (`--jvm-perfmap`), it is never signalled, and the summary
/// says what to do instead.
#[test]
fn java_with_attach_disabled_is_not_signalled() {
    let _one_jvm = one_jvm_at_a_time();
    let Some(classes) = classes() else { return };
    let dir = scratch();
    let log = dir.path().join("jvm.log");
    let jvm = start_logged(
        chain_command(classes, &["-XX:+DisableAttachMechanism"]),
        &log,
    );
    let pid = jvm.0.id().to_string();
    let out = dir.path().join("noattach.prof");
    let o = run_profile(&[
        "record",
        "-p",
        &pid,
        "-d",
        "2",
        "--jvm-perfmap",
        "-o",
        out.to_str().unwrap(),
    ]);
    ok(&o);
    let err = stderr(&o);
    assert!(
        err.contains("-XX:+DisableAttachMechanism") && err.contains("--jvm-flags"),
        "{err}"
    );
    assert!(
        !std::fs::read_to_string(&log)
            .unwrap()
            .contains("Full thread dump")
    );
}
