//! The few symbols a runtime reader needs from a binary (V8's `v8dbg_*`, CPython's
//! `_PyRuntime`), found without reading every name. Node's binary has about 110,000
//! static and 75,000 dynamic symbols: reading each name (a search for its end, a
//! UTF-8 check) cost a recording about 30 ms per reader, where comparing a prefix in
//! the string table's bytes costs a few (docs/runtimes.md, "Recorder CPU").

use object::Endianness;
use object::elf;
use object::read::elf::{ElfFile64, SectionHeader, Sym as _};

/// An ELF symbol as the file holds it.
pub type Sym = elf::Sym64<Endianness>;

/// A 64-bit ELF file as the readers parse it.
pub type File<'d> = ElfFile64<'d, Endianness>;

/// Fills a buffer with a file's bytes at an offset; false if they are not there.
pub type ReadAt<'a> = &'a dyn Fn(u64, &mut [u8]) -> bool;

/// The symbols of `file`'s dynamic (`dynamic` true) or static symbol table whose
/// names start with one of `prefixes`, with their names (the bytes up to the
/// terminating zero; a name that runs off its table is left out). Empty when the
/// file has no such table or its headers point outside the image.
pub fn prefixed<'d>(
    file: &File<'d>,
    dynamic: bool,
    prefixes: &[&[u8]],
) -> Vec<(&'d Sym, &'d [u8])> {
    let endian = file.endian();
    let data = file.data();
    let sections = file.elf_section_table();
    let kind = if dynamic {
        elf::SHT_DYNSYM
    } else {
        elf::SHT_SYMTAB
    };
    let Some(header) = sections.iter().find(|s| s.sh_type(endian) == kind) else {
        return Vec::new();
    };
    let Ok(symbols) = header.data_as_array::<Sym, _>(endian, data) else {
        return Vec::new();
    };
    let strings = sections
        .section(object::SectionIndex(header.sh_link(endian) as usize))
        .ok()
        .and_then(|s| s.data(endian, data).ok())
        .unwrap_or_default();
    symbols
        .iter()
        .filter_map(|s| {
            let at = usize::try_from(s.st_name(endian)).ok()?;
            let rest = strings.get(at..)?;
            if !prefixes.iter().any(|p| rest.starts_with(p)) {
                return None;
            }
            let end = rest.iter().position(|&b| b == 0)?;
            Some((s, &rest[..end]))
        })
        .collect()
}
