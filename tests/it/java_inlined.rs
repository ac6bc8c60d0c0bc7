//! Compiled Java frames shown with the methods HotSpot inlined into them (issue 30):
//! tests/data/java/Inline.java's loop `work()` calls `outer()`, which calls `mixA()`
//! and `mixB()`; with no flag, C2 inlines all three into the loop's compiled code.
//! Attached once C2 compiled it (as `jcmd PID Compiler.codelist` says), `profile`
//! shows each sample's exact chain, the inlined levels marked, each with its line.
//! Needs a JDK 17 (`javac`, `java`, `jcmd`); skipped with a printed reason where there
//! is none.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::*;
use crate::java::{one_jvm_at_a_time, remove_jvm_files};
use crate::java_frames::stacks_with_lines;

/// The compiled Inline class's directory and its source, or None (reason printed)
/// without a JDK.
pub(crate) fn inline_classes() -> Option<(PathBuf, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/java/Inline.java");
    let dir = crate::java::javac("java-inline", &src, &["jcmd"])?;
    Some((dir, std::fs::read_to_string(&src).unwrap()))
}

/// The line of Inline.java holding `text`.
pub(crate) fn line_of(source: &str, text: &str) -> u32 {
    let i = source.lines().position(|l| l.contains(text)).unwrap();
    i as u32 + 1
}

/// Waits until C2 compiled `work()` (tier 4, in use), as the JVM lists its code.
pub(crate) fn wait_for_c2(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let o = Command::new("jcmd")
            .args([&pid.to_string(), "Compiler.codelist"])
            .output()
            .unwrap();
        let list = String::from_utf8_lossy(&o.stdout);
        // `ID LEVEL STATE Inline.work()V [...]`
        if list.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[1] == "4" && f[2] == "0" && f[3] == "Inline.work()V"
        }) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "work() not compiled by C2: {list}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn inlined_java_methods_are_frames_of_their_own_with_lines() {
    let Some((classes, source)) = inline_classes() else {
        return;
    };
    let _one_jvm = one_jvm_at_a_time();
    let mut cmd = Command::new("java");
    cmd.arg("-cp").arg(&classes).arg("Inline");
    let jvm = Target::spawn(cmd);
    let pid = jvm.pid();
    wait_for_c2(pid);
    let dir = scratch();
    let out = dir.path().join("inline.prof");
    let o = run_profile(&[
        "record",
        "-p",
        &pid.to_string(),
        "-d",
        "2",
        "-F",
        "999",
        "-o",
        out.to_str().unwrap(),
    ]);
    ok(&o);
    drop(jvm);
    remove_jvm_files(pid);
    let work = format!(
        "void Inline.work():{}_[j]",
        line_of(&source, "x = outer(x);")
    );
    let outer_a = format!(
        "long Inline.outer(long):{}_[i]",
        line_of(&source, "x = mixA(x);")
    );
    let outer_b = format!(
        "long Inline.outer(long):{}_[i]",
        line_of(&source, "return mixB(x);")
    );
    // Each mix method's body: from its declaration to its return.
    let body = |name: &str| {
        let from = line_of(&source, &format!("static long {name}(long x)"));
        from..from + 5
    };
    let in_body = |frame: &str, name: &str| {
        frame
            .strip_prefix(&format!("long Inline.{name}(long):"))
            .and_then(|l| l.strip_suffix("_[i]"))
            .and_then(|l| l.parse::<u32>().ok())
            .is_some_and(|l| body(name).contains(&l))
    };
    let stacks = stacks_with_lines(&out);
    let worker: Vec<_> = stacks
        .iter()
        .filter(|(f, _)| f[0] == "inline-worker")
        .collect();
    let total: u64 = worker.iter().map(|(_, n)| n).sum();
    // The Java part of a stack, leaf last: kernel frames below it left out.
    let chain = |f: &[String]| -> Vec<String> {
        let user: Vec<&String> = f.iter().filter(|x| !x.ends_with("_[k]")).collect();
        let i = user.iter().position(|x| **x == work).unwrap_or(user.len());
        user[i..].iter().map(|x| (*x).clone()).collect()
    };
    let count = |inner: &str, outer: &str| -> u64 {
        worker
            .iter()
            .filter(|(f, _)| {
                let c = chain(f);
                c.len() == 3 && c[1] == outer && in_body(&c[2], inner)
            })
            .map(|(_, n)| n)
            .sum()
    };
    let (a, b) = (count("mixA", &outer_a), count("mixB", &outer_b));
    assert!(total >= 300, "too few worker samples: {total}");
    // mixA does three quarters of the work, mixB one quarter; the few others are in
    // work()'s own code.
    let others: Vec<_> = worker
        .iter()
        .map(|(f, n)| (chain(f), n))
        .filter(|(c, _)| c.len() != 3)
        .collect();
    assert!(
        (a + b) * 100 >= total * 80,
        "{a} + {b} of {total} worker samples end in work;outer;mixA|mixB: {others:#?}"
    );
    assert!(
        a > b && b * 100 >= total * 5,
        "mixA {a}, mixB {b} of {total}"
    );
    // Never an inlined method under the wrong caller or line. (Its caller is `outer`
    // inlined too, or `outer`'s own compiled code, `_[j]`, which C2 also compiles.)
    let strip = |x: &str| {
        x.trim_end_matches("_[i]")
            .trim_end_matches("_[j]")
            .to_owned()
    };
    for (f, n) in &worker {
        for (i, x) in f.iter().enumerate() {
            if x.contains("Inline.mix") {
                let caller = strip(&f[i - 1]);
                let ok = in_body(x, "mixA") && caller == strip(&outer_a)
                    || in_body(x, "mixB") && caller == strip(&outer_b);
                assert!(ok, "{n} samples: {f:?}");
            }
        }
    }
}
