use super::slots::{eval_frame_ends, inner_calls};
use super::*;

fn frame(kind: FrameKind, addr: u64) -> Frame {
    Frame {
        kind,
        pid: 1,
        addr,
        mapping: None,
    }
}

/// A 256-byte stack copy at 0x1000 holding `words` (address, value).
fn stack_of(words: &[(u64, u64)]) -> (u64, Vec<u8>) {
    let sp = 0x1000u64;
    let mut stack = vec![0u8; 0x100];
    for &(at, v) in words {
        let i = (at - sp) as usize;
        stack[i..i + 8].copy_from_slice(&v.to_le_bytes());
    }
    (sp, stack)
}

#[test]
fn the_calls_made_inside_the_innermost_eval_frame_are_found_from_its_end() {
    // Leaf first: a kernel frame, the leaf (deflate), zlib_compress (returns into
    // the eval loop at 0xe1), the eval frame (returns to its caller at 0xc1).
    let frames = [
        frame(FrameKind::Kernel, 0xffff_0000),
        frame(FrameKind::User, 0xd00),
        frame(FrameKind::Return, 0xa1),
        frame(FrameKind::Return, 0xe1),
        frame(FrameKind::Return, 0xc1),
    ];
    // A stale copy of the return into the eval loop, under the real one.
    let (sp, stack) = stack_of(&[
        (0x1008, 0xe1),
        (0x1020, 0xa1),
        (0x1040, 0xe1),
        (0x10f0, 0xc1),
    ]);
    let (mut ends, mut calls) = (Vec::new(), Vec::new());
    let evals = [3];
    eval_frame_ends(sp, &stack, &frames, &evals, &mut ends);
    assert_eq!(ends, [0x10f0]);
    assert!(inner_calls(sp, &stack, &frames, &evals, &ends, &mut calls));
    assert_eq!(calls, [0x1040, 0x1020]);
    // The leaf in the eval loop: no calls.
    let evals = [1];
    let frames = [frames[0], frame(FrameKind::User, 0xd00), frames[4]];
    eval_frame_ends(sp, &stack, &frames, &evals, &mut ends);
    assert!(inner_calls(sp, &stack, &frames, &evals, &ends, &mut calls));
    assert!(calls.is_empty());
    // The eval frame's end not in the copy: not known.
    assert!(!inner_calls(
        sp,
        &stack,
        &frames,
        &evals,
        &[u64::MAX],
        &mut calls
    ));
}

#[test]
fn a_call_with_the_eval_frames_own_return_address_is_not_its_end() {
    // CPython 3.8 caught entering a new eval call, leaf first: PyEval_EvalFrameEx,
    // called from function_code_fastcall (returning to 0xa1), from call_function
    // (0xb1), from the innermost eval frame (0xe1); that eval frame was entered from
    // the same call site (0xa1) in the function_code_fastcall outside it, then
    // call_function (0xb1), the outer eval frame (0xe1) and its caller (0xc1).
    let frames = [
        frame(FrameKind::User, 0xd00),
        frame(FrameKind::Return, 0xa1),
        frame(FrameKind::Return, 0xb1),
        frame(FrameKind::Return, 0xe1),
        frame(FrameKind::Return, 0xa1),
        frame(FrameKind::Return, 0xb1),
        frame(FrameKind::Return, 0xe1),
        frame(FrameKind::Return, 0xc1),
    ];
    let (sp, stack) = stack_of(&[
        (0x1000, 0xa1),
        (0x1010, 0xb1),
        (0x1020, 0xe1),
        (0x1060, 0xa1),
        (0x1070, 0xb1),
        (0x1080, 0xe1),
        (0x10f0, 0xc1),
    ]);
    let mut ends = Vec::new();
    eval_frame_ends(sp, &stack, &frames, &[3, 6], &mut ends);
    assert_eq!(ends, [0x1060, 0x10f0]);
}

#[test]
fn registered_threads_that_end_are_forgotten_once() {
    let open: Opener<crate::interp::Snapshot> =
        Box::new(|_, _, _| Err(Refused::Failed("no process".into())));
    let mut p = PythonFrames::new(open);
    let start = crate::interp::python::ChainStart {
        tstate: 0x1000,
        first: 8,
        second: None,
        previous: 24,
        skip: 24,
        len: 88,
    };
    p.captures.register(7, start);
    // Thread 8 was never registered: nothing to forget.
    p.thread_exited(8);
    assert_eq!(p.registrations(), [(7, start)]);
    assert!(p.forgotten().is_empty());
    p.thread_exited(7);
    p.thread_exited(7);
    assert_eq!(p.forgotten(), [7]);
    assert!(p.forgotten().is_empty());
}
