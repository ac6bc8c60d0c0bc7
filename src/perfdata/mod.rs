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
mod replay;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

use crate::format::{CallGraph, Meta, ReadError, Recording, RecordingWriter};
use crate::replay::decode::Record;
use parse::{Attr, PerfDataError, PerfFile, RawRecord};
use replay::{Replay, Span};

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

/// What the file samples: its one CPU-time event, the first attribute that samples
/// it, and the stacks its samples carry.
struct Sampled<'f> {
    event: &'static str,
    first: &'f Attr,
    call_graph: CallGraph,
}

impl Sampled<'_> {
    fn dwarf(&self) -> bool {
        self.call_graph == CallGraph::Dwarf
    }
}

/// The one CPU-time event the file samples; an error that says how to record one
/// when it samples none, several, or copied stacks of an architecture not unwound.
fn sampled<'f>(file: &'f PerfFile) -> Result<Sampled<'f>, PerfDataError> {
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
    let first = (file.attrs.iter())
        .find(|a| a.cpu_time_event() == Some(event))
        .ok_or_else(|| PerfDataError::Damaged("no attribute samples its event".into()))?;
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
    Ok(Sampled {
        event,
        first,
        call_graph,
    })
}

/// The file's records in time order, as perf report replays them: records without a
/// time keep their place after the one before them. An error for AUX trace data and
/// compressed files; a killed perf record's cut last record ends the list.
fn in_time_order<'f>(file: &PerfFile<'f>) -> Result<Vec<(u64, RawRecord<'f>)>, PerfDataError> {
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
    Ok(records)
}

/// The recording's header: the first sample (its time and process), the event and
/// how it was sampled, and what perf's header says of the machine.
fn meta(
    file: &PerfFile,
    sampled: &Sampled,
    first_sample: Option<(u64, u32)>,
    written: Option<Written>,
) -> Meta {
    let first = sampled.first;
    let freq = first.freq;
    let dwarf = sampled.dwarf();
    Meta {
        pid: first_sample.map(|(_, pid)| pid),
        start_time_ns: first_sample.map_or(0, |(t, _)| t),
        tool_version: file
            .perf_version
            .as_ref()
            .map_or_else(|| "perf".to_owned(), |v| format!("perf {v}")),
        command: file.cmdline.clone(),
        event: sampled.event.to_owned(),
        sample_period_ns: if freq {
            1_000_000_000 / first.sample_period.max(1)
        } else {
            first.sample_period
        },
        frequency_hz: if freq { first.sample_period } else { 0 },
        call_graph: sampled.call_graph,
        stack_size: if dwarf { first.sample_stack_user } else { 0 },
        start_unix_ns: written.map_or(0, |w| w.unix_ns),
        hostname: file.hostname.clone().unwrap_or_default(),
        kernel: file.os_release.clone().unwrap_or_default(),
        ..Meta::default()
    }
}

/// How cycles became time, for a cycles recording: at the CPU's nominal clock when
/// the file names it (`Some`), else at 1 GHz.
fn cycles_note(nominal_mhz: Option<u64>) -> String {
    match nominal_mhz {
        Some(mhz) => format!(
            "cycles samples: their periods are shown as CPU time at the CPU's nominal {:.2} GHz (shares are exact)",
            mhz as f64 / 1000.0
        ),
        None => "cycles samples: the file does not give the CPU's clock, so their periods are shown as CPU time at 1 GHz (shares are exact, times are not)".to_owned(),
    }
}

fn convert(file: &PerfFile, written: Option<Written>) -> Result<Converted, PerfDataError> {
    let sampled = sampled(file)?;
    let records = in_time_order(file)?;
    // Cycles are not time: their periods become nanoseconds at the CPU's nominal
    // clock (shares are exact, times as exact as that clock).
    let nominal = nominal_mhz(file.cpu_desc.as_deref());
    let cycles = sampled.event == "cycles";
    // The first sample: where the recording starts, and its process.
    let first_sample = records.iter().find_map(|(t, raw)| {
        let attr = file
            .attr_of(raw)
            .filter(|a| a.cpu_time_event() == Some(sampled.event))?;
        match raw.decode(attr) {
            Ok(Record::Sample(s)) => Some((*t, s.pid)),
            _ => None,
        }
    });
    let meta = meta(file, &sampled, first_sample, written);
    let writer = RecordingWriter::new(Vec::new(), &meta)
        .map_err(|e| PerfDataError::Damaged(e.to_string()))?;
    let span = Span {
        first: first_sample.map(|(t, _)| t),
        last: records.last().map_or(0, |(t, _)| *t),
    };
    let cycles_per_us = cycles.then_some(nominal.unwrap_or(1000));
    let mut r = Replay::new(file, writer, &sampled, written, span, cycles_per_us);
    for (time, raw) in records {
        let Some(attr) = file.attr_of(&raw) else {
            r.undecodable();
            continue;
        };
        match raw.decode(attr) {
            Ok(rec) => r.handle(rec, attr, time, sampled.event),
            Err(_) => r.undecodable(),
        }
    }
    r.finish(cycles.then(|| cycles_note(nominal)))
}
