//! `profile report` on recordings checked into tests/data/report (made with the real
//! tool: `threads.prof` from tests/data/threads.c with two threads, one renamed, and
//! kernel and inlined frames; `demo.prof` from examples/demo.rs with three Rust
//! threads). Golden outputs sit beside them (`PROFILE_BLESS=1` rewrites them; review
//! the diff). Exports are checked by their real consumers: `go tool pprof` and the
//! speedscope file-format schema (installed by .ci/run; a test without its consumer is
//! skipped, or fails when PROFILE_REQUIRE_CONSUMERS is set). Every filter has a test
//! that fails if the filter does nothing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use profile::output::flamegraph::{FlameGraphOptions, colour};
use profile::profile::{FrameClass, Function, Location, Profile, ProfileSample, Thread};

use crate::common::*;

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/report")
}

/// Runs `profile report ARGS` in tests/data/report (so `-i threads.prof` is stable).
fn report(args: &[&str]) -> Output {
    Command::new(profile_bin())
        .arg("report")
        .args(args)
        .current_dir(data_dir())
        .output()
        .expect("run profile")
}

fn report_ok(args: &[&str]) -> String {
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

fn json(args: &[&str]) -> serde_json::Value {
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
    assert!(out.contains("burn_leaf"), "{out}");
    for n in ["a.svg", "a.pb.gz", "a.json", "top.json"] {
        let len = std::fs::metadata(dir.path().join(n)).unwrap().len();
        assert!(len > 100, "{n}: {len} bytes");
    }
    let top: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("top.json")).unwrap()).unwrap();
    assert_eq!(
        top["functions"].as_array().unwrap().len(),
        3,
        "--top limits JSON"
    );
}

/// Frames of an SVG flame graph: (tooltip, y of the rect, fill).
fn svg_frames(svg: &str) -> Vec<(String, f64, String)> {
    use quick_xml::events::Event;
    let mut r = quick_xml::Reader::from_str(svg);
    let mut out = Vec::new();
    let (mut in_title, mut title) = (false, String::new());
    loop {
        match r.read_event().expect("SVG is well-formed XML") {
            Event::Eof => break,
            Event::Start(e) if e.name().as_ref() == b"title" => {
                in_title = true;
                title.clear();
            }
            Event::End(e) if e.name().as_ref() == b"title" => in_title = false,
            Event::Text(t) if in_title => title.push_str(&t.decode().unwrap()),
            Event::GeneralRef(g) if in_title => title.push(match &*g.decode().unwrap() {
                "lt" => '<',
                "gt" => '>',
                "amp" => '&',
                _ => '?',
            }),
            Event::Empty(e) if e.name().as_ref() == b"rect" && !title.is_empty() => {
                let attr = |k: &[u8]| {
                    e.attributes()
                        .flatten()
                        .find(|a| a.key.as_ref() == k)
                        .map(|a| String::from_utf8_lossy(&a.value).into_owned())
                        .unwrap_or_default()
                };
                out.push((title.clone(), attr(b"y").parse().unwrap(), attr(b"fill")));
                title.clear();
            }
            _ => {}
        }
    }
    out
}

/// Names one level away from the root frame `all`.
fn first_level(frames: &[(String, f64, String)], icicle: bool) -> Vec<String> {
    let root_y = frames.iter().find(|f| f.0.starts_with("all (")).unwrap().1;
    let next = frames
        .iter()
        .map(|f| f.1)
        .filter(|&y| if icicle { y > root_y } else { y < root_y })
        .fold(None, |acc: Option<f64>, y| {
            Some(acc.map_or(y, |a| if icicle { a.min(y) } else { a.max(y) }))
        })
        .unwrap();
    frames
        .iter()
        .filter(|f| f.1 == next)
        .map(|f| f.0.split(" (").next().unwrap().to_owned())
        .collect()
}

#[test]
fn flame_graphs_are_xml_with_the_expected_frames() {
    let svg = |args: &[&str]| {
        let mut all = vec!["-i", "threads.prof", "--flamegraph", "-"];
        all.extend_from_slice(args);
        svg_frames(&report_ok(&all))
    };
    let plain = svg(&[]);
    assert_eq!(first_level(&plain, false), ["clone3"]);
    let leaf = plain
        .iter()
        .find(|f| f.0.starts_with("burn_leaf ("))
        .unwrap();
    assert!(
        leaf.0.contains(" µs of CPU, "),
        "tooltip in CPU time: {}",
        leaf.0
    );
    let rgb = |class, name| {
        let c = colour(class, name);
        format!("rgb({},{},{})", c.r, c.g, c.b)
    };
    assert_eq!(leaf.2, rgb(FrameClass::Native, "burn_leaf"));
    let kernel = plain
        .iter()
        .find(|f| f.0.starts_with("do_syscall_64 ("))
        .unwrap();
    assert_eq!(kernel.2, rgb(FrameClass::Kernel, "do_syscall_64_[k]"));
    let inlined = plain.iter().find(|f| f.0.starts_with("now (")).unwrap();
    assert_eq!(inlined.2, rgb(FrameClass::Inlined, "now_[i]"));

    let reversed = svg(&["--reverse"]);
    assert!(first_level(&reversed, false).contains(&"burn_leaf".to_owned()));
    assert!(!first_level(&reversed, false).contains(&"clone3".to_owned()));

    let icicle = svg(&["--icicle"]);
    assert_eq!(first_level(&icicle, true), ["clone3"]);
    assert_eq!(icicle.len(), plain.len());

    let per_thread = svg(&["--per-thread"]);
    let mut threads = first_level(&per_thread, false);
    threads.sort();
    assert_eq!(threads, ["alpha", "beta", "gamma"]);
}

/// A million samples over 100k distinct stacks still gives an SVG of a few MB, with
/// the narrow frames merged.
#[test]
fn huge_profiles_give_small_svgs() {
    let mut p = Profile::default();
    p.threads.push(Thread {
        pid: 1,
        tid: 1,
        name: "main".into(),
        process: "main".into(),
    });
    let func = |name: String| Function {
        name,
        class: FrameClass::Native,
        file: None,
        line: None,
    };
    for i in 0..1000 {
        p.functions.push(func(format!("function_number_{i}")));
        p.locations.push(Location {
            address: i,
            module: None,
            functions: vec![i as u32],
        });
    }
    let mut x: u64 = 1;
    for s in 0..100_000u32 {
        let depth = 8 + s % 16;
        let locs: Vec<u32> = (0..depth)
            .map(|d| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                if d < 3 { d } else { ((x >> 33) % 1000) as u32 }
            })
            .collect();
        p.stacks.push(locs.clone());
        p.stack_locations.push(locs);
    }
    for i in 0..1_000_000u64 {
        p.samples.push(ProfileSample {
            time: i * 1000,
            thread: 0,
            weight: 1_000_000,
            stack: (i % 100_000) as u32,
        });
    }
    let mut svg = Vec::new();
    let stats =
        profile::output::flamegraph::write(&p, &FlameGraphOptions::default(), &mut svg).unwrap();
    let svg = String::from_utf8(svg).unwrap();
    let frames = svg_frames(&svg);
    eprintln!("{stats:?}, {} bytes, {} frames", svg.len(), frames.len());
    assert!(stats.merged_frames > 100_000, "{stats:?}");
    assert!(svg.len() < 5_000_000, "{} bytes", svg.len());
    assert!(frames.len() < 20_000, "{} frames", frames.len());
    assert!(svg.contains("frames under 0.01% merged"));
}

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
    for (recording, extra) in [
        ("threads.prof", &[][..]),
        ("demo.prof", &[]),
        ("threads.prof", &["--focus", "now"]),
        ("demo.prof", &["--lines"]),
    ] {
        let file = dir.path().join("p.pb.gz");
        let mut args = vec!["-i", recording, "--pprof", file.to_str().unwrap()];
        args.extend_from_slice(extra);
        report_ok(&args);
        let o = Command::new("go")
            .args([
                "tool",
                "pprof",
                "-top",
                "-symbolize=none",
                "-nodecount=100000",
            ])
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
    }
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
