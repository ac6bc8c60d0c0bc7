//! Function names from ELF symbol tables (`.symtab`, then `.dynsym`), the fallback when
//! a module has no DWARF for an address. Symbols of every source are gathered once per
//! module, sorted by SVMA, and looked up by binary search: a symbol covers
//! `[value, value + size)`, or up to the next symbol when its size is 0. PLT stubs,
//! which have no symbols, are named as perf and objdump name them: `memcpy@plt`.

use std::borrow::Cow;
use std::collections::HashMap;

use object::read::elf::{ElfFile64, Sym as _};

mod disk;
use object::{
    Architecture, Endianness, Object, ObjectSection, ObjectSymbol, ObjectSymbolTable,
    RelocationTarget, SymbolKind, elf,
};

/// One function symbol; the name borrows the module's (or debug file's) bytes, except
/// the `NAME@plt` names made up for PLT stubs.
#[derive(Debug, Clone)]
struct Sym<'a> {
    svma: u64,
    size: u64,
    name: Cow<'a, str>,
}

/// The sorted function symbols of one module.
#[derive(Debug, Default)]
pub(crate) struct SymbolTable<'a> {
    syms: Vec<Sym<'a>>,
}

impl<'a> SymbolTable<'a> {
    /// Adds the function symbols of `file`'s `.symtab` and then `.dynsym`. Call
    /// [`SymbolTable::finish`] after the last file.
    pub(crate) fn add_file(&mut self, file: &object::File<'a>) {
        for sym in file.symbols().chain(file.dynamic_symbols()) {
            if sym.kind() != SymbolKind::Text || sym.is_undefined() || sym.address() == 0 {
                continue;
            }
            let Ok(name) = sym.name() else { continue };
            if name.is_empty() {
                continue;
            }
            self.syms.push(Sym {
                svma: sym.address(),
                size: sym.size(),
                name: Cow::Borrowed(name),
            });
        }
    }

    /// [`SymbolTable::add_file`] for a lookup of `svmas` only: of `file`'s function
    /// symbols, those at the highest SVMA at or below one of them (see
    /// [`SymbolTable::retain_near`]), found in a first pass that reads no name, so
    /// that only their names are read. A symbol chosen whose name cannot be used
    /// (empty, not UTF-8) makes it add the whole file, as the one below it may name
    /// the address then.
    pub(crate) fn add_file_near(&mut self, file: &object::File<'a>, svmas: &[u64]) {
        if let object::File::Elf64(elf) = file {
            // The tables' entries read as they are: node's 185,000 symbols went
            // through the generic reader at 40 ns each (docs/runtimes.md).
            return self.add_elf_near(file, elf, svmas);
        }
        let functions = || {
            file.symbols()
                .chain(file.dynamic_symbols())
                .filter(|s| s.kind() == SymbolKind::Text && !s.is_undefined() && s.address() != 0)
        };
        let wanted = highest_below(functions().map(|s| s.address()), svmas);
        let added = self.syms.len();
        for sym in functions() {
            if wanted.binary_search(&sym.address()).is_err() {
                continue;
            }
            match sym.name() {
                Ok(name) if !name.is_empty() => self.syms.push(Sym {
                    svma: sym.address(),
                    size: sym.size(),
                    name: Cow::Borrowed(name),
                }),
                _ => {
                    self.syms.truncate(added);
                    self.add_file(file);
                    return;
                }
            }
        }
    }

    /// [`SymbolTable::add_file_near`] over a 64-bit ELF file's symbol tables.
    fn add_elf_near(
        &mut self,
        file: &object::File<'a>,
        elf: &ElfFile64<'a, Endianness>,
        svmas: &[u64],
    ) {
        let endian = elf.endian();
        let tables = [elf.elf_symbol_table(), elf.elf_dynamic_symbol_table()];
        let function = |s: &&'a elf::Sym64<Endianness>| is_function(s, endian);
        let all = tables
            .iter()
            .flat_map(|t| t.symbols().iter().filter(function));
        let wanted = highest_below(all.map(|s| s.st_value(endian)), svmas);
        let added = self.syms.len();
        for table in tables {
            for sym in table.symbols().iter().filter(function) {
                let svma = sym.st_value(endian);
                if wanted.binary_search(&svma).is_err() {
                    continue;
                }
                let name = table.symbol_name(endian, sym).ok();
                match name.and_then(|n| std::str::from_utf8(n).ok()) {
                    Some(name) if !name.is_empty() => self.syms.push(Sym {
                        svma,
                        size: sym.st_size(endian),
                        name: Cow::Borrowed(name),
                    }),
                    _ => {
                        self.syms.truncate(added);
                        self.add_file(file);
                        return;
                    }
                }
            }
        }
    }

    /// Adds a `NAME@plt` symbol for each PLT stub of `file` (x86_64: `.plt`,
    /// `.plt.sec`, and `.plt.got` when its GLOB_DAT relocations were read). The linker gives stubs no symbols, so without these a
    /// stub takes the name of the last symbol before it, usually the zero-size `_init`
    /// stretched over the whole PLT. A stub is an indirect `jmp *GOT(%rip)`, possibly
    /// after `endbr64` and a `bnd` prefix; the dynamic relocation of its GOT slot names
    /// the function. Add the module's own file, not a debug file (its PLT has no bytes).
    pub(crate) fn add_plt(&mut self, file: &object::File<'a>) {
        let name = |sym: &object::Symbol<'a, '_>| {
            sym.name().ok().filter(|n| !n.is_empty()).map(Cow::Borrowed)
        };
        self.add_plt_named(file, &name);
    }

    /// [`SymbolTable::add_plt`], the dynamic symbols' names given by `name`.
    fn add_plt_named(
        &mut self,
        file: &object::File<'a>,
        name: &dyn for<'f> Fn(&object::Symbol<'a, 'f>) -> Option<Cow<'a, str>>,
    ) {
        if file.architecture() != Architecture::X86_64 {
            return;
        }
        let (Some(relocs), Some(dynsyms)) =
            (file.dynamic_relocations(), file.dynamic_symbol_table())
        else {
            return;
        };
        let mut slots: HashMap<u64, Cow<'a, str>> = HashMap::new();
        // IRELATIVE slots (ifuncs called through the PLT, such as libc's own memcpy)
        // name no symbol: their addend is the resolver, named below.
        let mut ifuncs: Vec<(u64, u64)> = Vec::new();
        for (slot, rel) in relocs {
            match rel.target() {
                RelocationTarget::Symbol(idx) => {
                    if let Some(name) = dynsyms.symbol_by_index(idx).ok().and_then(|s| name(&s)) {
                        slots.insert(slot, name);
                    }
                }
                RelocationTarget::Absolute if rel.addend() > 0 => {
                    ifuncs.push((slot, rel.addend() as u64));
                }
                _ => {}
            }
        }
        if !ifuncs.is_empty() {
            // The ifunc symbol's value is its resolver: name the stub after it, else as
            // perf does (`*ABS*+0x...`).
            let mut by_addr: HashMap<u64, &'a str> = HashMap::new();
            for sym in file.symbols().chain(file.dynamic_symbols()) {
                if let Ok(name) = sym.name()
                    && !name.is_empty()
                {
                    by_addr.entry(sym.address()).or_insert(name);
                }
            }
            for (slot, resolver) in ifuncs {
                let name = match by_addr.get(&resolver) {
                    Some(name) => Cow::Borrowed(*name),
                    None => Cow::Owned(format!("*ABS*+{resolver:#x}")),
                };
                slots.insert(slot, name);
            }
        }
        if slots.is_empty() {
            return;
        }
        for section in file.sections() {
            if !matches!(section.name(), Ok(".plt" | ".plt.sec" | ".plt.got")) {
                continue;
            }
            let Ok(data) = section.data() else { continue };
            let base = section.address();
            let stubs = plt_stubs(data, base, &slots);
            let end = base + data.len() as u64;
            for (k, (svma, name)) in stubs.iter().enumerate() {
                let svma = *svma;
                let next = stubs.get(k + 1).map_or(end, |n| n.0);
                self.syms.push(Sym {
                    svma,
                    size: next - svma,
                    name: Cow::Owned(format!("{name}@plt")),
                });
            }
        }
    }

    /// Sorts the symbols; at one address the first added with a size wins (`.symtab`
    /// before `.dynsym`, the module before its debug file).
    pub(crate) fn finish(&mut self) {
        // Stable sort keeps the order of addition among equal addresses.
        self.syms.sort_by_key(|s| s.svma);
        let mut kept: Vec<Sym<'a>> = Vec::with_capacity(self.syms.len());
        for sym in self.syms.drain(..) {
            match kept.last_mut() {
                Some(last) if last.svma == sym.svma => {
                    if last.size == 0 && sym.size != 0 {
                        *last = sym;
                    }
                }
                _ => kept.push(sym),
            }
        }
        self.syms = kept;
    }

    /// Keeps only the symbols a lookup of `svmas` can return (at each address, those
    /// at the highest SVMA at or below it), before [`SymbolTable::finish`]: naming a
    /// few addresses of a large module then sorts a few symbols, not all of them.
    /// [`SymbolTable::lookup`] and [`SymbolTable::lookup_nearest`] of `svmas` give
    /// what they give over the whole table (a zero-size symbol still ends before
    /// the next symbol of the file, which lies above the address).
    pub(crate) fn retain_near(&mut self, svmas: &[u64]) {
        let wanted = highest_below(self.syms.iter().map(|s| s.svma), svmas);
        self.syms.retain(|s| wanted.binary_search(&s.svma).is_ok());
    }

    /// Names each function of `ranges` (from the unwind tables) that no symbol covers
    /// `fn_START@MODULE` (its start as `objdump -d` shows it): a stripped module's
    /// internal functions, whose samples would otherwise scatter over one row per
    /// address. Call after [`SymbolTable::finish`]; it finishes again.
    pub(crate) fn add_unnamed_functions(&mut self, ranges: &[(u64, u64)], module: &str) {
        let unnamed: Vec<Sym<'a>> = ranges
            .iter()
            .filter(|&&(start, end)| start != 0 && end > start && self.lookup(start).is_none())
            .map(|&(start, end)| Sym {
                svma: start,
                size: end - start,
                name: Cow::Owned(format!("fn_{start:x}@{module}")),
            })
            .collect();
        if !unnamed.is_empty() {
            self.syms.extend(unnamed);
            self.finish();
        }
    }

    /// The table with every name owned, to be kept after the files it was read from.
    pub(crate) fn into_owned(self) -> SymbolTable<'static> {
        let syms = self
            .syms
            .into_iter()
            .map(|s| Sym {
                svma: s.svma,
                size: s.size,
                name: Cow::Owned(s.name.into_owned()),
            })
            .collect();
        SymbolTable { syms }
    }

    /// About the memory the table takes, in bytes.
    pub(crate) fn approx_bytes(&self) -> usize {
        self.syms.capacity() * std::mem::size_of::<Sym<'_>>()
            + self.syms.iter().map(|s| s.name.len()).sum::<usize>()
    }

    /// Number of distinct symbol addresses.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.syms.len()
    }

    /// The raw (possibly mangled) name of the function symbol containing `svma`.
    pub(crate) fn lookup(&self, svma: u64) -> Option<&str> {
        let idx = self
            .syms
            .partition_point(|s| s.svma <= svma)
            .checked_sub(1)?;
        let sym = &self.syms[idx];
        let end = if sym.size != 0 {
            sym.svma.saturating_add(sym.size)
        } else {
            self.syms.get(idx + 1).map_or(u64::MAX, |next| next.svma)
        };
        (svma < end).then_some(&sym.name)
    }

    /// Like [`SymbolTable::lookup`] but ignoring sizes: the last symbol at or below
    /// `svma`. For addresses the line table claims but no sized symbol covers
    /// (alignment padding after a function), named as binutils names them.
    pub(crate) fn lookup_nearest(&self, svma: u64) -> Option<&str> {
        let idx = self
            .syms
            .partition_point(|s| s.svma <= svma)
            .checked_sub(1)?;
        Some(&self.syms[idx].name)
    }
}

/// Of the symbol addresses `symbols`, the highest at or below each of `svmas`, sorted
/// and each once.
/// What `SymbolKind::Text`, defined and not at 0, is for an ELF symbol.
fn is_function(s: &elf::Sym64<Endianness>, endian: Endianness) -> bool {
    matches!(s.st_type(), elf::STT_FUNC | elf::STT_GNU_IFUNC)
        && s.st_shndx(endian) != elf::SHN_UNDEF
        && s.st_value(endian) != 0
}

fn highest_below(symbols: impl Iterator<Item = u64>, svmas: &[u64]) -> Vec<u64> {
    let mut at: Vec<u64> = svmas.to_vec();
    at.sort_unstable();
    at.dedup();
    // The highest symbol between each address and the one before it.
    let mut best: Vec<Option<u64>> = vec![None; at.len()];
    for svma in symbols {
        let i = at.partition_point(|&a| a < svma);
        if let Some(b) = best.get_mut(i) {
            *b = Some(b.map_or(svma, |v| v.max(svma)));
        }
    }
    // A symbol below an address counts for the addresses above it too.
    let mut wanted: Vec<u64> = Vec::with_capacity(at.len());
    let mut high = None;
    for b in best {
        high = high.max(b);
        wanted.extend(high);
    }
    wanted.dedup();
    wanted
}

/// The stubs in the PLT section bytes `data` (at `base`): each one's address and the
/// name of the function whose GOT slot (in `slots`) it jumps through, in address order.
fn plt_stubs<'s, 'a>(
    data: &[u8],
    base: u64,
    slots: &'s HashMap<u64, Cow<'a, str>>,
) -> Vec<(u64, &'s str)> {
    const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];
    let mut stubs: Vec<(u64, &'s str)> = Vec::new();
    let mut i = 0;
    while i + 6 <= data.len() {
        // jmp *disp32(%rip): ff 25 disp32, the target slot relative to its end.
        if data[i] != 0xff || data[i + 1] != 0x25 {
            i += 1;
            continue;
        }
        let disp = i32::from_le_bytes([data[i + 2], data[i + 3], data[i + 4], data[i + 5]]);
        let slot = (base + i as u64 + 6).wrapping_add_signed(i64::from(disp));
        let Some(name) = slots.get(&slot).map(|n| &**n) else {
            i += 1;
            continue;
        };
        // The stub starts at its endbr64 and bnd prefix, if it has them.
        let mut start = i;
        if start >= 1 && data[start - 1] == 0xf2 {
            start -= 1;
        }
        if start >= 4 && data[start - 4..start] == ENDBR64 {
            start -= 4;
        }
        if stubs
            .last()
            .is_none_or(|&(prev, _)| prev < base + start as u64)
        {
            stubs.push((base + start as u64, name));
        }
        i += 6;
    }
    stubs
}

#[cfg(test)]
mod tests;
