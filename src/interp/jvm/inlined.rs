//! Compiled Java frames named with the methods inlined into them, for one JVM: each
//! nmethod is read once ([`Nmethod`]) when a sample first lands in the code a perf-map
//! entry names, and kept under that entry (its start, end and name) while the map
//! says the same: a new entry at a reused address is a new read, never the old
//! nmethod's scopes. A pc's scope chain becomes one frame id whose names are the
//! chain, innermost first, every level but the compiled method marked inlined, each
//! with the line of its bci; made once per (nmethod, scope). An nmethod or a chain
//! that does not check out (a method that is not one, a bci outside its bytecode, a
//! name other than the map's) gives no id: the frame stays as the perf map names it.

use std::collections::HashMap;
use std::sync::Arc;

use super::compiled::{CodeCache, Nmethod};
use super::method::{Layout, MethodInfo, line_at, line_table, read_method};
use crate::format::SymbolLine;
use crate::interp::Memory;

/// Most bytes of debug information kept for one JVM; past it, what was read is let go
/// and read again as samples need it.
const MAX_KEPT: usize = 64 << 20;

/// A perf-map entry: start, end and name of a compiled method's code.
#[derive(Debug, Clone, Copy)]
pub struct Region<'a> {
    /// Its first instruction.
    pub start: u64,
    /// Past its last.
    pub end: u64,
    /// The method, as the perf map writes it.
    pub name: &'a str,
}

/// A method read and its line table.
pub(super) type Read = Arc<(MethodInfo, Vec<(u32, u32)>)>;

/// `Method*` → the method read and its line table (None: it did not check out).
pub(super) type Methods = HashMap<u64, Option<Read>>;

/// Most methods kept in [`Compiled::shared`] before it starts over.
const MAX_SHARED: usize = 1 << 16;

/// One perf-map entry's nmethod and what was named from it.
struct Entry {
    end: u64,
    name: String,
    nm: Option<Nmethod>,
    methods: Methods,
    /// Scope decode offset → frame id (None: the chain did not check out).
    ids: HashMap<u32, Option<u64>>,
}

/// The nmethods of one JVM read so far.
#[derive(Default)]
pub struct Compiled {
    entries: HashMap<u64, Entry>,
    kept: usize,
    /// `Method*` → its name (None: not a method), for code no perf map names yet.
    names: HashMap<u64, Option<String>>,
    /// The methods read in one epoch of class unloading (the first field), for every
    /// nmethod: the same methods are inlined into many, and at a low sampling rate
    /// most samples land in an nmethod not read yet (reading each method again for
    /// each was most of the cost of compiled frames).
    shared: (Option<u64>, Methods),
}

impl Compiled {
    /// The perf-map entry the JVM would write for the nmethod holding `pc`, read from
    /// the nmethod itself: for code compiled since the last perf map.
    pub fn region_of(
        &mut self,
        mem: &dyn Memory,
        code: &CodeCache,
        layout: &Layout,
        pc: u64,
    ) -> Option<(u64, u64, String)> {
        let (start, end, method) = code.code_of(mem, pc)?;
        if self.names.len() > 1 << 16 {
            self.names.clear();
        }
        let name = self
            .names
            .entry(method)
            .or_insert_with(|| read_method(mem, layout, method).map(|m| m.name));
        Some((start, end, name.clone()?))
    }

    /// The frame id of compiled code at `pc` (the exact pc for a sampled leaf, the
    /// return address for a caller) in the code of perf-map entry `region`, made by
    /// `new_id` from the chain's names when first seen; None where the nmethod or its
    /// chain does not check out, or it was not read yet and `read_in` is None (the
    /// sample is from before classes were unloaded). `read_in`: the epoch of class
    /// unloading that holds now and held at the sample, when there is one (what is
    /// read now is then good for the sample).
    #[allow(clippy::too_many_arguments)]
    pub fn frame(
        &mut self,
        mem: &dyn Memory,
        code: &CodeCache,
        layout: &Layout,
        region: Region<'_>,
        pc: u64,
        read_in: Option<u64>,
        new_id: &mut dyn FnMut(Vec<SymbolLine>) -> u64,
    ) -> Option<u64> {
        if read_in.is_some() && self.shared.0 != read_in || self.shared.1.len() > MAX_SHARED {
            self.shared = (read_in, HashMap::new());
        }
        let mut shared =
            (read_in.is_some() && self.shared.0 == read_in).then_some(&mut self.shared.1);
        let known = self
            .entries
            .get(&region.start)
            .is_some_and(|e| e.end == region.end && e.name == region.name);
        if !known {
            read_in?;
            if self.kept > MAX_KEPT {
                self.entries.clear();
                self.kept = 0;
            }
            let nm = code
                .nmethod(mem, region.start)
                .filter(|n| n.code == (region.start, region.end))
                .filter(|n| {
                    let m = method(mem, layout, n.method, shared.as_deref_mut());
                    m.is_some_and(|m| m.0.name == region.name)
                });
            self.kept += nm.as_ref().map_or(0, Nmethod::weight);
            self.entries.insert(
                region.start,
                Entry {
                    end: region.end,
                    name: region.name.to_owned(),
                    nm,
                    methods: HashMap::new(),
                    ids: HashMap::new(),
                },
            );
        }
        let e = self.entries.get_mut(&region.start)?;
        let nm = e.nm.as_ref()?;
        let desc = nm.pc_desc(pc)?;
        let offset = nm.scope_offset(desc)?;
        if let Some(&id) = e.ids.get(&offset) {
            return id;
        }
        let id = chain(mem, layout, nm, desc, (&mut e.methods, shared)).map(new_id);
        e.ids.insert(offset, id);
        id
    }
}

/// The names of `PcDesc` `desc`'s chain, innermost first; None if it is empty (only
/// the compiled method is known: the perf map names it) or does not check out.
pub(super) fn chain(
    mem: &dyn Memory,
    layout: &Layout,
    nm: &Nmethod,
    desc: usize,
    (methods, mut shared): (&mut Methods, Option<&mut Methods>),
) -> Option<Vec<SymbolLine>> {
    let scopes = nm.scopes(desc)?;
    let n = scopes.len();
    let mut out = Vec::with_capacity(n);
    for (i, s) in scopes.iter().enumerate() {
        let m = methods
            .entry(s.method)
            .or_insert_with(|| method(mem, layout, s.method, shared.as_deref_mut()));
        let (m, lines) = &**m.as_ref()?;
        // At the method's entry (negative) its first line, as HotSpot reads it.
        let bci = u32::try_from(s.bci.max(0)).ok()?;
        if s.bci < -1 || (m.code_size > 0 && u64::from(bci) >= m.code_size) {
            return None;
        }
        out.push(SymbolLine {
            function: m.name.clone(),
            file: m.file.clone(),
            line: line_at(lines, bci),
            inlined: i + 1 < n,
        });
    }
    (!out.is_empty()).then_some(out)
}

/// Method `at` read with its line table, or as `shared` holds it (what was read in the
/// current epoch).
pub(super) fn method(
    mem: &dyn Memory,
    layout: &Layout,
    at: u64,
    shared: Option<&mut Methods>,
) -> Option<Read> {
    let read = || {
        let m = read_method(mem, layout, at)?;
        let lines = line_table(mem, layout, &m);
        Some(Arc::new((m, lines)))
    };
    match shared {
        Some(shared) => shared.entry(at).or_insert_with(read).clone(),
        None => read(),
    }
}
