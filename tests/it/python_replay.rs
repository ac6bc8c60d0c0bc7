//! Python frames outside live recording (issue 29), from the one Python stage the
//! recorder uses: `profile dump` of a CPython process shows each thread's Python stack
//! in place of the interpreter's eval frames, between the native frames it runs under
//! and over; `profile report` of a `perf record --call-graph dwarf` file of a process
//! still running shows them too, and says so when the process is not the one recorded.
//! Every CPython 3.8+ under ~/.pyenv/versions, started with no flag.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;
use crate::python::pythons;

const CHANGED: &str = "[python: changed]";

fn asleep(python: &Path) -> Target {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/python/asleep.py");
    let mut cmd = Command::new(python);
    cmd.arg(script);
    Target::spawn(cmd)
}

/// The thread called `name` of a `dump --json`: its frames leaf first, as (function,
/// is a Python frame).
fn frames_of(d: &Value, name: &str) -> Vec<(String, bool)> {
    let t = d["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no thread {name} in {d:#}"));
    t["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let function = f["function"].as_str().unwrap_or("?").to_owned();
            let python = f["module"].is_null()
                && (function == CHANGED
                    || f["location"].as_str().is_some_and(|l| l.contains(".py:")));
            (function, python)
        })
        .collect()
}

fn python_only(frames: &[(String, bool)]) -> Vec<&str> {
    frames
        .iter()
        .filter(|(_, p)| *p)
        .map(|(f, _)| f.as_str())
        .collect()
}

/// How a thread's bootstrap functions are named: qualified from 3.11.
fn bootstrap(minor: u32) -> [&'static str; 3] {
    if minor >= 11 {
        ["Thread.run", "Thread._bootstrap_inner", "Thread._bootstrap"]
    } else {
        ["run", "_bootstrap_inner", "_bootstrap"]
    }
}

fn position(frames: &[(String, bool)], f: impl Fn(&str) -> bool) -> Option<usize> {
    frames.iter().position(|(n, _)| f(n))
}

fn check_dump(minor: u32, d: &Value) {
    assert_eq!(d["stopped_threads"], 0);
    // The main thread: exactly its Python chain, under the C function it called
    // (time.sleep) and over the interpreter's own start.
    let main = frames_of(d, &format!("python3.{minor}"));
    assert_eq!(
        python_only(&main),
        ["middle", "outer", "<module>"],
        "3.{minor}: {main:?}"
    );
    let sleep = position(&main, |n| n == "time_sleep");
    let middle = position(&main, |n| n == "middle");
    let module = position(&main, |n| n == "<module>");
    let run_main = position(&main, |n| n == "Py_RunMain" || n == "main");
    assert!(
        sleep < middle && module < run_main && sleep.is_some() && run_main.is_some(),
        "3.{minor}: Python frames in place among the native ones: {main:?}"
    );
    // The recursion, whole.
    let deep = frames_of(d, "pydeep");
    let mut want = vec!["deep"; 41];
    want.push("sleeper");
    want.extend(bootstrap(minor));
    assert_eq!(python_only(&deep), want, "3.{minor}: {deep:?}");
    // The running thread: spin's chain whole, under hot or spin's own loop (a running
    // thread is read as a sample: its innermost frame may be marked changed).
    let spin = frames_of(d, "pyspin");
    let py = python_only(&spin);
    let mut outer = vec!["spin"];
    outer.extend(bootstrap(minor));
    assert!(
        py.ends_with(&outer) && py.len() <= outer.len() + 1,
        "3.{minor}: {spin:?}"
    );
    if py.len() > outer.len() {
        assert!(matches!(py[0], "hot" | CHANGED), "3.{minor}: {spin:?}");
    }
}

#[test]
fn dump_shows_each_threads_python_stack_among_its_native_frames() {
    let found = pythons();
    assert!(
        found.iter().any(|(m, _)| *m == 8) && found.iter().any(|(m, _)| *m == 11),
        "CPython 3.8 and 3.11 under ~/.pyenv/versions: these tests need them"
    );
    for (minor, python) in found {
        let target = asleep(&python);
        let pid = target.pid().to_string();
        // Until the sleeper is asleep at the bottom of its recursion.
        let started = Instant::now();
        let dump = || {
            let o = run_profile(&["dump", "--pid", &pid, "--json"]);
            ok(&o);
            serde_json::from_str::<Value>(&stdout(&o)).unwrap()
        };
        loop {
            let d = dump();
            let deep = frames_of(&d, "pydeep");
            if position(&deep, |n| n == "time_sleep").is_some() {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "3.{minor}: {d:#}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        for _ in 0..3 {
            check_dump(minor, &dump());
        }
        // The text form names them with their file and line.
        let o = run_profile(&["dump", "--pid", &pid]);
        ok(&o);
        let text = stdout(&o);
        assert!(text.contains("    outer ("), "{text}");
        assert!(text.contains("asleep.py:47)"), "3.{minor}: {text}");
    }
}
