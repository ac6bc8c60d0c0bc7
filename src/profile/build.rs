//! Building the model from a recording: each recording frame becomes a location with
//! its display functions (stored names, inlined frames expanded, or
//! `module+0xoffset`), each recording stack a stack of them, each sample its thread
//! under the name it had then, and off-CPU intervals samples ending in their state's
//! frame, weighted so that each thread's states add up to their measured time.

use std::collections::HashMap;

use super::*;
use crate::format::{FrameKind, Recording, StackId, ThreadEvent};

impl Profile {
    /// Builds the model from a recording.
    pub fn from_recording(rec: &Recording, opts: ProfileOptions) -> Profile {
        let mut b = Builder::new(rec, opts);
        let names = ThreadNames::new(&rec.thread_events);
        let mut threads = ThreadTable {
            workloads: crate::workload::WorkloadIndex::new(&rec.workloads),
            jvms: rec
                .mappings
                .iter()
                .filter(|m| vm_threads::is_libjvm(&m.path))
                .map(|m| m.pid)
                .collect(),
            ..ThreadTable::default()
        };
        // Running and runnable as the kernel splits them (`--off-cpu`).
        let resplits = super::split::resplits(rec);
        let mut samples = b.cpu_samples(&mut threads, &names, &resplits);
        let mut intervals = b.off_cpu(&mut threads, &names, &resplits, &mut samples);
        if !intervals.is_empty() {
            samples.sort_by_key(|s| s.time);
            intervals.sort_by_key(|i| i.time);
        }
        let spans = threads.spans(rec);
        let mut threads = threads.threads;
        super::programs::name_programs(&mut threads);
        let mut meta = rec.meta.clone();
        // Launch-mode recordings before 0.2 name no pid: the launched process is the
        // first one, the lowest pid. Taken here, before any filter, so that every
        // output names the same process whatever is filtered out.
        if meta.pid.is_none() {
            meta.pid = threads.iter().map(|t| t.pid).min();
        }
        let mut profile = Profile {
            meta,
            summary: rec.summary.clone(),
            lost: rec.lost,
            damage: rec.damage.clone(),
            threads,
            functions: b.functions,
            stacks: b.stacks,
            stack_locations: b.stack_locations,
            locations: b.locations,
            modules: b.modules,
            samples,
            intervals,
            spans,
        };
        // The file counts its `[unsampled]` remainders among its samples; they are
        // time no sample stands for, so the summary every output shows counts the
        // samples the kernel took, as the record summary does.
        let unsampled = profile
            .samples
            .iter()
            .filter(|s| s.state == ThreadState::Running && profile.is_unsampled(s.stack))
            .count() as u64;
        if let Some(sum) = profile.summary.as_mut() {
            sum.samples = sum.samples.saturating_sub(unsampled);
        }
        profile
    }
}

impl<'a> Builder<'a> {
    fn new(rec: &'a Recording, opts: ProfileOptions) -> Builder<'a> {
        Builder {
            rec,
            opts,
            functions: Vec::new(),
            function_ids: HashMap::new(),
            stacks: Vec::new(),
            stack_locations: Vec::new(),
            locations: Vec::new(),
            location_ids: HashMap::new(),
            modules: Vec::new(),
            module_ids: HashMap::new(),
            by_leaf: vec![None; rec.nodes.len() + 1],
            off_cpu_ids: HashMap::new(),
            state_locations: HashMap::new(),
        }
    }

    /// The recording's CPU samples, each under its thread as named then, weighed as
    /// the kernel splits running from runnable.
    fn cpu_samples(
        &mut self,
        threads: &mut ThreadTable,
        names: &ThreadNames,
        resplits: &HashMap<(u32, u32), super::split::Resplit>,
    ) -> Vec<ProfileSample> {
        let rec = self.rec;
        let start = rec.meta.start_time_ns;
        let mut samples = Vec::with_capacity(rec.samples.len() + rec.off_cpu.len());
        for s in &rec.samples {
            let thread = threads.get(names, s.pid, s.tid, s.time);
            let stack = self.stack(s.stack);
            let weight = match resplits.get(&(s.pid, s.tid)) {
                Some(r) => r.running(s.weight),
                None => s.weight,
            };
            samples.push(ProfileSample {
                time: s.time.saturating_sub(start),
                thread,
                weight,
                stack,
                state: ThreadState::Running,
            });
        }
        samples
    }
}

struct Builder<'a> {
    rec: &'a Recording,
    opts: ProfileOptions,
    functions: Vec<Function>,
    function_ids: HashMap<Function, FunctionIndex>,
    stacks: Vec<Vec<FunctionIndex>>,
    stack_locations: Vec<Vec<LocationIndex>>,
    locations: Vec<Location>,
    /// Recording frame id -> location index.
    location_ids: HashMap<u32, LocationIndex>,
    modules: Vec<Module>,
    /// Recording mapping id -> module index.
    module_ids: HashMap<u32, ModuleIndex>,
    /// Recording stack node + 1 (0: no stack) -> stack index, once seen.
    by_leaf: Vec<Option<StackIndex>>,
    /// (leaf node, state) of off-CPU stacks -> stack index.
    off_cpu_ids: HashMap<(StackId, ThreadState), StackIndex>,
    /// The location of each state's `[off-cpu: STATE]` frame, and its stack alone.
    state_locations: HashMap<ThreadState, (LocationIndex, Option<StackIndex>)>,
}

impl Builder<'_> {
    fn stack(&mut self, leaf: Option<StackId>) -> StackIndex {
        // The recording interns stacks already: one lookup per sample, by leaf node.
        let slot = leaf.map_or(0, |l| l as usize + 1);
        if let Some(&Some(id)) = self.by_leaf.get(slot) {
            return id;
        }
        let id = self.new_stack(leaf);
        if let Some(s) = self.by_leaf.get_mut(slot) {
            *s = Some(id);
        }
        id
    }

    /// A recording stack node's stack. The reader bounds the depth and the sum of
    /// the depths of all sampled stacks, so this is linear in what the model holds.
    /// Nodes are unique in a recording and each frame has its own location, so
    /// distinct nodes give distinct location lists.
    fn new_stack(&mut self, leaf: Option<StackId>) -> StackIndex {
        let frames: Vec<u32> = self.rec.stack_frames(leaf).collect();
        let locs: Vec<LocationIndex> = frames.iter().rev().map(|&f| self.location(f)).collect();
        self.push_stack(locs)
    }

    /// The stack of an off-CPU interval: where it blocked, then `[off-cpu: STATE]`.
    fn off_cpu_stack(&mut self, leaf: StackId, state: ThreadState) -> StackIndex {
        let key = (leaf, state);
        if let Some(&id) = self.off_cpu_ids.get(&key) {
            return id;
        }
        let frames: Vec<u32> = self.rec.stack_frames(Some(leaf)).collect();
        let mut locs: Vec<LocationIndex> = frames.iter().rev().map(|&f| self.location(f)).collect();
        locs.push(self.state_location(state));
        let id = self.push_stack(locs);
        self.off_cpu_ids.insert(key, id);
        id
    }

    /// The state an interval recorded in `state` with stack `leaf` is shown in. A
    /// stack without kernel frames (no kernel sampling) recorded as `other`: the
    /// user-space syscall wrapper names the wait. A futex wait (`lock`): its user
    /// functions tell an idle wait from contention.
    fn shown_state(&mut self, leaf: Option<StackId>, state: ThreadState) -> ThreadState {
        if leaf.is_none() || !matches!(state, ThreadState::Other | ThreadState::Lock) {
            return state;
        }
        let kernel_frames = self
            .rec
            .stack_frames(leaf)
            .any(|f| self.rec.frames[f as usize].kind == FrameKind::Kernel);
        let stack = self.stack(leaf);
        let names: Vec<&str> = self.stacks[stack.index()]
            .iter()
            .rev()
            .map(|&f| &self.functions[f.index()])
            .filter(|f| f.class != FrameClass::Kernel && f.class != FrameClass::Marker)
            .map(|f| f.name.as_str())
            .collect();
        let state = if state == ThreadState::Other && !kernel_frames {
            classify::from_user(names.iter().copied())
        } else {
            state
        };
        classify::refine(state, names)
    }

    /// The stack of an off-CPU interval that has no stack: the state frame alone.
    fn off_cpu_stack_none(&mut self, state: ThreadState) -> StackIndex {
        let loc = self.state_location(state);
        if let Some((_, Some(id))) = self.state_locations.get(&state) {
            return *id;
        }
        let id = self.push_stack(vec![loc]);
        self.state_locations.insert(state, (loc, Some(id)));
        id
    }

    fn state_location(&mut self, state: ThreadState) -> LocationIndex {
        if let Some(&(l, _)) = self.state_locations.get(&state) {
            return l;
        }
        let f = self.function(Function {
            name: off_cpu_frame_name(state),
            class: FrameClass::OffCpu(state),
            file: None,
            line: None,
        });
        let l = LocationIndex::next(self.locations.len());
        self.locations.push(Location {
            address: 0,
            module: None,
            functions: vec![f],
            lines: Vec::new(),
        });
        self.state_locations.insert(state, (l, None));
        l
    }

    /// Adds a stack of these locations.
    fn push_stack(&mut self, locs: Vec<LocationIndex>) -> StackIndex {
        let funcs = locs
            .iter()
            .flat_map(|&l| self.locations[l.index()].functions.iter().copied())
            .collect();
        let id = StackIndex::next(self.stacks.len());
        self.stacks.push(funcs);
        self.stack_locations.push(locs);
        id
    }

    fn function(&mut self, f: Function) -> FunctionIndex {
        let next = FunctionIndex::next(self.functions.len());
        *self.function_ids.entry(f.clone()).or_insert_with(|| {
            self.functions.push(f);
            next
        })
    }

    fn location(&mut self, id: u32) -> LocationIndex {
        if let Some(&l) = self.location_ids.get(&id) {
            return l;
        }
        let frame = self.rec.frames[id as usize];
        let (functions, lines) = self
            .describe(id)
            .into_iter()
            .map(|(f, line)| (self.function(f), line))
            .unzip();
        let module = frame.mapping.and_then(|m| self.module(m));
        let address = if frame.kind == FrameKind::Truncated {
            0
        } else {
            frame.kind.lookup_address(frame.addr)
        };
        let l = LocationIndex::next(self.locations.len());
        self.locations.push(Location {
            address,
            module,
            functions,
            lines,
        });
        self.location_ids.insert(id, l);
        l
    }

    fn module(&mut self, mapping: u32) -> Option<ModuleIndex> {
        if let Some(&m) = self.module_ids.get(&mapping) {
            return Some(m);
        }
        let m = self.rec.mappings.get(mapping as usize)?;
        let id = ModuleIndex::next(self.modules.len());
        self.modules.push(Module {
            start: m.start,
            end: m.end,
            file_offset: m.file_offset,
            path: m.path.clone(),
            build_id: m.build_id.clone(),
        });
        self.module_ids.insert(mapping, id);
        Some(id)
    }
}

/// A model thread's identity: pid, tid, thread name, process name, service, program.
type ThreadKey = (u32, u32, String, String, Option<String>, String);

/// The model's threads: one per (pid, tid, thread name, process name, service,
/// program).
#[derive(Default)]
struct ThreadTable {
    threads: Vec<Thread>,
    // A renamed thread is a thread per name: samples go under the name the
    // thread had when they were taken.
    ids: HashMap<ThreadKey, ThreadIndex>,
    // Threads never renamed (nearly all) map straight from (pid, tid).
    unrenamed: HashMap<(u32, u32), ThreadIndex>,
    /// Processes that map HotSpot: their own threads are grouped.
    jvms: std::collections::HashSet<u32>,
    /// Each process's workloads: a thread is one per service too.
    workloads: crate::workload::WorkloadIndex,
}

impl ThreadTable {
    fn get(&mut self, names: &ThreadNames, pid: u32, tid: u32, time: u64) -> ThreadIndex {
        if let Some(&t) = self.unrenamed.get(&(pid, tid)) {
            return t;
        }
        let name = names.name_at(pid, tid, time);
        let process = names.name_at(pid, pid, time);
        let workload = self.workloads.at(pid, time);
        let service = workload.map(|w| w.service(&process));
        let container = workload.and_then(|w| w.container_id.clone());
        let path = workload
            .map(|w| w.exe.strip_suffix(" (deleted)").unwrap_or(&w.exe))
            .filter(|e| !e.is_empty());
        let exe = path
            .map(|p| p.rsplit('/').next().unwrap_or("").to_owned())
            .filter(|e| !e.is_empty());
        let program = path.map_or_else(|| process.clone(), str::to_owned);
        let threads = &mut self.threads;
        let jvm = self.jvms.contains(&pid);
        let t = *self
            .ids
            .entry((pid, tid, name, process, service, program))
            .or_insert_with_key(|k| {
                let t = ThreadIndex::next(threads.len());
                threads.push(Thread {
                    pid,
                    tid,
                    name: k.2.clone(),
                    process: k.3.clone(),
                    service: k.4.clone(),
                    container,
                    exe,
                    program: k.5.clone(),
                    group: if jvm {
                        vm_threads::jvm_thread_group(&k.2)
                    } else {
                        None
                    },
                });
                t
            });
        if !names.renamed(pid, tid) && !names.renamed(pid, pid) && !self.workloads.changes(pid) {
            self.unrenamed.insert((pid, tid), t);
        }
        t
    }

    /// Each thread's life in the recording, nanoseconds from its start: from its
    /// THREAD_START (else the attach) to its THREAD_EXIT (else the end).
    fn spans(&self, rec: &Recording) -> Vec<(u64, u64)> {
        let start = rec.meta.start_time_ns;
        let end = rec
            .summary
            .as_ref()
            .map(|s| s.end_time_ns)
            .filter(|&e| e > start)
            .or_else(|| {
                let last_sample = rec.samples.iter().map(|s| s.time).max();
                let last_off = rec
                    .off_cpu
                    .iter()
                    .map(|o| o.time.saturating_add(o.duration))
                    .max();
                last_sample.max(last_off)
            })
            .unwrap_or(start)
            .saturating_sub(start);
        let mut born: HashMap<u32, u64> = HashMap::new();
        let mut died: HashMap<u32, u64> = HashMap::new();
        for e in &rec.thread_events {
            match *e {
                ThreadEvent::Start { time, tid, .. } => {
                    born.insert(tid, time.saturating_sub(start));
                }
                ThreadEvent::Exit { time, tid, .. } => {
                    died.insert(tid, time.saturating_sub(start));
                }
                _ => {}
            }
        }
        // Threads present at attach begin when the events were attached.
        let attached = rec
            .summary
            .as_ref()
            .map_or(0, |s| s.attached_ns.saturating_sub(start));
        self.threads
            .iter()
            .map(|t| {
                let b = born.get(&t.tid).copied().unwrap_or(attached).min(end);
                let d = died.get(&t.tid).copied().unwrap_or(end).clamp(b, end);
                (b, d)
            })
            .collect()
    }
}

/// Thread names over time, from the recording's thread events.
struct ThreadNames {
    /// (pid, tid) -> [(time, name)] in time order.
    names: HashMap<(u32, u32), Vec<(u64, String)>>,
    /// A process started while recording -> its parent process and when it started:
    /// a fork carries its parent's name until it renames itself or execs (recordings
    /// that did not write the inherited name, perf.data files).
    parents: HashMap<u32, (u32, u64)>,
}

impl ThreadNames {
    fn new(events: &[ThreadEvent]) -> ThreadNames {
        let mut names: HashMap<(u32, u32), Vec<(u64, String)>> = HashMap::new();
        let mut parents = HashMap::new();
        for e in events {
            match e {
                ThreadEvent::Name {
                    time,
                    pid,
                    tid,
                    name,
                } => names
                    .entry((*pid, *tid))
                    .or_default()
                    .push((*time, name.clone())),
                ThreadEvent::Start {
                    time,
                    pid,
                    ppid,
                    tid,
                } if pid == tid && pid != ppid => {
                    parents.insert(*pid, (*ppid, *time));
                }
                _ => {}
            }
        }
        for v in names.values_mut() {
            v.sort_by_key(|(t, _)| *t);
        }
        ThreadNames { names, parents }
    }

    /// Whether the thread had more than one name.
    fn renamed(&self, pid: u32, tid: u32) -> bool {
        self.names.get(&(pid, tid)).is_some_and(|v| v.len() > 1)
    }

    /// The name a thread had at `time`: its latest name by then, else its first, else
    /// its process's main thread's name (a new thread starts with its creator's name),
    /// else the name its parent process had when it forked this one.
    fn name_at(&self, pid: u32, tid: u32, time: u64) -> String {
        let pick = |v: &Vec<(u64, String)>, time: u64| {
            v.iter()
                .take_while(|(t, _)| *t <= time)
                .last()
                .or(v.first())
                .map(|(_, n)| n.clone())
        };
        let own = |pid: u32, tid: u32, time: u64| {
            self.names
                .get(&(pid, tid))
                .and_then(|v| pick(v, time))
                .or_else(|| self.names.get(&(pid, pid)).and_then(|v| pick(v, time)))
        };
        if let Some(n) = own(pid, tid, time) {
            return n;
        }
        // Up the chain of forks (bounded: a hostile file may make it a loop).
        let mut p = pid;
        for _ in 0..64 {
            let Some(&(parent, born)) = self.parents.get(&p) else {
                break;
            };
            if let Some(n) = own(parent, parent, born) {
                return n;
            }
            p = parent;
        }
        format!("[tid {tid}]")
    }
}

mod describe;
mod off_cpu;
