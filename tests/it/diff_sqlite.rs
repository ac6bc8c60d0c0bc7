//! The CI gate on a real C program (issue 32): SQLite, built by
//! benches/diff/sqlite.sh in a small version. BASE looks rows up through an index,
//! NEW scans the table for each lookup (the rise is in sqlite3VdbeExec's own time);
//! an A/A pair (BASE against BASE) and a uniform slowdown (the whole workload run
//! twice, every function's share unchanged). Three runs a side, interleaved, at -F
//! 999, as docs/ci.md recommends. The verdicts: NEW is a regression naming
//! sqlite3VdbeExec (self), the A/A pair passes, the uniform slowdown fails on the
//! whole run's CPU time, and the default output stays under 15 lines.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::common::*;

/// The recordings, made once: `DIR/{base,new,aa,slow}-{1,2,3}.prof`. None when
/// sqlite3 is missing (a failure under PROFILE_REQUIRE_CONSUMERS, as .ci/run sets).
fn case() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        if Command::new("sqlite3").arg("-version").output().is_err() {
            assert!(
                std::env::var_os("PROFILE_REQUIRE_CONSUMERS").is_none(),
                "sqlite3 is missing (apt-get install sqlite3)"
            );
            eprintln!("skipped: sqlite3 is not installed");
            return None;
        }
        let dir = scratch().keep();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/diff/sqlite.sh");
        // About 0.3 s of CPU a BASE run (300 samples), 1.2 s a NEW one: the lookups'
        // scans are most of NEW's time, so sqlite3VdbeExec's self time rises
        // several-fold, far past run-to-run noise on a loaded machine.
        let o = Command::new("bash")
            .arg(&script)
            .arg(&dir)
            .envs([
                ("PROFILE", profile_bin()),
                ("ROWS", "100000"),
                ("AGG", "2"),
                ("LOOKUPS", "60"),
                ("REPS", "4"),
                ("SLOW", "200"),
                ("COMPARE", "0"),
            ])
            .output()
            .unwrap();
        ok(&o);
        Some(dir)
    })
    .as_deref()
}

/// `profile diff` of the three BASE runs against three of `new`, with `extra` args.
fn diff(dir: &Path, new: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["diff".to_owned()];
    for i in 1..=3 {
        args.push("--base".into());
        args.push(dir.join(format!("base-{i}.prof")).display().to_string());
        args.push("--new".into());
        args.push(dir.join(format!("{new}-{i}.prof")).display().to_string());
    }
    args.extend(["--fail-on-regression".into(), "10".into()]);
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_profile(&args)
}

fn rows(o: &std::process::Output) -> Vec<serde_json::Value> {
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    j["rows"].as_array().unwrap().clone()
}

fn verdict(rows: &[serde_json::Value], function: &str, metric: &str) -> String {
    rows.iter()
        .find(|r| r["function"] == function && r["metric"] == metric)
        .map_or_else(
            || "absent".into(),
            |r| r["verdict"].as_str().unwrap().into(),
        )
}

/// Each recording's CPU time, for a failure's message: `(name, ms)`.
fn whole_runs(dir: &Path) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for side in ["base", "slow"] {
        for i in 1..=3 {
            let name = format!("{side}-{i}");
            let o = run_profile(&[
                "report",
                "-i",
                &dir.join(format!("{name}.prof")).display().to_string(),
                "--json",
            ]);
            let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
            out.push((name, j["totals"]["cpu_ns"].as_f64().unwrap_or(-1.0) / 1e6));
        }
    }
    out
}

#[test]
fn sqlite_without_its_index_is_a_regression_of_sqlite3vdbeexec() {
    let Some(dir) = case() else { return };
    let o = diff(dir, "new", &[]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(3), "{out}{}", stderr(&o));
    assert!(
        out.starts_with("profile diff: REGRESSION: the whole run (CPU time +"),
        "{out}"
    );
    assert!(out.lines().count() < 15, "{out}");
    assert!(out.contains("full table: --verbose"), "{out}");
    let o = diff(dir, "new", &["--json"]);
    assert_eq!(o.status.code(), Some(3));
    let rows = rows(&o);
    assert_eq!(verdict(&rows, "sqlite3VdbeExec", "self"), "regression");
    assert_eq!(verdict(&rows, "[whole run]", "total"), "regression");
    // The full table names it too.
    let o = diff(dir, "new", &["--verbose", "--top", "200"]);
    assert!(
        stdout(&o).lines().any(|l| l.starts_with("self ")
            && l.ends_with(" sqlite3VdbeExec")
            && l.contains("REGRESSION")),
        "{}",
        stdout(&o)
    );
}

/// BASE against BASE. At the default 5% a correct gate fails one A/A pair in 20 at
/// most; this test must pass every run, so it asks for 0.5%: a false alarm here is a
/// broken test, not bad luck.
#[test]
fn sqlite_a_a_passes() {
    let Some(dir) = case() else { return };
    let o = diff(dir, "aa", &["--alpha", "0.005"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).lines().count() < 15, "{}", stdout(&o));
}

/// The whole workload three times: every share as it was, the whole run's CPU time
/// tripled. +50% came out inconclusive once in a CI run, and doubled once too (stop
/// 36): with the suite's other tests loading the machine, one run of 0.3 s can take
/// far more CPU time than its siblings (a 2-vCPU VM's clocks count what the host
/// takes), and Welch's t on 3 runs a side has 2 degrees of freedom or so. On one
/// machine that fails the gate by default.
#[test]
fn sqlite_uniform_slowdown_fails_on_the_whole_run() {
    let Some(dir) = case() else { return };
    let o = diff(dir, "slow", &["--json"]);
    let whole = |o: &std::process::Output| format!("{}\n{:?}", stderr(o), whole_runs(dir));
    assert_eq!(o.status.code(), Some(3), "{}", whole(&o));
    assert_eq!(verdict(&rows(&o), "[whole run]", "total"), "regression");
    // With functions compared by share, the whole run still fails.
    let o = diff(dir, "slow", &["--shares", "--json"]);
    assert_eq!(o.status.code(), Some(3), "{}", whole(&o));
    let rows = rows(&o);
    assert_eq!(verdict(&rows, "[whole run]", "total"), "regression");
    let o = diff(dir, "slow", &["--format", "markdown"]);
    let md = stdout(&o);
    assert!(
        md.starts_with("### :x: profile diff: REGRESSION: the whole run"),
        "{md}"
    );
    assert!(
        md.contains("<details><summary>Full table</summary>"),
        "{md}"
    );
}
