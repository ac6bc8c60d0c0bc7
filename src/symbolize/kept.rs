//! Modules' parsed names kept between calls, for a live recording that names each
//! window's new frames: without them every window read a module's DWARF from disk
//! again, copied it and parsed its units anew. A kept module holds its symbol table
//! and an addr2line context over its own copy of the DWARF sections (the units it
//! parsed stay parsed), keyed by the module's image. It goes when the image is let go
//! (the module was pruned), when it was not used for `max_age` windows, or, least
//! recently used first, when the kept modules' bytes exceed the budget; a module
//! larger than the whole budget is never kept (it is read for each call, as before).

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use super::dwarf::{ArcSlice, Dwarf};
use super::elf_syms::SymbolTable;
use crate::elf::gopclntab::GoTable;
use crate::elf::{Image, ImageData};

// A live namer's budget is half of `record --tables-memory` (128 MiB by default:
// the DWARF of one large debug build, this project's test binary having 93 MiB of
// the sections used, some 120 MiB kept once its units are parsed, or of many small
// programs).

/// One module's names as parsed: what naming an address of it needs.
pub(crate) struct Parsed {
    pub symbols: SymbolTable<'static>,
    /// A Go module's own table, read when it has no DWARF.
    pub go: Option<GoTable>,
    pub dwarf: Option<Dwarf<ArcSlice>>,
    /// The executable segments' SVMA ranges (nothing outside them is named).
    pub code: Vec<(u64, u64)>,
    /// About the memory it takes: the DWARF sections copied, the symbol table, and a
    /// quarter of the sections again for the units, functions and lines parsed
    /// (measured: 30 MiB after 2,000 addresses over a debug build's 93 MiB).
    pub bytes: usize,
}

/// [`Parsed::bytes`] of a module with `sections` bytes of DWARF and `symbols` of
/// symbol table.
pub(crate) fn parsed_bytes(sections: usize, symbols: usize) -> usize {
    sections
        .saturating_add(sections / 4)
        .saturating_add(symbols)
}

struct Entry {
    /// Held so that the image's address, the key, is not reused while kept.
    image: Weak<dyn ImageData>,
    parsed: Parsed,
    used: u64,
}

/// The kept modules, bounded by age and by bytes.
pub(crate) struct Kept {
    budget: usize,
    max_age: u64,
    window: u64,
    total: usize,
    entries: HashMap<usize, Entry>,
    /// Modules dropped so far (their memory is free for the allocator to return).
    pub(crate) dropped: u64,
}

fn key(image: &Image) -> usize {
    Arc::as_ptr(image) as *const () as usize
}

impl Kept {
    /// Keeps up to `budget` bytes of parsed modules, each for `max_age` windows
    /// after its last use. A budget of 0 keeps nothing.
    pub(crate) fn new(budget: usize, max_age: u64) -> Kept {
        Kept {
            budget,
            max_age,
            window: 0,
            total: 0,
            entries: HashMap::new(),
            dropped: 0,
        }
    }

    /// Whether a module of `bytes` can be kept at all.
    pub(crate) fn fits(&self, bytes: usize) -> bool {
        self.budget > 0 && bytes <= self.budget
    }

    /// Whether a module of `bytes` is larger than a live namer's whole budget: its
    /// DWARF is then not read at all (a live namer's memory stays within the budget
    /// whatever the binaries; names come from the symbol table).
    pub(crate) fn too_large(&self, bytes: usize) -> bool {
        self.budget > 0 && bytes > self.budget
    }

    /// The parsed names of `image`, if kept; marks them used in this window.
    pub(crate) fn get(&mut self, image: &Image) -> Option<&mut Parsed> {
        let window = self.window;
        let e = self.entries.get_mut(&key(image))?;
        e.used = window;
        Some(&mut e.parsed)
    }

    /// Keeps `parsed` for `image` (when it fits the budget; the least recently used
    /// others go to make room) and returns it, kept or not.
    pub(crate) fn insert(&mut self, image: &Image, parsed: Parsed) -> KeptOrNot<'_> {
        if !self.fits(parsed.bytes) {
            return KeptOrNot::Not(Box::new(parsed));
        }
        let k = key(image);
        if let Some(old) = self.entries.remove(&k) {
            self.total -= old.parsed.bytes;
        }
        while self.total + parsed.bytes > self.budget {
            let Some((&oldest, _)) = self.entries.iter().min_by_key(|(_, e)| e.used) else {
                break;
            };
            self.remove(oldest);
        }
        self.total += parsed.bytes;
        let e = self.entries.entry(k).or_insert(Entry {
            image: Arc::downgrade(image),
            parsed,
            used: self.window,
        });
        KeptOrNot::Kept(&mut e.parsed)
    }

    fn remove(&mut self, k: usize) {
        if let Some(e) = self.entries.remove(&k) {
            self.total -= e.parsed.bytes;
            self.dropped += 1;
        }
    }

    /// Ends a window: modules let go by everyone else, or unused for `max_age`
    /// windows, are dropped.
    pub(crate) fn end_window(&mut self) {
        self.window += 1;
        let (now, max_age) = (self.window, self.max_age);
        let gone: Vec<usize> = self
            .entries
            .iter()
            .filter(|(_, e)| e.image.strong_count() == 0 || now - e.used > max_age)
            .map(|(&k, _)| k)
            .collect();
        for k in gone {
            self.remove(k);
        }
    }

    /// Modules kept, and their bytes.
    pub(crate) fn usage(&self) -> (usize, usize) {
        (self.entries.len(), self.total)
    }
}

/// What [`Kept::insert`] gives back.
pub(crate) enum KeptOrNot<'a> {
    Kept(&'a mut Parsed),
    Not(Box<Parsed>),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(n: usize) -> Image {
        Arc::new(vec![0u8; n])
    }

    fn parsed(bytes: usize) -> Parsed {
        Parsed {
            symbols: SymbolTable::default(),
            go: None,
            dwarf: None,
            code: Vec::new(),
            bytes,
        }
    }

    #[test]
    fn least_recently_used_go_past_the_budget() {
        let mut k = Kept::new(100, 10);
        let (a, b, c) = (image(1), image(2), image(3));
        assert!(matches!(k.insert(&a, parsed(40)), KeptOrNot::Kept(_)));
        k.end_window();
        assert!(matches!(k.insert(&b, parsed(40)), KeptOrNot::Kept(_)));
        k.end_window();
        assert!(k.get(&a).is_some(), "a used again: b is now the oldest");
        assert!(matches!(k.insert(&c, parsed(40)), KeptOrNot::Kept(_)));
        assert!(k.get(&b).is_none(), "b went to make room");
        assert!(k.get(&a).is_some() && k.get(&c).is_some());
        assert_eq!(k.usage(), (2, 80));
        assert_eq!(k.dropped, 1, "what was dropped is counted");
    }

    #[test]
    fn larger_than_the_budget_is_not_kept() {
        let mut k = Kept::new(100, 10);
        let (a, b) = (image(1), image(2));
        assert!(matches!(k.insert(&a, parsed(60)), KeptOrNot::Kept(_)));
        assert!(matches!(k.insert(&b, parsed(101)), KeptOrNot::Not(_)));
        assert!(k.get(&b).is_none());
        assert_eq!(k.usage(), (1, 60), "the others stay");
        let mut none = Kept::new(0, 10);
        assert!(matches!(none.insert(&a, parsed(0)), KeptOrNot::Not(_)));
        assert_eq!(none.usage(), (0, 0));
    }

    #[test]
    fn unused_for_max_age_windows_goes() {
        let mut k = Kept::new(100, 2);
        let (a, b) = (image(1), image(2));
        k.insert(&a, parsed(10));
        k.insert(&b, parsed(10));
        for _ in 0..2 {
            k.end_window();
            assert!(k.get(&b).is_some());
        }
        assert_eq!(k.usage().0, 2, "a unused for 2 windows is still kept");
        k.end_window();
        assert_eq!(k.usage(), (1, 10), "a unused for 3 windows went");
        assert!(k.get(&a).is_none() && k.get(&b).is_some());
    }

    #[test]
    fn a_module_let_go_drops_its_names() {
        let mut k = Kept::new(100, 10);
        let (a, b) = (image(1), image(2));
        k.insert(&a, parsed(10));
        k.insert(&b, parsed(20));
        drop(a); // the module was pruned: nobody holds its image
        k.end_window();
        assert_eq!(k.usage(), (1, 20));
        assert!(k.get(&b).is_some());
    }
}
