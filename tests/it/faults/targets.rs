//! Targets that are not the plain case: processes exiting while `profile` attaches,
//! a zombie main thread with a live one, a kernel thread, and a command launched by
//! `sudo profile record` (run as root, or with `--user` as the sudo caller).

use super::*;

/// Processes that exit while `profile` attaches to them: a clear outcome each time
/// (a recording, or an error saying the process is gone), never a hang or a panic.
#[test]
fn targets_exiting_mid_attach_never_hang_profile() {
    let dir = scratch();
    let out = dir.path().join("x.prof");
    for i in 0..15u64 {
        let mut target = Command::new("sleep")
            .arg(format!("0.{:03}", 5 + i * 7))
            .spawn()
            .unwrap();
        let mut rec = spawn_profile(&[
            "record",
            "-p",
            &target.id().to_string(),
            "-q",
            "-o",
            out.to_str().unwrap(),
        ]);
        let status = wait_at_most(&mut rec, Duration::from_secs(20), "mid-attach exit");
        let err = child_stderr(&mut rec);
        target.wait().unwrap();
        assert!(!err.contains("panicked"), "{err}");
        if !status.success() {
            assert!(
                err.contains("no process") || err.contains("exited") || err.contains("gone"),
                "round {i}: {err}"
            );
        }
    }
}

/// A process whose main thread has exited (pthread_exit in main, a zombie leader)
/// with a live thread: attaching hung forever (issue 14, item 5).
#[test]
fn a_zombie_leader_is_recorded_not_waited_for() {
    let dir = scratch();
    let out = dir.path().join("x.prof");
    let target = Target::start(&faults_bin(), &["zombie"]);
    // "ready" comes just before the main thread's pthread_exit.
    let t = Instant::now();
    while state(target.pid()) != 'Z' {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the leader never exited"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut rec = spawn_profile(&[
        "record",
        "-p",
        &target.pid().to_string(),
        "-d",
        "2",
        "-F",
        "499",
        "-q",
        "-o",
        out.to_str().unwrap(),
    ]);
    let status = wait_at_most(&mut rec, Duration::from_secs(30), "zombie leader");
    assert!(status.success(), "{}", child_stderr(&mut rec));
    let samples = samples_by_thread(&model(&out));
    assert!(
        samples.get("burner").copied().unwrap_or(0) > 50,
        "{samples:?}"
    );
    let stacks = stacks(&out);
    assert!(
        stacks
            .iter()
            .any(|(f, _)| f.iter().any(|x| x == "burn_zombie")),
        "{stacks:?}"
    );
}

/// Issue 14, item 8: `--pid 2` (a kernel thread) recorded 0 samples with no word why.
#[test]
fn a_kernel_thread_is_explained() {
    let dir = scratch();
    let out = dir.path().join("k.prof");
    let o = run_profile(&[
        "record",
        "-p",
        "2",
        "-d",
        "0.3",
        "-o",
        out.to_str().unwrap(),
    ]);
    ok(&o);
    let err = stderr(&o);
    assert!(
        err.contains("process 2 (kthreadd) is a kernel thread"),
        "{err}"
    );
}

/// Issue 14, item 4: `sudo profile record -- cmd` ran the command as root. With
/// `--user` it runs as the sudo caller (SUDO_UID/SUDO_GID) while profile records as
/// root, and the recording is theirs; without it, profile says the command runs as
/// root. (sudo's variables are set by hand here: the tests already run as root.)
#[test]
fn user_runs_the_command_as_the_sudo_caller() {
    use std::os::unix::fs::MetadataExt;
    let dir = scratch();
    let out = dir.path().join("u.prof");
    let sudo = |args: &[&str]| {
        Command::new(profile_bin())
            .args(args)
            .env("SUDO_UID", "65534")
            .env("SUDO_GID", "65534")
            .env("SUDO_USER", "nobody")
            .output()
            .unwrap()
    };
    let o = sudo(&[
        "record",
        "--user",
        "-q",
        "-o",
        out.to_str().unwrap(),
        "--",
        "id",
        "-u",
    ]);
    ok(&o);
    assert_eq!(stdout(&o).trim(), "65534");
    let meta = std::fs::metadata(&out).unwrap();
    assert_eq!(
        (meta.uid(), meta.gid(), meta.mode() & 0o777),
        (65534, 65534, 0o600)
    );

    let o = sudo(&["record", "-o", out.to_str().unwrap(), "--", "id", "-u"]);
    ok(&o);
    assert_eq!(stdout(&o).trim(), "0");
    assert!(
        stderr(&o).contains("the command runs as root; add --user to run it as nobody"),
        "{}",
        stderr(&o)
    );

    // Not under sudo: --user is an error that says why.
    let o = Command::new(profile_bin())
        .args([
            "record",
            "--user",
            "-o",
            out.to_str().unwrap(),
            "--",
            "true",
        ])
        .env_remove("SUDO_UID")
        .env_remove("SUDO_GID")
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(stderr(&o).contains("SUDO_UID"), "{}", stderr(&o));
}
