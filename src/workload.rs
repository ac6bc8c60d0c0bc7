//! Which workload a process belongs to, from the kernel's own view: its cgroup path
//! (`/proc/PID/cgroup`) gives the systemd unit (`/system.slice/nginx.service`), the
//! container (docker, containerd, cri-o and podman path shapes) and, where the path
//! says so, the Kubernetes pod; the executable names the rest. Everything here but
//! [`read_proc`] is pure, so the path shapes are tested on text.
//!
//! A recording stores, per process, the cgroup path chosen and the executable
//! ([`crate::format::WorkloadEvent`]); the unit, container and pod are derived from
//! the path when read, so a recording made by an older build gains what a newer
//! parser knows. [`Workload::service`] is the default series name `record -a --push`
//! uses and `report --service` filters by.
//!
//! Only names root chose are read as a unit, container or pod: a user with a
//! delegated subtree (`user@UID.service`, or any cgroup directory she owns) names
//! her cgroups as she likes, so below the first directory she owns nothing is read
//! from the path and the workload says whose it is instead ([`Delegation`], read
//! while recording by [`vouch`]).

use std::collections::HashMap;

use crate::format::{Delegation, WorkloadEvent};

pub mod vouch;

/// A process's workload: the cgroup path and what it says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Workload {
    /// The cgroup path chosen (see [`cgroup_path`]); `/` when in the root cgroup.
    pub cgroup: String,
    /// The innermost systemd unit in the path that is not a container's scope
    /// (`nginx.service`, `getty@tty1.service`, `session-3.scope`).
    pub unit: Option<String>,
    /// The container id (64 hex digits) when the path is a container's.
    pub container_id: Option<String>,
    /// The Kubernetes pod uid (with dashes) when the path is under `kubepods`.
    pub pod_uid: Option<String>,
    /// The executable's path (empty when it could not be read).
    pub exe: String,
    /// A kernel thread (no executable; service `kernel`).
    pub kernel: bool,
    /// The part of the path that is a user's (see [`Delegation`]): recorded, or a
    /// `user@UID.service` in the path (the user's systemd manager and everything it
    /// starts), whichever begins first.
    pub delegated: Option<Delegation>,
}

impl Workload {
    /// The workload of a process in cgroup `path` running `exe`, all of whose
    /// names root vouches for but a `user@UID.service`'s subtree.
    pub fn new(path: &str, exe: &str, kernel: bool) -> Workload {
        Workload::vouched(path, exe, kernel, None)
    }

    /// The workload of a process in cgroup `path` running `exe`, whose names below
    /// `delegated` (as recorded) are a user's.
    pub fn vouched(path: &str, exe: &str, kernel: bool, delegated: Option<Delegation>) -> Workload {
        let mut w = Workload {
            cgroup: path.to_owned(),
            exe: exe.to_owned(),
            kernel,
            ..Workload::default()
        };
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        let by_name = parts.iter().enumerate().find_map(|(i, p)| {
            let uid = p.strip_prefix("user@")?.strip_suffix(".service")?;
            Some(Delegation {
                depth: i as u32 + 1,
                uid: uid.parse().ok(),
            })
        });
        w.delegated = match (delegated, by_name) {
            (Some(d), Some(n)) if n.depth < d.depth => Some(n),
            (d, n) => d.or(n),
        };
        let depth = w.delegated.map_or(parts.len(), |d| d.depth as usize);
        let parts = &parts[..depth.min(parts.len())];
        let kube = parts.iter().any(|p| p.starts_with("kubepods"));
        for p in parts {
            if let Some(id) = container_in(p) {
                w.container_id = Some(id);
                continue;
            }
            if kube && let Some(uid) = pod_in(p) {
                w.pod_uid = Some(uid);
                continue;
            }
            if p.ends_with(".service") || p.ends_with(".scope") {
                w.unit = Some((*p).to_owned());
            }
        }
        w
    }

    /// The workload a recorded event describes.
    pub fn from_event(e: &WorkloadEvent) -> Workload {
        Workload::vouched(&e.cgroup, &e.exe, e.kernel, e.delegated)
    }

    /// The systemd service the process runs in, the name root gave it: not in a
    /// container, not in a user's subtree.
    pub fn service_unit(&self) -> Option<&str> {
        if self.container_id.is_some() || self.delegated.is_some() {
            return None;
        }
        self.unit.as_deref().filter(|u| u.ends_with(".service"))
    }

    /// The default service name: a systemd service's name (`nginx.service` gives
    /// `nginx`, the template `getty@tty1.service` gives `getty`) when the process is
    /// in one and not in a container or a user's subtree
    /// ([`Workload::service_unit`]); else the executable's file name (`name`, the
    /// process name, when it has none); `kernel` for kernel threads. Characters a
    /// Pyroscope service name may not hold become `_`.
    pub fn service(&self, name: &str) -> String {
        if self.kernel {
            return "kernel".into();
        }
        if let Some(u) = self.service_unit().and_then(|u| u.strip_suffix(".service")) {
            let base = u.split_once('@').map_or(u, |(t, _)| t);
            if !base.is_empty() {
                return service_name(base);
            }
        }
        let exe = self.exe.rsplit('/').next().unwrap_or("");
        // A deleted executable reads as `/usr/bin/app (deleted)`.
        let exe = exe.strip_suffix(" (deleted)").unwrap_or(exe);
        service_name(if exe.is_empty() { name } else { exe })
    }
}

/// Whether `c` may stand in a Pyroscope service name: letters, digits and `_ . - /`.
pub fn service_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/')
}

/// `name` as a valid service name: other characters become `_`; `profile` when
/// nothing is left.
pub fn service_name(name: &str) -> String {
    let s: String = name
        .trim()
        .chars()
        .map(|c| if service_char(c) { c } else { '_' })
        .collect();
    if s.is_empty() { "profile".into() } else { s }
}

/// A container id in one path component: `docker-ID.scope`, `cri-containerd-ID.scope`,
/// `crio-ID.scope`, `libpod-ID.scope`, or the bare 64-digit id (docker's and
/// Kubernetes' cgroupfs layouts, `/docker/ID`, `/kubepods/besteffort/podUID/ID`).
/// Runtime monitors' own scopes (`crio-conmon-ID.scope`, `libpod-conmon-ID.scope`)
/// are not the container.
fn container_in(part: &str) -> Option<String> {
    let inner = part.strip_suffix(".scope").map_or(part, |s| {
        ["docker-", "cri-containerd-", "crio-", "libpod-"]
            .iter()
            .find_map(|pre| s.strip_prefix(pre))
            .unwrap_or("")
    });
    let hex = inner.len() == 64 && inner.bytes().all(|b| b.is_ascii_hexdigit());
    hex.then(|| inner.to_ascii_lowercase())
}

/// A pod uid in one path component under `kubepods`: `pod<UID>` (cgroupfs) or
/// `kubepods-<QOS>-pod<UID with _>.slice` (systemd), given with dashes.
fn pod_in(part: &str) -> Option<String> {
    let s = part.strip_suffix(".slice").unwrap_or(part);
    let at = s.rfind("pod")?;
    if at > 0 && !s[..at].ends_with('-') {
        return None;
    }
    let uid = s[at + 3..].replace('_', "-");
    let ok = uid.len() == 36
        && uid.bytes().enumerate().all(|(i, b)| {
            matches!(i, 8 | 13 | 18 | 23) == (b == b'-') && (b == b'-' || b.is_ascii_hexdigit())
        });
    ok.then(|| uid.to_ascii_lowercase())
}

/// The path to use from `/proc/PID/cgroup`'s text: the `name=systemd` hierarchy's
/// (cgroup v1, where systemd and the container runtimes place processes), else the
/// unified one's (`0::PATH`, cgroup v2), else the first other hierarchy's, the first
/// of these that is not the root; `/` when every one is.
pub fn cgroup_path(text: &str) -> String {
    cgroup_hierarchy(text).1
}

/// [`cgroup_path`] with its hierarchy's controllers field (`name=systemd`, empty for
/// the unified one, `cpu,cpuacct`), which says where it is mounted.
pub fn cgroup_hierarchy(text: &str) -> (String, String) {
    let mut systemd = None;
    let mut unified = None;
    let mut other = None;
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(_id), Some(controllers), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let path = path.trim();
        if path.is_empty() || path == "/" {
            continue;
        }
        let slot = if controllers == "name=systemd" {
            &mut systemd
        } else if controllers.is_empty() {
            &mut unified
        } else {
            &mut other
        };
        slot.get_or_insert((controllers, path));
    }
    let (c, p) = systemd.or(unified).or(other).unwrap_or(("", "/"));
    (c.to_owned(), p.to_owned())
}

/// What [`read_proc`] reads of a live process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcWorkload {
    /// Its cgroup path ([`cgroup_path`]).
    pub cgroup: String,
    /// Its executable's path; empty when unknown.
    pub exe: String,
    /// A kernel thread.
    pub kernel: bool,
    /// Where root stops vouching for the path's names ([`vouch::delegation`]).
    pub delegated: Option<Delegation>,
}

/// Reads a live process's cgroup path, executable, whether it is a kernel thread and
/// how much of the path root vouches for; None when the process is gone (or its
/// cgroup file cannot be read).
pub fn read_proc(pid: u32) -> Option<ProcWorkload> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let kernel = exe.is_empty() && is_kernel_thread(pid);
    let (controllers, cgroup) = cgroup_hierarchy(&text);
    let delegated = vouch::delegation(&controllers, &cgroup);
    Some(ProcWorkload {
        cgroup,
        exe,
        kernel,
        delegated,
    })
}

/// PF_KTHREAD in the flags of `/proc/PID/stat` (field 9).
fn is_kernel_thread(pid: u32) -> bool {
    const PF_KTHREAD: u64 = 0x0020_0000;
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The name (field 2) may hold spaces and parentheses: fields after its last `)`.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return false;
    };
    rest.split_whitespace()
        .nth(6)
        .and_then(|f| f.parse::<u64>().ok())
        .is_some_and(|flags| flags & PF_KTHREAD != 0)
}

/// The recorded workloads of a recording by process, for lookups by time.
#[derive(Debug, Default)]
pub struct WorkloadIndex {
    by_pid: HashMap<u32, Vec<(u64, Workload)>>,
}

impl WorkloadIndex {
    /// Indexes a recording's workload events.
    pub fn new(events: &[WorkloadEvent]) -> WorkloadIndex {
        let mut by_pid: HashMap<u32, Vec<(u64, Workload)>> = HashMap::new();
        for e in events {
            by_pid
                .entry(e.pid)
                .or_default()
                .push((e.time, Workload::from_event(e)));
        }
        for v in by_pid.values_mut() {
            v.sort_by_key(|(t, _)| *t);
        }
        WorkloadIndex { by_pid }
    }

    /// Whether the recording holds no workload (made before they were recorded).
    pub fn is_empty(&self) -> bool {
        self.by_pid.is_empty()
    }

    /// The workload of `pid` at `time`: the latest read at or before it, else the
    /// first one read (a process's first sample may come before its reading).
    pub fn at(&self, pid: u32, time: u64) -> Option<&Workload> {
        let v = self.by_pid.get(&pid)?;
        let i = v.partition_point(|(t, _)| *t <= time);
        v.get(i.saturating_sub(1)).map(|(_, w)| w)
    }

    /// Whether `pid`'s workload changed during the recording (an exec into another
    /// cgroup or executable).
    pub fn changes(&self, pid: u32) -> bool {
        self.by_pid.get(&pid).is_some_and(|v| {
            v.windows(2)
                .any(|w| w[0].1.cgroup != w[1].1.cgroup || w[0].1.exe != w[1].1.exe)
        })
    }
}

#[cfg(test)]
mod tests;
