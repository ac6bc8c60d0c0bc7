//! Interpreted Java methods named from outside the JVM (issue 30): a method HotSpot
//! never compiles (over 8,000 bytes of bytecode) named with its line in nearly every
//! sample of its thread, and a launched `javac` (a real program, mostly interpreted)
//! with almost no bare `Interpreter` frame left. Needs a JDK 17 (`javac`, `java`);
//! skipped with a printed reason where there is none.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

/// Lines of the generated `huge` method's body (Huge.java): 9 to 9 + STATEMENTS - 1.
const STATEMENTS: usize = 700;

/// Huge.java: a thread `huge-worker` calls `huge`, whose body is STATEMENTS lines of
/// arithmetic (11 KB of bytecode: HotSpot never compiles it), until its CPU time
/// reaches the argument in milliseconds.
fn huge_source() -> String {
    let mut s = String::from(
        "import java.lang.management.ManagementFactory;\n\
         public class Huge {\n\
         \x20   static volatile long sink;\n\
         \x20   public static void main(String[] a) throws Exception {\n\
         \x20       Thread t = new Thread(() -> { long x = 1; while (true) { x = huge(x); sink = x; } }, \"huge-worker\");\n\
         \x20       t.setDaemon(true); t.start(); long want = Long.parseLong(a[0]) * 1000000L;\n\
         \x20       while (ManagementFactory.getThreadMXBean().getThreadCpuTime(t.getId()) < want) Thread.sleep(20);\n\
         \x20   }\n\
         \x20   static long huge(long x) {\n",
    );
    for i in 0..STATEMENTS {
        s.push_str(&format!(
            "        x = x * {} + {i}; x ^= x >>> {};\n",
            31 + 2 * i,
            1 + i % 13
        ));
    }
    s.push_str("        return x;\n    }\n}\n");
    s
}

/// The compiled Huge class's directory, or None (reason printed) without a JDK.
fn huge_classes() -> Option<PathBuf> {
    let found = |t: &str| {
        Command::new(t)
            .arg("-version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !found("javac") || !found("java") {
        eprintln!("skipped: no JDK (javac and java) on this machine");
        return None;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixtures/java-huge");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("Huge.java");
    std::fs::write(&src, huge_source()).unwrap();
    let st = Command::new("javac")
        .arg("-d")
        .arg(&dir)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success(), "javac failed");
    Some(dir)
}

/// Folded stacks with lines (`name:LINE`), per thread, as frame lists and counts;
/// `[unsampled]` left out.
fn stacks_with_lines(out: &Path) -> Vec<(Vec<String>, u64)> {
    let o = run_profile(&[
        "report",
        "-i",
        out.to_str().unwrap(),
        "--per-thread",
        "--lines",
        "--folded",
        "-",
    ]);
    ok(&o);
    stdout(&o)
        .lines()
        .filter_map(|l| {
            let (s, n) = l.rsplit_once(' ')?;
            let f: Vec<String> = s.split(';').map(str::to_owned).collect();
            let n = n.parse().ok()?;
            (f.last()? != "[unsampled]").then_some((f, n))
        })
        .collect()
}

#[test]
fn a_huge_interpreted_method_is_named_with_its_line() {
    let Some(classes) = huge_classes() else {
        return;
    };
    let dir = scratch();
    let out = dir.path().join("huge.prof");
    // 1.5 s of the worker's own CPU time: about 1,500 samples at -F 999.
    let o = run_profile(&[
        "record",
        "-F",
        "999",
        "-o",
        out.to_str().unwrap(),
        "--",
        "java",
        "-cp",
        classes.to_str().unwrap(),
        "Huge",
        "1500",
    ]);
    ok(&o);
    let stacks = stacks_with_lines(&out);
    let worker: Vec<_> = stacks
        .iter()
        .filter(|(f, _)| f[0] == "huge-worker")
        .collect();
    let total: u64 = worker.iter().map(|(_, n)| n).sum();
    let lines = 9..9 + STATEMENTS as u32;
    let named: u64 = worker
        .iter()
        .filter(|(f, _)| {
            f.iter().any(|x| {
                x.strip_prefix("long Huge.huge(long):")
                    .and_then(|l| l.strip_suffix("_[j]"))
                    .and_then(|l| l.parse::<u32>().ok())
                    .is_some_and(|l| lines.contains(&l))
            })
        })
        .map(|(_, n)| n)
        .sum();
    assert!(total >= 300, "too few worker samples: {total}");
    assert!(
        named * 100 >= total * 95,
        "{named} of {total} worker samples name huge() with a line of it: {worker:#?}"
    );
    // Its callers, interpreted too at first, are named as well: never a bare
    // `Interpreter` in the worker.
    let bare: u64 = worker
        .iter()
        .filter(|(f, _)| f.iter().any(|x| x == "Interpreter_[j]"))
        .map(|(_, n)| n)
        .sum();
    assert!(
        bare * 100 <= total * 2,
        "{bare} of {total} with Interpreter"
    );
    let pid = model(&out).meta.pid.unwrap();
    let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
}

#[test]
fn launched_javac_has_almost_no_bare_interpreter_frame() {
    let Some(classes) = huge_classes() else {
        return;
    };
    let dir = scratch();
    let out = dir.path().join("javac.prof");
    let o = run_profile(&[
        "record",
        "-F",
        "999",
        "-o",
        out.to_str().unwrap(),
        "--",
        "javac",
        "-d",
        dir.path().to_str().unwrap(),
        classes.join("Huge.java").to_str().unwrap(),
    ]);
    ok(&o);
    let stacks = stacks_with_lines(&out);
    let total: u64 = stacks.iter().map(|(_, n)| n).sum();
    let bare: u64 = stacks
        .iter()
        .filter(|(f, _)| f.iter().any(|x| x == "Interpreter_[j]"))
        .map(|(_, n)| n)
        .sum();
    let named: u64 = stacks
        .iter()
        .filter(|(f, _)| f.iter().any(|x| x.contains("com.sun.tools.javac.")))
        .map(|(_, n)| n)
        .sum();
    assert!(total >= 200, "too few samples: {total}");
    assert!(
        bare * 100 <= total * 2,
        "{bare} of {total} samples with a bare Interpreter frame"
    );
    // javac's own methods, interpreted at first, are named (the rest is the JVM
    // starting: java.lang, jdk.internal).
    assert!(
        named * 100 >= total * 10,
        "{named} of {total} name javac's methods"
    );
    let pid = model(&out).meta.pid.unwrap();
    let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
}
