use super::*;
use crate::record::sys;
use perf_event_open_sys::bindings as b;

/// A ring in memory, written as the kernel writes one (wrapping around its end).
struct MemRing {
    data: Vec<u8>,
    head: u64,
    tail: u64,
}

impl MemRing {
    fn new(size: usize) -> MemRing {
        MemRing {
            data: vec![0; size],
            head: 0,
            tail: 0,
        }
    }

    /// Writes a record as the kernel would; false when the ring has no room.
    fn write(&mut self, rec: &[u8]) -> bool {
        let size = self.data.len() as u64;
        if self.head + rec.len() as u64 - self.tail > size {
            return false;
        }
        for (i, &byte) in rec.iter().enumerate() {
            self.data[((self.head + i as u64) % size) as usize] = byte;
        }
        self.head += rec.len() as u64;
        true
    }
}

impl RingView for MemRing {
    fn head_pos(&self) -> u64 {
        self.head
    }
    fn tail_pos(&self) -> u64 {
        self.tail
    }
    fn set_tail(&mut self, pos: u64) {
        assert!(pos >= self.tail && pos <= self.head, "tail {pos}");
        self.tail = pos;
    }
    fn data_size(&self) -> u64 {
        self.data.len() as u64
    }
    fn bytes_at(&self, from: u64, len: usize) -> Option<(&[u8], &[u8])> {
        let size = self.data.len();
        if from < self.tail || from + len as u64 > self.head {
            return None;
        }
        let start = (from % size as u64) as usize;
        let first = len.min(size - start);
        Some((&self.data[start..start + first], &self.data[..len - first]))
    }
}

/// A COMM record of thread `tid` at `time`, in the kernel's layout (56 bytes).
fn comm(tid: u32, time: u64) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&1u32.to_le_bytes());
    body.extend_from_slice(&tid.to_le_bytes());
    body.extend_from_slice(b"t\0\0\0\0\0\0\0");
    for v in [1u32, tid] {
        body.extend_from_slice(&v.to_le_bytes());
    }
    body.extend_from_slice(&time.to_le_bytes());
    body.extend_from_slice(&[0; 8]); // cpu, reserved
    body.extend_from_slice(&7u64.to_le_bytes()); // identifier
    let mut r = Vec::new();
    r.extend_from_slice(&b::PERF_RECORD_COMM.to_le_bytes());
    r.extend_from_slice(&0u16.to_le_bytes());
    r.extend_from_slice(&((8 + body.len()) as u16).to_le_bytes());
    r.extend_from_slice(&body);
    r
}

/// The recorder's own layout for CPU samples, less STREAM_ID: the records above
/// carry a `sample_id` of TID, TIME, CPU and IDENTIFIER (the sizes the tests count).
fn layouts() -> Layouts {
    let mut fields = sys::sample_layout(&sys::EventConfig {
        period_ns: 1_000_000,
        stack_size: 0,
        leaf_stack: 0,
        kernel: true,
        enable_on_exec: false,
        exact: false,
        wake_each: false,
    });
    fields.sample_type &= !u64::from(b::PERF_SAMPLE_STREAM_ID);
    Layouts::one(fields.into())
}

/// (tid, time) of a COMM record.
fn seen(rec: &Record) -> (u32, u64) {
    match rec {
        Record::Comm { tid, time, .. } => (*tid, *time),
        other => panic!("{other:?}"),
    }
}

/// Releases up to `upto`, accepting everything; returns what was handed out.
fn release_all(r: &mut Reorder, rings: &mut [MemRing], upto: u64) -> Vec<(u32, u64)> {
    let mut out = Vec::new();
    let held = r.release(
        rings,
        upto,
        &layouts(),
        |rec| {
            out.push(seen(&rec));
            true
        },
        || panic!("bad record"),
    );
    assert_eq!(held, None);
    out
}

#[test]
fn a_refused_record_and_all_after_it_come_again() {
    let mut rings = [MemRing::new(4096)];
    for (i, t) in [30, 10, 20, 50].into_iter().enumerate() {
        assert!(rings[0].write(&comm(i as u32 + 10, t)));
    }
    let mut r = Reorder::new();
    let plain = layouts();
    assert_eq!(r.drain(&mut rings, &plain), 0);
    let mut got = Vec::new();
    // Up to 40, refusing the record at 20: 10 handled, 20 and 30 kept (50 is not due).
    let held = r.release(
        &mut rings,
        40,
        &plain,
        |rec| {
            let t = seen(&rec).1;
            if t == 20 {
                return false;
            }
            got.push(t);
            true
        },
        || panic!("bad record"),
    );
    assert_eq!(held, Some(20));
    assert_eq!(got, [10]);
    // Refused first: nothing moves.
    let before = r.buffered();
    assert_eq!(
        r.release(&mut rings, 40, &plain, |_| false, || ()),
        Some(20)
    );
    assert_eq!(r.buffered(), before);
    // Accepted now: in time order, then the rest when due.
    let got: Vec<u64> = release_all(&mut r, &mut rings, u64::MAX)
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    assert_eq!(got, [20, 30, 50]);
    assert_eq!(r.buffered(), 0);
    // Handled: all the ring's space is given back, and nothing was copied.
    assert_eq!(rings[0].tail, rings[0].head);
    assert_eq!(r.copied(), 0);
}

/// Two rings merged by time; one time in both: the one drained first (ring 0) first.
/// A record waiting keeps its ring's tail before it until it is handled.
#[test]
fn rings_merge_by_time_and_keep_waiting_records_in_place() {
    let mut rings = [MemRing::new(4096), MemRing::new(4096)];
    for (tid, t) in [(1, 10), (2, 40), (3, 70)] {
        rings[0].write(&comm(tid, t));
    }
    for (tid, t) in [(4, 20), (5, 40), (6, 60)] {
        rings[1].write(&comm(tid, t));
    }
    let mut r = Reorder::new();
    r.drain(&mut rings, &layouts());
    assert_eq!(
        release_all(&mut r, &mut rings, 50),
        [(1, 10), (4, 20), (2, 40), (5, 40)]
    );
    // 70 and 60 wait in their rings: the tails stop before them.
    assert_eq!((rings[0].tail, rings[1].tail), (112, 112));
    assert_eq!(r.buffered(), 112);
    rings[1].write(&comm(7, 65));
    let first_new = r.drain(&mut rings, &layouts());
    assert_eq!(first_new, 2);
    let mut peeked = Vec::new();
    r.peek_from(first_new, &rings, &layouts(), |rec| peeked.push(seen(&rec)));
    assert_eq!(peeked, [(7, 65)]);
    assert_eq!(
        release_all(&mut r, &mut rings, 100),
        [(6, 60), (7, 65), (3, 70)]
    );
    assert_eq!((rings[0].tail, rings[1].tail), (168, 224));
    assert_eq!(r.copied(), 0);
}

/// A record that wraps around the ring's end is copied once, whole, and decodes as
/// the others; the ring goes round many times without a record lost or reordered.
#[test]
fn records_wrapping_around_the_end_come_out_whole() {
    // 56-byte records in a 256-byte ring, after an 8-byte one: many straddle the end.
    let mut rings = [MemRing::new(256)];
    let mut r = Reorder::new();
    let pad = {
        let mut p = comm(0, 0);
        p.truncate(8);
        p[0..4].copy_from_slice(&b::PERF_RECORD_COMM.to_le_bytes());
        p[6..8].copy_from_slice(&8u16.to_le_bytes());
        p
    };
    rings[0].write(&pad);
    r.drain(&mut rings, &layouts());
    // The 8-byte record does not decode: handed to `bad`.
    let mut bad = 0;
    r.release(&mut rings, 0, &layouts(), |_| true, || bad += 1);
    assert_eq!(bad, 1);
    let mut all = Vec::new();
    for round in 0..20u64 {
        for k in 0..2 {
            let t = 100 + round * 2 + k;
            assert!(rings[0].write(&comm(t as u32, t)), "round {round}");
        }
        r.drain(&mut rings, &layouts());
        all.extend(release_all(&mut r, &mut rings, 100 + round * 2));
    }
    all.extend(release_all(&mut r, &mut rings, u64::MAX));
    let want: Vec<(u32, u64)> = (100..140).map(|t| (t as u32, t)).collect();
    assert_eq!(all, want);
    // 40 records of 56 bytes went round a 256-byte ring 9 times: the ones that
    // straddled its end (one a lap at most) were the only ones copied.
    assert!(r.copied() > 0 && r.copied() <= 10 * 56, "{}", r.copied());
}

/// Records that keep waiting in a ring more than half full are moved out, so the
/// kernel has room to write.
#[test]
fn a_ring_held_over_half_full_is_emptied_into_memory() {
    let mut rings = [MemRing::new(512)];
    let mut r = Reorder::new();
    for t in 0..5 {
        rings[0].write(&comm(t as u32, 100 + t));
    }
    r.drain(&mut rings, &layouts());
    // Nothing due: 280 of 512 bytes would stay held, so they are copied out.
    assert!(release_all(&mut r, &mut rings, 0).is_empty());
    assert_eq!(rings[0].tail, 280);
    assert_eq!(r.copied(), 280);
    assert_eq!(r.buffered(), 280);
    for t in 5..10 {
        assert!(rings[0].write(&comm(t as u32, 100 + t)));
    }
    r.drain(&mut rings, &layouts());
    let got: Vec<u64> = release_all(&mut r, &mut rings, u64::MAX)
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    assert_eq!(got, (100..110).collect::<Vec<_>>());
    assert_eq!(r.buffered(), 0);
}

/// A drain with no release after it (the loop waits for a JVM's map) still frees a
/// ring held over half full, and leaves one held less alone.
#[test]
fn making_room_without_a_release_frees_only_a_crowded_ring() {
    let mut rings = [MemRing::new(512), MemRing::new(512)];
    let mut r = Reorder::new();
    for t in 0..5 {
        rings[0].write(&comm(t, 100 + u64::from(t)));
    }
    rings[1].write(&comm(9, 50));
    r.drain(&mut rings, &layouts());
    r.make_room(&mut rings);
    assert_eq!((rings[0].tail, rings[1].tail), (280, 0));
    assert_eq!(r.copied(), 280);
    let got: Vec<u64> = release_all(&mut r, &mut rings, u64::MAX)
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    assert_eq!(got, [50, 100, 101, 102, 103, 104]);
    assert_eq!(rings[1].tail, 56);
}

/// A ring more than a quarter full while a release hands records out (a recorder slow
/// to handle them, the kernel writing meanwhile) is emptied into memory at the next
/// look: the records still waiting come out later, whole and in time order, and the
/// kernel has the whole ring to write in.
#[test]
fn a_ring_crowded_during_a_release_is_emptied_into_memory() {
    let mut rings = [MemRing::new(64 << 10)];
    let mut r = Reorder::new();
    // 300 records of 56 bytes: 16.8 kB, over a quarter of the ring.
    for t in 0..300u32 {
        assert!(rings[0].write(&comm(t, 1000 + u64::from(t))));
    }
    r.drain(&mut rings, &layouts());
    let got = release_all(&mut r, &mut rings, 1000 + 279);
    assert_eq!(got.len(), 280);
    // Looked at after 256 records: the 44 then waiting were copied out, and the ring
    // was given back whole.
    assert_eq!(r.spills(), 1);
    assert_eq!(r.copied(), 44 * 56);
    assert_eq!(rings[0].tail, rings[0].head);
    assert_eq!(r.buffered(), 20 * 56);
    for t in 300..310u32 {
        assert!(rings[0].write(&comm(t, 1000 + u64::from(t))));
    }
    // The spilled records are not new to the drain: the ten written since are.
    assert_eq!(r.drain(&mut rings, &layouts()), 20);
    let later: Vec<u64> = release_all(&mut r, &mut rings, u64::MAX)
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    assert_eq!(later, (1280..1310).collect::<Vec<_>>());
    assert_eq!(r.buffered(), 0);
    // A ring a quarter full or less is left alone.
    assert_eq!(r.spills(), 1);
}
