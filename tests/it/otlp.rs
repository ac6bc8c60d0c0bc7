//! OTLP Profiles out, read by OpenTelemetry's own protos (the pinned
//! `opentelemetry-proto` package, through tests/fixture/otlp_decode.py): `report
//! --otlp` of a real two-thread program gives the recording's samples, names and
//! threads, its values equal to the folded totals; `record --push-format otlp`
//! delivers its windows to a receiver that restarts, and copes with the receivers
//! that fail (push.rs).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::common::*;

mod agent;
mod push;

/// The directory the pinned protos are installed in (.ci/run), or None (with a
/// note) when they are not and CI did not ask for every consumer.
pub(crate) fn protos() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("consumers/python");
    if dir.join("opentelemetry/proto/profiles").exists() {
        return Some(dir);
    }
    let what = "the opentelemetry-proto Python package";
    if std::env::var_os("PROFILE_REQUIRE_CONSUMERS").is_some() {
        panic!("{what} is not installed (.ci/run installs it)");
    }
    eprintln!("skipped: {what} is not installed (.ci/run installs it)");
    None
}

/// Each file decoded with the official protos: its summary (see otlp_decode.py),
/// after checking that no reference points outside its table.
pub(crate) fn decode(protos: &Path, files: &[PathBuf]) -> Vec<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixture/otlp_decode.py");
    let o = Command::new("python3")
        .arg(script)
        .args(files)
        .env("PYTHONPATH", protos)
        .output()
        .expect("run python3");
    assert!(o.status.success(), "otlp_decode.py: {}", stderr(&o));
    let v: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    for (f, s) in files.iter().zip(&v) {
        assert_eq!(s["errors"], serde_json::json!([]), "{}", f.display());
    }
    v
}

/// The profile of `type` in a resource.
fn profile_of<'a>(resource: &'a Value, ty: &str) -> &'a Value {
    resource["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["type"] == ty)
        .unwrap_or_else(|| panic!("no {ty} profile in {resource}"))
}

fn num(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

fn chains_bin() -> PathBuf {
    build_c("chains.c", &["-O2", "-g", "-fomit-frame-pointer"])
}

fn chains() -> Target {
    Target::start(&chains_bin(), &["worker", "qsort"])
}

/// The executable's file name, and the process name (`comm`, 15 bytes of it).
fn chains_names() -> (String, String) {
    let exe = chains_bin()
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let comm = exe.chars().take(15).collect();
    (exe, comm)
}

#[test]
fn report_otlp_of_two_threads_decodes_with_the_official_protos() {
    let Some(protos) = protos() else { return };
    let dir = scratch();
    let target = chains();
    let rec = dir.path().join("r.prof");
    // Each thread's own CPU time: named frames are sure to be sampled.
    let r = Recorder::attach(target.pid(), "199", &rec, &["-q"]);
    wait_thread_cpu(target.pid(), "worker", Duration::from_millis(800));
    wait_thread_cpu(target.pid(), "sorter", Duration::from_millis(800));
    r.stop();
    drop(target);
    let otlp = dir.path().join("r.otlp.pb");
    let folded = dir.path().join("r.folded");
    ok(&run_profile(&[
        "report",
        "-i",
        rec.to_str().unwrap(),
        "--otlp",
        otlp.to_str().unwrap(),
        "--folded",
        folded.to_str().unwrap(),
    ]));
    let v = decode(&protos, std::slice::from_ref(&otlp));
    let resources = v[0]["resources"].as_array().unwrap();
    assert_eq!(resources.len(), 1, "one process: {resources:?}");
    let r = &resources[0];
    let attrs = &r["attributes"];
    assert_eq!(num(&attrs["process.pid"]), u64::from(target_pid(&rec)));
    // The service is the executable's name (no systemd service here).
    let (exe, _) = chains_names();
    assert_eq!(attrs["process.executable.name"], exe.as_str(), "{attrs}");
    assert_eq!(attrs["service.name"], exe.as_str(), "{attrs}");
    assert!(attrs["host.name"].as_str().is_some_and(|h| !h.is_empty()));

    // Folded counts samples; its lines through each function.
    let text = std::fs::read_to_string(&folded).unwrap();
    let through = |f: &str| -> u64 {
        text.lines()
            .filter(|l| l.split(';').any(|fr| fr.split(' ').next() == Some(f)))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum()
    };
    let recording = read(&rec);
    let model = model(&rec);
    let counts = profile_of(r, "samples");
    assert_eq!(counts["unit"], "count");
    let cpu = profile_of(r, "cpu");
    assert_eq!(cpu["unit"], "nanoseconds");
    let total = num(&counts["total"]);
    assert!(
        total * 10 >= recording.samples.len() as u64 * 9,
        "{total} of {} samples",
        recording.samples.len()
    );
    for f in ["level_c", "cmp_ints"] {
        let ours = num(&counts["by_function"][f]);
        let want = through(f);
        assert!(want > 10, "{f}: {want} samples in folded\n{text}");
        assert!(
            ours.abs_diff(want) * 100 <= want,
            "{f}: {ours} in OTLP, {want} in folded"
        );
        assert!(num(&cpu["by_function"][f]) > 0, "{f} has CPU time");
    }
    // cpu: each sample's exact weight, the [unsampled] remainders included.
    let weight = model.total_weight();
    let cpu_total = num(&cpu["total"]);
    assert!(
        cpu_total.abs_diff(weight) * 100 <= weight,
        "{cpu_total} ns in OTLP, {weight} in the model"
    );
    assert_eq!(num(&cpu["period"]), recording.meta.sample_period_ns);
    for p in [cpu, counts] {
        for t in ["worker", "sorter"] {
            assert!(num(&p["by_thread"][t]) > 0, "thread.name {t}: {p}");
        }
        assert_eq!(
            p["sample_attribute_keys"],
            serde_json::json!(["thread.id", "thread.name"])
        );
        assert!(
            p["frame_types"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k == "native"),
            "{p}"
        );
    }
    // Every CPU sample's timestamp: one value per sample of the recording's threads
    // (and one per thread's [unsampled] remainder).
    assert!(num(&cpu["values"]) >= total, "{cpu}");
}

/// The process a recording attached to.
fn target_pid(rec: &Path) -> u32 {
    read(rec)
        .meta
        .pid
        .expect("an attached recording names its pid")
}
