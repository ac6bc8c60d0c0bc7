//! Java frames outside live recording (issue 30): `profile dump` of a running JVM and
//! a perf.data file recorded by `perf record --call-graph dwarf` from a JVM that still
//! runs show the same Java frames the recorder does (the one Java stage of
//! `replay::java`): interpreted methods, compiled ones with the methods inlined into
//! them, lines. A perf.data file whose JVM has exited names none, and says why.
//! tests/data/java/Inline.java: `inline-worker` loops on work() → outer() → mixA()
//! (¾ of the work) and mixB() (¼), all inlined by C2 into work(); its main thread
//! sleeps 20 ms at a time in an interpreted loop. Needs a JDK 17; skipped with a
//! printed reason where there is none.

use std::process::Command;

use serde_json::Value;

use crate::common::*;
use crate::java::{one_jvm_at_a_time, remove_jvm_files};
use crate::java_frames::stacks_with_lines;
use crate::java_inlined::{inline_classes, line_of, wait_for_c2};

/// `profile dump --json` of `pid`.
fn dump_json(pid: u32) -> Value {
    let o = run_profile(&["dump", "--pid", &pid.to_string(), "--json"]);
    ok(&o);
    serde_json::from_str(&stdout(&o)).unwrap()
}

/// A dumped frame: function, location, and the functions inlined into it with their
/// locations, innermost first.
type DumpedFrame = (String, Option<String>, Vec<(String, Option<String>)>);

/// The frames of each thread named `name` in dump `d`, leaf first.
fn thread_frames(d: &Value, name: &str) -> Vec<Vec<DumpedFrame>> {
    let s = |v: &Value| v.as_str().map(str::to_owned);
    let threads: Vec<Vec<DumpedFrame>> = d["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"] == name)
        .map(|t| {
            t["frames"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| {
                    let inlined = f["inlined"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|i| (s(&i["function"]).unwrap(), s(&i["location"])))
                        .collect();
                    (
                        s(&f["function"]).unwrap_or_default(),
                        s(&f["location"]),
                        inlined,
                    )
                })
                .collect()
        })
        .collect();
    assert!(!threads.is_empty(), "no thread {name}: {d:#}");
    threads
}

#[test]
fn dump_shows_interpreted_and_inlined_java_frames() {
    let Some((classes, source)) = inline_classes() else {
        return;
    };
    let _one_jvm = one_jvm_at_a_time();
    let mut cmd = Command::new("java");
    cmd.arg("-cp").arg(&classes).arg("Inline");
    let jvm = Target::spawn(cmd);
    let pid = jvm.pid();
    wait_for_c2(pid);
    let at = |text: &str| Some(format!("Inline.java:{}", line_of(&source, text)));
    let outer_a = ("long Inline.outer(long)".to_owned(), at("x = mixA(x);"));
    let outer_b = ("long Inline.outer(long)".to_owned(), at("return mixB(x);"));
    let work = ("void Inline.work()".to_owned(), at("x = outer(x);"));
    let mix_body = |name: &str, loc: &Option<String>| {
        let from = line_of(&source, &format!("static long {name}(long x)"));
        loc.as_deref()
            .and_then(|l| l.strip_prefix("Inline.java:"))
            .and_then(|l| l.parse::<u32>().ok())
            .is_some_and(|l| (from..from + 5).contains(&l))
    };
    // The worker is on a CPU: each dump samples it once, wherever it is. Its compiled
    // loop is nearly all of its time; a sample in the runtime's own code (compilation
    // policy, a safepoint) is possible, so it is dumped until it is seen there, and
    // never seen under a wrong chain.
    let mut exact = 0;
    for _ in 0..10 {
        let d = dump_json(pid);
        let worker = thread_frames(&d, "inline-worker").remove(0);
        let Some(i) = worker.iter().position(|f| f.0 == work.0) else {
            continue;
        };
        let (function, location, inlined) = &worker[i];
        if inlined.is_empty() {
            // In work()'s own code, between the calls (the store after one, the
            // loop's back edge): a line of its loop, and nothing inlined to check.
            let own = line_of(&source, "while (true)")..=line_of(&source, "sink = x;");
            let line = location
                .as_deref()
                .and_then(|l| l.strip_prefix("Inline.java:"))
                .and_then(|l| l.parse::<u32>().ok());
            assert!(
                line.is_some_and(|l| own.contains(&l)),
                "work() outside its loop: {worker:#?}"
            );
            continue;
        }
        assert_eq!((function, location), (&work.0, &work.1), "{worker:#?}");
        let ok = match &inlined[..] {
            [mix, outer] => {
                mix.0 == "long Inline.mixA(long)" && mix_body("mixA", &mix.1) && *outer == outer_a
                    || mix.0 == "long Inline.mixB(long)"
                        && mix_body("mixB", &mix.1)
                        && *outer == outer_b
            }
            _ => false,
        };
        assert!(ok, "inlined chain of work(): {worker:#?}");
        // Its callers: the lambda and Thread.run(), then the JVM's call stub.
        let callers: Vec<&str> = worker[i + 1..].iter().map(|f| f.0.as_str()).collect();
        assert!(
            callers.len() > 2
                && callers[0].starts_with("void Inline$$Lambda$")
                && callers[0].ends_with(".run()")
                && callers[1] == "void java.lang.Thread.run()",
            "{worker:#?}"
        );
        exact += 1;
        // The main thread (one of the two named `java`: the launcher's waits for it)
        // sleeps in its interpreted loop (`Thread.sleep(20)`).
        let main = thread_frames(&d, "java");
        let sleep = at("Thread.sleep(20);");
        assert!(
            main.iter()
                .flatten()
                .any(|f| { f.0 == "void Inline.main(java.lang.String[])" && f.1 == sleep }),
            "{main:#?}"
        );
        break;
    }
    drop(jvm);
    remove_jvm_files(pid);
    assert_eq!(
        exact, 1,
        "the worker never seen in its compiled loop in 10 dumps"
    );
}

/// Whether perf is installed.
fn have_perf() -> bool {
    let found = Command::new("perf").arg("--version").output().is_ok();
    if !found {
        eprintln!("skipped: perf is not installed");
    }
    found
}

#[test]
fn perf_data_of_a_running_jvm_shows_inlined_java_frames() {
    if !have_perf() {
        return;
    }
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
    let data = dir.path().join("jvm.data");
    // 2 s of the worker's CPU at 499 Hz: about 1,000 worker samples, however loaded
    // the machine is.
    perf_record_thread_cpu(
        pid,
        "inline-worker",
        std::time::Duration::from_secs(2),
        "dwarf",
        &data,
    );
    let work = format!(
        "void Inline.work():{}_[j]",
        line_of(&source, "x = outer(x);")
    );
    let outer = |text: &str| format!("long Inline.outer(long):{}_[i]", line_of(&source, text));
    let (outer_a, outer_b) = (outer("x = mixA(x);"), outer("return mixB(x);"));
    let in_body = |frame: &str, name: &str| {
        let from = line_of(&source, &format!("static long {name}(long x)"));
        frame
            .strip_prefix(&format!("long Inline.{name}(long):"))
            .and_then(|l| l.strip_suffix("_[i]"))
            .and_then(|l| l.parse::<u32>().ok())
            .is_some_and(|l| (from..from + 5).contains(&l))
    };
    let stacks = stacks_with_lines(&data);
    let worker: Vec<_> = stacks
        .iter()
        .filter(|(f, _)| f[0] == "inline-worker")
        .collect();
    let total: u64 = worker.iter().map(|(_, n)| n).sum();
    let chain = |f: &[String]| -> Vec<String> {
        let user: Vec<&String> = f.iter().filter(|x| !x.ends_with("_[k]")).collect();
        let i = user.iter().position(|x| **x == work).unwrap_or(user.len());
        user[i..].iter().map(|x| (*x).clone()).collect()
    };
    let count = |inner: &str, outer: &str| -> u64 {
        let exact = |(f, _): &&&(Vec<String>, u64)| {
            let c = chain(f);
            c.len() == 3 && c[1] == outer && in_body(&c[2], inner)
        };
        worker.iter().filter(exact).map(|(_, n)| n).sum()
    };
    let (a, b) = (count("mixA", &outer_a), count("mixB", &outer_b));
    assert!(total >= 300, "too few worker samples: {total}");
    assert!(
        (a + b) * 100 >= total * 80 && a > b && b * 100 >= total * 5,
        "mixA {a}, mixB {b} of {total} worker samples: {worker:#?}"
    );
    // Never an inlined method under the wrong caller.
    for (f, n) in &worker {
        for (i, x) in f.iter().enumerate() {
            if x.contains("Inline.mix") {
                let ok = in_body(x, "mixA") && f[i - 1] == outer_a
                    || in_body(x, "mixB") && f[i - 1] == outer_b;
                assert!(ok, "{n} samples: {f:?}");
            }
        }
    }
    // Once the JVM has exited, nothing is read from a process that is not it.
    drop(jvm);
    remove_jvm_files(pid);
    let o = run_profile(&["report", "-i", data.to_str().unwrap(), "--folded", "-"]);
    ok(&o);
    let (out, err) = (stdout(&o), String::from_utf8_lossy(&o.stderr).into_owned());
    assert!(!out.contains("Inline.mix"), "{out}");
    assert!(
        err.contains(&format!(
            "Java frames of process {pid} not named: it has exited"
        )),
        "{err}"
    );
}
