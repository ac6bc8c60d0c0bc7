//! Turning kernel records into recording events: samples (kernel callchain plus the
//! user stack, unwound here so no stack bytes are kept), mappings (with the CFI of
//! the mapped file for unwinding), thread and process life cycles. The
//! [`EventHandler`] owns everything this needs, in parts that each own what they
//! change: the recording writer (`writing`), each process's address space and the
//! loaded modules, the stack builder, the counters, the accounting (`ledger`), the
//! off-CPU recorder, the JIT perf maps and the runtime readers (`runtimes`).

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::BufWriter;
use std::sync::Arc;

use super::accounting::Accounting;
use super::jit::{JitTracker, Lookup};
use super::offcpu::OffCpuRecorder;
use super::sys;
use crate::format::{Mapping, RecordingWriter, Sample, StackId, ThreadEvent, WorkloadEvent};
use crate::process;
use crate::replay::bind;
use crate::replay::bind::LoadedModule;
use crate::replay::decode::{self, Record};
use crate::replay::stack::StackBuilder;
use crate::running::modules::ModuleCache;
use crate::unwind::addrspace::{AddressSpaces, Space};

/// The recording being written.
pub(super) type Writer = RecordingWriter<BufWriter<File>>;

pub(super) use counters::{Counters, Keep};
use ledger::Ledger;
pub(super) use runtimes::Runtimes;
pub(super) use writing::Ended;

/// Turns decoded kernel records into recording events.
pub(super) struct EventHandler {
    writer: Writer,
    /// Each process's address space and the module bound to each mapping.
    bind: Binding,
    /// Builds each sample's stack.
    stacks: StackBuilder,
    /// Unwind copied user stacks (dwarf mode) rather than take the kernel's user
    /// callchain (frame pointers).
    dwarf: bool,
    /// Which samples are kept.
    keep: Keep,
    /// What has been counted so far.
    pub counters: Counters,
    /// Per-thread CPU accounting and what the written samples stand for.
    pub ledger: Ledger,
    /// The first error writing the recording; recording stops on it.
    write_error: Option<std::io::Error>,
    /// With `--off-cpu`: switch-out stacks and SWITCH records become intervals.
    pub off_cpu: Option<OffCpuRecorder>,
    /// `-a`: read a process's mappings and thread names from /proc at its first
    /// sample, unless its records told them whole: the processes snapshotted, those
    /// that exec'd during the recording, and those forked by one of these.
    lazy_snapshots: Option<HashSet<u32>>,
    /// The JVMs among the recorded processes and their JIT code (see `jit`).
    pub jit: JitTracker,
    /// The runtime readers: Python, Java and JavaScript frames read from the
    /// processes.
    pub runtimes: Runtimes,
    /// Each thread's name and each process's workload, as last written.
    written: Written,
    /// Threads created (true) and ended (false) since the session last took them, in
    /// the records' order: a thread created during the recording gets events of its
    /// own (`TargetEvents::own_events`). None when nobody takes them (`-a`).
    lifecycle: Option<Vec<(bool, u32, u32)>>,
    /// `-a` with windows and no file: what is forgotten of the processes that exited
    /// at each window's cut.
    retire: Retire,
}

/// Each process's address space and the module bound to each mapping.
struct Binding {
    spaces: AddressSpaces,
    modules: ModuleCache,
    /// The loaded module and bias of every mapping, by mapping id (less the writer's
    /// `mapping_base`: see [`EventHandler::new_generation`]).
    mapping_modules: Vec<Option<(Arc<LoadedModule>, u64)>>,
    /// For a process whose main thread has exited: a live thread whose `/proc` entry
    /// shows its memory and root (see [`process::live_proc`]).
    proc_alias: HashMap<u32, u32>,
    /// `-a`: the start of each mapping whose module is read at its process's next
    /// sample, by process (see `lazy_modules`).
    unbound: Option<HashMap<u32, Vec<u64>>>,
}

/// What the recording last said of each thread and process.
#[derive(Default)]
struct Written {
    /// Each thread's name as last written: a thread or process the kernel reports
    /// by a FORK record is named after the thread that forked it (the kernel copies
    /// the comm) until a COMM record renames it.
    names: HashMap<u32, String>,
    /// The workload of each live kept process, as last written (see
    /// [`EventHandler::read_workload`]); a process leaves it at its exit.
    workloads: HashMap<u32, WorkloadEvent>,
}

/// `-a` with windows and no file: what the handler holds of a thread or process that
/// exited goes once the window holding its last samples is cut (see `retire`).
#[derive(Default)]
struct Retire {
    /// Whether exited threads and processes are forgotten at cuts.
    forget_exited: bool,
    /// The processes that exited since the last window's cut.
    exited_pids: Vec<u32>,
}

impl EventHandler {
    pub(super) fn new(writer: Writer, dwarf: bool, keep: Keep) -> EventHandler {
        EventHandler {
            writer,
            bind: Binding {
                spaces: AddressSpaces::default(),
                modules: ModuleCache::new(),
                mapping_modules: Vec::new(),
                proc_alias: HashMap::new(),
                unbound: None,
            },
            // The most callchain entries the kernel gives a sample
            // (`kernel.perf_event_max_stack`): a frame-pointer chain that long was cut.
            stacks: StackBuilder::new(
                dwarf,
                super::read_sysctl("perf_event_max_stack")
                    .parse()
                    .unwrap_or(127),
            ),
            dwarf,
            keep,
            counters: Counters::default(),
            ledger: Ledger {
                acct: Accounting::new(false),
                sampled_ns: 0,
                window_unsampled: (0, 0),
            },
            write_error: None,
            off_cpu: None,
            lazy_snapshots: None,
            jit: JitTracker::new(true),
            runtimes: Runtimes::new(),
            written: Written::default(),
            lifecycle: None,
            retire: Retire::default(),
        }
    }

    /// Keeps the threads created and ended for [`EventHandler::take_lifecycle`].
    pub(super) fn with_lifecycle(mut self, on: bool) -> EventHandler {
        self.lifecycle = on.then(Vec::new);
        self
    }

    /// Whether every process of the host is recorded (`-a`: processes are read as
    /// they are first sampled).
    pub(in crate::record) fn host_wide(&self) -> bool {
        self.lazy_snapshots.is_some()
    }

    /// The runtime readers read every process within `budgets`.
    pub(in crate::record) fn with_budgets(
        mut self,
        budgets: crate::interp::Budgets,
    ) -> EventHandler {
        self.runtimes.python = std::mem::take(&mut self.runtimes.python).with_budgets(budgets);
        self.runtimes.java.set_budgets(budgets);
        self.runtimes.v8.set_budgets(budgets);
        self.runtimes.ruby.set_budgets(budgets);
        self
    }

    /// When to ask JVMs for their perf maps (`--jvm-perfmap`, `--no-jvm-perfmap`).
    /// Without stack copies no drain reads a JVM's code heaps: then every JVM is asked
    /// unless `mode` says never.
    pub(in crate::record) fn with_jvm_perfmaps(
        mut self,
        mode: crate::record::JvmPerfMap,
    ) -> EventHandler {
        use crate::record::JvmPerfMap;
        self.jit.enabled = mode != JvmPerfMap::Never;
        self.jit.fallback = mode == JvmPerfMap::Fallback && self.dwarf;
        self
    }

    /// Takes the JVMs' perf maps that came, and drops the names exited JVMs' frames
    /// do not need when that is due.
    pub(in crate::record) fn poll_jit_maps(&mut self) {
        let java = &self.runtimes.java;
        self.jit.decide(|pid| java.code_heap_readable(pid));
        self.jit.poll(std::time::Duration::ZERO);
        if self.jit.prune_due() {
            // Exited JVMs keep only the names their frames need.
            self.jit.prune(self.writer.frames());
        }
    }

    /// Whether samples copy the user stack for unwinding (dwarf mode). Frame-pointer
    /// mode's samples copy a few words only, for the sampled function's caller: too
    /// few to read an interpreter's frames from.
    pub(in crate::record) fn copies_stacks(&self) -> bool {
        self.dwarf
    }

    /// Reads process `pid`'s Python state now if it runs CPython, its threads to be
    /// registered for the copy (`PythonFrames::prepare`).
    pub(in crate::record) fn python_prepare(&mut self, pid: u32) {
        self.runtimes.python.capture_on();
        let mappings = self.writer.mappings();
        (self.runtimes.python).prepare(pid, mappings, &self.bind.mapping_modules);
    }

    /// The threads created (true) and ended (false) since the last call, in order,
    /// with their process.
    pub(super) fn take_lifecycle(&mut self) -> Vec<(bool, u32, u32)> {
        self.lifecycle
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Writes a thread's name (first seen, inherited or renamed) and remembers it.
    fn name_thread(&mut self, time: u64, pid: u32, tid: u32, name: String) {
        self.written.names.insert(tid, name.clone());
        self.writer.thread_event(&ThreadEvent::Name {
            time,
            pid,
            tid,
            name,
        });
    }

    /// With `on` (`-a`), snapshots each process at its first sample unless its
    /// mappings are already known (see `lazy_snapshots`).
    pub(super) fn with_lazy_snapshots(mut self, on: bool) -> EventHandler {
        self.lazy_snapshots = on.then(HashSet::new);
        self.bind.unbound = on.then(HashMap::new);
        self
    }

    /// The loaded module and bias of every mapping recorded, by mapping id (less the
    /// writer's `mapping_base`).
    pub(super) fn mapping_modules(&self) -> &[Option<(Arc<LoadedModule>, u64)>] {
        &self.bind.mapping_modules
    }

    /// Records what the attached process has mapped and what its threads are called.
    pub(super) fn snapshot_process(&mut self, pid: u32) {
        if let Some(done) = &mut self.lazy_snapshots {
            done.insert(pid);
        }
        let now = sys::monotonic_ns();
        self.read_workload(pid, now, None);
        let proc = process::live_proc(pid);
        if proc != pid {
            self.bind.proc_alias.insert(pid, proc);
        }
        if let Ok(maps) = process::read_maps(proc) {
            for m in maps.into_iter().filter(|m| m.executable) {
                self.add_mapping(&Mapping {
                    pid,
                    start: m.start,
                    end: m.end,
                    file_offset: m.offset,
                    path: m.path,
                    build_id: None,
                    time: 0,
                });
            }
        }
        for tid in process::list_tids(pid).unwrap_or_default() {
            if let Some(name) = process::thread_name(pid, tid) {
                self.name_thread(now, pid, tid, name);
            }
        }
    }

    /// Acts on one kernel record, in time order.
    /// A CPU sample may be [`Held`]: then nothing of it was handled, and it comes again.
    pub(super) fn handle(&mut self, rec: Record) -> Result<(), Held> {
        if let Record::Sample(s) = &rec
            && self.runtimes.is_capture(s.id)
        {
            // A capture: taken when it was drained.
            return Ok(());
        }
        if let Record::Sample(s) = &rec
            && self.off_cpu.as_ref().and_then(|o| o.kind(s.id)).is_none()
        {
            return self.sample(s);
        }
        self.handle_other(rec);
        Ok(())
    }

    /// Reads a process's workload (cgroup path, executable) from /proc and records it
    /// when it differs from what was recorded for the process. A process already gone
    /// takes its `parent`'s (a fork: a child starts in its parent's cgroup, running
    /// its executable), or keeps its own (an exec: the cgroup is unchanged).
    /// A new process's workload: under `-a`, its parent's when known (a child starts
    /// in its parent's cgroup running its parent's program; an exec reads it again,
    /// and systemd and the container runtimes move a process before its exec), which
    /// spares a fork-heavy host two `/proc` reads per fork; else read from `/proc`.
    fn fork_workload(&mut self, pid: u32, time: u64, ppid: u32) {
        let inherited = self
            .lazy_snapshots
            .as_ref()
            .and_then(|_| self.written.workloads.get(&ppid));
        let Some(parent) = inherited else {
            return self.read_workload(pid, time, Some(ppid));
        };
        let w = WorkloadEvent {
            time,
            pid,
            ..parent.clone()
        };
        self.writer.workload(&w);
        self.written.workloads.insert(pid, w);
    }

    fn read_workload(&mut self, pid: u32, time: u64, parent: Option<u32>) {
        let w = match crate::workload::read_proc(pid) {
            Some(r) => WorkloadEvent {
                time,
                pid,
                cgroup: r.cgroup,
                exe: r.exe,
                kernel: r.kernel,
                delegated: r.delegated,
            },
            None => match parent.and_then(|p| self.written.workloads.get(&p)) {
                Some(w) => WorkloadEvent {
                    time,
                    pid,
                    ..w.clone()
                },
                None => return,
            },
        };
        let same = |o: &WorkloadEvent| {
            (&o.cgroup, &o.exe, o.kernel, o.delegated) == (&w.cgroup, &w.exe, w.kernel, w.delegated)
        };
        if self.written.workloads.get(&pid).is_some_and(same) {
            return;
        }
        self.writer.workload(&w);
        self.written.workloads.insert(pid, w);
    }

    /// Records a mapping (executable ones only reach here), loading its module for
    /// unwinding and naming.
    fn add_mapping(&mut self, m: &Mapping) {
        let (pid, start, end) = (m.pid, m.start, m.end);
        let proc = self.bind.proc_alias.get(&pid).copied().unwrap_or(pid);
        if super::jvm::is_libjvm(&m.path) {
            self.jit.jvm_seen(pid);
        }
        let deferred = self.defers_module(m);
        let module = if deferred {
            None
        } else {
            self.bind
                .modules
                .get(proc, start, end, &m.path, m.build_id.as_deref())
        };
        // Over the tables budget (`tables`): bound at a later sample.
        let deferred = deferred || (module.is_none() && self.bind.modules.refused_last());
        self.unbind_evicted();
        let bound = bind::bind(m.clone(), module);
        if super::jvm::is_libjvm(&m.path)
            && let Some((lm, bias)) = &bound.module
        {
            let mem = || sys::ProcessMemory::open(proc).map(|m| Box::new(m) as _);
            self.runtimes
                .java
                .jvm_mapped(pid, (*lm.image).as_ref(), *bias, mem);
        }
        if crate::interp::v8::is_node(&m.path)
            && let Some((lm, bias)) = &bound.module
        {
            let mem = || sys::ProcessMemory::open(proc).map(|m| Box::new(m) as _);
            let image = (m.path.as_str(), &lm.image);
            self.runtimes
                .v8
                .node_mapped(pid, image, (*bias, (start, end)), mem);
        }
        if crate::interp::ruby::is_ruby(&m.path)
            && let Some((lm, bias)) = &bound.module
        {
            let mem = || sys::ProcessMemory::open(proc).map(|m| Box::new(m) as _);
            let image = (m.path.as_str(), (*lm.image).as_ref());
            self.runtimes
                .ruby
                .ruby_mapped(pid, image, (*bias, (start, end)), mem);
        }
        let id = self.writer.mapping(&bound.mapping);
        self.bind
            .spaces
            .space_mut(pid)
            .insert(start, bound.mapped(id));
        self.bind.mapping_modules.push(bound.module);
        if deferred {
            self.defer_module(pid, start);
        }
        debug_assert_eq!(
            self.bind.mapping_modules.len() + self.writer.mapping_base() as usize,
            id as usize + 1
        );
    }

    fn sample(&mut self, s: &decode::Sample) -> Result<(), Held> {
        let kept = self.keep.process(s.pid) && self.keep.thread(s.pid, s.tid);
        if kept
            && let Some(done) = &self.lazy_snapshots
            && s.pid != 0
            && !done.contains(&s.pid)
        {
            self.snapshot_process(s.pid);
        }
        // Unwound first: a held sample must leave no trace until it is handled again.
        let stack = if kept { self.stack(s, true)? } else { None };
        // Every thread's CPU is accounted, kept or not: an opened thread's counts
        // include the threads and processes that inherited its events.
        let Some(weight) = self.ledger.acct.sample(
            s.pid,
            s.tid,
            s.id,
            s.stream_id,
            s.count,
            s.period.unwrap_or(0),
            s.time,
            s.cpu,
        ) else {
            self.counters.left_out.foreign_counts += 1;
            return Ok(());
        };
        if !self.keep.process(s.pid) {
            self.counters.left_out.other_process_samples += 1;
            return Ok(());
        }
        if !self.keep.thread(s.pid, s.tid) {
            self.counters.left_out.other_thread_samples += 1;
            return Ok(());
        }
        self.counters.samples += 1;
        self.ledger.sampled_ns += weight;
        *self.counters.per_thread.entry(s.tid).or_default() += 1;
        if self.counters.pids.insert(s.pid) {
            self.counters
                .uids
                .insert(s.pid, crate::symbolize::perfmap::TargetUser::of(s.pid));
            self.counters.uids_changed += 1;
            if s.pid != 0 && !self.written.workloads.contains_key(&s.pid) {
                self.read_workload(s.pid, s.time, None);
            }
        }
        self.writer.sample(&Sample {
            time: s.time,
            pid: s.pid,
            tid: s.tid,
            cpu: s.cpu,
            weight,
            stack,
        });
        Ok(())
    }
}

mod blocked;
mod counters;
mod lazy_modules;
mod ledger;
mod others;
mod retire;
mod runtimes;
mod stack;
mod switches;
mod tables;
mod unsampled;
mod writing;
pub(super) use retire::{debug_tables, debug_tables_every};

/// A sample held back until a JVM's newer perf map arrives: it and every record after
/// it are handled again later ([`EventHandler::handle`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Held;
