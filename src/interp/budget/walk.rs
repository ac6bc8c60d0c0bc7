//! The nodes budget: a walk of a linked structure in target memory that meets each
//! node once and stops at its bound.

use std::collections::HashSet;

/// A walk of a linked structure in target memory: at most `max` nodes, each met
/// once (a node met again is a loop: the walk ends there).
#[derive(Debug)]
pub struct Walk {
    seen: HashSet<u64>,
    max: usize,
    /// The walk stopped at its bound.
    pub bounded: bool,
    /// The walk met a node twice.
    pub looped: bool,
}

impl Walk {
    /// A walk of at most `max` nodes.
    pub fn new(max: usize) -> Walk {
        Walk {
            seen: HashSet::new(),
            max,
            bounded: false,
            looped: false,
        }
    }

    /// Whether the walk may go on to `node` (not 0, not met before, within the bound).
    pub fn step(&mut self, node: u64) -> bool {
        if node == 0 {
            return false;
        }
        if self.seen.len() >= self.max {
            self.bounded = true;
            return false;
        }
        if !self.seen.insert(node) {
            self.looped = true;
            return false;
        }
        true
    }
}
