//! Labels a user cannot forge (issue 46): beside a root-owned `nginx.service`
//! cgroup with a root process, a user's delegated subtree (chowned to `nobody`, as
//! systemd's delegation does) holds cgroups she named `nginx.service` and
//! `docker-<64 hex>.scope` with her processes in them. The host agent's series
//! (`--push-dry-run`) keep the system service's labels to its own process, and hers
//! carry no container id, no other service's unit, and her uid.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::agent::{Cgroup, pids};
use crate::common::*;

/// Chowns a cgroup directory and its files (`cgroup.procs` and the rest) to `uid`, as
/// systemd does for a delegated subtree.
fn delegate(dir: &Path, uid: u32) {
    std::os::unix::fs::chown(dir, Some(uid), Some(uid)).unwrap();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.file_type().is_ok_and(|t| t.is_file()) {
            std::os::unix::fs::chown(e.path(), Some(uid), Some(uid)).unwrap();
        }
    }
}

/// A series' service and labels from a dry-run `.query` file's `name=` line.
fn series_of(query: &str) -> (String, BTreeMap<String, String>) {
    let name = query
        .lines()
        .find_map(|l| l.strip_prefix("name="))
        .expect("a name line");
    let (app, rest) = name.split_once('{').expect("labels in braces");
    let labels = rest
        .trim_end_matches('}')
        .split(',')
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    (app.to_owned(), labels)
}

#[test]
fn a_users_delegated_cgroups_never_take_a_services_labels_or_a_container_id() {
    let me = std::process::id();
    let top = format!("profile-it-labels-{me}");
    let id: String = format!("{me:08x}{}", "bad1dea".repeat(10))
        .chars()
        .take(64)
        .collect();
    // Dropped in reverse: the children before their parents, on failure too.
    let _top = Cgroup::create(&top);
    let system = Cgroup::create(&format!("{top}/nginx.service"));
    let hers = Cgroup::create(&format!("{top}/delegated-{me}"));
    let her_nginx = Cgroup::create(&format!("{top}/delegated-{me}/nginx.service"));
    let her_docker = Cgroup::create(&format!("{top}/delegated-{me}/docker-{id}.scope"));
    for c in [&hers, &her_nginx, &her_docker] {
        delegate(c.dir(), 65534);
    }
    let bin = build_c("threads.c", &["-O2", "-g", "-fno-omit-frame-pointer"]);
    let bin_s = bin.to_str().unwrap();
    let root_nginx = system.start(&bin, &["burner:50:0"]);
    let as_nobody = [
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        bin_s,
        "burner:50:0",
    ];
    let setpriv = Path::new("/usr/bin/setpriv");
    let her_a = her_nginx.start(setpriv, &as_nobody);
    let her_b = her_docker.start(setpriv, &as_nobody);
    let her_pids = [u64::from(her_a.pid()), u64::from(her_b.pid())];
    let root_pid = u64::from(root_nginx.pid());

    let dir = scratch();
    let sent = dir.path().join("sent");
    let o = Command::new(profile_bin())
        .args(["record", "-a", "-d", "6", "-q", "--no-jvm-perfmap"])
        .args(["--push-interval", "1"])
        .args(["--push", "http://127.0.0.1:9", "--push-dry-run"])
        .arg(&sent)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // Every series' labels with the samples of each pid in it.
    let mut seen: Vec<(String, BTreeMap<String, String>, Vec<u64>)> = Vec::new();
    for e in std::fs::read_dir(&sent).unwrap().flatten() {
        let p = e.path();
        if p.extension().is_none_or(|x| x != "query") {
            continue;
        }
        let (app, labels) = series_of(&std::fs::read_to_string(&p).unwrap());
        let body = std::fs::read(p.with_extension("pprof")).unwrap();
        let in_it: Vec<u64> = pids(&body)
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(pid, _)| pid)
            .collect();
        seen.push((app, labels, in_it));
    }
    let with = |pid: u64| -> Vec<&(String, BTreeMap<String, String>, Vec<u64>)> {
        seen.iter().filter(|s| s.2.contains(&pid)).collect()
    };
    // The system service: its own series, its unit's labels, only its process.
    let sys = with(root_pid);
    assert!(!sys.is_empty(), "the root nginx was not sampled: {seen:?}");
    for s in &sys {
        assert_eq!(s.0, "nginx", "{s:?}");
        assert_eq!(
            s.1.get("systemd_unit").map(String::as_str),
            Some("nginx.service")
        );
        assert!(!s.1.contains_key("user_uid"), "{s:?}");
        assert!(
            s.2.iter().all(|p| !her_pids.contains(p)),
            "her samples in the service's series: {s:?}"
        );
    }
    // Hers: sampled, never with the service's labels or a container id; her uid.
    for pid in her_pids {
        let hers = with(pid);
        assert!(!hers.is_empty(), "pid {pid} was not sampled: {seen:?}");
        for s in hers {
            assert_ne!(s.1, sys[0].1, "{s:?}");
            assert_eq!(s.1.get("systemd_unit"), None, "{s:?}");
            assert_eq!(s.1.get("container_id"), None, "{s:?}");
            assert_eq!(
                s.1.get("user_uid").map(String::as_str),
                Some("65534"),
                "{s:?}"
            );
            assert!(!s.2.contains(&root_pid), "{s:?}");
        }
    }
    // No series anywhere carries the id she chose.
    assert!(
        seen.iter().all(|s| !s.1.values().any(|v| v == &id)),
        "{seen:?}"
    );
}
