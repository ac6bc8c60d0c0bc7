//! `report --runtime-only`, the runtimes' view, on a real CPython program: the
//! interpreter's internals between and below Python frames are folded into the
//! Python frame that called them, the native frames before the first Python frame
//! stay, and every total is the same as in the native view.

use std::path::Path;
use std::process::Command;

use crate::common::*;
use crate::python::pythons;

#[test]
fn the_runtimes_view_folds_the_interpreter_into_python_frames() {
    let Some((_, python)) = pythons().pop() else {
        eprintln!("no CPython 3.8+ in ~/.pyenv/versions: skipped");
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/python/two_hot.py");
    let mut cmd = Command::new(python);
    cmd.arg(script);
    let t = Target::spawn(cmd);
    let dir = scratch();
    let out = dir.path().join("py.prof");
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", t.pid())).unwrap();
    // 1.5 s of the thread's own CPU at 99 Hz: some 150 samples.
    record_pid_cpu(
        t.pid(),
        comm.trim(),
        std::time::Duration::from_millis(1500),
        "99",
        &out,
        &[],
    );
    let folded = |extra: &[&str]| -> Vec<(Vec<String>, u64)> {
        let mut args = vec!["report", "-i", out.to_str().unwrap(), "--folded", "-"];
        args.extend_from_slice(extra);
        let o = run_profile(&args);
        ok(&o);
        stdout(&o)
            .lines()
            .filter_map(|l| {
                let (s, n) = l.rsplit_once(' ')?;
                Some((s.split(';').map(str::to_owned).collect(), n.parse().ok()?))
            })
            .collect()
    };
    let native = folded(&[]);
    let view = folded(&["--runtime-only"]);
    let total = |v: &[(Vec<String>, u64)]| v.iter().map(|(_, n)| n).sum::<u64>();
    assert_eq!(
        total(&native),
        total(&view),
        "the view moves time, never drops it"
    );
    // The native view has the interpreter between and below the Python frames.
    assert!(
        native.iter().any(|(f, _)| {
            let first = f.iter().position(|x| x.ends_with("_[j]"));
            first.is_some_and(|i| f[i..].iter().any(|x| !x.ends_with("_[j]")))
        }),
        "{native:?}"
    );
    let mut hot = 0;
    for (frames, n) in &view {
        if let Some(i) = frames.iter().position(|x| x.ends_with("_[j]")) {
            // From the first Python frame on: Python frames only.
            assert!(
                frames[i..].iter().all(|x| x.ends_with("_[j]")),
                "{frames:?}"
            );
            // The native frames before it are the native view's.
            assert!(frames[..i].iter().any(|x| x.contains("main")), "{frames:?}");
        }
        let leaf = frames.last().map(String::as_str).unwrap_or("");
        if leaf == "churn_alpha_[j]" || leaf == "churn_beta_[j]" {
            hot += n;
        }
    }
    // The two hot functions hold their own time as self time: the loop's time in
    // the eval loop's helpers is theirs.
    assert!(
        hot * 100 >= total(&view) * 85,
        "{hot} of {}: {view:?}",
        total(&view)
    );
}
