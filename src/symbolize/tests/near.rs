//! The symbols read for a few addresses only ([`SymbolTable::add_file_near`], which
//! reads a 64-bit ELF file's tables as they are) name those addresses as the whole
//! table does.

use object::{Object, ObjectSymbol, SymbolKind};

use crate::symbolize::elf_syms::SymbolTable;

#[test]
fn symbols_read_near_some_addresses_name_them_as_all_symbols_do() {
    let exe = std::env::current_exe().expect("the test binary");
    let bytes = std::fs::read(exe).expect("read the test binary");
    let file = object::File::parse(&*bytes).expect("an ELF file");
    assert!(
        matches!(file, object::File::Elf64(_)),
        "the ELF path is tested"
    );
    let starts: Vec<u64> = file
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
        .map(|s| s.address())
        .step_by(97)
        .collect();
    assert!(starts.len() > 50, "{} functions sampled", starts.len());
    // Each function's start, a byte into it, and a byte before it.
    let svmas: Vec<u64> = (starts.iter()).flat_map(|&a| [a, a + 1, a - 1]).collect();
    let mut all = SymbolTable::default();
    all.add_file(&file);
    all.finish();
    let mut near = SymbolTable::default();
    near.add_file_near(&file, &svmas);
    near.retain_near(&svmas);
    near.finish();
    assert!(
        near.len() < all.len() / 10,
        "{} of {}",
        near.len(),
        all.len()
    );
    for &a in &svmas {
        assert_eq!(near.lookup(a), all.lookup(a), "at {a:#x}");
        assert_eq!(near.lookup_nearest(a), all.lookup_nearest(a), "at {a:#x}");
    }
}
