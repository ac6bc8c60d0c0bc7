//! Cost of unwinding one typical user stack: the C fixture's capture inside a qsort
//! comparison callback (`cmp <- msort_with_tmp x4 <- qsort_r <- main <- libc start <-
//! _start`, 10 frames, through the executable's and glibc's `.eh_frame`), unwound with
//! a warm rule cache, a cold one (emptied before each unwind) and no cache at all.
//!
//! Needs gcc; prints the cache hit rate of the warm case once.

use std::hint::black_box;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use profile::elf::{ElfInfo, map_file};

#[path = "../tests/fixture/mod.rs"]
mod fixture;
use profile::unwind::{
    CodeModule, ModuleCfi, ModuleLookup, Regs, StackCopy, UnwindEnd, UnwindOptions, Unwinder,
};

struct Mapping {
    start: u64,
    end: u64,
    bias: u64,
    cfi: Arc<ModuleCfi>,
}

struct Modules(Vec<Mapping>);

impl ModuleLookup for Modules {
    fn lookup(&self, avma: u64) -> Option<CodeModule<'_>> {
        let m = self.0.iter().find(|m| (m.start..m.end).contains(&avma))?;
        Some(CodeModule {
            cfi: &m.cfi,
            bias: m.bias,
        })
    }
}

struct Capture {
    regs: Regs,
    stack: Vec<u8>,
    modules: Modules,
}

fn capture() -> Capture {
    let dir = tempfile::tempdir().unwrap();
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/unwind/capture.c");
    let exe = dir.path().join("capture");
    fixture::gcc(
        Path::new(src),
        &exe,
        &["-O2", "-fomit-frame-pointer", "-pthread", "-w"],
    );
    let ok = Command::new(&exe)
        .arg("qsort")
        .arg(dir.path())
        .status()
        .unwrap()
        .success();
    assert!(ok, "fixture failed");
    let read = |name: &str| std::fs::read(dir.path().join(name)).unwrap();
    let regs = String::from_utf8(read("regs.txt")).unwrap();
    let v: Vec<u64> = regs
        .split_whitespace()
        .map(|w| u64::from_str_radix(w, 16).unwrap())
        .collect();
    let maps = String::from_utf8(read("maps.txt")).unwrap();
    let mut mappings = Vec::new();
    for m in fixture::parse_maps(&maps) {
        if !m.executable() || !m.path.starts_with('/') {
            continue;
        }
        let (start, offset) = (m.start, m.offset);
        let image = map_file(Path::new(&m.path)).unwrap();
        let info = ElfInfo::parse((*image).as_ref()).unwrap();
        mappings.push(Mapping {
            start,
            end: m.end,
            bias: info.bias_for_mapping(start, offset).unwrap(),
            cfi: Arc::new(ModuleCfi::new(image)),
        });
    }
    Capture {
        regs: Regs {
            ip: v[0],
            sp: v[1],
            bp: v[2],
        },
        stack: read("stack.bin"),
        modules: Modules(mappings),
    }
}

fn bench(c: &mut Criterion) {
    let cap = capture();
    let stack = StackCopy {
        sp: cap.regs.sp,
        bytes: &cap.stack,
    };
    let mut frames = Vec::with_capacity(512);
    let mut unwinder = Unwinder::new();
    let end = unwinder.unwind(&cap.regs, &stack, &cap.modules, &mut frames);
    assert_eq!(end, UnwindEnd::Complete);
    eprintln!("typical stack: {} frames", frames.len());

    let mut group = c.benchmark_group("unwind");
    group.bench_function("warm_cache", |b| {
        b.iter(|| {
            frames.clear();
            unwinder.unwind(&cap.regs, &stack, &cap.modules, &mut frames)
        })
    });
    let stats = unwinder.stats();
    eprintln!(
        "warm cache: {} hits, {} misses ({:.4}% hits)",
        stats.cache_hits,
        stats.cache_misses,
        100.0 * stats.cache_hits as f64 / (stats.cache_hits + stats.cache_misses) as f64
    );
    // Cold: every rule is looked up in the tables again (the cache is emptied, outside
    // the timed region, before each unwind).
    group.bench_function("cold_cache", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                unwinder.clear_cache();
                frames.clear();
                let start = Instant::now();
                black_box(unwinder.unwind(&cap.regs, &stack, &cap.modules, &mut frames));
                total += start.elapsed();
            }
            total
        })
    });
    let mut uncached = Unwinder::with_options({
        let mut o = UnwindOptions::default();
        o.cache_slots = 0;
        o
    });
    group.bench_function("no_cache", |b| {
        b.iter(|| {
            frames.clear();
            uncached.unwind(&cap.regs, &stack, &cap.modules, &mut frames)
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
