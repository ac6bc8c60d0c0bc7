//! The host agent's deferred DWARF (issue 46: a host that builds large programs):
//! a program is named from its symbol tables alone until it has been sampled two
//! windows after the first window that sampled it. A short-lived process (1.5 s,
//! within two 4-second windows; a new build of it until one is named, when the
//! namer is busy) is named by its functions, never with the function inlined into
//! them; a long-lived one gets its inlined frames from its third
//! window on (or, when the namer is busy, from a later one), never before, and
//! keeps them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use crate::fixture::ingest::read_pprof;

/// `--push-interval`, seconds.
const WINDOW_S: u64 = 4;

/// A program of `kind` (`short` or `long`): `agent_defer_KIND_outer`, not inlined,
/// with `agent_defer_KIND_inlined` inlined into it, called until the seconds given
/// have passed; built with DWARF, `seed` in it (its own build-id).
fn program(dir: &Path, kind: &str, seed: u32) -> PathBuf {
    let src = dir.join(format!("{kind}{seed}.c"));
    std::fs::write(
        &src,
        format!(
            r#"#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static inline __attribute__((always_inline)) unsigned long
agent_defer_{kind}_inlined(unsigned long x) {{
    for (int i = 0; i < 4096; i++) x = x * 6364136223846793005UL + i;
    return x;
}}
__attribute__((noinline)) unsigned long agent_defer_{kind}_outer(unsigned long x) {{
    return agent_defer_{kind}_inlined(x) ^ (x >> 3);
}}
int main(int argc, char **argv) {{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    double end = t.tv_sec + t.tv_nsec / 1e9 + atof(argv[1]);
    printf("ready\n");
    fflush(stdout);
    volatile unsigned long s = {seed};
    for (;;) {{
        for (int i = 0; i < 1000; i++) s = agent_defer_{kind}_outer(s);
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec + t.tv_nsec / 1e9 > end) return 0;
    }}
}}
"#
        ),
    )
    .unwrap();
    let out = dir.join(format!("{kind}{seed}"));
    let ok = Command::new("gcc")
        .args(["-O1", "-g", "-fno-omit-frame-pointer"])
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap();
    assert!(ok.success(), "gcc {kind}.c");
    out
}

/// The function names of each window the dry run wrote (every series of it), by
/// the window's end (`until`, Unix ns).
fn windows(dir: &Path) -> BTreeMap<u64, BTreeSet<String>> {
    let mut out: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let path = e.path();
        if path.extension().is_none_or(|x| x != "query") {
            continue;
        }
        // A file being written is read at the next look (the last, after the
        // agent's exit, finds every file whole).
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let Some(until) = text
            .split(['?', '&', '\n'])
            .find_map(|kv| kv.strip_prefix("until="))
            .and_then(|v| v.parse::<u64>().ok())
        else {
            continue;
        };
        let body = std::fs::read(path.with_extension("pprof")).unwrap_or_default();
        let mut raw = Vec::new();
        use std::io::Read;
        if flate2::read::GzDecoder::new(&body[..])
            .read_to_end(&mut raw)
            .is_err()
        {
            continue;
        }
        let names = out.entry(until).or_default();
        if raw.is_empty() {
            continue;
        }
        names.extend(read_pprof(&raw).functions);
    }
    out
}

#[test]
fn a_short_lived_program_is_named_by_its_symbols_a_long_lived_one_with_dwarf() {
    let dir = scratch();
    let long = program(dir.path(), "long", 0);
    let sent = dir.path().join("sent");
    std::fs::create_dir(&sent).unwrap();
    // The default tables budget: with a larger one the agent reads whole the DWARF
    // of the test binaries running beside it (hundreds of MiB) once they have
    // lived two windows, and names nothing else meanwhile.
    let mut agent = Command::new(profile_bin())
        .args([
            "record",
            "-a",
            "-F",
            "199",
            "-d",
            "600",
            "-q",
            "--no-jvm-perfmap",
        ])
        .args(["--push-interval", &WINDOW_S.to_string()])
        .args(["--push", "http://127.0.0.1:9", "--push-dry-run"])
        .arg(&sent)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let reader = stderr_in_background(&mut agent);
    let _kill = KillOnPanic(agent.id());
    let wait_windows = |n: usize| {
        let t0 = Instant::now();
        while windows(&sent).len() < n {
            assert!(t0.elapsed() < Duration::from_secs(180), "no windows pushed");
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    // Settled: the host's programs sampled so far are named, those that live on
    // with their DWARF (read two windows after they were first sampled), so that
    // the namer is not busy with them while the short-lived program runs.
    wait_windows(6);
    let long_run = Target::start(&long, &["600"]);
    // Short-lived programs, each its own build (a new build-id), one at a time until
    // one is named: a namer busy with the machine's other programs (another test's
    // large binaries) leaves a window's new frames pending, and a process that has
    // gone is not sampled again.
    for seed in 1..=6 {
        let short = program(dir.path(), "short", seed);
        let mut short_run = Target::start(&short, &["1.5"]);
        assert!(short_run.child.wait().unwrap().success());
        wait_windows(windows(&sent).len() + 2);
        if windows(&sent)
            .values()
            .any(|n| n.contains("agent_defer_short_outer"))
        {
            break;
        }
    }
    // The long-lived one until a window names its inlined function (from its third
    // window on; later when the namer is busy with the machine's other programs,
    // whose DWARF is read two windows after they were first sampled, too), then
    // one more window.
    let t0 = Instant::now();
    let inlined = loop {
        let found = windows(&sent)
            .into_iter()
            .find(|(_, n)| n.contains("agent_defer_long_inlined"));
        if let Some((until, _)) = found {
            break until;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(240),
            "no window names the long-lived program's inlined function"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    wait_windows(windows(&sent).range(..=inlined).count() + 1);
    assert!(
        Command::new("kill")
            .args(["-TERM", &agent.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    assert!(agent.wait().unwrap().success());
    drop(long_run);
    let stderr = reader.join().unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");

    let all = windows(&sent);
    let has = |names: &BTreeSet<String>, f: &str| names.contains(f);
    let report: Vec<String> = all
        .iter()
        .map(|(until, names)| {
            let ours: Vec<&String> = names
                .iter()
                .filter(|n| n.starts_with("agent_defer_") || n.contains("name pending"))
                .collect();
            format!("{until}: {ours:?}")
        })
        .collect();
    let report = report.join("\n");

    // The short-lived program: named by its function, never with its inlined one.
    assert!(
        all.values().any(|n| has(n, "agent_defer_short_outer")),
        "the short-lived program's function is not named\n{report}"
    );
    assert!(
        !all.values().any(|n| has(n, "agent_defer_short_inlined")),
        "the short-lived program's DWARF was read\n{report}"
    );

    // The long-lived one: its first window by symbols alone, two windows later its
    // inlined function, and in the last window (named whole) too.
    let (&first, first_names) = all
        .iter()
        .find(|(_, n)| has(n, "agent_defer_long_outer"))
        .unwrap_or_else(|| panic!("the long-lived program is not named\n{report}"));
    assert!(
        !has(first_names, "agent_defer_long_inlined"),
        "the long-lived program's DWARF read in its first window\n{report}"
    );
    // Two windows after it (window ends are a window apart, give or take the cut).
    let later = first + 2 * WINDOW_S * 1_000_000_000 - WINDOW_S * 500_000_000;
    assert!(
        all.range(..later)
            .all(|(_, n)| !has(n, "agent_defer_long_inlined")),
        "the long-lived program's DWARF read before its third window\n{report}"
    );
    // A window pushed live (not the last, named whole at the end) has it, and the
    // next windows keep it.
    assert!(inlined >= later, "{report}");
    assert!(
        all.range(inlined..)
            .filter(|(_, n)| has(n, "agent_defer_long_outer"))
            .all(|(_, n)| has(n, "agent_defer_long_inlined")),
        "a window after it names the long-lived program without DWARF\n{report}"
    );
}
