//! Fuzz target `gopclntab`: a Go module's `.gopclntab` read as the namer and the
//! unwinder read it ([`GoTable`], issue 53): the header of each format, the function
//! table searched, names, files and lines through the pc-value tables, and each
//! frame's size. The input is the table's bytes; pcs are looked up across the first
//! MiB of text from 0x401000 (where Go links amd64 code), which a table built for
//! another start still reaches when its header states its own (Go 1.18, 1.19).
//!
//! Seeds: [`gopclntab_seeds`] (a Go 1.20 table forged here, two functions) and, when
//! `go` is installed, the table of tests/data/go/twowork.go built stripped by it
//! (fuzz/make-seeds.sh): real tables, mutated.

use profile::elf::gopclntab::GoTable;

/// Where the forged table's text starts, and where lookups go.
const GO_TEXT: u64 = 0x40_1000;

/// What one input gave: the names at the pcs looked up, sorted, each once; nothing
/// when the table was refused.
pub fn gopclntab_run(data: &[u8]) -> Option<Vec<String>> {
    let table = GoTable::parse(data.to_vec(), Some(GO_TEXT)).ok()?;
    let mut names = Vec::new();
    let edges = [GO_TEXT, GO_TEXT + 0x3f, GO_TEXT + 0x40, GO_TEXT + 0x5f];
    let spread = (0..512u64).map(|k| GO_TEXT + k * 0x800 + (k % 7));
    let outside = [0, GO_TEXT - 1, u64::MAX];
    for pc in edges.into_iter().chain(spread).chain(outside) {
        if let Ok(frames) = table.frames(pc) {
            names.extend(frames.into_iter().map(|f| f.function));
        }
        let _ = table.frame_at(pc);
    }
    names.sort();
    names.dedup();
    Some(names)
}

/// The fuzz target: [`gopclntab_run`], whatever it gives.
pub fn gopclntab(data: &[u8]) {
    let _ = gopclntab_run(data);
}

/// One pc-value table giving `value` over `len` bytes (varint pairs, then the end).
fn pc_values(value: i32, len: u32) -> Vec<u8> {
    let d = value + 1;
    let uv = if d >= 0 {
        (d as u32) << 1
    } else {
        ((!d as u32) << 1) | 1
    };
    let mut out = Vec::new();
    for mut v in [uv, len] {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    out.push(0);
    out
}

/// A Go 1.20 table of `main.alpha` (0x40 bytes, line 10) and `main.beta` (0x20
/// bytes, line 20, a frame of 0x18 bytes) in `/src/a.go`.
pub fn gopclntab_seeds() -> Vec<(String, Vec<u8>)> {
    let funcs = [
        ("main.alpha", 0u32, 0x40u32, 10i32, 0),
        ("main.beta", 0x40, 0x20, 20, 0x18),
    ];
    let mut names = Vec::new();
    let mut pctab = vec![0u8];
    let mut funcs_out = Vec::new();
    for &(name, entry, len, line, frame) in &funcs {
        let name_off = names.len() as u32;
        names.extend_from_slice(name.as_bytes());
        names.push(0);
        let sp = pctab.len() as u32;
        pctab.extend(pc_values(frame, len));
        let file = pctab.len() as u32;
        pctab.extend(pc_values(0, len));
        let ln = pctab.len() as u32;
        pctab.extend(pc_values(line, len));
        funcs_out.push([entry, name_off, 0, 0, sp, file, ln, 0, 0, line as u32]);
    }
    let mut pcln = Vec::new();
    let records = (2 * funcs.len() + 2) * 4;
    for (i, f) in funcs.iter().enumerate() {
        pcln.extend(f.1.to_le_bytes());
        pcln.extend(((records + 44 * i) as u32).to_le_bytes());
    }
    pcln.extend(0x60u32.to_le_bytes());
    pcln.extend(0u32.to_le_bytes());
    for words in funcs_out {
        for w in words {
            pcln.extend(w.to_le_bytes());
        }
        pcln.extend([0u8; 4]);
    }
    let cutab = 0u32.to_le_bytes().to_vec();
    let filetab = b"/src/a.go\0".to_vec();
    let parts = [names, cutab, filetab, pctab, pcln];
    let mut out = vec![0xf1, 0xff, 0xff, 0xff, 0, 0, 1, 8];
    let mut at = 8 + 8 * 8;
    let mut words = vec![funcs.len() as u64, 1, 0];
    for p in &parts {
        words.push(at as u64);
        at += p.len();
    }
    for w in words {
        out.extend(w.to_le_bytes());
    }
    for p in &parts {
        out.extend_from_slice(p);
    }
    vec![("forged-go120".into(), out)]
}
