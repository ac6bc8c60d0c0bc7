//! The seeds of the `python` and `hotspot` targets, made from the snapshots of real
//! processes in tests/data (written to fuzz/seeds/ by `PROFILE_BLESS=1 cargo test
//! --test it fuzz_regressions`, checked to be current otherwise): each a sample whose
//! stack copy and registers hold what the readers look for (the eval loop's
//! instruction pointer, its `_PyCFrame`; an interpreter frame's `Method*` and bytecode
//! pointer, a pc in an nmethod), so that mutations start from inputs that are named
//! all the way.

use profile::interp::Memory;
use profile::interp::Snapshot;
use profile::interp::jvm::method::{Layout, read_method};
use profile::interp::jvm::vmstructs::VmStructs;
use profile::interp::python::{self, PythonModule, code, walk::RawFrame};

use super::hotspot::{INTERPRETER, base};
use super::python::put_regions;

/// Stack bytes per eval call's C frame in the seeds.
const STRIDE: u64 = 0x100;

/// The `python` seeds of one fixture (tests/data/python/snap-3.*.txt): its name's
/// stem, then the samples' modes (see fuzz/src/python.rs).
pub fn python_seeds(text: &str) -> Option<Vec<(String, Vec<u8>)>> {
    let header = text.lines().find_map(|l| l.strip_prefix("# runtime "))?;
    // `RUNTIME code_type CODE_TYPE tid TID version 3.MINOR`
    let f: Vec<&str> = header.split(' ').collect();
    let hex = |s: &str| u64::from_str_radix(s, 16).ok();
    let (runtime, code_type) = (hex(f.first()?)?, hex(f.get(2)?)?);
    let tid: u32 = f.get(4)?.parse().ok()?;
    let minor: u8 = f.get(6)?.strip_prefix("3.")?.parse().ok()?;
    let snap = Snapshot::from_text(text)?;
    let module = PythonModule {
        eval: Vec::new(),
        runtime,
        code_type,
        py_version: None,
        name_version: Some((3, minor)),
    };
    let rt = python::runtime(&snap, &module, 0, None).ok()?;
    let tstate = *rt
        .thread_states(&snap, &mut profile::interp::budget::Walk::new(4096))
        .get(&tid)?;
    let frame = rt.current_frame(&snap, tstate)?;
    let (segments, shims) = rt.segments(&snap, frame, 0).ok()?;
    let flat: Vec<RawFrame> = segments.iter().flatten().copied().collect();
    let leaf = *flat.first()?;
    let ip = |f: &RawFrame| {
        let start = code::bytecode_start(&snap, &rt.layout, f.code)?;
        Some(start + f.offset.unwrap_or(0) + 2)
    };
    // The stack holds the C frames' objects the readers look for (the `_PyCFrame`,
    // 3.12+'s shim frames) as the snapshot has them.
    let mut on_stack = shims.clone();
    if rt.layout.cframe_current_frame.is_some() {
        on_stack.push(snap.u64_at(tstate + rt.layout.tstate_frame)?);
    }
    let low = on_stack.iter().min().copied().unwrap_or(0x7ffc_0000_1000);
    let high = on_stack.iter().max().copied().unwrap_or(low);
    let sp = (low & !7) - 0x40;
    let evals = segments.len();
    let len = (high - sp + 0x100).max(STRIDE * evals as u64);
    let stride = (len / evals.max(1) as u64 + 7) & !7;
    let len = (stride * evals as u64).min(0xfff8);
    let mut stack: Vec<u8> = (0..len)
        .map(|i| {
            let mut b = [0u8];
            snap.read(sp + i, &mut b);
            b[0]
        })
        .collect();
    // 3.8-3.10: each eval call's C frame holds its frame object's code and
    // instruction pointer (one frame per call).
    if on_stack.is_empty() {
        for (k, f) in flat.iter().enumerate().take(evals) {
            let at = k * stride as usize + 0x20;
            for (i, w) in [ip(f)?, f.code, f.frame].iter().enumerate() {
                if let Some(s) = stack.get_mut(at + 8 * i..at + 8 * i + 8) {
                    s.copy_from_slice(&w.to_le_bytes());
                }
            }
        }
    }
    let regs = [ip(&leaf)?, leaf.frame, leaf.code, 0, 0, 0];
    let mut seeds = Vec::new();
    for (name, modes) in [("read", [0u8, 2, 0]), ("copied", [3, 4, 1])] {
        let mut d = vec![minor - 8, modes.len() as u8 - 1];
        d.extend_from_slice(&tid.to_le_bytes());
        for v in [runtime, code_type, sp] {
            d.extend_from_slice(&v.to_le_bytes());
        }
        d.extend_from_slice(&(stack.len() as u16).to_le_bytes());
        for r in regs {
            d.extend_from_slice(&r.to_le_bytes());
        }
        for m in modes {
            d.extend_from_slice(&[m, evals as u8, 2, 0]);
            d.extend_from_slice(&(stride as u16).to_le_bytes());
            d.extend_from_slice(&0u16.to_le_bytes());
        }
        d.extend_from_slice(&stack);
        put_regions(&mut d, &snap);
        seeds.push((format!("3.{minor}-{name}"), d));
    }
    Some(seeds)
}

/// One `hotspot` input: snapshot `which`, `flags`, the frames (return address?, pc,
/// frame pointer) over `stack` at `sp`, `r13`, the perf map entry.
#[allow(clippy::too_many_arguments)]
fn hotspot_input(
    which: u8,
    flags: u8,
    frames: &[(bool, u64, u64)],
    sp: u64,
    stack: &[u8],
    r13: u64,
    entry: (u64, u64),
) -> Vec<u8> {
    let mut d = vec![which, flags, 2, frames.len() as u8];
    d.extend_from_slice(&sp.to_le_bytes());
    d.extend_from_slice(&(stack.len() as u16).to_le_bytes());
    for v in [r13, entry.0, entry.1] {
        d.extend_from_slice(&v.to_le_bytes());
    }
    for &(ret, pc, fp) in frames {
        d.push(u8::from(ret));
        d.extend_from_slice(&pc.to_le_bytes());
        d.extend_from_slice(&fp.to_le_bytes());
    }
    d.extend_from_slice(stack);
    d
}

/// The `hotspot` seeds: `long Huge.huge(long)` interpreted (the leaf, its caller),
/// warmed or not; `void Inline.work()`'s nmethod at a pc where methods are inlined,
/// with and without a perf map entry.
pub fn hotspot_seeds() -> Option<Vec<(String, Vec<u8>)>> {
    let mut seeds = Vec::new();
    let huge = base(0);
    let vm = VmStructs::read(&huge.snap, &huge.syms, huge.bias).ok()?;
    let method = *huge.values.get("method")?;
    let m = read_method(&huge.snap, &Layout::new(&vm).ok()?, method)?;
    let sp = 0x7ffd_0000_0000u64;
    let mut stack = vec![0u8; 0x300];
    // Two interpreter frames, fp at sp + 0x100 and sp + 0x200: the `Method*` 3
    // words below each, the bytecode pointer 8 words below.
    let mut put = |at: u64, v: u64| {
        let i = (at - sp) as usize;
        stack[i..i + 8].copy_from_slice(&v.to_le_bytes());
    };
    let (fp1, fp2) = (sp + 0x100, sp + 0x200);
    put(fp1 - 24, method);
    put(fp1 - 64, m.code_start + 4);
    put(fp1, fp2);
    put(fp1 + 8, INTERPRETER + 0x80);
    put(fp1 - 8, fp2 + 0x40);
    put(fp1 - 56, fp2 + 0x20);
    put(fp2 - 24, method);
    put(fp2 - 64, m.code_start + m.code_size - 1);
    let frames = [
        (false, INTERPRETER + 0x40, fp1),
        (true, INTERPRETER + 0x80, fp2),
    ];
    let r13 = m.code_start + 4;
    for (name, flags) in [("interpreted", 0u8), ("interpreted-warm", 4 | 8)] {
        let d = hotspot_input(0, flags, &frames, sp, &stack, r13, (0, 0));
        seeds.push((name.to_owned(), d));
    }
    let inline = base(1);
    let v = |k: &str| inline.values.get(k).copied();
    let entry = (v("start")?, v("end")?);
    for (name, flags, pc) in [
        ("compiled", 2u8, v("pc_a")?),
        ("compiled-b", 2 | 8, v("pc_b")?),
        ("compiled-no-entry", 1, v("pc_b")?),
    ] {
        let frames = [(false, pc, 0), (true, pc, 0)];
        let d = hotspot_input(1, flags, &frames, sp, &[0; 64], 0, entry);
        seeds.push((name.to_owned(), d));
    }
    Some(seeds)
}
