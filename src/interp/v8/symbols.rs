//! The symbols of a Node binary the V8 reader needs: the `v8dbg_*` values
//! ([`values`]) and the range of the `Builtins_*` ([`builtins`]), found by prefix
//! ([`crate::interp::elf_symbols`]) without reading the other names.

use std::collections::HashMap;

use object::read::elf::{SectionHeader, Sym as _};

use crate::interp::elf_symbols::{File, ReadAt, prefixed};

/// The `v8dbg_*` values of an ELF file, by name without the prefix, from its dynamic
/// symbol table (else its static one). The image may lack the file's data sections
/// (the recorder's images hold only what unwinding and naming use), so each value
/// is read from the file with `read_at`: a 4-byte `int`, or 0 in `.bss`.
pub(super) fn values(file: &File<'_>, read_at: ReadAt<'_>) -> HashMap<String, i64> {
    let endian = file.endian();
    let sections = file.elf_section_table();
    let found = [true, false]
        .into_iter()
        .map(|dynamic| prefixed(file, dynamic, &[b"v8dbg_"]))
        .find(|v| !v.is_empty())
        .unwrap_or_default();
    let mut out = HashMap::new();
    for (s, name) in found {
        let Ok(name) = std::str::from_utf8(&name[b"v8dbg_".len()..]) else {
            continue;
        };
        let Some(index) = s.st_shndx(endian).index() else {
            continue;
        };
        let Ok(section) = sections.section(object::SectionIndex(usize::from(index))) else {
            continue;
        };
        let value = if section.sh_type(endian) == object::elf::SHT_NOBITS {
            0
        } else {
            let Some((start, size)) = section.file_range(endian) else {
                continue;
            };
            let Some(off) = s.st_value(endian).checked_sub(section.sh_addr(endian)) else {
                continue;
            };
            if off.saturating_add(4) > size {
                continue;
            }
            let mut b = [0u8; 4];
            if !read_at(start + off, &mut b) {
                continue;
            }
            i64::from(i32::from_le_bytes(b))
        };
        out.insert(name.to_owned(), value);
    }
    out
}

/// The file address range of the `Builtins_*` symbols of the static symbol table;
/// None without one (a stripped binary).
pub(super) fn builtins(file: &File<'_>) -> Option<(u64, u64)> {
    let endian = file.endian();
    let found = prefixed(file, false, &[b"Builtins_"]);
    let mut range: Option<(u64, u64)> = None;
    for (s, _) in found {
        let (at, size) = (s.st_value(endian), s.st_size(endian));
        if at == 0 {
            continue;
        }
        let end = at.saturating_add(size.max(1));
        range = Some(match range {
            Some((lo, hi)) => (lo.min(at), hi.max(end)),
            None => (at, end),
        });
    }
    range
}
