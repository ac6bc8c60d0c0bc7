//! Issue 47: Node's JavaScript frames named with no flag, from what V8 describes of
//! itself in the binary (`v8dbg_*`). A CPU-bound program of three functions, each the
//! caller of the next (`outer` → `middle` → `inner`), launched and attached by pid:
//! the functions appear by name under their real callers, and at least 90% of the
//! main thread's samples carry a named JavaScript function. Needs `node` (installed by
//! .ci/run); skipped with a word without it unless CI requires it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::*;

/// The Node on PATH, if any.
pub(crate) fn node() -> Option<PathBuf> {
    let found = Command::new("node").arg("--version").output();
    if found.is_ok_and(|o| o.status.success()) {
        return Some(PathBuf::from("node"));
    }
    assert!(
        std::env::var_os("PROFILE_REQUIRE_CONSUMERS").is_none(),
        "node is not installed"
    );
    eprintln!("skipped: node is not installed");
    None
}

/// Writes the program into `dir`: `inner` is a numeric loop large enough that V8 does
/// not inline it into `middle` (inlined functions are not yet named apart), `middle`
/// builds a string from it, `outer` drives until the process has used ARGV[2] ms of
/// CPU, then the process idles ARGV[3] ms (its last samples are read while it lives).
fn program(dir: &Path) -> PathBuf {
    let body: String = (0..90)
        .map(|k| format!("    s = (s + (i ^ {k}) * 0.5) % 1000003;\n"))
        .collect();
    let js = format!(
        "'use strict';\n\
         function inner(n) {{\n  let s = 0;\n  for (let i = 0; i < n; i++) {{\n{body}  }}\n  return s;\n}}\n\
         function middle(n) {{\n  let t = '';\n  for (let k = 0; k < 4; k++) t += String(inner(n)).slice(0, 3);\n  return t.length;\n}}\n\
         function outer(cpuMs) {{\n  let total = 0;\n  const start = process.cpuUsage();\n  for (;;) {{\n\
         \x20   total += middle(2000);\n    const u = process.cpuUsage(start);\n\
         \x20   if ((u.user + u.system) / 1000 >= cpuMs) return total;\n  }}\n}}\n\
         console.log('ready');\n\
         outer(Number(process.argv[2]));\n\
         setTimeout(() => {{}}, Number(process.argv[3]));\n"
    );
    let path = dir.join("three.js");
    std::fs::write(&path, js).unwrap();
    path
}

/// A frame V8's reader named: a JavaScript function (not a marked frame, not code
/// left unnamed).
fn named_js(frame: &str) -> bool {
    frame
        .strip_suffix("_[j]")
        .is_some_and(|f| !f.starts_with('[') && !f.starts_with("anon"))
}

/// The checks of both runs: the main thread's (`tid PID`) stacks.
fn check(out: &Path, pid: u32) {
    let all = stacks(out);
    let tid = format!("tid {pid}");
    let main: Vec<&(Vec<String>, u64)> = all
        .iter()
        .filter(|(f, _)| f.get(1).is_some_and(|t| *t == tid))
        .collect();
    let total: u64 = main.iter().map(|(_, c)| c).sum();
    assert!(total >= 200, "only {total} main-thread samples: {all:?}");
    let named: u64 = main
        .iter()
        .filter(|(f, _)| f.iter().any(|x| named_js(x)))
        .map(|(_, c)| c)
        .sum();
    let share = named as f64 / total as f64;
    let shown: Vec<_> = main.iter().take(12).collect();
    assert!(
        share >= 0.90,
        "{named} of {total} main-thread samples carry a named JS function: {shown:?}"
    );
    // Each function under its real caller.
    let chained: u64 = main
        .iter()
        .filter(|(f, _)| {
            f.windows(3)
                .any(|w| w == ["outer_[j]", "middle_[j]", "inner_[j]"])
        })
        .map(|(_, c)| c)
        .sum();
    assert!(
        chained as f64 >= 0.5 * total as f64,
        "{chained} of {total} samples in outer;middle;inner: {shown:?}"
    );
    // Never a caller named as its own callee's callee.
    let wrong: u64 = main
        .iter()
        .filter(|(f, _)| {
            f.windows(2).any(|w| {
                w == ["inner_[j]", "middle_[j]"]
                    || w == ["inner_[j]", "outer_[j]"]
                    || w == ["middle_[j]", "outer_[j]"]
            })
        })
        .map(|(_, c)| c)
        .sum();
    assert_eq!(wrong, 0, "callers below their callees: {shown:?}");
}

#[test]
fn javascript_frames_named_without_flags_launched() {
    let Some(node) = node() else { return };
    let dir = scratch();
    let js = program(dir.path());
    let out = dir.path().join("launched.prof");
    let o = run_profile(&[
        "record",
        "-F",
        "499",
        "-q",
        "-o",
        out.to_str().unwrap(),
        "--",
        node.to_str().unwrap(),
        js.to_str().unwrap(),
        "2500",
        "1000",
    ]);
    ok(&o);
    let p = model(&out);
    let pid = (p.threads.iter())
        .filter(|t| t.name == "node")
        .map(|t| t.pid)
        .min()
        .expect("node's main thread recorded");
    check(&out, pid);
}

#[test]
fn javascript_frames_named_without_flags_by_pid() {
    let Some(node) = node() else { return };
    let dir = scratch();
    let js = program(dir.path());
    let mut cmd = Command::new(node);
    cmd.arg(&js).args(["60000", "0"]);
    let target = Target::spawn(cmd);
    let out = dir.path().join("attached.prof");
    record_pid_cpu(
        target.pid(),
        "node",
        Duration::from_millis(2500),
        "499",
        &out,
        &[],
    );
    check(&out, target.pid());
}
