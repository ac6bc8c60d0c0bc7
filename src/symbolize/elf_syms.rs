//! Function names from ELF symbol tables (`.symtab`, then `.dynsym`), the fallback when
//! a module has no DWARF for an address. Symbols of every source are gathered once per
//! module, sorted by SVMA, and looked up by binary search: a symbol covers
//! `[value, value + size)`, or up to the next symbol when its size is 0.

use object::{Object, ObjectSymbol, SymbolKind};

/// One function symbol; the name borrows the module's (or debug file's) bytes.
#[derive(Debug, Clone, Copy)]
struct Sym<'a> {
    svma: u64,
    size: u64,
    name: &'a str,
}

/// The sorted function symbols of one module.
#[derive(Debug, Default)]
pub struct SymbolTable<'a> {
    syms: Vec<Sym<'a>>,
}

impl<'a> SymbolTable<'a> {
    /// Adds the function symbols of `file`'s `.symtab` and then `.dynsym`. Call
    /// [`SymbolTable::finish`] after the last file.
    pub fn add_file(&mut self, file: &object::File<'a>) {
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
                name,
            });
        }
    }

    /// Sorts the symbols; at one address the first added with a size wins (`.symtab`
    /// before `.dynsym`, the module before its debug file).
    pub fn finish(&mut self) {
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

    /// Number of distinct symbol addresses.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.syms.len()
    }

    /// The raw (possibly mangled) name of the function symbol containing `svma`.
    pub fn lookup(&self, svma: u64) -> Option<&'a str> {
        let idx = self
            .syms
            .partition_point(|s| s.svma <= svma)
            .checked_sub(1)?;
        let sym = self.syms[idx];
        let end = if sym.size != 0 {
            sym.svma.saturating_add(sym.size)
        } else {
            self.syms.get(idx + 1).map_or(u64::MAX, |next| next.svma)
        };
        (svma < end).then_some(sym.name)
    }

    /// Like [`SymbolTable::lookup`] but ignoring sizes: the last symbol at or below
    /// `svma`. For addresses the line table claims but no sized symbol covers
    /// (alignment padding after a function), named as binutils names them.
    pub fn lookup_nearest(&self, svma: u64) -> Option<&'a str> {
        let idx = self
            .syms
            .partition_point(|s| s.svma <= svma)
            .checked_sub(1)?;
        Some(self.syms[idx].name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(syms: &[(u64, u64, &'static str)]) -> SymbolTable<'static> {
        let mut t = SymbolTable {
            syms: syms
                .iter()
                .map(|&(svma, size, name)| Sym { svma, size, name })
                .collect(),
        };
        t.finish();
        t
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
            .map(|i| t.syms[i].name)
            .find(|n| n.contains("own_executable_has_this_function"))
            .expect("symbol of this test");
        let sym = t.syms.iter().find(|s| s.name == name).unwrap();
        assert_eq!(t.lookup(sym.svma + 1), Some(name));
    }
}
