//! Faults (issue 14): the recorder killed or stopped by a signal, a full disk, targets
//! that exit mid-attach or whose main thread is gone, files changed or corrupted under
//! the recorder, hostile perf maps. The promises checked (docs/reliability.md): the
//! target is never stopped, slowed or left with perf events; what was written stays
//! readable and named; hostile input degrades names, never kills or hangs `profile`.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use profile::elf::ElfInfo;

use crate::common::*;

mod hostile_files;
mod output;
mod signals;
mod targets;

fn faults_bin() -> PathBuf {
    build_c("faults.c", &["-O2", "-g", "-fno-omit-frame-pointer"])
}

fn faultlib() -> PathBuf {
    build_c("faultlib.c", &["-O2", "-g3", "-shared", "-fPIC"])
}

/// Starts `profile ARGS` in the background.
fn spawn_profile(args: &[&str]) -> Child {
    Command::new(profile_bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start profile")
}

/// Waits for `child` at most `limit`; kills it and fails the test on a hang.
fn wait_at_most(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: profile still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn child_stderr(child: &mut Child) -> String {
    use std::io::Read;
    let mut s = String::new();
    if let Some(e) = child.stderr.as_mut() {
        let _ = e.read_to_string(&mut s);
    }
    s
}

/// Waits until `profile` has attached and flushed a first chunk of events (the
/// mappings it found) to `out`: load on the machine can make setup take seconds.
fn wait_for_attach(out: &Path, child: &mut Child) {
    let t = Instant::now();
    loop {
        if let Ok(r) = profile::format::Recording::read_file(out)
            && !r.mappings.is_empty()
        {
            return;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "profile ended before attaching: {status:?}\n{}",
                child_stderr(child)
            );
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "no attach after 30 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) has no memory effects.
    assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0);
}

/// The scheduler state letter of a process (`R`, `S`, `T` stopped, `t` traced, `Z`).
fn state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    after.chars().next().unwrap()
}

/// Perf event descriptors a process holds.
fn perf_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|l| l.to_string_lossy().contains("perf_event"))
                .count()
        })
        .unwrap_or(0)
}

fn report_folded(rec: &Path) -> (String, String) {
    let o = run_profile(&["report", "-i", rec.to_str().unwrap(), "--folded", "-"]);
    ok(&o);
    (stdout(&o), stderr(&o))
}
