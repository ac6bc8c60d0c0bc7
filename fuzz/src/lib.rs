//! What each fuzz target runs, shared with the regression tests in the main crate
//! (`tests/it/fuzz_regressions.rs` includes this file), so every crash the fuzzers
//! found is replayed by `cargo test`. Each function takes arbitrary bytes and must
//! neither panic nor hang nor exhaust memory on any of them.
//!
//! - [`recording`]: recording bytes -> reader -> profile model -> every output (the
//!   timeline too) and diff.
//!   Chunk checksums are recomputed first so that mutations reach the decoders.
//! - [`unwind`]: an ELF image (its CFI) + registers + stack bytes -> the unwinder.
//! - [`symbolize`]: an ELF image (symbol tables, DWARF) -> the symbolizer.
//! - [`parsers`]: the first byte picks perf map, kallsyms or folded text; the rest is
//!   the text.
//! - [`perfdata`]: perf.data bytes -> the perf.data reader (no binary opened) -> the
//!   profile model -> folded stacks.
//! - [`jvm`]: what a hostile JVM controls: its attach reply, and its perf map read as a
//!   stream into a map with a budget (merged twice, as snapshots come).
//! - [`python`]: a CPython process's memory (a snapshot of a real one, 3.8 to 3.13,
//!   in the input) with a sample's stack copy and registers -> `PythonProcess`, as
//!   the recorder reads each sample: runtime and version, thread states, the chain
//!   checked against the sample, code objects, names, line tables; several samples in
//!   a row, each read one of five ways (see fuzz/src/python.rs for the input).
//! - [`hotspot`]: a HotSpot JVM's memory (a JDK 17 snapshot built in, patched by the
//!   input) with a sample's frames and stack copy -> `JavaFrames`, as the recorder
//!   reads it: VMStructs, the interpreter and code heaps, interpreted frames, compiled
//!   frames and the methods inlined in them, every id named (see fuzz/src/hotspot.rs).
//! - [`v8`]: a Node process's memory (a heap built in, patched by the input) with a
//!   sample's frames and stack copy -> `V8Frames`, as the recorder reads it: frame
//!   slots, JSFunction to name and script, the frameless builtin's caller at the leaf
//!   (see fuzz/src/v8.rs); seeds from [`v8_seeds`].
//! - [`ruby`]: a CRuby 3.1 process's memory (forged, patched by the input) with a
//!   sample's registers -> `RubyFrames`, as the recorder reads it: thread list,
//!   control frames, instruction sequences, strings, lines, method entries, the
//!   symbol table, the `rb_vm_exec` frames replaced (see fuzz/src/ruby.rs); seeds from
//!   [`ruby_seeds`].
//! - [`gopclntab`]: a Go module's `.gopclntab` -> `GoTable`, as the namer and the
//!   unwinder read it: names, files, lines and frame sizes at pcs across its text
//!   (see fuzz/src/gopclntab.rs); seeds from [`gopclntab_seeds`] and, where `go` is
//!   installed, a real table (fuzz/make-seeds.sh).
//!
//! The seeds of `python` and `hotspot` are made from the real snapshots by
//! [`seeds`], checked in under fuzz/seeds/.

use std::io::sink;

mod gopclntab;
mod hotspot;
mod python;
mod ruby;
pub mod seeds;
mod v8;
pub use gopclntab::{gopclntab, gopclntab_run, gopclntab_seeds};
pub use hotspot::{hotspot, hotspot_run};
pub use python::{python, python_run};
pub use ruby::{ruby, ruby_run, ruby_seeds};
pub use v8::{v8, v8_run, v8_seeds};

use profile::diff::{CompareOptions, Run, compare};
use profile::elf::{ElfInfo, image_from_vec};
use profile::format::Recording;
use profile::output;
use profile::profile::{Profile, ProfileOptions};
use profile::symbolize::{ModuleSource, Symbolizer, SymbolizerOptions};
use profile::unwind::{CodeModule, ModuleCfi, ModuleLookup, Regs, StackCopy, Unwinder};

/// Bytes of the file header and of a chunk header (see docs/recording-format.md).
const HEADER_LEN: usize = 16;
const CHUNK_HEADER_LEN: usize = 12;

/// Rewrites every whole chunk's CRC-32 so that the checksum does not stop a mutation
/// before the decoder sees it.
pub fn fix_checksums(data: &mut [u8]) {
    let mut pos = HEADER_LEN;
    while let Some(header) = data.get(pos..pos + CHUNK_HEADER_LEN) {
        let len = u32::from_le_bytes([header[4], header[5], header[6], header[7]]) as usize;
        let start = pos + CHUNK_HEADER_LEN;
        let Some(end) = start.checked_add(len).filter(|&e| e <= data.len()) else {
            break;
        };
        let crc = crc32(&data[start..end]);
        data[pos + 8..pos + 12].copy_from_slice(&crc.to_le_bytes());
        pos = end;
    }
}

/// CRC-32 (IEEE), bitwise: the fuzz crate needs no dependency for it.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

/// Recording bytes through the reader, the model and every output.
pub fn recording(data: &[u8]) {
    let mut data = data.to_vec();
    fix_checksums(&mut data);
    let Ok(rec) = Recording::from_bytes(&data, "fuzz") else {
        return;
    };
    for lines in [false, true] {
        let mut opts = ProfileOptions::default();
        opts.lines = lines;
        let p = Profile::from_recording(&rec, opts);
        for per_thread in [false, true] {
            let _ = output::folded::write(
                &p,
                output::folded::FoldedOptions::per_thread(per_thread),
                &mut sink(),
            );
        }
        let _ = output::flamegraph::write(
            &p,
            &output::flamegraph::FlameGraphOptions::default(),
            &mut sink(),
        );
        let _ = output::top::write(&p, 20, &mut sink());
        let _ = output::json::write(&p, "", Some(20), &mut sink());
        let _ = output::pprof::encode(&p);
        let _ = output::speedscope::write(&p, &mut sink());
        let _ = output::timeline::write(
            &p,
            &output::timeline::TimelineOptions::default(),
            &mut sink(),
        );
        let run = Run::from_profile(&p, "fuzz".into());
        let _ = compare(
            std::slice::from_ref(&run),
            std::slice::from_ref(&run),
            CompareOptions::default(),
        );
    }
}

/// Every address maps to the one module, at bias 0.
struct OneModule<'a>(&'a ModuleCfi);

impl ModuleLookup for OneModule<'_> {
    fn lookup(&self, _avma: u64) -> Option<CodeModule<'_>> {
        Some(CodeModule {
            cfi: self.0,
            bias: 0,
        })
    }
}

fn u64_at(data: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    if let Some(s) = data.get(at..at + 8) {
        b.copy_from_slice(s);
    }
    u64::from_le_bytes(b)
}

/// Input: `[u32 elf_len][elf][ip sp bp: 3 x u64][stack bytes]`.
pub fn unwind(data: &[u8]) {
    let Some(len) = data.get(..4) else { return };
    let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
    let Some(elf) = data.get(4..4usize.saturating_add(len)) else {
        return;
    };
    let rest = &data[4 + len..];
    let regs = Regs {
        ip: u64_at(rest, 0),
        sp: u64_at(rest, 8),
        bp: u64_at(rest, 16),
    };
    let stack = StackCopy {
        sp: regs.sp,
        bytes: rest.get(24..).unwrap_or(&[]),
    };
    let cfi = ModuleCfi::new(image_from_vec(elf.to_vec()));
    let mut unwinder = Unwinder::new();
    let mut out = Vec::new();
    let _ = unwinder.unwind(&regs, &stack, &OneModule(&cfi), &mut out);
    // The cached rules must give the same result.
    let mut again = Vec::new();
    let _ = unwinder.unwind(&regs, &stack, &OneModule(&cfi), &mut again);
    assert_eq!(out, again, "a cached unwind differs");
}

/// An ELF image named at addresses spread over its code and around it.
pub fn symbolize(data: &[u8]) {
    let mut addrs = vec![0, 1, u64::MAX, u64::MAX - 1];
    if let Ok(info) = ElfInfo::parse(data) {
        for s in info.segments.iter().filter(|s| s.executable).take(4) {
            let step = (s.mem_size / 16).max(1);
            for k in 0..18 {
                addrs.push(s.svma.wrapping_add(step.wrapping_mul(k)));
            }
        }
    }
    let module = ModuleSource {
        image: image_from_vec(data.to_vec()),
        path: "/nonexistent/fuzz".into(),
        root: None,
    };
    let mut sym = Symbolizer::new(SymbolizerOptions::default());
    let names = sym.symbolize_module(&module, &addrs);
    assert_eq!(names.len(), addrs.len());
}

/// `data[0] % 3`: 0 perf map, 1 kallsyms, 2 folded stacks.
pub fn parsers(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    match which % 3 {
        0 => {
            let map = profile::symbolize::perfmap::PerfMap::parse(&text);
            for a in [0, 1, 0x1000, 0x7fff_0000_0000, u64::MAX] {
                let _ = map.lookup(a);
            }
        }
        1 => {
            if let Ok(k) = profile::symbolize::kernel::KernelSymbols::parse(&text, "fuzz") {
                for a in [0, 1, 0xffff_ffff_8100_0000, u64::MAX] {
                    let _ = k.lookup(a);
                }
            }
        }
        _ => {
            if let Ok(run) = Run::from_folded(&text, "fuzz".into())
                && run.samples > 0
            {
                let _ = compare(
                    std::slice::from_ref(&run),
                    std::slice::from_ref(&run),
                    CompareOptions::default(),
                );
            }
        }
    }
}

/// perf.data bytes through the perf.data reader (binaries are not opened: the
/// fuzzer's paths name nothing), the profile model and the folded output.
pub fn perfdata(data: &[u8]) {
    let Ok(rec) = profile::perfdata::decode(data, "fuzz") else {
        return;
    };
    let profile = Profile::from_recording(&rec, ProfileOptions::default());
    let _ = output::folded::write(
        &profile,
        output::folded::FoldedOptions::default(),
        &mut sink(),
    );
}

/// `data[0] % 2`: 0 a JVM's attach reply; 1 a perf map, stream-merged as two
/// snapshots (the whole input, then its second half) within a budget taken from
/// `data[1..3]`; the map never weighs more than the budget.
pub fn jvm(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    if which % 2 == 0 {
        #[cfg(target_os = "linux")]
        if let Err(e) = profile::record::parse_jvm_reply(rest) {
            let shown = e.to_string();
            assert!(!shown.chars().any(|c| c.is_control()), "{shown:?}");
        }
        return;
    }
    use profile::symbolize::perfmap::{ENTRY_COST, PerfMap};
    let budget = match rest {
        [a, b, ..] => ENTRY_COST * (1 + usize::from(u16::from_le_bytes([*a, *b]) % 512)),
        _ => ENTRY_COST,
    };
    let text = rest.get(2..).unwrap_or_default();
    let mut map = PerfMap::default();
    for snapshot in [text, &text[text.len() / 2..]] {
        let merged = map
            .merge_from(&mut std::io::Cursor::new(snapshot), budget)
            .expect("reading memory cannot fail");
        assert!(map.weight() <= budget, "{} > {budget}", map.weight());
        assert!(map.len() <= 2 * budget / ENTRY_COST + 1);
        let _ = merged;
        for a in [0, 1, 0x1000, 0x7fff_0000_0000, u64::MAX] {
            if let Some((start, end, name)) = map.region(a) {
                assert!(start <= a && a < end && !name.is_empty());
            }
        }
    }
}
