//! Unwinds of crafted input: PLT stubs (whose CFA is a rip-dependent expression), the
//! vdso, the test binary's own stack, and random registers, stacks and corrupted CFI
//! that must never panic.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

use object::{Object, ObjectSection};

use super::fixture::{Modules, Symbols, addresses, assert_chain, build};
use crate::elf::{ElfInfo, image_from_vec, read_module};
use crate::test_fixture::{mapping_of, own_maps};
use crate::unwind::cfi::RuleLookup;
use crate::unwind::{
    CodeModule, FrameAddress, ModuleCfi, ModuleLookup, Regs, StackCopy, TruncateReason, UnwindEnd,
    UnwindOptions, Unwinder,
};

/// One module mapped at `[start, end)` with `bias`.
struct Single {
    cfi: Arc<ModuleCfi>,
    bias: u64,
    start: u64,
    end: u64,
}

impl ModuleLookup for Single {
    fn lookup(&self, avma: u64) -> Option<CodeModule<'_>> {
        (self.start..self.end)
            .contains(&avma)
            .then_some(CodeModule {
                cfi: &self.cfi,
                bias: self.bias,
            })
    }
}

impl Single {
    /// The executable `exe` mapped at `bias` (1 MiB of it).
    fn of(exe: &Path, bias: u64) -> Single {
        Single {
            cfi: Arc::new(ModuleCfi::new(read_module(exe).unwrap())),
            bias,
            start: bias,
            end: bias + 0x10_0000,
        }
    }
}

/// A small deterministic PRNG (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn words(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

#[test]
fn plt_stub_unwinds_to_its_caller() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), &["-O2"]);
    let data = std::fs::read(&exe).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let plt = file.section_by_name(".plt").expect("a .plt section");
    let info = ElfInfo::parse(&data).unwrap();
    let symbols = Symbols::load(&exe, &info);
    let main = symbols.address_of("main").unwrap();
    let bias = 0x5555_5555_0000;
    let module = Single::of(&exe, bias);
    let ra = bias + main + 4;
    // Entry 1 of the PLT: at its first instruction the return address is on top of
    // the stack; after its `push $index` (offset 11) it is one word further up.
    for (offset_in_entry, stack) in [(0, words(&[ra])), (11, words(&[7, ra]))] {
        let sp = 0x7ffc_0000_0000;
        let regs = Regs {
            ip: bias + plt.address() + 16 + offset_in_entry,
            sp,
            bp: 0,
        };
        let mut frames = Vec::new();
        let end = Unwinder::new().unwind(
            &regs,
            &StackCopy { sp, bytes: &stack },
            &module,
            &mut frames,
        );
        assert_eq!(
            frames[..2],
            [
                FrameAddress::InstructionPointer(regs.ip),
                FrameAddress::ReturnAddress(ra)
            ],
            "offset {offset_in_entry}"
        );
        // main's own CFI then needs words beyond the crafted copy.
        assert_eq!(
            end,
            UnwindEnd::Truncated(TruncateReason::StackCopyExhausted)
        );
    }
}

fn read_own_memory(addr: u64, len: usize) -> Vec<u8> {
    let mut mem = std::fs::File::open("/proc/self/mem").unwrap();
    mem.seek(SeekFrom::Start(addr)).unwrap();
    let mut buf = vec![0; len];
    mem.read_exact(&mut buf).unwrap();
    buf
}

fn own_mapping(name: &str) -> Option<(u64, u64)> {
    own_maps()
        .into_iter()
        .find(|m| m.path.ends_with(name))
        .map(|m| (m.start, m.end))
}

#[test]
fn vdso_has_cfi_for_its_functions() {
    let Some((start, end)) = own_mapping("[vdso]") else {
        return; // no vdso on this kernel
    };
    let bytes = read_own_memory(start, (end - start) as usize);
    let file = object::File::parse(&*bytes).unwrap();
    let functions: Vec<u64> = object::Object::dynamic_symbols(&file)
        .filter(|s| object::ObjectSymbol::kind(s) == object::SymbolKind::Text)
        .map(|s| object::ObjectSymbol::address(&s))
        .collect();
    assert!(!functions.is_empty());
    let cfi = ModuleCfi::new(image_from_vec(bytes));
    assert!(cfi.has_cfi(), "{:?}", cfi.load_error());
    let mut ctx = gimli::UnwindContext::new();
    for f in functions {
        assert!(
            matches!(cfi.rule_for(f, &mut ctx), RuleLookup::Found(_)),
            "{f:#x}"
        );
    }
}

/// Captures this function's registers and a copy of the stack above them.
#[inline(never)]
fn capture_own_stack() -> (Regs, Vec<u8>) {
    let (ip, sp, bp): (u64, u64, u64);
    // SAFETY: copies three registers into outputs; touches no memory.
    unsafe {
        std::arch::asm!(
            "lea {ip}, [rip]",
            "mov {sp}, rsp",
            "mov {bp}, rbp",
            ip = out(reg) ip,
            sp = out(reg) sp,
            bp = out(reg) bp,
            options(nomem, nostack, preserves_flags),
        );
    }
    let top = mapping_of("self", sp).end;
    let len = (top - sp).min(1 << 20) as usize;
    (Regs { ip, sp, bp }, read_own_memory(sp, len))
}

#[test]
fn unwinds_the_test_binarys_own_rust_stack() {
    let (regs, stack) = capture_own_stack();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let modules = Modules::from_maps(&maps);
    let mut frames = Vec::new();
    let end = Unwinder::new().unwind(
        &regs,
        &StackCopy {
            sp: regs.sp,
            bytes: &stack,
        },
        &modules,
        &mut frames,
    );
    let aliases: Vec<Vec<String>> = modules
        .symbolize(&frames)
        .into_iter()
        .map(|n| {
            n.iter()
                .map(|n| rustc_demangle::demangle(n).to_string())
                .collect()
        })
        .collect();
    let names: Vec<String> = aliases.iter().map(|n| n.join("/")).collect();
    assert_eq!(end, UnwindEnd::Complete, "{names:#?}");
    assert!(names[0].contains("capture_own_stack"), "{names:#?}");
    assert!(
        names[1].contains("unwinds_the_test_binarys_own_rust_stack"),
        "{names:#?}"
    );
    assert_chain(&aliases[aliases.len() - 2..], &["start_thread", "clone3"]);
}

/// libc as mapped in this process, and its path.
fn libc_module() -> (Single, String) {
    let m = own_maps()
        .into_iter()
        .find(|m| m.path.contains("/libc.so") && m.perms == "r-xp")
        .unwrap();
    let image = read_module(Path::new(&m.path)).unwrap();
    let info = ElfInfo::parse((*image).as_ref()).unwrap();
    let module = Single {
        cfi: Arc::new(ModuleCfi::new(image)),
        bias: info.bias_for_mapping(m.start, m.offset).unwrap(),
        start: m.start,
        end: m.end,
    };
    (module, m.path)
}

#[test]
fn random_registers_and_stacks_never_panic() {
    let (libc, _) = libc_module();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut unwinder = Unwinder::with_options(UnwindOptions {
        cache_slots: 64,
        ..UnwindOptions::default()
    });
    let mut frames = Vec::new();
    for round in 0..3000 {
        let len = rng.below(4096) as usize & !7;
        let sp = 0x7ffc_0000_0000 + rng.below(1 << 20) * 8;
        // Words that point back into the copy or into libc make the walk go further.
        let stack: Vec<u64> = (0..len / 8)
            .map(|_| match rng.below(4) {
                0 => sp + rng.below(len as u64 + 64),
                1 => libc.start + rng.below(libc.end - libc.start),
                2 => 0,
                _ => rng.next(),
            })
            .collect();
        let bytes = words(&stack);
        let regs = Regs {
            ip: if round % 8 == 0 {
                rng.next()
            } else {
                libc.start + rng.below(libc.end - libc.start)
            },
            sp,
            bp: sp + rng.below(len as u64 + 64),
        };
        frames.clear();
        let end = unwinder.unwind(&regs, &StackCopy { sp, bytes: &bytes }, &libc, &mut frames);
        assert_eq!(frames[0], FrameAddress::InstructionPointer(regs.ip));
        assert!(frames.len() <= 512, "{end:?}");
    }
    let stats = unwinder.stats();
    assert_eq!(stats.unwinds, 3000);
    assert!(
        stats.cache_misses > 0 && stats.frame_pointer_steps > 0,
        "{stats:?}"
    );
}

/// Corrupted and truncated copies of libc's CFI: unwinding never panics, always
/// starts at the sampled ip, stays within the frame limit, gives the same result
/// with its rule cache as without (a cached rule from a broken table must not differ
/// from a fresh evaluation), and a copy cut before its tables has no CFI and never
/// claims a complete unwind through random words.
#[test]
fn corrupted_cfi_never_panics() {
    let (libc, path) = libc_module();
    let original = std::fs::read(&path).unwrap();
    let file = object::File::parse(&*original).unwrap();
    let ranges: Vec<(u64, u64)> = [".eh_frame_hdr", ".eh_frame"]
        .iter()
        .filter_map(|n| file.section_by_name(n)?.file_range())
        .collect();
    let tables_start = ranges.iter().map(|r| r.0).min().unwrap();
    let mut rng = Rng(42);
    let (mut cut_before_tables, mut unwinds) = (0, 0);
    for round in 0..40 {
        let mut data = original.clone();
        if round % 10 == 9 {
            // Every other cut falls before the tables.
            let limit = if round % 20 == 9 {
                tables_start
            } else {
                data.len() as u64
            };
            data.truncate(rng.below(limit) as usize);
        } else {
            for _ in 0..200 {
                let (off, size) = ranges[rng.below(ranges.len() as u64) as usize];
                data[(off + rng.below(size)) as usize] = rng.next() as u8;
            }
        }
        let no_tables = (data.len() as u64) < tables_start;
        let module = Single {
            cfi: Arc::new(ModuleCfi::new(image_from_vec(data))),
            ..libc
        };
        if no_tables {
            assert!(!module.cfi.has_cfi(), "round {round}: tables cut off");
            cut_before_tables += 1;
        }
        let mut cached = Unwinder::new();
        let mut uncached = Unwinder::with_options(UnwindOptions {
            cache_slots: 0,
            ..UnwindOptions::default()
        });
        for _ in 0..200 {
            let sp = 0x7ffc_0000_0000;
            let bytes = words(
                &(0..64)
                    .map(|_| module.start + rng.below(0x10_0000))
                    .collect::<Vec<_>>(),
            );
            let regs = Regs {
                ip: module.start + rng.below(module.end - module.start),
                sp,
                bp: sp + 64,
            };
            let stack = StackCopy { sp, bytes: &bytes };
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let end = cached.unwind(&regs, &stack, &module, &mut a);
            let end_uncached = uncached.unwind(&regs, &stack, &module, &mut b);
            assert_eq!(a[0], FrameAddress::InstructionPointer(regs.ip));
            assert!(a.len() <= UnwindOptions::default().max_frames);
            assert_eq!(
                (end, &a),
                (end_uncached, &b),
                "round {round}: cache changed the result"
            );
            if no_tables {
                assert!(matches!(end, UnwindEnd::Truncated(_)), "{end:?} {a:x?}");
            }
            unwinds += 1;
        }
    }
    assert_eq!(unwinds, 40 * 200);
    assert!(cut_before_tables >= 2, "{cut_before_tables}");
}

#[test]
fn garbage_image_has_no_tables() {
    let cfi = ModuleCfi::new(image_from_vec(b"\x7fELF garbage".to_vec()));
    assert!(!cfi.has_cfi());
    assert!(cfi.load_error().is_some());
}

#[test]
fn too_deep_keeps_the_first_frames() {
    // A frame-pointer loop: [bp] = bp+16, [bp+8] = ra, repeated.
    let sp = 0x7ffc_0000_0000u64;
    let stack: Vec<u64> = (0..2000u64)
        .flat_map(|i| [sp + 16 * (i + 1), 0x1000 + i])
        .collect();
    let bytes = words(&stack);
    let mut unwinder = Unwinder::with_options(UnwindOptions {
        max_frames: 100,
        ..UnwindOptions::default()
    });
    let mut frames = Vec::new();
    let end = unwinder.unwind(
        &Regs {
            ip: 0x42,
            sp,
            bp: sp,
        },
        &StackCopy { sp, bytes: &bytes },
        &NoModules,
        &mut frames,
    );
    assert_eq!(end, UnwindEnd::Truncated(TruncateReason::TooDeep));
    assert_eq!(frames.len(), 100);
    assert_eq!(addresses(&frames[..3]), [0x42, 0x1000, 0x1001]);
}

struct NoModules;

impl ModuleLookup for NoModules {
    fn lookup(&self, _: u64) -> Option<CodeModule<'_>> {
        None
    }
}

#[test]
fn frame_pointer_chain_ends_at_zero_rbp_or_zero_ra() {
    let sp = 0x7ffc_0000_0000u64;
    let mut frames = Vec::new();
    // bp chain: frame at sp -> frame at sp+16 whose saved rbp is 0.
    let bytes = words(&[sp + 16, 0x2000, 0, 0x3000]);
    let end = Unwinder::new().unwind(
        &Regs {
            ip: 0x1000,
            sp,
            bp: sp,
        },
        &StackCopy { sp, bytes: &bytes },
        &NoModules,
        &mut frames,
    );
    assert_eq!(
        (end, addresses(&frames)),
        (UnwindEnd::Complete, vec![0x1000, 0x2000, 0x3000])
    );
    frames.clear();
    let bytes = words(&[sp + 16, 0]);
    let end = Unwinder::new().unwind(
        &Regs {
            ip: 0x1000,
            sp,
            bp: sp,
        },
        &StackCopy { sp, bytes: &bytes },
        &NoModules,
        &mut frames,
    );
    assert_eq!(
        (end, addresses(&frames)),
        (UnwindEnd::Complete, vec![0x1000])
    );
}

#[test]
fn shared_types_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<ModuleCfi>();
    send::<Unwinder>();
}

/// `--call-graph fp`: a function at its first instruction has no frame yet, so the
/// kernel's walk (from rbp, still the caller's) skips its caller; the function's CFI
/// finds the caller on top of the stack. Once the function has set rbp up, the walk
/// is right and nothing is added.
#[test]
fn a_frameless_leafs_caller_comes_from_its_cfi() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), &["-O2", "-fno-omit-frame-pointer"]);
    let info = ElfInfo::parse(&std::fs::read(&exe).unwrap()).unwrap();
    let main = Symbols::load(&exe, &info).address_of("main").unwrap();
    let bias = 0x5555_5555_0000;
    let module = Single::of(&exe, bias);
    let (sp, ra) = (0x7ffc_0000_0000, 0x7f00_1234_5678);
    let stack = words(&[ra, 0, 0, 0]);
    let copy = StackCopy { sp, bytes: &stack };
    let mut unwinder = Unwinder::new();
    let at = |u: &mut Unwinder, offset: u64| {
        let regs = Regs {
            ip: bias + main + offset,
            sp,
            bp: sp + 0x100,
        };
        u.caller_of_frameless_leaf(&regs, &copy, &module)
    };
    assert_eq!(at(&mut unwinder, 0), Some(ra));
    // `push %rbp; mov %rsp,%rbp` is 4 bytes: by then the frame is rbp-based.
    assert!(
        (1..=16).any(|offset| at(&mut unwinder, offset).is_none()),
        "main's frame never becomes rbp-based"
    );
    // Too short a copy to hold the return address: no guess.
    let short = StackCopy { sp, bytes: &[] };
    let regs = Regs {
        ip: bias + main,
        sp,
        bp: 0,
    };
    assert_eq!(
        unwinder.caller_of_frameless_leaf(&regs, &short, &module),
        None
    );
}
