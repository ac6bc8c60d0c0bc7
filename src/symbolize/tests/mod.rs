//! Tests of the symbolizer on real binaries: this test binary itself, C and Rust
//! fixtures compiled from `tests/data/symbolize/` into temporary directories, Debian's
//! libc with libc6-dbg, live Node and CPython processes writing perf maps, and the
//! running kernel. Names and inline chains are compared with binutils `addr2line`.

mod c_fixture;
mod debug_files;
mod go_fixture;
mod kept;
mod live;
mod near;
mod robustness;
mod rust_fixture;

use std::path::{Path, PathBuf};
use std::process::Command;

use object::{Object, ObjectSection, ObjectSymbol};

use super::*;
use crate::elf::{ElfInfo, read_module};

/// A source file under `tests/data/symbolize/`.
pub(super) fn fixture_source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/symbolize")
        .join(name)
}

/// Compiles `inline.c` with `gcc -O2 -g` plus `extra` into `dir/name`.
pub(super) fn build_c(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let out = dir.join(name);
    let mut flags = vec!["-O2", "-g"];
    flags.extend_from_slice(extra);
    crate::test_fixture::gcc(&fixture_source("inline.c"), &out, &flags);
    out
}

/// Runs a tool and checks it succeeded.
pub(super) fn run(cmd: &str, args: &[&std::ffi::OsStr]) {
    let status = Command::new(cmd).args(args).status().expect(cmd);
    assert!(status.success(), "{cmd} {args:?} failed");
}

pub(super) fn module(path: &Path) -> ModuleSource {
    ModuleSource {
        image: read_module(path).expect("fixture maps"),
        path: path.to_str().expect("utf-8 path").to_owned(),
        root: None,
    }
}

/// `(address, size)` of the first function symbol whose raw name contains `part`.
pub(super) fn symbol(bin: &Path, part: &str) -> (u64, u64) {
    let data = std::fs::read(bin).unwrap();
    let file = object::File::parse(&*data).unwrap();
    file.symbols()
        .find(|s| s.name().is_ok_and(|n| n.contains(part)) && s.size() > 0)
        .map(|s| (s.address(), s.size()))
        .unwrap_or_else(|| panic!("no symbol {part} in {}", bin.display()))
}

/// `(start, end)` SVMAs of `.text`.
pub(super) fn text_range(bin: &Path) -> (u64, u64) {
    let data = std::fs::read(bin).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let text = file.section_by_name(".text").unwrap();
    (text.address(), text.address() + text.size())
}

/// One frame as binutils prints it: function, file, line.
pub(super) type Binutils = (String, Option<String>, Option<u32>);

/// `addr2line -a -f -i -C -e BIN` over `addrs`, one inline chain per address.
pub(super) fn binutils_addr2line(bin: &Path, addrs: &[u64]) -> Vec<Vec<Binutils>> {
    use std::io::Write;
    let mut child = Command::new("addr2line")
        .args(["-a", "-f", "-i", "-C", "-e"])
        .arg(bin)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("binutils addr2line");
    let mut input = String::new();
    for a in addrs {
        input.push_str(&format!("{a:#x}\n"));
    }
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut result: Vec<Vec<Binutils>> = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.starts_with("0x") {
            result.push(Vec::new());
            continue;
        }
        let location = lines.next().unwrap_or("??:0");
        // "file:line (discriminator N)"
        let location = location.split(" (").next().unwrap_or(location);
        let (file, line_no) = location.rsplit_once(':').unwrap_or((location, "?"));
        let frame = (
            line.to_owned(),
            (file != "??").then(|| file.to_owned()),
            line_no.parse().ok().filter(|&l| l != 0),
        );
        result.last_mut().expect("address line first").push(frame);
    }
    assert_eq!(result.len(), addrs.len(), "one answer per address");
    result
}

#[inline(never)]
fn marker_function_for_self_symbolization() -> u64 {
    std::hint::black_box(42)
}

/// The bias of the mapping of `/proc/self/exe` that holds `avma`.
fn own_bias(avma: u64) -> u64 {
    let data = std::fs::read("/proc/self/exe").unwrap();
    let info = ElfInfo::parse(&data).unwrap();
    let m = crate::test_fixture::mapping_of("self", avma);
    info.bias_for_mapping(m.start, m.offset).unwrap()
}

#[test]
fn self_symbolization() {
    assert_eq!(marker_function_for_self_symbolization(), 42);
    let avma = marker_function_for_self_symbolization as fn() -> u64 as usize as u64;
    let svma = avma - own_bias(avma);
    let mut s = Symbolizer::new(SymbolizerOptions::default());
    let exe = std::fs::read_link("/proc/self/exe").unwrap();
    let result = s.symbolize_module(&module(&exe), &[svma, svma + 1, 0]);
    assert_eq!(result.len(), 3);
    for frames in &result[..2] {
        let outer = frames.last().expect("a name");
        assert_eq!(
            outer.function,
            "profile::symbolize::tests::marker_function_for_self_symbolization"
        );
        assert!(!outer.inlined);
        assert!(
            outer
                .file
                .as_deref()
                .unwrap()
                .ends_with("symbolize/tests/mod.rs")
        );
        assert!(outer.line.is_some());
    }
    assert!(result[2].is_empty(), "address 0 names nothing");
}

#[test]
fn kernel_syscall_address() {
    let k = kernel::KernelSymbols::load(Path::new("/proc/kallsyms")).unwrap();
    let name = ["do_sys_openat2", "__x64_sys_read", "ksys_read"]
        .into_iter()
        .find(|n| k.address_of(n).is_some())
        .expect("a well-known syscall symbol");
    let addr = k.address_of(name).unwrap();
    let mut s = Symbolizer::new(SymbolizerOptions::default());
    let names = s.symbolize_kernel(&[addr + 0x10, addr, 1]).unwrap();
    assert_eq!(names[0].as_ref().unwrap().function, name);
    assert_eq!(names[1].as_ref().unwrap().function, name);
    assert_eq!(names[2], None);
}

#[test]
fn hidden_kallsyms_is_an_error_with_advice() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kallsyms");
    std::fs::write(&path, "0000000000000000 T _stext\n0000000000000000 t x\n").unwrap();
    let mut s = Symbolizer::new(SymbolizerOptions::default());
    let err = s.symbolize_kernel_with(&path, &[1]).unwrap_err();
    assert!(matches!(err, KernelSymbolsError::Hidden { .. }));
    let msg = err.to_string();
    assert!(
        msg.contains("kptr_restrict") && msg.contains("root"),
        "{msg}"
    );
}

/// On a large binary (`PROFILE_COMPARE_BINARY`, default this test binary), ~2,000
/// addresses spread over `.text`: inline chains and lines agree with binutils for at
/// least 95% of the addresses binutils names (the rest: Rust names, where we add
/// generic arguments, and line-table corner cases). Slow: run with `--ignored`.
#[test]
#[ignore]
fn large_binary_agrees_with_binutils() {
    let bin = std::env::var_os("PROFILE_COMPARE_BINARY")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::fs::read_link("/proc/self/exe").unwrap());
    let (start, end) = text_range(&bin);
    let step = ((end - start) / 2000).max(1);
    let addrs: Vec<u64> = (start..end).step_by(step as usize).collect();
    let mut s = Symbolizer::new(SymbolizerOptions::default());
    let ours = s.symbolize_module(&module(&bin), &addrs);
    let theirs = binutils_addr2line(&bin, &addrs);
    let (mut named, mut same_lines, mut same_names) = (0, 0, 0);
    for ((addr, frames), chain) in addrs.iter().zip(&ours).zip(&theirs) {
        if chain.iter().all(|f| f.2.is_none()) {
            continue;
        }
        named += 1;
        let lines: Vec<_> = frames.iter().map(|f| f.line).collect();
        let their_lines: Vec<_> = chain.iter().map(|f| f.2).collect();
        if lines == their_lines {
            same_lines += 1;
        } else {
            eprintln!("{addr:#x}: lines {lines:?} vs {their_lines:?}");
        }
        let names: Vec<_> = frames.iter().map(|f| f.function.as_str()).collect();
        let their_names: Vec<_> = chain.iter().map(|f| f.0.as_str()).collect();
        if names == their_names {
            same_names += 1;
        } else if names.len() == their_names.len() {
            eprintln!("{addr:#x}: {names:?}\n   vs {their_names:?}");
        }
    }
    eprintln!("{named} named by binutils; same lines {same_lines}, same names {same_names}");
    assert!(same_lines * 100 >= named * 95, "{same_lines}/{named}");
}
