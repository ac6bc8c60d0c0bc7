//! The pclntab reader on forged tables (every format's header, lines and files, and
//! every truncation and byte flipped: errors, never a panic) and on real Go binaries
//! built stripped by each Go toolchain found (`tests/data/go/twowork.go`): the
//! functions the symbol table of the same program names, by the same names.

use std::path::Path;

use object::{Object, ObjectSymbol};

use super::*;

const TEXT: u64 = 0x40_1000;

/// A function of a forged table: name, entry offset from the text start, length,
/// line of its whole body.
struct F(&'static str, u32, u32, i32);

/// One pc-value table giving `value` over `len` bytes.
fn pc_value_table(value: i32, len: u32) -> Vec<u8> {
    let d = value - -1;
    let uv = if d >= 0 {
        (d as u32) << 1
    } else {
        ((!d as u32) << 1) | 1
    };
    let mut out = Vec::new();
    for mut v in [uv, len] {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                break;
            }
            out.push(b | 0x80);
        }
    }
    out.push(0);
    out
}

/// A Go 1.20 table (format `0xfffffff1`) of `funcs`, all in `/src/a.go`.
fn forge(funcs: &[F]) -> Vec<u8> {
    let mut names = Vec::new();
    let mut name_offs = Vec::new();
    for f in funcs {
        name_offs.push(names.len() as u32);
        names.extend_from_slice(f.0.as_bytes());
        names.push(0);
    }
    let cutab = 0u32.to_le_bytes().to_vec();
    let filetab = b"/src/a.go\0".to_vec();
    let mut pctab = vec![0u8];
    let mut tables = Vec::new();
    for f in funcs {
        let file = pctab.len() as u32;
        pctab.extend(pc_value_table(0, f.2));
        let line = pctab.len() as u32;
        pctab.extend(pc_value_table(f.3, f.2));
        tables.push((file, line));
    }
    let n = funcs.len();
    let mut pcln = Vec::new();
    let records = (2 * n + 2) * 4;
    for (i, f) in funcs.iter().enumerate() {
        pcln.extend(f.1.to_le_bytes());
        pcln.extend(((records + 44 * i) as u32).to_le_bytes());
    }
    let last = funcs.last().map_or(0, |f| f.1 + f.2);
    pcln.extend(last.to_le_bytes());
    pcln.extend(0u32.to_le_bytes());
    for (i, f) in funcs.iter().enumerate() {
        let (file, line) = tables[i];
        for w in [f.1, name_offs[i], 0, 0, 0, file, line, 0, 0, f.3 as u32] {
            pcln.extend(w.to_le_bytes());
        }
        pcln.extend([0u8; 4]);
    }
    let mut out = vec![0xf1, 0xff, 0xff, 0xff, 0, 0, 1, 8];
    let header = 8 + 8 * 8;
    let mut at = header;
    let mut offsets = Vec::new();
    for part in [&names, &cutab, &filetab, &pctab, &pcln] {
        offsets.push(at as u64);
        at += part.len();
    }
    for w in [n as u64, 1, 0].into_iter().chain(offsets.iter().copied()) {
        out.extend(w.to_le_bytes());
    }
    for part in [&names, &cutab, &filetab, &pctab, &pcln] {
        out.extend_from_slice(part);
    }
    out
}

fn forged() -> Vec<u8> {
    forge(&[F("main.alpha", 0, 0x40, 10), F("main.beta", 0x40, 0x20, 20)])
}

#[test]
fn forged_table_names_functions_files_and_lines() {
    let t = GoTable::parse(forged(), Some(TEXT)).expect("parses");
    assert_eq!(t.format(), GoFormat::Go120);
    assert_eq!(t.functions(), 2);
    let at = |pc| t.frames(pc).expect("reads");
    let want = |name: &str, line| {
        vec![GoFrame {
            function: name.to_owned(),
            file: Some("/src/a.go".to_owned()),
            line: Some(line),
            inlined: false,
        }]
    };
    assert_eq!(at(TEXT), want("main.alpha", 10));
    assert_eq!(at(TEXT + 0x3f), want("main.alpha", 10));
    assert_eq!(at(TEXT + 0x40), want("main.beta", 20));
    assert_eq!(at(TEXT + 0x5f), want("main.beta", 20));
    assert!(at(TEXT + 0x60).is_empty(), "past the last function");
    assert!(at(TEXT - 1).is_empty(), "before the first");
    assert_eq!(
        GoTable::parse(forged(), None).err(),
        Some(GoTableError::NoTextStart)
    );
}

#[test]
fn unknown_formats_and_sizes_are_refused() {
    let mut t = forged();
    t[0] = 0xf5;
    assert_eq!(
        GoTable::parse(t, Some(TEXT)).err(),
        Some(GoTableError::UnknownMagic(0xffff_fff5))
    );
    let mut t = forged();
    t[7] = 3;
    assert!(matches!(
        GoTable::parse(t, Some(TEXT)),
        Err(GoTableError::BadHeader { ptr_size: 3, .. })
    ));
    let mut t = forged();
    t[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    assert_eq!(
        GoTable::parse(t, Some(TEXT)).err(),
        Some(GoTableError::TooManyFunctions(u64::MAX))
    );
}

#[test]
fn varints_and_tables_that_never_end_stop_at_the_bytes() {
    let long = [0xffu8; 16];
    let b = read::Bytes { data: &long };
    assert!(matches!(b.varint(&mut 0), Err(GoTableError::LongVarint(_))));
    // A table of steps that never pass the pc: runs off the end, an error.
    let steps = [2u8, 1].repeat(1000);
    let b = read::Bytes { data: &steps };
    assert!(matches!(
        b.pc_value(0, 0, 1 << 20, 1),
        Err(GoTableError::OutOfBounds { .. })
    ));
    // One that goes round in place stops after as many steps as instructions.
    let steps = [2u8, 0].repeat(100_000);
    let b = read::Bytes { data: &steps };
    assert_eq!(b.pc_value(0, 0, 10, 1), Err(GoTableError::EndlessTable(0)));
}

#[test]
fn every_truncation_and_flipped_byte_is_an_error_or_a_name() {
    let whole = forged();
    let pcs: Vec<u64> = (0..0x64).map(|o| TEXT + o).collect();
    let look = |bytes: Vec<u8>| {
        if let Ok(t) = GoTable::parse(bytes, Some(TEXT)) {
            for &pc in &pcs {
                let _ = t.frames(pc);
            }
        }
    };
    for len in 0..whole.len() {
        look(whole[..len].to_vec());
    }
    for i in 0..whole.len() {
        for flip in [0xff, 0x80, 0x01] {
            let mut t = whole.clone();
            t[i] ^= flip;
            look(t);
        }
    }
}

/// The symbol table's functions of a binary built with symbols: (address, name).
fn go_functions(bin: &Path) -> Vec<(u64, String)> {
    let data = std::fs::read(bin).expect("built");
    let file = object::File::parse(&*data).expect("ELF");
    file.symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 0)
        .filter_map(|s| Some((s.address(), s.name().ok()?.to_owned())))
        .collect()
}

#[test]
fn stripped_go_binaries_name_every_function_their_symbols_name() {
    let toolchains = crate::test_fixture::go_toolchains();
    if toolchains.is_empty() {
        eprintln!("SKIPPED: no `go` on PATH (apt-get install golang-go)");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/go/twowork.go");
    for go in toolchains {
        let version = crate::test_fixture::go_version(&go);
        let (sym, stripped) = (dir.path().join("sym"), dir.path().join("stripped"));
        crate::test_fixture::go_build(&go, &source, &sym, false);
        crate::test_fixture::go_build(&go, &source, &stripped, true);
        let image = crate::elf::read_module(&stripped).expect("readable");
        let t = GoTable::from_elf(&image)
            .expect("a table")
            .expect("Go binaries have one");
        assert_eq!(t.version(), Some(version.as_str()));
        assert!(t.reads_inlined(), "{version}: inline trees found");
        let functions = go_functions(&sym);
        assert!(functions.len() > 500, "{version}: {}", functions.len());
        let mut compared = 0;
        for (addr, name) in &functions {
            let frames = t.frames(*addr).expect("reads");
            let outer = frames.last().map(|f| f.function.as_str());
            // The symbol table adds ABI suffixes and spells the generated type
            // functions otherwise (`type..eq.[5]T` for `type..eq.[...]T`, `.1` for
            // `·1`).
            let want = name.strip_suffix(".abi0").unwrap_or(name);
            if want.contains('[') || want.starts_with("type.") {
                continue;
            }
            compared += 1;
            assert_eq!(outer, Some(want), "{version}: at {addr:#x}: {frames:?}");
        }
        assert!(compared * 10 > functions.len() * 9, "{version}: {compared}");
        let (addr, _) = functions
            .iter()
            .find(|(_, n)| n == "main.hashLoop")
            .expect("hashLoop kept out of line");
        let f = &t.frames(*addr).expect("reads")[0];
        assert!(
            f.file.as_deref().is_some_and(|p| p.ends_with("twowork.go")),
            "{f:?}"
        );
        let frame = |name: &str| {
            let (addr, _) = functions.iter().find(|(_, n)| n == name).expect(name);
            t.frame_at(*addr).expect("reads").expect("a frame")
        };
        assert_eq!(
            frame("main.hashLoop").sp_delta,
            0,
            "{version}: at its entry"
        );
        assert!(frame("runtime.goexit.abi0").outermost);
        assert!(frame("runtime.mstart.abi0").outermost);
        assert!(!frame("main.alphaWork").outermost);
        // Stack switches, by Go's flag or by name.
        assert!(frame("runtime.systemstack.abi0").switches_stack);
        for f in [
            "runtime.mcall",
            "runtime.morestack.abi0",
            "runtime.asmcgocall.abi0",
        ] {
            let f = functions
                .iter()
                .find(|(_, n)| n == f)
                .map(|(_, n)| n.as_str());
            assert!(
                f.is_none_or(|f| frame(f).switches_stack),
                "{version}: {f:?}"
            );
        }
        assert!(!frame("main.alphaWork").switches_stack);
        assert!(!frame("main.hashLoop").switches_stack);
        let text = std::fs::read_to_string(&source).expect("source");
        let line_of = |s: &str| text.lines().position(|l| l.contains(s)).expect(s) as u32 + 1;
        let body = line_of("func hashLoop")..=line_of("return h");
        assert!(
            f.line.is_some_and(|l| body.contains(&l)),
            "{version}: {f:?}"
        );
    }
}
