//! Shared helpers: building fixtures, running targets and `profile`, reading results.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, OnceLock, RwLock};

use profile::format::Recording;
use profile::profile::{Profile, ProfileOptions};

pub fn profile_bin() -> &'static str {
    env!("CARGO_BIN_EXE_profile")
}

/// A scratch directory for one test, removed when dropped.
pub fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("profile-it-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("create scratch dir")
}

/// Compiles `tests/data/<source>` with gcc and `flags` once per test run; returns the
/// binary's path.
pub fn build_c(source: &str, flags: &[&str]) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let key = format!("{source} {}", flags.join(" "));
    let mut built = BUILT.get_or_init(Default::default).lock().unwrap();
    if let Some(p) = built.get(&key) {
        return p.clone();
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixtures");
    std::fs::create_dir_all(&dir).unwrap();
    let stem = source.trim_end_matches(".c");
    let tag: String = flags
        .concat()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    let out = dir.join(format!("{stem}-{tag}"));
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(source);
    let mut flags = flags.to_vec();
    flags.push("-pthread");
    crate::fixture::gcc(&src, &out, &flags);
    built.insert(key, out.clone());
    out
}

/// A running target, killed and reaped when dropped.
pub struct Target {
    pub child: Child,
}

impl Target {
    /// Starts `bin args...` and waits for it to print "ready".
    pub fn start(bin: &Path, args: &[&str]) -> Target {
        let mut cmd = Command::new(bin);
        cmd.args(args);
        Target::spawn(cmd)
    }

    /// Starts a command and waits for it to print "ready" on its stdout.
    pub fn spawn(mut cmd: Command) -> Target {
        let mut child = cmd.stdout(Stdio::piped()).spawn().expect("start target");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready", "target did not start");
        Target { child }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Taken for writing by a test that changes a kernel sysctl perf events depend on, for
/// reading by the tests its change would disturb (`--off-cpu` recordings).
pub fn sysctl_lock() -> &'static RwLock<()> {
    static LOCK: RwLock<()> = RwLock::new(());
    &LOCK
}

/// Runs `profile ARGS` to completion.
pub fn run_profile(args: &[&str]) -> Output {
    Command::new(profile_bin())
        .args(args)
        .output()
        .expect("run profile")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Asserts success, showing profile's stderr otherwise.
pub fn ok(o: &Output) {
    assert!(
        o.status.success(),
        "profile failed: {:?}\n{}",
        o.status,
        stderr(o)
    );
}

pub fn read(path: &Path) -> Recording {
    profile::input::open(path).expect("read recording")
}

pub fn model(path: &Path) -> Profile {
    Profile::from_recording(&read(path), ProfileOptions::default())
}

/// The hypervisor's steal time so far, all CPUs together (`/proc/stat`'s `steal`
/// column, in USER_HZ ticks of 10 ms), nanoseconds. The kernel leaves it out of a
/// thread's own clock (`CONFIG_PARAVIRT_TIME_ACCOUNTING`) while `task-clock` counts
/// it (docs/accounting.md, "Steal time, in a VM").
pub fn steal_ns() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: u64 = stat
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(8))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    ticks * 10_000_000
}

/// The most the hypervisor can have stolen since `before` (a [`steal_ns`] reading):
/// what the column moved, plus one tick per CPU, as it moves in whole ticks.
pub fn steal_since(before: u64) -> u64 {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    steal_ns() - before + cpus * 10_000_000
}

/// Nanoseconds a thread has run, from /proc/PID/task/TID/schedstat.
pub fn schedstat_ns(pid: u32, tid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat")).ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Threads of a process by name: of threads with one name, the oldest (a thread's
/// children are named as it is when it creates them). By start time, not by tid:
/// tids wrap (pid_max is 32768 here, and a suite run goes round it).
pub fn tids_by_name(pid: u32) -> HashMap<String, u32> {
    let mut m: HashMap<String, (u64, u32)> = HashMap::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let tid: u32 = e.unwrap().file_name().to_str().unwrap().parse().unwrap();
        let Ok(name) = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")) else {
            continue;
        };
        // Field 22 of stat, the start time in clock ticks (after the name's ')').
        let Some(started) = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')?
                    .1
                    .split_whitespace()
                    .nth(19)?
                    .parse()
                    .ok()
            })
        else {
            continue;
        };
        let t = m.entry(name.trim().to_owned()).or_insert((started, tid));
        *t = (*t).min((started, tid));
    }
    m.into_iter().map(|(k, (_, tid))| (k, tid)).collect()
}

/// Samples per thread name.
pub fn samples_by_thread(p: &Profile) -> HashMap<String, u64> {
    let mut m = HashMap::new();
    for s in &p.samples {
        *m.entry(p.thread(s.thread).name.clone()).or_default() += 1;
    }
    m
}

/// Compiles `tests/data/<source>` with `rustc -O -g` once per test run.
pub fn build_rust(source: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut built = BUILT.get_or_init(Default::default).lock().unwrap();
    if let Some(p) = built.get(source) {
        return p.clone();
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixtures");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(source.trim_end_matches(".rs"));
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(source);
    crate::fixture::rustc(&src, &out, &["-O", "-g"]);
    built.insert(source.to_owned(), out.clone());
    out
}

/// Folded stacks of a recording, one thread per root (thread name, `tid N`), as frame
/// lists with their sample counts.
pub fn stacks(path: &Path) -> Vec<(Vec<String>, u64)> {
    weighted_stacks(path)
        .into_iter()
        .map(|(frames, samples, _)| (frames, samples))
        .collect()
}

/// [`stacks`] with each stack's CPU time (ns) too.
pub fn weighted_stacks(path: &Path) -> Vec<(Vec<String>, u64, u64)> {
    let p = model(path);
    let folded = profile::output::folded::fold_ids(
        &p,
        profile::output::folded::FoldedOptions::per_thread(true),
    );
    folded
        .stacks
        .iter()
        .map(|(s, c)| {
            let frames = s.iter().map(|&l| folded.text(l).to_owned()).collect();
            (frames, c.samples, c.weight)
        })
        .collect()
}

/// A stack without its thread root and without the kernel frames on top of it.
pub fn user_part(frames: &[String]) -> Vec<&str> {
    let mut v: Vec<&str> = frames[2..].iter().map(String::as_str).collect();
    while v.last().is_some_and(|f| f.ends_with("_[k]")) {
        v.pop();
    }
    v
}

/// Records `pid` for `secs` at `hz` with extra args; panics with profile's stderr on failure.
pub fn record_pid(pid: u32, secs: &str, hz: &str, out: &Path, extra: &[&str]) {
    let pid = pid.to_string();
    let mut args = vec![
        "record",
        "-p",
        &pid,
        "-d",
        secs,
        "-F",
        hz,
        "-q",
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    ok(&run_profile(&args));
}

/// A `profile record -p PID` running until the test stops it: started, and attached
/// (its output file takes its place only once every event is enabled). Tests that
/// need samples wait for the target's CPU time ([`wait_thread_cpu`]), not for a wall
/// duration that a loaded machine may give the target none of.
pub struct Recorder {
    child: Option<Child>,
}

impl Recorder {
    /// Starts `profile record -p PID -F HZ -o OUT EXTRA...` and waits until it has
    /// attached (at most 60 s).
    pub fn attach(pid: u32, hz: &str, out: &Path, extra: &[&str]) -> Recorder {
        Recorder::attach_env(pid, hz, out, extra, &[])
    }

    /// [`Recorder::attach`] with environment variables `env` set for profile.
    pub fn attach_env(
        pid: u32,
        hz: &str,
        out: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Recorder {
        let pid = pid.to_string();
        let mut args = vec!["record", "-p", &pid, "-F", hz, "-o"];
        args.push(out.to_str().unwrap());
        args.extend_from_slice(extra);
        let child = Command::new(profile_bin())
            .envs(env.iter().copied())
            .args(&args)
            .stderr(Stdio::piped())
            .spawn()
            .expect("start profile");
        Recorder::adopt(child, out)
    }

    /// A `profile record` started as `child` (its stderr piped) into `out`, once it has
    /// attached (at most 60 s): for recordings other than `-p PID`.
    pub fn adopt(mut child: Child, out: &Path) -> Recorder {
        let limit = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !out.exists() {
            if let Ok(Some(_)) = child.try_wait() {
                let o = child.wait_with_output().unwrap();
                panic!(
                    "profile ended before attaching: {:?}\n{}",
                    o.status,
                    stderr(&o)
                );
            }
            assert!(
                std::time::Instant::now() < limit,
                "profile did not attach in 60 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        Recorder { child: Some(child) }
    }

    /// The recorder's pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Sends `signal` and waits for the recorder to end; its output.
    pub fn stop_with(mut self, signal: i32) -> Output {
        let child = self.child.take().unwrap();
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as i32, signal) };
        child.wait_with_output().unwrap()
    }

    /// Stops the recorder as Ctrl-C does and asserts that it succeeded.
    pub fn stop(self) -> Output {
        let o = self.stop_with(libc::SIGINT);
        ok(&o);
        o
    }

    /// Waits (at most 60 s) for the recorder to end by itself; its output.
    pub fn wait(mut self) -> Output {
        let mut child = self.child.take().unwrap();
        let limit = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while child.try_wait().unwrap().is_none() {
            assert!(
                std::time::Instant::now() < limit,
                "profile did not end in 60 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        child.wait_with_output().unwrap()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Waits until the thread of `pid` named `name` has run `cpu` of its own CPU time
/// (schedstat) since it was first seen here, at most 60 s of wall time.
pub fn wait_thread_cpu(pid: u32, name: &str, cpu: std::time::Duration) {
    let limit = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut base: Option<(u32, u64)> = None;
    loop {
        if base.is_none()
            && let Some(&tid) = tids_by_name(pid).get(name)
        {
            base = schedstat_ns(pid, tid).map(|ns| (tid, ns));
        }
        if let Some((tid, at)) = base {
            match schedstat_ns(pid, tid) {
                Some(ns) if ns - at >= cpu.as_nanos() as u64 => return,
                Some(_) => {}
                // Gone (another thread of that name, which exited): look again.
                None => base = None,
            }
        }
        assert!(
            std::time::Instant::now() < limit,
            "thread {name} of {pid} did not run {cpu:?} in 60 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// `perf record -e task-clock -F 499 --call-graph CALL_GRAPH -p PID` into `out` until
/// the process's thread named `thread` has run `cpu` of its own CPU time: the samples
/// a test counts on, however loaded the machine is. With a 16 MiB ring: perf's
/// default (512 KiB, eight 64 KiB stack copies, 16 ms at 499 Hz) lost most samples
/// whenever perf waited longer than that for a CPU (123 and 134 samples of 1 s of
/// CPU at load 9, in 2 of 5 runs of the Python tests).
pub fn perf_record_thread_cpu(
    pid: u32,
    thread: &str,
    cpu: std::time::Duration,
    call_graph: &str,
    out: &Path,
) {
    // -N: no build-id cache (shared by the tests' parallel perf runs; see
    // perfdata.rs `perf_record`).
    let perf = Command::new("perf")
        .args(["record", "-q", "-N", "-e", "task-clock", "-F", "499"])
        .args(["-m", "4096"])
        .args(["--call-graph", call_graph, "-p", &pid.to_string(), "-o"])
        .arg(out)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("perf record");
    let limit = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !out.exists() {
        assert!(
            std::time::Instant::now() < limit,
            "perf record did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    wait_thread_cpu(pid, thread, cpu);
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(perf.id() as i32, libc::SIGINT) };
    let o = perf.wait_with_output().unwrap();
    // perf record -p ends on SIGINT by raising it again.
    use std::os::unix::process::ExitStatusExt;
    let stopped = o.status.success() || o.status.signal() == Some(libc::SIGINT);
    assert!(stopped, "perf record: {:?} {}", o.status, stderr(&o));
}

/// Records `pid` at `hz` until its thread `thread` has run `cpu` of its own CPU time:
/// the samples a test counts on, however loaded the machine is.
pub fn record_pid_cpu(
    pid: u32,
    thread: &str,
    cpu: std::time::Duration,
    hz: &str,
    out: &Path,
    extra: &[&str],
) {
    let rec = Recorder::attach(pid, hz, out, extra);
    wait_thread_cpu(pid, thread, cpu);
    rec.stop();
}

/// Reads a child's stderr (piped) to its end on a thread of its own, so that a
/// chatty child never blocks on a full pipe; join the handle for the text.
pub fn stderr_in_background(child: &mut std::process::Child) -> std::thread::JoinHandle<String> {
    let err = child.stderr.take().expect("stderr piped");
    std::thread::spawn(move || {
        let mut s = String::new();
        use std::io::Read;
        let _ = std::io::BufReader::new(err).read_to_string(&mut s);
        s
    })
}

/// Kills the process `pid` (a child not yet waited for) if the test panics while it
/// lives, so a failed test leaves no recorder running (and holding its BPF programs
/// and events) beside the tests after it.
pub struct KillOnPanic(pub u32);

impl Drop for KillOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            unsafe { libc::kill(self.0 as i32, libc::SIGKILL) };
        }
    }
}

/// Folded stacks, each with its count (see [`stacks`]).
pub type Folded = Vec<(Vec<String>, u64)>;

/// A forged runtime (the C program tests/data/`src`, copied to a file named `name`:
/// the readers read only files named like their runtime's) recorded by pid for 1.5 s
/// of its CPU at -F 499 within a 1 MiB runtime budget: the folded stacks of its main
/// thread, and all of them (for messages).
pub fn record_forged(src: &str, name: &str) -> (Folded, Folded) {
    let dir = scratch();
    let exe = dir.path().join(name);
    std::fs::copy(build_c(src, &["-O1", "-rdynamic"]), &exe).unwrap();
    let target = Target::spawn(Command::new(&exe));
    let out = dir.path().join("fake.prof");
    record_pid_cpu(
        target.pid(),
        name,
        std::time::Duration::from_millis(1500),
        "499",
        &out,
        &["--runtime-memory", "1"],
    );
    let all = stacks(&out);
    let tid = format!("tid {}", target.pid());
    let main = all.iter().filter(|(f, _)| f[1] == tid).cloned().collect();
    (main, all)
}
