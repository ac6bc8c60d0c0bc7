//! `profile top` names runtime frames in every window, not only the first: the live
//! recorder forgets its tables after each window (a new generation of frame and
//! mapping ids), and its Python stage once looked the eval loop's module up by the
//! old ids, so from the second window on every Python frame was lost to
//! `_PyEval_EvalFrameDefault`. And `top --children` follows a pre-fork server's
//! workers, which come and go while it watches; `record` of such a master alone
//! points to them.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::*;
use crate::python::pythons;
use crate::top::tables;

/// The newest CPython installed (the tests that need one are skipped without).
fn newest_python() -> Option<std::path::PathBuf> {
    let found = pythons().pop().map(|(_, p)| p);
    if found.is_none() {
        eprintln!("no CPython 3.8+ in ~/.pyenv/versions: skipped");
    }
    found
}

fn script(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/python")
        .join(name)
}

/// The tables of `top --plain` in `text` in which the target had CPU enough for its
/// named frames to be sampled: at least `min_cpu_ms` of CPU in the window, by the
/// header's share of a CPU and the window's length (the kernel's figures). A loaded
/// machine may starve the target for a while: such a window holds a few samples.
fn ran(text: &str, min_cpu_ms: f64) -> Vec<Vec<(f64, String)>> {
    let cpu_ms = text
        .lines()
        .filter(|l| l.starts_with("profile top:"))
        .map(|l| {
            let number = |after: &str, end: char| {
                let rest = l.split(after).nth(1)?;
                rest.split(end).next()?.trim().parse::<f64>().ok()
            };
            Some(number("  CPU ", '%')? * 10.0 * number("  last ", 's')?)
        });
    tables(text)
        .into_iter()
        .zip(cpu_ms)
        .filter(|(t, cpu)| !t.is_empty() && cpu.is_some_and(|c| c >= min_cpu_ms))
        .map(|(t, _)| t)
        .collect()
}

/// Runs `profile top --plain ARGS` (one table per 1 s window) until it has printed
/// `needed` whole tables in which the target had 60 ms of CPU or more (then SIGTERM
/// ends it), or for two minutes; returns what it printed.
fn top_until(args: &[&str], needed: usize) -> String {
    let mut child = Command::new(profile_bin())
        .args(["top", "--plain", "-d", "120", "-F", "499"])
        .args(["--interval", "1", "--window", "1"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run profile top");
    let mut text = String::new();
    let mut asked = false;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let Ok(line) = line else { break };
        // A header ends the table before it.
        if !asked && line.starts_with("profile top:") && ran(&text, 60.0).len() >= needed {
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            asked = true;
        }
        text.push_str(&line);
        text.push('\n');
    }
    let _ = child.wait();
    text
}

#[test]
fn top_names_python_functions_in_every_window() {
    let Some(python) = newest_python() else {
        return;
    };
    let mut cmd = Command::new(python);
    cmd.arg(script("two_hot.py"));
    let t = Target::spawn(cmd);
    let pid = t.pid().to_string();
    // One window per table (--window 1): a table cannot borrow the names of an
    // earlier window.
    let text = top_until(&["--pid", &pid, "--rows", "5"], 3);
    let tables = ran(&text, 60.0);
    assert!(tables.len() >= 3, "{} tables:\n{text}", tables.len());
    for (i, rows) in tables.iter().enumerate() {
        assert!(
            rows.iter()
                .any(|(_, f)| f == "churn_alpha" || f == "churn_beta"),
            "table {i} names no hot Python function in its top 5:\n{text}"
        );
    }
}

#[test]
fn top_runtime_only_leads_with_the_programs_functions() {
    // In the runtimes' view the eval loop's helpers under a Python function are its
    // own time: the two hot functions are the table's first rows, whatever share of
    // the time the interpreter's internals take in the native view.
    let Some(python) = newest_python() else {
        return;
    };
    let mut cmd = Command::new(python);
    cmd.arg(script("two_hot.py"));
    let t = Target::spawn(cmd);
    let pid = t.pid().to_string();
    let text = top_until(&["--pid", &pid, "--rows", "5", "--runtime-only"], 3);
    let tables = ran(&text, 60.0);
    assert!(tables.len() >= 3, "{} tables:\n{text}", tables.len());
    for (i, rows) in tables.iter().enumerate() {
        let first = rows.first().map(|(_, f)| f.as_str()).unwrap_or("");
        assert!(
            first == "churn_alpha" || first == "churn_beta",
            "table {i} does not lead with a hot Python function:\n{text}"
        );
    }
}

#[test]
fn top_children_all_shows_a_preforking_masters_workers_in_every_window() {
    let Some(python) = newest_python() else {
        return;
    };
    let mut cmd = Command::new(python);
    cmd.arg(script("prefork.py"));
    let t = Target::spawn(cmd);
    let pid = t.pid().to_string();
    // Workers live 2 s: from the third table on, every worker of the first has been
    // replaced by one forked while `top` watched.
    let text = top_until(&["--pid", &pid, "--children=all", "--rows", "8"], 4);
    let tables = ran(&text, 60.0);
    assert!(tables.len() >= 4, "{} tables:\n{text}", tables.len());
    for (i, rows) in tables.iter().enumerate().skip(1) {
        assert!(
            rows.iter()
                .any(|(_, f)| f == "handle_request" || f == "render_page"),
            "table {i} names no worker's Python function:\n{text}"
        );
    }
    // The master only waits: the CPU is its workers', several processes.
    assert!(
        text.lines().any(|l| l.contains(" processes; busiest: ")),
        "no worker in the tables:\n{text}"
    );
}

#[test]
fn record_of_an_idle_prefork_master_points_to_its_workers_only() {
    // `record --pid MASTER` without --children=all: the master only waits, its
    // workers (running before attach) hold the work. The summary says to pass
    // --children=all, not to raise -F, and no false "no Python frame" note.
    let Some(python) = newest_python() else {
        return;
    };
    let mut cmd = Command::new(python);
    cmd.arg(script("prefork.py"));
    let t = Target::spawn(cmd);
    let dir = scratch();
    let out = dir.path().join("master.prof");
    let o = run_profile(&[
        "record",
        "--pid",
        &t.pid().to_string(),
        "-d",
        "2",
        "-o",
        out.to_str().unwrap(),
    ]);
    ok(&o);
    let err = stderr(&o);
    assert!(err.contains("pass --children=all"), "{err}");
    assert!(!err.contains("higher -F"), "{err}");
    assert!(!err.contains("no Python frame"), "{err}");
}

#[test]
fn top_processes_view_draws_each_worker_under_its_master() {
    // The workers running at attach get their parent from /proc, those forked while
    // `top` watches from the recording: both sit under the master, and the master
    // (idle: no sample) is drawn above them all the same.
    let Some(python) = newest_python() else {
        return;
    };
    let mut cmd = Command::new(python);
    cmd.arg(script("prefork.py"));
    let t = Target::spawn(cmd);
    let master = t.pid();
    let o = run_profile(&[
        "top",
        "--plain",
        "-d",
        "7",
        "--interval",
        "1",
        "--window",
        "1",
        "--pid",
        &master.to_string(),
        "--children=all",
        "--runtime-only",
        "--view",
        "processes",
    ]);
    ok(&o);
    let text = stdout(&o);
    // Each table's rows: (pid, indentation, hottest function).
    let mut tables: Vec<Vec<(u32, usize, String)>> = Vec::new();
    let mut inside = false;
    for l in text.lines() {
        if l.starts_with("profile top:") {
            inside = false;
        } else if l.contains(" PROCESS ") {
            inside = true;
            tables.push(Vec::new());
        } else if inside && l.len() > 33 {
            let pid = l[..8].trim().parse().expect("a pid");
            let label = &l[9..33];
            let hottest = l[33..].split("  ").last().unwrap_or("").trim().to_owned();
            let indent = label.len() - label.trim_start().len();
            tables.last_mut().unwrap().push((pid, indent, hottest));
        }
    }
    assert!(tables.len() >= 5, "{} tables:\n{text}", tables.len());
    let mut workers = std::collections::HashSet::new();
    let mut named = 0;
    for (i, rows) in tables.iter().enumerate() {
        // The master first, alone at the root; every worker one level under it.
        assert_eq!(
            rows.first().map(|r| (r.0, r.1)),
            Some((master, 0)),
            "table {i}:\n{text}"
        );
        assert!(rows.len() >= 2, "table {i} has no worker:\n{text}");
        for r in &rows[1..] {
            assert_eq!(r.1, 2, "table {i}: {r:?} is not under the master:\n{text}");
            workers.insert(r.0);
            named += usize::from(r.2 == "handle_request" || r.2 == "render_page");
        }
    }
    // Workers live 2 s: over 7 s the first ones were replaced while `top` watched.
    assert!(workers.len() > 2, "workers {workers:?}:\n{text}");
    assert!(
        named > 0,
        "no worker's hottest function is a Python one:\n{text}"
    );
}
