//! `profile report` on recordings checked into tests/data/report (made with the real
//! tool: `threads.prof` from tests/data/threads.c with two threads, one renamed, and
//! kernel and inlined frames; `demo.prof` from demo/main.rs with three Rust
//! threads). Golden outputs sit beside them (`PROFILE_BLESS=1` rewrites them; review
//! the diff). Exports are checked by their real consumers: `go tool pprof` and the
//! speedscope file-format schema (installed by .ci/run; a test without its consumer is
//! skipped, or fails when PROFILE_REQUIRE_CONSUMERS is set). Every filter has a test
//! that fails if the filter does nothing.

mod consumers;
mod svg;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use profile::profile::Profile;

use crate::common::*;

pub(super) fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/report")
}

/// Runs `profile report ARGS` in tests/data/report (so `-i threads.prof` is stable).
pub(super) fn report(args: &[&str]) -> Output {
    Command::new(profile_bin())
        .arg("report")
        .args(args)
        .current_dir(data_dir())
        .output()
        .expect("run profile")
}

pub(super) fn report_ok(args: &[&str]) -> String {
    let o = report(args);
    ok(&o);
    assert_eq!(
        stderr(&o),
        "",
        "stderr is not a terminal: no progress, no noise"
    );
    stdout(&o)
}

/// Compares `actual` with tests/data/report/NAME, or rewrites it with PROFILE_BLESS=1.
fn golden(name: &str, actual: &str) {
    let path = data_dir().join(name);
    if std::env::var_os("PROFILE_BLESS").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        expected == actual,
        "{name} differs from the golden file (run with PROFILE_BLESS=1 and review the diff):\n--- expected\n{expected}\n--- actual\n{actual}"
    );
}

#[test]
fn golden_outputs() {
    let cases: &[(&str, &[&str])] = &[
        ("threads.top.txt", &["-i", "threads.prof"]),
        ("threads.top.json", &["-i", "threads.prof", "--json"]),
        (
            "threads.per-thread.folded",
            &["-i", "threads.prof", "--per-thread", "--folded", "-"],
        ),
        (
            "threads.reverse-per-process.folded",
            &[
                "-i",
                "threads.prof",
                "--per-process",
                "--reverse",
                "--folded",
                "-",
            ],
        ),
        (
            "threads.lines.top.txt",
            &["-i", "threads.prof", "--lines", "--top", "6"],
        ),
        (
            "threads.speedscope.json",
            &["-i", "threads.prof", "--speedscope", "-"],
        ),
        ("demo.top.txt", &["-i", "demo.prof", "--top", "15"]),
    ];
    for (name, args) in cases {
        let mut out = report_ok(args);
        if name.ends_with(".speedscope.json") {
            // Written on one line; pretty here so that a diff is readable.
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            out = serde_json::to_string_pretty(&v).unwrap() + "\n";
        }
        golden(name, &out);
    }
}

fn folded(args: &[&str]) -> Vec<(String, u64)> {
    let mut all = vec!["-i", "threads.prof", "--folded", "-"];
    all.extend_from_slice(args);
    report_ok(&all)
        .lines()
        .map(|l| {
            let (s, n) = l.rsplit_once(' ').unwrap();
            (s.to_owned(), n.parse().unwrap())
        })
        .collect()
}

fn total(lines: &[(String, u64)]) -> u64 {
    lines.iter().map(|(_, n)| n).sum()
}

pub(super) fn json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    serde_json::from_str(&report_ok(&all)).unwrap()
}

fn model() -> Profile {
    crate::common::model(&data_dir().join("threads.prof"))
}

#[test]
fn thread_filter_keeps_that_threads_samples() {
    let p = model();
    let by_name = samples_by_thread(&p);
    let all = total(&folded(&[]));
    let gamma = folded(&["--per-thread", "--thread", "gamma"]);
    assert!(
        gamma.iter().all(|(s, _)| s.starts_with("gamma;")),
        "{gamma:?}"
    );
    assert_eq!(total(&gamma), by_name["gamma"]);
    assert!(total(&gamma) < all);
    // By tid: beta and gamma are one thread under two names.
    let tid = p.threads.iter().find(|t| t.name == "beta").unwrap().tid;
    let by_tid = folded(&["--thread", &tid.to_string()]);
    assert_eq!(total(&by_tid), by_name["beta"] + by_name["gamma"]);
    // Repeatable.
    let two = folded(&["--thread", "alpha", "--thread", "gamma"]);
    assert_eq!(total(&two), by_name["alpha"] + by_name["gamma"]);
}

#[test]
fn time_filter_keeps_the_window() {
    let p = model();
    let in_window = |a: u64, b: u64| {
        p.samples
            .iter()
            .filter(|s| s.time >= a && s.time < b)
            .count() as u64
    };
    let first = total(&folded(&["--time", "..0.4"]));
    let rest = total(&folded(&["--time", "0.4.."]));
    let middle = total(&folded(&["--time", "0.2..0.6"]));
    assert_eq!(first, in_window(0, 400_000_000));
    assert_eq!(middle, in_window(200_000_000, 600_000_000));
    assert_eq!(first + rest, p.samples.len() as u64);
    assert!(first > 0 && rest > 0 && middle < p.samples.len() as u64);
    // The rename happened at 0.5 s: gamma has no samples before it.
    let early = json(&["-i", "threads.prof", "--time", "..0.45"]);
    let names: Vec<&str> = early["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(!names.contains(&"gamma"), "{names:?}");
}

fn top_function(v: &serde_json::Value) -> String {
    v["functions"][0]["name"].as_str().unwrap().to_owned()
}

#[test]
fn include_and_exclude_change_the_top_function() {
    assert_eq!(top_function(&json(&["-i", "threads.prof"])), "burn_leaf");
    let kernel = json(&["-i", "threads.prof", "--include", "^entry_SYSCALL"]);
    assert_ne!(top_function(&kernel), "burn_leaf");
    assert!(kernel["totals"]["samples"].as_u64().unwrap() < 20);
    let without = json(&["-i", "threads.prof", "--exclude", "burn_leaf"]);
    assert_ne!(top_function(&without), "burn_leaf");
    let names: Vec<&str> = without["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(!names.contains(&"burn_leaf"));
    // Whole samples go: what is left is the samples without burn_leaf.
    let all = json(&["-i", "threads.prof"]);
    let leaf = all["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "burn_leaf")
        .unwrap()["total_samples"]
        .as_u64()
        .unwrap();
    assert_eq!(
        without["totals"]["samples"].as_u64().unwrap() + leaf,
        all["totals"]["samples"].as_u64().unwrap()
    );
}

#[test]
fn focus_reroots_stacks() {
    let all = folded(&[]);
    let focused = folded(&["--focus", "burn_middle"]);
    assert!(focused.iter().all(|(s, _)| s.starts_with("burn_middle")));
    assert_eq!(total(&focused), total(&all));
    // An inlined function cuts its location in two.
    let now = folded(&["--focus", "now", "--per-thread"]);
    assert!(!now.is_empty());
    for (s, _) in &now {
        let frames: Vec<&str> = s.split(';').collect();
        assert_eq!(frames[2], "now_[i]", "{s}");
    }
    assert!(total(&now) < total(&all));
    // A regular expression when no function has the exact name.
    let re = folded(&["--focus", "^burn_mid"]);
    assert_eq!(re, focused);
}

#[test]
fn lines_and_per_process() {
    let lines = folded(&["--lines"]);
    assert!(
        lines.iter().any(|(s, _)| s.contains("burn_leaf:")),
        "{lines:?}"
    );
    let p = model();
    let pid = p.threads[0].pid;
    let per_process = folded(&["--per-process"]);
    let root = format!("threads;pid {pid};");
    assert!(per_process.iter().all(|(s, _)| s.starts_with(&root)));
}

#[test]
fn bad_filters_are_errors() {
    for (args, want) in [
        (&["--thread", "nope"][..], "no thread is named `nope`"),
        (&["--time", "2..1"], "START..END"),
        (&["--include", "("], "regex"),
        (&["--focus", "no_such_function"], "no function is named"),
        (&["--time", "100.."], "left none of the"),
        (
            &["--folded", "-", "--json"],
            "more than one output goes to stdout",
        ),
        (&["--min-width", "200"], "percentage"),
    ] {
        let mut all = vec!["-i", "threads.prof"];
        all.extend_from_slice(args);
        let o = report(&all);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn several_outputs_in_one_command() {
    let dir = scratch();
    let f = |n: &str| dir.path().join(n).to_str().unwrap().to_owned();
    let out = report_ok(&[
        "-i",
        "threads.prof",
        "--flamegraph",
        &f("a.svg"),
        "--pprof",
        &f("a.pb.gz"),
        "--speedscope",
        &f("a.json"),
        "--json",
        &f("top.json"),
        "--top",
        "3",
    ]);
    // The table is the plain report's, cut to three rows.
    let table = report_ok(&["-i", "threads.prof", "--top", "3"]);
    assert_eq!(out, table);
    assert!(out.contains("burn_leaf"), "{out}");
    // Each file holds exactly what that output writes alone.
    let read = |n: &str| std::fs::read(dir.path().join(n)).unwrap();
    let alone = |args: &[&str]| {
        let mut all = vec!["-i", "threads.prof"];
        all.extend_from_slice(args);
        let o = report(&all);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        o.stdout
    };
    assert_eq!(read("a.svg"), alone(&["--flamegraph", "-"]));
    assert_eq!(read("a.pb.gz"), alone(&["--pprof", "-"]));
    assert_eq!(read("a.json"), alone(&["--speedscope", "-"]));
    let top: serde_json::Value = serde_json::from_slice(&read("top.json")).unwrap();
    let full: serde_json::Value = serde_json::from_slice(&alone(&["--json"])).unwrap();
    let names = |v: &serde_json::Value| -> Vec<String> {
        v["functions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap().to_owned())
            .collect()
    };
    // --top limits the JSON to the first three functions of the full list.
    assert_eq!(names(&top), names(&full)[..3]);
    assert_eq!(top["totals"], full["totals"]);
    assert_eq!(top["threads"], full["threads"]);
    // And they are what the table shows, in its order.
    for (row, name) in out.lines().skip(1).zip(names(&top)) {
        assert!(row.contains(&format!("  {name}")), "{row} / {name}");
    }
    // The SVG is a flame graph of this recording: titled with its command, with
    // the running function as a frame.
    let svg = String::from_utf8(read("a.svg")).unwrap();
    assert!(svg.contains("<title>burn_leaf"), "no burn_leaf frame");
    // The pprof profile is gzip.
    assert_eq!(read("a.pb.gz")[..2], [0x1f, 0x8b]);
}

/// The subtitle and footer name the target process, whatever the filters keep: here
/// the launched `sh`, while the filters keep only one of its children's threads.
#[test]
fn the_footer_pid_does_not_change_with_filters() {
    let bin = build_c("accounting.c", &["-O2"]);
    let dir = scratch();
    let out = dir.path().join("tree.prof");
    let script = format!("{0} busy:1:100 & {0} busy:1:200; wait", bin.display());
    ok(&run_profile(&[
        "record",
        "-q",
        "-o",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &script,
    ]));
    let input = out.to_str().unwrap();
    let pid_in = |args: &[&str]| {
        let mut all = vec!["-i", input, "--top", "3"];
        all.extend_from_slice(args);
        let out = report_ok(&all);
        let line = out
            .lines()
            .find(|l| l.contains("pid "))
            .unwrap_or_else(|| panic!("no pid in:\n{out}"))
            .to_owned();
        let digits: String = line
            .split("pid ")
            .nth(1)
            .unwrap()
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        digits.parse::<u32>().unwrap()
    };
    let p = crate::common::model(&out);
    let sh = read(&out).meta.pid.expect("the launched pid");
    assert_eq!(pid_in(&[]), sh);
    let child = p
        .threads
        .iter()
        .find(|t| t.pid != sh && t.name == "busy0")
        .expect("a child's thread");
    for args in [
        &["--thread", &child.tid.to_string()][..],
        &["--focus", "burn"],
    ] {
        assert_eq!(pid_in(args), sh, "{args:?}");
    }
}
