//! The C fixture (`inline.c`, gcc -O2 -g): inlined helper, static function, and the
//! whole of `.text` compared with binutils `addr2line -f -i -C`; the same comparison for
//! the C++ fixture (`shapes.cpp`, g++ -O2 -g), whose names must come out demangled.

use super::*;

fn base(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Our frames in binutils' shape, for comparison.
fn as_binutils(frames: &[SymbolLine]) -> Vec<(String, Option<String>, Option<u32>)> {
    frames
        .iter()
        .map(|f| {
            (
                f.function.clone(),
                f.file.as_deref().map(|p| base(p).to_owned()),
                f.line,
            )
        })
        .collect()
}

fn binutils_basenames(chain: Vec<Binutils>) -> Vec<Binutils> {
    chain
        .into_iter()
        .map(|(f, file, line)| (f, file.map(|p| base(&p).to_owned()), line))
        .collect()
}

#[test]
fn inlined_helper_is_its_own_frame() {
    let dir = tempfile::tempdir().unwrap();
    let bin = build_c(dir.path(), "inline", &[]);
    let (start, size) = symbol(&bin, "caller");
    let addrs: Vec<u64> = (start..start + size).collect();
    let mut s = Symbolizer::new(SymbolizerOptions::default());
    let ours = s.symbolize_module(&module(&bin), &addrs);
    let theirs = binutils_addr2line(&bin, &addrs);

    let mut inlined_seen = 0;
    for ((addr, frames), chain) in addrs.iter().zip(&ours).zip(theirs) {
        assert_eq!(
            as_binutils(frames),
            binutils_basenames(chain),
            "at {addr:#x}"
        );
        let outer = frames.last().unwrap();
        assert_eq!(outer.function, "caller");
        assert!(!outer.inlined);
        if frames.len() == 2 {
            inlined_seen += 1;
            let inner = &frames[0];
            assert_eq!(inner.function, "helper");
            assert!(inner.inlined);
            assert!(inner.file.as_deref().unwrap().ends_with("inline.c"));
            // The inner frame's line is inside helper (lines 11-17), the outer one is
            // the call site in caller (line 21).
            assert!((11..=17).contains(&inner.line.unwrap()), "{frames:?}");
            assert_eq!(outer.line, Some(21), "{frames:?}");
        }
    }
    assert!(inlined_seen > 4, "helper is inlined into caller");
}

#[test]
fn static_function_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let bin = build_c(dir.path(), "inline", &[]);
    let (start, size) = symbol(&bin, "static_function");
    let mut s = Symbolizer::new(SymbolizerOptions::default());
    let out = s.symbolize_module(&module(&bin), &[start, start + size / 2, start + size - 1]);
    for frames in out {
        assert_eq!(frames.last().unwrap().function, "static_function");
        assert_eq!(frames.len(), 1);
    }
}

/// Compares the addresses of `.text` at the given strides with binutils; returns our
/// frames for the addresses binutils had a line for.
fn compare_text(bin: &Path, strides: &[usize]) -> Vec<Vec<SymbolLine>> {
    let (start, end) = text_range(bin);
    let addrs: Vec<u64> = strides
        .iter()
        .flat_map(|&step| (start..end).step_by(step))
        .collect();
    let mut s = Symbolizer::new(SymbolizerOptions::default());
    compare_with_binutils(&mut s, bin, bin, &addrs, true)
}

/// Names `addrs` of `bin` with `s` and compares them with binutils reading
/// `debug_bin`; returns our frames for the addresses binutils had a line for. With
/// `files` false, file names are not compared: binutils 2.40 gives some DWARF 5 lines
/// of an `#include`d file the unit's own file (libc's `__getspent_r` at
/// getXXent_r.c:159 comes out as getspent_r.c:159; llvm-symbolizer agrees with us).
pub(super) fn compare_with_binutils(
    s: &mut Symbolizer,
    bin: &Path,
    debug_bin: &Path,
    addrs: &[u64],
    files: bool,
) -> Vec<Vec<SymbolLine>> {
    let ours = s.symbolize_module(&module(bin), addrs);
    let theirs = binutils_addr2line(debug_bin, addrs);
    let mut compared = Vec::new();
    for ((addr, frames), chain) in addrs.iter().zip(ours).zip(theirs) {
        if chain.iter().all(|f| f.0 == "??") {
            continue; // binutils knows nothing here (crt code without DWARF)
        }
        if chain.iter().all(|f| f.2.is_none()) {
            // No line: binutils named it from the nearest symbol (and took the file
            // from an STT_FILE symbol). Where we name it, the name must agree; we may
            // name less, as padding past a symbol's size belongs to no function.
            if let Some(ours) = frames.last() {
                assert_eq!(ours.function, chain[0].0, "{addr:#x}");
            }
            continue;
        }
        let mut ours = as_binutils(&frames);
        let mut theirs = binutils_basenames(chain);
        if !files {
            ours.iter_mut().for_each(|f| f.1 = None);
            theirs.iter_mut().for_each(|f| f.1 = None);
        }
        // cpp_demangle cannot read a few names libiberty can; we show DW_AT_name
        // (`__fill_a1<int*, int>`) there, which is part of binutils' name.
        for (o, t) in ours.iter_mut().zip(&theirs) {
            if o.0 != t.0 && !o.0.contains('(') && t.0.contains(&o.0) {
                o.0.clone_from(&t.0);
            }
        }
        assert_eq!(ours, theirs, "at {addr:#x}");
        compared.push(frames);
    }
    compared
}

#[test]
fn whole_text_matches_binutils() {
    let dir = tempfile::tempdir().unwrap();
    let bin = build_c(dir.path(), "inline", &[]);
    let compared = compare_text(&bin, &[16, 7]);
    assert!(
        compared.len() > 50,
        "only {} addresses compared",
        compared.len()
    );
}

/// With compressed DWARF (`-gz`), the units no address falls in are skipped, and the
/// names of the others come out as binutils gives them.
#[test]
fn compressed_debug_info_skips_units_and_names_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other.c");
    std::fs::write(
        &other,
        "int other_a(int x) { return x * 3 + 1; }\n\
         int other_b(int x) { return other_a(x) ^ 5; }\n",
    )
    .unwrap();
    let bin = build_c(
        dir.path(),
        "multi",
        &["-gz=zlib", "-fno-inline", other.to_str().unwrap()],
    );
    let (start, size) = symbol(&bin, "caller");
    let addrs: Vec<u64> = (start..start + size).collect();
    let mut s = Symbolizer::new(SymbolizerOptions::default());
    let compared = compare_with_binutils(&mut s, &bin, &bin, &addrs, true);
    assert!(
        compared.len() as u64 > size / 2,
        "{} compared",
        compared.len()
    );
    assert!(
        compared
            .iter()
            .all(|f| f.last().unwrap().function == "caller")
    );
    assert_eq!(
        s.stats().units_skipped,
        1,
        "other.c's unit: {:?}",
        s.stats()
    );

    // Both units' addresses at once: nothing skipped, both named.
    let (a, _) = symbol(&bin, "other_a");
    let mut s = Symbolizer::new(SymbolizerOptions::default());
    let out = s.symbolize_module(&module(&bin), &[start, a]);
    assert_eq!(s.stats().units_skipped, 0);
    assert_eq!(out[1].last().unwrap().function, "other_a");
    assert!(out[1][0].file.as_deref().unwrap().ends_with("other.c"));
}

/// Compressed DWARF kept between windows: inflated once into the kept context's
/// buffers, the same names as read afresh, window after window.
#[test]
fn compressed_debug_info_kept_names_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let bin = build_c(dir.path(), "inline", &["-gz=zlib"]);
    let (start, size) = symbol(&bin, "main");
    let m = module(&bin);
    let mut kept = Symbolizer::new(SymbolizerOptions::default());
    kept.keep_parsed(1 << 30, 10);
    for half in [start..start + size / 2, start + size / 2..start + size] {
        let addrs: Vec<u64> = half.collect();
        let want = Symbolizer::new(SymbolizerOptions::default()).symbolize_module(&m, &addrs);
        assert!(want.iter().any(|n| n.iter().any(|l| l.file.is_some())));
        assert_eq!(kept.symbolize_module(&m, &addrs), want);
        kept.end_window();
        assert_eq!(kept.kept_usage().0, 1);
    }
}

#[test]
fn cpp_names_are_demangled_and_match_binutils() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("shapes");
    let src = fixture_source("shapes.cpp");
    run(
        "g++",
        &[
            "-O2".as_ref(),
            "-g".as_ref(),
            "-o".as_ref(),
            bin.as_os_str(),
            src.as_os_str(),
        ],
    );
    let compared = compare_text(&bin, &[3]);
    let names: std::collections::BTreeSet<&str> = compared
        .iter()
        .flatten()
        .map(|f| f.function.as_str())
        .collect();
    assert!(
        names.contains("int shapes::total<int>(std::vector<int, std::allocator<int> > const&)"),
        "{names:?}"
    );
    let inlined_add = compared
        .iter()
        .flatten()
        .find(|f| f.function.contains("Accumulator<double>::add"));
    assert!(inlined_add.is_some_and(|f| f.inlined), "{names:?}");
    assert!(names.iter().all(|n| !n.starts_with("_Z")), "{names:?}");
}
