//! `profile record` against real targets: attach and launch, thread discovery and
//! names, CPU-time shares checked against the kernel's own schedstat, stopping.

use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::*;
use profile::format::Recording;

fn threads_bin() -> std::path::PathBuf {
    build_c("threads.c", &["-O2", "-g", "-fno-omit-frame-pointer"])
}

/// The acceptance check: per-thread sample shares match each thread's CPU time
/// from schedstat over the same interval, within 3 percentage points, and a thread
/// that burns twice the CPU of another gets about twice the samples.
#[test]
fn attach_samples_threads_in_proportion_to_their_cpu_time() {
    let dir = scratch();
    let out = dir.path().join("x.prof");
    // The threads take turns, so their CPU split is 20:10:5 by construction.
    let target = Target::start(
        &threads_bin(),
        &["--relay", "heavy:20:0", "light:10:0", "third:5:0"],
    );
    let pid = target.pid();
    std::thread::sleep(Duration::from_millis(200));
    let tids = tids_by_name(pid);
    let before: HashMap<String, u64> = tids
        .iter()
        .map(|(n, &t)| (n.clone(), schedstat_ns(pid, t).unwrap()))
        .collect();
    let steal_before = steal_ns();
    let o = run_profile(&[
        "record",
        "--pid",
        &pid.to_string(),
        "-d",
        "3",
        "-F",
        "999",
        "-o",
        out.to_str().unwrap(),
    ]);
    let after: HashMap<String, u64> = tids
        .iter()
        .map(|(n, &t)| (n.clone(), schedstat_ns(pid, t).unwrap()))
        .collect();
    let steal = steal_since(steal_before);
    ok(&o);
    let rec = read(&out);
    assert_eq!(
        rec.lost, 0,
        "no samples may be lost at 999 Hz with three threads"
    );
    let p = model(&out);
    // Each thread's CPU time in the profile: its samples' weights (periods vary
    // within 25% per event, so sample counts alone are not proportional).
    let mut samples: HashMap<String, u64> = HashMap::new();
    for s in &p.samples {
        *samples.entry(p.thread(s.thread).name.clone()).or_default() += s.weight;
    }
    let total_samples: u64 = samples.values().sum();
    let cpu: HashMap<&str, u64> = ["heavy", "light", "third"]
        .iter()
        .map(|&n| (n, after[n] - before[n]))
        .collect();
    let total_cpu: u64 = cpu.values().sum();
    for name in ["heavy", "light", "third"] {
        let got = samples.get(name).copied().unwrap_or(0) as f64 * 100.0 / total_samples as f64;
        let want = cpu[name] as f64 * 100.0 / total_cpu as f64;
        eprintln!("{name}: {got:.2}% of profile CPU, {want:.2}% of CPU (schedstat)");
        assert!(
            (got - want).abs() < 3.0,
            "{name}: {got:.2}% of profile CPU vs {want:.2}% of CPU time"
        );
    }
    let ratio = samples["heavy"] as f64 / samples["light"] as f64;
    assert!(
        (1.7..2.3).contains(&ratio),
        "heavy/light = {ratio:.2}, want about 2"
    );
    // Exact accounting (docs/accounting.md): each sample weighs its thread's CPU time
    // since its previous sample, and each thread's rest is one [unsampled] sample, so
    // the weights add up to each thread's own clock over the recording, whatever the
    // contention: the CPU time the events counted plus the context switches, which
    // the counts miss (a few microseconds each; well under 1% here), less the
    // hypervisor's steal, which the counts have and the clocks do not (once 2.3 ms
    // under of 1.37 s in a suite run).
    let summary = rec.summary.as_ref().unwrap();
    assert_eq!(
        summary.cpu_accounting,
        profile::format::CpuAccounting::Exact
    );
    let weights: u64 = p.samples.iter().map(|s| s.weight).sum();
    let counted = summary.cpu_time_ns as f64;
    eprintln!("weights {weights} ns of {counted:.0} ns counted");
    assert!(
        (counted * 0.999 - steal as f64..=counted * 1.01).contains(&(weights as f64)),
        "weights {weights} ns vs {counted} ns counted ({steal} ns stolen at most)"
    );
    // The counted time lies within the schedstat window, which also spans attach and
    // detach (how much longer depends on the machine's load, so only the bound).
    assert!(
        counted <= total_cpu as f64 * 1.001,
        "counted more CPU time than schedstat saw"
    );
}

#[test]
fn threads_created_after_attach_and_renames_are_recorded() {
    let dir = scratch();
    let out = dir.path().join("x.prof");
    // Once the recorder has attached, the go: `late` starts 0.7 s after it, and
    // `early` renames itself after 300 ms of its own CPU time since it (at 499 Hz,
    // some 150 samples as `early` first, however loaded the machine is).
    let target = Target::start(
        &threads_bin(),
        &["--go-on-usr1", "early:5:5:0:300:renamed", "late:5:5:700"],
    );
    let rec = Recorder::attach(target.pid(), "499", &out, &[]);
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(target.pid() as i32, libc::SIGUSR1) };
    wait_thread_cpu(target.pid(), "renamed", Duration::from_millis(150));
    wait_thread_cpu(target.pid(), "late", Duration::from_millis(150));
    rec.stop();
    let samples = samples_by_thread(&model(&out));
    for name in ["early", "renamed", "late"] {
        assert!(
            samples.get(name).copied().unwrap_or(0) > 20,
            "{name} missing: {samples:?}"
        );
    }
}

#[test]
fn launch_mode_profiles_from_the_start_and_returns_the_exit_code() {
    let dir = scratch();
    let out = dir.path().join("x.prof");
    let bin = threads_bin();
    let o = run_profile(&[
        "record",
        "-F",
        "499",
        "-o",
        out.to_str().unwrap(),
        "--",
        bin.to_str().unwrap(),
        "--exit-after",
        "1",
        "--exit-code",
        "7",
        "w1:5:0",
        "w2:5:0",
    ]);
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
    let rec = read(&out);
    assert_eq!(rec.summary.as_ref().unwrap().exit_code, Some(7));
    assert_eq!(
        rec.summary.as_ref().unwrap().stop_reason,
        profile::format::StopReason::TargetExited
    );
    assert_eq!(rec.meta.command[0], bin.to_str().unwrap());
    let samples = samples_by_thread(&model(&out));
    assert!(samples.get("w1").copied().unwrap_or(0) > 30, "{samples:?}");
    assert!(samples.get("w2").copied().unwrap_or(0) > 30, "{samples:?}");
    // The program's own mappings were seen from its exec on.
    assert!(rec.mappings.iter().any(|m| m.path == bin.to_str().unwrap()));
}

#[test]
fn a_target_that_exits_ends_the_recording() {
    let dir = scratch();
    let out = dir.path().join("x.prof");
    // The target exits 1.5 s after the go, which comes once the recorder has attached
    // (attaching on a loaded machine took longer than the target lived).
    let target = Target::start(
        &threads_bin(),
        &["--go-on-usr1", "--exit-after", "1.5", "w:5:0"],
    );
    let rec = Recorder::attach(target.pid(), "499", &out, &[]);
    let started = Instant::now();
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(target.pid() as i32, libc::SIGUSR1) };
    ok(&rec.wait());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    let rec = read(&out);
    assert_eq!(
        rec.summary.as_ref().unwrap().stop_reason,
        profile::format::StopReason::TargetExited
    );
    assert_samples_of_worker(&out, target.pid(), true);
}

/// The recording at `out` holds the target's samples, all of them, mostly of its
/// burning thread `w` and, when `named`, in `burn_leaf` (or `now`) called from
/// `burn_middle` from `burn_top`.
fn assert_samples_of_worker(out: &std::path::Path, pid: u32, named: bool) {
    let rec = read(out);
    // A loaded machine (the suite runs beside other builds) gives the target less
    // CPU: only a few samples are certain.
    assert!(rec.samples.len() >= 5, "{} samples", rec.samples.len());
    assert!(rec.samples.iter().all(|s| s.pid == pid));
    if let Some(summary) = &rec.summary {
        assert_eq!(
            summary.samples,
            rec.samples.len() as u64,
            "samples lost in the flush"
        );
    }
    let p = model(out);
    let by_thread = samples_by_thread(&p);
    let w = by_thread.get("w").copied().unwrap_or(0);
    assert!(
        w as f64 >= 0.9 * p.samples.len() as f64,
        "thread w has {w} of {} samples: {by_thread:?}",
        p.samples.len()
    );
    // Every sample is in the report.
    let folded = stacks(out);
    assert_eq!(
        folded.iter().map(|(_, n)| n).sum::<u64>(),
        rec.samples.len() as u64
    );
    if named {
        // [unsampled] stands for CPU time without a sample: it has no stack to check.
        let unsampled: u64 = folded
            .iter()
            .filter(|(f, _)| f[0] == "w" && f.last().is_some_and(|l| l == "[unsampled]"))
            .map(|(_, n)| n)
            .sum();
        let w = w - unsampled;
        let in_chain: u64 = folded
            .iter()
            .filter(|(f, _)| {
                // burn_middle spends a good part of its time reading the thread's
                // clock (a system call), its other callee.
                let user = user_part(f);
                user.windows(3).any(|w| {
                    w[..2] == ["burn_top", "burn_middle"]
                        && (w[2] == "burn_leaf" || w[2] == "now_[i]")
                })
            })
            .map(|(_, n)| n)
            .sum();
        assert!(
            in_chain as f64 >= 0.8 * w as f64,
            "{in_chain} of {w} samples of w in burn_top -> burn_middle -> burn_leaf or now: {folded:?}"
        );
    }
}

/// Ctrl-C and SIGTERM stop the recording, flush it and exit 0; the target runs on.
#[test]
fn signals_stop_recording_cleanly_and_leave_the_target_running() {
    let target = Target::start(&threads_bin(), &["w:5:5"]);
    let pid = target.pid();
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let dir = scratch();
        let out = dir.path().join("x.prof");
        let rec = Recorder::attach(pid, "99", &out, &[]);
        // 20 samples' worth of the worker's CPU time at 99 Hz.
        wait_thread_cpu(pid, "w", Duration::from_millis(200));
        let o = rec.stop_with(signal);
        ok(&o);
        let rec = read(&out);
        assert_eq!(rec.damage, None);
        assert_eq!(
            rec.summary.as_ref().unwrap().stop_reason,
            profile::format::StopReason::Signal
        );
        assert_samples_of_worker(&out, pid, true);
        assert_target_unharmed(pid);
    }
}

/// Killed outright, profile cannot flush: what it wrote so far stays readable, and the
/// kernel drops its events with its file descriptors.
#[test]
fn sigkill_leaves_a_readable_recording() {
    let target = Target::start(&threads_bin(), &["w:5:5"]);
    let pid = target.pid();
    let dir = scratch();
    let out = dir.path().join("x.prof");
    let rec = Recorder::attach(pid, "999", &out, &[]);
    // Chunks are flushed every half second: kill it once more than 20 samples are on
    // disk (however long a loaded machine takes to give the target that much CPU).
    let limit = Instant::now() + Duration::from_secs(60);
    while Recording::read_file(&out).map_or(0, |r| r.samples.len()) <= 20 {
        assert!(Instant::now() < limit, "no 20 samples on disk in 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    rec.stop_with(libc::SIGKILL);
    let rec = read(&out);
    assert!(rec.summary.is_none());
    assert!(rec.samples.len() > 20, "{} samples", rec.samples.len());
    // Names are resolved at the end: a killed recorder leaves none (issue 14), but
    // every sample it wrote reports, under the thread that took it.
    let o = run_profile(&["report", "-i", out.to_str().unwrap(), "--folded", "-"]);
    ok(&o);
    let reported: u64 = stdout(&o)
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(reported, rec.samples.len() as u64);
    assert_samples_of_worker(&out, pid, false);
    assert_target_unharmed(pid);
}

/// The target is running (not stopped) and still accumulating CPU time.
fn assert_target_unharmed(pid: u32) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let state = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap();
    assert!(state == "R" || state == "S", "target state {state}");
    let tid = tids_by_name(pid)["w"];
    let a = schedstat_ns(pid, tid).unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    let b = schedstat_ns(pid, tid).unwrap();
    assert!(
        b - a > 10_000_000,
        "target thread stalled: {} ns of CPU in 1 s",
        b - a
    );
}

#[test]
fn a_truncated_recording_still_reports() {
    let dir = scratch();
    let out = dir.path().join("x.prof");
    let target = Target::start(&threads_bin(), &["w:5:5"]);
    // Small chunks: flushes every 500 ms, so 2 s gives several chunks.
    record_pid(target.pid(), "2", "999", &out, &[]);
    let full = read(&out).samples.len();
    let bytes = std::fs::read(&out).unwrap();
    let cut = dir.path().join("cut.prof");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let o = run_profile(&["report", "-i", cut.to_str().unwrap(), "--folded", "-"]);
    ok(&o);
    assert!(stderr(&o).contains("ends inside a chunk"), "{}", stderr(&o));
    let kept: u64 = stdout(&o)
        .lines()
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert!(kept > 0 && (kept as usize) < full, "kept {kept} of {full}");
}

/// Frame-pointer stacks in fp mode reach the thread's root. A frameless leaf hides
/// its caller from a frame-pointer walk (GCC omits the frame in such leaves even with
/// -fno-omit-frame-pointer), so the chain is leaf, burn_top, worker, start_thread: at
/// least four frames.
#[test]
fn fp_mode_records_the_user_callchain() {
    let dir = scratch();
    let out = dir.path().join("x.prof");
    let target = Target::start(&threads_bin(), &["w:5:5"]);
    record_pid(target.pid(), "1", "999", &out, &["--call-graph", "fp"]);
    let rec = read(&out);
    let libc_root = |s: &profile::format::Sample| {
        let frames: Vec<_> = rec.stack_frames(s.stack).collect();
        let root = rec.frames[*frames.last().unwrap() as usize];
        let in_libc = root
            .mapping
            .is_some_and(|m| rec.mappings[m as usize].path.contains("libc.so"));
        frames.len() >= 4 && in_libc
    };
    let deep = rec.samples.iter().filter(|s| libc_root(s)).count();
    assert!(
        deep * 10 > rec.samples.len() * 9,
        "{deep} of {} samples reach libc with 4+ frames",
        rec.samples.len()
    );
}

/// A full disk ends the recording with an error; what was written stays readable and
/// the target is untouched.
#[test]
fn a_full_disk_keeps_what_was_written() {
    let dir = scratch();
    let mnt = dir.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    let st = Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            "size=24k",
            "tmpfs",
            mnt.to_str().unwrap(),
        ])
        .status()
        .unwrap();
    assert!(st.success(), "mounting a small tmpfs needs root");
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(mnt.clone());
    let target = Target::start(&threads_bin(), &["a:5:0", "b:5:0", "w:5:5"]);
    let out = mnt.join("x.prof");
    let o = run_profile(&[
        "record",
        "-p",
        &target.pid().to_string(),
        "-d",
        "20",
        "-F",
        "999",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("No space left on device"),
        "{}",
        stderr(&o)
    );
    let rec = read(&out);
    assert!(!rec.samples.is_empty(), "nothing readable was kept");
    assert_target_unharmed(target.pid());
}

/// On a terminal, a live status line; in a pipe (CI logs), only the final summary;
/// with -q, nothing.
#[test]
fn status_line_only_on_a_terminal() {
    let target = Target::start(&threads_bin(), &["w:5:5"]);
    let dir = scratch();
    let out = dir.path().join("x.prof");
    let args = format!("record -p {} -d 1.2 -o {}", target.pid(), out.display());
    // `script` gives profile a pseudo-terminal and copies what it writes.
    let tty = Command::new("script")
        .args(["-qec", &format!("{} {args}", profile_bin()), "/dev/null"])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&tty.stdout);
    assert!(
        shown.contains("\r\x1b[Kprofile: recording pid"),
        "{shown:?}"
    );
    assert!(shown.contains("samples from 1 thread"), "{shown:?}");

    let piped = run_profile(&args.split(' ').collect::<Vec<_>>());
    ok(&piped);
    let err = stderr(&piped);
    assert!(
        !err.contains("recording pid") && !err.contains('\r'),
        "{err:?}"
    );
    assert!(err.contains("samples from 1 thread"), "{err:?}");

    let quiet = run_profile(&[&args.split(' ').collect::<Vec<_>>()[..], &["-q"]].concat());
    ok(&quiet);
    assert_eq!(stderr(&quiet), "");
}

/// `-d` in launch mode stops sampling on time, asks the command still running to end,
/// and the recording's span is the sampling window (regression: it used to end when
/// the command had been reaped and the frames named).
#[test]
fn duration_in_launch_mode_bounds_the_recording() {
    let dir = scratch();
    let out = dir.path().join("x.prof");
    let bin = threads_bin();
    let o = run_profile(&[
        "record",
        "-d",
        "1",
        "-q",
        "-o",
        out.to_str().unwrap(),
        "--",
        bin.to_str().unwrap(),
        "w:5:0",
    ]);
    // The command was still running: it was sent SIGTERM, and its status is ours.
    assert_eq!(o.status.code(), Some(128 + libc::SIGTERM), "{}", stderr(&o));
    let rec = read(&out);
    // From the first sample, soon after sampling began (setting up before it, slow on
    // a loaded machine, is not part of the duration); the loop wakes every 100 ms.
    let first = rec.samples.iter().map(|s| s.time).min().expect("samples");
    let span = rec.summary.as_ref().unwrap().end_time_ns - first;
    assert!(
        (900_000_000..1_600_000_000).contains(&span),
        "span {span} ns"
    );
    assert_eq!(
        rec.summary.unwrap().stop_reason,
        profile::format::StopReason::Duration
    );
}
