//! Test support: builds the C fixture `tests/data/unwind/capture.c` with gcc, runs it to
//! capture its own registers, stack and maps, and turns the dump into a
//! [`ModuleLookup`] over the real files it had mapped plus a symbolizer that names
//! each unwound address (from the libc6-dbg debug file when there is one).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use object::{Object, ObjectSymbol};

use crate::elf::{ElfInfo, read_module};
use crate::unwind::{
    CodeModule, FrameAddress, ModuleCfi, ModuleLookup, Regs, StackCopy, UnwindEnd, Unwinder,
};

pub(super) const SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/unwind/capture.c");

/// Compiles the fixture with extra gcc flags into `dir` and returns the binary's path.
pub(super) fn build(dir: &Path, flags: &[&str]) -> PathBuf {
    let exe = dir.join("capture");
    let mut flags = flags.to_vec();
    flags.extend(["-pthread", "-w"]);
    crate::test_fixture::gcc(Path::new(SOURCE), &exe, &flags);
    exe
}

/// What the fixture wrote at its capture point.
pub(super) struct Dump {
    pub regs: Regs,
    pub stack_sp: u64,
    pub stack: Vec<u8>,
    pub maps: String,
}

impl Dump {
    pub(super) fn stack(&self) -> StackCopy<'_> {
        StackCopy {
            sp: self.stack_sp,
            bytes: &self.stack,
        }
    }
}

/// Runs the fixture in `mode`, writing its dump under `dir`.
pub(super) fn capture(exe: &Path, mode: &str, dir: &Path) -> Dump {
    let out = dir.join(format!("dump-{mode}"));
    std::fs::create_dir_all(&out).unwrap();
    let status = Command::new(exe).arg(mode).arg(&out).status().unwrap();
    assert!(status.success(), "fixture failed in mode {mode}: {status}");
    let regs = std::fs::read_to_string(out.join("regs.txt")).unwrap();
    let v: Vec<u64> = regs
        .split_whitespace()
        .map(|w| u64::from_str_radix(w, 16).unwrap())
        .collect();
    Dump {
        regs: Regs {
            ip: v[0],
            sp: v[1],
            bp: v[2],
        },
        stack_sp: v[1],
        stack: std::fs::read(out.join("stack.bin")).unwrap(),
        maps: std::fs::read_to_string(out.join("maps.txt")).unwrap(),
    }
}

/// One executable mapping of the dumped process.
pub(super) struct Mapping {
    pub start: u64,
    pub end: u64,
    pub bias: u64,
    pub path: String,
    pub cfi: Arc<ModuleCfi>,
    pub symbols: Arc<Symbols>,
}

/// The executable file mappings of a process, from its maps text.
pub(super) struct Modules {
    pub mappings: Vec<Mapping>,
    /// Paths whose CFI is hidden (`Some(true)`: module present without tables;
    /// `Some(false)`: module not found at all).
    pub hide: Option<(String, bool)>,
    no_tables: HashMap<String, ModuleCfi>,
}

impl Modules {
    pub(super) fn from_maps(maps: &str) -> Modules {
        let mut by_path: HashMap<String, (Arc<ModuleCfi>, Arc<Symbols>, ElfInfo)> = HashMap::new();
        let mut mappings = Vec::new();
        for m in crate::test_fixture::parse_maps(maps) {
            if !m.executable() || !m.path.starts_with('/') {
                continue;
            }
            let (start, end, offset, path) = (m.start, m.end, m.offset, m.path);
            let (cfi, symbols, info) = by_path
                .entry(path.clone())
                .or_insert_with(|| {
                    let image = read_module(Path::new(&path)).unwrap();
                    let info = ElfInfo::parse((*image).as_ref()).unwrap();
                    let symbols = Arc::new(Symbols::load(Path::new(&path), &info));
                    (Arc::new(ModuleCfi::new(image)), symbols, info)
                })
                .clone();
            let bias = info.bias_for_mapping(start, offset).unwrap();
            mappings.push(Mapping {
                start,
                end,
                bias,
                path,
                cfi,
                symbols,
            });
        }
        let mut no_tables = HashMap::new();
        for m in &mappings {
            no_tables
                .entry(m.path.clone())
                .or_insert_with(|| ModuleCfi::without_tables(m.cfi.image().clone()));
        }
        Modules {
            mappings,
            hide: None,
            no_tables,
        }
    }

    pub(super) fn mapping(&self, avma: u64) -> Option<&Mapping> {
        self.mappings
            .iter()
            .find(|m| (m.start..m.end).contains(&avma))
    }

    /// The main executable's mapping (the one whose file is `exe`).
    pub(super) fn mapping_of(&self, exe: &Path) -> &Mapping {
        let exe = exe.to_str().unwrap();
        self.mappings.iter().find(|m| m.path == exe).unwrap()
    }

    /// Names for each frame at its lookup address (a return address's call), falling
    /// back to a return address itself where no symbol covers the byte before it (as
    /// for `__restore_rt`, whose CFI starts one byte before its symbol).
    pub(super) fn symbolize(&self, frames: &[FrameAddress]) -> Vec<Vec<String>> {
        frames
            .iter()
            .map(|&frame| {
                let (addr, lookup) = (frame.address(), frame.lookup_address());
                let Some(m) = self.mapping(lookup) else {
                    return vec![format!("{addr:#x}")];
                };
                let mut names = m.symbols.names_at(lookup - m.bias);
                if names.is_empty() {
                    names = m.symbols.names_at(addr - m.bias);
                }
                if names.is_empty() {
                    vec![format!("{}+{:#x}", m.path, lookup - m.bias)]
                } else {
                    names
                }
            })
            .collect()
    }
}

impl ModuleLookup for Modules {
    fn lookup(&self, avma: u64) -> Option<CodeModule<'_>> {
        let m = self.mapping(avma)?;
        let cfi = match &self.hide {
            Some((path, true)) if *path == m.path => self.no_tables.get(path)?,
            Some((path, false)) if *path == m.path => return None,
            _ => &*m.cfi,
        };
        Some(CodeModule { cfi, bias: m.bias })
    }
}

/// Function symbols of one file: (start, size, name) sorted by start.
pub(super) struct Symbols(Vec<(u64, u64, String)>);

impl Symbols {
    pub(super) fn load(path: &Path, info: &ElfInfo) -> Symbols {
        let debug = info.build_id.as_ref().map(|id| {
            let hex = crate::elf::build_id_hex(id);
            PathBuf::from(format!(
                "/usr/lib/debug/.build-id/{}/{}.debug",
                &hex[..2],
                &hex[2..]
            ))
        });
        let mut syms = Vec::new();
        for file in debug
            .iter()
            .filter(|p| p.exists())
            .chain([&path.to_owned()])
        {
            let data = std::fs::read(file).unwrap();
            let obj = object::File::parse(&*data).unwrap();
            for s in obj.symbols().chain(obj.dynamic_symbols()) {
                if s.kind() == object::SymbolKind::Text && s.address() != 0 {
                    let name = s.name().unwrap_or("").split('@').next().unwrap_or("");
                    syms.push((s.address(), s.size(), name.to_owned()));
                }
            }
            if !syms.is_empty() {
                break;
            }
        }
        syms.sort();
        syms.dedup();
        Symbols(syms)
    }

    /// All names of the function symbols that contain `svma` (aliases included); a
    /// zero-sized symbol contains only its own address.
    pub(super) fn names_at(&self, svma: u64) -> Vec<String> {
        self.0
            .iter()
            .filter(|(start, size, _)| *start <= svma && svma < start + (*size).max(1))
            .map(|(_, _, name)| name.clone())
            .collect()
    }

    /// The address of the first symbol called `name`.
    pub(super) fn address_of(&self, name: &str) -> Option<u64> {
        self.0.iter().find(|s| s.2 == name).map(|s| s.0)
    }
}

/// The addresses of `frames`, whatever their kind.
pub(super) fn addresses(frames: &[FrameAddress]) -> Vec<u64> {
    frames.iter().map(|f| f.address()).collect()
}

/// Unwinds a dump with a fresh unwinder.
pub(super) fn unwind(dump: &Dump, modules: &Modules) -> (Vec<FrameAddress>, UnwindEnd) {
    let mut frames = Vec::new();
    let end = Unwinder::new().unwind(&dump.regs, &dump.stack(), modules, &mut frames);
    (frames, end)
}

/// Asserts that `names` follows `pattern`: each entry must be among the frame's names;
/// an entry ending in `+` matches one or more consecutive frames.
pub(super) fn assert_chain(names: &[Vec<String>], pattern: &[&str]) {
    let shown = || {
        names
            .iter()
            .map(|n| n.join("/"))
            .collect::<Vec<_>>()
            .join(" <- ")
    };
    let mut i = 0;
    for want in pattern {
        let (name, repeat) = match want.strip_suffix('+') {
            Some(n) => (n, true),
            None => (*want, false),
        };
        let matches = |i: usize| names.get(i).is_some_and(|n| n.iter().any(|x| x == name));
        assert!(matches(i), "frame {i} should be {name}; chain: {}", shown());
        i += 1;
        while repeat && matches(i) {
            i += 1;
        }
    }
    assert_eq!(
        i,
        names.len(),
        "extra frames after the pattern; chain: {}",
        shown()
    );
}
