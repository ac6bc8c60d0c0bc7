//! Reading perf's own recordings (`perf record`'s perf.data) into the same in-memory
//! [`Recording`] a profile recording becomes, so every report, export, `diff` and the
//! CI gate work on them unchanged.
//!
//! [`parse`] decodes the file. This module replays its records in time order as the
//! recorder replays the kernel's: MMAP records build each process's address space
//! ([`crate::unwind::addrspace`]), COMM/FORK/EXIT records become thread events (thread
//! names come from COMM records), and each sample of a CPU-time event (task-clock,
//! cpu-clock or cycles) becomes a sample whose weight is its period. Stacks:
//! `--call-graph dwarf` samples carry registers and a copy of the user stack, unwound
//! here with [`crate::unwind`] and the CFI of the binaries; `fp` samples and kernel
//! callchains are taken as they are, a frame-pointer walk that left the chain ending at
//! `[truncated: no frame pointer]` as in profile's own fp mode. The result is encoded
//! with the recording writer and read back, so it is checked like any recording, and
//! then named with the symbolizer ([`crate::symbolize::late`]).
//!
//! Binaries are found by build-id (perf's build-id table, or MMAP2 records made with
//! `--buildid-mmap`): first in perf's build-id cache (`~/.debug/.build-id/xx/yyyy/elf`,
//! or `$PERF_BUILDID_DIR`), then at the recorded path if the file there has the same
//! build-id. A file without a known build-id is used only if it is older than the
//! perf.data file. Kernel frames are named from this machine's kallsyms only when the
//! recording was made on the running kernel since its boot (same build-id, same
//! `_text` address).

mod binaries;
mod java;
mod owner;
mod parse;
mod python;
#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::format::{
    CallGraph, Meta, ReadError, Recording, RecordingWriter, Sample, StackId, StopReason, Summary,
    ThreadEvent,
};
use crate::replay::bind::{self, LoadedModule};
use crate::replay::decode::{self, Record};
use crate::replay::merge;
use crate::replay::python::{Copied, PythonFrames};
use crate::replay::runtimes::{self, RuntimeFrames};
use crate::replay::stack::StackBuilder;
use crate::unwind::ModuleCfi;
use crate::unwind::addrspace::{AddressSpaces, Space};
use parse::{Attr, PerfDataError, PerfFile, RawRecord};

pub use owner::Written;
use owner::{OTHER_USER, readable_for};
pub use parse::is_perf_data;

/// Reads a perf.data file held in memory; `name` is used in messages.
pub fn read(data: &[u8], name: &str, written: Written) -> Result<Recording, ReadError> {
    read_with(data, name, Some(written))
}

/// Decodes a perf.data file without opening any binary: stacks as recorded (dwarf
/// samples keep their sampled address only), no names. For fuzzing and tests.
pub fn decode(data: &[u8], name: &str) -> Result<Recording, ReadError> {
    read_with(data, name, None)
}

fn read_with(data: &[u8], name: &str, written: Option<Written>) -> Result<Recording, ReadError> {
    let err = |e: PerfDataError| ReadError::PerfData {
        path: name.to_owned(),
        why: e.to_string(),
    };
    let file = PerfFile::parse(data).map_err(err)?;
    let converted = convert(&file, written).map_err(err)?;
    let mut rec = Recording::from_bytes(&converted.bytes, name)?;
    let mut notes = Vec::new();
    if let Some(Written { unix_ns, .. }) = written {
        let open = |path: &str, build_id: Option<&[u8]>| {
            binaries::open(path, build_id, unix_ns).map(|(image, _)| image)
        };
        let kernel_ok = binaries::same_kernel(&file, converted.kernel_text);
        let names = crate::symbolize::late::name_frames(&mut rec, &open, kernel_ok);
        for s in converted.python_names {
            if let Some(slot) = rec.symbols.get_mut(s.frame as usize) {
                *slot = Some(s);
            }
        }
        rec.check_size(name)?;
        if !names.missing.is_empty()
            || names.kernel_note.is_some()
            || !names.debuginfod_notes.is_empty()
        {
            notes.push(format!(
                "perf.data names frames from the binaries on this machine{}",
                names.clauses()
            ));
        }
    }
    if written.is_some() {
        converted.java.name(&mut rec, &mut notes);
    }
    notes.extend(converted.python_notes);
    notes.extend(converted.cycles_note.clone());
    if file.unfinished {
        notes.push(format!(
            "{name} was not finished by perf record (its data size is 0: perf was killed); read up to its end, without perf's build-id table"
        ));
    }
    if converted.undecodable > 0 {
        notes.push(format!(
            "{} records of {name} did not decode and were skipped",
            converted.undecodable
        ));
    }
    if !notes.is_empty() {
        rec.damage = Some(notes.join("; "));
    }
    Ok(rec)
}

/// A perf.data file encoded as a recording, before naming.
struct Converted {
    bytes: Vec<u8>,
    /// The kernel's `_text` address when recorded (perf's kernel MMAP record).
    kernel_text: Option<u64>,
    /// Records skipped because they did not decode.
    undecodable: u64,
    /// How cycles became time, for cycles recordings.
    cycles_note: Option<String>,
    /// The Java frames read from the JVMs recorded, to name.
    java: java::PerfJava,
    /// Names of the Python frames read from processes still running.
    python_names: Vec<crate::format::FrameSymbols>,
    /// What the Python stage says of them.
    python_notes: Vec<String>,
}

/// The clock in a CPU model name such as `Intel(R) Xeon(R) CPU @ 2.20GHz`, in MHz.
fn nominal_mhz(desc: Option<&str>) -> Option<u64> {
    let (_, clock) = desc?.rsplit_once('@')?;
    let ghz: f64 = clock.trim().strip_suffix("GHz")?.trim().parse().ok()?;
    let mhz = (ghz * 1000.0).round();
    (100.0..=10_000.0).contains(&mhz).then_some(mhz as u64)
}

/// A binary by its recorded path and build-id.
type BinaryKey = (String, Option<Vec<u8>>);

/// Everything the replay keeps.
struct Replay<'f> {
    /// When the perf.data file was written (binaries without a build-id must be
    /// older); None: open no binary.
    written: Option<u64>,
    writer: RecordingWriter<Vec<u8>>,
    spaces: AddressSpaces,
    /// Binaries by (path, build-id); None: not found or not ELF, not tried again.
    modules: HashMap<BinaryKey, Option<Arc<LoadedModule>>>,
    /// Builds each sample's stack.
    stacks: StackBuilder,
    /// Each mapping's module and bias, by mapping id.
    mapping_modules: Vec<Option<(Arc<LoadedModule>, u64)>>,
    /// Python frames of the processes still running (dwarf stacks, binaries opened).
    python: Option<PythonFrames<crate::sys::ProcessMemory>>,
    /// Build-ids of perf's table, by path (user-space files).
    build_ids: HashMap<&'f str, &'f [u8]>,
    dwarf: bool,
    kernel_text: Option<u64>,
    /// Cycles samples: their periods in cycles become time at this clock.
    cycles_per_us: Option<u64>,
    samples: u64,
    weight: u64,
    lost: u64,
    throttled: u64,
    undecodable: u64,
    last_time: u64,
    /// The JVMs recorded, read while they run (`--call-graph dwarf` only).
    java: java::PerfJava,
}

fn convert(file: &PerfFile, written: Option<Written>) -> Result<Converted, PerfDataError> {
    let events: BTreeSet<&str> = file.attrs.iter().filter_map(Attr::cpu_time_event).collect();
    let event = match events.len() {
        1 => events.into_iter().next().unwrap_or_default(),
        0 => {
            let a = &file.attrs[0];
            return Err(PerfDataError::Unsupported(format!(
                "it holds samples of an event profile does not read (perf_event type {}, config {:#x}); profile reads CPU-time samples: record with `perf record -e task-clock` (or cpu-clock, cycles)",
                a.kind, a.config
            )));
        }
        _ => {
            return Err(PerfDataError::Unsupported(format!(
                "it holds samples of several events ({}); profile reads one: record with one `-e`",
                events.into_iter().collect::<Vec<_>>().join(", ")
            )));
        }
    };
    let sampling: Vec<&Attr> = file
        .attrs
        .iter()
        .filter(|a| a.cpu_time_event() == Some(event))
        .collect();
    let first = sampling[0];
    let dwarf = first.sample_type & parse::sample::REGS_USER != 0
        && first.sample_type & parse::sample::STACK_USER != 0;
    let fp = first.sample_type & parse::sample::CALLCHAIN != 0;
    if dwarf && let Some(arch) = file.arch.as_deref().filter(|a| *a != "x86_64") {
        return Err(PerfDataError::Unsupported(format!(
            "it was recorded on {arch} with --call-graph dwarf, and profile unwinds copied stacks of x86_64 only; record with --call-graph fp there"
        )));
    }
    let call_graph = if dwarf {
        CallGraph::Dwarf
    } else if fp {
        CallGraph::Fp
    } else {
        CallGraph::NoStacks
    };

    // Time order, as perf report replays: records without a time keep their place
    // after the one before them.
    let mut records: Vec<(u64, RawRecord)> = Vec::new();
    let mut time = 0;
    for r in file.records() {
        let r = match r {
            Ok(r) => r,
            // A killed perf record's last record can be cut: the ones before count.
            Err(_) if file.unfinished => break,
            Err(e) => return Err(e),
        };
        if r.kind >= 64 {
            match r.kind {
                parse::record::AUXTRACE => {
                    return Err(PerfDataError::Unsupported(
                        "it holds AUX trace data (Intel PT, Arm SPE, CoreSight), which profile does not decode".into(),
                    ));
                }
                parse::record::COMPRESSED | parse::record::COMPRESSED2 => {
                    return Err(PerfDataError::Unsupported(
                        "it is compressed (perf record -z); decompress it with `perf inject -i FILE -o OUT` first".into(),
                    ));
                }
                _ => continue,
            }
        }
        if let Some(t) = file.attr_of(&r).and_then(|a| r.time(a)) {
            time = t;
        }
        records.push((time, r));
    }
    records.sort_by_key(|(t, _)| *t);
    let last_record = records.last().map_or(0, |(t, _)| *t);

    // Cycles are not time: their periods become nanoseconds at the CPU's nominal
    // clock (shares are exact, times as exact as that clock).
    let (cycles_mhz, clock_said) =
        nominal_mhz(file.cpu_desc.as_deref()).map_or((1000, false), |mhz| (mhz, true));
    // The first sample: where the recording starts, and its process.
    let first_sample = records.iter().find_map(|(t, raw)| {
        let attr = file
            .attr_of(raw)
            .filter(|a| a.cpu_time_event() == Some(event))?;
        match raw.decode(attr) {
            Ok(Record::Sample(s)) => Some((*t, s.pid)),
            _ => None,
        }
    });
    // When the first sample was taken, on the wall clock (at the latest): the file was
    // written at the end, the samples span the rest.
    let began = written
        .map(|w| w.unix_ns)
        .filter(|_| dwarf)
        .zip(first_sample)
        .map(|(w, (t0, _))| {
            let span = records.last().map_or(0, |(t, _)| t.saturating_sub(t0));
            std::time::UNIX_EPOCH + std::time::Duration::from_nanos(w.saturating_sub(span))
        });
    let freq = first.freq;
    let meta = Meta {
        pid: first_sample.map(|(_, pid)| pid),
        start_time_ns: first_sample.map_or(0, |(t, _)| t),
        tool_version: file
            .perf_version
            .as_ref()
            .map_or_else(|| "perf".to_owned(), |v| format!("perf {v}")),
        command: file.cmdline.clone(),
        event: event.to_owned(),
        sample_period_ns: if freq {
            1_000_000_000 / first.sample_period.max(1)
        } else {
            first.sample_period
        },
        frequency_hz: if freq { first.sample_period } else { 0 },
        call_graph,
        stack_size: if dwarf { first.sample_stack_user } else { 0 },
        start_unix_ns: written.map_or(0, |w| w.unix_ns),
        hostname: file.hostname.clone().unwrap_or_default(),
        kernel: file.os_release.clone().unwrap_or_default(),
        ..Meta::default()
    };
    let writer = RecordingWriter::new(Vec::new(), &meta)
        .map_err(|e| PerfDataError::Damaged(e.to_string()))?;
    let mut r = Replay {
        written: written.map(|w| w.unix_ns),
        writer,
        spaces: AddressSpaces::default(),
        modules: HashMap::new(),
        stacks: StackBuilder::new(
            dwarf,
            match first.sample_max_stack {
                0 => 127,
                n => usize::from(n),
            },
        ),
        mapping_modules: Vec::new(),
        python: written
            .filter(|_| dwarf)
            .map(|w| python::stage(w.unix_ns, last_record, w.owner_uid)),
        build_ids: file
            .build_ids
            .iter()
            .filter(|b| !b.kernel)
            .map(|b| (b.path.as_str(), b.build_id.as_slice()))
            .collect(),
        dwarf,
        kernel_text: None,
        cycles_per_us: (event == "cycles").then_some(cycles_mhz),
        samples: 0,
        weight: 0,
        lost: 0,
        throttled: 0,
        undecodable: 0,
        last_time: 0,
        java: java::PerfJava::new(began, written.map_or(0, |w| w.owner_uid)),
    };
    for (time, raw) in records {
        let Some(attr) = file.attr_of(&raw) else {
            r.undecodable += 1;
            continue;
        };
        match raw.decode(attr) {
            Ok(rec) => r.handle(rec, attr, time, event),
            Err(_) => r.undecodable += 1,
        }
    }
    let summary = Summary {
        end_time_ns: r.last_time,
        samples: r.samples,
        lost: r.lost,
        throttled: r.throttled,
        dropped: r.undecodable,
        cpu_time_ns: r.weight,
        stop_reason: StopReason::PerfData,
        cpu_accounting: crate::format::CpuAccounting::Estimated,
        ..Summary::default()
    };
    let (kernel_text, undecodable, java) = (r.kernel_text, r.undecodable, r.java);
    let cycles_note = (event == "cycles").then(|| {
        if clock_said {
            format!(
                "cycles samples: their periods are shown as CPU time at the CPU's nominal {:.2} GHz (shares are exact)",
                cycles_mhz as f64 / 1000.0
            )
        } else {
            "cycles samples: the file does not give the CPU's clock, so their periods are shown as CPU time at 1 GHz (shares are exact, times are not)".to_owned()
        }
    });
    let (python_names, python_notes) = match &r.python {
        Some(p) => {
            let stage: [&dyn RuntimeFrames; 1] = [p];
            (
                runtimes::names_from(&stage, r.writer.frames(), 0),
                runtimes::notes(&stage),
            )
        }
        None => (Vec::new(), Vec::new()),
    };
    let bytes = r
        .writer
        .finish(&summary)
        .map_err(|e| PerfDataError::Damaged(e.to_string()))?;
    Ok(Converted {
        bytes,
        kernel_text,
        undecodable,
        cycles_note,
        java,
        python_names,
        python_notes,
    })
}

impl Replay<'_> {
    fn handle(&mut self, rec: Record, attr: &Attr, time: u64, event: &str) {
        match rec {
            Record::Sample(s) => {
                if attr.cpu_time_event() != Some(event) {
                    return;
                }
                let period = s
                    .period
                    .unwrap_or(if attr.freq { 0 } else { attr.sample_period });
                let weight = match self.cycles_per_us {
                    Some(c) => period.saturating_mul(1000) / c,
                    None => period,
                };
                self.samples += 1;
                self.weight = self.weight.saturating_add(weight);
                self.last_time = self.last_time.max(time);
                let stack = self.stack(&s);
                self.writer.sample(&Sample {
                    time,
                    pid: s.pid,
                    tid: s.tid,
                    cpu: s.cpu,
                    weight,
                    stack,
                });
            }
            Record::Mmap {
                pid,
                kernel,
                addr,
                len,
                pgoff,
                build_id,
                executable,
                filename,
                ..
            } => {
                let filename = String::from_utf8_lossy(filename).into_owned();
                if kernel {
                    if filename.starts_with("[kernel.kallsyms]") {
                        self.kernel_text = Some(pgoff);
                    }
                    return;
                }
                if executable {
                    self.add_mapping(pid, addr, len, pgoff, build_id, filename, time);
                }
            }
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
            Record::Lost { count, .. } => {
                self.lost = self.lost.saturating_add(count);
                self.writer.lost(time, count);
            }
            Record::Throttle { .. } => {
                self.throttled += 1;
                self.writer.throttle(time);
            }
            // perf's context switches and final counts are not read (yet).
            Record::Other { .. } | Record::Switch { .. } | Record::Read { .. } => {}
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn add_mapping(
        &mut self,
        pid: u32,
        start: u64,
        len: u64,
        pgoff: u64,
        build_id: Option<&[u8]>,
        path: String,
        time: u64,
    ) {
        let build_id = build_id
            .or_else(|| self.build_ids.get(path.as_str()).copied())
            .map(<[u8]>::to_vec);
        let module = self.load(&path, build_id.as_deref());
        let mapping = crate::format::Mapping {
            pid,
            start,
            end: start.saturating_add(len),
            file_offset: pgoff,
            path,
            build_id,
            time,
        };
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
}
