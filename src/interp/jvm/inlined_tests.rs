//! Compiled frames' inlined chains decoded on memory captured from a real JDK 17
//! (tests/data/java/jvm17-inline.snapshot.gz: every byte the readers read, nothing
//! else): tests/data/java/Inline.java's loop `work()`, compiled by C2 with `outer`,
//! `mixA` and `mixB` inlined, and a capture helper that writes such a snapshot.

use std::io::Read;

use super::compiled::CodeCache;
use super::inlined::{Compiled, Region};
use super::method::Layout;
use super::vmstructs::{VmStructs, VmSymbols};
use crate::format::SymbolLine;
use crate::interp::{Capture, Memory, Snapshot};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/java/jvm17-inline.snapshot.gz"
);
const WORK: &str = "void Inline.work()";

/// The snapshot, libjvm's symbols, and the `name value` (hex) header lines.
pub(super) fn fixture() -> (Snapshot, VmSymbols, std::collections::HashMap<String, u64>) {
    let gz = std::fs::read(FIXTURE).unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_string(&mut text)
        .unwrap();
    let mut syms = VmSymbols::default();
    let mut vals = std::collections::HashMap::new();
    for l in text.lines().filter_map(|l| l.strip_prefix("# ")) {
        let (k, v) = l.split_once(' ').unwrap();
        let v = u64::from_str_radix(v, 16).unwrap();
        match k.strip_prefix("sym:") {
            Some(s) => {
                syms.addrs.insert(s.to_owned(), v);
            }
            None => {
                vals.insert(k.to_owned(), v);
            }
        }
    }
    (Snapshot::from_text(&text).unwrap(), syms, vals)
}

/// What reading chains needs, read through `mem`.
pub(super) fn prepare(mem: &dyn Memory, syms: &VmSymbols, bias: u64) -> (Layout, CodeCache) {
    let vm = VmStructs::read(mem, syms, bias).unwrap();
    (
        Layout::new(&vm).unwrap(),
        CodeCache::read(mem, &vm).unwrap(),
    )
}

/// The chain at `pc` of `work()`'s code `[start, end)`, read through `mem`.
fn chain_at(
    mem: &dyn Memory,
    (layout, code): &(Layout, CodeCache),
    (start, end, pc): (u64, u64, u64),
) -> Option<Vec<SymbolLine>> {
    let mut names = None;
    let region = Region {
        start,
        end,
        name: WORK,
    };
    Compiled::default().frame(mem, code, layout, region, pc, Some(0), &mut |l| {
        names = Some(l);
        1
    })?;
    names
}

fn short(chain: &[SymbolLine]) -> Vec<String> {
    chain
        .iter()
        .map(|l| {
            let f = l.function.split('(').next().unwrap_or_default();
            let f = f.rsplit('.').next().unwrap_or_default();
            format!(
                "{f}:{}{}",
                l.line.unwrap_or(0),
                if l.inlined { "i" } else { "" }
            )
        })
        .collect()
}

#[test]
fn a_real_nmethods_inlined_chains_are_named_with_lines() {
    let (snap, syms, v) = fixture();
    let span = (v["start"], v["end"]);
    // A safepoint in mixA's loop, inlined into outer, inlined into the compiled loop
    // (Inline.java's lines), then one in mixB's.
    let p = prepare(&snap, &syms, v["bias"]);
    let a = chain_at(&snap, &p, (span.0, span.1, v["pc_a"])).unwrap();
    assert_eq!(short(&a), ["mixA:38i", "outer:33i", "work:27"]);
    assert_eq!(a[0].file.as_deref(), Some("Inline.java"));
    assert_eq!(a[0].function, "long Inline.mixA(long)");
    let b = chain_at(&snap, &p, (span.0, span.1, v["pc_b"])).unwrap();
    assert_eq!(short(&b), ["mixB:45i", "outer:34i", "work:27"]);
}

#[test]
fn a_perf_map_entry_that_is_not_the_nmethods_names_nothing() {
    let (snap, syms, v) = fixture();
    let (layout, code) = prepare(&snap, &syms, v["bias"]);
    let (start, end, pc) = (v["start"], v["end"], v["pc_a"]);
    let mut c = Compiled::default();
    let mut never = |_| -> u64 { panic!("named") };
    // Another method's name (the code was reused), another extent, not read yet in an
    // epoch that allows it, a pc outside: no id, never a wrong one.
    for (s, e, name, may_read, at) in [
        (start, end, "long Inline.outer(long)", true, pc),
        (start, end + 16, WORK, true, pc),
        (start + 16, end, WORK, true, pc),
        (start, end, WORK, false, pc),
    ] {
        let region = Region {
            start: s,
            end: e,
            name,
        };
        let got = c.frame(
            &snap,
            &code,
            &layout,
            region,
            at,
            may_read.then_some(0),
            &mut never,
        );
        assert_eq!(got, None, "{name} {s:#x}-{e:#x} {may_read}");
    }
    // A region starting anywhere else in the code: nothing.
    let mut c = Compiled::default();
    for at in (start + 1..end).step_by(7) {
        let region = Region {
            start: at,
            end,
            name: WORK,
        };
        assert_eq!(
            c.frame(&snap, &code, &layout, region, at, Some(0), &mut never),
            None
        );
    }
}

/// `jcmd PID Compiler.perfmap; PROFILE_CAPTURE_JVM=PID cargo test --lib
/// capture_inlined -- --ignored`, with PID a JVM running tests/data/java/Inline.java
/// once `work()` is compiled by C2: writes the snapshot the tests above read.
#[test]
#[ignore]
fn capture_inlined() {
    let pid: u32 = std::env::var("PROFILE_CAPTURE_JVM")
        .unwrap()
        .parse()
        .unwrap();
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let line = maps.lines().find(|l| l.ends_with("/libjvm.so")).unwrap();
    let bias = u64::from_str_radix(line.split('-').next().unwrap(), 16).unwrap();
    let image = std::fs::read(line.split_whitespace().last().unwrap()).unwrap();
    let syms = VmSymbols::from_elf(&image).unwrap();
    let raw = crate::record::sys::ProcessMemory::open(pid).unwrap();
    let map = std::fs::read_to_string(format!("/tmp/perf-{pid}.map")).unwrap();
    let p = prepare(&raw, &syms, bias);
    // The work() C2 compiled, with the calls inlined.
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    let find = |start: u64, end: u64, inner: &str| {
        (start..end).find(|&pc| {
            chain_at(&raw, &p, (start, end, pc))
                .is_some_and(|c| c.len() == 3 && c[0].function.contains(inner))
        })
    };
    let (start, end, pc_a, pc_b) = map
        .lines()
        .filter(|l| l.ends_with(WORK))
        .find_map(|l| {
            let mut f = l.split(' ');
            let start = hex(f.next()?);
            let end = start + hex(f.next()?);
            Some((
                start,
                end,
                find(start, end, "mixA")?,
                find(start, end, "mixB")?,
            ))
        })
        .unwrap();
    let mem = Capture::new(&raw);
    let p = prepare(&mem, &syms, bias);
    for pc in [pc_a, pc_b] {
        chain_at(&mem, &p, (start, end, pc)).unwrap();
        // What reading a sample ahead reads too: the pc's blob, checked again.
        let h = p.1.blob_header(&mem, pc).unwrap();
        assert!(p.1.still(&mem, &h));
    }
    let mut text = String::new();
    for (k, v) in [
        ("bias", bias),
        ("start", start),
        ("end", end),
        ("pc_a", pc_a),
        ("pc_b", pc_b),
    ] {
        text.push_str(&format!("# {k} {v:x}\n"));
    }
    let mut names: Vec<_> = syms.addrs.iter().collect();
    names.sort();
    for (k, v) in names {
        text.push_str(&format!("# sym:{k} {v:x}\n"));
    }
    text.push_str(&mem.snapshot().to_text());
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut gz, text.as_bytes()).unwrap();
    std::fs::write(FIXTURE, gz.finish().unwrap()).unwrap();
}

/// What `dump` and perf.data conversion unwind JIT code by, with no perf map: the code
/// heap's blob holding a pc, its code's extent, and whether it is an nmethod.
#[test]
fn the_code_heap_gives_a_pcs_nmethod_and_its_extent() {
    let (snap, syms, v) = fixture();
    let (_, code) = prepare(&snap, &syms, v["bias"]);
    let (start, end) = (v["start"], v["end"]);
    // (The snapshot holds the segment map's bytes read for the nmethod's start.)
    assert_eq!(code.blob_code(&snap, start), Some((start, end, true)));
    // Outside the code heaps, or in memory the snapshot did not read: nothing.
    assert_eq!(code.blob_code(&snap, 8), None);
    assert!(!code.contains(8));
}
