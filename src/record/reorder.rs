//! Putting the records of the per-CPU rings back in time order without moving them.
//!
//! Records of different rings interleave in time, and one drained now may be due only
//! once no ring can still hold an earlier one (the loop's watermark). [`Reorder`] files
//! each drained record under its time in a small index entry that says where its bytes
//! are: still in its ring (the ring's tail is kept before it, so the kernel does not
//! write over it), or, for the few that must be moved, in a buffer of their own. A
//! record is decoded in place when it is due. Bytes are copied once at most: a record
//! that wraps around its ring's end (so that the decoder sees it whole), and records
//! still waiting when their ring would otherwise stay too full (more than half of it
//! held: a sample held for a JVM's perf map, a ring the loop falls behind on). Each
//! DWARF-mode sample carries 8 to 64 KiB of stack: copying them was most of the
//! recorder's own CPU (docs/measurements/recorder-cost.md).
//!
//! Handling a round's records can take a while (a debug build, or a recorder starved
//! of CPU on a loaded machine: a second and more for a busy `--off-cpu` target), and
//! the kernel keeps writing meanwhile: a ring it fills loses records
//! (PERF_RECORD_LOST), and with them switches and wake-ups. So [`Reorder::release`]
//! looks at the rings every [`SPILL_EVERY`] records it hands out and empties one more
//! than a quarter full into memory ([`Reorder::spill`]): copying is far cheaper than
//! handling, so a recorder that falls behind keeps a backlog in memory (up to
//! [`MAX_SPILLED`] bytes) instead of losing records.

use super::rings::CpuRing;
use crate::replay::decode::{Layouts, Record};

/// What the reorder needs of a ring: a CPU's mapped ring, or bytes in memory in tests.
pub(super) trait RingView {
    /// The position after the last whole record (positions are not wrapped).
    fn head_pos(&self) -> u64;
    /// The position before which the kernel may write again.
    fn tail_pos(&self) -> u64;
    fn set_tail(&mut self, pos: u64);
    fn data_size(&self) -> u64;
    /// `len` bytes from `from`, in two pieces when they wrap around the end.
    fn bytes_at(&self, from: u64, len: usize) -> Option<(&[u8], &[u8])>;
}

impl RingView for CpuRing {
    fn head_pos(&self) -> u64 {
        self.ring.head_pos()
    }
    fn tail_pos(&self) -> u64 {
        self.ring.tail_pos()
    }
    fn set_tail(&mut self, pos: u64) {
        self.ring.set_tail(pos)
    }
    fn data_size(&self) -> u64 {
        self.ring.data_size()
    }
    fn bytes_at(&self, from: u64, len: usize) -> Option<(&[u8], &[u8])> {
        self.ring.bytes_at(from, len)
    }
}

/// Records handed out between two looks at the rings during a release.
const SPILL_EVERY: usize = 256;

/// Records waiting in memory at most: beyond, a ring the recorder falls behind on is
/// left to fill (the kernel then counts what it loses).
const MAX_SPILLED: usize = 256 << 20;

/// Where a waiting record's bytes are.
enum Bytes {
    /// In ring `ring`, from position `pos` (not wrapped).
    Ring { ring: usize, pos: u64 },
    /// Moved out of its ring.
    Owned(Box<[u8]>),
}

/// A drained record waiting to be handled.
struct Entry {
    time: u64,
    /// Drain order: among records of one time, the one drained first goes first.
    seq: u64,
    len: usize,
    bytes: Bytes,
}

/// Records drained from every ring, waiting to be handled in time order.
#[derive(Default)]
pub(super) struct Reorder {
    waiting: Vec<Entry>,
    next_seq: u64,
    /// Per ring, the position up to which its records are filed.
    filed: Vec<u64>,
    /// Bytes of the waiting records.
    bytes: usize,
    /// Bytes copied out of the rings so far (wrapped and spilled records).
    copied: u64,
    /// Records at the end of `waiting` filed by a spill since the last drain: new to
    /// the next drain's caller.
    unpeeked: usize,
    /// Times a ring was emptied into memory during a release.
    spills: u64,
}

impl Reorder {
    pub(super) fn new() -> Reorder {
        Reorder::default()
    }

    /// Files every complete record the rings hold and has not seen yet under its time,
    /// as `layouts` say where it is; returns how many records were waiting before (the
    /// new ones follow them, in drain order, until the next [`release`](Self::release)).
    pub(super) fn drain<R: RingView>(&mut self, rings: &mut [R], layouts: &Layouts) -> usize {
        let before = self.waiting.len() - self.unpeeked.min(self.waiting.len());
        self.unpeeked = 0;
        for (i, r) in rings.iter().enumerate() {
            self.file(i, r, layouts, false);
        }
        before
    }

    /// Files the records ring `i` holds past what was filed: in place, or (`copy`, or
    /// wrapped around the ring's end) copied out.
    fn file<R: RingView>(&mut self, i: usize, r: &R, layouts: &Layouts, copy: bool) {
        while self.filed.len() <= i {
            self.filed.push(r.tail_pos());
        }
        let head = r.head_pos();
        let mut pos = self.filed[i];
        while pos < head {
            let Some(len) = record_len(r, pos, head) else {
                // A size the kernel never writes: give up on the rest of this read.
                pos = head;
                break;
            };
            let Some((a, b)) = r.bytes_at(pos, len) else {
                pos = head;
                break;
            };
            let (time, bytes) = if b.is_empty() && !copy {
                (layouts.time(a), Bytes::Ring { ring: i, pos })
            } else {
                // Made whole for the decoder, or spilled.
                let whole: Box<[u8]> = [a, b].concat().into();
                self.copied += len as u64;
                (layouts.time(&whole), Bytes::Owned(whole))
            };
            self.waiting.push(Entry {
                time,
                seq: self.next_seq,
                len,
                bytes,
            });
            self.next_seq += 1;
            self.bytes += len;
            pos += len as u64;
        }
        self.filed[i] = pos;
    }

    /// Empties every ring more than a quarter full into memory, while the records
    /// before index `handled` of `waiting` are handed out (their bytes are needed no
    /// more): the waiting records still in the ring are copied out, then the records
    /// the kernel wrote since they were filed are filed, copied, and the ring is given
    /// back whole. Nothing is spilled past [`MAX_SPILLED`] bytes waiting.
    pub(super) fn spill<R: RingView>(
        &mut self,
        rings: &mut [R],
        handled: usize,
        layouts: &Layouts,
    ) {
        for i in 0..rings.len().min(self.filed.len()) {
            let r = &rings[i];
            let used = r.head_pos().saturating_sub(r.tail_pos());
            if used * 4 <= r.data_size() || self.bytes >= MAX_SPILLED {
                continue;
            }
            for e in self.waiting.iter_mut().skip(handled) {
                if let Bytes::Ring { ring, pos } = e.bytes
                    && ring == i
                {
                    let (a, b) = r.bytes_at(pos, e.len).unwrap_or_default();
                    e.bytes = Bytes::Owned([a, b].concat().into());
                    self.copied += e.len as u64;
                }
            }
            let before = self.waiting.len();
            self.file(i, r, layouts, true);
            self.unpeeked += self.waiting.len() - before;
            let filed = self.filed[i];
            if filed != rings[i].tail_pos() {
                rings[i].set_tail(filed);
            }
            self.spills += 1;
        }
    }

    /// Times a ring was emptied into memory during a release.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(super) fn spills(&self) -> u64 {
        self.spills
    }

    /// Shows `look` the records waiting from index `from` on (in drain order).
    pub(super) fn peek_from(
        &self,
        from: usize,
        rings: &[impl RingView],
        layouts: &Layouts,
        mut look: impl FnMut(Record),
    ) {
        for e in self.waiting.get(from..).unwrap_or_default() {
            if let Some(rec) = bytes_of(e, rings)
                && let Ok(rec) = layouts.decode(rec)
            {
                look(rec);
            }
        }
    }

    /// Hands the waiting records with time <= `upto` to `handle` in time order (an
    /// undecodable one to `bad`), and keeps the rest. `handle` may refuse a record
    /// (return false): it and every later one are kept, and its time is returned.
    /// `layouts`: how each event's records are laid out. Then gives the rings back
    /// the space of what was handled.
    pub(super) fn release<R: RingView>(
        &mut self,
        rings: &mut [R],
        upto: u64,
        layouts: &Layouts,
        mut handle: impl FnMut(Record) -> bool,
        mut bad: impl FnMut(),
    ) -> Option<u64> {
        self.waiting.sort_unstable_by_key(|e| (e.time, e.seq));
        self.unpeeked = 0;
        let mut n = self.waiting.partition_point(|e| e.time <= upto);
        let mut refused = None;
        let mut i = 0;
        while i < n {
            let e = &self.waiting[i];
            match bytes_of(e, rings).map(|b| layouts.decode(b)) {
                Some(Ok(rec)) => {
                    if !handle(rec) {
                        refused = Some(e.time);
                        n = i;
                        break;
                    }
                }
                _ => bad(),
            }
            i += 1;
            if i % SPILL_EVERY == 0 {
                // What it files joins the end of `waiting`, past `n`.
                self.spill(rings, i, layouts);
            }
        }
        let done: usize = self.waiting[..n].iter().map(|e| e.len).sum();
        self.bytes -= done;
        self.waiting.drain(..n);
        self.make_room(rings);
        refused
    }

    /// Moves each ring's tail up to its oldest waiting record (or to all it filed);
    /// a ring that would stay more than half full has its waiting records copied out.
    /// [`release`](Self::release) does it; call it after a [`drain`](Self::drain)
    /// that no release follows.
    pub(super) fn make_room<R: RingView>(&mut self, rings: &mut [R]) {
        let mut oldest: Vec<Option<u64>> = vec![None; self.filed.len()];
        for e in &self.waiting {
            if let Bytes::Ring { ring, pos } = e.bytes {
                let o = &mut oldest[ring];
                *o = Some(o.map_or(pos, |p| p.min(pos)));
            }
        }
        for (i, r) in rings.iter_mut().enumerate().take(self.filed.len()) {
            let filed = self.filed[i];
            let mut tail = oldest[i].unwrap_or(filed);
            if filed - tail > r.data_size() / 2 {
                for e in &mut self.waiting {
                    if let Bytes::Ring { ring, pos } = e.bytes
                        && ring == i
                    {
                        let (a, b) = r.bytes_at(pos, e.len).unwrap_or_default();
                        e.bytes = Bytes::Owned([a, b].concat().into());
                        self.copied += e.len as u64;
                    }
                }
                tail = filed;
            }
            if tail != r.tail_pos() {
                r.set_tail(tail);
            }
        }
    }

    /// Bytes of records waiting (in their rings or moved out).
    pub(super) fn buffered(&self) -> usize {
        self.bytes
    }

    /// Bytes copied out of the rings so far.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(super) fn copied(&self) -> u64 {
        self.copied
    }
}

/// The size of the record at `pos` in ring `r`, if it is one that fits before `head`.
fn record_len(r: &impl RingView, pos: u64, head: u64) -> Option<usize> {
    // Records are 8-byte aligned and the data area a multiple of 8: a header never
    // wraps.
    let (header, _) = r.bytes_at(pos, 8)?;
    let len = u16::from_le_bytes([header[6], header[7]]) as usize;
    (len >= 8 && pos + len as u64 <= head).then_some(len)
}

/// A waiting record's bytes.
fn bytes_of<'a, R: RingView>(e: &'a Entry, rings: &'a [R]) -> Option<&'a [u8]> {
    match &e.bytes {
        Bytes::Ring { ring, pos } => {
            let (a, b) = rings.get(*ring)?.bytes_at(*pos, e.len)?;
            b.is_empty().then_some(a)
        }
        Bytes::Owned(b) => Some(b),
    }
}

#[cfg(test)]
mod tests;
