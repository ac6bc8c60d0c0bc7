//! Turning kernel records into recording events: samples (kernel callchain plus the
//! user stack, unwound here so no stack bytes are kept), mappings (with the CFI of
//! the mapped file for unwinding), thread and process life cycles. The
//! [`EventHandler`] owns everything this needs: the recording writer, each process's
//! address space, the loaded modules, the unwinder and the counters.

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

pub(super) use access::Ended;
pub(super) use counters::{Counters, Keep};

/// Turns decoded kernel records into recording events.
pub(super) struct EventHandler {
    writer: Writer,
    spaces: AddressSpaces,
    modules: ModuleCache,
    /// The loaded module and bias of every mapping, by mapping id (less the writer's
    /// `mapping_base`: see [`EventHandler::new_generation`]).
    mapping_modules: Vec<Option<(Arc<LoadedModule>, u64)>>,
    /// Builds each sample's stack.
    stacks: StackBuilder,
    /// Unwind copied user stacks (dwarf mode) rather than take the kernel's user
    /// callchain (frame pointers).
    dwarf: bool,
    /// Which samples are kept.
    keep: Keep,
    /// For a process whose main thread has exited: a live thread whose `/proc` entry
    /// shows its memory and root (see [`process::live_proc`]).
    proc_alias: HashMap<u32, u32>,
    counters: Counters,
    /// Per-thread CPU accounting: sample weights and `[unsampled]` remainders.
    acct: Accounting,
    /// CPU time the written samples' stacks stand for.
    sampled_ns: u64,
    /// `[unsampled]` samples written at live windows' cuts, and the time they hold.
    window_unsampled: (u64, u64),
    /// The first error writing the recording; recording stops on it.
    write_error: Option<std::io::Error>,
    /// With `--off-cpu`: switch-out stacks and SWITCH records become intervals.
    off_cpu: Option<OffCpuRecorder>,
    /// `-a`: read a process's mappings and thread names from /proc at its first
    /// sample, unless its records told them whole: the processes snapshotted, those
    /// that exec'd during the recording, and those forked by one of these.
    lazy_snapshots: Option<HashSet<u32>>,
    /// `-a`: the start of each mapping whose module is read at its process's next
    /// sample, by process (see `lazy_modules`).
    unbound: Option<HashMap<u32, Vec<u64>>>,
    /// The JVMs among the recorded processes and their JIT code (see `jit`).
    jit: JitTracker,
    /// Python frames put in place of CPython's eval-loop frames.
    python: crate::running::python::LivePython,
    /// How often the loop wakes for the Python processes' samples.
    python_pace: super::python::Pace,
    /// The ids of the capture events (`sys::StackCapture`): their samples are no CPU
    /// samples.
    capture_ids: Vec<u64>,
    /// The methods HotSpot's interpreter runs, read from its frames (issue 30).
    java: crate::interp::jvm::JavaFrames,
    /// The JavaScript functions of Node processes, read from V8's frames (issue 47).
    v8: crate::interp::v8::V8Frames,
    /// The Ruby methods of CRuby processes, read from the VM's control frames (issue 49).
    ruby: crate::interp::ruby::RubyFrames,
    /// Each thread's name as last written: a thread or process the kernel reports
    /// by a FORK record is named after the thread that forked it (the kernel copies
    /// the comm) until a COMM record renames it.
    names: HashMap<u32, String>,
    /// The workload of each live kept process, as last written (see
    /// [`EventHandler::read_workload`]); a process leaves it at its exit.
    workloads: HashMap<u32, WorkloadEvent>,
    /// Threads created (true) and ended (false) since the session last took them, in
    /// the records' order: a thread created during the recording gets events of its
    /// own (`TargetEvents::own_events`). None when nobody takes them (`-a`).
    lifecycle: Option<Vec<(bool, u32, u32)>>,
    /// `-a` with windows and no file: what the handler holds of a thread or process
    /// that exited goes once the window holding its last samples is cut (see
    /// `retire`).
    forget_exited: bool,
    /// The processes that exited since the last window's cut (with `forget_exited`).
    exited_pids: Vec<u32>,
}

impl EventHandler {
    pub(super) fn new(writer: Writer, dwarf: bool, keep: Keep) -> EventHandler {
        EventHandler {
            writer,
            spaces: AddressSpaces::default(),
            modules: ModuleCache::new(),
            mapping_modules: Vec::new(),
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
            proc_alias: HashMap::new(),
            counters: Counters::default(),
            acct: Accounting::new(false),
            sampled_ns: 0,
            window_unsampled: (0, 0),
            write_error: None,
            off_cpu: None,
            lazy_snapshots: None,
            unbound: None,
            jit: JitTracker::new(true),
            python: Default::default(),
            python_pace: Default::default(),
            capture_ids: Vec::new(),
            java: crate::interp::jvm::JavaFrames::new(sys::monotonic_ns),
            v8: Default::default(),
            ruby: Default::default(),
            names: HashMap::new(),
            workloads: HashMap::new(),
            lifecycle: None,
            forget_exited: false,
            exited_pids: Vec::new(),
        }
    }

    /// Keeps the threads created and ended for [`EventHandler::take_lifecycle`].
    pub(super) fn with_lifecycle(mut self, on: bool) -> EventHandler {
        self.lifecycle = on.then(Vec::new);
        self
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
        self.names.insert(tid, name.clone());
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
        self.unbound = on.then(HashMap::new);
        self
    }

    /// The loaded module and bias of every mapping recorded, by mapping id (less the
    /// writer's `mapping_base`).
    pub(super) fn mapping_modules(&self) -> &[Option<(Arc<LoadedModule>, u64)>] {
        &self.mapping_modules
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
            self.proc_alias.insert(pid, proc);
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
            && self.capture_ids.contains(&s.id)
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

    fn handle_other(&mut self, rec: Record) {
        match rec {
            Record::Sample(s) => match self.off_cpu.as_ref().and_then(|o| o.kind(s.id)) {
                Some(kind) => self.switch_sample(&s, kind),
                None => {
                    let _ = self.sample(&s);
                }
            },
            Record::Switch {
                pid,
                tid,
                time,
                cpu,
                out,
                preempted,
            } => {
                let kept = self.keep.thread(pid, tid);
                let (intervals, picked) = match &mut self.off_cpu {
                    Some(o) if kept && out => {
                        o.tracker.switch_out(pid, tid, cpu, time, preempted);
                        (Vec::new(), None)
                    }
                    Some(o) if kept => o.tracker.switched_in(tid, cpu, time),
                    _ => (Vec::new(), None),
                };
                // Its stretch on the CPU begins where its wait ended.
                self.acct
                    .switch_from(pid, tid, time, cpu, out, picked.unwrap_or(time));
                for interval in intervals {
                    self.writer.off_cpu(&interval);
                }
            }
            Record::Mmap {
                pid,
                addr,
                len,
                pgoff,
                build_id,
                executable,
                filename,
                time,
                ..
            } => {
                if executable {
                    self.add_mapping(&Mapping {
                        pid,
                        start: addr,
                        end: addr.saturating_add(len),
                        file_offset: pgoff,
                        path: String::from_utf8_lossy(filename).into_owned(),
                        build_id: build_id.map(<[u8]>::to_vec),
                        time,
                    });
                }
            }
            Record::Comm {
                pid,
                tid,
                time,
                name,
                exec,
            } => {
                if exec {
                    if let Some(done) = &mut self.lazy_snapshots {
                        done.insert(pid);
                    }
                    self.acct.exec(tid, time);
                    self.spaces.exec(pid);
                    self.forget_unbound(pid);
                    if self.keep.process(pid) {
                        self.read_workload(pid, time, None);
                    }
                    self.writer.thread_event(&ThreadEvent::Exec { time, pid });
                }
                let name = String::from_utf8_lossy(name).into_owned();
                self.name_thread(time, pid, tid, name);
            }
            Record::Fork {
                pid,
                ppid,
                tid,
                ptid,
                time,
            } => {
                self.acct.fork(pid, tid, ptid, time);
                if let Some(l) = &mut self.lifecycle
                    && self.keep.thread(pid, tid)
                {
                    l.push((true, pid, tid));
                }
                if let Some(o) = &mut self.off_cpu
                    && self.keep.thread(pid, tid)
                {
                    o.tracker.new_thread(pid, tid, time);
                }
                if pid != ppid {
                    self.spaces.fork(ppid, pid);
                    let mem = || sys::ProcessMemory::open(pid).map(|m| Box::new(m) as _);
                    self.ruby.forked(ppid, pid, mem);
                    self.fork_unbound(ppid, pid);
                    if self.keep.process(pid) {
                        self.fork_workload(pid, time, ppid);
                    }
                    if let Some(done) = &mut self.lazy_snapshots
                        && done.contains(&ppid)
                    {
                        done.insert(pid);
                    }
                }
                self.writer.thread_event(&ThreadEvent::Start {
                    time,
                    pid,
                    ppid,
                    tid,
                });
                // The kernel gives the new task its creator's comm and reports a
                // rename (prctl, exec) by a COMM record, which comes after this one.
                // Only a new process is named here: a new thread without a name of
                // its own is its process's (the model's fallback), and naming it now
                // would split it in two when it names itself a moment later (its
                // first off-CPU interval would sit under the inherited name alone).
                if pid == tid
                    && let Some(name) = self.names.get(&ptid).cloned()
                {
                    self.name_thread(time, pid, tid, name);
                }
            }
            Record::Exit { pid, tid, time } => {
                self.acct.exit(pid, tid, time);
                if let Some(l) = &mut self.lifecycle {
                    l.push((false, pid, tid));
                }
                self.names.remove(&tid);
                self.python.thread_exited(tid);
                if pid == tid {
                    self.workloads.remove(&pid);
                }
                self.retire_exited(pid, tid);
                self.retire_counts(pid, tid);
                if let Some(o) = &mut self.off_cpu {
                    o.thread_exit(tid, time);
                }
                self.writer
                    .thread_event(&ThreadEvent::Exit { time, pid, tid });
            }
            Record::Read {
                pid,
                tid,
                id,
                count,
                time,
            } => self.acct.exit_count(pid, tid, id, count, time),
            Record::Lost { time, count } => {
                self.acct.lost();
                self.counters.lost += count;
                self.writer.lost(time, count);
            }
            Record::Throttle { time } => {
                self.counters.throttled += 1;
                self.writer.throttle(time);
            }
            Record::Other { .. } => {}
        }
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
            .and_then(|_| self.workloads.get(&ppid));
        let Some(parent) = inherited else {
            return self.read_workload(pid, time, Some(ppid));
        };
        let w = WorkloadEvent {
            time,
            pid,
            ..parent.clone()
        };
        self.writer.workload(&w);
        self.workloads.insert(pid, w);
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
            None => match parent.and_then(|p| self.workloads.get(&p)) {
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
        if self.workloads.get(&pid).is_some_and(same) {
            return;
        }
        self.writer.workload(&w);
        self.workloads.insert(pid, w);
    }

    /// Records a mapping (executable ones only reach here), loading its module for
    /// unwinding and naming.
    fn add_mapping(&mut self, m: &Mapping) {
        let (pid, start, end) = (m.pid, m.start, m.end);
        let proc = self.proc_alias.get(&pid).copied().unwrap_or(pid);
        if super::jvm::is_libjvm(&m.path) {
            self.jit.jvm_seen(pid);
        }
        let deferred = self.defers_module(m);
        let module = if deferred {
            None
        } else {
            self.modules
                .get(proc, start, end, &m.path, m.build_id.as_deref())
        };
        // Over the tables budget (`tables`): bound at a later sample.
        let deferred = deferred || (module.is_none() && self.modules.refused_last());
        self.unbind_evicted();
        let bound = bind::bind(m.clone(), module);
        if super::jvm::is_libjvm(&m.path)
            && let Some((lm, bias)) = &bound.module
        {
            let mem = || sys::ProcessMemory::open(proc).map(|m| Box::new(m) as _);
            self.java.jvm_mapped(pid, (*lm.image).as_ref(), *bias, mem);
        }
        if crate::interp::v8::is_node(&m.path)
            && let Some((lm, bias)) = &bound.module
        {
            let mem = || sys::ProcessMemory::open(proc).map(|m| Box::new(m) as _);
            let read_at = |off: u64, buf: &mut [u8]| lm.image.read_at(off, buf);
            let image = (m.path.as_str(), (*lm.image).as_ref(), &read_at as _);
            self.v8.node_mapped(pid, image, (*bias, (start, end)), mem);
        }
        if crate::interp::ruby::is_ruby(&m.path)
            && let Some((lm, bias)) = &bound.module
        {
            let mem = || sys::ProcessMemory::open(proc).map(|m| Box::new(m) as _);
            let image = (m.path.as_str(), (*lm.image).as_ref());
            self.ruby
                .ruby_mapped(pid, image, (*bias, (start, end)), mem);
        }
        let id = self.writer.mapping(&bound.mapping);
        self.spaces.space_mut(pid).insert(start, bound.mapped(id));
        self.mapping_modules.push(bound.module);
        if deferred {
            self.defer_module(pid, start);
        }
        debug_assert_eq!(
            self.mapping_modules.len() + self.writer.mapping_base() as usize,
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
        let Some(weight) = self.acct.sample(
            s.pid,
            s.tid,
            s.id,
            s.count,
            s.period.unwrap_or(0),
            s.time,
            s.cpu,
        ) else {
            self.counters.foreign_counts += 1;
            return Ok(());
        };
        if !self.keep.process(s.pid) {
            self.counters.other_process_samples += 1;
            return Ok(());
        }
        if !self.keep.thread(s.pid, s.tid) {
            self.counters.other_thread_samples += 1;
            return Ok(());
        }
        self.counters.samples += 1;
        self.sampled_ns += weight;
        *self.counters.per_thread.entry(s.tid).or_default() += 1;
        if self.counters.pids.insert(s.pid) {
            self.counters
                .uids
                .insert(s.pid, crate::symbolize::perfmap::TargetUser::of(s.pid));
            self.counters.uids_changed += 1;
            if s.pid != 0 && !self.workloads.contains_key(&s.pid) {
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

mod access;
mod blocked;
mod counters;
mod lazy_modules;
mod retire;
mod stack;
mod switches;
mod tables;
mod unsampled;
pub(super) use retire::{debug_tables, debug_tables_every};

/// A sample held back until a JVM's newer perf map arrives: it and every record after
/// it are handled again later ([`EventHandler::handle`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Held;
