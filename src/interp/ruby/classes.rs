//! The names Ruby's backtraces put before a method's (as Ruby 3.4 shows them:
//! `Greeter#work`, `Foo.baz` for a method of `Foo`'s singleton class,
//! `Outer::Inner#run`), read from the owner class itself: a class or module's
//! permanent name is its `__classpath__` instance variable (set once it is assigned
//! to a constant), a singleton class's object is its `__attached__`. Both live in the
//! class's instance variable table, an `st_table` keyed by IDs, each found by its
//! name through the global symbol table the first time and by its ID after. A class
//! with no permanent name (`Class.new`) or the singleton class of an object that is
//! no class gives nothing, as in Ruby.

use super::layout::Layout;
use super::walk::{id_name, is_object, string};
use crate::interp::Memory;

/// Object types of a class and a module (`flags & T_MASK`).
const T_CLASS: u64 = 0x02;
const T_MODULE: u64 = 0x03;
/// `FL_SINGLETON` (`FL_USER0`): a singleton class.
const FL_SINGLETON: u64 = 1 << 12;
/// Entries of a class's instance variable table read at most.
const MAX_IVARS: u64 = 256;
/// An `st_table` entry's hash when it was deleted (`RESERVED_HASH_VAL`).
const DELETED: u64 = u64::MAX;

/// The IDs of the instance variables a class is named by, once learned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IvarIds {
    /// `__classpath__`.
    pub classpath: Option<u64>,
    /// `__attached__`.
    pub attached: Option<u64>,
}

/// Where to read a class's names: the layout, the global symbol table.
#[derive(Debug, Clone, Copy)]
pub struct Classes<'a> {
    /// The version's offsets.
    pub layout: &'a Layout,
    /// `ruby_global_symbols`, in the process.
    pub table: u64,
}

/// The flags of `v` if it is a class or a module.
fn class_flags<M: Memory + ?Sized>(mem: &M, v: u64) -> Option<u64> {
    if !is_object(v) {
        return None;
    }
    let flags = mem.u64_at(v)?;
    matches!(flags & 0x1f, T_CLASS | T_MODULE).then_some(flags)
}

impl Classes<'_> {
    /// The instance variable `name` of class `class` (its ID in `known` once
    /// learned): `Some(None)` when the class has none, None when a read failed.
    fn ivar<M: Memory + ?Sized>(
        &self,
        mem: &M,
        class: u64,
        name: &str,
        known: &mut Option<u64>,
    ) -> Option<Option<u64>> {
        let l = self.layout;
        let ext = mem.u64_at(class + l.class_ext)?;
        if !is_object(ext) {
            return None;
        }
        let tbl = mem.u64_at(ext + l.ext_iv_tbl)?;
        if tbl == 0 {
            return Some(None);
        }
        let (start, bound, entries) = l.st_entries;
        let (start, bound) = (mem.u64_at(tbl + start)?, mem.u64_at(tbl + bound)?);
        if start > bound || bound - start > MAX_IVARS {
            return None;
        }
        let entries = mem.u64_at(tbl + entries)?.checked_add(start * 24)?;
        let n = ((bound - start) * 24) as usize;
        let bytes = mem.bytes_at(entries, n, (MAX_IVARS * 24) as usize)?;
        let word = |e: &[u8], i: usize| {
            u64::from_le_bytes(e[i * 8..i * 8 + 8].try_into().unwrap_or_default())
        };
        for e in bytes.chunks_exact(24) {
            let (hash, key, value) = (word(e, 0), word(e, 1), word(e, 2));
            if hash == DELETED {
                continue;
            }
            let hit = match *known {
                Some(id) => key == id,
                None => id_name(mem, l, self.table, key).is_some_and(|n| n == name),
            };
            if hit {
                *known = Some(key);
                return Some(Some(value));
            }
        }
        Some(None)
    }

    /// The permanent name of class or module `class` (`Outer::Inner`): `Some(None)`
    /// for one that has none.
    fn path<M: Memory + ?Sized>(
        &self,
        mem: &M,
        class: u64,
        ids: &mut IvarIds,
    ) -> Option<Option<String>> {
        class_flags(mem, class)?;
        match self.ivar(mem, class, "__classpath__", &mut ids.classpath)? {
            Some(v) => string(mem, self.layout, v).map(Some),
            None => Some(None),
        }
    }

    /// What Ruby puts before the name of a method owned by `owner`: `Greeter#`,
    /// `Foo.` (a method of `Foo`'s singleton class), or nothing (an anonymous class,
    /// the singleton class of an object that is no class). None when `owner` is no
    /// class or a read failed.
    pub fn qualifier<M: Memory + ?Sized>(
        &self,
        mem: &M,
        owner: u64,
        ids: &mut IvarIds,
    ) -> Option<String> {
        let flags = class_flags(mem, owner)?;
        if flags & 0x1f == T_CLASS && flags & FL_SINGLETON != 0 {
            let Some(object) = self.ivar(mem, owner, "__attached__", &mut ids.attached)? else {
                return Some(String::new());
            };
            if class_flags(mem, object).is_none() {
                return Some(String::new());
            }
            return Some(
                self.path(mem, object, ids)?
                    .map_or_else(String::new, |p| p + "."),
            );
        }
        Some(
            self.path(mem, owner, ids)?
                .map_or_else(String::new, |p| p + "#"),
        )
    }
}

/// The label Ruby 3.4 shows for a frame labelled `label` (3.1's own: `work`,
/// `block in work`, `block (2 levels) in work`, `rescue in work`) whose method is
/// labelled `method` and owned by a class that `qualifier` names (`Greeter#`):
/// `Greeter#work`, `block in Greeter#work`. Others (`<main>`, `<class:Foo>`) as they
/// are.
pub fn qualified(label: &str, method: &str, qualifier: &str) -> String {
    if qualifier.is_empty() {
        return label.to_owned();
    }
    if label == method {
        return format!("{qualifier}{method}");
    }
    match label.strip_suffix(method) {
        Some(head) if head.ends_with(" in ") => format!("{head}{qualifier}{method}"),
        _ => label.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::qualified;

    #[test]
    fn labels_take_their_class() {
        assert_eq!(qualified("work", "work", "Greeter#"), "Greeter#work");
        assert_eq!(
            qualified("block in work", "work", "Greeter#"),
            "block in Greeter#work"
        );
        assert_eq!(
            qualified("block (2 levels) in baz", "baz", "Foo."),
            "block (2 levels) in Foo.baz"
        );
        assert_eq!(qualified("<main>", "<main>", ""), "<main>");
        assert_eq!(
            qualified("block in <main>", "<main>", ""),
            "block in <main>"
        );
        assert_eq!(qualified("twork", "work", "Greeter#"), "twork");
        assert_eq!(qualified("work", "work", ""), "work");
    }
}
