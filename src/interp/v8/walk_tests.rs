//! The frame walker on a stack and heap built by hand: which frames it reads (JIT
//! code, the interpreter's frames in the builtins), which it leaves native (typed
//! frames, builtins that are no interpreter frame, code elsewhere), and which it marks.

use std::sync::Arc;

use super::frames::{InJit, UNREADABLE_ID, UNREADABLE_NAME, V8Frames};
use super::layout::Layout;
use super::tests::{Builder, smi, values};
use crate::format::{Frame, FrameKind};
use crate::interp::Budgets;
use crate::unwind::{FrameAddress, FrameRegisters};

const PID: u32 = 7;
/// The builtins (the interpreter) and JIT code of the made-up process.
const BUILTINS: (u64, u64) = (0x40_0000, 0x50_0000);
const JIT: u64 = 0x7000_0000;
const NATIVE: u64 = 0x60_0000;
const SP: u64 = 0x7ff0_0000;

/// A stack copy holding one frame per `slots` entry, 0x40 bytes apart: each frame's
/// frame pointer and its words below it (context, function, -, bytecode array,
/// offset).
fn stack(slots: &[[u64; 5]]) -> (Vec<u8>, Vec<u64>) {
    let mut bytes = vec![0u8; 0x40 * (slots.len() + 1)];
    let mut fps = Vec::new();
    for (i, words) in slots.iter().enumerate() {
        let fp = SP + 0x40 * (i as u64 + 1);
        for (k, w) in words.iter().enumerate() {
            let at = (fp - 8 * (k as u64 + 1) - SP) as usize;
            bytes[at..at + 8].copy_from_slice(&w.to_le_bytes());
        }
        fps.push(fp);
    }
    (bytes, fps)
}

#[test]
fn the_walker_names_javascript_frames_and_leaves_the_rest() {
    let mut b = Builder::new();
    let inner_name = b.string("inner");
    let outer_name = b.string("outer");
    let file = b.string("/srv/app.js");
    let script = b.object(167, &[0, file]);
    let inner = b.function(inner_name, script);
    let outer = b.function(outer_name, script);
    let bytecode = b.object(191, &[]);
    let context = b.object(200, &[]);
    let stub_marker = 17 << 1;
    let (bytes, fps) = stack(&[
        // 0: the interpreter running inner.
        [context, inner, 0, bytecode, smi(3)],
        // 1: a stub frame in JIT code.
        [stub_marker, 0, 0, 0, 0],
        // 2: a JIT frame whose function is nothing.
        [context, 0x4141_0001, 0, 0, 0],
        // 3: outer, optimized.
        [context, outer, 0, 0, 0],
        // 4: a builtin frame that is no interpreter frame (no bytecode array).
        [context, outer, 0, 0, 0],
        // 5: native code whose slots happen to look like a frame's.
        [context, outer, 0, bytecode, smi(0)],
    ]);
    let pcs = [
        BUILTINS.0 + 0x10,
        JIT + 0x100,
        JIT + 0x200,
        JIT + 0x300,
        BUILTINS.0 + 0x20,
        NATIVE + 0x10,
    ];
    let addrs: Vec<FrameAddress> = pcs
        .iter()
        .map(|&a| FrameAddress::ReturnAddress(a + 1))
        .collect();
    let regs: Vec<FrameRegisters> = pcs
        .iter()
        .zip(&fps)
        .map(|(&pc, &fp)| FrameRegisters {
            pc,
            sp: fp - 0x38,
            fp: Some(fp),
        })
        .collect();
    let mut frames: Vec<Frame> = pcs
        .iter()
        .map(|&pc| Frame {
            kind: FrameKind::Return,
            pid: PID,
            addr: pc + 1,
            mapping: Some(if pc >= JIT { 1 } else { 0 }),
        })
        .collect();
    let mut layout = Layout::from_values(&values()).unwrap();
    layout.builtins = Some(BUILTINS);
    let mut v8 = V8Frames::new(Budgets::default());
    let snap = b.snap;
    v8.node_found(
        PID,
        "/usr/bin/node",
        Ok(Arc::new(layout)),
        (0, (0, u64::MAX)),
        || Some(Box::new(snap) as _),
    );
    assert!(v8.wants(PID) && !v8.wants(PID + 1));
    let in_jit = |f: &Frame| f.mapping == Some(1);
    let no_jit = |_: u64| false;
    let above = v8.expand(
        PID,
        (SP, &bytes),
        (&addrs, &regs),
        InJit {
            frame: &in_jit,
            at: &no_jit,
        },
        &mut frames,
    );
    assert!(above.is_none());
    let name = |f: &Frame| {
        (f.kind == FrameKind::Interpreted)
            .then(|| v8.names(PID, f.addr).unwrap().1[0].clone())
            .map(|l| (l.function, l.file))
    };
    let app = Some("/srv/app.js".to_owned());
    assert_eq!(name(&frames[0]), Some(("inner".into(), app.clone())));
    assert_eq!(
        frames[1].kind,
        FrameKind::Return,
        "a typed frame stays native"
    );
    assert_eq!(frames[2].addr, UNREADABLE_ID);
    assert_eq!(name(&frames[2]), Some((UNREADABLE_NAME.into(), None)));
    assert_eq!(name(&frames[3]), Some(("outer".into(), app)));
    assert_eq!(frames[4].kind, FrameKind::Return, "a builtin of its own");
    assert_eq!(frames[5].kind, FrameKind::Return, "native code is not read");
    assert_eq!((v8.stats.named, v8.stats.unreadable), (2, 1));
    // The same function again: the same id, from the cache.
    let id = frames[3].addr;
    let mut again = vec![Frame {
        kind: FrameKind::Return,
        pid: PID,
        addr: JIT + 0x301,
        mapping: Some(1),
    }];
    let one = (&addrs[3..4], &regs[3..4]);
    v8.expand(
        PID,
        (SP, &bytes),
        one,
        InJit {
            frame: &in_jit,
            at: &no_jit,
        },
        &mut again,
    );
    assert_eq!(again[0].addr, id);
    let notes = v8.notes();
    assert!(
        notes.iter().any(|n| n.contains("1 of 4 JavaScript frames")),
        "{notes:?}"
    );
}

#[test]
fn a_refused_binary_is_noted_and_read_no_further() {
    let mut v8 = V8Frames::new(Budgets::default());
    let refused = Err(super::V8Error::Missing("off_fp_function"));
    v8.node_found(PID, "/opt/node", refused, (0, (0, 0)), || unreachable!());
    assert!(!v8.wants(PID));
    let notes = v8.notes();
    assert!(
        notes.len() == 1 && notes[0].contains("off_fp_function") && notes[0].contains("/opt/node"),
        "{notes:?}"
    );
}

/// A frameless builtin sampled at the leaf (the unwind stepped by the frame pointer
/// to the caller's caller): its JavaScript caller is found from a return address
/// after a call into JIT code among the words it pushed, and only then.
#[test]
fn a_frameless_builtins_caller_is_found_by_a_checked_scan() {
    let mut b = Builder::new();
    let name = b.string("mega");
    let file = b.string("/srv/app.js");
    let script = b.object(167, &[0, file]);
    let mega = b.function(name, script);
    let context = b.object(200, &[]);
    // The caller's optimized code: `call rel32` just before the return address, and
    // a `ret` before another address.
    let call_ra = JIT + 0x107;
    let ret_ra = JIT + 0x207;
    b.snap
        .insert(JIT + 0x100, vec![0x90, 0x90, 0xE8, 1, 2, 3, 4]);
    b.snap.insert(
        JIT + 0x200,
        vec![0x90; 6].into_iter().chain([0xC3]).collect(),
    );
    let fp = SP + 0x40;
    let frame = |pushed: &[u64]| {
        let mut bytes = vec![0u8; 0x80];
        for (k, w) in pushed.iter().enumerate() {
            bytes[8 * k..8 * k + 8].copy_from_slice(&w.to_le_bytes());
        }
        let below = |off: u64, w: u64| (0x40 - off as usize, w);
        for (at, w) in [below(8, context), below(16, mega)] {
            bytes[at..at + 8].copy_from_slice(&w.to_le_bytes());
        }
        bytes
    };
    let leaf_pc = BUILTINS.0 + 0x80;
    let leaf = FrameRegisters {
        pc: leaf_pc,
        sp: SP,
        fp: Some(fp),
    };
    // The unwind's next frame, the caller's caller, just above fp's return address.
    let stepped = FrameRegisters {
        pc: NATIVE,
        sp: fp + 16,
        fp: Some(fp + 0x40),
    };
    let mut layout = Layout::from_values(&values()).unwrap();
    layout.builtins = Some(BUILTINS);
    let mut v8 = V8Frames::new(Budgets::default());
    v8.node_found(
        PID,
        "/usr/bin/node",
        Ok(Arc::new(layout)),
        (0, (0, u64::MAX)),
        || Some(Box::new(b.snap) as _),
    );
    let in_jit = |f: &Frame| f.mapping == Some(1);
    let jit_at = |a: u64| a >= JIT;
    let mut caller = |bytes: &[u8], next: &FrameRegisters| {
        let mut frames = vec![Frame {
            kind: FrameKind::User,
            pid: PID,
            addr: leaf_pc,
            mapping: Some(0),
        }];
        let addrs = [FrameAddress::InstructionPointer(leaf_pc)];
        let regs = [leaf, *next];
        let found = v8.expand(
            PID,
            (SP, bytes),
            (&addrs, &regs),
            InJit {
                frame: &in_jit,
                at: &jit_at,
            },
            &mut frames,
        );
        assert_eq!(frames[0].kind, FrameKind::User, "the builtin stays native");
        found.map(|f| v8.names(PID, f.addr).unwrap().1[0].function.clone())
    };
    // Two words pushed, then the return address.
    assert_eq!(
        caller(&frame(&[7, 9, call_ra]), &stepped).as_deref(),
        Some("mega")
    );
    // No word after a call: a stale code address is not a caller.
    assert_eq!(caller(&frame(&[7, ret_ra, 9]), &stepped), None);
    // The unwind found the caller itself (the return address at sp).
    let found = FrameRegisters {
        pc: call_ra,
        sp: SP + 8,
        fp: Some(fp),
    };
    assert_eq!(caller(&frame(&[call_ra]), &found), None);
    // Beyond the words looked at, or above the frame pointer: not looked at.
    let mut far = vec![0; 9];
    far[8] = call_ra;
    assert_eq!(caller(&frame(&far), &stepped), None);
}
