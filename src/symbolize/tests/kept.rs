//! Names kept between windows (`Symbolizer::keep_parsed`): the same names as read
//! afresh for every window, and what keeping saves, window after window, on a large
//! binary (this test binary; a debug build carries some 90 MiB of DWARF).

use std::time::Duration;

use super::*;

/// This thread's CPU time (its `sum_exec_runtime`), which other work on the machine
/// does not inflate.
fn thread_cpu() -> Duration {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap();
    Duration::from_nanos(text.split_whitespace().next().unwrap().parse().unwrap())
}

/// `windows` windows of `per_window` addresses each, spread over this binary's
/// `.text`, none in two windows.
fn windows(windows: usize, per_window: usize) -> (PathBuf, Vec<Vec<u64>>) {
    let exe = std::fs::read_link("/proc/self/exe").unwrap();
    let (start, end) = text_range(&exe);
    let n = (windows * per_window) as u64;
    let step = ((end - start) / n).max(1);
    let all: Vec<u64> = (0..n).map(|i| start + i * step).collect();
    // Window w takes every `windows`-th address from w: each window spans the binary.
    let out = (0..windows)
        .map(|w| all.iter().copied().skip(w).step_by(windows).collect())
        .collect();
    (exe, out)
}

#[test]
fn kept_names_are_the_names_read_afresh() {
    let (exe, windows) = windows(3, 100);
    let m = module(&exe);
    let mut kept = Symbolizer::new(SymbolizerOptions::default());
    kept.keep_parsed(1 << 30, 10);
    for addrs in &windows {
        let mut fresh = Symbolizer::new(SymbolizerOptions::default());
        let want = fresh.symbolize_module(&m, addrs);
        assert!(want.iter().filter(|n| !n.is_empty()).count() > addrs.len() / 2);
        assert_eq!(kept.symbolize_module(&m, addrs), want);
        kept.end_window();
        assert_eq!(kept.kept_usage().0, 1, "the module is kept");
    }
    assert_eq!(kept.stats().modules, 3);
    drop(m);
    kept.end_window();
    assert_eq!(kept.kept_usage(), (0, 0), "a module let go drops its names");
}

/// A module read by the recorder leaves its DWARF on disk; the sections used are
/// read from the open file (straight into the kept context's buffers when kept):
/// the names are those of the whole file read into memory, kept or not.
#[test]
fn names_read_from_the_open_file_are_those_of_the_whole_file() {
    let (exe, windows) = windows(2, 100);
    let on_disk = module(&exe);
    assert!(on_disk.image.debug_on_disk());
    let whole = ModuleSource {
        image: crate::elf::read_whole(&exe).unwrap(),
        ..module(&exe)
    };
    assert!(!whole.image.debug_on_disk());
    for budget in [1 << 30, 0] {
        let mut s = Symbolizer::new(SymbolizerOptions::default());
        s.keep_parsed(budget, 10);
        for addrs in &windows {
            let mut fresh = Symbolizer::new(SymbolizerOptions::default());
            let want = fresh.symbolize_module(&whole, addrs);
            assert!(
                want.iter()
                    .filter(|n| n.len() > 1 || n.first().is_some_and(|l| l.file.is_some()))
                    .count()
                    > addrs.len() / 2
            );
            assert_eq!(s.symbolize_module(&on_disk, addrs), want, "budget {budget}");
            s.end_window();
        }
        assert_eq!(s.kept_usage().0, usize::from(budget > 0));
    }
}

/// A live namer's budget holds whatever the binaries (issue 46): a module whose DWARF
/// is larger than the whole budget is named from its symbol table, its DWARF not read.
#[test]
fn a_module_larger_than_the_budget_is_named_from_its_symbols_only() {
    let (exe, windows) = windows(2, 50);
    let m = module(&exe);
    let mut s = Symbolizer::new(SymbolizerOptions::default());
    s.keep_parsed(1 << 20, 10);
    let mut fresh = Symbolizer::new(SymbolizerOptions::default());
    for addrs in &windows {
        let got = s.symbolize_module(&m, addrs);
        let want = fresh.symbolize_module(&m, addrs);
        let named = |n: &Vec<Vec<SymbolLine>>| n.iter().filter(|l| !l.is_empty()).count();
        assert!(named(&got) > addrs.len() / 2, "named from the symbol table");
        assert!(named(&got) >= named(&want) * 9 / 10);
        assert!(
            got.iter().flatten().all(|l| l.file.is_none() && !l.inlined),
            "no line or inlined frame: the DWARF was not read"
        );
        assert!(
            want.iter().flatten().any(|l| l.file.is_some()),
            "the binary has DWARF"
        );
        assert_eq!(s.kept_usage(), (0, 0));
    }
    assert_eq!(s.stats().dwarf_over_budget, 2);
}

/// CPU time to name 10 windows of 200 new addresses of this binary, each window
/// read afresh (as before) and with the module kept. Run with
/// `cargo test --lib naming_windows_with_and_without_kept -- --ignored --nocapture`.
#[test]
#[ignore]
fn naming_windows_with_and_without_kept() {
    let (exe, windows) = windows(10, 200);
    let m = module(&exe);
    for keep in [false, true, false, true] {
        let mut s = Symbolizer::new(SymbolizerOptions::default());
        if keep {
            s.keep_parsed(1 << 30, 10);
        }
        let mut per_window = Vec::new();
        for addrs in &windows {
            let t = thread_cpu();
            s.symbolize_module(&m, addrs);
            s.end_window();
            per_window.push(thread_cpu() - t);
        }
        let total: Duration = per_window.iter().sum();
        let ms: Vec<String> = per_window
            .iter()
            .map(|d| format!("{:.0}", d.as_secs_f64() * 1e3))
            .collect();
        let rss = std::fs::read_to_string("/proc/self/status")
            .unwrap()
            .lines()
            .find(|l| l.starts_with("VmRSS"))
            .unwrap()
            .to_owned();
        eprintln!(
            "kept={keep}: {:.0} ms CPU over 10 windows, per window [{}] ms; kept {:?}; {rss}",
            total.as_secs_f64() * 1e3,
            ms.join(" "),
            s.kept_usage()
        );
    }
}

/// A live namer's deferred module (a host agent's new program): named from its
/// symbol tables alone, without lines or inlined frames and without its DWARF read
/// or anything kept, then, once wanted, with them, as read afresh; the symbol names
/// are those DWARF gives the outermost frame.
#[test]
fn a_deferred_module_is_named_by_its_symbols_then_by_its_dwarf() {
    let (exe, windows) = windows(2, 100);
    let m = module(&exe);
    let mut s = Symbolizer::new(SymbolizerOptions::default());
    s.keep_parsed(1 << 30, 10);
    let addrs = &windows[0];
    let started = thread_cpu();
    let by_symbols = s.symbolize_module_deferring(&m, addrs, true);
    let symbols_cpu = thread_cpu() - started;
    assert_eq!((s.stats().dwarf_deferred, s.stats().dwarf_reads), (1, 0));
    let named = by_symbols.iter().filter(|n| !n.is_empty()).count();
    assert!(named > addrs.len() / 2, "{named} of {} named", addrs.len());
    assert!(
        by_symbols
            .iter()
            .flatten()
            .all(|l| l.file.is_none() && l.line.is_none() && !l.inlined),
        "no lines nor inlined frames without DWARF"
    );
    assert_eq!(s.kept_usage().0, 0, "nothing kept");
    // Named from the few symbols these addresses need, as from the whole table.
    let mut whole = Symbolizer::new(SymbolizerOptions::default());
    let one_by_one: Vec<Vec<SymbolLine>> = addrs
        .iter()
        .map(|&a| whole.symbolize_module_deferring(&m, &[a], true).remove(0))
        .collect();
    assert_eq!(one_by_one, by_symbols);
    // And as from the whole symbol table (a module over the budget is named so).
    let mut over = Symbolizer::new(SymbolizerOptions::default());
    over.keep_parsed(1, 10);
    assert_eq!(over.symbolize_module(&m, addrs), by_symbols);
    assert_eq!(over.stats().dwarf_over_budget, 1);

    let mut fresh = Symbolizer::new(SymbolizerOptions::default());
    let want = fresh.symbolize_module(&m, addrs);
    let started = thread_cpu();
    let by_dwarf = s.symbolize_module_deferring(&m, addrs, false);
    let dwarf_cpu = thread_cpu() - started;
    assert_eq!(by_dwarf, want, "DWARF read once wanted");
    assert_eq!(s.stats().dwarf_reads, 1);
    assert!(by_dwarf.iter().flatten().any(|l| l.line.is_some()));
    // The outermost frame's name is the symbol's where both name one (DWARF adds
    // the generic arguments of Rust functions).
    let same = by_symbols
        .iter()
        .zip(&by_dwarf)
        .filter(|(a, b)| !a.is_empty() && !b.is_empty())
        .filter(|(a, b)| b.last().unwrap().function.starts_with(&a[0].function))
        .count();
    assert!(same > named / 2, "{same} of {named} the same function");
    // Kept with its DWARF now, for the next window's addresses too.
    assert_eq!(
        s.symbolize_module_deferring(&m, &windows[1], true),
        fresh.symbolize_module(&m, &windows[1])
    );
    assert_eq!(s.stats().dwarf_reads, 1);
    eprintln!("symbols only: {symbols_cpu:?}; with DWARF: {dwarf_cpu:?}");
}
