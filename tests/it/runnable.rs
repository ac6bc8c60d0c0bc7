//! `record --off-cpu` on a busy CPU (tests/data/busy.c): every thread pinned to one
//! CPU with two CPU hogs, so each wake-up queues for the CPU. Each thread reports its
//! own schedstat (run time, run-queue delay) as it exits; the recording must agree:
//! running and runnable against the kernel's account, every thread's states adding up
//! to its life, idle waits apart from contended locks.

use std::collections::HashMap;

use profile::profile::ThreadState;

use crate::common::*;

/// A thread's own account at its exit: run ns, run-queue delay ns, life ns.
struct Truth {
    name: String,
    run: f64,
    delay: f64,
    life: f64,
}

fn truths(path: &std::path::Path) -> HashMap<u32, Truth> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let n = |i: usize| f[i].parse::<f64>().unwrap();
            (
                f[1].parse().unwrap(),
                Truth {
                    name: f[0].to_owned(),
                    run: n(2),
                    delay: n(3),
                    life: n(4),
                },
            )
        })
        .collect()
}

/// Records busy.c for 2 s (launched); returns the recording, the threads' reports and
/// the recorder's stderr. A run whose rings overflowed (lost records: the figures
/// cannot be exact then, and the summary says so) is recorded again, once.
fn record_busy(dir: &std::path::Path) -> (std::path::PathBuf, HashMap<u32, Truth>, String) {
    let bin = build_c("busy.c", &["-O2", "-g", "-fno-omit-frame-pointer"]);
    let out = dir.join("busy.prof");
    let report = dir.join("busy.txt");
    let mut err = String::new();
    for attempt in 0..2 {
        let _sysctls = sysctl_lock().read();
        let o = run_profile(&[
            "record",
            "--off-cpu",
            "--call-graph",
            "fp",
            // Large rings: none lost while the whole suite loads the machine.
            "--mmap-pages",
            "2048",
            "-o",
            out.to_str().unwrap(),
            "--",
            bin.to_str().unwrap(),
            "2",
            report.to_str().unwrap(),
        ]);
        ok(&o);
        err = stderr(&o);
        if read(&out).lost == 0 || attempt == 1 {
            break;
        }
    }
    (out, truths(&report), err)
}

#[test]
fn runnable_running_and_life_agree_with_the_kernels_schedstat() {
    let dir = scratch();
    let (out, truth, err) = record_busy(dir.path());
    assert_eq!(truth.len(), 7, "every thread reported");
    // The recorder's own check: each thread's runnable time against the run-queue
    // delay the kernel's taskstats message gives at its exit (the 7 threads and
    // main), none off by more than 5% of its life or 30 ms.
    assert!(
        err.contains(
            "profile: off-CPU: runnable time of the 8 threads at their exit against the kernel's run-queue delay (schedstat)"
        ),
        "{err}"
    );
    let p = model(&out);
    let ms = 1e6;
    for (t, s) in p.threads.iter().zip(p.thread_states()) {
        let Some(k) = truth.get(&t.tid) else { continue };
        let name = &k.name;
        let got = |st: ThreadState| s[st as usize] as f64;
        let (run, runnable) = (got(ThreadState::Running), got(ThreadState::Runnable));
        let total: f64 = s.iter().map(|&v| v as f64).sum();
        let shown = format!(
            "{name}: running {:.1} ms (kernel {:.1}), runnable {:.1} ms (kernel {:.1}), \
             states {:.1} ms (life {:.1}): {s:?}",
            run / ms,
            k.run / ms,
            runnable / ms,
            k.delay / ms,
            total / ms,
            k.life / ms
        );
        assert!((run - k.run).abs() <= 0.02 * k.run + ms, "running: {shown}");
        assert!(
            (runnable - k.delay).abs() <= (30.0 * ms).max(0.05 * k.delay),
            "runnable: {shown}"
        );
        assert!((total - k.life).abs() <= 0.01 * k.life, "life: {shown}");
        // The wake-ups matter here: most of the sleeper's and the fighters' runnable
        // time follows a wake-up, not a preemption.
        // (9% of a fighter's life in a quiet CI run, 10-30% under load: 5% is the
        // bound that holds on both.)
        if name == "sleeper" || name.starts_with("fight") {
            assert!(runnable > 0.05 * k.life, "{shown}");
        }
        let share = |st: ThreadState| got(st) / total;
        if name.starts_with("fight") {
            assert!(share(ThreadState::Lock) > 0.1, "{shown}");
        }
        if name == "piper" {
            assert!(share(ThreadState::Io) > 0.5, "{shown}");
        }
        // Waiting on a condition variable for work is idle, not contention (only
        // re-taking the mutex after a signal is).
        if name == "waiter" {
            assert!(share(ThreadState::Wait) > 0.8, "{shown}");
            assert!(share(ThreadState::Lock) < 0.1, "{shown}");
        }
    }
}

/// A recording of busy.c made by the build before wake-ups and `wait` (format 2,
/// `--call-graph fp`, 0.3 s): it still reads, and its condition-variable waits (then
/// recorded as `lock`) show as `wait` from their user stack.
#[test]
fn recordings_from_before_the_wait_state_still_read() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/report/busy-offcpu-before-wait.prof");
    let rec = read(&path);
    assert!(rec.meta.off_cpu);
    assert!(rec.off_cpu.iter().all(|o| o.state != ThreadState::Wait));
    let p = model(&path);
    let by_name: HashMap<&str, [u64; ThreadState::COUNT]> = p
        .threads
        .iter()
        .zip(p.thread_states())
        .map(|(t, s)| (t.name.as_str(), s))
        .collect();
    let share = |name: &str, st: ThreadState| {
        let s = by_name[name];
        s[st as usize] as f64 / s.iter().sum::<u64>() as f64
    };
    assert!(share("waiter", ThreadState::Wait) > 0.9, "{by_name:?}");
    assert!(share("fight-a", ThreadState::Lock) > 0.2, "{by_name:?}");
    assert_eq!(share("fight-a", ThreadState::Wait), 0.0, "{by_name:?}");
    for args in [&["--json"][..], &["--timeline", "/dev/null"][..]] {
        let mut all = vec!["report", "-i", path.to_str().unwrap()];
        all.extend_from_slice(args);
        ok(&run_profile(&all));
    }
}

/// A thread blocked before the attach and for the whole recording (busy.c's main
/// thread, in pthread_join) has its stack, read from /proc as `dump` reads it, and
/// waiting for threads to end is idle: `wait`. Every thread's runnable time agrees
/// with the kernel's run-queue delay at the end (the recorder's own check).
#[test]
fn threads_blocked_at_the_attach_have_their_stack() {
    let dir = scratch();
    let bin = build_c("busy.c", &["-O2", "-g", "-fno-omit-frame-pointer"]);
    let report = dir.path().join("busy.txt");
    let mut cmd = std::process::Command::new(&bin);
    // Long enough for both recordings on a loaded machine; killed at the end.
    cmd.args(["60", report.to_str().unwrap()]);
    let target = Target::spawn(cmd);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = dir.path().join("attached.prof");
    let o = {
        let _sysctls = sysctl_lock().read();
        let pid = target.pid().to_string();
        run_profile(&[
            "record",
            "--off-cpu",
            // Small records and large rings: none lost on a loaded machine (lost
            // records are what the recorder's check would warn about).
            "--call-graph",
            "fp",
            "--mmap-pages",
            "2048",
            "-p",
            &pid,
            "-d",
            "1",
            "-F",
            "99",
            "-o",
            out.to_str().unwrap(),
        ])
    };
    ok(&o);
    // The recorder checks runnable against the kernel's run-queue delay at the end
    // (every thread is alive then): within 5% or 30 ms.
    let err = stderr(&o);
    assert!(
        err.contains("profile: off-CPU: runnable time of the 8 threads alive at the end"),
        "{err}"
    );
    // Again with DWARF stacks (the recorder loads unwind info only then): the whole
    // stack, as `dump` shows it.
    let dwarf = dir.path().join("dwarf.prof");
    {
        let _sysctls = sysctl_lock().read();
        record_pid(target.pid(), "0.5", "49", &dwarf, &["--off-cpu"]);
    }
    drop(target);
    let pid = read(&out).meta.pid.unwrap();
    let off_cpu_of_main = |path: &std::path::Path| -> Vec<Vec<String>> {
        stacks(path)
            .into_iter()
            .map(|(f, _)| f)
            .filter(|f| f.get(1) == Some(&format!("tid {pid}")))
            .collect()
    };
    let p = model(&out);
    let main = p.threads.iter().position(|t| t.tid == pid).unwrap();
    let states = p.thread_states()[main];
    let total: u64 = states.iter().sum();
    assert!(
        states[ThreadState::Wait as usize] as f64 > 0.95 * total as f64,
        "{states:?}"
    );
    let fp = off_cpu_of_main(&out);
    assert!(
        fp.iter()
            .any(|f| f.iter().any(|n| n.contains("futex_abstimed_wait"))
                && f.last().is_some_and(|l| l == "[off-cpu: wait]")),
        "{fp:?}"
    );
    let full = off_cpu_of_main(&dwarf);
    assert!(
        full.iter().any(|f| {
            f.iter().any(|n| n == "main")
                && f.iter()
                    .any(|n| n.contains("pthread_clockjoin") || n.contains("pthread_join"))
                && f.last().is_some_and(|l| l == "[off-cpu: wait]")
        }),
        "{full:?}"
    );
    // Idle the whole recording: --hide-idle leaves it out, and says so.
    let o = run_profile(&[
        "report",
        "-i",
        out.to_str().unwrap(),
        "--hide-idle",
        "--json",
    ]);
    ok(&o);
    assert!(
        stderr(&o).contains("1 of 8 threads idle for the whole recording left out"),
        "{}",
        stderr(&o)
    );
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let tids: Vec<u64> = v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["tid"].as_u64())
        .collect();
    assert!(!tids.contains(&u64::from(pid)), "{tids:?}");
    assert_eq!(tids.len(), 7, "{tids:?}");
}

/// A wait whose switch-out had no stack copy (the stack event samples at a bounded
/// rate) at a site no earlier wait had a stack for has its stack read from /proc
/// while it lasts (DWARF mode): busy.c's main thread, launched, blocked in
/// pthread_join for the whole recording, is under `main` and the join, never a bare
/// `[off-cpu: wait]`. The summary says how much of the time off the CPU has a stack.
#[test]
fn long_waits_without_a_stack_copy_have_their_stack() {
    let dir = scratch();
    let bin = build_c("busy.c", &["-O2", "-g", "-fno-omit-frame-pointer"]);
    let out = dir.path().join("dwarf.prof");
    let report = dir.path().join("busy.txt");
    let o = {
        let _sysctls = sysctl_lock().read();
        run_profile(&[
            "record",
            "--off-cpu",
            "-o",
            out.to_str().unwrap(),
            "--",
            bin.to_str().unwrap(),
            "1",
            report.to_str().unwrap(),
        ])
    };
    ok(&o);
    let err = stderr(&o);
    assert!(err.contains("% of the time off the CPU)"), "{err}");
    let pid = read(&out).meta.pid.unwrap();
    let main: Vec<Vec<String>> = stacks(&out)
        .into_iter()
        .map(|(f, _)| f)
        .filter(|f| f.get(1) == Some(&format!("tid {pid}")))
        .filter(|f| f.last().is_some_and(|l| l.starts_with("[off-cpu:")))
        .collect();
    assert!(!main.is_empty(), "{err}");
    for f in &main {
        assert!(f.len() > 3, "a bare off-CPU frame: {f:?}\n{err}");
    }
    assert!(
        main.iter().any(|f| {
            f.iter().any(|n| n == "main")
                && f.iter()
                    .any(|n| n.contains("pthread_clockjoin") || n.contains("pthread_join"))
                && f.last().is_some_and(|l| l == "[off-cpu: wait]")
        }),
        "{main:?}"
    );
}
