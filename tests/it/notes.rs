//! Hints and notes in every output (issue 50): what the recorder says of the naming
//! and the runtimes was said only in `record`'s summary; the report table's footer, the
//! SVG's subtitle and the JSON (`summary.notes`) now say it too. The case: a Node whose
//! JavaScript frames cannot be named (issue 47): a copy of the installed Node with one
//! of V8's postmortem symbols renamed, as an unknown Node would lack it, and no perf
//! map: every output says why its frames are unnamed and to start it with
//! --perf-basic-prof.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::common::*;

/// A copy of the installed Node in `dir`, named `node`, whose `v8dbg_off_fp_function`
/// (where a frame keeps its function) is spelled otherwise; None without a Node.
fn unknown_node(dir: &Path) -> Option<PathBuf> {
    let found = Command::new("sh").args(["-c", "command -v node"]).output();
    let path = found.ok().filter(|o| o.status.success())?;
    let path = String::from_utf8(path.stdout).ok()?;
    let mut image = std::fs::read(path.trim()).ok()?;
    let name = b"v8dbg_off_fp_function\0";
    let mut renamed = 0;
    let mut at = 0;
    while let Some(i) = image[at..].windows(name.len()).position(|w| w == name) {
        image[at + i + name.len() - 2] = b'X';
        at += i + name.len();
        renamed += 1;
    }
    assert!(
        renamed > 0,
        "the installed node exports no v8dbg_off_fp_function"
    );
    let copy = dir.join("node");
    std::fs::write(&copy, image).unwrap();
    let mut perm = std::fs::metadata(&copy).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&copy, perm).unwrap();
    Some(copy)
}

#[test]
fn nodes_missing_perf_map_hint_is_in_every_output() {
    let dir = scratch();
    let Some(node) = unknown_node(dir.path()) else {
        eprintln!("skipped: node is not installed (.ci/run installs it)");
        return;
    };
    let js = "function hotLoop(n){let s=0;for(let i=0;i<n;i++){s+=i%7}return s}\
              console.log('ready');for(;;){hotLoop(1e6)}";
    let mut cmd = Command::new(&node);
    cmd.current_dir(dir.path()).args(["-e", js]);
    let target = Target::spawn(cmd);
    // Let the JIT compile hotLoop (its code is in anonymous memory, named by
    // nothing), then record a second of its CPU time, however loaded the machine.
    let pid = target.pid();
    wait_thread_cpu(pid, "node", Duration::from_millis(500));
    let out = dir.path().join("x.prof");
    let rec = Recorder::attach(pid, "499", &out, &[]);
    wait_thread_cpu(pid, "node", Duration::from_secs(1));
    let o = rec.stop();
    ok(&o);
    drop(target);
    let pid = pid.to_string();
    let hint = "--perf-basic-prof";
    let why = "lacks off_fp_function";
    let summary = stderr(&o);
    assert!(summary.contains(hint) && summary.contains(why), "{summary}");
    let input = out.to_str().unwrap();
    let table = run_profile(&["report", "-i", input]);
    ok(&table);
    let table = stdout(&table);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("Note: ") && l.contains(hint) && l.contains(why)),
        "{table}"
    );
    let json = run_profile(&["report", "-i", input, "--json"]);
    ok(&json);
    let json: Value = serde_json::from_str(&stdout(&json)).unwrap();
    let notes = json["summary"]["notes"].as_array().expect("summary.notes");
    assert!(
        notes.iter().any(|n| n
            .as_str()
            .is_some_and(|n| n.contains(hint) && n.contains(why))),
        "{notes:?}"
    );
    let svg = dir.path().join("x.svg");
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
    assert!(
        subtitle.contains(" notes: ")
            && subtitle.contains(&format!("process {pid}"))
            && subtitle.contains(hint)
            && subtitle.contains(why),
        "{subtitle}"
    );
}
