//! Names cached per function are checked on every lookup (issue 47): a function a
//! collection moved to the address of one named before, or a name moved under the
//! same SFI, gets its own name or a marked frame, never the cached one.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::frames::{InJit, UNREADABLE_ID, V8Frames};
use super::layout::Layout;
use super::tests::{Builder, values};
use crate::format::{Frame, FrameKind};
use crate::interp::{Budgets, Memory, Snapshot};
use crate::unwind::{FrameAddress, FrameRegisters};

const PID: u32 = 9;
const JIT: u64 = 0x7000_0000;
const SP: u64 = 0x7ff0_0000;

/// A heap the test rewrites between samples, as a collection would; its reads
/// counted. A read that meets a region gets its bytes, zeros around them (so that
/// whole pages read as a process's do).
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Snapshot>>, Arc<AtomicUsize>);

impl Memory for Shared {
    fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        self.1.fetch_add(1, Ordering::Relaxed);
        buf.fill(0);
        let end = addr + buf.len() as u64;
        let mut met = false;
        for (at, bytes) in self.0.lock().unwrap().regions() {
            let (lo, hi) = (at.max(addr), (at + bytes.len() as u64).min(end));
            if lo < hi {
                let (from, to) = ((lo - at) as usize, (lo - addr) as usize);
                let n = (hi - lo) as usize;
                buf[to..to + n].copy_from_slice(&bytes[from..from + n]);
                met = true;
            }
        }
        met
    }
}

/// The frame id the walker gives a JIT frame whose function slot holds `function`,
/// in a sample that is the last of its round of the recorder.
fn sample(v8: &mut V8Frames, function: u64) -> u64 {
    let id = sample_in_round(v8, function);
    // The next sample reads the heap as the test left it.
    v8.handled();
    id
}

/// [`sample`] in a round with more samples to come.
fn sample_in_round(v8: &mut V8Frames, function: u64) -> u64 {
    let fp = SP + 0x40;
    let mut bytes = vec![0u8; 0x80];
    // Context (a tagged pointer: no frame-type marker), then the function.
    bytes[0x38..0x40].copy_from_slice(&0x10_0001u64.to_le_bytes());
    bytes[0x30..0x38].copy_from_slice(&function.to_le_bytes());
    let pc = JIT + 0x100;
    let addrs = [FrameAddress::ReturnAddress(pc + 1)];
    let regs = [FrameRegisters {
        pc,
        sp: fp - 0x38,
        fp: Some(fp),
    }];
    let mut frames = vec![Frame {
        kind: FrameKind::Return,
        pid: PID,
        addr: pc + 1,
        mapping: Some(1),
    }];
    let in_jit = |f: &Frame| f.mapping == Some(1);
    let no_jit = |_: u64| false;
    let at = InJit {
        frame: &in_jit,
        at: &no_jit,
    };
    v8.expand(PID, (SP, &bytes), (&addrs, &regs), at, &mut frames);
    assert_eq!(frames[0].kind, FrameKind::Interpreted);
    frames[0].addr
}

/// A one-byte string `s` as [`Builder::string`] lays it out, under map `map`.
fn string_bytes(map: u64, s: &str) -> Vec<u8> {
    let mut bytes = map.to_le_bytes().to_vec();
    bytes.extend_from_slice(&[0; 4]);
    bytes.extend_from_slice(&(s.len() as u32).to_le_bytes());
    bytes.extend_from_slice(s.as_bytes());
    bytes.resize(0x100, 0);
    bytes
}

#[test]
fn a_cached_name_is_not_given_to_what_a_collection_put_at_its_addresses() {
    let mut b = Builder::new();
    let name = b.string("handler");
    let file = b.string("/srv/app.js");
    let script = b.object(167, &[0, file]);
    let f = b.function(name, script);
    let not_a_string = b.object(300, &[]);
    let heap = Shared(
        Arc::new(Mutex::new(std::mem::take(&mut b.snap))),
        Arc::default(),
    );
    let mut v8 = node(&heap);
    let name_of = |v8: &V8Frames, id: u64| v8.names(PID, id).unwrap().1[0].function.clone();
    let first = sample(&mut v8, f);
    assert_eq!(name_of(&v8, first), "handler");
    assert_eq!(
        sample(&mut v8, f),
        first,
        "the same function, from the cache"
    );

    // Another function's name now lies where `handler` did, under the same SFI
    // address and words: the cache must not answer `handler`.
    let at = name - 1;
    let string_map = heap.0.lock().unwrap().u64_at(at).unwrap();
    heap.0
        .lock()
        .unwrap()
        .insert(at, string_bytes(string_map, "onRequestTimeout"));
    let moved = sample(&mut v8, f);
    assert_ne!(moved, first);
    assert_eq!(name_of(&v8, moved), "onRequestTimeout");

    // The name's place now holds no string at all: a marked frame.
    let other_map = heap.0.lock().unwrap().u64_at(not_a_string - 1).unwrap();
    heap.0
        .lock()
        .unwrap()
        .insert(at, string_bytes(other_map, "handler"));
    assert_eq!(sample(&mut v8, f), UNREADABLE_ID);

    // Put back as it was: the first name again, with its first id.
    heap.0
        .lock()
        .unwrap()
        .insert(at, string_bytes(string_map, "handler"));
    assert_eq!(sample(&mut v8, f), first);
}

/// A reader of one Node process whose memory is `heap`.
fn node(heap: &Shared) -> V8Frames {
    let mut v8 = V8Frames::new(Budgets::default());
    let mem = heap.clone();
    v8.node_found(
        PID,
        "/usr/bin/node",
        Ok(Arc::new(Layout::from_values(&values()).unwrap())),
        (0, (0, u64::MAX)),
        || Some(Box::new(mem) as _),
    );
    v8
}

#[test]
fn the_samples_of_a_round_read_each_heap_page_once() {
    let mut b = Builder::new();
    let name = b.string("handler");
    let file = b.string("/srv/app.js");
    let script = b.object(167, &[0, file]);
    let f = b.function(name, script);
    let heap = Shared(
        Arc::new(Mutex::new(std::mem::take(&mut b.snap))),
        Arc::default(),
    );
    let mut v8 = node(&heap);
    let reads = || heap.1.load(Ordering::Relaxed);
    let first = sample_in_round(&mut v8, f);
    let one_sample = reads();
    assert!(one_sample > 0);
    for _ in 0..5 {
        assert_eq!(sample_in_round(&mut v8, f), first);
    }
    assert_eq!(
        reads(),
        one_sample,
        "the round's later samples read no page again"
    );
    v8.handled();
    // The next round reads the heap as it is then: a name moved in between is seen.
    let at = name - 1;
    let string_map = heap.0.lock().unwrap().u64_at(at).unwrap();
    (heap.0.lock().unwrap()).insert(at, string_bytes(string_map, "onTimeout"));
    let moved = sample_in_round(&mut v8, f);
    assert_eq!(reads(), 2 * one_sample);
    assert_ne!(moved, first);
    assert_eq!(v8.names(PID, moved).unwrap().1[0].function, "onTimeout");
}
