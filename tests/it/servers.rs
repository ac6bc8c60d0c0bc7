//! Servers as they run: a pre-fork master whose workers never exec, recorded
//! launched, attached with `--children` and with `-a`, every worker named as its
//! master (the kernel gives a fork its parent's comm); a Python `os.fork()` child;
//! several processes of one program merged into one tower.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use profile::format::ThreadEvent;

use crate::common::*;

fn prefork() -> PathBuf {
    build_c("prefork.c", &["-O2", "-g", "-fno-omit-frame-pointer"])
}

/// The name the kernel gives the fixture (its file name, cut to 15 bytes).
const PREFORK: &str = "prefork-O2gfnoo";

/// Waits until `profile record` has created `out` (it does once sampling began).
fn wait_for_file(out: &Path) {
    let t0 = Instant::now();
    while !out.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "recording never began"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
}

/// Waits until `pid` has exited (a zombie, or reaped).
fn wait_for_exit(pid: u32) {
    let t0 = Instant::now();
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat.rsplit_once(") ").and_then(|(_, r)| r.chars().next());
        if state.is_none_or(|c| c == 'Z' || c == 'X') {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "process {pid} did not exit"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every sample of the master's forked workers is under the master's name, both as
/// thread and process, and each worker burned in `worker_burn`.
fn assert_workers_named_as_master(out: &Path, master: u32) {
    let rec = read(out);
    let workers: HashSet<u32> = rec
        .thread_events
        .iter()
        .filter_map(|e| match *e {
            ThreadEvent::Start { pid, ppid, tid, .. } if ppid == master && pid == tid => Some(pid),
            _ => None,
        })
        .collect();
    assert_eq!(workers.len(), 2, "{:?}", rec.thread_events);
    let p = model(out);
    let mut per_worker: HashMap<u32, u64> = HashMap::new();
    for s in &p.samples {
        let t = p.thread(s.thread);
        if t.pid != master && !workers.contains(&t.pid) {
            continue;
        }
        assert_eq!(t.name, PREFORK, "pid {} tid {}", t.pid, t.tid);
        assert_eq!(t.process, PREFORK, "pid {} tid {}", t.pid, t.tid);
        let burns = p
            .stack(s.stack)
            .iter()
            .any(|&f| p.function(f).name == "worker_burn");
        if burns {
            assert!(workers.contains(&t.pid), "worker_burn in the master");
            *per_worker.entry(t.pid).or_default() += 1;
        }
    }
    for w in &workers {
        assert!(
            per_worker.get(w).copied().unwrap_or(0) >= 5,
            "worker {w}: {per_worker:?}"
        );
    }
}

#[test]
fn prefork_workers_launched_take_the_masters_name() {
    let dir = scratch();
    let out = dir.path().join("launch.prof");
    let o = Command::new(profile_bin())
        .args(["record", "-F", "499", "-q", "-o"])
        .arg(&out)
        .arg("--")
        .arg(prefork())
        .args(["0", "0.5"])
        .output()
        .unwrap();
    ok(&o);
    let master = read(&out).meta.pid.expect("the launched pid");
    assert_workers_named_as_master(&out, master);
    // --thread selects the workers by the name they inherited.
    let o = run_profile(&[
        "report",
        "-i",
        out.to_str().unwrap(),
        "--thread",
        PREFORK,
        "--folded",
        "-",
    ]);
    ok(&o);
    assert!(stdout(&o).contains(";worker_burn"), "{}", stdout(&o));
}

#[test]
fn prefork_workers_attached_with_children_take_the_masters_name() {
    let dir = scratch();
    let out = dir.path().join("attach.prof");
    let master = Target::start(&prefork(), &["-1", "0.5"]);
    let pid = master.pid();
    let rec = Command::new(profile_bin())
        .args(["record", "-p", &pid.to_string(), "--children"])
        .args(["-F", "499", "-q", "-o"])
        .arg(&out)
        .spawn()
        .unwrap();
    wait_for_file(&out);
    ok_status(Command::new("kill").args(["-USR1", &pid.to_string()]));
    ok(&rec.wait_with_output().unwrap());
    assert_workers_named_as_master(&out, pid);
}

#[test]
fn prefork_workers_seen_by_all_cpus_take_the_masters_name() {
    let dir = scratch();
    let out = dir.path().join("all.prof");
    let master = Target::start(&prefork(), &["-1", "0.5"]);
    let pid = master.pid();
    let rec = Command::new(profile_bin())
        .args(["record", "-a", "-F", "499", "-q", "--no-jvm-perfmap", "-o"])
        .arg(&out)
        .spawn()
        .unwrap();
    wait_for_file(&out);
    ok_status(Command::new("kill").args(["-USR1", &pid.to_string()]));
    // The workers' CPU time is burnt however loaded the machine: stop once it is.
    wait_for_exit(pid);
    ok_status(Command::new("kill").args(["-INT", &rec.id().to_string()]));
    ok(&rec.wait_with_output().unwrap());
    assert_workers_named_as_master(&out, pid);
}

/// A Python process that forks (no exec): the child is named as its parent.
#[test]
fn python_fork_child_takes_the_parents_name() {
    let python = python3();
    let dir = scratch();
    let out = dir.path().join("py.prof");
    let script = "import os, time\n\
        def burn(end):\n    while time.monotonic() < end:\n        sum(i * i for i in range(1000))\n\
        end = time.monotonic() + 1.5\n\
        child = os.fork()\n\
        burn(end)\n\
        if child == 0:\n    os._exit(0)\n\
        os.waitpid(child, 0)\n";
    let o = Command::new(profile_bin())
        .args(["record", "-F", "499", "-q", "-o"])
        .arg(&out)
        .arg("--")
        .arg(&python)
        .args(["-c", script])
        .output()
        .unwrap();
    ok(&o);
    let parent = read(&out).meta.pid.expect("the launched pid");
    let p = model(&out);
    let names: HashMap<u32, HashSet<String>> = p.samples.iter().fold(HashMap::new(), |mut m, s| {
        let t = p.thread(s.thread);
        m.entry(t.pid).or_default().insert(t.name.clone());
        m
    });
    assert_eq!(names.len(), 2, "{names:?}");
    let parent_names = &names[&parent];
    assert!(
        parent_names.len() == 1 && parent_names.iter().all(|n| n.starts_with("python3")),
        "{names:?}"
    );
    for (pid, n) in &names {
        assert_eq!(n, parent_names, "pid {pid}: {names:?}");
    }
}

/// A python3 to run: one of pyenv's, else the system's.
fn python3() -> PathBuf {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    for v in ["3.12.1", "3.11.7"] {
        let p = home.join(".pyenv/versions").join(v).join("bin/python3");
        if p.exists() {
            return p;
        }
    }
    PathBuf::from("/usr/bin/python3")
}

fn ok_status(cmd: &mut Command) {
    assert!(cmd.status().unwrap().success(), "{cmd:?}");
}

/// The children of `pid`, once it has `n` of them.
fn children(pid: u32, n: usize) -> Vec<u32> {
    let t0 = Instant::now();
    loop {
        let text =
            std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        let v: Vec<u32> = text
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        if v.len() >= n {
            return v;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "{pid} has {v:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Four processes of one program attached by `-p`: one tower under the program's
/// name in folded output and the flame graph (four quarter-width towers cut to `..`
/// before), `--per-process` splits them by pid, and the title and the JSON name all
/// four.
#[test]
fn four_processes_of_one_program_merge_by_name() {
    let a = Target::start(&prefork(), &["0", "20"]);
    let b = Target::start(&prefork(), &["0", "20"]);
    let mut pids = vec![a.pid(), b.pid()];
    pids.extend(children(a.pid(), 2));
    pids.sort_unstable();
    let list: Vec<String> = pids.iter().map(u32::to_string).collect();
    let dir = scratch();
    let out = dir.path().join("four.prof");
    record_pid_list(&list.join(","), &out);
    let path = out.to_str().unwrap();
    let folded = stdout(&run_profile(&["report", "-i", path, "--folded", "-"]));
    assert!(!folded.is_empty());
    for l in folded.lines() {
        assert!(l.starts_with(&format!("{PREFORK};")), "{folded}");
        assert!(!l.contains(";pid "), "{folded}");
    }
    assert!(folded.contains(";worker_burn") && folded.contains(";master_burn"));
    let per = stdout(&run_profile(&[
        "report",
        "-i",
        path,
        "--folded",
        "-",
        "--per-process",
    ]));
    for pid in &pids {
        assert!(
            per.contains(&format!("{PREFORK};pid {pid};")),
            "pid {pid}:\n{per}"
        );
    }
    let svg = dir.path().join("four.svg");
    ok(&run_profile(&[
        "report",
        "-i",
        path,
        "--flamegraph",
        svg.to_str().unwrap(),
    ]));
    let svg = std::fs::read_to_string(svg).unwrap();
    let what = format!("4 processes of {PREFORK} (pids {})", list.join(", "));
    assert!(svg.contains(&format!("profile: {what}")), "{what}");
    let j: serde_json::Value =
        serde_json::from_str(&stdout(&run_profile(&["report", "-i", path, "--json"]))).unwrap();
    assert_eq!(
        j["processes"].as_array().unwrap().len(),
        1,
        "{}",
        j["processes"]
    );
    assert_eq!(j["processes"][0]["name"], PREFORK);
    let got: Vec<u64> = j["processes"][0]["pids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_u64().unwrap())
        .collect();
    assert_eq!(got, pids.iter().map(|&p| u64::from(p)).collect::<Vec<_>>());
    drop((a, b));
}

fn record_pid_list(pids: &str, out: &Path) {
    ok(&run_profile(&[
        "record",
        "-p",
        pids,
        "-d",
        "1.5",
        "-F",
        "199",
        "-q",
        "-o",
        out.to_str().unwrap(),
    ]));
}

/// Attaching to a master whose workers already run: `--children` records only the
/// processes started after attach and says which running ones it left out;
/// `--children=all` records the whole tree, the workers under the master's name.
#[test]
fn children_all_takes_the_workers_already_running() {
    let master = Target::start(&prefork(), &["0", "20"]);
    let pid = master.pid();
    let workers = children(pid, 2);
    let dir = scratch();
    let record = |which: &str, out: &Path| {
        let o = run_profile(&[
            "record",
            "-p",
            &pid.to_string(),
            which,
            "-d",
            "1.5",
            "-F",
            "199",
            "-o",
            out.to_str().unwrap(),
        ]);
        ok(&o);
        stderr(&o)
    };
    let new = dir.path().join("new.prof");
    let err = record("--children", &new);
    assert!(
        err.contains(&format!(
            "note: 2 processes the target started before attach ({PREFORK} ×2) not recorded; pass --children=all"
        )),
        "{err}"
    );
    let p = model(&new);
    assert!(p.samples.iter().all(|s| p.thread(s.thread).pid == pid));
    let all = dir.path().join("all.prof");
    let err = record("--children=all", &all);
    assert!(!err.contains("--children=all"), "{err}");
    let mut want = vec![pid];
    want.extend(&workers);
    want.sort_unstable();
    let mut got = read(&all).meta.pids;
    got.sort_unstable();
    assert_eq!(got, want);
    let p = model(&all);
    for w in &workers {
        let n = p
            .samples
            .iter()
            .filter(|s| p.thread(s.thread).pid == *w)
            .inspect(|s| assert_eq!(p.thread(s.thread).name, PREFORK))
            .count();
        assert!(n >= 10, "worker {w}: {n} samples");
    }
}
