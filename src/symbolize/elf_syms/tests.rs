//! Tests of [`super::SymbolTable`]: shapes of symbols and PLT stubs, and the
//! tables of this test binary and the system's libc.

use super::*;

/// `syms` as read, before [`SymbolTable::finish`].
fn read(syms: &[(u64, u64, &'static str)]) -> SymbolTable<'static> {
    SymbolTable {
        syms: syms
            .iter()
            .map(|&(svma, size, name)| Sym {
                svma,
                size,
                name: Cow::Borrowed(name),
            })
            .collect(),
    }
}

fn table(syms: &[(u64, u64, &'static str)]) -> SymbolTable<'static> {
    let mut t = read(syms);
    t.finish();
    t
}

#[test]
fn functions_no_symbol_covers_are_named_by_their_start() {
    // An exported function with a symbol, two internal ones without.
    let mut t = table(&[(0x1000, 0x40, "exported")]);
    let ranges = [(0x1000, 0x40 + 0x1000), (0x1040, 0x1080), (0x2000, 0x2100)];
    t.add_unnamed_functions(&ranges, "libx.so");
    assert_eq!(t.lookup(0x1010), Some("exported"));
    assert_eq!(t.lookup(0x1040), Some("fn_1040@libx.so"));
    assert_eq!(t.lookup(0x107f), Some("fn_1040@libx.so"));
    assert_eq!(t.lookup(0x1080), None, "between functions");
    assert_eq!(t.lookup(0x20ff), Some("fn_2000@libx.so"));
    assert_eq!(t.lookup(0x2100), None);
    // Empty and zero-address ranges are no functions.
    let mut t = table(&[]);
    t.add_unnamed_functions(&[(0, 0x10), (0x500, 0x500)], "m");
    assert_eq!(t.lookup(0x5), None);
    assert_eq!(t.lookup(0x500), None);
}

/// The symbols kept for a few addresses name them as the whole table does: the
/// covering one, the nearest below, a zero-size one up to the next symbol, none
/// past a sized one's end or below the first; aliases at one address as at
/// first (a sized one before a zero-size one).
#[test]
fn symbols_kept_for_some_addresses_name_them_as_all_do() {
    let all = [
        (0x1000, 0x10, "a"),
        (0x1000, 0, "a_alias"),
        (0x2000, 0, "b"),
        (0x2800, 0, "b2"),
        (0x3000, 0x8, "c"),
        (0x3000, 0x8, "c_alias"),
        (0x4000, 0x100, "d"),
        (0x5000, 0, "e"),
    ];
    let whole = table(&all);
    let probes = [
        0xfff,
        0x1000,
        0x1008,
        0x1010,
        0x1fff,
        0x2000,
        0x27ff,
        0x2800,
        0x2fff,
        0x3004,
        0x3008,
        0x4050,
        0x4100,
        0x5000,
        0xffff_ffff,
    ];
    for n in 1..=3 {
        for addrs in probes.windows(n) {
            let mut t = read(&all);
            t.retain_near(addrs);
            t.finish();
            assert!(t.len() <= addrs.len() + 1, "{addrs:x?}: {} kept", t.len());
            for &a in addrs {
                assert_eq!(t.lookup(a), whole.lookup(a), "{a:#x} of {addrs:x?}");
                assert_eq!(t.lookup_nearest(a), whole.lookup_nearest(a), "{a:#x}");
            }
        }
    }
}

#[test]
fn sized_and_unsized_symbols() {
    let t = table(&[(0x2000, 0, "b"), (0x1000, 0x10, "a"), (0x3000, 0x8, "c")]);
    assert_eq!(t.lookup(0xfff), None);
    assert_eq!(t.lookup(0x1000), Some("a"));
    assert_eq!(t.lookup(0x100f), Some("a"));
    assert_eq!(t.lookup(0x1010), None, "past a's size");
    assert_eq!(t.lookup(0x2fff), Some("b"), "b is bounded by c");
    assert_eq!(t.lookup(0x3007), Some("c"));
    assert_eq!(t.lookup(0x3008), None);
}

#[test]
fn first_sized_symbol_at_an_address_wins() {
    let t = table(&[(0x10, 0, "alias0"), (0x10, 4, "real"), (0x10, 4, "dyn")]);
    assert_eq!(t.len(), 1);
    assert_eq!(t.lookup(0x12), Some("real"));
}

#[test]
fn own_executable_has_this_function() {
    let data = std::fs::read("/proc/self/exe").unwrap();
    let file = object::File::parse(&*data).unwrap();
    let mut t = SymbolTable::default();
    t.add_file(&file);
    t.finish();
    assert!(t.len() > 100);
    let name = (0..t.syms.len())
        .map(|i| t.syms[i].name.clone())
        .find(|n| n.contains("own_executable_has_this_function"))
        .expect("symbol of this test");
    let sym = t.syms.iter().find(|s| s.name == name).unwrap();
    assert_eq!(t.lookup(sym.svma + 1), Some(&*name));
}

/// The three shapes of x86_64 PLT stubs: lazy `.plt` (jmp, push, jmp), `.plt.sec`
/// with IBT (endbr64, bnd jmp, nop), and a `.plt.got` stub (jmp, xchg).
#[test]
fn plt_stub_shapes() {
    let base = 0x1000u64;
    let jmp = |at: u64, slot: u64| {
        let disp = (slot as i64 - (at as i64 + 6)) as i32;
        let mut v = vec![0xff, 0x25];
        v.extend_from_slice(&disp.to_le_bytes());
        v
    };
    let slots: HashMap<u64, Cow<str>> = [(0x4018, "memcpy"), (0x4020, "free"), (0x4028, "puts")]
        .into_iter()
        .map(|(slot, name)| (slot, Cow::Borrowed(name)))
        .collect();
    // PLT0 (push, jmp to the resolver through a slot no symbol has).
    let mut data = vec![0xff, 0x35, 0, 0, 0, 0];
    data.extend(jmp(base + 6, 0x4010));
    data.resize(16, 0x90);
    // Lazy stub at 0x1010: jmp *memcpy; push 0; jmp PLT0.
    data.extend(jmp(base + 16, 0x4018));
    data.extend([0x68, 0, 0, 0, 0, 0xe9, 0, 0, 0, 0]);
    // IBT stub at 0x1020: endbr64; bnd jmp *free; nop.
    data.extend([0xf3, 0x0f, 0x1e, 0xfa, 0xf2]);
    data.extend(jmp(base + 37, 0x4020));
    data.resize(48, 0x90);
    // .plt.got stub at 0x1030: jmp *puts; xchg %ax,%ax.
    data.extend(jmp(base + 48, 0x4028));
    data.extend([0x66, 0x90]);
    assert_eq!(
        plt_stubs(&data, base, &slots),
        [(0x1010, "memcpy"), (0x1020, "free"), (0x1030, "puts")]
    );
}

/// PLT stubs whose GOT slot an IRELATIVE relocation fills (ifuncs a library calls
/// through its own PLT: glibc's memcpy, strlen...) are named after the ifunc, and do
/// not stretch the name of the stub before them over themselves.
#[test]
fn irelative_plt_stubs_of_the_system_libc_get_their_own_names() {
    let path = "/lib/x86_64-linux-gnu/libc.so.6";
    let Ok(data) = std::fs::read(path) else {
        eprintln!("skipped: no {path}");
        return;
    };
    let file = object::File::parse(&*data).unwrap();
    let mut t = SymbolTable::default();
    t.add_file(&file);
    t.add_plt(&file);
    t.finish();
    let plt = file
        .sections()
        .find(|s| s.name() == Ok(".plt"))
        .expect("libc has a .plt");
    let (start, end) = (plt.address(), plt.address() + plt.size());
    let names: Vec<String> = t
        .syms
        .iter()
        .filter(|s| (start..end).contains(&s.svma))
        .map(|s| s.name.to_string())
        .collect();
    let irelative = file
        .dynamic_relocations()
        .unwrap()
        .filter(|(_, r)| r.target() == RelocationTarget::Absolute && r.addend() > 0)
        .count();
    assert!(irelative > 0, "glibc calls ifuncs through its PLT");
    // Each stub its own symbol: as many as the PLT has stubs (16 bytes each, less PLT0).
    assert_eq!(names.len() as u64, plt.size() / 16 - 1, "{names:?}");
    assert!(names.iter().all(|n| n.ends_with("@plt")), "{names:?}");
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("mem") || n.starts_with("str")),
        "ifunc stubs named after their function: {names:?}"
    );
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert!(
        unique.len() * 2 > names.len(),
        "stubs mostly distinct: {names:?}"
    );
}
