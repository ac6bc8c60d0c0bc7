//! The JVMs of a recording ([`JitTracker`]): which processes are JVMs (and still the
//! ones seen), when each is asked for its perf map, what a reply brings, when a sample
//! waits for a map, and what is kept of a JVM once it exited. Its maps together are
//! held within [`MAX_JIT_WEIGHT`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::{HOLD_LIMIT, HOLD_PAUSE, HOLD_TRIES, JitProcess, MIN_GAP, REFRESH, RETRY_GAP};
use crate::record::jvm::{self, JvmId, PerfMapRequests};
use crate::symbolize::perfmap::{MAX_MAP_WEIGHT, PerfMap};

/// The most the merged maps of all JVMs may weigh together (see
/// [`crate::symbolize::perfmap::ENTRY_COST`]); one JVM's is at most [`MAX_MAP_WEIGHT`].
pub(super) const MAX_JIT_WEIGHT: usize = 256 << 20;

/// How long after a JVM was retired its map is cut down to the code its samples hit
/// (the samples of its last moments may still be on their way until then).
const PRUNE_AFTER: Duration = Duration::from_secs(10);

/// How long a JVM whose code heaps are not known to be readable yet (its tables not
/// read: it is starting) waits before its perf map is asked for.
const UNDECIDED_FOR: Duration = Duration::from_secs(3);

/// The JVMs of a recording and their perf-map requests.
pub(crate) struct JitTracker {
    /// Ask JVMs for perf maps (`--no-jvm-perfmap` turns it off).
    pub enabled: bool,
    /// Ask only the JVMs whose code heaps cannot be read (the default): the others'
    /// JIT code is found in their code heaps as samples are drained.
    pub fallback: bool,
    /// JVMs seen, in fallback mode, not known yet to have readable code heaps, and
    /// since when.
    undecided: HashMap<u32, std::time::Instant>,
    pub processes: HashMap<u32, JitProcess>,
    requests: PerfMapRequests,
    last_refresh: std::time::Instant,
    /// When tracking began: a perf map written before it is not this recording's.
    started: std::time::SystemTime,
    /// Whether samples may be held for a map ([`JitTracker::hold`]); false once recording
    /// ends.
    pub holding: bool,
    /// Holds begun.
    pub holds: u64,
    /// JVMs retired so far (the order they are dropped in).
    retired: u64,
    /// When retired maps were last pruned.
    last_prune: std::time::Instant,
}

impl JitTracker {
    pub(crate) fn new(enabled: bool) -> JitTracker {
        JitTracker {
            enabled,
            fallback: false,
            undecided: HashMap::new(),
            processes: HashMap::new(),
            requests: PerfMapRequests::default(),
            last_refresh: std::time::Instant::now(),
            started: std::time::SystemTime::now(),
            holding: true,
            holds: 0,
            retired: 0,
            last_prune: std::time::Instant::now(),
        }
    }

    /// Whether a JVM retired [`PRUNE_AFTER`] ago still holds its whole map (and no
    /// prune ran in that time): then [`JitTracker::prune`] is due.
    pub(crate) fn prune_due(&self) -> bool {
        self.last_prune.elapsed() >= PRUNE_AFTER
            && self.processes.values().any(|p| self.prunable(p))
    }

    fn prunable(&self, p: &JitProcess) -> bool {
        !p.retire.pruned
            && p.retire
                .retired_at
                .is_some_and(|t| t.elapsed() >= PRUNE_AFTER)
    }

    /// Cuts the map of each JVM retired [`PRUNE_AFTER`] ago down to the regions that
    /// the recording's `frames` (every frame so far) hit: all that naming them at the
    /// end needs. One pass over the frames for every such JVM.
    pub(crate) fn prune(&mut self, frames: &[crate::format::Frame]) {
        self.last_prune = std::time::Instant::now();
        let mut hit: HashMap<u32, Vec<u64>> = self
            .processes
            .iter()
            .filter(|(_, p)| self.prunable(p))
            .map(|(&pid, _)| (pid, Vec::new()))
            .collect();
        for f in frames {
            if f.kind.is_user()
                && let Some(addrs) = hit.get_mut(&f.pid)
            {
                addrs.push(f.kind.lookup_address(f.addr));
            }
        }
        for (pid, addrs) in hit {
            if let Some(p) = self.processes.get_mut(&pid) {
                p.map = p.map.only(&addrs);
                p.retire.pruned = true;
            }
        }
    }

    /// Process `pid` maps HotSpot: track it (if it still runs and maps it: see
    /// [`JvmId::seen`]), and ask for its map at once. A pid tracked before whose JVM
    /// exited is another process now: the old one's map is dropped.
    pub(crate) fn jvm_seen(&mut self, pid: u32) {
        if self.enabled && self.fallback && !self.processes.contains_key(&pid) {
            self.undecided
                .entry(pid)
                .or_insert_with(std::time::Instant::now);
            return;
        }
        self.ask(pid);
    }

    /// In fallback mode, asks for the perf map of each JVM seen whose code heaps
    /// `readable` says cannot be read (or are not known to be after
    /// [`UNDECIDED_FOR`]); a JVM whose can is not asked.
    pub(crate) fn decide(&mut self, readable: impl Fn(u32) -> Option<bool>) {
        if self.undecided.is_empty() {
            return;
        }
        let due: Vec<(u32, bool)> = self
            .undecided
            .iter()
            .filter_map(|(&pid, since)| match readable(pid) {
                Some(r) => Some((pid, !r)),
                None => (since.elapsed() >= UNDECIDED_FOR).then_some((pid, true)),
            })
            .collect();
        for (pid, ask) in due {
            self.undecided.remove(&pid);
            if ask {
                self.ask(pid);
            }
        }
    }

    /// Tracks JVM `pid` and asks for its map at once (see [`JitTracker::jvm_seen`]).
    fn ask(&mut self, pid: u32) {
        if !self.enabled
            || self
                .processes
                .get(&pid)
                .is_some_and(|p| p.id.as_ref().is_some_and(|id| !id.exited()))
        {
            return;
        }
        let Some(id) = JvmId::seen(pid) else {
            return;
        };
        let id = Arc::new(id);
        let p = JitProcess::new(pid, Some(Arc::clone(&id)));
        self.requests.forget(pid);
        let _ = self.requests.request(&id, &p.user, Duration::ZERO);
        self.processes.insert(pid, p);
    }

    /// The budget of `pid`'s next snapshot: [`MAX_MAP_WEIGHT`], less when the other
    /// JVMs' maps together come near [`MAX_JIT_WEIGHT`] (the maps of retired JVMs are
    /// dropped first, the first retired first).
    fn budget(&mut self, pid: u32) -> usize {
        let others = |ps: &HashMap<u32, JitProcess>| -> usize {
            ps.iter()
                .filter(|&(&q, _)| q != pid)
                .map(|(_, p)| p.map.weight())
                .sum()
        };
        while others(&self.processes) > MAX_JIT_WEIGHT - MAX_MAP_WEIGHT {
            let oldest = self
                .processes
                .iter_mut()
                .filter(|(q, p)| **q != pid && !p.retire.dropped && p.retire.retired.is_some())
                .min_by_key(|(_, p)| p.retire.retired)
                .map(|(_, p)| p);
            let Some(p) = oldest else {
                break;
            };
            p.map = PerfMap::default();
            p.retire.dropped = true;
        }
        MAX_MAP_WEIGHT.min(MAX_JIT_WEIGHT.saturating_sub(others(&self.processes)))
    }

    /// JVM `pid` exited (or is no longer the JVM seen): its map as it wrote it at exit is
    /// read once (`-XX:+DumpPerfMapAtExit`, which `--jvm-flags` adds), then it is retired.
    fn exited(&mut self, pid: u32) {
        let budget = self.budget(pid);
        let started = self.started;
        self.requests.forget(pid);
        self.retired += 1;
        let seq = self.retired;
        let Some(p) = self.processes.get_mut(&pid) else {
            return;
        };
        if p.retire.retired.is_some() {
            return;
        }
        if let Ok(file) = jvm::read_map(pid, &p.user)
            && file.modified.is_some_and(|m| m >= started)
        {
            // Its map was written during the recording: by the JVM at its exit, or by
            // our last request (then merging it changes nothing).
            p.merge(file, budget);
        }
        p.retire(seq);
    }

    /// The JIT code of process `pid`, if it is a tracked JVM.
    pub(crate) fn get(&self, pid: u32) -> Option<&JitProcess> {
        self.processes.get(&pid)
    }

    pub(crate) fn get_mut(&mut self, pid: u32) -> Option<&mut JitProcess> {
        self.processes.get_mut(&pid)
    }

    /// Merges the maps that arrived, waiting up to `wait` for one; sends the requests
    /// that are due.
    pub(crate) fn poll(&mut self, wait: Duration) {
        if self.processes.is_empty() {
            return;
        }
        let mut gone = Vec::new();
        for (pid, reply) in self.requests.replies(wait) {
            let budget = self.budget(pid);
            let Some(p) = self.processes.get_mut(&pid) else {
                continue;
            };
            if p.retire.retired.is_some() {
                continue;
            }
            p.pacing.replies += 1;
            match reply {
                Ok(file) => p.merge(file, budget),
                Err(e) => {
                    // A JVM that refused the command, or got SIGQUIT and opened no
                    // listener (it printed a thread dump instead), is not asked again.
                    p.pacing.refused = e.refused();
                    if e.abandoned() {
                        p.outcomes.abandoned += 1;
                    }
                    if e.gone() {
                        gone.push(pid);
                    }
                    // One that exited is no failure to note in the summary.
                    p.outcomes.last_error = (!e.gone()).then(|| e.to_string());
                }
            }
        }
        // JVMs that exited: their exit map once, then retired.
        gone.extend(
            self.processes
                .iter()
                .filter(|(_, p)| p.id.as_ref().is_some_and(|id| id.exited()))
                .map(|(&pid, _)| pid),
        );
        for pid in gone {
            self.exited(pid);
        }
        let periodic = self.last_refresh.elapsed() >= REFRESH;
        if periodic {
            self.last_refresh = std::time::Instant::now();
        }
        for p in self.processes.values_mut() {
            let Some(id) = p.id.as_ref().filter(|_| !p.pacing.refused) else {
                continue;
            };
            // A wanted map stays wanted until it is asked for (a held sample waits for
            // it).
            if periodic && self.requests.request(id, &p.user, MIN_GAP)
                || p.pacing.wants_refresh && self.requests.request(id, &p.user, p.pacing.hold_gap)
            {
                p.pacing.wants_refresh = false;
                p.pacing.hold_gap = p.pacing.gap;
            }
        }
    }

    /// A sample of JVM `pid` was cut in code its map does not name (code compiled since
    /// the last map): whether to hold it (and every later record) until a newer map
    /// arrives, so that it is unwound with it. A hold waits for the request in flight,
    /// or for the next one the gaps of [`super::Pacing::gap`] allow if that comes within
    /// [`HOLD_LIMIT`] (a JVM whose maps bring nothing new is asked rarely, and then
    /// nothing waits); it ends with the reply, an error, or [`HOLD_LIMIT`] after the
    /// request is due. If the sample that waited (`sample_time`) is still cut with
    /// [`HOLD_TRIES`] new maps, holding pauses for [`HOLD_PAUSE`]. While recording ends nothing is held.
    pub(crate) fn hold(&mut self, pid: u32, sample_time: u64) -> bool {
        if !self.enabled || !self.holding {
            return false;
        }
        let Some(p) = self.processes.get_mut(&pid) else {
            return false;
        };
        let now = std::time::Instant::now();
        let mut tries = 0;
        if let Some((until, replies, held, waited)) = p.pacing.hold {
            if p.pacing.replies == replies && now < until {
                return true;
            }
            p.pacing.hold = None;
            if held == sample_time {
                // The map came (or no map will) and the sample that waited for it is
                // still cut. The map may have been asked for before its code was
                // compiled: it waits for one more. After that it is unwound with what
                // there is, and holding pauses (each hold delays every record).
                if waited + 1 >= HOLD_TRIES {
                    p.pacing.no_hold_until = Some(now + HOLD_PAUSE);
                    return false;
                }
                tries = waited + 1;
            }
        }
        // A retry asks sooner: 50 ms after the last request, then 100, 200... never
        // later than the JVM's own gap.
        let gap = if tries > 0 {
            (RETRY_GAP * (1 << (tries - 1))).min(p.pacing.gap)
        } else {
            p.pacing.gap
        };
        let due = self.requests.due_in(pid, gap);
        if p.pacing.refused || due > HOLD_LIMIT || p.pacing.no_hold_until.is_some_and(|t| now < t) {
            return false;
        }
        // poll() sends the request when it is due.
        p.pacing.wants_refresh = true;
        p.pacing.hold_gap = gap;
        self.holds += 1;
        p.pacing.hold = Some((now + due + HOLD_LIMIT, p.pacing.replies, sample_time, tries));
        true
    }

    /// Whether a sample of `pid` could be held now (see [`JitTracker::hold`]): cheap, for
    /// the recorder to skip the checks that would decide it.
    pub(crate) fn can_hold(&self, pid: u32) -> bool {
        if !self.enabled || !self.holding {
            return false;
        }
        let Some(p) = self.processes.get(&pid) else {
            return false;
        };
        let now = std::time::Instant::now();
        p.pacing.hold.is_some()
            || !p.pacing.refused
                && p.pacing.no_hold_until.is_none_or(|t| now >= t)
                && self.requests.due_in(pid, p.pacing.gap) <= HOLD_LIMIT
    }

    /// Whether a held sample still waits (no reply yet, time left): then handling it
    /// again would only hold it again.
    pub(crate) fn waiting(&self) -> bool {
        let now = std::time::Instant::now();
        self.processes.values().any(|p| {
            p.pacing
                .hold
                .is_some_and(|(until, replies, ..)| p.pacing.replies == replies && now < until)
        })
    }

    /// Waits (up to the request time limit) for the answers to the first requests.
    pub(crate) fn wait_first(&mut self) {
        let deadline = std::time::Instant::now() + self.requests.limit;
        while self.processes.keys().any(|&p| self.requests.busy(p)) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            self.poll(left.min(Duration::from_millis(100)));
        }
    }

    /// At the end of the recording: one last map from every JVM still running, so that
    /// code compiled since the last request is named, and from every JVM that exited
    /// the map it wrote as it exited if it did (`-XX:+DumpPerfMapAtExit`, which
    /// `--jvm-flags` adds). Returns each JVM's merged map (taken out of the tracker).
    pub(crate) fn finish(&mut self) -> HashMap<u32, PerfMap> {
        let pids: Vec<u32> = self.processes.keys().copied().collect();
        for &pid in &pids {
            let Some(p) = self.processes.get(&pid) else {
                continue;
            };
            match &p.id {
                None => {}
                Some(id) if id.exited() => self.exited(pid),
                Some(id) if !p.pacing.refused => {
                    let _ = self.requests.request(id, &p.user, Duration::ZERO);
                }
                Some(_) => {}
            }
        }
        self.wait_first();
        self.processes
            .iter_mut()
            .filter(|(_, p)| !p.map.is_empty())
            .map(|(&pid, p)| (pid, std::mem::take(&mut p.map)))
            .collect()
    }

    /// Why JVMs gave no perf map, or not all of it, for the summary.
    pub(crate) fn notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = Vec::new();
        for (pid, p) in &self.processes {
            if let Some(e) = &p.outcomes.last_error {
                notes.push(format!("JVM {pid} wrote no perf map: {e}"));
            }
            if p.outcomes.abandoned > 0 {
                notes.push(format!(
                    "JVM {pid}: {} perf-map request(s) abandoned: no whole reply within {:?}",
                    p.outcomes.abandoned, self.requests.limit
                ));
            }
            if p.outcomes.cuts > 0 || p.outcomes.rebuilds > 0 {
                notes.push(format!(
                    "JVM {pid}: its perf map was cut to stay within {} MiB ({} snapshot(s) \
                     rebuilt the map, dropping names of code they no longer listed; {} cut)",
                    MAX_MAP_WEIGHT >> 20,
                    p.outcomes.rebuilds,
                    p.outcomes.cuts
                ));
            }
            if p.retire.dropped {
                notes.push(format!(
                    "JVM {pid} exited and its perf map was dropped to keep the JVMs' maps \
                     within {} MiB: its compiled frames are unnamed",
                    MAX_JIT_WEIGHT >> 20
                ));
            }
        }
        notes.sort();
        notes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A retired JVM keeps, after a while, only the names its frames need.
    #[test]
    fn a_retired_jvm_keeps_only_the_code_its_frames_hit() {
        use crate::format::{Frame, FrameKind};
        let mut t = JitTracker::new(true);
        let mut p = JitProcess::new(std::process::id(), None);
        p.merge_text("1000 100 hit\n2000 100 missed\n");
        p.retire(1);
        t.processes.insert(7, p);
        assert!(!t.prune_due(), "too soon");
        let old = std::time::Instant::now() - PRUNE_AFTER * 2;
        t.last_prune = old;
        t.processes.get_mut(&7).unwrap().retire.retired_at = Some(old);
        assert!(t.prune_due());
        let frame = |pid, addr| Frame {
            kind: FrameKind::User,
            pid,
            addr,
            mapping: None,
        };
        t.prune(&[frame(7, 0x1010), frame(8, 0x2010)]);
        let map = &t.processes[&7].map;
        assert_eq!(map.lookup(0x1010), Some("hit"));
        assert_eq!(map.lookup(0x2010), None);
        assert!(!t.prune_due());
    }
}
