//! The host agent (`record -a --push-format otlp`): each series' request, written by
//! `--push-dry-run`, decodes with the official protos, and a process in a container
//! (a docker-shaped cgroup the test makes) is a resource with its `container.id`.

use std::process::Command;

use super::*;
use crate::agent::Cgroup;

#[test]
fn agent_series_decode_and_name_the_container() {
    let Some(protos) = protos() else { return };
    let me = std::process::id();
    let id = format!("{me:08x}").repeat(8);
    let top = format!("profile-it-otlp-{me}");
    let _top = Cgroup::create(&top);
    let scope = Cgroup::create(&format!("{top}/docker-{id}.scope"));
    let bin = build_c("threads.c", &["-O2", "-g", "-fno-omit-frame-pointer"]);
    let target = scope.start(&bin, &["burner:50:0"]);
    let dir = scratch();
    let sent = dir.path().join("sent");
    let o = Command::new(profile_bin())
        .args([
            "record",
            "-a",
            "-d",
            "3",
            "--push-interval",
            "1",
            "--no-jvm-perfmap",
        ])
        .args([
            "--push",
            "http://127.0.0.1:9",
            "--push-format",
            "otlp",
            "--push-dry-run",
        ])
        .arg(&sent)
        .output()
        .unwrap();
    drop(target);
    ok(&o);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&sent)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".otlp.pb.gz"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{}", stderr(&o));
    let decoded = decode(&protos, &files);
    let ours: Vec<&Value> = decoded
        .iter()
        .flat_map(|d| d["resources"].as_array().unwrap())
        .filter(|r| r["attributes"]["container.id"] == id.as_str())
        .collect();
    assert!(
        !ours.is_empty(),
        "no resource with container.id {id} in {files:?}"
    );
    let exe = bin.file_name().unwrap().to_str().unwrap();
    let burner: u64 = ours
        .iter()
        .map(|r| {
            assert_eq!(r["attributes"]["process.executable.name"], exe, "{r}");
            assert_eq!(r["attributes"]["service.name"], exe, "{r}");
            num(&profile_of(r, "samples")["by_thread"]["burner"])
        })
        .sum();
    assert!(burner > 0, "{ours:?}");
}
