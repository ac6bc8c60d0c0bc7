//! The class a Ruby frame's method belongs to, as its name shows it (`Greeter#work`,
//! `block in Foo.baz`): a method's instruction sequence is matched to its owner once,
//! from a method entry that checks out (one whose definition runs that very
//! sequence), and each owner's name is read once ([`Classes::qualifier`]); both kept
//! within the process's bytes budget.

use super::{CLASSES_EVERY, ENTRY_BYTES, Ruby};
use crate::interp::Memory;
use crate::interp::ruby::classes::Classes;
use crate::interp::ruby::walk::{self, IseqInfo, METHOD_ISEQ};

impl Ruby {
    /// What goes before the name of method sequence `home` (the method of a frame
    /// whose environment is at `ep`, 0 when not known): its owner's name and `#` or
    /// `.`, or nothing (no method, an anonymous class, an owner not read).
    pub(super) fn home_qualifier<M: Memory + ?Sized>(
        &mut self,
        mem: &M,
        (home, info): (u64, &IseqInfo),
        ep: u64,
    ) -> String {
        if !info.method {
            return String::new();
        }
        if let Some(&owner) = self.homes.get(&home) {
            return self.owner_qualifier(mem, owner);
        }
        let Some(Ok(r)) = &self.ready else {
            return String::new();
        };
        let l = r.layout;
        let found = (ep != 0)
            .then(|| walk::frame_method(mem, &l, ep))
            .flatten()
            .and_then(|me| walk::method_entry(mem, &l, me))
            .filter(|m| m.kind == METHOD_ISEQ && m.iseq == home);
        let Some(m) = found else {
            return String::new();
        };
        self.homes
            .insert(&mut self.meter, home, m.owner, ENTRY_BYTES);
        self.trips.evicted += self.homes.evict(&mut self.meter, |_| {}) as u64;
        self.owner_qualifier(mem, m.owner)
    }

    /// What goes before the name of a method owned by class `owner` (`Greeter#`,
    /// `Foo.`; nothing for an anonymous one): read from the class, or from the core
    /// classes the library exports when the symbol table was not found.
    pub(super) fn owner_qualifier<M: Memory + ?Sized>(&mut self, mem: &M, owner: u64) -> String {
        if let Some(q) = self.owners.get(&owner) {
            return q.clone();
        }
        let samples = self.samples;
        let (syms, bias) = (self.syms.clone(), self.bias);
        let Some(Ok(r)) = &mut self.ready else {
            return String::new();
        };
        let read = r.table.and_then(|table| {
            let classes = Classes {
                layout: &r.layout,
                table,
            };
            classes.qualifier(mem, owner, &mut r.ivar_ids)
        });
        let Some(q) = read else {
            // Not read (no symbol table, a read refused): a core class by its symbol,
            // not kept (the class may be read next time).
            if !r.classes.contains_key(&owner)
                && (r.classes_at == 0 || samples >= r.classes_at + CLASSES_EVERY)
            {
                r.classes_at = samples.max(1);
                r.classes = (syms.classes.iter())
                    .filter_map(|(a, name)| Some((mem.u64_at(a.wrapping_add(bias))?, name.clone())))
                    .filter(|(v, _)| *v != 0)
                    .collect();
            }
            return r
                .classes
                .get(&owner)
                .map_or_else(String::new, |c| format!("{c}#"));
        };
        let bytes = ENTRY_BYTES + q.len();
        self.owners.insert(&mut self.meter, owner, q.clone(), bytes);
        self.trips.evicted += self.owners.evict(&mut self.meter, |_| {}) as u64;
        q
    }
}
