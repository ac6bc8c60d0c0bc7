//! Fuzz target `python`: a CPython process's memory (a captured snapshot, mutated)
//! read as the recorder reads a sample's Python frames: the runtime and its version
//! (`_Py_DebugOffsets` in 3.13), the thread states, the chain of frames checked
//! against the sample's stack copy and registers, the code objects, their names and
//! line tables, over several samples in a row through one [`PythonProcess`] (its
//! caches are part of what is fuzzed).
//!
//! Input (little-endian):
//! ```text
//! 0      u8      minor version: 3.(8 + b % 6)
//! 1      u8      samples: 1 + b % 4
//! 2      u32     thread id
//! 6      u64     _PyRuntime
//! 14     u64     PyCode_Type
//! 22     u64     sp: the stack copy's address
//! 30     u16     the stack copy's length
//! 32     6 x u64 registers (rbx, rbp, r12-r15)
//! 80     8 bytes per sample: mode, evals, flags (1: cut, 2: in the eval loop,
//!        4: one call slot), 0, stride u16 (each eval call's C frame, from sp),
//!        call slot u16 (from sp)
//! ...    the stack copy
//! ...    regions, to the end: u64 address, u16 length, bytes
//! ```
//! Mode `b % 5`: 0 read through the stack copy, the process "now" behind it; 1 a
//! blocked thread's chain taken whole (`steady_frames`); 2 read ahead, then read; 3
//! the chain copied at the instant (taken from the snapshot as the kernel copies it),
//! then read; 4 every thread's chain start, then read with the copy as "now" too.

use profile::interp::python::{self, COPIED, PythonModule, PythonProcess, SampleInstant};
use profile::interp::{Memory, Overlay, Snapshot};

const HEADER: usize = 80;
const SAMPLE: usize = 8;

fn u16_at(d: &[u8], at: usize) -> u16 {
    d.get(at..at + 2)
        .map_or(0, |b| u16::from_le_bytes([b[0], b[1]]))
}

fn u32_at(d: &[u8], at: usize) -> u32 {
    d.get(at..at + 4)
        .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn u64_at(d: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    if let Some(s) = d.get(at..at + 8) {
        b.copy_from_slice(s);
    }
    u64::from_le_bytes(b)
}

/// Regions to the end of `d`: u64 address, u16 length, bytes (the last one cut to
/// what is left).
pub fn regions(mut d: &[u8]) -> Snapshot {
    let mut snap = Snapshot::default();
    while d.len() >= 10 {
        let addr = u64_at(d, 0);
        let len = usize::from(u16_at(d, 8)).min(d.len() - 10);
        snap.insert(addr, d[10..10 + len].to_vec());
        d = &d[10 + len..];
    }
    snap
}

/// Appends `snap`'s regions in [`regions`]' form (regions past 64 KiB are cut).
pub fn put_regions(out: &mut Vec<u8>, snap: &Snapshot) {
    for (addr, bytes) in snap.regions() {
        let bytes = &bytes[..bytes.len().min(u16::MAX as usize)];
        out.extend_from_slice(&addr.to_le_bytes());
        out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
        out.extend_from_slice(bytes);
    }
}

/// What a run named, for the tests that check the seeds reach the names.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PythonRun {
    /// Each sample's frames, as `function:line` (`?` for a marked frame), joined.
    pub samples: Vec<String>,
}

/// The `python` target.
pub fn python(data: &[u8]) {
    let _ = python_run(data);
}

/// [`python`], saying what it named.
pub fn python_run(data: &[u8]) -> PythonRun {
    let mut run = PythonRun::default();
    let Some(header) = data.get(..HEADER) else {
        return run;
    };
    let minor = 8 + header[0] % 6;
    let samples = 1 + usize::from(header[1] % 4);
    let tid = u32_at(header, 2);
    let sp = u64_at(header, 22);
    let regs: Vec<u64> = (0..6).map(|i| u64_at(header, 32 + 8 * i)).collect();
    let descs_end = HEADER + SAMPLE * samples;
    let Some(descs) = data.get(HEADER..descs_end) else {
        return run;
    };
    let rest = &data[descs_end..];
    let stack_len = usize::from(u16_at(header, 30)).min(rest.len());
    let (stack, rest) = rest.split_at(stack_len);
    let snap = regions(rest);
    let module = PythonModule {
        eval: Vec::new(),
        runtime: u64_at(header, 6),
        code_type: u64_at(header, 14),
        py_version: None,
        name_version: Some((3, minor)),
    };
    let Ok(rt) = python::runtime(&snap, &module, 0, None) else {
        return run;
    };
    let mut process = PythonProcess::new(rt);
    let mem = Overlay {
        sp,
        stack,
        rest: &snap,
    };
    let mut ends = Vec::new();
    for d in descs.chunks_exact(SAMPLE) {
        let (mode, evals, flags) = (d[0] % 5, usize::from(d[1]), d[2]);
        let stride = u64::from(u16_at(d, 4));
        let call = [sp.wrapping_add(u64::from(u16_at(d, 6)))];
        ends.clear();
        if stride > 0 {
            ends.extend((1..=evals.min(64) as u64).map(|k| sp.wrapping_add(stride * k)));
        }
        let at = SampleInstant {
            sp,
            stack,
            regs: &regs,
            ends: &ends,
            cut: flags & 1 != 0,
            calls: match flags & 6 {
                0 => None,
                2 => Some(&[]),
                _ => Some(&call),
            },
        };
        let read = match mode {
            0 => process.frames(&mem, &snap, tid, &at, evals),
            1 => process.steady_frames(&mem, tid, evals, at.cut),
            2 => {
                let _ = process.read_ahead(&snap, &snap, tid, &[]);
                process.frames(&mem, &snap, tid, &at, evals)
            }
            3 => {
                if let Some((tstate, frames)) = copied_chain(&mut process, &snap, tid) {
                    let frames = frames.iter().map(|(a, b)| (*a, &b[..]));
                    process.copied_at_instant(tstate, frames);
                }
                process.frames(&mem, &mem, tid, &at, evals)
            }
            _ => {
                let _ = process.chain_starts(&snap);
                process.frames(&mem, &mem, tid, &at, evals)
            }
        };
        if process.stale_copy() {
            let _ = process.chain_start(&mem, tid);
        }
        let Ok(segments) = read else {
            run.samples.push(String::new());
            continue;
        };
        // One segment per eval call of the native stack; past a native stack that was
        // cut, the Python callers beyond it follow as more (docs/runtimes.md, "Deep
        // chains").
        assert!(
            evals == 0 || segments.len() <= evals || at.cut,
            "{} segments for {evals} eval calls",
            segments.len()
        );
        let named: Vec<String> = (segments.iter().flatten())
            .map(|&id| match process.name(id) {
                Some(n) => format!("{}:{}", n.function, n.line.unwrap_or(0)),
                None => {
                    assert!(
                        id == python::CHANGED || id == python::BUDGET,
                        "an id with no name"
                    );
                    "?".into()
                }
            })
            .collect();
        run.samples.push(named.join(" "));
    }
    let c = process.counts;
    assert!(c.samples_changed <= c.samples, "{c:?}");
    run
}

/// Thread `tid`'s chain as the kernel copies it at the sample instant: from its
/// thread state (through `_PyCFrame` in 3.11, 3.12), each frame's first bytes.
#[allow(clippy::type_complexity)]
fn copied_chain(
    process: &mut PythonProcess,
    mem: &impl Memory,
    tid: u32,
) -> Option<(u64, Vec<(u64, Vec<u8>)>)> {
    let start = process.chain_start(mem, tid)?;
    let mut at = mem.u64_at(start.tstate.wrapping_add(start.first));
    if let Some(second) = start.second {
        at = at.and_then(|c| mem.u64_at(c.wrapping_add(second)));
    }
    let mut frames = Vec::new();
    while let Some(f) = at.filter(|&f| f != 0 && frames.len() < 32) {
        let len = usize::try_from(start.len).ok()?;
        let Some(bytes) = mem.bytes_at(f.wrapping_add(start.skip), len, COPIED) else {
            break;
        };
        frames.push((f, bytes));
        at = mem.u64_at(f.wrapping_add(start.previous));
    }
    Some((start.tstate, frames))
}
