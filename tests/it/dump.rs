//! `profile dump` on real processes: every thread of tests/data/offcpu.c found in the
//! function it was built to be in, with the state it is in (spinning, sleeping,
//! waiting on a mutex, reading a pipe and a socket), built with and without frame
//! pointers; the target is never left stopped; 1,000 parked threads all named; the
//! errors for a missing process and a kernel thread; a process whose main thread
//! exited read through its live threads, and one that exited called exited.

use std::time::Duration;

use serde_json::Value;

use crate::common::*;

/// The state (`/proc/PID/stat`) letter of a process.
fn proc_state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    stat[stat.rfind(')').unwrap() + 2..].chars().next().unwrap()
}

/// Asserts that no thread of `pid` is stopped (`T`, or `t`: traced).
fn never_stopped(pid: u32) {
    assert!(!matches!(proc_state(pid), 'T' | 't'));
    for e in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let tid: u32 = e.unwrap().file_name().to_str().unwrap().parse().unwrap();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).unwrap();
        let letter = stat[stat.rfind(')').unwrap() + 2..].chars().next().unwrap();
        assert!(
            !matches!(letter, 'T' | 't'),
            "thread {tid} is stopped: {stat}"
        );
    }
}

fn dump_json(pid: u32) -> Value {
    let o = run_profile(&["dump", "--pid", &pid.to_string(), "--json"]);
    ok(&o);
    serde_json::from_str(&stdout(&o)).unwrap()
}

/// The thread called `name`: its state and its named frames, leaf first.
fn thread<'a>(d: &'a Value, name: &str) -> (&'a str, Vec<&'a str>) {
    let t = d["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no thread {name} in {d:#}"));
    let frames = t["frames"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| {
            let inl = f["inlined"].as_array().unwrap().iter();
            inl.map(|i| &i["function"]).chain([&f["function"]])
        })
        .filter_map(Value::as_str)
        .collect();
    (t["state"].as_str().unwrap(), frames)
}

fn check_fixture(flags: &[&str]) {
    let target = Target::start(&build_c("offcpu.c", flags), &[]);
    let pid = target.pid();
    // The fixture says ready once its threads are created, not once each has reached
    // its function (on a loaded machine a new thread may wait for a CPU for a while),
    // and the waiter naps 20 ms before it first waits for the lock: wait until a dump
    // finds every thread in its function.
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_secs(20) {
        let d = dump_json(pid);
        let all_in = [
            "sleep_here",
            "hold_lock",
            "wait_for_lock",
            "read_pipe",
            "recv_socket",
        ]
        .iter()
        .all(|f| {
            d["threads"].as_array().unwrap().iter().any(|t| {
                t["frames"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|fr| fr["function"] == *f)
            })
        });
        if all_in {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Thread, the state it is in nearly all the time, the function it is in, its caller.
    let want = [
        ("sleeper", "sleep", "sleep_here", "sleeper"),
        ("holder", "sleep", "hold_lock", "holder"),
        ("waiter", "lock", "wait_for_lock", "waiter"),
        ("piper", "io", "read_pipe", "piper"),
        ("socker", "io", "recv_socket", "socker"),
        ("spin-a", "running", "spin_here", "spinner"),
        ("spin-b", "running", "spin_here", "spinner"),
    ];
    // A snapshot may catch a thread in its short other state (the sleeper awake, the
    // waiter napping 2 ms between its waits): each must be seen in its own state in
    // one of a few dumps, and in its function in every one.
    let mut seen = std::collections::HashSet::new();
    for _ in 0..5 {
        let d = dump_json(pid);
        assert_eq!(d["stopped_threads"], 0);
        never_stopped(pid);
        for (name, state, leafward, caller) in want {
            let (got, frames) = thread(&d, name);
            if got == state {
                seen.insert(name);
            }
            let at = frames.iter().position(|f| *f == leafward);
            assert!(
                at.is_some() && frames.get(at.unwrap() + 1) == Some(&caller),
                "{name} ({flags:?}, {got}): {frames:?}"
            );
            assert!(
                frames.last() == Some(&"clone3") || frames.last() == Some(&"clone"),
                "{name} ({flags:?}): the stack ends at the thread's start: {frames:?}"
            );
            // The blocked ones say where in the kernel they wait.
            if name == "waiter" && got == "lock" {
                let t = d["threads"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|t| t["name"] == "waiter")
                    .unwrap();
                assert_eq!(t["syscall"], "futex");
                assert!(
                    t["blocked_in"]
                        .as_str()
                        .is_some_and(|k| k.contains("futex"))
                );
            }
        }
        if seen.len() == want.len() {
            break;
        }
    }
    assert_eq!(seen.len(), want.len(), "seen in their states: {seen:?}");
    // The text form has the same threads and says nothing was stopped.
    let o = run_profile(&["dump", "--pid", &pid.to_string()]);
    ok(&o);
    let text = stdout(&o);
    let waiter = text
        .split("\n\n")
        .find(|b| b.contains("\"waiter\""))
        .unwrap();
    assert!(waiter.contains("    wait_for_lock ("), "{text}");
    assert!(text.contains("no thread was stopped"), "{text}");
    never_stopped(pid);
}

#[test]
fn dump_finds_every_thread_where_it_is_with_frame_pointers() {
    check_fixture(&["-O2", "-g", "-fno-omit-frame-pointer"]);
}

#[test]
fn dump_finds_every_thread_where_it_is_without_frame_pointers() {
    check_fixture(&["-O2", "-g"]);
}

#[test]
fn dump_names_a_thousand_parked_threads() {
    let target = Target::start(&build_c("parked.c", &["-O2", "-g"]), &["1000"]);
    let pid = target.pid();
    let d = dump_json(pid);
    let threads = d["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 1001);
    let parked = threads
        .iter()
        .filter(|t| t["tid"] != pid)
        .filter(|t| {
            let (state, frames) = thread_of(t);
            state == "wait" && frames.contains(&"park_here")
        })
        .count();
    assert_eq!(
        parked, 1000,
        "every thread in park_here, idle on a condition variable (wait)"
    );
    never_stopped(pid);
}

fn thread_of(t: &Value) -> (&str, Vec<&str>) {
    let frames = t["frames"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["function"].as_str())
        .collect();
    (t["state"].as_str().unwrap(), frames)
}

#[test]
fn dump_errors_are_clear() {
    let o = run_profile(&["dump", "--pid", "999999999"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no process with pid 999999999"),
        "{}",
        stderr(&o)
    );
    // kthreadd (pid 2) is a kernel thread.
    let o = run_profile(&["dump", "--pid", "2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("is a kernel thread"), "{}", stderr(&o));
}

/// Another user's process: the error says what is missing, and nothing is half-read.
#[test]
fn dump_without_permission_gives_advice() {
    let target = Target::start(&build_c("parked.c", &["-O2", "-g"]), &["2"]);
    let o = std::process::Command::new("setpriv")
        .args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            profile_bin(),
            "dump",
            "--pid",
        ])
        .arg(target.pid().to_string())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("not permitted to read the stacks of process"),
        "{err}"
    );
    assert!(err.contains("ptrace") && err.contains("root"), "{err}");
    assert!(stdout(&o).is_empty());
    never_stopped(target.pid());
}

/// Waits until the leader of `pid` is a zombie (its main thread called pthread_exit).
fn wait_for_zombie_leader(pid: u32) {
    for _ in 0..500 {
        if proc_state(pid) == 'Z' {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("the main thread of {pid} did not exit");
}

/// Issue 26: a process whose main thread exited (Go programs, servers that call
/// pthread_exit from main) has no maps or memory under /proc/PID: dump read it as "not
/// permitted ... (No such process)" with a ptrace hint and showed no thread.
#[test]
fn dump_reads_a_process_whose_main_thread_exited() {
    let target = Target::start(&build_c("zombie_leader.c", &["-O2", "-g"]), &[]);
    let pid = target.pid();
    wait_for_zombie_leader(pid);
    let d = dump_json(pid);
    let (state, frames) = thread(&d, "worker");
    assert_eq!(state, "sleep", "{d:#}");
    let at = frames.iter().position(|f| *f == "sleep_here");
    assert!(
        at.is_some_and(|i| frames.get(i + 1) == Some(&"worker")),
        "{frames:?}"
    );
    let leader = d["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tid"] == pid)
        .unwrap();
    assert_eq!(leader["state"], "zombie");
    assert!(
        d["command"][0]
            .as_str()
            .unwrap()
            .ends_with("zombie_leader-O2g")
    );
    let o = run_profile(&["dump", "--pid", &pid.to_string()]);
    ok(&o);
    let text = stdout(&o);
    assert!(text.contains("    sleep_here ("), "{text}");
    assert!(text.contains("lives on in its other threads"), "{text}");
    never_stopped(pid);
}

/// A process whose every thread exited (not yet reaped) is called exited, not
/// refused with a ptrace hint.
#[test]
fn dump_of_an_exited_process_says_exited() {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    wait_for_zombie_leader(pid);
    let o = run_profile(&["dump", "--pid", &pid.to_string()]);
    let _ = child.wait();
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains(&format!("process {pid} has exited")), "{err}");
    assert!(
        !err.contains("not permitted") && !err.contains("hint"),
        "{err}"
    );
}

/// Threads that run microseconds at a time change between the reads of their /proc
/// entries: none may be reported `running` with no frames (a thread asleep by its
/// state and running by its syscall line was, with no note); a thread without a stack
/// has a state other than running, or a note saying why, and a sleeping one has its
/// wait channel or kernel stack.
#[test]
fn threads_in_slivers_are_never_running_without_a_stack() {
    let bin = build_c("slivers.c", &["-O2", "-g", "-fno-omit-frame-pointer"]);
    let t = Target::start(&bin, &["12", "30", "60"]);
    let pid = t.pid();
    let mut sampled = 0;
    for _ in 0..15 {
        let d = dump_json(pid);
        for th in d["threads"].as_array().unwrap() {
            let frames = th["frames"].as_array().unwrap();
            let state = th["state"].as_str().unwrap();
            if th["capture"] == "sample" {
                sampled += 1;
            }
            if frames.is_empty() {
                assert!(
                    state != "running" && th["note"].is_string(),
                    "no stack, no reason: {th:#}"
                );
                let letter = th["proc_state"].as_str().unwrap();
                if matches!(letter, "S" | "D") {
                    assert!(
                        th["blocked_in"].is_string()
                            || !th["kernel_stack"].as_array().unwrap().is_empty(),
                        "{th:#}"
                    );
                }
            }
        }
        never_stopped(pid);
    }
    // Some were caught on the CPU and sampled there.
    assert!(sampled > 0);
}

/// One thread is "1 thread", not "1 threads".
#[test]
fn a_one_thread_process_is_one_thread() {
    let t = Target::spawn({
        let mut c = std::process::Command::new("/bin/sh");
        c.args(["-c", "echo ready; exec sleep 30"]);
        c
    });
    let o = run_profile(&["dump", "--pid", &t.pid().to_string()]);
    ok(&o);
    let text = stdout(&o);
    assert!(
        text.lines().next().unwrap().ends_with("): 1 thread"),
        "{text}"
    );
    assert!(text.contains("Dumped 1 thread in "), "{text}");
}
