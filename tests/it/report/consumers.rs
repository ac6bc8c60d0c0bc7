//! Exports read by their real consumers: `go tool pprof -top` agrees with our top
//! table, and speedscope files validate against the schema in speedscope's npm package.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use super::{data_dir, json, report, report_ok};
use crate::common::*;

/// Our top table's percentages per function name (pprof merges by name).
fn our_flat(recording: &str, extra: &[&str]) -> HashMap<String, f64> {
    let mut args = vec!["-i", recording];
    args.extend_from_slice(extra);
    let v = json(&args);
    let mut m = HashMap::new();
    for f in v["functions"].as_array().unwrap() {
        *m.entry(f["name"].as_str().unwrap().to_owned()).or_default() +=
            f["self_percent"].as_f64().unwrap();
    }
    m
}

/// A consumer that is not installed skips its test, unless CI asked for all of them.
fn missing(what: &str) -> bool {
    if std::env::var_os("PROFILE_REQUIRE_CONSUMERS").is_some() {
        panic!("{what} is not installed (.ci/run installs it)");
    }
    eprintln!("skipped: {what} is not installed (.ci/run installs it)");
    true
}

#[test]
fn go_tool_pprof_agrees_with_the_top_table() {
    if Command::new("go").arg("version").output().is_err() && missing("go") {
        return;
    }
    let dir = scratch();
    // Rust names with generics and trait impls (`chains::hot::<u32>`,
    // `<F as core::ops::function::FnOnce<()>>::call_once`) must reach pprof's default
    // view whole.
    let target = Target::start(&build_rust("chains.rs"), &[]);
    let rust = dir.path().join("rust.prof");
    // By the worker's own CPU time: a 1 s recording at load 8 once held no sample.
    record_pid_cpu(
        target.pid(),
        "rusty",
        std::time::Duration::from_secs(1),
        "499",
        &rust,
        &[],
    );
    drop(target);
    let rust = rust.to_str().unwrap().to_owned();
    for (recording, extra) in [
        ("threads.prof", &[][..]),
        ("demo.prof", &[]),
        ("threads.prof", &["--focus", "now"]),
        ("demo.prof", &["--lines"]),
        (rust.as_str(), &[]),
    ] {
        let file = dir.path().join("p.pb.gz");
        let mut args = vec!["-i", recording, "--pprof", file.to_str().unwrap()];
        args.extend_from_slice(extra);
        report_ok(&args);
        let o = Command::new("go")
            // The default view: pprof symbolizes and demangles unless told not to.
            .args(["tool", "pprof", "-top", "-nodecount=100000"])
            .args(["-nodefraction=0", "-edgefraction=0"])
            .arg(&file)
            .env("PPROF_TMPDIR", dir.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "go tool pprof: {}", stderr(&o));
        let text = stdout(&o);
        let mut theirs: HashMap<String, f64> = HashMap::new();
        let mut rows = text
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("flat"));
        rows.next();
        for l in rows {
            let cols: Vec<&str> = l.split_whitespace().collect();
            if cols.len() < 6 {
                continue;
            }
            let name = cols[5..].join(" ");
            let name = name.strip_suffix(" (inline)").unwrap_or(&name).to_owned();
            let pct: f64 = cols[1].trim_end_matches('%').parse().unwrap();
            *theirs.entry(name).or_default() += pct;
        }
        // `[unsampled]` is CPU time no function stands for: a sample of its own in
        // pprof, not a row of our table (its share is the table's header).
        theirs.remove("[unsampled]");
        let ours = our_flat(recording, extra);
        // With --lines our names carry `:LINE`; pprof shows functions.
        let ours: HashMap<String, f64> = if extra.contains(&"--lines") {
            let mut m = HashMap::new();
            for (k, v) in ours {
                let base = k.rsplit_once(':').filter(|(_, n)| n.parse::<u32>().is_ok());
                *m.entry(base.map_or(k.clone(), |(b, _)| b.to_owned()))
                    .or_default() += v;
            }
            m
        } else {
            ours
        };
        for (name, &pct) in &ours {
            let t = theirs.get(name).copied().unwrap_or(0.0);
            assert!(
                (pct - t).abs() <= 0.1,
                "{recording} {extra:?}: {name}: ours {pct:.2}%, pprof {t:.2}%\n{text}"
            );
        }
        let top = |m: &HashMap<String, f64>| {
            let mut v: Vec<(&String, &f64)> = m.iter().filter(|(_, p)| **p >= 3.0).collect();
            v.sort_by(|a, b| b.1.total_cmp(a.1).then(a.0.cmp(b.0)));
            v.into_iter().map(|(n, _)| n.clone()).collect::<Vec<_>>()
        };
        assert_eq!(
            top(&ours),
            top(&theirs),
            "{recording} {extra:?}: top functions"
        );
        assert!(text.contains("Type: cpu"), "{text}");
        // Every function in any of our stacks reaches pprof's view whole (pprof lists
        // a function that is only ever a caller with its cumulative share). Named frames
        // asserted here are in every sample of the worker: an inlined leaf such as
        // `wrapping_add` is sampled only some of the time at 499 Hz for 1 s.
        for name in ours.keys() {
            assert!(theirs.contains_key(name), "{name} is not whole in:\n{text}");
        }
        if recording == rust {
            for name in ["chains::hot::<u32>", "chains::apply::<"] {
                assert!(
                    ours.keys().any(|n| n.starts_with(name)),
                    "{name} is not in our table: {ours:?}"
                );
            }
            assert!(
                ours.keys()
                    .any(|n| n.starts_with('<') && n.contains(" as ")),
                "no trait impl (<T as Trait>::f) among {ours:?}"
            );
        }
    }
}

/// `go tool pprof -list burn_leaf` on threads.prof's pprof (its sources were in
/// /tmp/profile-fixture when it was recorded; tests/data holds threads.c): the lines
/// of the listing that carry time.
fn listed_lines(extra: &[&str], dir: &Path) -> Vec<String> {
    let file = dir.join("l.pb.gz");
    let mut args = vec!["-i", "threads.prof", "--pprof", file.to_str().unwrap()];
    args.extend_from_slice(extra);
    report_ok(&args);
    let o = Command::new("go")
        .args(["tool", "pprof", "-list", "burn_leaf"])
        .args(["-trim_path", "/tmp/profile-fixture", "-source_path"])
        .arg(data_dir().join(".."))
        .arg(&file)
        .env("PPROF_TMPDIR", dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "go tool pprof: {}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("ROUTINE"), "{text}");
    // `  421.40ms   421.40ms     31:    return ...`: a numbered source line with time.
    text.lines()
        .filter(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            cols.len() >= 3
                && cols[0] != "."
                && cols[2]
                    .strip_suffix(':')
                    .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .map(str::to_owned)
        .collect()
}

#[test]
fn pprof_carries_source_lines_by_default_for_go_tool_pprof_list() {
    if Command::new("go").arg("version").output().is_err() && missing("go") {
        return;
    }
    let dir = scratch();
    let lines = listed_lines(&[], dir.path());
    assert!(!lines.is_empty(), "no source line with time");
    // Without lines, -list finds the function but no line to put its time on.
    assert_eq!(
        listed_lines(&["--no-source-lines"], dir.path()),
        Vec::<String>::new()
    );
}

#[test]
fn speedscope_file_matches_the_schema() {
    let modules = Path::new(env!("CARGO_TARGET_TMPDIR")).join("consumers/node_modules");
    let schema = modules.join("speedscope/dist/release/file-format-schema.json");
    if (!schema.exists() || !modules.join("ajv").exists())
        && missing("the speedscope and ajv npm packages")
    {
        return;
    }
    let dir = scratch();
    const VALIDATE: &str = r#"
        const Ajv = require("ajv");
        const fs = require("fs");
        const validate = new Ajv({ allErrors: true, strict: false })
            .compile(JSON.parse(fs.readFileSync(process.argv[1], "utf8")));
        const data = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
        if (!validate(data)) { console.error(JSON.stringify(validate.errors)); process.exit(1); }
    "#;
    let check = |file: &Path, expect_valid: bool| {
        let o = Command::new("node")
            .args(["-e", VALIDATE])
            .arg(&schema)
            .arg(file)
            .env("NODE_PATH", &modules)
            .output()
            .expect("run node");
        assert_eq!(o.status.success(), expect_valid, "{}", stderr(&o));
    };
    for (recording, extra) in [
        ("threads.prof", &[][..]),
        ("demo.prof", &[]),
        ("demo.prof", &["--lines", "--thread", "sorter"]),
    ] {
        let file = dir.path().join("s.json");
        let mut args = vec!["-i", recording, "--speedscope", file.to_str().unwrap()];
        args.extend_from_slice(extra);
        report_ok(&args);
        check(&file, true);
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        let p = crate::common::model(&data_dir().join(recording));
        let profiles = v["profiles"].as_array().unwrap();
        if extra.is_empty() {
            assert_eq!(profiles.len(), p.threads.len(), "one profile per thread");
            let weights: u64 = profiles
                .iter()
                .flat_map(|p| p["weights"].as_array().unwrap())
                .map(|w| w.as_u64().unwrap())
                .sum();
            assert_eq!(weights, p.total_weight());
        } else {
            assert_eq!(profiles.len(), 1);
        }
    }
    // The validator does reject what is not a speedscope file.
    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        r#"{"shared": {"frames": []}, "profiles": [{"type": "sampled"}]}"#,
    )
    .unwrap();
    check(&bad, false);
}

/// `--json` validates against docs/report.schema.json (ajv, draft 2020-12): CPU-only
/// and off-CPU recordings, a perf.data file, filtered and limited reports, a launched
/// command (whose pid the report gives); the validator rejects a report missing its
/// version.
#[test]
fn json_report_matches_its_schema() {
    let modules = Path::new(env!("CARGO_TARGET_TMPDIR")).join("consumers/node_modules");
    if !modules.join("ajv/dist/2020.js").exists() && missing("the ajv npm package") {
        return;
    }
    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/report.schema.json");
    const VALIDATE: &str = r#"
        const Ajv = require("ajv/dist/2020");
        const fs = require("fs");
        const validate = new Ajv({ allErrors: true, strict: true })
            .compile(JSON.parse(fs.readFileSync(process.argv[1], "utf8")));
        const data = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
        if (!validate(data)) { console.error(JSON.stringify(validate.errors)); process.exit(1); }
    "#;
    let dir = scratch();
    let check = |json: &str, expect_valid: bool| {
        let file = dir.path().join("r.json");
        std::fs::write(&file, json).unwrap();
        let o = Command::new("node")
            .args(["-e", VALIDATE])
            .arg(&schema)
            .arg(&file)
            .env("NODE_PATH", &modules)
            .output()
            .expect("run node");
        assert_eq!(o.status.success(), expect_valid, "{}\n{json}", stderr(&o));
    };
    // A launched command, CPU-only, and one with --off-cpu (states per thread).
    let bin = build_c("offcpu.c", &["-O1", "-g", "-pthread"]);
    let launched = dir.path().join("launched.prof");
    let o = run_profile(&[
        "record",
        "-q",
        "-d",
        "1",
        "-o",
        launched.to_str().unwrap(),
        "--",
        bin.to_str().unwrap(),
    ]);
    assert!(launched.exists(), "{}", stderr(&o));
    let off = dir.path().join("off.prof");
    let o = run_profile(&[
        "record",
        "-q",
        "--off-cpu",
        "-d",
        "1",
        "-o",
        off.to_str().unwrap(),
        "--",
        bin.to_str().unwrap(),
    ]);
    assert!(off.exists(), "{}", stderr(&o));
    let data = data_dir();
    let threads = data.join("threads.prof");
    let demo = data.join("demo.prof");
    // perf's own recording (`perf record -e task-clock -g`), read as a recording.
    let perf_data =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/perfdata/task-clock-fp.data");
    let cases: Vec<Vec<&str>> = vec![
        vec!["-i", threads.to_str().unwrap(), "--json"],
        vec!["-i", demo.to_str().unwrap(), "--json", "--top", "5"],
        vec![
            "-i",
            demo.to_str().unwrap(),
            "--json",
            "--lines",
            "--thread",
            "sorter",
        ],
        vec!["-i", launched.to_str().unwrap(), "--json"],
        vec!["-i", off.to_str().unwrap(), "--json"],
        vec!["-i", off.to_str().unwrap(), "--json", "--state", "sleep"],
        vec!["-i", perf_data.to_str().unwrap(), "--json"],
    ];
    for args in &cases {
        let out = if args[1] == perf_data.to_str().unwrap() {
            // The binary this perf.data file sampled (/tmp/pd/prog on the machine that
            // recorded it) is not on this one: a note says so, the JSON is whole.
            let o = report(args);
            ok(&o);
            let err = stderr(&o);
            assert!(
                err.is_empty() || err.contains("names frames from the binaries on this machine"),
                "{err}"
            );
            stdout(&o)
        } else {
            report_ok(args)
        };
        check(&out, true);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        if args.contains(&"--top") {
            assert_eq!(
                v["functions"].as_array().unwrap().len(),
                5,
                "--top limits --json"
            );
        }
        if args[1] == off.to_str().unwrap() {
            let t = &v["threads"][0];
            let states: u64 = t["states"]
                .as_object()
                .unwrap()
                .values()
                .map(|n| n.as_u64().unwrap())
                .sum();
            assert_eq!(Some(states), t["wall_ns"].as_u64(), "{t}");
        }
    }
    let v: serde_json::Value = serde_json::from_str(&report_ok(&cases[3])).unwrap();
    let first_pid = v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["pid"].as_u64().unwrap())
        .min();
    assert_eq!(v["meta"]["pid"].as_u64(), first_pid, "the launched pid");
    assert_eq!(v["meta"]["launched"], true);
    // The validator does reject a report that is not one.
    let mut bad = v.clone();
    bad.as_object_mut().unwrap().remove("format_version");
    check(&bad.to_string(), false);
    let mut bad = v;
    bad["functions"][0]["kind"] = "nonsense".into();
    check(&bad.to_string(), false);
}
