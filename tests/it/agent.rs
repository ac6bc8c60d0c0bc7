//! `record -a --push` as a host agent (issue 33): the test creates cgroups as systemd
//! and a container runtime would (a service unit, a docker scope, a CI service whose
//! shell loop starts short processes), moves real burning processes into them, and
//! checks what the local ingest server receives: one series per service with its
//! labels and no `pid`, windows back to back, a process that exits mid-recording
//! counted under its unit, the short processes of the storm under theirs. And the
//! workloads in the `-o` recording: `report --service`, `--per-process` roots.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::*;
use crate::fixture::ingest::{IngestServer, Reply, Request, read_pprof};

/// A cgroup directory in the hierarchy systemd and container runtimes place
/// processes in (cgroup v1's name=systemd, else the unified one); on drop its
/// processes (the test's own) are killed and the directory removed.
pub(crate) struct Cgroup {
    dir: PathBuf,
}

impl Cgroup {
    fn root() -> PathBuf {
        let v1 = Path::new("/sys/fs/cgroup/systemd");
        if v1.join("cgroup.procs").exists() {
            v1.to_owned()
        } else {
            PathBuf::from("/sys/fs/cgroup")
        }
    }

    pub(crate) fn create(path: &str) -> Cgroup {
        let dir = Self::root().join(path.trim_start_matches('/'));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        Cgroup { dir }
    }

    /// The cgroup's directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    fn procs(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    /// `sh -c 'echo $$ > cgroup.procs && exec BIN ARGS'`: the process enters the
    /// cgroup before it runs the program, so nothing of it runs outside.
    pub(crate) fn start(&self, bin: &Path, args: &[&str]) -> Target {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(format!(
                "echo $$ > '{}' && exec \"$0\" \"$@\"",
                self.procs().display()
            ))
            .arg(bin)
            .args(args);
        Target::spawn(cmd)
    }

    /// A shell running `script` in the cgroup: it enters the cgroup, then execs the
    /// shell that runs the script (as systemd moves a process, then execs).
    fn shell(&self, script: &str) -> Target {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(format!(
                "echo $$ > '{}' && exec sh -c \"$0\"",
                self.procs().display()
            ))
            .arg(script);
        Target::spawn(cmd)
    }

    fn pids(&self) -> Vec<u32> {
        std::fs::read_to_string(self.procs())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // Only the test's processes are in it (and their children): kill them, wait
        // for the directory to empty, remove it and its parents the test made.
        for _ in 0..200 {
            let pids = self.pids();
            if pids.is_empty() {
                break;
            }
            for p in pids {
                let _ = Command::new("kill").args(["-9", &p.to_string()]).status();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// The series a request is for: its service and labels, parsed from `name`.
fn series(r: &Request) -> (String, BTreeMap<String, String>) {
    let name = &r.query["name"];
    let (app, rest) = name.split_once('{').expect("labels in braces");
    let labels = rest
        .trim_end_matches('}')
        .split(',')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (k, v) = l.split_once('=').unwrap();
            (k.to_owned(), v.to_owned())
        })
        .collect();
    (app.to_owned(), labels)
}

fn q(r: &Request, k: &str) -> u64 {
    r.query[k].parse().unwrap()
}

fn gunzip(b: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(b)
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// The pids of a pprof's samples with their sample counts.
pub(crate) fn pids(body: &[u8]) -> HashMap<u64, u64> {
    let p = read_pprof(&gunzip(body));
    let i = p
        .sample_types
        .iter()
        .position(|t| t.starts_with("samples/"))
        .unwrap();
    let mut m = HashMap::new();
    for (labels, v) in p.num_labels.iter().zip(&p.values) {
        if let Some((_, pid)) = labels.iter().find(|(k, _)| k == "pid") {
            *m.entry(*pid).or_default() += v[i];
        }
    }
    m
}

#[test]
fn agent_pushes_one_series_per_service_with_workload_labels() {
    let me = std::process::id();
    let top = format!("profile-it-agent-{me}");
    let id = format!("{:08x}{}", me, "c0ffee".repeat(10))
        .chars()
        .take(64)
        .collect::<String>();
    // Dropped last: its children first.
    let _top = Cgroup::create(&top);
    let web = Cgroup::create(&format!("{top}/web-{me}.service"));
    let shop = Cgroup::create(&format!("{top}/docker-{id}.scope"));
    let ci = Cgroup::create(&format!("{top}/ci-{me}.service"));
    let bin = build_c("threads.c", &["-O2", "-g", "-fno-omit-frame-pointer"]);
    let web_main = web.start(&bin, &["burner:50:0"]);
    let shop_main = shop.start(&bin, &["burner:50:0"]);
    // The storm: a loop of short shell processes, each some 10-50 ms of CPU.
    let storm = ci.shell(
        "echo ready; while :; do sh -c 'i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done'; done",
    );
    let dir = scratch();
    let rules = dir.path().join("rules");
    std::fs::write(
        &rules,
        format!(
            "# the container by its id\ncontainer {}* shop-{me}\n",
            &id[..12]
        ),
    )
    .unwrap();
    let out = dir.path().join("all.prof");
    let server = IngestServer::start(|_| Reply::Status(200));
    // At 99 Hz: its bounds (a unit in nearly every 1 s window, the storm's short
    // processes) count samples on a loaded machine.
    let mut rec = Command::new(profile_bin())
        .args([
            "record",
            "-a",
            "-F",
            "99",
            "-d",
            "600",
            "-q",
            "--no-jvm-perfmap",
        ])
        .args(["--push-interval", "1"])
        .arg("--push")
        .arg(server.url())
        .arg("--push-rules")
        .arg(&rules)
        .arg("-o")
        .arg(&out)
        .spawn()
        .unwrap();
    let windows = || {
        let froms: BTreeSet<u64> = server.requests().iter().map(|r| q(r, "from")).collect();
        froms.len()
    };
    let wait_windows = |n: usize| {
        let t0 = std::time::Instant::now();
        while windows() < n {
            assert!(
                t0.elapsed() < Duration::from_secs(180),
                "{} windows",
                windows()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    // Once the first window is in: a worker the web unit's main process starts,
    // which does a fixed amount of work (some 2 s of CPU: sampled whatever the load,
    // even when the kernel drops a burst of samples) and exits while the recording
    // goes on.
    wait_windows(1);
    use std::io::{BufRead, Write};
    let (brief_pid, mut supervisor) = {
        let mut supervisor = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "echo $$ > '{}' && exec sh -c \"$0\"",
                web.procs().display()
            ))
            .arg(
                "while read x; do sh -c 'echo $$; i=0; while [ $i -lt 1500000 ]; do i=$((i+1)); done'; \
                 echo done; done",
            )
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Started in the unit (the line is read once the supervisor is in it).
        std::thread::sleep(Duration::from_millis(300));
        writeln!(supervisor.stdin.as_mut().unwrap(), "go").unwrap();
        let mut lines = std::io::BufReader::new(supervisor.stdout.take().unwrap()).lines();
        let pid: u32 = lines.next().unwrap().unwrap().trim().parse().unwrap();
        assert_eq!(lines.next().unwrap().unwrap(), "done");
        // Alive until the end, as a service's main process.
        (pid, supervisor)
    };
    // Two more windows for the storm and the rest, then the end (SIGTERM).
    let seen = windows();
    wait_windows(seen + 2);
    assert!(
        Command::new("kill")
            .args(["-TERM", &rec.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let status = rec.wait().unwrap();
    assert!(status.success());
    drop(supervisor.stdin.take());
    let _ = supervisor.wait();
    drop((web_main, shop_main, storm));
    let got = server.requests();
    let local = read(&out);
    let host = local.meta.hostname.clone();

    // Windows: every request of the recording is one of a chain of back-to-back
    // windows, and each series has at most one profile per window. A window is pushed
    // in no series only when it has no sample: the recording's own copy has none in
    // it either, and records were lost (the kernel's buffers overflowed while the
    // machine was loaded).
    let mut chain: Vec<(u64, u64)> = got.iter().map(|r| (q(r, "from"), q(r, "until"))).collect();
    chain.sort();
    chain.dedup();
    assert!(chain.len() >= 3, "{chain:?}");
    let to_unix = |t: u64| local.meta.start_unix_ns + t.saturating_sub(local.meta.start_time_ns);
    for w in chain.windows(2) {
        if w[0].1 == w[1].0 {
            continue;
        }
        let (from, until) = (w[0].1, w[1].0);
        let inside = local
            .samples
            .iter()
            .filter(|s| (from..until).contains(&to_unix(s.time)))
            .count();
        assert!(
            inside == 0 && local.lost > 0,
            "windows back to back: {from}..{until} is missing, with {inside} samples \
             in the recording and {} records lost: {chain:?}",
            local.lost
        );
    }
    let mut by_series: BTreeMap<(String, BTreeMap<String, String>), Vec<&Request>> =
        BTreeMap::new();
    for r in &got {
        assert!(
            !series(r).1.contains_key("pid"),
            "no pid label under -a: {}",
            r.query["name"]
        );
        assert_eq!(series(r).1["hostname"], crate_hostname(&host));
        by_series.entry(series(r)).or_default().push(r);
    }
    for (s, rs) in &by_series {
        let froms: BTreeSet<u64> = rs.iter().map(|r| q(r, "from")).collect();
        assert_eq!(froms.len(), rs.len(), "one profile per window for {s:?}");
    }
    let find = |app: &str| -> Vec<(&BTreeMap<String, String>, &Vec<&Request>)> {
        by_series
            .iter()
            .filter(|((a, _), _)| a == app)
            .map(|((_, l), r)| (l, r))
            .collect()
    };
    let names: Vec<&String> = by_series.keys().map(|(a, _)| a).collect();

    // The unit: its name, its label, in (nearly) every window, the brief process in it.
    let web_series = find(&format!("web-{me}"));
    assert_eq!(web_series.len(), 1, "{names:?}");
    let (labels, reqs) = web_series[0];
    assert_eq!(
        labels.get("systemd_unit"),
        Some(&format!("web-{me}.service"))
    );
    assert!(!labels.contains_key("container_id"));
    assert!(
        reqs.len() + 1 >= chain.len(),
        "web in {} of {} windows",
        reqs.len(),
        chain.len()
    );
    let web_pids: HashMap<u64, u64> =
        reqs.iter()
            .flat_map(|r| pids(&r.body))
            .fold(HashMap::new(), |mut m, (p, n)| {
                *m.entry(p).or_default() += n;
                m
            });
    let elsewhere: Vec<&String> = by_series
        .iter()
        .filter(|(_, rs)| {
            rs.iter()
                .any(|r| pids(&r.body).contains_key(&u64::from(brief_pid)))
        })
        .map(|((a, _), _)| a)
        .collect();
    let local_samples = local.samples.iter().filter(|s| s.pid == brief_pid).count();
    let local_workloads: Vec<_> = local
        .workloads
        .iter()
        .filter(|w| w.pid == brief_pid)
        .collect();
    assert!(
        web_pids.get(&u64::from(brief_pid)).is_some_and(|&n| n > 0),
        "the process that exited is counted in its unit: {web_pids:?}; it is in {elsewhere:?}; \
         the local recording has {local_samples} of its samples, workloads {local_workloads:?}"
    );

    // The container: named by the rule, labelled with its id, no unit.
    let shop_series = find(&format!("shop-{me}"));
    assert_eq!(shop_series.len(), 1, "{names:?}");
    assert_eq!(shop_series[0].0.get("container_id"), Some(&id));
    assert!(!shop_series[0].0.contains_key("systemd_unit"));

    // The storm: many short processes, all under the CI unit and in no other series.
    let ci_series = find(&format!("ci-{me}"));
    assert_eq!(ci_series.len(), 1, "{names:?}");
    let ci_pids: BTreeSet<u64> = ci_series[0]
        .1
        .iter()
        .flat_map(|r| pids(&r.body).into_keys())
        .collect();
    assert!(
        ci_pids.len() >= 4,
        "short processes of the storm: {ci_pids:?}"
    );
    for ((app, _), rs) in &by_series {
        if *app == format!("ci-{me}") {
            continue;
        }
        for r in rs {
            let other: BTreeSet<u64> = pids(&r.body).into_keys().collect();
            assert!(other.is_disjoint(&ci_pids), "{app} holds storm processes");
        }
    }

    // The recording holds the workloads: --service keeps one service, and the
    // explicit --per-process roots stacks at it.
    let o = run_profile(&[
        "report",
        "-i",
        out.to_str().unwrap(),
        "--service",
        &format!("web-{me}"),
        "--per-process",
        "--folded",
        "-",
    ]);
    let folded = stdout(&o);
    assert!(!folded.is_empty());
    for l in folded.lines() {
        assert!(l.starts_with(&format!("service web-{me};")), "{l}");
    }
    let hot = format!("service web-{me};threads-O2gfnoo;pid ");
    assert!(
        folded
            .lines()
            .any(|l| l.starts_with(&hot) && l.contains(";burn_leaf")),
        "{folded}"
    );
}

/// The hostname as the ingest name carries it (other characters made `_`).
fn crate_hostname(h: &str) -> String {
    h.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-/".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[test]
fn dry_run_writes_each_series_and_sighup_reloads_the_rules() {
    let me = std::process::id();
    let top = format!("profile-it-dry-{me}");
    let _top = Cgroup::create(&top);
    let unit = Cgroup::create(&format!("{top}/batch-{me}.service"));
    let bin = build_c("threads.c", &["-O2", "-g", "-fno-omit-frame-pointer"]);
    let _t = unit.start(&bin, &["burner:50:0"]);
    let dir = scratch();
    let rules = dir.path().join("rules");
    std::fs::write(&rules, format!("unit batch-{me}.service first-{me}\n")).unwrap();
    let sent = dir.path().join("sent");
    let mut rec = Command::new(profile_bin())
        .args([
            "record",
            "-a",
            "-d",
            "600",
            "--push-interval",
            "1",
            "--no-jvm-perfmap",
        ])
        .args(["--push", "http://127.0.0.1:9", "--push-dry-run"])
        .arg(&sent)
        .arg("--push-rules")
        .arg(&rules)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Its stderr as it comes: the reload messages.
    let err = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let reader = {
        let err = std::sync::Arc::clone(&err);
        let mut pipe = rec.stderr.take().unwrap();
        std::thread::spawn(move || {
            use std::io::Read;
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                err.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    let has = |needle: &str| {
        std::fs::read_dir(&sent)
            .map(|d| {
                d.flatten()
                    .any(|e| e.file_name().to_string_lossy().contains(needle))
            })
            .unwrap_or(false)
    };
    let wait_for = |what: &str, done: &dyn Fn() -> bool| {
        let t0 = std::time::Instant::now();
        while !done() {
            assert!(
                t0.elapsed() < Duration::from_secs(120),
                "no {what}: {}",
                err.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let pid = rec.id().to_string();
    let hup = || {
        assert!(
            Command::new("kill")
                .args(["-HUP", &pid])
                .status()
                .unwrap()
                .success()
        )
    };
    wait_for("first series", &|| has(&format!("first-{me}.query")));
    // A bad file keeps the rules in use; a good one takes over.
    std::fs::write(&rules, "unit oops\n").unwrap();
    hup();
    wait_for("refusal", &|| {
        err.lock().unwrap().contains("rules in use (1) are kept")
    });
    std::fs::write(&rules, format!("exe threads* second-{me}\n")).unwrap();
    hup();
    wait_for("second series", &|| has(&format!("second-{me}.query")));
    // SIGHUP did not end the recording; SIGTERM does, with every file whole.
    assert!(
        rec.try_wait().unwrap().is_none(),
        "SIGHUP ended the recording"
    );
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = rec.wait().unwrap();
    reader.join().unwrap();
    let err = err.lock().unwrap().clone();
    assert!(status.success(), "{err}");
    assert!(
        err.contains(
            "line 1: expected KIND PATTERN SERVICE, found 2 fields; the rules in use (1) are kept"
        ),
        "{err}"
    );
    // Each .query names its series and says what was sent; its .pprof is the body.
    let (mut n, mut named_windows) = (0, 0);
    for e in std::fs::read_dir(&sent).unwrap().flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "query") {
            let text = std::fs::read_to_string(&p).unwrap();
            assert!(
                text.starts_with("POST http://127.0.0.1:9/ingest?name="),
                "{text}"
            );
            assert!(text.contains("&format=pprof&"), "{text}");
            // No -F: the host agent's rate (19 Hz per CPU).
            assert!(text.contains("&sampleRate=19&"), "{text}");
            if text.contains(&format!("first-{me}")) {
                assert!(
                    text.contains(&format!("name=first-{me}{{hostname=")),
                    "{text}"
                );
                assert!(
                    text.contains(&format!("systemd_unit=batch-{me}.service")),
                    "{text}"
                );
                // Named, or (a window whose naming missed its deadline, issue
                // 46) marked pending, to be named in the next windows.
                let body = std::fs::read(p.with_extension("pprof")).unwrap();
                let functions = read_pprof(&gunzip(&body)).functions;
                let named = functions.iter().any(|f| f == "burn_leaf");
                assert!(
                    named || functions.iter().any(|f| f.starts_with("[name pending: ")),
                    "{functions:?}"
                );
                n += 1;
                named_windows += usize::from(named);
            }
        }
    }
    assert!(n >= 1);
    assert!(named_windows >= 1);
}
