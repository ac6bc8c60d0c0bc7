//! Symbol names read from the module's file, for an image whose string tables were
//! left on disk (`elf::read_module_leaving_names`: node's 12.8 MB of names, of which a
//! recording names a few hundred). The tables' entries are in memory; each name
//! wanted is read from the file, or a table's names whole when all are wanted.

use std::borrow::Cow;

use object::elf::FileHeader64;
use object::read::elf::{ElfFile64, SectionHeader, Sym as _, SymbolTable as ElfTable};
use object::{Endianness, ObjectSymbol};

use super::{Sym, SymbolTable, highest_below, is_function};
use crate::elf::{ImageData, read_name};

type Table<'a> = ElfTable<'a, FileHeader64<Endianness>>;

/// Where a symbol table's string table lies in the file: offset and end.
fn strings_at(elf: &ElfFile64<'_, Endianness>, table: &Table<'_>) -> Option<(u64, u64)> {
    let endian = elf.endian();
    let section = elf
        .elf_section_table()
        .section(table.string_section())
        .ok()?;
    let (offset, size) = section.file_range(endian)?;
    Some((offset, offset.checked_add(size)?))
}

/// The name at `st_name` of the string table at `strings`, read from the file.
fn name_at(image: &dyn ImageData, (offset, end): (u64, u64), st_name: u32) -> Option<String> {
    let at = offset.checked_add(u64::from(st_name))?;
    let name = String::from_utf8(read_name(image, at, end)?).ok()?;
    (!name.is_empty()).then_some(name)
}

impl<'a> SymbolTable<'a> {
    /// [`SymbolTable::add_file_near`] for an image whose names are on disk: the
    /// symbols at the highest SVMA at or below one of `svmas`, each name read from
    /// the file (one that cannot be read or is not UTF-8 is left out).
    pub(crate) fn add_disk_near(
        &mut self,
        elf: &ElfFile64<'a, Endianness>,
        image: &dyn ImageData,
        svmas: &[u64],
    ) {
        let endian = elf.endian();
        let tables = [elf.elf_symbol_table(), elf.elf_dynamic_symbol_table()];
        let function = |s: &&'a object::elf::Sym64<Endianness>| is_function(s, endian);
        let all = tables
            .iter()
            .flat_map(|t| t.symbols().iter().filter(function));
        let wanted = highest_below(all.map(|s| s.st_value(endian)), svmas);
        for table in tables {
            let Some(strings) = strings_at(elf, table) else {
                continue;
            };
            for sym in table.symbols().iter().filter(function) {
                let svma = sym.st_value(endian);
                if wanted.binary_search(&svma).is_err() {
                    continue;
                }
                if let Some(name) = name_at(image, strings, sym.st_name(endian)) {
                    self.syms.push(Sym {
                        svma,
                        size: sym.st_size(endian),
                        name: Cow::Owned(name),
                    });
                }
            }
        }
    }

    /// [`SymbolTable::add_file`] for an image whose names are on disk: each table's
    /// names read whole from the file, once.
    pub(crate) fn add_disk_file(&mut self, elf: &ElfFile64<'a, Endianness>, image: &dyn ImageData) {
        let endian = elf.endian();
        for table in [elf.elf_symbol_table(), elf.elf_dynamic_symbol_table()] {
            let Some((offset, end)) = strings_at(elf, table) else {
                continue;
            };
            let Ok(len) = usize::try_from(end - offset) else {
                continue;
            };
            let mut strings = vec![0u8; len];
            if !image.read_at(offset, &mut strings) {
                continue;
            }
            for sym in table.symbols().iter().filter(|s| is_function(s, endian)) {
                let Some(rest) = usize::try_from(sym.st_name(endian))
                    .ok()
                    .and_then(|at| strings.get(at..))
                else {
                    continue;
                };
                let Some(end) = rest.iter().position(|&b| b == 0) else {
                    continue;
                };
                match std::str::from_utf8(&rest[..end]) {
                    Ok(name) if !name.is_empty() => self.syms.push(Sym {
                        svma: sym.st_value(endian),
                        size: sym.st_size(endian),
                        name: Cow::Owned(name.to_owned()),
                    }),
                    _ => {}
                }
            }
        }
    }

    /// [`SymbolTable::add_plt`] for an image whose names are on disk: the names of
    /// the dynamic symbols the PLT's relocations refer to read from the file (an
    /// ifunc's stub, named by its resolver's name in memory, is `*ABS*+0x…` here).
    pub(crate) fn add_disk_plt(
        &mut self,
        file: &object::File<'a>,
        elf: &ElfFile64<'a, Endianness>,
        image: &dyn ImageData,
    ) {
        let endian = elf.endian();
        let dynsyms = elf.elf_dynamic_symbol_table();
        let Some(strings) = strings_at(elf, dynsyms) else {
            return;
        };
        let name = |sym: &object::Symbol<'a, '_>| {
            let entry = dynsyms.symbol(sym.index()).ok()?;
            name_at(image, strings, entry.st_name(endian)).map(Cow::Owned)
        };
        self.add_plt_named(file, &name);
    }
}
