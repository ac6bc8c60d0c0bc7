//! `profile dump` on real processes: every thread of tests/data/offcpu.c found in the
//! function it was built to be in, with the state it is in (spinning, sleeping,
//! waiting on a mutex, reading a pipe and a socket), built with and without frame
//! pointers; the target is never left stopped; 1,000 parked threads all named; the
//! errors for a missing process and a kernel thread.

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
    // The waiter naps 20 ms before it first waits for the lock.
    std::thread::sleep(Duration::from_millis(100));
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
