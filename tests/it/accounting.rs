//! Exact per-thread CPU accounting (docs/accounting.md): every thread's CPU time in the
//! profile (its samples plus its `[unsampled]` remainder) equals the thread's own
//! CLOCK_THREAD_CPUTIME_ID, which the target prints as each thread ends, while another
//! CPU-bound process competes for the cores (started by the test, so contention is part
//! of the test rather than an accident of the machine's load).

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use crate::common::*;

/// tid -> (name, CPU nanoseconds by the thread's own clock).
type Truth = HashMap<u32, (String, u64)>;
/// tid -> CPU nanoseconds in the profile.
type PerThread = HashMap<u32, u64>;

/// A CPU-bound process beside the target for the whole test; killed when dropped.
fn competitor() -> Target {
    Target::start(&build_c("accounting.c", &["-O2"]), &["busy:1:120000"])
}

/// The truth the target printed: tid -> (name, its own CPU nanoseconds).
fn truth(stdout: &str) -> Truth {
    stdout
        .lines()
        .filter_map(|l| {
            let mut p = l.strip_prefix("cpu ")?.split_whitespace();
            let tid = p.next()?.parse().ok()?;
            let ns = p.next()?.parse().ok()?;
            Some((tid, (p.next()?.to_owned(), ns)))
        })
        .collect()
}

/// The profile's CPU time per tid, and the tids whose only stack is `[unsampled]`.
fn profile_cpu(path: &Path) -> (PerThread, PerThread) {
    let p = model(path);
    let mut cpu: HashMap<u32, u64> = HashMap::new();
    let mut unsampled: HashMap<u32, u64> = HashMap::new();
    for s in &p.samples {
        let tid = p.thread(s.thread).tid;
        *cpu.entry(tid).or_default() += s.weight;
        let frames = p.stack(s.stack);
        if frames.len() == 1 && p.function(frames[0]).name == "[unsampled]" {
            *unsampled.entry(tid).or_default() += s.weight;
        }
    }
    (cpu, unsampled)
}

/// Records `cmd` at `hz` and checks every thread it reported against the profile:
/// within 1%, or 1 ms for threads under 100 ms, plus `slack_ns` for the main thread
/// of a process that starts many threads (see docs/accounting.md: task-clock does
/// not count the context switch itself, a few microseconds per switch, which a
/// thread's own clock does). Returns the truth and the profile's figures.
fn check(hz: &str, cmd: &[&str], main_slack_ns: u64) -> (Truth, PerThread, PerThread) {
    let _busy = competitor();
    let dir = scratch();
    let out = dir.path().join("acct.prof");
    let mut args = vec!["record", "-q", "-F", hz, "-o", out.to_str().unwrap(), "--"];
    args.extend_from_slice(cmd);
    let o = run_profile(&args);
    ok(&o);
    let truth = truth(&stdout(&o));
    assert!(!truth.is_empty(), "the target reported no thread");
    let rec = read(&out);
    assert_eq!(
        rec.summary.as_ref().map(|s| s.cpu_accounting.as_str()),
        Some("exact"),
        "this kernel ({}) should give exact counts",
        rec.meta.kernel
    );
    let (cpu, unsampled) = profile_cpu(&out);
    let mut bad = Vec::new();
    for (tid, (name, want)) in &truth {
        let got = cpu.get(tid).copied().unwrap_or(0);
        let mut allowed = (want / 100).max(1_000_000);
        if name == "main" {
            allowed += main_slack_ns;
        }
        if got.abs_diff(*want) > allowed {
            bad.push(format!(
                "{name} (tid {tid}): profile {:.3} ms, own clock {:.3} ms",
                got as f64 / 1e6,
                *want as f64 / 1e6
            ));
        }
    }
    assert!(bad.is_empty(), "at -F {hz}:\n{}", bad.join("\n"));
    (truth, cpu, unsampled)
}

fn accounting_bin() -> String {
    build_c("accounting.c", &["-O2", "-g"])
        .to_str()
        .unwrap()
        .to_owned()
}

#[test]
fn three_busy_threads_on_two_cores_match_their_own_clocks() {
    let bin = accounting_bin();
    for hz in ["99", "999"] {
        check(hz, &[&bin, "busy:3:600"], 0);
    }
}

/// Threads of 2 ms (under one 10 ms period) are never sampled at -F 99: their whole
/// time is their `[unsampled]` frame, and it is exact.
#[test]
fn short_threads_are_exact_and_unsampled_below_one_period() {
    let bin = accounting_bin();
    let (truth, cpu, unsampled) = check("99", &[&bin, "short:60:2"], 1_000_000);
    let short: Vec<_> = truth
        .iter()
        .filter(|(_, (name, _))| name.starts_with("short"))
        .collect();
    assert_eq!(short.len(), 60);
    for (tid, (name, _)) in short {
        assert_eq!(
            unsampled.get(tid),
            cpu.get(tid),
            "{name} ran under one period: all of its time is [unsampled]"
        );
    }
}

/// A thread that wakes for 0.3 ms bursts, at both rates.
#[test]
fn a_bursty_thread_matches_its_own_clock() {
    let bin = accounting_bin();
    for hz in ["99", "999"] {
        check(hz, &[&bin, "bursty:100:300:2000"], 0);
    }
}

/// A process tree launched through `sh -c`: two processes, each with its threads.
#[test]
fn a_process_tree_through_sh_matches_every_threads_clock() {
    let bin = accounting_bin();
    let script = format!("{bin} busy:2:400 & {bin} short:20:2 bursty:30:300:1000; wait");
    let (truth, _, _) = check("99", &["sh", "-c", &script], 1_000_000);
    assert_eq!(truth.len(), 2 + 1 + 20 + 1 + 1, "{truth:?}");
}

/// `report --json` gives each thread's exact CPU time, and the table the coverage line.
#[test]
fn json_threads_carry_exact_cpu_and_report_prints_coverage() {
    let bin = accounting_bin();
    let dir = scratch();
    let out = dir.path().join("acct.prof");
    let o = Command::new(profile_bin())
        .args(["record", "-q", "-o", out.to_str().unwrap(), "--", &bin])
        .args(["busy:2:300", "short:10:2"])
        .output()
        .unwrap();
    ok(&o);
    let truth = truth(&stdout(&o));
    let o = run_profile(&["report", "-i", out.to_str().unwrap(), "--json"]);
    ok(&o);
    let j: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let mut cpu: HashMap<u64, u64> = HashMap::new();
    for t in j["threads"].as_array().unwrap() {
        *cpu.entry(t["tid"].as_u64().unwrap()).or_default() += t["cpu_ns"].as_u64().unwrap();
    }
    for (tid, (name, want)) in &truth {
        let got = cpu[&u64::from(*tid)];
        assert!(
            got.abs_diff(*want) <= (want / 100).max(1_000_000),
            "{name}: json {got} ns, own clock {want} ns"
        );
    }
    assert_eq!(j["summary"]["cpu_accounting"], "exact");
    let o = run_profile(&["report", "-i", out.to_str().unwrap()]);
    ok(&o);
    let table = stdout(&o);
    let line = table
        .lines()
        .find(|l| l.starts_with("CPU time: "))
        .unwrap_or_else(|| panic!("no coverage line in:\n{table}"));
    assert!(
        line.contains("each thread's own count") && line.contains("the rest is [unsampled]"),
        "{line}"
    );
}

/// A thread that spends exactly 25% of every millisecond of its CPU time in `split_a`:
/// with a fixed period of 1.001 ms (-F 999) its samples would stay in lock-step with
/// that rhythm (perf: 9% in split_a; docs/accounting.md); varied periods give the
/// true split.
#[test]
fn shares_within_a_thread_are_unbiased_against_a_rhythm_near_the_period() {
    let bin = accounting_bin();
    let _busy = competitor();
    let dir = scratch();
    let out = dir.path().join("split.prof");
    let o = run_profile(&[
        "record",
        "-q",
        "-F",
        "999",
        "-o",
        out.to_str().unwrap(),
        "--",
        &bin,
        "split:2500:25",
    ]);
    ok(&o);
    let p = model(&out);
    let (mut a, mut b) = (0u64, 0u64);
    for s in &p.samples {
        let names: Vec<&str> = p
            .stack(s.stack)
            .iter()
            .map(|&f| p.function(f).name.as_str())
            .collect();
        if names.contains(&"split_a") {
            a += s.weight;
        } else if names.contains(&"split_b") {
            b += s.weight;
        }
    }
    assert!(a + b > 2_000_000_000, "split_a {a} ns, split_b {b} ns");
    let share = a as f64 * 100.0 / (a + b) as f64;
    assert!(
        (share - 25.0).abs() < 4.0,
        "split_a got {share:.1}% of the thread, truth 25%"
    );
}
