//! One window of `record -a --push` cut into one profile per series: each sample goes
//! to its process's service at the sample's time (its workload read when the process
//! was first seen and at each exec, [`crate::workload`]), so a process that starts,
//! execs or exits in the window counts where it ran, and short-lived processes add up
//! under the service of the cgroup they ran in. A series is the service name and the
//! workload's labels (`systemd_unit`, `container_id`, `pod_uid`); no `pid` label, so
//! the number of series follows the services, not the processes.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::rules::Rules;
use crate::format::{Recording, ThreadEvent};
use crate::workload::{Workload, WorkloadIndex};

/// One series' share of a window.
#[derive(Debug, Clone)]
pub struct Series {
    /// The service name (`service_name` in Pyroscope).
    pub app: String,
    /// The workload's labels, sorted by name.
    pub labels: Vec<(String, String)>,
    /// The window's samples, off-CPU intervals, thread events and workloads of the
    /// series' processes, with the window's frames and names.
    pub recording: Recording,
}

/// How a process's service is named: the first matching rule, else a systemd
/// service's name, else `app` (`--app`) when given, else the executable's file name
/// (the process name when unknown); `kernel` for kernel threads.
pub fn service_of(w: &Workload, process: &str, rules: &Rules, app: Option<&str>) -> String {
    if let Some(s) = rules.service(w) {
        return s.to_owned();
    }
    match app {
        Some(a) if w.service_unit().is_none() && !w.kernel => a.to_owned(),
        _ => w.service(process),
    }
}

/// The series labels of a workload: `systemd_unit` for a service unit (scopes, whose
/// names change with every login or run, are left out), `container_id`, `pod_uid`,
/// all read from the names root vouches for only; and `user_uid` for a process in a
/// user's subtree (`unknown` when its owner could not be read), whose unit is then
/// the one root gave her (`user@1000.service`), never one she named.
pub fn labels_of(w: &Workload) -> Vec<(String, String)> {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if ",{}".contains(c) || c.is_control() {
                    '_'
                } else {
                    c
                }
            })
            .collect()
    };
    let mut l = Vec::new();
    if let Some(c) = &w.container_id {
        l.push(("container_id".to_owned(), c.clone()));
    }
    if let Some(p) = &w.pod_uid {
        l.push(("pod_uid".to_owned(), p.clone()));
    }
    if w.container_id.is_none()
        && let Some(u) = w.unit.as_deref().filter(|u| u.ends_with(".service"))
    {
        l.push(("systemd_unit".to_owned(), clean(u)));
    }
    if let Some(d) = w.delegated {
        let uid = d
            .uid
            .map_or_else(|| "unknown".to_owned(), |u| u.to_string());
        l.push(("user_uid".to_owned(), uid));
    }
    l.sort();
    l
}

/// A window's tables, which every series of it shares: lent to each series' recording
/// in turn rather than copied into each (a dozen series a window made the copies half
/// of the pushing thread's CPU).
#[derive(Debug, Default)]
pub struct Tables {
    mappings: Vec<crate::format::Mapping>,
    frames: Vec<crate::format::Frame>,
    nodes: Vec<crate::format::StackNode>,
    symbols: Vec<Option<crate::format::FrameSymbols>>,
}

impl Tables {
    /// Takes the tables out of `rec`, leaving them empty.
    pub fn take(rec: &mut Recording) -> Tables {
        Tables {
            mappings: std::mem::take(&mut rec.mappings),
            frames: std::mem::take(&mut rec.frames),
            nodes: std::mem::take(&mut rec.nodes),
            symbols: std::mem::take(&mut rec.symbols),
        }
    }

    /// Puts the tables into `rec` (a series' recording, whose own are empty).
    pub fn lend(self, rec: &mut Recording) {
        rec.mappings = self.mappings;
        rec.frames = self.frames;
        rec.nodes = self.nodes;
        rec.symbols = self.symbols;
    }
}

/// Cuts a window into its series, in the order of their names and labels. Each
/// series' recording has the window's samples, events and workloads of its
/// processes, and empty tables: [`Tables`] of the window are lent to it to be read.
pub fn split(rec: &Recording, rules: &Rules, app: Option<&str>) -> Vec<Series> {
    let index = WorkloadIndex::new(&rec.workloads);
    // Each process's name: its main thread's latest, else any thread's.
    let mut names: HashMap<u32, (bool, &str)> = HashMap::new();
    for e in &rec.thread_events {
        if let ThreadEvent::Name { pid, tid, name, .. } = e {
            let main = pid == tid;
            let slot = names.entry(*pid).or_insert((main, name));
            if main || !slot.0 {
                *slot = (main, name);
            }
        }
    }
    let none = Workload::default();
    let mut keys: BTreeMap<(String, Vec<(String, String)>), usize> = BTreeMap::new();
    let mut key_of = |pid: u32, time: u64| -> usize {
        let w = index.at(pid, time).unwrap_or(&none);
        let process = names.get(&pid).map_or("", |n| n.1);
        let key = (service_of(w, process, rules, app), labels_of(w));
        let next = keys.len();
        *keys.entry(key).or_insert(next)
    };
    let sample_keys: Vec<usize> = rec.samples.iter().map(|s| key_of(s.pid, s.time)).collect();
    let off_keys: Vec<usize> = rec.off_cpu.iter().map(|o| key_of(o.pid, o.time)).collect();
    let mut out = Vec::with_capacity(keys.len());
    for ((app, labels), k) in keys {
        let mut r = Recording {
            version: rec.version,
            meta: rec.meta.clone(),
            summary: None,
            lost: 0,
            throttled: 0,
            damage: None,
            ..Recording::default()
        };
        let mut pids = BTreeSet::new();
        for (s, &sk) in rec.samples.iter().zip(&sample_keys) {
            if sk == k {
                r.samples.push(*s);
                pids.insert(s.pid);
            }
        }
        for (o, &ok) in rec.off_cpu.iter().zip(&off_keys) {
            if ok == k {
                r.off_cpu.push(*o);
                pids.insert(o.pid);
            }
        }
        r.thread_events = rec
            .thread_events
            .iter()
            .filter(|e| pids.contains(&event_pid(e)))
            .cloned()
            .collect();
        r.workloads = rec
            .workloads
            .iter()
            .filter(|w| pids.contains(&w.pid))
            .cloned()
            .collect();
        r.meta.pid = None;
        r.meta.pids = Vec::new();
        r.summary = rec.summary.clone().map(|mut s| {
            s.samples = r.samples.len() as u64;
            s.cpu_time_ns = r.samples.iter().map(|s| s.weight).sum();
            s
        });
        out.push(Series {
            app,
            labels,
            recording: r,
        });
    }
    out
}

fn event_pid(e: &ThreadEvent) -> u32 {
    match e {
        ThreadEvent::Name { pid, .. }
        | ThreadEvent::Start { pid, .. }
        | ThreadEvent::Exit { pid, .. }
        | ThreadEvent::Exec { pid, .. } => *pid,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Sample, WorkloadEvent};

    fn window() -> Recording {
        let wl = |time, pid, cgroup: &str, exe: &str| WorkloadEvent {
            time,
            pid,
            cgroup: cgroup.into(),
            exe: exe.into(),
            kernel: false,
            delegated: None,
        };
        let id = "3f2a9c0d1e4b5a6978877665544332211ffeeddccbbaa9988776655443322110";
        let workloads = vec![
            wl(0, 10, "/system.slice/nginx.service", "/usr/sbin/nginx"),
            wl(0, 11, "/system.slice/nginx.service", "/usr/sbin/nginx"),
            wl(
                0,
                20,
                &format!("/system.slice/docker-{id}.scope"),
                "/usr/bin/python3",
            ),
            wl(
                0,
                30,
                "/user.slice/user-0.slice/session-4.scope",
                "/bin/bash",
            ),
            // 30 execs into a unit's cgroup (a process systemd started) at 50.
            wl(50, 30, "/system.slice/backup.service", "/usr/bin/tar"),
        ];
        let mut r = Recording {
            workloads,
            ..Recording::default()
        };
        r.thread_events = vec![ThreadEvent::Name {
            time: 0,
            pid: 40,
            tid: 40,
            name: "mystery".into(),
        }];
        for (time, pid) in [(1, 10), (2, 11), (3, 20), (4, 30), (60, 30), (5, 40)] {
            r.samples.push(Sample {
                time,
                pid,
                tid: pid,
                cpu: 0,
                weight: 10,
                stack: None,
            });
        }
        r
    }

    #[test]
    fn one_series_per_service_with_its_labels() {
        let s = split(&window(), &Rules::default(), None);
        type Got<'a> = Vec<(&'a str, Vec<(&'a str, &'a str)>, Vec<u32>)>;
        let got: Got = s
            .iter()
            .map(|s| {
                (
                    s.app.as_str(),
                    s.labels
                        .iter()
                        .map(|(k, v)| (k.as_str(), v.as_str()))
                        .collect(),
                    s.recording.samples.iter().map(|x| x.pid).collect(),
                )
            })
            .collect();
        let id = "3f2a9c0d1e4b5a6978877665544332211ffeeddccbbaa9988776655443322110";
        assert_eq!(
            got,
            vec![
                ("backup", vec![("systemd_unit", "backup.service")], vec![30]),
                ("bash", vec![], vec![30]),
                ("mystery", vec![], vec![40]),
                (
                    "nginx",
                    vec![("systemd_unit", "nginx.service")],
                    vec![10, 11]
                ),
                ("python3", vec![("container_id", id)], vec![20]),
            ]
        );
        // Each keeps its processes' workloads only.
        assert!(
            s[3].recording
                .workloads
                .iter()
                .all(|w| w.pid == 10 || w.pid == 11)
        );
    }

    #[test]
    fn rules_then_units_then_app() {
        let rules = Rules::parse("exe python3 shop\nunit nginx.service web\n").unwrap();
        let s = split(&window(), &rules, Some("host-misc"));
        let apps: Vec<&str> = s.iter().map(|s| s.app.as_str()).collect();
        // bash (a session) and the unknown process go under --app; units keep their
        // names; rules come first.
        assert_eq!(apps, ["backup", "host-misc", "shop", "web"]);
        assert_eq!(s[1].recording.samples.len(), 2);
    }
}
