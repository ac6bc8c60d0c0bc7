//! A JVM's first seconds (issue 48): tests/data/java/Deploy.java loads a new copy of
//! its App class in a new class loader every 150 ms, each copy's code going from the
//! interpreter to C1 to C2 within tens of milliseconds, the C1 code freed as C2's
//! replaces it. Started with a small code cache (`-XX:InitialCodeCacheSize=64k
//! -XX:-SegmentedCodeCache`) and recorded from its first second, its code heap grows
//! past the end committed when `profile` first read it, and the hot code lands there
//! (which `jcmd`'s view of the code cache shows): the worker's Java frames still carry
//! lines, and its samples the methods C2 inlined. Before issue 48, code past the end
//! read once was never read, and code freed before its sample was unwound lost its
//! inlined methods and lines.
//!
//! HotSpot's compilers keep debug information (the methods inlined at a pc, their
//! bytecode index) at calls and safepoints only, unless told
//! `-XX:+DebugNonSafepoints` (JFR alone does not add it, as measured for
//! docs/runtimes.md): C2's hot loops, without it, have none. So lines are judged with
//! the flag; without it, the frames left with no line are counted, and every output
//! says how many and why. Needs a JDK 17 (`javac`, `java`, `jcmd`); skipped
//! with a printed reason where there is none.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::*;
use crate::java::{one_jvm_at_a_time, remove_jvm_files};
use crate::java_frames::stacks_with_lines;

const WORKER: &str = "deploy-worker";

/// `jcmd PID COMMAND`'s output.
fn jcmd(pid: u32, command: &str) -> String {
    let o = Command::new("jcmd")
        .args([&pid.to_string(), command])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The code cache's committed end, from `jcmd PID Compiler.codecache`'s `bounds [low,
/// committed end, reserved end]`.
fn committed_end(pid: u32) -> u64 {
    let out = jcmd(pid, "Compiler.codecache");
    let bounds = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("bounds ["))
        .unwrap_or_else(|| panic!("no bounds in {out}"));
    let field = bounds.split(", ").nth(1).unwrap();
    u64::from_str_radix(field.trim_start_matches("0x"), 16).unwrap()
}

/// The code start of every C2 (tier 4) nmethod of App in use, from `jcmd PID
/// Compiler.codelist` (`ID LEVEL STATE NAME [BLOB, CODE - END]`).
fn app_c2_code(pid: u32) -> Vec<u64> {
    jcmd(pid, "Compiler.codelist")
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let hot = f.len() > 5 && f[1] == "4" && f[2] == "0" && f[3].starts_with("Deploy$App.");
            let code = f.get(5)?.trim_start_matches("0x").trim_end_matches(',');
            hot.then(|| u64::from_str_radix(code, 16).ok())?
        })
        .collect()
}

/// A recording of Deploy, started with `flags` too, from its first second until its
/// worker ran 3 s of CPU.
struct Run {
    /// The recording.
    out: std::path::PathBuf,
    _dir: tempfile::TempDir,
    /// The recorder's summary.
    summary: String,
    /// The code cache's committed end when profile attached, and at the end.
    ends: (u64, u64),
    /// The code start of each C2 nmethod of App in use at one of six looks during
    /// the run.
    c2: Vec<u64>,
    pid: u32,
}

fn record_deploy(flags: &[&str]) -> Option<Run> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/java/Deploy.java");
    let classes = crate::java::javac("java-deploy", &src, &["jcmd"])?;
    let _one_jvm = one_jvm_at_a_time();
    let mut cmd = Command::new("java");
    cmd.args(flags)
        .args([
            "-XX:InitialCodeCacheSize=64k",
            "-XX:-SegmentedCodeCache",
            "-cp",
        ])
        .arg(&classes)
        .arg("Deploy");
    let jvm = Target::spawn(cmd);
    let pid = jvm.pid();
    let dir = scratch();
    let out = dir.path().join("deploy.prof");
    let rec = Recorder::attach(pid, "499", &out, &[]);
    // At least where profile read the code heap's end when it attached.
    let early = committed_end(pid);
    // C2 code of App seen during the run: each copy of App reaches C2 tens of
    // milliseconds after it is loaded and is replaced 150 ms later, so one look at
    // the end could fall between two (it did once on a loaded machine).
    let mut c2 = Vec::new();
    for _ in 0..6 {
        wait_thread_cpu(pid, WORKER, Duration::from_millis(500));
        c2.extend(app_c2_code(pid));
    }
    c2.sort_unstable();
    c2.dedup();
    let late = committed_end(pid);
    let summary = stderr(&rec.stop());
    drop(jvm);
    remove_jvm_files(pid);
    Some(Run {
        out,
        _dir: dir,
        summary,
        ends: (early, late),
        c2,
        pid,
    })
}

/// What the worker's stacks hold: Java frames (compiled `_[j]`, inlined `_[i]`), each
/// counted once per sample.
struct Judged {
    samples: u64,
    frames: u64,
    with_line: u64,
    /// Samples holding an inlined frame.
    inlined: u64,
}

/// Judges the stacks `worker` picks among `stacks` (`--per-thread --lines` folded).
fn judge(stacks: &[(Vec<String>, u64)], worker: impl Fn(&[String]) -> bool) -> Judged {
    let mut j = Judged {
        samples: 0,
        frames: 0,
        with_line: 0,
        inlined: 0,
    };
    // (The lambda's class, `Deploy$$Lambda$1+0x…`, is generated with no line table:
    // no frame of it has a line to give.)
    for (f, n) in stacks.iter().filter(|(f, _)| worker(f)) {
        j.samples += n;
        let java: Vec<&String> = f
            .iter()
            .filter(|x| x.contains("Deploy") && !x.contains("$$Lambda"))
            .filter(|x| x.ends_with("_[j]") || x.ends_with("_[i]"))
            .collect();
        j.frames += n * java.len() as u64;
        let line = |x: &str| {
            let name = x.trim_end_matches("_[j]").trim_end_matches("_[i]");
            name.rsplit_once(':')
                .is_some_and(|(_, l)| l.parse::<u32>().is_ok())
        };
        j.with_line += n * java.iter().filter(|x| line(x)).count() as u64;
        if java.iter().any(|x| x.ends_with("_[i]")) {
            j.inlined += *n;
        }
    }
    j
}

#[test]
fn a_deploying_jvms_compiled_frames_carry_lines_from_its_first_second() {
    let flags = ["-XX:+UnlockDiagnosticVMOptions", "-XX:+DebugNonSafepoints"];
    let Some(run) = record_deploy(&flags) else {
        return;
    };
    let (early, late) = run.ends;
    assert!(late > early, "the code cache did not grow: {early:#x}");
    assert!(
        run.c2.iter().any(|&c| c >= early),
        "no C2 code of App past {early:#x}: {:x?}",
        run.c2
    );
    let stacks = stacks_with_lines(&run.out);
    let j = judge(&stacks, |f| f[0] == WORKER);
    assert!(j.samples >= 500, "too few worker samples: {}", j.samples);
    let Judged {
        samples,
        frames,
        with_line,
        inlined,
    } = j;
    assert!(
        with_line * 100 >= frames * 90,
        "{with_line} of {frames} Java frames of {WORKER} carry a line"
    );
    assert!(
        inlined * 100 >= samples * 60,
        "{inlined} of {samples} samples of {WORKER} hold an inlined frame"
    );
}

/// Without `-XX:+DebugNonSafepoints`, C2's hot loops have no debug information: their
/// frames are named by their compiled method alone, and the summary, the report's
/// footer, the SVG's subtitle and the JSON say how many compiled frames were left so,
/// and why.
#[test]
fn compiled_frames_with_no_debug_information_are_counted_in_every_output() {
    let Some(run) = record_deploy(&[]) else {
        return;
    };
    let head = "compiled Java frames (";
    let why = "the JVM kept no debug information at their pc";
    let counted = |s: &str| {
        s.lines()
            .find(|l| l.contains(head) && l.contains(why))
            .map(str::to_owned)
    };
    let note = counted(&run.summary).unwrap_or_else(|| panic!("{}", run.summary));
    assert!(note.contains("-XX:+DebugNonSafepoints"), "{note}");
    // "N of M compiled Java frames (P%) …": N > 0.
    let n: u64 = note
        .split_once("note: ")
        .and_then(|(_, t)| t.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("{note}"));
    assert!(n > 0, "{note}");
    // The frames left so are named still: every compiled frame of the worker is a
    // Java method.
    let stacks = stacks_with_lines(&run.out);
    for (f, _) in stacks.iter().filter(|(f, _)| f[0] == WORKER) {
        assert!(
            !f.iter().any(|x| x.starts_with("[anon]")),
            "an unnamed frame: {f:?}"
        );
    }
    let input = run.out.to_str().unwrap();
    let table = run_profile(&["report", "-i", input]);
    ok(&table);
    let footer = stdout(&table);
    assert!(
        footer
            .lines()
            .any(|l| l.starts_with("Note: ") && l.contains(head) && l.contains(why)),
        "{footer}"
    );
    let json = run_profile(&["report", "-i", input, "--json"]);
    ok(&json);
    let json: serde_json::Value = serde_json::from_str(&stdout(&json)).unwrap();
    let notes = json["summary"]["notes"].as_array().expect("summary.notes");
    assert!(
        notes.iter().any(|n| n
            .as_str()
            .is_some_and(|n| n.contains(head) && n.contains(why))),
        "{notes:?}"
    );
    let svg = run.out.with_extension("svg");
    ok(&run_profile(&[
        "report",
        "-i",
        input,
        "--flamegraph",
        svg.to_str().unwrap(),
    ]));
    let svg = std::fs::read_to_string(&svg).unwrap();
    let subtitle = svg
        .lines()
        .find(|l| l.contains(r#"id="subtitle""#))
        .unwrap_or_default();
    assert!(subtitle.contains(head), "pid {}: {subtitle}", run.pid);
}

/// `record -a` (as the host agent records): a JVM that starts after the recorder and
/// exits before it stops is read as its samples are drained, its compiled frames
/// named with lines though it is gone when they are unwound, and with no perf map
/// (`--no-jvm-perfmap`, so that no other test's JVM is asked for one).
#[test]
fn a_jvm_started_and_stopped_under_record_a_is_read_as_drained() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/java/Deploy.java");
    let Some(classes) = crate::java::javac("java-deploy", &src, &["jcmd"]) else {
        return;
    };
    let _one_jvm = one_jvm_at_a_time();
    let dir = scratch();
    let out = dir.path().join("all.prof");
    let child = Command::new(profile_bin())
        .args(["record", "-a", "-F", "249", "--no-jvm-perfmap", "-o"])
        .arg(&out)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let rec = Recorder::adopt(child, &out);
    // Until its worker ran 3 s of CPU.
    let status = Command::new("java")
        .args(["-XX:+UnlockDiagnosticVMOptions", "-XX:+DebugNonSafepoints"])
        .args([
            "-XX:InitialCodeCacheSize=64k",
            "-XX:-SegmentedCodeCache",
            "-cp",
        ])
        .arg(&classes)
        .args(["Deploy", "3000"])
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let summary = stderr(&rec.stop());
    // Process name, thread name, ...
    let stacks = stacks_with_lines(&out);
    let j = judge(&stacks, |f| f.get(1).is_some_and(|t| t == WORKER));
    assert!(
        j.samples >= 300,
        "too few worker samples: {}\n{summary}",
        j.samples
    );
    assert!(
        j.with_line * 100 >= j.frames * 90 && j.frames >= j.samples,
        "{} of {} Java frames of {WORKER} carry a line\n{summary}",
        j.with_line,
        j.frames
    );
}
