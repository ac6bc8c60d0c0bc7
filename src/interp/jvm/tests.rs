//! The VMStructs reader and the method reader on memory captured from a real JDK 17
//! (tests/data/java/jvm17.snapshot.gz: every byte they read, nothing else), and a
//! capture helper that writes such a snapshot from a live JVM.

use std::cell::RefCell;
use std::io::Read;

use super::method::{Layout, line_at, line_table, read_method};
use super::vmstructs::{VmStructs, VmSymbols};
use crate::interp::{Memory, Snapshot};

/// What the snapshot was taken from: libjvm's load bias, its symbols, and the
/// `Method*` of `long Huge.huge(long)`, one per line as `name value` (hex).
struct Fixture {
    snap: Snapshot,
    syms: VmSymbols,
    bias: u64,
    method: u64,
}

fn fixture() -> Fixture {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/java/jvm17.snapshot.gz"
    );
    let gz = std::fs::read(path).unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_string(&mut text)
        .unwrap();
    let mut syms = VmSymbols::default();
    let (mut bias, mut method) = (0, 0);
    for l in text.lines().filter_map(|l| l.strip_prefix("# ")) {
        let (k, v) = l.split_once(' ').unwrap();
        let v = u64::from_str_radix(v, 16).unwrap();
        match k {
            "bias" => bias = v,
            "method" => method = v,
            _ => {
                syms.addrs.insert(k.to_owned(), v);
            }
        }
    }
    Fixture {
        snap: Snapshot::from_text(&text).unwrap(),
        syms,
        bias,
        method,
    }
}

#[test]
fn the_tables_of_a_real_jdk17_give_the_offsets_needed() {
    let f = fixture();
    let vm = VmStructs::read(&f.snap, &f.syms, f.bias).unwrap();
    assert_eq!(vm.offset("Method::_constMethod"), Ok(8));
    assert_eq!(vm.size("ConstMethod"), Ok(48));
    assert_eq!(vm.int("frame::interpreter_frame_last_sp_offset"), Ok(-2));
    assert!(vm.static_addr("AbstractInterpreter::_code").is_ok());
    assert!(vm.fields.len() > 500, "{}", vm.fields.len());
    // A table cut short is an error, not a partial answer.
    let mut cut = f.syms.clone();
    cut.addrs.insert("VMStructs".into(), 0x10);
    assert!(VmStructs::read(&f.snap, &cut, f.bias).is_err());
}

#[test]
fn a_real_method_is_named_with_its_lines() {
    let f = fixture();
    let vm = VmStructs::read(&f.snap, &f.syms, f.bias).unwrap();
    let l = Layout::new(&vm).unwrap();
    let m = read_method(&f.snap, &l, f.method).unwrap();
    assert_eq!(m.name, "long Huge.huge(long)");
    assert_eq!(m.file.as_deref(), Some("Huge.java"));
    assert!(m.code_size > 8000, "{}", m.code_size);
    let lines = line_table(&f.snap, &l, &m);
    // Huge.java: the body's first statement is on line 10, `return x` on line 710.
    assert_eq!(line_at(&lines, 0), Some(10));
    assert_eq!(line_at(&lines, m.code_size as u32 - 1), Some(710));
    assert_eq!(m.bci(m.code_start + m.code_size), None);
    // Anything else is no method: a pointer into the method, its neighbours.
    for wrong in [f.method + 8, f.method - 8, f.method + 0x1000, 0, 7] {
        assert_eq!(read_method(&f.snap, &l, wrong), None, "{wrong:#x}");
    }
}

/// Issue 44: a line table that decodes to more entries than the method has bytecodes
/// (a hostile JVM's 64 KiB of one-byte entries: 512 KiB kept per method) is refused;
/// one of as many entries as bytecodes is kept.
#[test]
fn a_line_table_longer_than_its_bytecode_is_refused() {
    let f = fixture();
    let vm = VmStructs::read(&f.snap, &f.syms, f.bias).unwrap();
    let l = Layout::new(&vm).unwrap();
    let m = read_method(&f.snap, &l, f.method).unwrap();
    let start = m.code_start + m.code_size;
    // Entries of one byte each (bci + 1, same line), then the end, in a region wide
    // enough that every read of the table falls in it.
    let table = |entries: usize| {
        let mut t = vec![0x08u8; entries];
        t.resize(70_000, 0);
        t
    };
    let lines_of = |bytes: &[u8]| {
        let regions = [(start, bytes)];
        let mem = crate::interp::AtSample {
            regions: &regions,
            rest: &f.snap,
        };
        line_table(&mem, &l, &m)
    };
    let n = m.code_size as usize;
    assert_eq!(lines_of(&table(n)).len(), n);
    assert_eq!(lines_of(&table(n + 2)), Vec::new());
}

#[test]
fn no_word_of_the_snapshot_but_the_method_passes_for_it() {
    let f = fixture();
    let vm = VmStructs::read(&f.snap, &f.syms, f.bias).unwrap();
    let l = Layout::new(&vm).unwrap();
    // Every word the snapshot holds, and every address in it, tried as a Method*
    // (garbage, pointers into metadata, wrapped arithmetic): never a panic, and only
    // the real method (or another real one) checks out.
    let text = f.snap.to_text();
    let mut tried = 0;
    for line in text.lines() {
        let (addr, hex) = line.split_once(' ').unwrap();
        let start = u64::from_str_radix(addr, 16).unwrap();
        for i in (0..hex.len() / 16).take(512) {
            let at = start + 8 * i as u64;
            for candidate in [at, f.snap.u64_at(at).unwrap_or(0), u64::MAX - 7] {
                tried += 1;
                if let Some(m) = read_method(&f.snap, &l, candidate) {
                    assert_eq!(candidate, f.method, "{} at {candidate:#x}", m.name);
                }
            }
        }
    }
    assert!(tried > 1000);
}

/// Records every read it serves, to capture a snapshot.
struct Recorder<M> {
    mem: M,
    reads: RefCell<Vec<(u64, Vec<u8>)>>,
}

impl<M: Memory> Memory for Recorder<M> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        let ok = self.mem.read(addr, buf);
        if ok {
            self.reads.borrow_mut().push((addr, buf.to_vec()));
        }
        ok
    }
}

/// `PROFILE_CAPTURE_JVM=PID cargo test --lib capture_jvm -- --ignored`, with PID a JVM
/// running tests/it/java_frames.rs's Huge: writes the snapshot the tests above read.
#[test]
#[ignore]
fn capture_jvm() {
    let pid: u32 = std::env::var("PROFILE_CAPTURE_JVM")
        .unwrap()
        .parse()
        .unwrap();
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let line = maps.lines().find(|l| l.ends_with("/libjvm.so")).unwrap();
    let bias = u64::from_str_radix(line.split('-').next().unwrap(), 16).unwrap();
    let image = std::fs::read(line.split_whitespace().last().unwrap()).unwrap();
    let syms = VmSymbols::from_elf(&image).unwrap();
    let mem = Recorder {
        mem: crate::record::sys::ProcessMemory::open(pid).unwrap(),
        reads: RefCell::new(Vec::new()),
    };
    let vm = VmStructs::read(&mem, &syms, bias).unwrap();
    let l = Layout::new(&vm).unwrap();
    // Find Huge through the class loader data graph, not recorded.
    let raw = &mem.mem;
    let o = |k: &str| vm.offset(k).unwrap();
    let mut cld = raw
        .u64_at(vm.static_addr("ClassLoaderDataGraph::_head").unwrap())
        .unwrap();
    let mut method = 0;
    'outer: while cld != 0 {
        let mut k = raw.u64_at(cld + o("ClassLoaderData::_klasses")).unwrap();
        while k != 0 {
            let name = raw.u64_at(k + o("Klass::_name")).unwrap();
            let len = raw.u16_at(name + o("Symbol::_length")).unwrap();
            let text = raw
                .bytes_at(name + o("Symbol::_body"), len.into(), 4096)
                .unwrap();
            if text == b"Huge" {
                let methods = raw.u64_at(k + o("InstanceKlass::_methods")).unwrap();
                let n = raw.u32_at(methods).unwrap();
                for i in 0..u64::from(n) {
                    let m = raw.u64_at(methods + 8 + 8 * i).unwrap();
                    if read_method(raw, &l, m).is_some_and(|m| m.name.contains("huge")) {
                        method = m;
                        break 'outer;
                    }
                }
            }
            k = raw.u64_at(k + o("Klass::_next_link")).unwrap();
        }
        cld = raw.u64_at(cld + o("ClassLoaderData::_next")).unwrap();
    }
    assert_ne!(method, 0, "no Huge.huge in {pid}");
    let m = read_method(&mem, &l, method).unwrap();
    line_table(&mem, &l, &m);
    // Merge the reads into regions.
    let mut reads = mem.reads.into_inner();
    reads.sort_by_key(|r| r.0);
    let mut snap: Vec<(u64, Vec<u8>)> = Vec::new();
    for (a, b) in reads {
        match snap.last_mut() {
            Some((s, v)) if a <= *s + v.len() as u64 => {
                let off = (a - *s) as usize;
                if off + b.len() > v.len() {
                    v.truncate(off);
                    v.extend_from_slice(&b);
                }
            }
            _ => snap.push((a, b)),
        }
    }
    let mut s = Snapshot::default();
    for (a, b) in snap {
        s.insert(a, b);
    }
    let mut text = format!("# bias {bias:x}\n# method {method:x}\n");
    let mut names: Vec<_> = syms.addrs.iter().collect();
    names.sort();
    for (k, v) in names {
        text.push_str(&format!("# {k} {v:x}\n"));
    }
    text.push_str(&s.to_text());
    let out = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/java/jvm17.snapshot.gz"
    );
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut gz, text.as_bytes()).unwrap();
    std::fs::write(out, gz.finish().unwrap()).unwrap();
}
