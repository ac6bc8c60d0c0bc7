//! The one Java stage, for every road in: a sample's (or a dumped thread's) native
//! frames in a HotSpot JVM become the Java methods they ran. Interpreter frames
//! become interpreted methods read from the frame itself in the stack copy, compiled
//! frames the chain of methods inlined there ([`crate::interp::jvm::JavaFrames`]);
//! each rewritten frame is a [`FrameKind::Interpreted`] frame whose address is a Java
//! frame id, named by [`JavaFrames::names`]. The rewrite itself is the seam's
//! ([`crate::replay::merge`]); this holds what its callers give it.
//!
//! The recorder knows the JVM's code through its perf map (it asks the JVM for it);
//! `dump` and perf.data conversion ask the JVM nothing and find code through the JVM's
//! own code heap ([`HeapCode`], which also lets them unwind through Java frames), so
//! their compiled frames are checked against the nmethod header alone ([`NO_MAP`]).

use crate::format::{Frame, FrameKind};
use crate::interp::CodeRegions;
pub use crate::interp::jvm::HeapCode;
use crate::interp::jvm::JavaFrames;
use crate::replay::merge;
use crate::replay::python::Copied;
use crate::unwind::{FrameAddress, FrameRegisters};

/// The state of a stack that the Java stage reads: its stack pointer, the copy of the
/// stack from there, and r13 (where HotSpot's interpreter keeps the running method's
/// bytecode pointer), when sampled.
#[derive(Debug, Clone, Copy)]
pub struct JavaCopy<'a> {
    /// The stack pointer the copy starts at.
    pub sp: u64,
    /// The stack bytes.
    pub stack: &'a [u8],
    /// The sampled r13.
    pub r13: Option<u64>,
}

/// No perf map: compiled code is found from its nmethod's header (see
/// [`crate::interp::jvm::inlined::Compiled::region_of`]).
struct NoMap;

impl CodeRegions for NoMap {
    fn region(&self, _addr: u64) -> Option<(u64, u64, &str)> {
        None
    }
}

/// The regions to read compiled frames with when no perf map is known.
pub const NO_MAP: &dyn CodeRegions = &NoMap;

/// The Java frame id of each of `addrs` (a stack unwound with `regs`, leaf first),
/// None for a frame that is not Java: for readers that keep addresses rather than
/// frames (`dump`, which reads a thread's JVM as it unwinds it). Found by the seam's
/// merge ([`crate::replay::merge`]), as a sample's Java frames are.
pub fn java_ids(
    java: &mut JavaFrames,
    (pid, time): (u32, u64),
    copy: JavaCopy<'_>,
    addrs: &[FrameAddress],
    regs: &[FrameRegisters],
) -> Vec<Option<u64>> {
    let mut frames: Vec<Frame> = addrs
        .iter()
        .map(|a| Frame {
            kind: FrameKind::User,
            pid,
            addr: a.address(),
            mapping: None,
        })
        .collect();
    let captured = merge::Captured {
        pid,
        tid: pid,
        copy: Copied {
            sp: copy.sp,
            stack: copy.stack,
            regs: [0; 6],
            steady: false,
            time,
        },
        java: merge::JavaAt::Copy {
            time,
            r13: copy.r13,
            map: Some(NO_MAP),
        },
        cut: false,
    };
    let stages: merge::Stages<'_, crate::sys::ProcessMemory> = merge::Stages {
        java: Some(java),
        python: None,
        v8: None,
        ruby: None,
    };
    let mut stack = merge::UserFrames {
        addrs,
        regs,
        frames: &mut frames,
    };
    merge::merge(stages, &mut stack, captured, merge::Bound::new(&[], &[]));
    frames
        .iter()
        .map(|f| (f.kind == FrameKind::Interpreted).then_some(f.addr))
        .collect()
}
