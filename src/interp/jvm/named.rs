//! What was named in one JVM: each method read (per epoch of class unloading) with
//! its line table, and the frame ids the recording's interpreted and compiled Java
//! frames carry, each with its names. A method is read once per epoch and kept only
//! if it checked out; a frame that does not check out is [`UNKNOWN_ID`].

use std::collections::{HashMap, HashSet};

use super::epochs::Counter;
use super::method::{Layout, MethodInfo, line_at, line_table, read_method};
use crate::format::{SymbolLine, SymbolSource};
use crate::interp::Memory;
use crate::interp::budget::{Lru, Meter, Trips};

/// The id of the `[java: unknown method]` frame of every JVM.
pub const UNKNOWN_ID: u64 = 0;
/// Its name.
pub const UNKNOWN_NAME: &str = "[java: unknown method]";

/// Lines of methods: start bci and line.
pub(super) type Lines = Vec<(u32, u32)>;

/// What was named in one JVM.
pub(super) struct Named {
    /// (Method*, epoch) → the method and its line table, for methods that checked
    /// out when read in that epoch, within the JVM's bytes budget.
    pub(super) methods: Lru<(u64, u64), (MethodInfo, Lines)>,
    /// What the methods kept weigh, against the budgets.
    pub(super) meter: Meter,
    /// The budgets that tripped.
    pub(super) trips: Trips,
    /// (word, epoch): words of drained samples' stacks tried as `Method*` by
    /// [`super::JavaFrames::warm`].
    pub(super) tried: HashSet<(u64, u64)>,
    /// (Method*, epoch, line) → frame id.
    pub(super) ids: HashMap<(u64, u64, Option<u32>), u64>,
    /// Frame id → its names (an interpreted method's one; a compiled frame's chain,
    /// innermost first).
    pub(super) names: HashMap<u64, (SymbolSource, Vec<SymbolLine>)>,
    pub(super) next_id: u64,
    /// [`super::epochs::Epochs::begun`] when what belongs to epochs let go of was last dropped.
    pub(super) pruned: u64,
}

impl Named {
    /// The frame id of `method` whose frame slot holds `bcp`, with the line of
    /// `line_bcp` when it is in the method's bytecode, for a sample of `epoch`;
    /// [`UNKNOWN_ID`] if they do not check out (the slot or `line_bcp` must point into
    /// the method's bytecode) or the method was not read in that epoch and cannot be
    /// now (classes were unloaded since).
    pub(super) fn name(
        &mut self,
        l: &Layout,
        mem: &dyn Memory,
        counter: &mut Counter<'_>,
        (method, bcp, line_bcp): (u64, u64, Option<u64>),
        epoch: u64,
    ) -> u64 {
        // Only methods that check out are kept: a read that failed (the JVM exited,
        // the class is not loaded yet) is tried again at the next frame.
        if self.methods.get(&(method, epoch)).is_none() {
            // Read now if the sample's epoch is still the current one: the count read
            // after the method, the same, says it held in between.
            if counter.epochs.current() != Some(epoch) {
                return UNKNOWN_ID;
            }
            let Some(m) = read_method(mem, l, method) else {
                return UNKNOWN_ID;
            };
            let lines = line_table(mem, l, &m);
            if counter.read() != Some(epoch) {
                return UNKNOWN_ID;
            }
            self.keep((method, epoch), m, lines);
        }
        let Some((m, lines)) = self.methods.peek(&(method, epoch)) else {
            return UNKNOWN_ID;
        };
        let bci = line_bcp.and_then(|b| m.bci(b));
        if m.code_size != 0 && m.bci(bcp).is_none() && bci.is_none() {
            return UNKNOWN_ID;
        }
        let line = bci.and_then(|b| line_at(lines, b));
        if let Some(&id) = self.ids.get(&(method, epoch, line)) {
            return id;
        }
        let name = SymbolLine {
            function: m.name.clone(),
            file: m.file.clone(),
            line,
            inlined: false,
        };
        let id = self.add(SymbolSource::JavaInterpreted, vec![name]);
        self.ids.insert((method, epoch, line), id);
        id
    }

    /// Keeps method `m` read at `key` with its line table, within the bytes
    /// budgets: past them the methods least recently used go.
    pub(super) fn keep(&mut self, key: (u64, u64), m: MethodInfo, lines: Lines) {
        let bytes = m.bytes(&lines);
        self.methods.insert(&mut self.meter, key, (m, lines), bytes);
        self.trips.evicted += self.methods.evict(&mut self.meter, |_| {}) as u64;
    }

    /// A new frame id named `lines`.
    pub(super) fn add(&mut self, source: SymbolSource, lines: Vec<SymbolLine>) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.names.insert(id, (source, lines));
        id
    }
}
