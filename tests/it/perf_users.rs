//! perf's habits (issue 15): its spellings of `record` options (`-p A,B`, `-t TID`,
//! `-c PERIOD`, `-g`, `--call-graph dwarf,SIZE`), PLT stubs named as perf names them,
//! frame-pointer stacks cut by code without frame pointers marked `[truncated: ...]`,
//! and attach without `--children` explained in one note.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::common::*;

fn threads_bin() -> PathBuf {
    build_c("threads.c", &["-O2", "-g", "-fno-omit-frame-pointer"])
}

fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

/// Function names of a sample's stack, root first (no thread root).
fn frame_names(p: &profile::profile::Profile, x: &profile::profile::ProfileSample) -> Vec<String> {
    p.stack(x.stack)
        .iter()
        .map(|&f| p.function(f).name.clone())
        .collect()
}

/// `-p A,B` records both processes in one recording; reports root each process's
/// stacks at its name without being asked, and with `--per-process` at its pid.
#[test]
fn pid_list_records_several_processes_under_their_roots() {
    let dir = scratch();
    let out = dir.path().join("x.prof");
    let a = Target::start(&threads_bin(), &["wa:5:5"]);
    let b = Target::start(&threads_bin(), &["wb:5:5"]);
    let pids = format!("{},{}", a.pid(), b.pid());
    ok(&run_profile(&[
        "record",
        "-p",
        &pids,
        "-d",
        "2",
        "-F",
        "499",
        "-q",
        "-o",
        s(&out),
    ]));
    let rec = read(&out);
    assert_eq!(rec.meta.pid, Some(a.pid()));
    assert_eq!(rec.meta.pids, [a.pid(), b.pid()]);
    let by_thread = samples_by_thread(&model(&out));
    assert!(
        by_thread.get("wa").is_some_and(|&n| n > 10),
        "{by_thread:?}"
    );
    assert!(
        by_thread.get("wb").is_some_and(|&n| n > 10),
        "{by_thread:?}"
    );
    // One tower per process with --per-process (by default processes of one name
    // merge: tests/it/servers.rs).
    let o = run_profile(&["report", "-i", s(&out), "--folded", "-", "--per-process"]);
    ok(&o);
    let folded = stdout(&o);
    for (pid, thread) in [(a.pid(), "wa"), (b.pid(), "wb")] {
        let root = format!(";pid {pid};");
        assert!(
            folded
                .lines()
                .any(|l| l.contains(&root) && l.contains("burn_leaf")),
            "no stack of {thread} under `pid {pid}`:\n{folded}"
        );
    }
    assert!(
        folded.lines().all(|l| l.contains(";pid ")),
        "every stack is under its process:\n{folded}"
    );
    // `--process PID` keeps that process alone; a pid not recorded is a clear error
    // naming those that were.
    let o = run_profile(&[
        "report",
        "-i",
        s(&out),
        "--folded",
        "-",
        "--per-thread",
        "--process",
        &b.pid().to_string(),
    ]);
    ok(&o);
    let only_b = stdout(&o);
    assert!(only_b.lines().any(|l| l.contains(";wb;")), "{only_b}");
    assert!(!only_b.lines().any(|l| l.contains(";wa;")), "{only_b}");
    let o = run_profile(&["report", "-i", s(&out), "--pid", "1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no process is named `1` or has that pid")
            && stderr(&o).contains(&format!("({})", a.pid())),
        "{}",
        stderr(&o)
    );
}

/// `-t TID` samples only that thread: not its process's other threads.
#[test]
fn tid_records_only_the_chosen_threads() {
    let dir = scratch();
    let out = dir.path().join("x.prof");
    let target = Target::start(&threads_bin(), &["one:5:5", "two:5:5", "three:5:5"]);
    std::thread::sleep(Duration::from_millis(100));
    let tids = tids_by_name(target.pid());
    let chosen = format!("{},{}", tids["one"], tids["three"]);
    let o = run_profile(&[
        "record",
        "-t",
        &chosen,
        "-d",
        "2",
        "-F",
        "499",
        "-o",
        s(&out),
    ]);
    ok(&o);
    let rec = read(&out);
    assert_eq!(rec.meta.tids, [tids["one"], tids["three"]]);
    let by_thread = samples_by_thread(&model(&out));
    assert!(
        by_thread.get("one").is_some_and(|&n| n > 10),
        "{by_thread:?}"
    );
    assert!(
        by_thread.get("three").is_some_and(|&n| n > 10),
        "{by_thread:?}"
    );
    let names: Vec<&String> = by_thread.keys().collect();
    assert_eq!(by_thread.len(), 2, "only the chosen threads: {names:?}");
    assert!(
        rec.samples
            .iter()
            .all(|x| x.tid == tids["one"] || x.tid == tids["three"])
    );
}

/// `-c PERIOD`: a sample every PERIOD ns of the thread's CPU time, so its sample count
/// is its CPU time (the kernel's own clock) over the period. `-g` and
/// `--call-graph dwarf,SIZE` as perf writes them.
#[test]
fn count_sets_the_period_in_cpu_nanoseconds() {
    let dir = scratch();
    let out = dir.path().join("x.prof");
    let target = Target::start(&threads_bin(), &["busy:50:0"]);
    let period = 2_000_000u64;
    ok(&run_profile(&[
        "record",
        "-g",
        "--call-graph",
        "dwarf,8192",
        "-p",
        &target.pid().to_string(),
        "-c",
        &period.to_string(),
        "-d",
        "2",
        "-q",
        "-o",
        s(&out),
    ]));
    let rec = read(&out);
    assert_eq!(rec.meta.sample_period_ns, period);
    assert_eq!(rec.meta.frequency_hz, 500);
    assert_eq!(rec.meta.call_graph, profile::format::CallGraph::Dwarf);
    assert_eq!(rec.meta.stack_size, 8192);
    let p = model(&out);
    let busy: Vec<_> = p
        .samples
        .iter()
        .filter(|x| p.thread(x.thread).name == "busy")
        .collect();
    let cpu_ns: u64 = busy.iter().map(|x| x.weight).sum();
    let stacks = busy
        .iter()
        .filter(|x| frame_names(&p, x) != ["[unsampled]"])
        .count() as f64;
    let expected = cpu_ns as f64 / period as f64;
    assert!(expected > 30.0, "the thread ran {cpu_ns} ns");
    assert!(
        (stacks - expected).abs() < expected * 0.15,
        "{stacks} samples for {cpu_ns} ns of CPU at one per {period} ns (expected {expected:.0})"
    );
}

/// Perf names a PLT stub `memcpy@plt`: so does profile, and not `_init` (the last
/// symbol before the PLT, zero-sized) for time in the stub.
#[test]
fn plt_stubs_are_named_like_perf() {
    let dir = scratch();
    let out = dir.path().join("x.prof");
    let bin = build_c("plt.c", &["-O2", "-g", "-fno-builtin"]);
    let target = Target::start(&bin, &[]);
    // A sample per 0.1 ms of CPU: the stub is one instruction in a dozen.
    let pid = target.pid().to_string();
    ok(&run_profile(&[
        "record",
        "-p",
        &pid,
        "-d",
        "2",
        "-c",
        "100000",
        "-q",
        "-o",
        s(&out),
    ]));
    let p = model(&out);
    let mut in_stub = 0;
    for x in &p.samples {
        let f = frame_names(&p, x);
        assert!(!f.iter().any(|n| n == "_init"), "{f:?}");
        if f.last().is_some_and(|n| n == "memcpy@plt") {
            assert!(
                f.ends_with(&["main".into(), "copy_loop".into(), "memcpy@plt".into()]),
                "{f:?}"
            );
            in_stub += 1;
        }
    }
    assert!(
        in_stub >= 3,
        "{in_stub} of {} samples in memcpy@plt",
        p.samples.len()
    );
}

/// `--call-graph fp` on code built without frame pointers: the kernel's walk stops or
/// runs off into data at once; those stacks end in `[truncated: no frame pointer]`,
/// never at a bare `[unknown]` root or silently short. With frame pointers the same
/// chains are whole and unmarked, frame for frame: the hot leaf `level_c` has no
/// frame of its own (gcc leaves leaves without one), and a sample in `level_a`'s
/// prologue is taken before its frame exists; the walk from either skips the caller,
/// which the sampled function's CFI puts back.
#[test]
fn fp_stacks_cut_by_frameless_code_are_marked_truncated() {
    let dir = scratch();
    let cut = "[truncated: no frame pointer]";
    for (flags, frameless) in [
        (&["-O2", "-g", "-fomit-frame-pointer"][..], true),
        (&["-O2", "-g", "-fno-omit-frame-pointer"][..], false),
    ] {
        let out = dir.path().join(format!("fp-{frameless}.prof"));
        let target = Target::start(&build_c("chains.c", flags), &["worker"]);
        record_pid(target.pid(), "2", "999", &out, &["--call-graph", "fp"]);
        let p = model(&out);
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for x in &p.samples {
            if p.thread(x.thread).name != "worker" {
                continue;
            }
            let f = frame_names(&p, x);
            assert!(!f.iter().any(|n| n.contains("[unknown]")), "{f:?}");
            // The user frames below the clone entry, whose own caller the walk may
            // or may not find.
            let user: Vec<&str> = (p.stack(x.stack).iter())
                .filter(|&&id| p.function(id).class != profile::profile::FrameClass::Kernel)
                .map(|&id| p.function(id).name.as_str())
                .skip_while(|n| *n == "clone3")
                .collect();
            let chain = [
                "start_thread",
                "worker_main",
                "level_a",
                "level_b",
                "level_c",
            ];
            let kind = if f[0] == cut {
                // Cut where the sample was: in a level, or (rarely) in the worker's
                // own loop between calls (`[cut, start_thread, worker_main]`, once
                // in a suite run).
                assert!(
                    f.iter().skip(1).any(|n| chain.contains(&n.as_str())),
                    "{f:?}"
                );
                "cut"
            } else if f[0] == "[unsampled]" {
                "unsampled"
            } else if user.len() >= 2 && chain.starts_with(&user) {
                "whole"
            } else {
                panic!("frameless={frameless}: neither whole nor marked: {f:?}");
            };
            *counts.entry(kind).or_default() += 1;
        }
        let (whole, marked) = (
            counts.get("whole").copied().unwrap_or(0),
            counts.get("cut").copied().unwrap_or(0),
        );
        if frameless {
            assert!(marked > 20 && marked > whole * 4, "{counts:?}");
        } else {
            assert!(whole > 20 && marked * 10 < whole, "{counts:?}");
        }
    }
}

/// Attach without --children to a shell whose child does the work: the summary says
/// that the child's samples were left out and how to keep them, and nothing else
/// about it (no advice to sample more often). The shell starts its child only once
/// profile has opened its events (any delay would do on an idle machine, none is
/// certain on a loaded one).
#[test]
fn attach_without_children_says_only_that() {
    let dir = scratch();
    let out = dir.path().join("x.prof");
    let go = dir.path().join("go");
    let script = format!(
        "echo ready; while [ ! -e {} ]; do sleep 0.02; done; {} --exit-after 1.5 child:50:0 >/dev/null; exec sleep 30",
        go.display(),
        threads_bin().display()
    );
    let target = Target::start(std::path::Path::new("/bin/sh"), &["-c", &script]);
    let profile = std::process::Command::new(profile_bin())
        .args([
            "record",
            "-p",
            &target.pid().to_string(),
            "-d",
            "4",
            "-o",
            s(&out),
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Sampling has begun once the recording's file exists (counting the recorder's
    // perf fds was not enough: with the BPF copy, each CPU's `bpf-output` event is
    // open before the shell's events, and the shell's child could start unseen).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !out.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::write(&go, "").unwrap();
    let o = profile.wait_with_output().unwrap();
    ok(&o);
    let err = stderr(&o);
    assert!(
        err.contains("samples of processes the target started; pass --children"),
        "{err}"
    );
    assert!(!err.contains("hint:"), "{err}");
}
