//! Java with no setup: a JVM started with no profiling flag (tests/data/java/Chain.java),
//! recorded by pid. profile finds its JIT code in its code heaps, names the compiled
//! methods from them and unwinds them to the thread's first frame, asking the JVM
//! nothing; with `--jvm-perfmap` it has the JVM write its perf map (the attach
//! handshake of `jcmd PID Compiler.perfmap`) and removes it after; where frames stay
//! anonymous the summary says what they are and what to do. Needs a JDK 17+ (`javac`, `java`); skipped with a printed
//! reason where there is none (.ci/run installs one).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use profile::profile::ThreadState;

use crate::common::*;

/// The Java part of the worker's chain, outermost first (Chain.java: DEPTH 8 means 9
/// recurse frames).
/// Folded stacks mark JIT frames `_[j]`.
fn java_chain() -> Vec<&'static str> {
    let mut c = vec!["void Chain.levelA()_[j]", "void Chain.levelB(int)_[j]"];
    c.extend(std::iter::repeat_n("long Chain.recurse(int, long)_[j]", 9));
    c.push("long Chain.spin(long)_[j]");
    c
}

/// Held by each test here: a JVM starting compiles on every core, and two at once
/// starve each other's attach listeners (threads of one test process; under nextest
/// each test is a process of its own).
pub(crate) fn one_jvm_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

/// `src` compiled into `fixtures/DIR-PID` of the test scratch area: the class
/// directory, or None (with the reason printed) when the JDK's `java`, `javac` and the
/// other `tools` (e.g. `jcmd`) are not all there. Compiled once per test process, in a
/// directory of its own: javac rewriting the classes of a JVM that another test (a
/// thread, or a process under nextest) is starting made that JVM fail to start.
pub(crate) fn javac(dir: &str, src: &Path, tools: &[&str]) -> Option<PathBuf> {
    static BUILT: std::sync::Mutex<Vec<(String, Option<PathBuf>)>> =
        std::sync::Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, out)) = built.iter().find(|(d, _)| d == dir) {
        return out.clone();
    }
    let out = javac_once(dir, src, tools);
    built.push((dir.to_owned(), out.clone()));
    out
}

fn javac_once(dir: &str, src: &Path, tools: &[&str]) -> Option<PathBuf> {
    let found = |t: &str| {
        let arg = if t == "jcmd" { "-h" } else { "-version" };
        Command::new(t)
            .arg(arg)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let mut needed = vec!["javac", "java"];
    needed.extend(tools);
    if !needed.iter().all(|t| found(t)) {
        eprintln!("skipped: no JDK ({}) on this machine", needed.join(", "));
        return None;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("fixtures")
        .join(format!("{dir}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let st = Command::new("javac")
        .arg("-d")
        .arg(&dir)
        .arg(src)
        .status()
        .unwrap();
    assert!(st.success(), "javac failed");
    Some(dir)
}

/// The compiled workload's class directory, or None (with the reason printed) when
/// there is no JDK.
pub(crate) fn classes() -> Option<&'static Path> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/java/Chain.java");
            javac("java", &src, &[])
        })
        .as_deref()
}

/// A JVM running the workload with no profiling flag; its perf map is removed with it.
struct Jvm(Target);

impl Jvm {
    fn start(classes: &Path) -> Jvm {
        Jvm(Target::spawn(chain_command(classes, &[])))
    }
}

impl Drop for Jvm {
    fn drop(&mut self) {
        remove_jvm_files(self.0.pid());
    }
}

/// The files a JVM killed outright leaves in /tmp: the perf map it wrote, its attach
/// socket.
pub(crate) fn remove_jvm_files(pid: u32) {
    let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
    let _ = std::fs::remove_file(format!("/tmp/.java_pid{pid}"));
}

/// Whether a worker stack (user part, outermost first) is whole and exact: it starts at
/// the thread's first frame, reaches the Java part through HotSpot's call stub, and the
/// Java part is a prefix of the known chain.
fn exact(user: &[&str]) -> bool {
    let Some(a) = user.iter().position(|f| *f == "void Chain.levelA()_[j]") else {
        return false;
    };
    let chain = java_chain();
    user[0] == "clone3"
        && user[..a]
            .iter()
            .any(|f| f.contains("JavaCalls::call_helper"))
        && user.len() - a <= chain.len()
        && user[a..] == chain[..user.len() - a]
}

/// Whether a worker stack (user part, outermost first) is right while the JVM still
/// compiles: each Java frame below HotSpot's call stub is the chain's method at that
/// depth or `Interpreter` (a method not compiled yet).
fn exact_while_compiling(user: &[&str]) -> bool {
    let Some(stub) = user.iter().position(|f| *f == "StubRoutines (1)_[j]") else {
        return false;
    };
    let mut chain = vec!["run()_[j]", "run()_[j]"];
    chain.extend(java_chain());
    let java: Vec<(&&str, &&str)> = user[stub + 1..]
        .iter()
        .zip(&chain)
        .take_while(|(f, want)| {
            // Interpreted frames are named now (issue 30): `void java.lang.Thread.run()`,
            // or marked unknown where their method could not be checked (as anonymous
            // as `Interpreter` was).
            **f == "Interpreter_[j]"
                || **f == "[java: unknown method]_[j]"
                || f.contains("Chain.")
                || f.ends_with(**want)
        })
        .collect();
    user[0] == "clone3"
        && java.len() >= 3
        && java.iter().all(|(f, want)| {
            **f == "Interpreter_[j]" || **f == "[java: unknown method]_[j]" || f.ends_with(**want)
        })
}

/// The worker thread's stacks (user part, outermost first) with their counts;
/// `[unsampled]` (CPU time without a sample) is no stack.
fn worker_stacks(stacks: &[(Vec<String>, u64)]) -> Vec<(Vec<&str>, u64)> {
    stacks
        .iter()
        .filter(|(f, _)| f[0] == "chain-worker" && f.last().is_some_and(|l| l != "[unsampled]"))
        .map(|(f, n)| (user_part(f), *n))
        .collect()
}

/// At least `min` worker samples, and `percent`% of them `judge`d whole and exact.
fn assert_mostly_whole(
    worker: &[(Vec<&str>, u64)],
    min: u64,
    percent: u64,
    judge: fn(&[&str]) -> bool,
) {
    let total: u64 = worker.iter().map(|(_, n)| n).sum();
    let whole: u64 = worker
        .iter()
        .filter(|(u, _)| judge(u))
        .map(|(_, n)| n)
        .sum();
    assert!(total >= min, "too few worker samples: {total}");
    assert!(
        whole * 100 >= total * percent,
        "{whole} of {total} worker samples whole and exact: {worker:#?}"
    );
}

#[test]
fn java_method_names_and_whole_stacks_with_no_jvm_flags() {
    let _one_jvm = one_jvm_at_a_time();
    let Some(classes) = classes() else { return };
    let dir = scratch();
    let out = dir.path().join("java.prof");
    let jvm = Jvm::start(classes);
    record_pid(jvm.0.pid(), "3", "999", &out, &[]);
    let stacks = stacks(&out);
    let worker = worker_stacks(&stacks);
    // docs/benchmarks.md measures 99%+ on a quiet machine; under the test suite's load a
    // sample may land while the JVM replaces code, hence the margin.
    assert_mostly_whole(&worker, 30, 90, exact);
    // The deepest frame of the chain, named from the JVM's code heap.
    assert!(
        worker
            .iter()
            .any(|(u, _)| u.last() == Some(&"long Chain.spin(long)_[j]"))
    );
    // The JVM was asked nothing: it wrote no map and started no attach listener (it
    // starts one at the first attach request).
    assert!(!Path::new(&format!("/tmp/perf-{}.map", jvm.0.pid())).exists());
    assert!(
        !has_thread(jvm.0.pid(), "Attach Listener"),
        "the JVM was asked for something"
    );
    // Threads keep the names the JVM gave them.
    let p = model(&out);
    let threads = samples_by_thread(&p);
    assert!(threads.contains_key("chain-worker"), "{threads:?}");
    // The JVM's own threads are grouped (a flame graph by thread puts them under
    // `[JVM];[GC]` and so on), the application's are not.
    let group = |name: &str| {
        p.threads
            .iter()
            .find(|t| t.name == name)
            .map(|t| t.group.map(|g| g.to_string()))
    };
    assert_eq!(group("chain-worker"), Some(None));
    assert_eq!(group("VM Periodic Tas"), Some(Some("JVM runtime".into())));
    for (f, _) in &stacks {
        if f[0].starts_with("C2 Compiler") || f[0].starts_with("GC Thread") {
            panic!("a VM thread outside its group: {f:?}");
        }
        if f[0] == "[JVM]" {
            let kind = match f[2].as_str() {
                n if n.starts_with("C1 ") || n.starts_with("C2 ") => "[JIT compiler]",
                n if n.starts_with("G1 ") || n.starts_with("GC ") => "[GC]",
                _ => continue,
            };
            assert_eq!(f[1], kind, "{f:?}");
        }
    }
}

/// With `--jvm-perfmap` the JVM is asked for its perf map as the recording goes; the
/// map it wrote is removed once the recording is done (there was none before), and
/// stacks are as whole.
#[test]
fn java_perf_map_asked_for_is_removed_after() {
    let _one_jvm = one_jvm_at_a_time();
    let Some(classes) = classes() else { return };
    let dir = scratch();
    let out = dir.path().join("asked.prof");
    let jvm = Jvm::start(classes);
    record_pid(jvm.0.pid(), "3", "999", &out, &["--jvm-perfmap"]);
    let stacks = stacks(&out);
    let worker = worker_stacks(&stacks);
    assert_mostly_whole(&worker, 30, 90, exact);
    assert!(
        has_thread(jvm.0.pid(), "Attach Listener"),
        "the JVM was not asked"
    );
    assert!(!Path::new(&format!("/tmp/perf-{}.map", jvm.0.pid())).exists());
}

/// Whether process `pid` has a thread named `name`.
fn has_thread(pid: u32, name: &str) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .any(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim_end() == name))
}

/// A perf map the JVM had written before the recording (its user ran `jcmd PID
/// Compiler.perfmap`) is theirs: it is still there afterwards, rewritten by the JVM
/// at our request.
#[test]
fn java_map_written_before_the_recording_stays() {
    let _one_jvm = one_jvm_at_a_time();
    let Some(classes) = classes() else { return };
    let dir = scratch();
    let jvm = Jvm::start(classes);
    let map = PathBuf::from(format!("/tmp/perf-{}.map", jvm.0.pid()));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !map.exists() {
        assert!(std::time::Instant::now() < deadline, "jcmd wrote no map");
        let _ = Command::new("jcmd")
            .arg(jvm.0.pid().to_string())
            .arg("Compiler.perfmap")
            .output();
    }
    let out = dir.path().join("kept.prof");
    record_pid(jvm.0.pid(), "1", "999", &out, &["--jvm-perfmap"]);
    assert!(map.exists(), "the user's own map was removed");
}

/// `profile record -F 999 -o OUT FLAGS -- java ... Chain MS`: the workload launched under
/// profile for MS milliseconds; fails the test if profile fails.
fn record_launched_chain(
    classes: &Path,
    out: &Path,
    flags: &[&str],
    ms: &str,
) -> std::process::Output {
    let mut args = vec!["record", "-F", "999", "-o", out.to_str().unwrap()];
    args.extend(flags);
    args.extend(["--", "java", "-XX:CompileCommand=quiet"]);
    args.extend(["-XX:CompileCommand=dontinline,Chain::*", "-cp"]);
    args.extend([classes.to_str().unwrap(), "Chain", ms]);
    let o = run_profile(&args);
    ok(&o);
    o
}

/// `--jvm-flags` in launch mode: the JVM writes its map as it exits. With the requests
/// turned off that map is the only one, so the names prove it was read.
#[test]
fn jvm_flags_name_a_short_run_from_the_map_written_at_exit() {
    let _one_jvm = one_jvm_at_a_time();
    let Some(classes) = classes() else { return };
    let dir = scratch();
    let out = dir.path().join("short.prof");
    let o = record_launched_chain(classes, &out, &["--no-jvm-perfmap", "--jvm-flags"], "1500");
    let err = stderr(&o);
    // Said by profile and by the JVM: never silently.
    assert!(
        err.contains(
            "runs with JAVA_TOOL_OPTIONS=-XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit"
        ) && err.contains("Picked up JAVA_TOOL_OPTIONS"),
        "{err}"
    );
    let stacks = stacks(&out);
    let spin: u64 = stacks
        .iter()
        .filter(|(f, _)| {
            f[0] == "chain-worker"
                && f.last().map(String::as_str) == Some("long Chain.spin(long)_[j]")
        })
        .map(|(_, n)| n)
        .sum();
    let worker: u64 = stacks
        .iter()
        .filter(|(f, _)| f[0] == "chain-worker")
        .map(|(_, n)| n)
        .sum();
    assert!(
        worker >= 100 && spin * 100 >= worker * 80,
        "{spin} of {worker} worker samples in the named hot method: {stacks:#?}"
    );
    let pid = model(&out).meta.pid.unwrap();
    remove_jvm_files(pid);
}

/// Without its perf map a JVM's compiled frames are named from its code heap, as their
/// samples are drained (issue 48); code that is still anonymous makes the summary say
/// what it looks like and what to do, exactly when a sample landed there. The
/// recording starts once the worker's chain is compiled (the JVM prints its
/// compilations); as PrintCompilation prints when a compile starts, not when its code
/// is installed, a JVM starved of CPU can still be interpreting through a 3 s
/// recording (4 runs in 8 at load 7 to 8). So each recording is checked both ways, and
/// recorded again, up to five times, until one has samples in the chain's compiled
/// code. (The suite's `record -a` tests pass `--no-jvm-perfmap`: `-a` asks every JVM
/// on the host for its map, this test's too, and one did in a full-suite run.)
#[test]
fn java_without_its_perf_map_is_named_from_its_code_heap() {
    let _one_jvm = one_jvm_at_a_time();
    let Some(classes) = classes() else { return };
    let dir = scratch();
    let out = dir.path().join("nomap.prof");
    let log = dir.path().join("jvm.log");
    let jvm = start_logged(chain_command(classes, &["-XX:+PrintCompilation"]), &log);
    let compiled = |m: &str| {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .any(|l| l.contains(m) && !l.contains("made not entrant"))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !(compiled("Chain::spin") && compiled("Chain::recurse")) {
        assert!(
            std::time::Instant::now() < deadline,
            "the chain was not compiled in 60 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let pid = jvm.0.id().to_string();
    // A map under this pid now is another, dead process's (this JVM writes none
    // unasked): left in /tmp by a JVM killed earlier with the same pid, it would name
    // this one's code, wrongly, and the hint would not come.
    let stale = Path::new(&format!("/tmp/perf-{pid}.map")).exists();
    let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
    eprintln!("a stale perf map under pid {pid}: {stale}");
    let mut tries = Vec::new();
    for _ in 0..5 {
        let o = run_profile(&[
            "record",
            "-p",
            &pid,
            "-d",
            "3",
            "-o",
            out.to_str().unwrap(),
            "--no-jvm-perfmap",
        ]);
        ok(&o);
        let err = stderr(&o);
        assert!(!Path::new(&format!("/tmp/perf-{pid}.map")).exists());
        let o = run_profile(&[
            "report",
            "-i",
            out.to_str().unwrap(),
            "--json",
            "--top",
            "100000",
        ]);
        ok(&o);
        let j: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        let functions = j["functions"].as_array().unwrap();
        // Without a perf map, compiled methods are named from the code heap (kind
        // `jit`), interpreted ones from their frames; none is left anonymous.
        let mut compiled = false;
        for f in functions {
            let name = f["name"].as_str().unwrap_or_default();
            if name.contains("Chain.") {
                assert!(
                    f["kind"] == "interpreted" || f["kind"] == "jit",
                    "{name}: {}",
                    f["kind"]
                );
                compiled |= name.contains("Chain.spin") && f["kind"] == "jit";
            }
        }
        // Frames in the JVM's anonymous code that nothing named (shown as their
        // mapping and offset; frames the Java stage named are of kind `jit` too).
        let anonymous = functions.iter().any(|f| {
            f["kind"] == "jit"
                && f["name"]
                    .as_str()
                    .unwrap_or_default()
                    .starts_with("[anon]+0x")
        });
        let hint = err.contains("it looks like a HotSpot JVM") && err.contains("--jvm-perfmap");
        assert_eq!(
            hint, anonymous,
            "hint given: {hint}, anonymous code sampled: {anonymous}\n{err}"
        );
        tries.push(compiled);
        if compiled {
            return;
        }
    }
    panic!(
        "no compiled Chain.spin named in {} recordings of 3 s",
        tries.len()
    );
}

#[test]
fn java_monitor_wait_is_a_lock_wait() {
    let _one_jvm = one_jvm_at_a_time();
    let Some(classes) = classes() else { return };
    let dir = scratch();
    let out = dir.path().join("offcpu.prof");
    let jvm = Jvm::start(classes);
    let sysctls = sysctl_lock().read();
    record_pid(jvm.0.pid(), "2", "99", &out, &["--off-cpu"]);
    drop(sysctls);
    let p = model(&out);
    let (t, s) = p
        .threads
        .iter()
        .zip(p.thread_states())
        .find(|(t, _)| t.name == "chain-sleeper")
        .expect("the thread blocked on the monitor");
    let total: u64 = s.iter().sum();
    assert!(
        s[ThreadState::Lock as usize] * 100 >= total * 95,
        "{}: {s:?}",
        t.name
    );
}

/// A launched JVM compiles as it runs: a sample whose stack runs through code compiled
/// after the last perf map waits for a newer one, so stacks are whole from the start
/// (before, about half of a short run's samples were cut at new code).
#[test]
fn java_launched_has_whole_stacks_while_it_compiles() {
    let _one_jvm = one_jvm_at_a_time();
    let Some(classes) = classes() else { return };
    let dir = scratch();
    let out = dir.path().join("launched.prof");
    let o = record_launched_chain(classes, &out, &[], "2500");
    // Shown if the test fails: the recording's summary.
    eprintln!("{}", stderr(&o));
    // Signalled only once its Signal Dispatcher ran: a SIGQUIT it handled after the
    // trigger file was gone would have printed a thread dump on its output.
    let printed = String::from_utf8_lossy(&o.stdout);
    assert!(!printed.contains("Full thread dump"), "{printed}");
    let stacks = stacks(&out);
    // 96 to 98% in the debug build under test, quiet or beside three busy loops on
    // two cores. The rest are stubs cut without new code in them. Before a hold
    // looked only at stack words that follow a call, pointers to code blobs' headers
    // held samples for maps that never named them: when the hold ran out of tries
    // (or the records queued behind it out of memory), every sample behind it came
    // out cut (CI: 1191 of 2222 whole; 1 run in 6 quiet).
    assert_mostly_whole(&worker_stacks(&stacks), 100, 90, exact_while_compiling);
    let pid = model(&out).meta.pid.unwrap();
    remove_jvm_files(pid);
}

/// A JVM started with `cmd`, its output in `log`, once it printed "ready".
pub(crate) fn start_logged(mut cmd: Command, log: &Path) -> KillOnDrop {
    let out = std::fs::File::create(log).unwrap();
    let child = cmd
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("start java");
    let guard = KillOnDrop(child);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !std::fs::read_to_string(log)
        .unwrap_or_default()
        .contains("ready")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the JVM did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    guard
}

pub(crate) struct KillOnDrop(pub(crate) std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        remove_jvm_files(self.0.id());
    }
}

pub(crate) fn chain_command(classes: &Path, flags: &[&str]) -> Command {
    let mut cmd = Command::new("java");
    cmd.args(flags)
        .args([
            "-XX:CompileCommand=quiet",
            "-XX:CompileCommand=dontinline,Chain::*",
            "-cp",
        ])
        .arg(classes)
        .arg("Chain");
    cmd
}
