//! `profile top` names runtime frames in every window, not only the first: the live
//! recorder forgets its tables after each window (a new generation of frame and
//! mapping ids), and its Python stage once looked the eval loop's module up by the
//! old ids, so from the second window on every Python frame was lost to
//! `_PyEval_EvalFrameDefault`. And `top --children` follows a pre-fork server's
//! workers, which come and go while it watches.

use std::path::Path;
use std::process::Command;

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

/// The tables of `top --plain` in `text` in which the target ran (a window in which a
/// loaded machine gave it no CPU has no row to check).
fn ran(text: &str) -> Vec<Vec<(f64, String)>> {
    tables(text).into_iter().filter(|t| !t.is_empty()).collect()
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
    let out = run_profile(&[
        "top",
        "--plain",
        "--pid",
        &pid,
        "-d",
        "5",
        "--interval",
        "1",
        "--window",
        "1",
        "--rows",
        "5",
    ]);
    ok(&out);
    let text = stdout(&out);
    let tables = ran(&text);
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
fn top_children_all_shows_a_preforking_masters_workers_in_every_window() {
    let Some(python) = newest_python() else {
        return;
    };
    let mut cmd = Command::new(python);
    cmd.arg(script("prefork.py"));
    let t = Target::spawn(cmd);
    let pid = t.pid().to_string();
    // Workers live 2 s: over 6 s, every worker of the first tables has been replaced
    // by one forked while `top` watched.
    let out = run_profile(&[
        "top",
        "--plain",
        "--pid",
        &pid,
        "--children=all",
        "-d",
        "6",
        "--interval",
        "1",
        "--window",
        "1",
        "--rows",
        "8",
    ]);
    ok(&out);
    let text = stdout(&out);
    let tables = ran(&text);
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
