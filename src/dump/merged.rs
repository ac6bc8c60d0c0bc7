//! A dumped thread's frames merged with its runtimes' frames through the seam
//! ([`crate::replay::merge`]), as a sample's are: the Java frames its JVM's stage found
//! as the stack was unwound, and CPython's eval-loop frames replaced by the Python
//! frames they ran, read again as a sample's when a blocked thread ran meanwhile.

use super::{Image, Stack, StackRead, ThreadDump};
use crate::format::{Frame, FrameKind};
use crate::process::task;
use crate::replay::merge;
use crate::replay::python::Copied;
use crate::running::python::LivePython as PythonFrames;
use crate::unwind::FrameAddress;

/// How many of `frames` are Python frames that could not be validated (none where
/// the process has no Python frames read: a Java frame's ids are its own).
pub(super) fn changed(frames: &[Frame], python: &PythonFrames) -> usize {
    if !python.any() {
        return 0;
    }
    frames
        .iter()
        .filter(|f| f.kind == FrameKind::Interpreted && f.addr == crate::interp::python::CHANGED)
        .count()
}

/// A thread's user frames, leaf first, from the addresses unwound from `read`, merged
/// with its runtimes' frames through the seam ([`merge`]): the JVM method of each
/// frame where the Java stage found one as it unwound, and each CPython eval-loop
/// frame replaced by the Python frames it runs. With them, the address each frame
/// shows: a Java frame its native one while the frames are one for one with the
/// native frames (a JVM runs no CPython eval loop), any other frame its own.
pub(super) fn thread_frames(
    pid: u32,
    t: &ThreadDump,
    stack: &Stack,
    read: &StackRead,
    image: &Image,
    python: &mut PythonFrames,
) -> (Vec<Frame>, Vec<u64>) {
    let native: Vec<Frame> = stack
        .addrs
        .iter()
        .map(|a| Frame {
            kind: match a {
                FrameAddress::InstructionPointer(_) => FrameKind::User,
                FrameAddress::ReturnAddress(_) => FrameKind::Return,
            },
            pid,
            addr: a.address(),
            mapping: image.space.find(a.lookup_address()).map(|(_, m)| m.id),
        })
        .collect();
    let mut captured = merge::Captured {
        pid,
        tid: t.tid,
        copy: Copied {
            sp: read.sp,
            stack: &read.bytes,
            regs: read.regs,
            steady: read.blocked.is_some(),
            time: 0,
        },
        java: merge::JavaAt::Ids(&stack.java),
        cut: t.note.is_some(),
    };
    let bound = merge::Bound::new(&image.modules, &image.mappings);
    // The Java frames come by id, found as the stack was unwound: no Java stage and
    // no registers are needed now.
    let merged = |python: &mut PythonFrames, captured| {
        let mut frames = native.clone();
        let stages = merge::Stages {
            java: None,
            python: Some(python),
            v8: None,
            ruby: None,
        };
        let mut user = merge::UserFrames {
            addrs: &[],
            regs: &[],
            frames: &mut frames,
        };
        merge::merge(stages, &mut user, captured, bound);
        frames
    };
    let mut frames = merged(python, captured);
    // A blocked thread's frames are read as they are now: if it ran meanwhile (its
    // `syscall` line changed), they are read as a sample's, checked against the copy.
    if read.blocked.is_some() && task::read_syscall(pid, t.tid) != read.blocked {
        captured.copy.steady = false;
        frames = merged(python, captured);
    }
    let shown = if frames.len() == native.len() {
        &native
    } else {
        &frames
    };
    let addrs = shown.iter().map(|f| f.addr).collect();
    (frames, addrs)
}
