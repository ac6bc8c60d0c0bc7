//! How long the end-of-recording symbolization of one big module takes: ~20,000 unique
//! addresses spread evenly over the `.text` of a large binary with debug info, context
//! setup included (a fresh [`Symbolizer`] per iteration); and one address alone, which
//! costs little more than the setup since units are parsed lazily. The binary is
//! `$PROFILE_BENCH_BINARY`, or this bench executable itself. Set
//! `PROFILE_BENCH_ADDRS=FILE` to also write the addresses, one hex SVMA a line, for
//! `addr2line -f -i -C -e BIN < FILE` to compare with.
//!
//! Two more cover what every C recording pays at its end: a few addresses of the
//! system libc, named through Debian's libc6-dbg file with its compressed DWARF (skipped
//! when that file is absent), and parsing a snapshot of `/proc/kallsyms`.

use std::path::PathBuf;
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use object::{Object, ObjectSection};
use profile::elf::read_module;
use profile::symbolize::{ModuleSource, Symbolizer, SymbolizerOptions};

const ADDRESSES: u64 = 20_000;

fn target() -> PathBuf {
    std::env::var_os("PROFILE_BENCH_BINARY")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::current_exe().expect("own path"))
}

fn addresses(bytes: &[u8]) -> Vec<u64> {
    let file = object::File::parse(bytes).expect("an ELF file");
    let text = file.section_by_name(".text").expect(".text");
    let step = (text.size() / ADDRESSES).max(1);
    (0..ADDRESSES)
        .map(|i| text.address() + i * step + (i % 13))
        .filter(|&a| a < text.address() + text.size())
        .collect()
}

fn bench(c: &mut Criterion) {
    let path = target();
    let image = read_module(&path).expect("bench binary maps");
    let addrs = addresses((*image).as_ref());
    if let Some(out) = std::env::var_os("PROFILE_BENCH_ADDRS") {
        let text: String = addrs.iter().map(|a| format!("{a:#x}\n")).collect();
        std::fs::write(out, text).expect("write addresses");
    }
    let module = ModuleSource {
        image,
        path: path.display().to_string(),
        root: None,
    };

    let started = Instant::now();
    let mut s = Symbolizer::new(SymbolizerOptions::default());
    let out = s.symbolize_module(&module, &addrs);
    let elapsed = started.elapsed();
    let frames: usize = out.iter().map(Vec::len).sum();
    eprintln!(
        "{}: {} addresses, {} frames, {:?} first run ({:?})",
        path.display(),
        addrs.len(),
        frames,
        elapsed,
        s.stats()
    );

    let mut group = c.benchmark_group("symbolize");
    group.sample_size(10);
    group.bench_function("module_20k_addresses", |b| {
        b.iter(|| {
            let mut s = Symbolizer::new(SymbolizerOptions::default());
            s.symbolize_module(&module, &addrs)
        })
    });
    // One address: shows that the context parses only the unit it needs.
    let one = [addrs[addrs.len() / 2]];
    group.bench_function("module_1_address", |b| {
        b.iter(|| {
            let mut s = Symbolizer::new(SymbolizerOptions::default());
            s.symbolize_module(&module, &one)
        })
    });
    group.finish();
    bench_libc(c);
    bench_kallsyms(c);
}

fn bench_libc(c: &mut Criterion) {
    let path = PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6");
    let Ok(image) = read_module(&path) else {
        eprintln!("no {}: libc bench skipped", path.display());
        return;
    };
    let mut addrs = addresses((*image).as_ref());
    // A C program's samples land in a few dozen libc functions.
    let step = addrs.len() / 30;
    addrs = addrs.into_iter().step_by(step.max(1)).collect();
    let module = ModuleSource {
        image,
        path: path.display().to_string(),
        root: None,
    };
    let mut s = Symbolizer::new(SymbolizerOptions::default());
    s.symbolize_module(&module, &addrs);
    if s.stats().debug_files.is_empty() {
        eprintln!("libc has no separate debug file here: libc bench skipped");
        return;
    }
    let mut group = c.benchmark_group("symbolize");
    group.sample_size(10);
    group.bench_function("libc_debug_30_addresses", |b| {
        b.iter(|| {
            let mut s = Symbolizer::new(SymbolizerOptions::default());
            s.symbolize_module(&module, &addrs)
        })
    });
    group.finish();
}

fn bench_kallsyms(c: &mut Criterion) {
    let Ok(text) = std::fs::read_to_string("/proc/kallsyms") else {
        return;
    };
    let mut group = c.benchmark_group("symbolize");
    group.sample_size(20);
    group.bench_function("kallsyms_parse", |b| {
        b.iter(|| profile::symbolize::kernel::KernelSymbols::parse(&text, "/proc/kallsyms"))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
