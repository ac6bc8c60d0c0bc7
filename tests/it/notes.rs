//! Hints and notes in every output (issue 50): what the recorder says of the naming
//! and the runtimes (here Node's JIT code without a perf map: start it with
//! --perf-basic-prof) was said only in `record`'s summary; the report table's footer,
//! the SVG's subtitle and the JSON (`summary.notes`) now say it too.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::common::*;

#[test]
fn nodes_missing_perf_map_hint_is_in_every_output() {
    if Command::new("node").arg("--version").output().is_err() {
        eprintln!("skipped: node is not installed (.ci/run installs it)");
        return;
    }
    let dir = scratch();
    let js = "function hotLoop(n){let s=0;for(let i=0;i<n;i++){s+=i%7}return s}\
              console.log('ready');for(;;){hotLoop(1e6)}";
    let mut cmd = Command::new("node");
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
    let summary = stderr(&o);
    assert!(summary.contains(hint), "{summary}");
    let input = out.to_str().unwrap();
    let table = run_profile(&["report", "-i", input]);
    ok(&table);
    let table = stdout(&table);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("Note: ") && l.contains(hint)),
        "{table}"
    );
    let json = run_profile(&["report", "-i", input, "--json"]);
    ok(&json);
    let json: Value = serde_json::from_str(&stdout(&json)).unwrap();
    let notes = json["summary"]["notes"].as_array().expect("summary.notes");
    assert!(
        notes
            .iter()
            .any(|n| n.as_str().is_some_and(|n| n.contains(hint))),
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
        subtitle.contains("1 note: ")
            && subtitle.contains(&format!("process {pid}"))
            && subtitle.contains(hint),
        "{subtitle}"
    );
}
