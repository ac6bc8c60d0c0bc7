//! Live consumers of a recording (`profile top`, `record --push`): the recorder cuts
//! what it has written into back-to-back windows and hands each one over as a small,
//! self-contained [`Recording`] whose frames are already named, so every report and
//! export reads a window as it reads a file.
//!
//! Windows are cut at the recorder's watermark (records are handled in time order up
//! to it), so every sample and off-CPU interval belongs to exactly one window: no gap,
//! no overlap. Names are resolved incrementally: a frame is named the first time a
//! window holds it and the name is kept for the life of the recording (JIT frames
//! without a name are tried again when their process's perf map has grown), so a
//! window costs what its new frames cost, not what the recording has seen so far.
//!
//! Each window also carries the CPU time its threads used that no sample of it
//! stands for (`[unsampled]`, docs/accounting.md), measured as the end of a recording
//! measures it: when a window is due, the recorder reads the own clock of every
//! thread still running at the start of a round ([`Live::prepare`]), and the window
//! is cut at that moment once every record before it has been handled (the next
//! round). A thread's `[unsampled]` part of the window is its clock then, less its
//! samples' weights so far and what earlier windows gave it; a thread that exited
//! gets the rest of its taskstats clock once its EXIT record is in. So a window's
//! samples and `[unsampled]` add up to each thread's CPU in the window, and the
//! windows add up to the recording: the end's remainders count only what the
//! windows did not give, and a sample after a cut weighs only the time since the cut.

use crate::replay::runtimes;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

use super::accounting::{Accounting, thread_cpu_ns};
use super::events::EventHandler;
use super::sys;
use crate::format::{
    Frame, FrameId, FrameSymbols, Mapping, MappingId, Meta, Recording, StackId, StackNode, Summary,
    ThreadEvent, VERSION, WorkloadEvent,
};
use crate::replay::bind::LoadedModule;
use crate::symbolize::frames::Namer;

/// One window of a live recording.
#[derive(Debug, Clone)]
pub struct Window {
    /// CLOCK_MONOTONIC nanoseconds: the window holds what happened in `[start_ns, end_ns)`.
    pub start_ns: u64,
    /// End of the window (the next window's start).
    pub end_ns: u64,
    /// `start_ns` as Unix time in nanoseconds.
    pub start_unix_ns: u64,
    /// `end_ns` as Unix time in nanoseconds.
    pub end_unix_ns: u64,
    /// The window's samples, off-CPU intervals, thread names and lost counts, with
    /// named frames; `meta` and `summary` describe the window (its start, end, totals).
    pub recording: Recording,
    /// The last window: the recording is ending.
    pub last: bool,
}

/// A consumer of windows.
pub trait LiveSink {
    /// How long a window lasts.
    fn interval(&self) -> Duration;
    /// Called once per interval and once at the end (`last`), in order, on a thread of
    /// its own (not the recorder's: a slow sink delays later windows, not sampling,
    /// until some windows wait). Return false to stop the recording.
    fn window(&mut self, w: Window) -> bool;
}

/// The recorder's side of a live recording. Cutting a window is cheap and happens on
/// the recorder's thread (taking the events, renumbering the window's stacks); naming
/// the new frames and the sink's work happen on a worker thread, so a slow first
/// naming (a big module's DWARF) or a slow sink never keeps the recorder from
/// draining the rings.
pub(super) struct Live<'scope> {
    interval: Duration,
    last_cut: Instant,
    /// Start of the window being filled.
    start_ns: u64,
    meta: Meta,
    /// Every thread's process and latest name, by tid.
    threads: HashMap<u32, (u32, String)>,
    /// Every live process's latest workload, by pid (a process leaves it at the cut
    /// after its exit).
    workloads: HashMap<u32, WorkloadEvent>,
    /// The version of the process uids the worker has been sent
    /// ([`super::events::Counters::uids_changed`]).
    sent_uids: u64,
    /// After each window, forget what it needed (a host agent without a file: see
    /// [`EventHandler::new_generation`]).
    renew: bool,
    jobs: Option<SyncSender<Job>>,
    worker: Option<ScopedJoinHandle<'scope, Worker>>,
    stop: Arc<AtomicBool>,
    /// The moment the due window ends, and the own clocks of the threads still
    /// running then (empty without exact accounting).
    clocks: Option<(u64, HashMap<u32, u64>)>,
    /// Reads of the due window's clocks dropped as interrupted ([`Live::prepare`]).
    clock_reads: u8,
}

/// One window for the worker: the window's recording without names, the loaded
/// module of each of its mappings, and the process uids when they changed.
struct Job {
    window: Window,
    modules: Vec<Option<(Arc<LoadedModule>, u64)>>,
    /// Names of the window's interpreter frames (Python functions, interpreted Java
    /// methods), known only to the recorder's thread, by the window's frame ids.
    interp_names: Vec<FrameSymbols>,
    uids: Option<HashMap<u32, crate::symbolize::perfmap::TargetUser>>,
}

mod naming;
mod worker;
use worker::{Worker, keep_windows};

/// A host agent names a module's frames from its symbol tables alone until this
/// many windows after the first that sampled it: its DWARF is read for a program
/// that lives beyond a whole window, not for the short-lived (issue 46: a host
/// that builds large programs read each new build's DWARF once, 2.6 to 8% of a
/// core). See [`worker`].
const DEFER_WINDOWS: u64 = 2;

/// Windows waiting for the worker before the recorder waits for it.
const QUEUE: usize = 16;

/// Rounds a window's end may wait for a read of its threads' clocks that the
/// scheduler did not interrupt (the last one is taken whatever it took): three left
/// a window 4.5 ms over its thread's clock once beside the suite and a Python test
/// loop (session 18); rounds come at most 100 ms apart.
const CLOCK_READS: u8 = 6;

impl<'scope> Live<'scope> {
    pub(super) fn new<'env>(
        scope: &'scope Scope<'scope, 'env>,
        sink: &'env mut (dyn LiveSink + Send),
        meta: Meta,
        (namer, names_budget): (Namer, usize),
        renew: bool,
        defer_dwarf: bool,
    ) -> Self {
        let interval = sink.interval().max(Duration::from_millis(50));
        let (tx, rx) = sync_channel::<Job>(QUEUE);
        let stop = Arc::new(AtomicBool::new(false));
        let stop_w = Arc::clone(&stop);
        let worker = std::thread::Builder::new()
            .name("live".into())
            .spawn_scoped(scope, move || {
                let defer = if defer_dwarf { DEFER_WINDOWS } else { 0 };
                let mut w = Worker::new(namer, interval, names_budget, defer);
                for job in rx {
                    let window = w.take(job);
                    if !stop_w.load(Ordering::Relaxed) && !sink.window(window) {
                        stop_w.store(true, Ordering::Relaxed);
                    }
                }
                w
            })
            .ok();
        Live {
            interval,
            last_cut: Instant::now(),
            start_ns: meta.start_time_ns,
            meta,
            threads: HashMap::new(),
            workloads: HashMap::new(),
            sent_uids: 0,
            renew,
            jobs: worker.is_some().then_some(tx),
            worker,
            stop,
            clocks: None,
            clock_reads: 0,
        }
    }

    /// Sampling has begun at `ns`: the first window starts there (and holds what each
    /// thread ran since its events were opened, while the others were attached).
    pub(super) fn begin(&mut self, ns: u64) {
        self.start_ns = ns;
        self.last_cut = Instant::now();
    }

    /// Start of the window being filled.
    pub(super) fn start_ns(&self) -> u64 {
        self.start_ns
    }

    /// Whether the window is due.
    pub(super) fn due(&self) -> bool {
        self.last_cut.elapsed() >= self.interval
    }

    /// How long until the window is due.
    pub(super) fn left(&self) -> Duration {
        if self.clocks.is_some() {
            // The clocks are read: the window ends where they were read, whenever the
            // round that cuts it comes (later while records are held for a JVM's map:
            // no need to spin meanwhile).
            return Duration::from_millis(4);
        }
        self.interval.saturating_sub(self.last_cut.elapsed())
    }

    /// At the start of a round (`now`, before its records are read): when the window
    /// is due, reads the clocks of the threads still running, and the window will end
    /// at `now` ([`Live::ready`]). A read the scheduler interrupted (the recorder
    /// preempted on a busy machine) would end the window at `now` with clocks of
    /// later: it is dropped and read again next round, up to [`CLOCK_READS`] rounds
    /// (a window then ends up to about half a second late, never with clocks read
    /// milliseconds past its end while a round remains).
    pub(super) fn prepare(&mut self, acct: &Accounting, now: u64) {
        if !self.due() || self.clocks.is_some() {
            return;
        }
        let threads: Vec<(u32, u32)> = if acct.is_exact() {
            acct.threads().collect()
        } else {
            Vec::new()
        };
        let alive: HashMap<u32, u64> = threads
            .iter()
            .filter_map(|&(pid, tid)| Some((tid, thread_cpu_ns(pid, tid)?)))
            .collect();
        // About 10 µs a read: a millisecond more is an interruption.
        let fair = 1_000_000 + 50_000 * threads.len() as u64;
        if sys::monotonic_ns().saturating_sub(now) > fair && self.clock_reads + 1 < CLOCK_READS {
            self.clock_reads += 1;
            return;
        }
        self.clock_reads = 0;
        self.clocks = Some((now, alive));
    }

    /// Whether the due window can be cut at `watermark` (every record before it
    /// handled): once the watermark has reached the moment its clocks were read.
    pub(super) fn ready(&self, watermark: u64) -> bool {
        self.due() && self.clocks.as_ref().is_some_and(|(t, _)| *t <= watermark)
    }

    /// Whether the sink asked to stop.
    pub(super) fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Cuts the window at `end_ns` (everything up to it has been handled) and hands
    /// it to the worker.
    pub(super) fn cut(&mut self, h: &mut EventHandler, end_ns: u64, last: bool) {
        self.last_cut = Instant::now();
        // The last window gets the end's remainders instead (already written).
        if let Some((_, alive)) = self.clocks.take()
            && !last
        {
            h.write_window_unsampled(&alive, end_ns);
        }
        let exact = h.accounting().is_exact();
        let Some(mut rec) = h.take_live() else {
            return;
        };
        for e in &rec.thread_events {
            if let ThreadEvent::Name { pid, tid, name, .. } = e {
                self.threads.insert(*tid, (*pid, name.clone()));
            }
        }
        let modules = compact(h, &mut rec);
        let events = std::mem::take(&mut rec.thread_events);
        rec.thread_events = self.window_threads(&rec, events);
        let new = std::mem::take(&mut rec.workloads);
        rec.workloads = self.window_workloads(&rec.samples, &rec.off_cpu, new, &rec.thread_events);
        let to_unix = |t: u64| {
            self.meta
                .start_unix_ns
                .saturating_add(t.saturating_sub(self.meta.start_time_ns))
        };
        rec.version = VERSION;
        rec.meta = self.meta.clone();
        rec.meta.start_time_ns = self.start_ns;
        rec.meta.start_unix_ns = to_unix(self.start_ns);
        rec.summary = Some(self.summary(&rec, end_ns, last, exact));
        rec.symbols = vec![None; rec.frames.len()];
        let window = Window {
            start_ns: self.start_ns,
            end_ns,
            start_unix_ns: to_unix(self.start_ns),
            end_unix_ns: to_unix(end_ns),
            recording: rec,
            last,
        };
        self.start_ns = end_ns;
        if super::events::debug_tables() {
            eprintln!(
                "profile: live tables: threads {} workloads {}",
                self.threads.len(),
                self.workloads.len()
            );
        }
        self.send(h, window, modules);
        if self.renew && !last {
            h.new_generation(end_ns, keep_windows(self.interval));
        }
    }

    /// The window's summary: its end, counts and CPU time.
    fn summary(&self, rec: &Recording, end_ns: u64, last: bool, exact: bool) -> Summary {
        Summary {
            end_time_ns: end_ns,
            samples: rec.samples.len() as u64,
            lost: rec.lost,
            throttled: rec.throttled,
            dropped: 0,
            cpu_time_ns: rec.samples.iter().map(|s| s.weight).sum(),
            exit_code: None,
            stop_reason: if last {
                crate::format::StopReason::End
            } else {
                crate::format::StopReason::Window
            },
            attached_ns: self.start_ns,
            cpu_accounting: crate::format::CpuAccounting::of(exact),
            // A window's running is its stretches' (its states add up to the window).
            thread_clocks: Vec::new(),
            sample_weights: None,
            notes: Vec::new(),
        }
    }

    /// The window's thread events: every thread of the window by name, named or
    /// renamed in it or before, and each of their processes by its main thread's
    /// name, which names the process (a main thread that only waits has no sample of
    /// its own); then `events`, the window's own. Threads that exited in the window
    /// are named in it and forgotten: later windows do not have them.
    fn window_threads(&mut self, rec: &Recording, events: Vec<ThreadEvent>) -> Vec<ThreadEvent> {
        let mut seen: std::collections::HashSet<u32> = events
            .iter()
            .filter_map(|e| match e {
                ThreadEvent::Name { tid, .. } => Some(*tid),
                _ => None,
            })
            .collect();
        let tids: Vec<u32> = (rec.samples.iter())
            .map(|s| (s.pid, s.tid))
            .chain(rec.off_cpu.iter().map(|o| (o.pid, o.tid)))
            .flat_map(|(pid, tid)| [tid, pid])
            .collect();
        let mut named = Vec::new();
        for tid in tids {
            if seen.insert(tid)
                && let Some((pid, name)) = self.threads.get(&tid)
            {
                named.push(ThreadEvent::Name {
                    time: self.start_ns,
                    pid: *pid,
                    tid,
                    name: name.clone(),
                });
            }
        }
        for tid in exited_threads(&events) {
            self.threads.remove(&tid);
        }
        named.extend(events);
        named
    }

    /// Hands the window to the worker with its mappings' modules, its interpreter
    /// frames' names and the process uids when they changed.
    fn send(
        &mut self,
        h: &mut EventHandler,
        window: Window,
        modules: Vec<Option<(Arc<LoadedModule>, u64)>>,
    ) {
        // The modules the window's samples fell in go last under the tables budget.
        h.touch_modules(&modules);
        let uids = &h.counters.uids;
        let frames = &window.recording.frames;
        let stages = h.runtimes.stages();
        let interp_names = runtimes::names_from(&stages, frames, 0);
        let job = Job {
            window,
            modules,
            interp_names,
            uids: (h.counters.uids_changed != self.sent_uids).then(|| uids.clone()),
        };
        self.sent_uids = h.counters.uids_changed;
        if let Some(tx) = &self.jobs
            && tx.send(job).is_err()
        {
            self.jobs = None;
        }
    }

    /// The workloads a window needs: for each process in it, the one it had when the
    /// window began, then those read during the window. Updates the latest
    /// workloads, and forgets the processes that exited in the window.
    fn window_workloads(
        &mut self,
        samples: &[crate::format::Sample],
        off_cpu: &[crate::format::OffCpu],
        new: Vec<WorkloadEvent>,
        events: &[ThreadEvent],
    ) -> Vec<WorkloadEvent> {
        let pids: std::collections::BTreeSet<u32> = samples
            .iter()
            .map(|s| s.pid)
            .chain(off_cpu.iter().map(|o| o.pid))
            .collect();
        let mut out: Vec<WorkloadEvent> = pids
            .iter()
            .filter_map(|p| self.workloads.get(p).cloned())
            .collect();
        for w in new {
            self.workloads.insert(w.pid, w.clone());
            if pids.contains(&w.pid) {
                out.push(w);
            }
        }
        for e in events {
            if let ThreadEvent::Exit { pid, tid, time } = e
                && pid == tid
                && self.workloads.get(pid).is_some_and(|w| w.time <= *time)
            {
                self.workloads.remove(pid);
            }
        }
        out
    }

    /// Waits for the worker to deliver every window, then names every frame of the
    /// recording the windows did not name, for the file's SYMBOLS chunk; returns every
    /// name (sorted by frame id).
    pub(super) fn finish(&mut self, h: &EventHandler, names_wanted: bool) -> Vec<FrameSymbols> {
        self.jobs = None;
        let Some(mut w) = self.worker.take().and_then(|t| t.join().ok()) else {
            return Vec::new();
        };
        if !names_wanted {
            return Vec::new();
        }
        w.uids = h.counters.uids.clone();
        let writer = h.writer();
        let base = writer.frame_base();
        w.name_all(
            writer.frames(),
            writer.mappings(),
            h.mapping_modules(),
            None,
        )
        .into_iter()
        .flatten()
        .map(|fs| FrameSymbols {
            frame: fs.frame + base,
            ..fs
        })
        .collect()
    }
}

/// Renumbers the window's recording `rec` densely: its stacks into a tree of their
/// own, with the frames they hold and the mappings those name, taken from the
/// recorder's writer. Returns the loaded module of each of the window's mappings.
fn compact(h: &EventHandler, rec: &mut Recording) -> Vec<Option<(Arc<LoadedModule>, u64)>> {
    let w = h.writer();
    let mut c = Compact {
        base: w.node_base(),
        ..Compact::default()
    };
    let nodes = w.live_nodes();
    for s in &mut rec.samples {
        s.stack = s.stack.and_then(|id| c.stack(nodes, id));
    }
    for o in &mut rec.off_cpu {
        o.stack = o.stack.and_then(|id| c.stack(nodes, id));
    }
    let (all_frames, frame_base) = (w.frames(), w.frame_base());
    let (all_mappings, mapping_base) = (w.mappings(), w.mapping_base());
    let all_modules = h.mapping_modules();
    let mut mapping_ids: HashMap<MappingId, MappingId> = HashMap::new();
    let mut mappings: Vec<Mapping> = Vec::new();
    let mut modules = Vec::new();
    let mut frames: Vec<Frame> = Vec::with_capacity(c.frame_order.len());
    for &old in &c.frame_order {
        // The window's stacks are of this generation: so are their frames.
        let found = old
            .checked_sub(frame_base)
            .and_then(|i| all_frames.get(i as usize));
        debug_assert!(found.is_some(), "frame {old} is of an older generation");
        let mut f = found
            .copied()
            .unwrap_or_else(|| Frame::marker(crate::format::Truncation::NoUserStack));
        f.mapping = f.mapping.and_then(|m| {
            let i = m.checked_sub(mapping_base)? as usize;
            let mapping = all_mappings.get(i)?;
            Some(*mapping_ids.entry(m).or_insert_with(|| {
                mappings.push(mapping.clone());
                modules.push(all_modules.get(i).cloned().flatten());
                (mappings.len() - 1) as MappingId
            }))
        });
        frames.push(f);
    }
    rec.nodes = c.nodes;
    rec.frames = frames;
    rec.mappings = mappings;
    modules
}

/// The threads whose last event in `events` is their exit.
fn exited_threads(events: &[ThreadEvent]) -> Vec<u32> {
    let mut last: HashMap<u32, bool> = HashMap::new();
    for e in events {
        match e {
            ThreadEvent::Name { tid, .. } | ThreadEvent::Start { tid, .. } => {
                last.insert(*tid, false);
            }
            ThreadEvent::Exit { tid, .. } => {
                last.insert(*tid, true);
            }
            ThreadEvent::Exec { .. } => {}
        }
    }
    last.into_iter()
        .filter_map(|(tid, gone)| gone.then_some(tid))
        .collect()
}

/// A window's stack tree and frames, renumbered densely from the recording's.
#[derive(Default)]
struct Compact {
    /// The recording's id of `all[0]` (see [`crate::format::RecordingWriter::node_base`]).
    base: StackId,
    nodes: Vec<StackNode>,
    node_ids: HashMap<StackId, StackId>,
    frame_ids: HashMap<FrameId, FrameId>,
    /// The recording's frame id of each of the window's frames.
    frame_order: Vec<FrameId>,
    chain: Vec<StackId>,
}

impl Compact {
    /// The window's id for the recording's stack `leaf`, adding its nodes (parents
    /// first). None if the id is unknown.
    fn stack(&mut self, all: &[StackNode], leaf: StackId) -> Option<StackId> {
        if let Some(&id) = self.node_ids.get(&leaf) {
            return Some(id);
        }
        self.chain.clear();
        let mut at = Some(leaf);
        while let Some(id) = at {
            if self.node_ids.contains_key(&id) {
                break;
            }
            self.chain.push(id);
            at = all.get(id.checked_sub(self.base)? as usize)?.parent;
        }
        let mut parent = at.map(|id| self.node_ids[&id]);
        while let Some(old) = self.chain.pop() {
            let node = all[(old - self.base) as usize];
            let frame = *self.frame_ids.entry(node.frame).or_insert_with(|| {
                self.frame_order.push(node.frame);
                (self.frame_order.len() - 1) as FrameId
            });
            let new = self.nodes.len() as StackId;
            self.nodes.push(StackNode { parent, frame });
            self.node_ids.insert(old, new);
            parent = Some(new);
        }
        parent
    }
}

#[cfg(test)]
mod tests;
