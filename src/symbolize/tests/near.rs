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

/// A module read with its names left on disk (`elf::read_module_leaving_names`, as
/// node is) names the addresses as the module read whole does, near some addresses
/// and over the whole table; the image holds no name.
#[test]
fn names_left_on_disk_name_as_names_in_memory_do() {
    use object::read::elf::Sym as _;
    let exe = std::env::current_exe().expect("the test binary");
    let whole = crate::elf::read_module(&exe).expect("read the test binary");
    let left = crate::elf::read_module_leaving_names(&exe, usize::MAX).expect("read again");
    assert!(left.names_on_disk() && !whole.names_on_disk());
    let in_memory = object::File::parse((*whole).as_ref()).expect("an ELF file");
    let on_disk = object::File::parse((*left).as_ref()).expect("an ELF file");
    let object::File::Elf64(elf) = &on_disk else {
        panic!("a 64-bit ELF file")
    };
    let endian = elf.endian();
    let named = elf.elf_symbol_table().symbols().iter();
    let zeroes = named.filter(|s| s.st_name(endian) != 0).take(100);
    assert!(
        zeroes
            .map(|s| elf.elf_symbol_table().symbol_name(endian, s))
            .all(|n| n.is_ok_and(<[u8]>::is_empty)),
        "names were read into memory"
    );
    let starts: Vec<u64> = in_memory
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
        .map(|s| s.address())
        .step_by(89)
        .collect();
    let svmas: Vec<u64> = (starts.iter()).flat_map(|&a| [a, a + 1, a - 1]).collect();
    let (mut all, mut all_disk) = (SymbolTable::default(), SymbolTable::default());
    all.add_file(&in_memory);
    all.add_plt(&in_memory);
    all.finish();
    all_disk.add_disk_file(elf, &*left);
    all_disk.add_disk_plt(&on_disk, elf, &*left);
    all_disk.finish();
    let mut near = SymbolTable::default();
    near.add_disk_near(elf, &*left, &svmas);
    near.retain_near(&svmas);
    near.finish();
    assert_eq!(all.len(), all_disk.len());
    assert!(
        near.len() < all.len() / 10,
        "{} of {}",
        near.len(),
        all.len()
    );
    for &a in &svmas {
        assert_eq!(near.lookup(a), all.lookup(a), "at {a:#x}");
        assert_eq!(all_disk.lookup(a), all.lookup(a), "at {a:#x}");
    }
}
