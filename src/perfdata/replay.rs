//! perf.data's records replayed in time order, as the recorder replays the kernel's:
//! MMAP records bind binaries into each process's address space, COMM/FORK/EXIT
//! records become thread events, and each sample of the recorded CPU-time event
//! becomes a sample whose stack is unwound, merged with the runtimes' frames and
//! interned by the recording writer.

use std::collections::HashMap;
use std::sync::Arc;

use super::parse::{Attr, PerfDataError, PerfFile};
use super::{Converted, Sampled, Written, binaries, java, python};
use crate::format::{RecordingWriter, Sample, StackId, StopReason, Summary, ThreadEvent};
use crate::replay::bind::{self, LoadedModule};
use crate::replay::decode::{self, Record};
use crate::replay::merge;
use crate::replay::python::{Copied, PythonFrames};
use crate::replay::runtimes::{self, RuntimeFrames};
use crate::replay::stack::StackBuilder;
use crate::unwind::ModuleCfi;
use crate::unwind::addrspace::{AddressSpaces, Space};

/// A binary by its recorded path and build-id.
type BinaryKey = (String, Option<Vec<u8>>);

/// The time the records span: the first sample's and the last record's.
pub(super) struct Span {
    pub(super) first: Option<u64>,
    pub(super) last: u64,
}

/// The binaries the recording's mappings name, each found and loaded once.
struct Binaries<'f> {
    /// When the perf.data file was written (binaries without a build-id must be
    /// older); None: open no binary.
    written: Option<u64>,
    /// Load CFI (dwarf stacks), or only the image.
    dwarf: bool,
    /// Build-ids of perf's table, by path (user-space files).
    build_ids: HashMap<&'f str, &'f [u8]>,
    /// Binaries by (path, build-id); None: not found or not ELF, not tried again.
    modules: HashMap<BinaryKey, Option<Arc<LoadedModule>>>,
}

impl Binaries<'_> {
    /// A mapping's build-id: its record's, or perf's table's for its path.
    fn build_id(&self, recorded: Option<&[u8]>, path: &str) -> Option<Vec<u8>> {
        recorded
            .or_else(|| self.build_ids.get(path).copied())
            .map(<[u8]>::to_vec)
    }

    /// The binary at `path` with `build_id`, loaded once (CFI only in dwarf mode).
    fn load(&mut self, path: &str, build_id: Option<&[u8]>) -> Option<Arc<LoadedModule>> {
        if !path.starts_with('/') && path != "[vdso]" {
            return None;
        }
        let key = (path.to_owned(), build_id.map(<[u8]>::to_vec));
        if let Some(m) = self.modules.get(&key) {
            return m.clone();
        }
        let written = self.written?;
        let loaded = binaries::open(path, build_id, written)
            .ok()
            .map(|(image, info)| {
                let cfi = if self.dwarf {
                    ModuleCfi::new(Arc::clone(&image))
                } else {
                    ModuleCfi::without_tables(Arc::clone(&image))
                };
                Arc::new(LoadedModule {
                    image,
                    cfi: Some(Arc::new(cfi)),
                    info,
                })
            });
        self.modules.insert(key, loaded.clone());
        loaded
    }
}

/// What the replay counts for the summary.
#[derive(Default)]
struct Counts {
    samples: u64,
    weight: u64,
    lost: u64,
    throttled: u64,
    undecodable: u64,
    last_time: u64,
}

/// Everything the replay keeps.
pub(super) struct Replay<'f> {
    writer: RecordingWriter<Vec<u8>>,
    spaces: AddressSpaces,
    binaries: Binaries<'f>,
    /// Builds each sample's stack.
    stacks: StackBuilder,
    /// Each mapping's module and bias, by mapping id.
    mapping_modules: Vec<Option<(Arc<LoadedModule>, u64)>>,
    /// Python frames of the processes still running (dwarf stacks, binaries opened).
    python: Option<PythonFrames<crate::sys::ProcessMemory>>,
    /// The kernel's `_text` address when recorded (perf's kernel MMAP record).
    kernel_text: Option<u64>,
    /// Cycles samples: their periods in cycles become time at this clock.
    cycles_per_us: Option<u64>,
    counts: Counts,
    /// The JVMs recorded, read while they run (`--call-graph dwarf` only).
    java: java::PerfJava,
}

impl<'f> Replay<'f> {
    /// A replay into `writer` of `file`'s records of `sampled`'s event; `written`
    /// None opens no binary and reads no process.
    pub(super) fn new(
        file: &'f PerfFile,
        writer: RecordingWriter<Vec<u8>>,
        sampled: &Sampled,
        written: Option<Written>,
        span: Span,
        cycles_per_us: Option<u64>,
    ) -> Replay<'f> {
        let dwarf = sampled.dwarf();
        // When the first sample was taken, on the wall clock (at the latest): the file
        // was written at the end, the samples span the rest.
        let began = written
            .map(|w| w.unix_ns)
            .filter(|_| dwarf)
            .zip(span.first)
            .map(|(w, t0)| {
                let took = span.last.saturating_sub(t0);
                std::time::UNIX_EPOCH + std::time::Duration::from_nanos(w.saturating_sub(took))
            });
        let depth = match sampled.first.sample_max_stack {
            0 => 127,
            n => usize::from(n),
        };
        Replay {
            writer,
            spaces: AddressSpaces::default(),
            binaries: Binaries {
                written: written.map(|w| w.unix_ns),
                dwarf,
                build_ids: (file.build_ids.iter())
                    .filter(|b| !b.kernel)
                    .map(|b| (b.path.as_str(), b.build_id.as_slice()))
                    .collect(),
                modules: HashMap::new(),
            },
            stacks: StackBuilder::new(dwarf, depth),
            mapping_modules: Vec::new(),
            python: written
                .filter(|_| dwarf)
                .map(|w| python::stage(w.unix_ns, span.last, w.owner_uid)),
            kernel_text: None,
            cycles_per_us,
            counts: Counts::default(),
            java: java::PerfJava::new(began, written.map_or(0, |w| w.owner_uid)),
        }
    }

    /// Counts a record that did not decode.
    pub(super) fn undecodable(&mut self) {
        self.counts.undecodable += 1;
    }

    /// Replays one record of `time`.
    pub(super) fn handle(&mut self, rec: Record, attr: &Attr, time: u64, event: &str) {
        match rec {
            Record::Sample(s) => {
                if attr.cpu_time_event() == Some(event) {
                    self.sample(&s, attr, time);
                }
            }
            rec @ Record::Mmap { .. } => self.mmap(rec, time),
            rec @ (Record::Comm { .. } | Record::Fork { .. } | Record::Exit { .. }) => {
                self.thread(rec, time);
            }
            Record::Lost { count, .. } => {
                self.counts.lost = self.counts.lost.saturating_add(count);
                self.writer.lost(time, count);
            }
            Record::Throttle { .. } => {
                self.counts.throttled += 1;
                self.writer.throttle(time);
            }
            // perf's context switches and final counts are not read (yet).
            Record::Other { .. } | Record::Switch { .. } | Record::Read { .. } => {}
        }
    }

    /// A mapping: the kernel's text address, or a process's executable mapping
    /// bound to its binary.
    fn mmap(&mut self, rec: Record, time: u64) {
        let Record::Mmap {
            pid,
            kernel,
            addr,
            len,
            pgoff,
            build_id,
            executable,
            filename,
            ..
        } = rec
        else {
            return;
        };
        let filename = String::from_utf8_lossy(filename).into_owned();
        if kernel {
            if filename.starts_with("[kernel.kallsyms]") {
                self.kernel_text = Some(pgoff);
            }
            return;
        }
        if executable {
            let mapping = crate::format::Mapping {
                pid,
                start: addr,
                end: addr.saturating_add(len),
                file_offset: pgoff,
                build_id: self.binaries.build_id(build_id, &filename),
                path: filename,
                time,
            };
            self.add_mapping(mapping);
        }
    }

    /// A thread or process event: written, and an exec or a fork reflected in the
    /// address spaces.
    fn thread(&mut self, rec: Record, time: u64) {
        match rec {
            Record::Comm {
                pid,
                tid,
                name,
                exec,
                ..
            } => {
                let name = String::from_utf8_lossy(name).into_owned();
                if exec {
                    self.spaces.exec(pid);
                    self.writer.thread_event(&ThreadEvent::Exec { time, pid });
                }
                self.writer.thread_event(&ThreadEvent::Name {
                    time,
                    pid,
                    tid,
                    name,
                });
            }
            Record::Fork { pid, ppid, tid, .. } => {
                if pid != ppid {
                    self.spaces.fork(ppid, pid);
                }
                self.writer.thread_event(&ThreadEvent::Start {
                    time,
                    pid,
                    ppid,
                    tid,
                });
            }
            Record::Exit { pid, tid, .. } => {
                self.writer
                    .thread_event(&ThreadEvent::Exit { time, pid, tid });
            }
            _ => {}
        }
    }

    /// A sample of the recorded event: weighed by its period (cycles turned into
    /// time), its stack built, written.
    fn sample(&mut self, s: &decode::Sample, attr: &Attr, time: u64) {
        let period = s
            .period
            .unwrap_or(if attr.freq { 0 } else { attr.sample_period });
        let weight = match self.cycles_per_us {
            Some(c) => period.saturating_mul(1000) / c,
            None => period,
        };
        let c = &mut self.counts;
        c.samples += 1;
        c.weight = c.weight.saturating_add(weight);
        c.last_time = c.last_time.max(time);
        let stack = self.stack(s);
        self.writer.sample(&Sample {
            time,
            pid: s.pid,
            tid: s.tid,
            cpu: s.cpu,
            weight,
            stack,
        });
    }

    /// An executable mapping of a process, bound to its binary and written.
    fn add_mapping(&mut self, mapping: crate::format::Mapping) {
        let (pid, start, pgoff) = (mapping.pid, mapping.start, mapping.file_offset);
        let module = (self.binaries).load(&mapping.path, mapping.build_id.as_deref());
        let bound = bind::bind(mapping, module);
        if crate::profile::vm_threads::is_libjvm(&bound.mapping.path) {
            (self.java).mapped(pid, (start, pgoff), bound.module.as_ref());
        }
        let id = self.writer.mapping(&bound.mapping);
        self.spaces.space_mut(pid).insert(start, bound.mapped(id));
        let slot = id as usize;
        if self.mapping_modules.len() <= slot {
            self.mapping_modules.resize(slot + 1, None);
        }
        self.mapping_modules[slot] = bound.module;
    }

    /// A sample's stack, leaf first: kernel frames, then user frames unwound from the
    /// stack copy (dwarf) or the kernel's frame-pointer walk (fp); interned.
    fn stack(&mut self, s: &decode::Sample) -> Option<StackId> {
        self.stacks.begin(s);
        let empty = Space::default();
        let space = self.spaces.space(s.pid).unwrap_or(&empty);
        let java = &mut self.java.frames;
        let jvm = java.wants(s.pid);
        if jvm {
            // A JVM recorded and still running: unwound through its code.
            let lookup = java::HeapCode::new(space, java, s.pid);
            self.stacks.unwind(s, &lookup, true);
        } else {
            self.stacks.unwind(s, space, false);
        }
        self.stacks.finish(s.pid, &self.spaces);
        // A JVM's frames become the Java methods they ran, read from its memory now
        // (it runs no CPython eval loop); CPython's eval-loop frames the Python frames
        // they ran, as recorded.
        let captured = merge::Captured {
            pid: s.pid,
            tid: s.tid,
            copy: Copied::of(s),
            java: merge::JavaAt::Copy {
                time: java::SAMPLE_TIME,
                r13: s.reg(decode::REG_R13),
                map: Some(java::NO_MAP),
            },
            cut: self.stacks.was_cut(),
        };
        let stages = merge::Stages {
            java: jvm.then_some(java),
            python: if jvm { None } else { self.python.as_mut() },
            v8: None,
            ruby: None,
        };
        let bound = merge::Bound::new(&self.mapping_modules, self.writer.mappings());
        merge::merge(stages, &mut self.stacks, captured, bound);
        self.writer.intern_stack(self.stacks.frames())
    }

    /// The recording written, with what naming it later needs.
    pub(super) fn finish(self, cycles_note: Option<String>) -> Result<Converted, PerfDataError> {
        let c = &self.counts;
        let summary = Summary {
            end_time_ns: c.last_time,
            samples: c.samples,
            lost: c.lost,
            throttled: c.throttled,
            dropped: c.undecodable,
            cpu_time_ns: c.weight,
            stop_reason: StopReason::PerfData,
            cpu_accounting: crate::format::CpuAccounting::Estimated,
            ..Summary::default()
        };
        let (python_names, python_notes) = match &self.python {
            Some(p) => {
                let stage: [&dyn RuntimeFrames; 1] = [p];
                (
                    runtimes::names_from(&stage, self.writer.frames(), 0),
                    runtimes::notes(&stage),
                )
            }
            None => (Vec::new(), Vec::new()),
        };
        let bytes =
            (self.writer.finish(&summary)).map_err(|e| PerfDataError::Damaged(e.to_string()))?;
        Ok(Converted {
            bytes,
            kernel_text: self.kernel_text,
            undecodable: self.counts.undecodable,
            cycles_note,
            java: self.java,
            python_names,
            python_notes,
        })
    }
}
