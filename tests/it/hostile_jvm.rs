//! Issue 26, root among hostile users: a local user's process that passes for a JVM
//! (tests/data/fakejvm.c maps a file named `libjvm.so` and speaks the attach protocol),
//! run as `nobody`, against root's recorder. Its pid reused by a process that catches
//! SIGQUIT is never signalled; a map rewritten with fresh names at every request keeps
//! the recorder's memory bounded; a reply dripped byte by byte is abandoned at the
//! deadline and noted; a socket served by another process is refused; a root-only file
//! bind-mounted over a perf map from a user namespace is never read. Root only (the
//! attacker is another user): skipped, with a word, otherwise.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// The attacker's uid and gid.
const NOBODY: u32 = 65534;

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("skipped: needs root (the attacker runs as another user)");
    }
    root
}

fn fakejvm() -> PathBuf {
    build_c("fakejvm.c", &["-O1"])
}

/// A scratch directory `nobody` may write, holding the `libjvm.so` the fake JVM maps.
fn nobody_dir() -> tempfile::TempDir {
    let dir = scratch();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::write(dir.path().join("libjvm.so"), vec![0u8; 4096]).unwrap();
    dir
}

/// `fakejvm DIR ARGS...` as nobody, in DIR; not waited for.
fn spawn_nobody(dir: &Path, args: &[&str]) -> Child {
    let mut cmd = Command::new(fakejvm());
    cmd.arg(dir)
        .args(args)
        .current_dir(dir)
        .uid(NOBODY)
        .gid(NOBODY)
        .stdout(Stdio::piped());
    cmd.spawn().expect("start fakejvm")
}

/// A fake JVM (or another process of the attacker's): killed, reaped and its files in
/// /tmp removed when dropped (SIGKILL leaves its socket and map behind).
struct Fake(Target);

impl Fake {
    fn pid(&self) -> u32 {
        self.0.pid()
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = self.0.child.kill();
        let _ = self.0.child.wait();
        let pid = self.pid();
        for f in [
            format!("/tmp/.java_pid{pid}"),
            format!("/tmp/perf-{pid}.map"),
            format!("/tmp/perf-{pid}.map.tmp"),
        ] {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// Waits for a child's "ready".
fn ready(mut child: Child) -> Fake {
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready", "fakejvm did not start");
    Fake(Target { child })
}

fn log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("log")).unwrap_or_default()
}

fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Ends a fake JVM as a JVM ends (SIGTERM: it removes its socket and map) and reaps it.
fn end(t: &mut Fake) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(t.pid() as i32, libc::SIGTERM) };
    t.0.child.wait().unwrap();
}

/// `profile record --jvm-perfmap ARGS` started (every JVM asked for its perf map: the
/// requests are what these tests try), with stderr captured.
fn record(args: &[&str]) -> Child {
    Command::new(profile_bin())
        .args(["record", "--jvm-perfmap"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run profile")
}

/// Waits for `child` alone; its exit status, stderr and peak RSS (VmHWM) in KiB.
fn finish(mut child: Child) -> (i32, String, i64) {
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(rc, child.id() as i32);
    (status, err, usage.ru_maxrss)
}

/// A process started by `spawn` with pid `pid` (taken with ns_last_pid, retried while
/// other processes take it first).
fn take_pid(pid: u32, spawn: impl Fn() -> Child) -> Child {
    for _ in 0..500 {
        std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).unwrap();
        let mut c = spawn();
        if c.id() == pid {
            return c;
        }
        let _ = c.kill();
        let _ = c.wait();
    }
    panic!("could not give pid {pid} to a new process");
}

/// A JVM's pid taken by another process (that catches SIGQUIT, as nginx, php-fpm and
/// gunicorn do) while `record -a` runs: that process is never signalled, and no
/// `.attach_pid` file is created in its directory.
#[test]
fn a_reused_jvm_pid_is_never_signalled() {
    if !root() {
        return;
    }
    // Its `record -a` asks every JVM on the host for a perf map: not while a Java test
    // checks what a JVM without one looks like.
    let _one_jvm = crate::java::one_jvm_at_a_time();
    let dir = nobody_dir();
    let d = dir.path();
    let mut jvm = ready(spawn_nobody(d, &["answer"]));
    let pid = jvm.pid();
    let out = d.join("reuse.prof");
    // Long enough for the retirement below on a loaded machine, where a whole-system
    // recorder can be seconds behind its rings.
    let mut rec = record(&["-a", "-d", "45", "-F", "49", "-o", out.to_str().unwrap()]);
    wait_for(
        "the recorder's first request",
        Duration::from_secs(30),
        || log(d).contains("answered"),
    );
    // The recorder reads the JVM's memory (to tell its compiled code apart)...
    let rec_pid = rec.id();
    let holds_mem = || {
        std::fs::read_dir(format!("/proc/{rec_pid}/fd"))
            .into_iter()
            .flatten()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .any(|l| l == Path::new(&format!("/proc/{pid}/mem")))
    };
    assert!(holds_mem());
    end(&mut jvm);
    let reuser = take_pid(pid, || spawn_nobody(d, &["reuser"]));
    let _reuser = ready(reuser);
    // ...until it exits: then it is retired, and its resources released.
    wait_for(
        "the exited JVM's /proc/PID/mem closed",
        Duration::from_secs(30),
        || !holds_mem(),
    );
    assert!(
        rec.try_wait().unwrap().is_none(),
        "the recording ended before the pid was reused"
    );
    let (status, err, _) = finish(rec);
    assert_eq!(status, 0, "{err}");
    let log = log(d);
    assert!(log.contains(&format!("reuser {pid}")), "{log}");
    // Only this recorder counts: on a shared machine another one (an older build run
    // by someone else with -a) may signal the new process, and make its trigger file.
    assert!(
        !log.contains(&format!("got signal 3 from {rec_pid}")),
        "the new process was signalled: {log}"
    );
    assert!(
        !log.contains("trigger file") || log.contains("got signal 3 from"),
        "a trigger file was made: {log}"
    );
}

/// A fake JVM that rewrites a large map with fresh names (and addresses) at every
/// request: the recorder's peak RSS stays under 200 MiB (its maps are held within 64
/// MiB, and while a snapshot that overflows is rebuilt into a new map the old one is
/// still held: twice the budget, plus the debug build's own 40 to 70 MiB; peaks of
/// 106 to 160 MiB were seen. Before, each snapshot added its names for good, and the
/// end copied them several times: 508 MiB after 8 maps).
#[test]
fn a_growing_jvm_map_keeps_the_recorder_bounded() {
    if !root() {
        return;
    }
    let dir = nobody_dir();
    let d = dir.path();
    let jvm = ready(spawn_nobody(d, &["grow", "400000"]));
    let pid = jvm.pid().to_string();
    let out = d.join("grow.prof");
    let rec = record(&[
        "-p",
        &pid,
        "-d",
        "16",
        "-F",
        "49",
        "-o",
        out.to_str().unwrap(),
    ]);
    let (status, err, hwm_kib) = finish(rec);
    assert_eq!(status, 0, "{err}");
    let answered = log(d).matches("answered").count();
    eprintln!(
        "recorder peak RSS {} MiB after {answered} maps of 400000 fresh names",
        hwm_kib >> 10
    );
    assert!(answered >= 3, "only {answered} maps written: {err}");
    assert!(
        hwm_kib < 200 << 10,
        "recorder peak RSS {} MiB after {answered} maps of 400000 fresh names",
        hwm_kib >> 10
    );
    assert!(err.contains("perf map was cut"), "{err}");
}

/// A reply dripped one byte every 2.5 s: the request is abandoned at its deadline (3
/// s for the whole request, not per read), and the summary says so.
#[test]
fn a_dripped_reply_is_abandoned_at_the_deadline() {
    if !root() {
        return;
    }
    let dir = nobody_dir();
    let d = dir.path();
    let mut jvm = ready(spawn_nobody(d, &["drip"]));
    let pid = jvm.pid().to_string();
    let out = d.join("drip.prof");
    let rec = record(&[
        "-p",
        &pid,
        "-d",
        "12",
        "-F",
        "49",
        "-o",
        out.to_str().unwrap(),
    ]);
    let rec_pid = rec.id();
    let (status, err, _) = finish(rec);
    assert_eq!(status, 0, "{err}");
    // Ended as a JVM ends, it logs how long the connection it drips into lasted.
    end(&mut jvm);
    // The first connection ended within the deadline (the fake JVM notices at its next
    // byte, up to 2.5 s later); held for the whole recording, it would have lasted 12 s.
    // Only this recorder's connections count (on a shared machine another recorder may
    // ask the fake JVM too).
    let log = log(d);
    let first: u64 = log
        .lines()
        .filter_map(|l| l.strip_prefix("dripped for "))
        .find_map(|l| {
            let (ms, to) = l.split_once(" ms to ")?;
            (to == rec_pid.to_string()).then(|| ms.parse().ok())?
        })
        .unwrap_or_else(|| panic!("no drip to {rec_pid} logged: {log}"));
    eprintln!("the dripping request lasted {first} ms");
    assert!(
        first < 9000,
        "the dripping request lasted {first} ms: {log}"
    );
    assert!(err.contains("abandoned"), "{err}");
}

/// The JVM's socket path served by another process (what a link swapped in between
/// check and connect reaches): refused by its peer credentials before a byte is sent.
#[test]
fn an_attach_socket_served_by_another_process_is_refused() {
    if !root() {
        return;
    }
    let dir = nobody_dir();
    let d = dir.path();
    let jvm = ready(spawn_nobody(d, &["silent"]));
    let pid = jvm.pid().to_string();
    let _impostor = ready(spawn_nobody(d, &["impostor", &pid]));
    let out = d.join("peer.prof");
    let rec = record(&[
        "-p",
        &pid,
        "-d",
        "2",
        "-F",
        "49",
        "-o",
        out.to_str().unwrap(),
    ]);
    let rec_pid = rec.id();
    let (status, err, _) = finish(rec);
    assert_eq!(status, 0, "{err}");
    // What this recorder sent (another recorder on a shared machine may connect too).
    let log = log(d);
    let sent: Vec<&str> = log
        .lines()
        .filter_map(|l| l.strip_prefix("impostor received "))
        .filter_map(|l| l.strip_suffix(&format!(" bytes from {rec_pid}")))
        .collect();
    assert!(!sent.is_empty(), "the recorder never connected: {log}");
    assert!(
        sent.iter().all(|&n| n == "0"),
        "the request reached the impostor: {log}"
    );
    assert!(err.contains("not by the JVM"), "{err}");
}

/// A user in their own user and mount namespace bind-mounts a root-only file over
/// their perf map: root's recorder reaches it through /proc/PID/root, and must not
/// read it (it is opened with the target's ids, and root's files are not theirs).
#[test]
fn a_root_only_file_mounted_over_a_perf_map_is_not_read() {
    if !root() {
        return;
    }
    let dir = nobody_dir();
    let d = dir.path();
    let secret = d.join("secret");
    let addr = 0x3e0000000u64;
    std::fs::write(&secret, format!("{addr:x} 10 ROOT_ONLY_SECRET_hunter2\n")).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let script = format!(
        "echo '{addr:x} 10 users_own_name' > /tmp/perf-$$.map && \
         mount --bind {} /tmp/perf-$$.map && exec {} {} jit {addr:x}",
        secret.display(),
        fakejvm().display(),
        d.display()
    );
    let mut cmd = Command::new("unshare");
    cmd.args(["-Urm", "sh", "-c", &script])
        .current_dir(d)
        .uid(NOBODY)
        .gid(NOBODY)
        .stdout(Stdio::piped());
    let target = ready(cmd.spawn().expect("unshare"));
    let pid = target.pid();
    // The bind mount holds: through the target's root, root would read the secret.
    let seen = std::fs::read_to_string(format!("/proc/{pid}/root/tmp/perf-{pid}.map")).unwrap();
    assert!(seen.contains("ROOT_ONLY_SECRET"), "{seen}");
    let out = d.join("userns.prof");
    let o = run_profile(&[
        "record",
        "-p",
        &pid.to_string(),
        "-d",
        "4",
        "-F",
        "99",
        "-o",
        out.to_str().unwrap(),
    ]);
    drop(target);
    ok(&o);
    let stacks = stacks(&out);
    // Samples in the anonymous code (the frame called from main): the perf map was
    // looked up for them.
    let in_code: u64 = stacks
        .iter()
        .filter(|(f, _)| {
            f.iter()
                .position(|x| x == "main")
                .is_some_and(|i| i + 1 < f.len())
        })
        .map(|(_, n)| n)
        .sum();
    assert!(in_code >= 3, "too few samples in the code: {stacks:?}");
    let names: Vec<&String> = stacks.iter().flat_map(|(f, _)| f).collect();
    assert!(
        !names.iter().any(|n| n.contains("ROOT_ONLY_SECRET")),
        "a root-only file's line became a frame name: {names:?}"
    );
    assert!(stderr(&o).contains("not used"), "{}", stderr(&o));
}
