//! `profile diff` on real recordings of tests/data/diff/bench.c (three functions of
//! equal fixed work; `--slower f2:30` gives f2 30% more): the same workload compares
//! as no regression pair after pair, the slower variant fails with exit 3 naming f2,
//! launch mode follows `sh -c` into the benchmark it starts, and attach mode keeps a
//! child's samples only with `--children`. Plus the diff's own errors.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::common::*;

/// ~1.5 s of CPU per run; at -F 1999 about 3000 samples, enough to see f2's share
/// rise by 18% (30% more work) through sampling noise with room to spare.
const ROUNDS: &str = "1000";
const HZ: &str = "1999";

fn bench() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixtures/diff");
    std::fs::create_dir_all(dir).unwrap();
    build_c("diff/bench.c", &["-O2", "-g"])
}

/// Records `BENCH --rounds N ARGS` at -F 1999, launched directly: the recorder
/// opened its events on the benchmark's thread and varies their period. (Started by
/// `sh -c`, the benchmark would be sampled through copies inherited from the shell's
/// events, which keep the period drawn at its fork for its whole life: a draw
/// commensurate with its 1.25 ms rounds skews its shares; docs/accounting.md.)
fn record_bench(out: &Path, args: &[&str]) {
    record_rounds(out, ROUNDS, args);
}

/// [`record_bench`] with `rounds` rounds.
fn record_rounds(out: &Path, rounds: &str, args: &[&str]) {
    let bin = bench();
    let mut argv = vec!["record", "-q", "-F", HZ, "-o", s(out), "--", s(&bin)];
    argv.extend(["--rounds", rounds]);
    argv.extend(args);
    ok(&run_profile(&argv));
}

/// Records `sh -c 'BENCH --rounds N; :'` (the trailing `:` keeps the shell from
/// exec'ing, so the benchmark is its child process).
fn record_via_sh(out: &Path) {
    let script = format!("{} --rounds {ROUNDS} >/dev/null; :", bench().display());
    ok(&run_profile(&[
        "record",
        "-q",
        "-F",
        HZ,
        "-o",
        s(out),
        "--",
        "sh",
        "-c",
        &script,
    ]));
}

/// Five recordings of the unchanged workload, shared by the tests (10 distinct pairs).
fn baselines() -> &'static [PathBuf] {
    static RUNS: OnceLock<Vec<PathBuf>> = OnceLock::new();
    RUNS.get_or_init(|| {
        let dir = scratch().keep();
        (0..5)
            .map(|i| {
                let out = dir.join(format!("base{i}.prof"));
                record_bench(&out, &[]);
                out
            })
            .collect()
    })
}

fn diff(args: &[&str]) -> std::process::Output {
    let mut v = vec!["diff"];
    v.extend_from_slice(args);
    run_profile(&v)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn launch_mode_follows_sh_into_the_benchmark() {
    let dir = scratch();
    let rec = &dir.path().join("sh.prof");
    record_via_sh(rec);
    let p = model(rec);
    let names: Vec<&str> = p.functions.iter().map(|f| f.name.as_str()).collect();
    for f in ["f1", "f2", "f3", "main"] {
        assert!(names.contains(&f), "{f} missing: {names:?}");
    }
    // The benchmark's samples come from a process of its own, named after it, not
    // from the shell that started it.
    let bench_pids: Vec<u32> = p
        .threads
        .iter()
        .filter(|t| t.name == "bench-O2g" || t.name.starts_with("bench"))
        .map(|t| t.pid)
        .collect();
    assert!(!bench_pids.is_empty(), "{:?}", p.threads);
    let started_by_sh = read(rec).thread_events.iter().any(|e| {
        matches!(e, profile::format::ThreadEvent::Start { pid, ppid, .. }
            if bench_pids.contains(pid) && pid != ppid)
    });
    assert!(started_by_sh, "no fork of the benchmark recorded");
    let o = run_profile(&["report", "-i", s(rec)]);
    ok(&o);
    for f in ["f1", "f2", "f3"] {
        assert!(stdout(&o).contains(f), "{}", stdout(&o));
    }
}

/// The acceptance check: two recordings of the same workload are no regression, for
/// the 10 pairs of five recordings (at most 2 false alarms: the gate's 5% allows
/// that), at the default settings and a 10% gate.
#[test]
fn the_same_workload_compares_as_no_regression_ten_times() {
    let runs = baselines();
    let mut alarms = Vec::new();
    let mut pairs = 0;
    for i in 0..runs.len() {
        for j in i + 1..runs.len() {
            // Alternate the direction so both orders are tried.
            let (a, b) = if (i + j) % 2 == 0 { (i, j) } else { (j, i) };
            let o = diff(&[s(&runs[a]), s(&runs[b]), "--fail-on-regression", "10"]);
            pairs += 1;
            match o.status.code() {
                Some(0) => {}
                Some(3) => alarms.push(stdout(&o)),
                _ => panic!("diff failed: {}", stderr(&o)),
            }
        }
    }
    eprintln!("false alarms: {} of {pairs}", alarms.len());
    assert_eq!(pairs, 10);
    // The gate promises at most 5% (--alpha) a diff; with one run a side, a loaded
    // machine's spread on top of the samples' reached it once in a clean-clone CI run
    // (f1 +10.6%, interval [+0.2%, +22.0%]). Ten diffs at 5% raise 3 alarms or more
    // 1.2% of the time; at the 1 + 1 rate measured (docs/ci.md, under 4%), 0.6%. A
    // gate that alarms on 30% of the pairs fails here 62% of the time.
    assert!(alarms.len() <= 2, "false alarms:\n{}", alarms.join("\n"));
    // Several runs per side (their spread measured) pass too.
    let o = diff(&[
        "--base",
        s(&runs[0]),
        "--base",
        s(&runs[1]),
        "--base",
        s(&runs[2]),
        "--new",
        s(&runs[3]),
        "--new",
        s(&runs[4]),
        "--fail-on-regression",
        "10",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains("NEW 2 vs BASE 3 runs"),
        "{}",
        stdout(&o)
    );
    // The machine's interrupt time, set apart from the functions, on its own line.
    assert!(stdout(&o).contains("interrupts: BASE "), "{}", stdout(&o));
}

/// One run a side must find f2's 30% more work every time. At the baselines' 1,000
/// rounds (some 2,200 samples a run) it did about 91 runs in 100: f2's share rises
/// 18%, four standard errors of the two runs' difference, and the gate wants 2.5 of
/// them and a point estimate of at least 10% (a suite run found it inconclusive). At
/// 3,000 rounds a side (some 6,600 samples) the rise is seven standard errors and
/// the estimate falls under 10% about once in 1,000 runs.
#[test]
fn thirty_percent_more_work_in_one_function_fails_and_names_it() {
    let dir = scratch();
    let slow = dir.path().join("slow.prof");
    record_rounds(&slow, "3000", &["--slower", "f2:30"]);
    let base = &dir.path().join("base.prof");
    record_rounds(base, "3000", &[]);
    let svg = dir.path().join("diff.svg");
    let o = diff(&[
        s(base),
        s(&slow),
        "--fail-on-regression",
        "10",
        "--flamegraph",
        s(&svg),
    ]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(3), "{out}{}", stderr(&o));
    assert!(
        out.starts_with("profile diff: REGRESSION: f2 (self"),
        "{out}"
    );
    let f2 = out.lines().find(|l| l.ends_with(" f2")).unwrap();
    assert!(f2.contains("REGRESSION") && f2.contains("] @"), "{f2}");
    for other in ["f1", "f3", "main"] {
        assert!(
            !out.lines()
                .any(|l| l.ends_with(&format!(" {other}")) && l.contains("REGRESSION")),
            "{other} flagged:\n{out}"
        );
    }
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.contains("NEW vs BASE: red = more in NEW"));
    assert!(svg.contains("f2 ("), "f2 not in the flame graph");

    // The same verdict as JSON and markdown.
    let o = diff(&[s(base), s(&slow), "--fail-on-regression", "10", "--json"]);
    assert_eq!(o.status.code(), Some(3));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["regression"], true);
    let regs: Vec<&str> = j["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["verdict"] == "regression")
        .map(|r| r["function"].as_str().unwrap())
        .collect();
    assert!(
        !regs.is_empty() && regs.iter().all(|&f| f == "f2"),
        "{regs:?}"
    );
    // The first row is the whole run (untested with one run a side), then f2.
    assert_eq!(j["rows"][0]["function"], "[whole run]");
    assert_eq!(j["rows"][0]["verdict"], "small");
    let r = j["rows"][1].clone();
    let [lo, hi] = [r["interval_pct"][0].as_f64(), r["interval_pct"][1].as_f64()];
    assert!(lo.unwrap() > 0.0 && hi.unwrap() > r["change_pct"].as_f64().unwrap());
    let md = dir.path().join("comment.md");
    let o = diff(&[
        s(base),
        s(&slow),
        "--fail-on-regression",
        "10",
        "--format",
        "markdown",
        "-o",
        s(&md),
    ]);
    assert_eq!(o.status.code(), Some(3));
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(
        md.starts_with("### :x: profile diff: REGRESSION: f2"),
        "{md}"
    );
    assert!(
        md.contains("| `f2` |") && md.contains("**REGRESSION**"),
        "{md}"
    );
    // Without a gate the rise is reported, and the exit status is 0.
    let o = diff(&[s(base), s(&slow)]);
    ok(&o);
    assert!(stdout(&o).contains("slower"), "{}", stdout(&o));
}

/// Attach to a shell that starts the benchmark after attach: without --children only
/// the shell's own samples are kept (and the rest counted), with it the benchmark's.
#[test]
fn attach_keeps_children_only_with_children() {
    // The benchmark starts on a go sent once the recorder has attached (a fixed sleep
    // lost the race on a loaded machine), and the recording ends once it is over (the
    // shell has become `sleep`).
    let script = format!(
        "trap 'go=1' USR1; echo ready; while [ -z \"$go\" ]; do sleep 0.02; done; \
         {} --rounds 300 >/dev/null; exec sleep 30",
        bench().display()
    );
    for children in [false, true] {
        let dir = scratch();
        let out = dir.path().join("x.prof");
        let target = Target::start(Path::new("/bin/sh"), &["-c", &script]);
        let extra: &[&str] = if children { &["--children"] } else { &[] };
        let rec = Recorder::attach(target.pid(), "999", &out, extra);
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(target.pid() as i32, libc::SIGUSR1) };
        let comm = format!("/proc/{}/comm", target.pid());
        let limit = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while std::fs::read_to_string(&comm).unwrap_or_default().trim() != "sleep" {
            assert!(
                std::time::Instant::now() < limit,
                "the benchmark did not end"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let o = rec.stop_with(libc::SIGINT);
        ok(&o);
        let p = model(&out);
        let has_f2 = p.functions.iter().any(|f| f.name == "f2");
        assert_eq!(has_f2, children, "children={children}: {}", stderr(&o));
        if children {
            assert!(!stderr(&o).contains("left out"), "{}", stderr(&o));
        } else {
            assert!(p.threads.iter().all(|t| t.pid == target.pid()));
            assert!(
                stderr(&o).contains("samples of processes the target started; pass --children"),
                "{}",
                stderr(&o)
            );
        }
    }
}

#[test]
fn folded_inputs_compare_and_errors_exit_2() {
    let dir = scratch();
    let a = dir.path().join("a.folded");
    let b = dir.path().join("b.folded");
    // Sample counts (1000 each would read as one sample of a 1000 ns period).
    std::fs::write(&a, "main;f1 1001\nmain;f2 1000\nmain;f3 999\n").unwrap();
    std::fs::write(&b, "main;f1 1000\nmain;f2 1400\nmain;f3 1000\n").unwrap();
    let o = diff(&[s(&a), s(&b), "--fail-on-regression", "10"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("profile diff: REGRESSION: f2"));
    ok(&diff(&[s(&a), s(&a), "--fail-on-regression", "0"]));

    let fails = |args: &[&str], needle: &str| {
        let o = diff(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"));
    };
    let missing = dir.path().join("missing.prof");
    fails(&[s(&a), s(&missing)], "cannot read");
    let junk = dir.path().join("junk");
    std::fs::write(&junk, "hello world\n").unwrap();
    fails(&[s(&a), s(&junk)], "junk:1: expected a folded stack");
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "").unwrap();
    fails(&[s(&a), s(&empty)], "has no samples");
    fails(&[s(&a)], "give both BASE and NEW");
    // One side weighted by a period, the other sample counts: told, not guessed.
    let weighted = dir.path().join("w.folded");
    std::fs::write(&weighted, "main;f1 3003003\nmain;f2 1001001\n").unwrap();
    fails(&[s(&a), s(&weighted)], "--folded-unit");
    fails(
        &[s(&baselines()[0]), s(&a), "--absolute"],
        "--absolute cannot compare",
    );
}

#[test]
fn help_states_the_gate_and_the_method() {
    let o = run_profile(&["diff", "--help"]);
    ok(&o);
    let help = stdout(&o);
    for needle in [
        "Examples:",
        "NEW/BASE - 1 >= PCT/100",
        "Holm",
        "Satterthwaite",
        "Gate: with --fail-on-regression PCT",
        "whole run",
        "Exit status: 0 no regression",
    ] {
        assert!(help.contains(needle), "{needle} missing from diff --help");
    }
}

/// Several runs per side (issue: a CI gate that never passes by accident): the same
/// build split 2 + 3 ten different ways never fails, and three runs of the slower
/// variant against three of the baseline name f2.
#[test]
fn several_runs_pass_the_same_build_and_flag_a_real_slowdown() {
    let runs = baselines();
    let mut alarms = Vec::new();
    let mut splits = 0;
    for i in 0..runs.len() {
        for j in i + 1..runs.len() {
            let mut args = vec!["--fail-on-regression", "10"];
            for (k, r) in runs.iter().enumerate() {
                args.push(if k == i || k == j { "--base" } else { "--new" });
                args.push(s(r));
            }
            let o = diff(&args);
            splits += 1;
            match o.status.code() {
                Some(0) => {}
                Some(3) => alarms.push(stdout(&o)),
                _ => panic!("diff failed: {}", stderr(&o)),
            }
        }
    }
    assert_eq!(splits, 10);
    assert!(alarms.is_empty(), "false alarms:\n{}", alarms.join("\n"));

    let dir = scratch();
    let mut args = vec!["--fail-on-regression".to_owned(), "10".to_owned()];
    for (k, base) in runs.iter().take(3).enumerate() {
        let slow = dir.path().join(format!("slow{k}.prof"));
        record_bench(&slow, &["--slower", "f2:30"]);
        args.extend(["--base".into(), s(base).to_owned()]);
        args.extend(["--new".into(), s(&slow).to_owned()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = diff(&args);
    assert_eq!(o.status.code(), Some(3), "{}", stdout(&o));
    // Three runs a side on one machine compare CPU time: f2 rose 30%, and the whole
    // run 10% (a regression too when its estimate reaches the gate).
    let head = stdout(&o).lines().next().unwrap_or_default().to_owned();
    assert!(
        head.starts_with("profile diff: REGRESSION: ") && head.contains("f2 (self"),
        "{}",
        stdout(&o)
    );
    assert!(
        stdout(&o).contains("functions by CPU time per run"),
        "{}",
        stdout(&o)
    );
}

/// One run per side of a 1.5 s benchmark at the default 99 Hz (about 150 samples):
/// a 30% gate cannot be checked, and the diff says so (INCONCLUSIVE, exit 0; exit 4
/// with --fail-if-inconclusive) instead of "no regression".
///
/// The benchmark is launched directly, so the recorder varies its sampling period.
/// Started by `sh -c` it would be sampled through copies inherited from the shell's
/// events, which keep one period for its whole life: a draw commensurate with its
/// 1.25 ms rounds skews its shares (40/38/20%), and 3 pairs in 25 gave a false
/// REGRESSION at the default alpha (docs/ci.md, "One run per side"). And the test asks
/// alpha 0.1%: what it checks is the verdict on too few samples, not the alpha.
#[test]
fn a_short_default_rate_benchmark_is_inconclusive() {
    let dir = scratch();
    let (a, b) = (dir.path().join("a.prof"), dir.path().join("b.prof"));
    for out in [&a, &b] {
        ok(&run_profile(&[
            "record",
            "-q",
            "-o",
            s(out),
            "--",
            s(&bench()),
            "--rounds",
            ROUNDS,
        ]));
    }
    let gate = [
        s(&a),
        s(&b),
        "--fail-on-regression",
        "30",
        "--alpha",
        "0.001",
    ];
    let o = diff(&gate);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("profile diff: INCONCLUSIVE"), "{out}");
    assert!(out.contains("inconclusive: "), "{out}");
    assert!(out.contains("samples per side"), "{out}");
    assert!(out.lines().count() < 15, "{out}");
    let o = diff(&[&gate[..], &["--fail-if-inconclusive"]].concat());
    assert_eq!(o.status.code(), Some(4), "{}", stdout(&o));
}

/// perf's own folded files: `perf record -e task-clock -c 1001001` then `perf script`
/// collapsed by inferno weight each stack by its samples' periods. Two runs of the
/// same build compare as no regression (read as samples of 1001001 ns, said on
/// stderr); as raw counts they were millions of samples and a +0.7% change failed.
#[test]
fn perf_folded_files_weighted_by_period_compare_without_false_alarms() {
    if std::process::Command::new("perf")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(
            std::env::var_os("PROFILE_REQUIRE_CONSUMERS").is_none(),
            "perf is missing"
        );
        eprintln!("skipped: perf is not installed");
        return;
    }
    let dir = scratch();
    let mut folded = Vec::new();
    for k in 0..2 {
        let data = dir.path().join(format!("{k}.data"));
        let rec = std::process::Command::new("perf")
            .args([
                "record",
                "-q",
                // No build-id cache and no build-id pass at the end: Debian's perf
                // 6.1 crashes in it at times (util/build-id.c:1010, stack smashing).
                "-N",
                "-B",
                "-e",
                "task-clock",
                "-c",
                "1001001",
                "-g",
                "-o",
            ])
            .arg(&data)
            .arg(bench())
            .args(["--rounds", ROUNDS])
            .output()
            .unwrap();
        assert!(
            rec.status.success(),
            "{}",
            String::from_utf8_lossy(&rec.stderr)
        );
        let script = std::process::Command::new("perf")
            .args(["script", "-i"])
            .arg(&data)
            .output()
            .unwrap();
        assert!(script.status.success());
        let mut out = Vec::new();
        use inferno::collapse::Collapse;
        inferno::collapse::perf::Folder::default()
            .collapse(&script.stdout[..], &mut out)
            .unwrap();
        let path = dir.path().join(format!("{k}.folded"));
        std::fs::write(&path, &out).unwrap();
        folded.push(path);
    }
    let o = diff(&[s(&folded[0]), s(&folded[1]), "--fail-on-regression", "10"]);
    assert_eq!(o.status.code(), Some(0), "{}\n{}", stdout(&o), stderr(&o));
    assert!(
        stderr(&o).contains("compared as samples of 1001001 ns"),
        "{}",
        stderr(&o)
    );
    // Interrupt time (perf names kernel frames bare) is set apart, on its own line.
    assert!(stdout(&o).contains("interrupts: BASE "), "{}", stdout(&o));
    // Told they are samples, the same files are millions of "samples".
    let o = diff(&[
        s(&folded[0]),
        s(&folded[1]),
        "--folded-unit",
        "samples",
        "--fail-on-regression",
        "0",
    ]);
    assert_ne!(o.status.code(), Some(2), "{}", stderr(&o));
}
