//! One sample count per recording, the same in every output (issue 50): a recording
//! once said 1507 samples in its summary and 1539, 1552 and 1538 in the report, the
//! JSON and the SVG, because each output counted what it was given (the `[unsampled]`
//! remainders, which are time, not samples; off-CPU intervals). Every output now
//! counts the CPU samples the kernel took, as the record summary does, and in an
//! off-CPU recording names the intervals `off-CPU intervals` beside them.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::common::*;

/// The number before `what` in `text` (`352 samples`), the first time it appears.
fn number_before(text: &str, what: &str) -> Option<u64> {
    let at = text.find(what)?;
    let head = text[..at].trim_end();
    let digits: String = head
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    digits.parse().ok()
}

/// Records two busy threads of tests/data/threads.c (launched, 2 s, each thread
/// sleeping between bursts); returns the record summary (stderr).
fn record(out: &Path, extra: &[&str]) -> String {
    let bin = build_c("threads.c", &["-O2", "-g", "-pthread"]);
    let mut args = vec!["record", "-F", "199", "-o", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.extend_from_slice(&[
        "--",
        bin.to_str().unwrap(),
        "--exit-after",
        "2",
        "alpha:50:10",
        "beta:30:20",
    ]);
    let o = run_profile(&args);
    ok(&o);
    stderr(&o)
}

fn report(args: &[&str]) -> String {
    let mut all = vec!["report"];
    all.extend_from_slice(args);
    let o = run_profile(&all);
    ok(&o);
    stdout(&o)
}

/// Every output's count of CPU samples, by output (folded stacks count wall time, not
/// samples, in an off-CPU recording: `wall`).
fn counts(rec: &Path, dir: &Path, wall: bool) -> Vec<(&'static str, u64)> {
    let input = rec.to_str().unwrap();
    let path = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    let (svg, pprof, speedscope, otlp) = (
        path("x.svg"),
        path("x.pb.gz"),
        path("x.speedscope.json"),
        path("x.otlp"),
    );
    let mut out = Vec::new();
    let table = report(&["-i", input]);
    out.push((
        "report table",
        number_before(&table, " samples").expect("a count in the footer"),
    ));
    if !wall {
        let folded = report(&["-i", input, "--folded", "-"]);
        let stacks: u64 = folded
            .lines()
            .filter(|l| !l.contains("[unsampled]"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum();
        out.push(("folded", stacks));
    }
    let json: Value = serde_json::from_str(&report(&["-i", input, "--json"])).unwrap();
    out.push(("json totals", json["totals"]["samples"].as_u64().unwrap()));
    out.push(("json summary", json["summary"]["samples"].as_u64().unwrap()));
    let threads = json["threads"].as_array().unwrap();
    let by_thread: u64 = threads.iter().map(|t| t["samples"].as_u64().unwrap()).sum();
    out.push(("json threads", by_thread));
    report(&[
        "-i",
        input,
        "--flamegraph",
        &svg,
        "--pprof",
        &pprof,
        "--speedscope",
        &speedscope,
        "--otlp",
        &otlp,
    ]);
    let svg = std::fs::read_to_string(&svg).unwrap();
    out.push((
        "svg",
        number_before(&svg, " samples").expect("a count in the subtitle"),
    ));
    let ss: Value = serde_json::from_slice(&std::fs::read(&speedscope).unwrap()).unwrap();
    let names = ss["profiles"].as_array().unwrap().iter();
    let per_thread: u64 = names
        .filter_map(|p| number_before(p["name"].as_str()?, " samples"))
        .sum();
    out.push(("speedscope", per_thread));
    if Command::new("go").arg("version").output().is_ok() {
        let o = Command::new("go")
            .args(["tool", "pprof", "-raw", &pprof])
            .output()
            .unwrap();
        ok(&o);
        let raw = stdout(&o);
        // `   COUNT  NANOSECONDS: LOCATIONS` under `Samples:`, to `Locations`.
        let n: u64 = raw
            .lines()
            .skip_while(|l| !l.starts_with("Samples:"))
            .take_while(|l| !l.starts_with("Locations"))
            .filter(|l| l.contains(':') && l.starts_with(' '))
            .filter_map(|l| l.split_whitespace().next()?.parse::<u64>().ok())
            .sum();
        out.push(("pprof samples/count", n));
    } else {
        eprintln!("skipped pprof: go is not installed (.ci/run installs it)");
    }
    if let Some(protos) = crate::otlp::protos() {
        let decoded = crate::otlp::decode(&protos, &[otlp.into()]);
        let n: u64 = decoded[0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|r| r["profiles"].as_array().unwrap().iter())
            .filter(|p| p["type"] == "samples")
            .map(|p| p["total"].as_u64().unwrap())
            .sum();
        out.push(("otlp samples/count", n));
    }
    out
}

#[test]
fn every_output_of_one_recording_gives_the_same_sample_count() {
    let dir = scratch();
    let rec = dir.path().join("x.prof");
    let summary = record(&rec, &[]);
    let recorded = number_before(&summary, " samples from").expect("a count in the summary");
    // However loaded the machine, the two threads burn some CPU in 2 s.
    assert!(recorded > 5, "{summary}");
    let counts = counts(&rec, dir.path(), false);
    for (output, n) in &counts {
        assert_eq!(
            *n, recorded,
            "{output} gives {n} samples, the record summary {recorded}: {counts:?}"
        );
    }
}

#[test]
fn off_cpu_intervals_are_counted_and_named_alike_in_every_output() {
    let _lock = sysctl_lock().read().unwrap();
    let dir = scratch();
    let rec = dir.path().join("x.prof");
    let summary = record(&rec, &["--off-cpu"]);
    let recorded = number_before(&summary, " samples from").expect("a count in the summary");
    let intervals = number_before(&summary, " intervals,").expect("off-CPU intervals");
    assert!(intervals > 2, "{summary}");
    // The CPU samples as without --off-cpu: the intervals are not samples.
    let counts = counts(&rec, dir.path(), true);
    for (output, n) in &counts {
        assert_eq!(*n, recorded, "{output}: {counts:?}");
    }
    let input = rec.to_str().unwrap();
    let table = report(&["-i", input]);
    assert_eq!(
        number_before(&table, " off-CPU intervals"),
        Some(intervals),
        "{table}"
    );
    let json: Value = serde_json::from_str(&report(&["-i", input, "--json"])).unwrap();
    assert_eq!(
        json["totals"]["off_cpu_intervals"].as_u64(),
        Some(intervals)
    );
    let svg = dir.path().join("x.svg");
    report(&["-i", input, "--flamegraph", svg.to_str().unwrap()]);
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert_eq!(number_before(&svg, " off-CPU intervals"), Some(intervals));
}
