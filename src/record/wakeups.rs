//! Wake-ups (`record --off-cpu`): when a blocked thread became runnable again.
//!
//! The kernel fires `sched:sched_wakeup` once the woken task is on a run queue, in
//! whatever context woke it: the waker's (another thread, another process, an
//! interrupt), never the woken thread's, so a per-thread event on the target would
//! miss its own wake-ups. So one event per CPU (pid -1), its samples carrying the
//! tracepoint's raw fields (the woken `pid`, a tid), redirected into that CPU's ring
//! with the target's other records: the reorder puts each wake-up between the
//! SWITCH-out and the SWITCH-in of the interval it splits (`offcpu::Tracker`).
//!
//! Beside it, `sched:sched_switch` per CPU, filtered on the thread switched in
//! (`next_pid`): the kernel ends a thread's run-queue wait where it picks the thread
//! (`sched_info_arrive`, just after this tracepoint), while the SWITCH-in record comes
//! after the context switch and after the previous thread's switch-out samples (a
//! stack copy, a callchain) and the new thread's events are scheduled in: microseconds
//! on each switch, which add up to 5 to 8% of a busy server's runnable time. Optional:
//! without it the intervals end at the SWITCH-in record.
//!
//! A kernel filter keeps the rings free of other processes' wake-ups: the target's
//! threads, and every pid above the last one the system had handed out when the
//! filter was made (`/proc/sys/kernel/ns_last_pid`), so a thread the target creates
//! is covered from its first wake-up, before the recorder has read its FORK record.
//! The kernel takes a filter once per event: when other processes' new threads make
//! up too many of the wake-ups, or a target thread is not covered (pid numbers
//! wrapped around), a new set of events with a fresh filter replaces the old one,
//! opened before the old is closed (a wake-up seen by both counts once). Under `-a`
//! there is no filter. Where tracefs or the tracepoint cannot be had, the recording
//! counts runnable time after preemptions only, and its summary says so.

use std::collections::{BTreeSet, HashSet};
use std::io;
use std::time::{Duration, Instant};

use super::rings::CpuRing;
use super::sys::{self, EventFd};
use crate::process;

/// Where tracefs may be mounted.
const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// Filters longer than this are widened (the kernel copies at most a page).
const MAX_FILTER: usize = 3000;

/// Wake-ups of other threads since the filter was made, beyond which (and at most
/// every [`REFILTER_EVERY`]) a fresh filter is made.
const STRAY_LIMIT: u64 = 2000;
const REFILTER_EVERY: Duration = Duration::from_millis(250);

/// Why the wake-up events could not be had (the recording then counts runnable time
/// after preemptions only, and its summary says why).
#[derive(Debug, thiserror::Error)]
pub(crate) enum WakeupsError {
    #[error("tracefs (/sys/kernel/tracing) has no sched:{0} tracepoint")]
    NoTracepoint(&'static str),
    #[error("sched:{0} has no numeric id in tracefs")]
    NoId(&'static str),
    #[error("sched:{name}'s format names no {field} field")]
    NoField {
        name: &'static str,
        field: &'static str,
    },
    #[error("cannot open sched:{name} on CPU {cpu}: {err}")]
    Open {
        name: &'static str,
        cpu: u32,
        err: io::Error,
    },
    #[error("cannot redirect sched:{name}: {err}")]
    Redirect { name: &'static str, err: io::Error },
    #[error("no id for sched:{name}: {err}")]
    Id { name: &'static str, err: io::Error },
    #[error("cannot enable the sched tracepoints: {0}")]
    Enable(io::Error),
}

/// A `sched` tracepoint: its id and the offset of the thread it names (the woken `pid`
/// of `sched_wakeup`, the `next_pid` of `sched_switch`) in its raw fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tracepoint {
    pub id: u64,
    pub pid_offset: usize,
}

impl Tracepoint {
    /// Finds `sched:sched_wakeup` in tracefs, mounting tracefs where the kernel offers
    /// it and nothing is mounted yet (as perf does). The error says why not.
    pub(crate) fn find() -> Result<Tracepoint, WakeupsError> {
        Self::find_sched("sched_wakeup", "pid")
    }

    /// Finds `sched:sched_switch` (the thread switched in: `next_pid`).
    pub(crate) fn find_switch() -> Result<Tracepoint, WakeupsError> {
        Self::find_sched("sched_switch", "next_pid")
    }

    fn find_sched(name: &'static str, field: &'static str) -> Result<Tracepoint, WakeupsError> {
        let read = |dir: &str| -> Option<(String, String)> {
            let base = format!("{dir}/events/sched/{name}");
            Some((
                std::fs::read_to_string(format!("{base}/id")).ok()?,
                std::fs::read_to_string(format!("{base}/format")).ok()?,
            ))
        };
        let found = TRACEFS.iter().find_map(|d| read(d)).or_else(|| {
            mount_tracefs();
            read(TRACEFS[0])
        });
        let Some((id, format)) = found else {
            return Err(WakeupsError::NoTracepoint(name));
        };
        let id = id.trim().parse().map_err(|_| WakeupsError::NoId(name))?;
        let pid_offset =
            field_offset(&format, field).ok_or(WakeupsError::NoField { name, field })?;
        Ok(Tracepoint { id, pid_offset })
    }

    /// The thread a sample's raw fields name (woken, or switched in).
    pub(crate) fn woken(&self, raw: &[u8]) -> Option<u32> {
        let b = raw.get(self.pid_offset..self.pid_offset + 4)?;
        Some(u32::from_le_bytes(b.try_into().ok()?))
    }
}

/// Mounts tracefs at /sys/kernel/tracing if that is an empty mount point; failures
/// are left to the caller's second look.
fn mount_tracefs() {
    let dir = TRACEFS[0];
    if !sys::is_root() || std::fs::read_dir(dir).map_or(true, |mut d| d.next().is_some()) {
        return;
    }
    let _ = sys::mount_tracefs(dir);
}

/// The offset of field `name` in a tracepoint's `format` file.
fn field_offset(format: &str, name: &str) -> Option<usize> {
    format.lines().find_map(|l| {
        let mut parts = l.trim().split(';').map(str::trim);
        let decl = parts.next()?.strip_prefix("field:")?;
        if decl.rsplit(' ').next()? != name {
            return None;
        }
        parts.find_map(|p| p.strip_prefix("offset:")?.parse().ok())
    })
}

/// The kernel filter that keeps the samples whose `field` is one of `tids` or (with
/// `above`) any pid above it: runs of consecutive tids as ranges, the closest runs
/// merged while the filter is too long (a wider filter only lets more through; the
/// recorder keeps its own threads' samples alone).
pub(super) fn filter(tids: &BTreeSet<u32>, above: Option<u32>, field: &str) -> String {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for &t in tids.iter().filter(|&&t| above.is_none_or(|a| t <= a)) {
        match runs.last_mut() {
            Some(r) if r.1 + 1 == t => r.1 = t,
            _ => runs.push((t, t)),
        }
    }
    let text = |runs: &[(u32, u32)]| {
        let mut parts: Vec<String> = runs
            .iter()
            .map(|&(a, b)| {
                if a == b {
                    format!("{field} == {a}")
                } else {
                    format!("({field} >= {a} && {field} <= {b})")
                }
            })
            .collect();
        if let Some(above) = above {
            parts.push(format!("{field} > {above}"));
        }
        if parts.is_empty() {
            // Nothing yet: no thread has a negative id.
            parts.push(format!("{field} < 0"));
        }
        parts.join(" || ")
    };
    let mut f = text(&runs);
    while f.len() > MAX_FILTER && runs.len() > 1 {
        // Merge the two neighbouring runs with the smallest gap.
        let i = (0..runs.len() - 1)
            .min_by_key(|&i| runs[i + 1].0 - runs[i].1)
            .unwrap_or(0);
        runs[i].1 = runs[i + 1].1;
        runs.remove(i + 1);
        f = text(&runs);
    }
    f
}

/// The switch-in filter: the thread switched in is one of `next` (as [`filter`]
/// makes it) and the thread switched out none of `prev`, each named exactly (a
/// merged range could leave out a stranger's switch-out, after which the tracker
/// would take an earlier thread's for it), nor the idle task (pid 0: it takes no
/// switch-out sample, so only the context switch lies between the pick and the
/// SWITCH-in record, and a report's split to the thread's clock takes those
/// microseconds out of runnable); without the `prev` part when the whole would be too
/// long.
pub(super) fn switch_filter(next: &BTreeSet<u32>, prev: &BTreeSet<u32>) -> String {
    let f = filter(next, None, "next_pid");
    let mut runs: Vec<(u32, u32)> = vec![(0, 0)];
    for &t in prev {
        match runs.last_mut() {
            Some(r) if r.1 + 1 == t => r.1 = t,
            _ => runs.push((t, t)),
        }
    }
    let not: Vec<String> = runs
        .iter()
        .map(|&(a, b)| {
            if a == b {
                format!("prev_pid != {a}")
            } else {
                format!("(prev_pid < {a} || prev_pid > {b})")
            }
        })
        .collect();
    let both = format!("({f}) && {}", not.join(" && "));
    if both.len() > MAX_FILTER {
        format!("({f}) && prev_pid != 0")
    } else {
        both
    }
}

/// The last pid the system handed out (0 when unknown: every pid is above it).
pub(super) fn newest_pid() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// What a sample of the per-CPU tracepoints says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Traced {
    /// The kernel woke this thread (`sched_wakeup`).
    Woken(u32),
    /// The kernel is switching this thread in (`sched_switch`'s `next_pid`).
    SwitchedIn(u32),
}

/// Which event ids are which tracepoint, and where their samples name the thread.
#[derive(Debug, Clone)]
pub(crate) struct TraceSamples {
    pub wakeup: Tracepoint,
    pub switch: Option<Tracepoint>,
    wakeup_ids: HashSet<u64>,
    switch_ids: HashSet<u64>,
}

impl TraceSamples {
    pub(crate) fn new(wakeup: Tracepoint, switch: Option<Tracepoint>) -> TraceSamples {
        TraceSamples {
            wakeup,
            switch,
            wakeup_ids: HashSet::new(),
            switch_ids: HashSet::new(),
        }
    }

    /// Whether `id` is one of these events.
    pub(crate) fn contains(&self, id: u64) -> bool {
        self.wakeup_ids.contains(&id) || self.switch_ids.contains(&id)
    }

    /// What the sample of event `id` with these raw fields says.
    pub(crate) fn read(&self, id: u64, raw: &[u8]) -> Option<Traced> {
        if self.wakeup_ids.contains(&id) {
            self.wakeup.woken(raw).map(Traced::Woken)
        } else if self.switch_ids.contains(&id) {
            self.switch?.woken(raw).map(Traced::SwitchedIn)
        } else {
            None
        }
    }
}

/// The per-CPU wake-up (and switch-in) events of a recording and their filter.
pub(super) struct Wakeups {
    pub samples: TraceSamples,
    cpus: Vec<u32>,
    events: Vec<EventFd>,
    /// Every event id opened (records of replaced events may still be in the rings).
    pub ids: HashSet<u64>,
    /// Filtered: the threads the filter names and the pid above which it lets all
    /// through. None under `-a`.
    filter: Option<(BTreeSet<u32>, u32)>,
    /// The threads whose switch-outs the switch-in filter leaves out: those the
    /// recorder had seen switch (their switch-outs have samples and SWITCH records,
    /// which say when the next thread was picked: `offcpu::Tracker::switch_in`).
    handing: BTreeSet<u32>,
    made: Instant,
    /// Times a fresh filter replaced the events.
    pub refiltered: u64,
}

impl Wakeups {
    /// Opens one wake-up event per CPU of `rings` (`cpus[i]` is ring i's CPU), and one
    /// switch-in event when `samples` has the tracepoint, their records into that ring,
    /// filtered to `tids` and pids above `newest` (read with [`newest_pid`] before
    /// `tids` were listed), or unfiltered (None).
    pub(super) fn open(
        samples: TraceSamples,
        rings: &[CpuRing],
        cpus: &[u32],
        newest: u32,
        tids: Option<BTreeSet<u32>>,
    ) -> Result<Wakeups, WakeupsError> {
        let mut w = Wakeups {
            samples,
            cpus: cpus.to_vec(),
            events: Vec::new(),
            ids: HashSet::new(),
            filter: tids.map(|t| (t, newest)),
            handing: BTreeSet::new(),
            made: Instant::now(),
            refiltered: 0,
        };
        w.events = w.open_events(rings)?;
        Ok(w)
    }

    /// Opens the events with the current filter, enabled.
    fn open_events(&mut self, rings: &[CpuRing]) -> Result<Vec<EventFd>, WakeupsError> {
        let mut events = Vec::with_capacity(2 * self.cpus.len());
        let kinds = [
            (Some(self.samples.wakeup), "sched_wakeup", "pid"),
            (self.samples.switch, "sched_switch", "next_pid"),
        ];
        let mut opened: [Vec<u64>; 2] = Default::default();
        for (k, (tp, name, field)) in kinds.into_iter().enumerate() {
            let Some(tp) = tp else { continue };
            // Wake-ups of threads the recorder has not met yet must come through
            // (they split its first intervals); switch-ins need not (the interval
            // ends at the SWITCH-in record then), and letting every new process's
            // switches through would crowd the rings on a busy host.
            let text = self.filter.as_ref().map(|(tids, above)| match k {
                0 => filter(tids, Some(*above), field),
                _ => switch_filter(tids, &self.handing),
            });
            for (&cpu, ring) in self.cpus.iter().zip(rings) {
                let fd = EventFd::open_tracepoint(tp.id, cpu as i32, text.as_deref())
                    .map_err(|err| WakeupsError::Open { name, cpu, err })?;
                fd.set_output(&ring.owner)
                    .map_err(|err| WakeupsError::Redirect { name, err })?;
                let id = fd.id().map_err(|err| WakeupsError::Id { name, err })?;
                opened[k].push(id);
                events.push(fd);
            }
        }
        for fd in &events {
            fd.enable().map_err(WakeupsError::Enable)?;
        }
        let [wakeups, switches] = opened;
        self.ids.extend(wakeups.iter().chain(&switches));
        self.samples.wakeup_ids.extend(wakeups);
        self.samples.switch_ids.extend(switches);
        self.made = Instant::now();
        Ok(events)
    }

    /// Makes a fresh filter when `known` (the threads of the recording the recorder
    /// has seen) includes one the wake-up filter does not cover, or (at most every
    /// [`REFILTER_EVERY`]) one the switch-in filter does not name or whose switch-outs
    /// it does not leave out (or leaves out one no longer known), or `stray` wake-ups
    /// of other threads went through since it was made. The new filter covers every pid above
    /// the system's newest, read first, then the threads `list` finds. Returns whether
    /// it did; on an error the old events stay.
    pub(super) fn refresh(
        &mut self,
        rings: &[CpuRing],
        known: impl Iterator<Item = u32>,
        stray: u64,
        list: impl FnOnce() -> BTreeSet<u32>,
    ) -> Result<bool, WakeupsError> {
        let Some((covered, above)) = &self.filter else {
            return Ok(false);
        };
        let due = self.made.elapsed() >= REFILTER_EVERY;
        let mut uncovered = false;
        let mut unnamed = false;
        let known: BTreeSet<u32> = known.collect();
        for &t in &known {
            let named = covered.contains(&t);
            uncovered |= t <= *above && !named;
            unnamed |= !named;
        }
        // The switch-in filter names each thread and leaves out the switch-outs of
        // those seen: new ones join it, not at once.
        unnamed = (unnamed || known != self.handing) && self.samples.switch.is_some() && due;
        let busy = stray > STRAY_LIMIT && due;
        if !uncovered && !busy && !unnamed {
            return Ok(false);
        }
        let newest = newest_pid();
        self.filter = Some((list(), newest));
        self.handing = known;
        let events = self.open_events(rings)?;
        // The new events are enabled: the old ones can go.
        self.events = events;
        self.refiltered += 1;
        Ok(true)
    }

    /// Closes the events (the end of the recording).
    pub(super) fn close(&mut self) {
        self.events.clear();
    }
}

/// Opens the per-CPU wake-up events of `--off-cpu`, filtered to the threads of
/// `pids` (only `only_tids` of them with `-t`) and to those yet to come; the error
/// says why they could not be.
pub(super) fn open_for(
    rings: &[CpuRing],
    cpus: &[u32],
    pids: &[u32],
    only_tids: Option<&[u32]>,
) -> Result<Wakeups, WakeupsError> {
    let tp = Tracepoint::find()?;
    // Optional: without it, intervals end at the SWITCH-in record.
    let samples = TraceSamples::new(tp, Tracepoint::find_switch().ok());
    let newest = newest_pid();
    let mut tids = std::collections::BTreeSet::new();
    for &pid in pids {
        tids.insert(pid);
        tids.extend(process::list_tids(pid).unwrap_or_default());
    }
    if let Some(only) = only_tids {
        tids.retain(|t| only.contains(t));
    }
    Wakeups::open(samples, rings, cpus, newest, Some(tids))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_name_runs_of_threads_and_every_newer_pid() {
        let tids: BTreeSet<u32> = [100, 101, 102, 200, 305].into_iter().collect();
        assert_eq!(
            filter(&tids, Some(400), "pid"),
            "(pid >= 100 && pid <= 102) || pid == 200 || pid == 305 || pid > 400"
        );
        // Threads above the newest pid are covered by the last clause already.
        assert_eq!(
            filter(&tids, Some(150), "pid"),
            "(pid >= 100 && pid <= 102) || pid > 150"
        );
        assert_eq!(filter(&BTreeSet::new(), Some(7), "pid"), "pid > 7");
        // The switch-in filter names the threads only, and nothing when there are none.
        assert_eq!(
            filter(&tids, None, "next_pid"),
            "(next_pid >= 100 && next_pid <= 102) || next_pid == 200 || next_pid == 305"
        );
        assert_eq!(filter(&BTreeSet::new(), None, "next_pid"), "next_pid < 0");
    }

    #[test]
    fn switch_ins_after_a_seen_thread_are_left_out_exactly() {
        let next: BTreeSet<u32> = [100, 101, 102, 200].into_iter().collect();
        let prev: BTreeSet<u32> = [100, 101, 200].into_iter().collect();
        assert_eq!(
            switch_filter(&next, &prev),
            "((next_pid >= 100 && next_pid <= 102) || next_pid == 200) && \
             prev_pid != 0 && (prev_pid < 100 || prev_pid > 101) && prev_pid != 200"
        );
        // Switch-ins from the idle task are always left out.
        assert_eq!(
            switch_filter(&next, &BTreeSet::new()),
            "((next_pid >= 100 && next_pid <= 102) || next_pid == 200) && prev_pid != 0"
        );
        // Never merged: too many to name leaves every switch-in of a thread in but the
        // idle task's.
        let many: BTreeSet<u32> = (0..2000).map(|i| 1000 + 2 * i).collect();
        let f = switch_filter(&next, &many);
        assert!(
            f.ends_with(") && prev_pid != 0") && f.matches("prev_pid").count() == 1,
            "{f}"
        );
        assert!(f.len() <= MAX_FILTER + 20, "{f}");
    }

    #[test]
    fn long_filters_merge_their_closest_runs() {
        // Every other tid from 1000: 2,000 runs of one.
        let tids: BTreeSet<u32> = (0..2000).map(|i| 1000 + 2 * i).collect();
        let f = filter(&tids, None, "next_pid");
        assert!(f.len() <= MAX_FILTER, "{}", f.len());
        // Still covers every thread: check by evaluating the ranges.
        let runs: Vec<(u32, u32)> = f
            .split(" || ")
            .filter_map(|p| {
                let nums: Vec<u32> = p
                    .split(|c: char| !c.is_ascii_digit())
                    .filter_map(|n| n.parse().ok())
                    .collect();
                match (p.starts_with("next_pid =="), nums.as_slice()) {
                    (true, [a]) => Some((*a, *a)),
                    (false, [a, b]) => Some((*a, *b)),
                    _ => None,
                }
            })
            .collect();
        for t in &tids {
            assert!(runs.iter().any(|&(a, b)| a <= *t && *t <= b), "{t}");
        }
    }

    #[test]
    fn samples_say_which_tracepoint_and_thread_by_their_event_id() {
        let wakeup = Tracepoint {
            id: 374,
            pid_offset: 24,
        };
        let switch = Tracepoint {
            id: 372,
            pid_offset: 56,
        };
        let mut t = TraceSamples::new(wakeup, Some(switch));
        t.wakeup_ids.extend([10, 11]);
        t.switch_ids.extend([20]);
        let mut raw = vec![0u8; 64];
        raw[24..28].copy_from_slice(&7u32.to_le_bytes());
        raw[56..60].copy_from_slice(&9u32.to_le_bytes());
        assert_eq!(t.read(11, &raw), Some(Traced::Woken(7)));
        assert_eq!(t.read(20, &raw), Some(Traced::SwitchedIn(9)));
        assert_eq!(t.read(30, &raw), None);
        assert!(t.contains(10) && t.contains(20) && !t.contains(30));
        // A switch-in sample too short for its field names no thread.
        assert_eq!(t.read(20, &raw[..40]), None);
    }

    #[test]
    fn the_woken_pid_is_read_where_the_format_says() {
        let format = "name: sched_wakeup\nID: 374\nformat:\n\
            \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
            \tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
            \tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n\
            \tfield:int prio;\toffset:28;\tsize:4;\tsigned:1;\n";
        assert_eq!(field_offset(format, "pid"), Some(24));
        assert_eq!(field_offset(format, "prio"), Some(28));
        assert_eq!(field_offset(format, "tid"), None);
        let tp = Tracepoint {
            id: 374,
            pid_offset: 24,
        };
        let mut raw = vec![0u8; 36];
        raw[24..28].copy_from_slice(&4242u32.to_le_bytes());
        assert_eq!(tp.woken(&raw), Some(4242));
        assert_eq!(tp.woken(&raw[..26]), None);
    }
}
