//! `record -a`: every process on the machine. Two unrelated processes the test
//! launches, one before recording and one that starts and ends during it, both appear
//! rooted at their own names and pids with their hot functions; without privilege the
//! error says what -a needs.

use std::time::Duration;

use crate::common::*;

#[test]
fn all_cpus_records_processes_started_before_and_during() {
    let before = Target::start(
        &build_c("threads.c", &["-O2", "-g", "-fno-omit-frame-pointer"]),
        &["burner:20:20"],
    );
    let dir = scratch();
    let out = dir.path().join("all.prof");
    let rec = std::process::Command::new(profile_bin())
        .args(["record", "-a", "-d", "3", "-q", "--no-jvm-perfmap", "-o"])
        .arg(&out)
        .spawn()
        .unwrap();
    // Started after recording began (the file takes its place then), ended before it
    // ends.
    let t0 = std::time::Instant::now();
    while !out.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "recording never began"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let during = Target::start(&build_c("offcpu.c", &["-O2", "-g"]), &["1.0"]);
    let during_pid = during.pid();
    let o = rec.wait_with_output().unwrap();
    assert!(o.status.success());
    drop(during);
    let folded = stdout(&run_profile(&[
        "report",
        "-i",
        out.to_str().unwrap(),
        "--folded",
        "-",
        "--per-process",
    ]));
    let rooted = |pid: u32, name: &str, func: &str| {
        folded.lines().any(|l| {
            // `--per-process` roots at the process's service first (`service NAME;`).
            let root = format!("{name};pid {pid};");
            let rooted = l.starts_with(&root)
                || l.starts_with("service ") && l.contains(&format!(";{root}"));
            rooted && l.contains(&format!(";{func}"))
        })
    };
    assert!(
        rooted(before.pid(), "threads-O2gfnoo", "burn_leaf"),
        "{}",
        &folded[..folded.len().min(4000)]
    );
    assert!(
        rooted(during_pid, "offcpu-O2g", "spin_here"),
        "{}",
        &folded[..folded.len().min(4000)]
    );
}

#[test]
fn all_cpus_without_privilege_says_what_it_needs() {
    let dir = scratch();
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
            "-a",
            "-d",
            "1",
            "-o",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("not permitted to profile every process (-a)"),
        "{err}"
    );
    assert!(
        err.contains("CAP_PERFMON") && err.contains("perf_event_paranoid at 0 or less"),
        "{err}"
    );
    assert!(!out.exists());
}
