//! Recording what a reader reads, for fixtures: [`Capture`] passes every read through
//! to another [`Memory`] and keeps the bytes it got, so a walk done once on a live
//! process can be replayed on the resulting [`Snapshot`] in a unit test, byte for byte.

use std::cell::RefCell;
use std::collections::BTreeMap;

use super::{Memory, Snapshot};

/// `inner`, with every successful read remembered.
pub struct Capture<M> {
    inner: M,
    /// Bytes read, by address (ranges may overlap until [`Capture::snapshot`]).
    reads: RefCell<BTreeMap<u64, Vec<u8>>>,
}

impl<M: Memory> Capture<M> {
    /// `inner` with nothing read yet.
    pub fn new(inner: M) -> Capture<M> {
        Capture {
            inner,
            reads: RefCell::new(BTreeMap::new()),
        }
    }

    /// Everything read so far, overlapping and adjacent reads merged into regions.
    pub fn snapshot(&self) -> Snapshot {
        let mut merged: Vec<(u64, Vec<u8>)> = Vec::new();
        for (&addr, bytes) in self.reads.borrow().iter() {
            if let Some((start, acc)) = merged.last_mut()
                && addr <= *start + acc.len() as u64
            {
                let skip = (*start + acc.len() as u64 - addr) as usize;
                if skip < bytes.len() {
                    acc.extend_from_slice(&bytes[skip..]);
                }
                continue;
            }
            merged.push((addr, bytes.clone()));
        }
        let mut snap = Snapshot::default();
        for (addr, bytes) in merged {
            snap.insert(addr, bytes);
        }
        snap
    }
}

impl<M: Memory> Memory for Capture<M> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        if !self.inner.read(addr, buf) {
            return false;
        }
        let mut reads = self.reads.borrow_mut();
        let slot = reads.entry(addr).or_default();
        if slot.len() < buf.len() {
            *slot = buf.to_vec();
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_reads_become_one_region() {
        let mut s = Snapshot::default();
        s.insert(0x1000, (0..64u8).collect());
        let c = Capture::new(&s);
        assert_eq!(c.u64_at(0x1008), s.u64_at(0x1008));
        assert_eq!(c.u32_at(0x100c), s.u32_at(0x100c));
        assert_eq!(c.u64_at(0x1010), s.u64_at(0x1010));
        assert_eq!(c.u64_at(0x1030), s.u64_at(0x1030));
        assert_eq!(c.u64_at(0x2000), None);
        let snap = c.snapshot();
        let mut want = Snapshot::default();
        want.insert(0x1008, (8..24u8).collect());
        want.insert(0x1030, (48..56u8).collect());
        assert_eq!(snap, want);
    }
}
