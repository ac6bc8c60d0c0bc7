//! [`PythonProcess::frames`] on a hand-made CPython 3.12 process: a thread state, a
//! data stack with `worker` and the frame in the slot after it, code objects, and a
//! sample's stack copy laid out as the eval loop leaves it (its `_PyCFrame`, its spill
//! slots, the C functions it called below it). Each test builds the one moment that a
//! rule of the reader must get right: a slot reused between the sample and its read,
//! with an instruction pointer of an earlier call left over in the stack.

use std::collections::BTreeMap;

use super::{CHANGED, PythonProcess};
use crate::interp::python::code::tests::put_str;
use crate::interp::python::instant::SampleInstant;
use crate::interp::python::layout::Layout;
use crate::interp::python::walk::Runtime;
use crate::interp::{Memory, Overlay};

/// Memory written a word at a time, read across pages.
#[derive(Default)]
struct Heap {
    pages: BTreeMap<u64, Box<[u8; 4096]>>,
}

impl Heap {
    fn put(&mut self, addr: u64, bytes: &[u8]) {
        for (i, &b) in bytes.iter().enumerate() {
            let a = addr + i as u64;
            let page = self
                .pages
                .entry(a & !0xfff)
                .or_insert_with(|| Box::new([0; 4096]));
            page[(a & 0xfff) as usize] = b;
        }
    }

    fn u64(&mut self, addr: u64, v: u64) {
        self.put(addr, &v.to_le_bytes());
    }

    fn u32(&mut self, addr: u64, v: u32) {
        self.put(addr, &v.to_le_bytes());
    }
}

impl Memory for Heap {
    fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        for (i, b) in buf.iter_mut().enumerate() {
            let a = addr + i as u64;
            match self.pages.get(&(a & !0xfff)) {
                Some(p) => *b = p[(a & 0xfff) as usize],
                None => return false,
            }
        }
        true
    }
}

const CODE_TYPE: u64 = 0x10_0000;
const RUNTIME: u64 = 0x20_0000;
const INTERP: u64 = 0x20_1000;
const TSTATE: u64 = 0x20_2000;
const TID: u32 = 4242;
/// worker's frame in the data stack, and the slot right after it (20 words).
const WORKER_FRAME: u64 = 0x60_0018;
const SLOT: u64 = WORKER_FRAME + 20 * 8;
/// The sample's stack: the C functions the eval loop called, up to the return
/// address into it at `CALL_SLOT`; the eval loop's own C frame, its `_PyCFrame` at
/// `CFRAME`; its end (the return address to its caller) at `END`.
const SP: u64 = 0x7f00_0000_0000;
const CALL_SLOT: u64 = SP + 0xf8;
const CFRAME: u64 = SP + 0x180;
const END: u64 = SP + 0x2f8;

/// Code objects: worker (names compress, hot_a), compress, hot_a.
const WORKER: u64 = 0x40_0000;
const COMPRESS: u64 = 0x40_1000;
const HOT_A: u64 = 0x40_2000;
const BYTECODE: u64 = 192;

struct Fixture {
    heap: Heap,
    stack: Vec<u8>,
    layout: Layout,
}

impl Fixture {
    /// The process as it is now: the thread runs `running` in the slot after
    /// worker's frame, at byte `at` of its bytecode (None: not started); the stack
    /// copy is empty.
    fn new(running: u64, at: Option<u64>) -> Fixture {
        let layout = Layout::for_version(3, 12).unwrap();
        let mut h = Heap::default();
        h.u64(RUNTIME + layout.runtime_interpreters_head, INTERP);
        h.u64(INTERP + layout.interp_next, 0);
        h.u64(INTERP + layout.interp_threads_head, TSTATE);
        h.u64(TSTATE + layout.tstate_next, 0);
        h.u64(
            TSTATE + layout.tstate_native_thread_id.unwrap(),
            u64::from(TID),
        );
        h.u64(TSTATE + layout.tstate_frame, CFRAME);
        // Strings, a file name, an empty line table, name tuples.
        let mut snap = crate::interp::Snapshot::default();
        let strs = [
            (0x30_0000, "worker"),
            (0x30_0100, "compress"),
            (0x30_0200, "hot_a"),
            (0x30_0300, "worker.py"),
        ];
        for (a, t) in strs {
            put_str(&mut snap, &layout, a, t);
            let mut v = vec![0u8; layout.unicode_ascii_size as usize + t.len() + 1];
            assert!(snap.read(a, &mut v));
            h.put(a, &v);
        }
        h.u64(0x51_0000 + 16, 0);
        // worker's co_names: compress, hot_a; the others' none.
        h.u64(0x50_0000 + 16, 2);
        h.u64(0x50_0000 + 24, 0x30_0100);
        h.u64(0x50_0000 + 32, 0x30_0200);
        h.u64(0x50_0100 + 16, 0);
        for (code, name, names) in [
            (WORKER, 0x30_0000, 0x50_0000),
            (COMPRESS, 0x30_0100, 0x50_0100),
            (HOT_A, 0x30_0200, 0x50_0100),
        ] {
            h.u64(code + 8, CODE_TYPE);
            h.u64(code + 16, 32);
            h.u64(code + 32, names);
            h.u32(code + layout.code_firstlineno, 1);
            h.u32(code + 76, 20);
            h.u64(code + 96, 0x50_0100);
            h.u64(code + layout.code_filename, 0x30_0300);
            h.u64(code + layout.code_name, name);
            h.u64(code + layout.code_qualname.unwrap(), name);
            h.u64(code + layout.code_linetable, 0x51_0000);
        }
        // The data stack: worker (the bottom of its eval call), the frame after it.
        let frame = |h: &mut Heap, at: u64, code: u64, previous: u64, offset: Option<u64>| {
            h.u64(at, code);
            h.u64(at + 8, previous);
            let start = code + BYTECODE;
            h.u64(at + 56, offset.map_or(start - 2, |o| start + o));
            h.put(at + 70, &[0]);
        };
        frame(&mut h, WORKER_FRAME, WORKER, 0, Some(20));
        frame(&mut h, SLOT, running, WORKER_FRAME, at);
        // The thread's `_PyCFrame` now: it runs that frame.
        h.u64(CFRAME, SLOT);
        h.u64(CFRAME + 8, 0);
        Fixture {
            heap: h,
            stack: vec![0; (END + 8 - SP) as usize],
            layout,
        }
    }

    /// Puts `v` at `addr` in the sample's stack copy.
    fn stack(&mut self, addr: u64, v: u64) {
        let i = (addr - SP) as usize;
        self.stack[i..i + 8].copy_from_slice(&v.to_le_bytes());
    }

    /// A process that has met worker and compress (named them in earlier samples).
    fn process(&self) -> PythonProcess {
        let rt = Runtime {
            layout: self.layout,
            runtime: RUNTIME,
            code_type: CODE_TYPE,
        };
        let mut p = PythonProcess::new(rt);
        for code in [WORKER, COMPRESS] {
            assert!(p.learn(&self.heap, code).is_some());
        }
        p
    }

    /// The names of the Python frames of a sample whose stack copy is the
    /// fixture's, at `CFRAME` the frame `current`, with the calls `calls` made below
    /// the eval loop: leaf first.
    fn read(&mut self, current: u64, calls: Option<&[u64]>) -> (Vec<String>, PythonProcess) {
        self.stack(CFRAME, current);
        let mut p = self.process();
        let mem = Overlay {
            sp: SP,
            stack: &self.stack,
            rest: &self.heap,
        };
        let at = SampleInstant {
            sp: SP,
            stack: &self.stack,
            regs: &[0; 6],
            ends: &[END],
            cut: false,
            calls,
        };
        let segs = p.frames(&mem, &self.heap, TID, &at, 1).unwrap();
        let names = segs[0]
            .iter()
            .map(|&id| match id {
                CHANGED => "[changed]".to_owned(),
                id => p.name(id).unwrap().function.to_string(),
            })
            .collect();
        (names, p)
    }
}

/// The return address into the eval loop, at the top of the C function it called.
const RET: u64 = 0x7f11_2233_4455;

/// The misname of session 12 (3.12: zlib under `worker`): the sample ran
/// `compress`'s call of zlib; by its read the thread had returned and called `hot_a`
/// in the same slot. The sample's `_PyCFrame` gives the slot, exact; the eval loop's
/// instruction pointer into `compress` is in its spill slot; deeper, in the locals of
/// the C functions it called, an instruction pointer into `worker` is left over from
/// an earlier C call made from `worker`. Found first from the stack pointer up, it
/// named the sample's frame `worker` (a callee pushed, not started, as the rule
/// had it), under which the zlib frames then sat.
#[test]
fn a_pointer_left_over_under_the_eval_loop_does_not_name_the_frame() {
    let mut f = Fixture::new(HOT_A, Some(10));
    f.stack(SP + 0x20, WORKER + BYTECODE + 12);
    f.stack(CALL_SLOT, RET);
    f.stack(SP + 0x110, COMPRESS + BYTECODE + 8);
    let (names, p) = f.read(SLOT, Some(&[CALL_SLOT]));
    // The eval loop's own pointer names the sample's frame: compress, in worker's
    // slot (hot_a, read there now, cannot call it; worker can).
    assert_eq!(names, ["compress", "worker"]);
    assert_eq!(p.counts.changed, 0);
    // Without the calls' places, the pointer left over is not taken for the eval
    // loop's own: the sample's frame is marked, its caller too (read after the
    // slot was reused).
    let (names, _) = f.read(SLOT, None);
    assert_eq!(names, ["[changed]", "[changed]"]);
}

/// The eval loop's own words point into two code objects other than the frame read
/// (one is a spill slot left from an earlier instruction): which one ran at the
/// sample is not known, so the frame is marked, never named after either.
#[test]
fn two_functions_held_by_the_eval_loop_mark_the_frame() {
    let mut f = Fixture::new(HOT_A, Some(10));
    f.stack(CALL_SLOT, RET);
    f.stack(SP + 0x110, COMPRESS + BYTECODE + 8);
    f.stack(SP + 0x118, WORKER + BYTECODE + 12);
    let (names, p) = f.read(SLOT, Some(&[CALL_SLOT]));
    assert_eq!(names[0], "[changed]", "{names:?}");
    assert!(!names.iter().any(|n| n == "compress" || n == "hot_a"));
    assert_eq!(p.counts.ambiguous, 1);
}

/// A frame pushed and not started yet, the eval loop still at its caller's
/// instruction (the sample inside the eval loop itself): the caller runs. The same
/// pointer with a C function called below the eval loop is not that moment.
#[test]
fn a_callee_pushed_but_not_started_is_its_caller_only_inside_the_eval_loop() {
    let mut f = Fixture::new(HOT_A, None);
    // The leaf is the eval loop: its own frame starts at the stack pointer.
    f.stack(SP + 0x110, WORKER + BYTECODE + 12);
    let (names, _) = f.read(SLOT, Some(&[]));
    assert_eq!(names, ["worker"]);
    // Inside a C function it called: worker cannot be running with hot_a pushed on
    // it (its pointer is one left from before that call); hot_a (read now) is not
    // confirmed either.
    f.stack(CALL_SLOT, RET);
    let (names, _) = f.read(SLOT, Some(&[CALL_SLOT]));
    assert_eq!(names, ["[changed]", "[changed]"]);
}

/// Words left over under the eval loop name no other function, but confirm the frame
/// read (the eval loop's own pointer held where the model of the calls missed it),
/// at the instruction the frame records first.
#[test]
fn a_left_over_word_confirms_only_the_frame_read() {
    let mut f = Fixture::new(HOT_A, Some(10));
    f.stack(CALL_SLOT, RET);
    f.stack(SP + 0x20, HOT_A + BYTECODE + 40);
    f.stack(SP + 0x28, HOT_A + BYTECODE + 12);
    let (names, p) = f.read(SLOT, Some(&[CALL_SLOT]));
    assert_eq!(names, ["hot_a", "worker"]);
    assert_eq!(p.counts.ambiguous, 0);
    // Only compress's pointer, left over: hot_a is not confirmed, compress not named.
    let mut f = Fixture::new(HOT_A, Some(10));
    f.stack(CALL_SLOT, RET);
    f.stack(SP + 0x20, COMPRESS + BYTECODE + 8);
    let (names, _) = f.read(SLOT, Some(&[CALL_SLOT]));
    assert_eq!(names, ["[changed]", "[changed]"]);
}

#[test]
fn a_chain_copied_from_another_threads_state_is_not_the_samples() {
    let f = Fixture::new(HOT_A, Some(4));
    let mut p = f.process();
    let head = [0u8; 72];
    // Copied from the thread's own state: taken.
    p.copied_at_instant(TSTATE, [(SLOT, &head[..])]);
    assert!(p.copy_for(&f.heap, TID).is_some());
    assert!(!p.stale_copy());
    // From a state left by an ended thread (its id taken by this one): not the
    // sample's, and the thread is to be registered again, once.
    p.copied_at_instant(TSTATE + 0x1000, [(SLOT, &head[..])]);
    assert!(p.copy_for(&f.heap, TID).is_none());
    assert!(p.stale_copy());
    assert!(!p.stale_copy());
}
