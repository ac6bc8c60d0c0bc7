//! A JVM's threads in a dump: their stacks unwound through Java frames and those
//! frames named, with the recorder's own Java stage ([`crate::replay::java`]). The
//! JVM is asked nothing: its tables are read from its memory, and its code found in
//! its code heap ([`HeapCode`]), as it is at the moment each thread is read. The
//! frames found are merged and named through the runtime seam, as a sample's are.

use super::{Image, Stack};
use crate::format::{Frame, FrameKind, SymbolSource};
use crate::interp::jvm::{HeapCode, JavaFrames};
use crate::replay::java::{self, JavaCopy};
use crate::replay::stack::StackBuilder;
use crate::unwind::UnwindEnd;

/// The Java stage for process `pid`, knowing its JVM if it maps `libjvm.so`.
pub(super) fn attach(pid: u32, image: &Image) -> JavaFrames {
    let mut frames = JavaFrames::new(crate::sys::monotonic_ns);
    for (m, module) in image.mappings.iter().zip(&image.modules) {
        if crate::profile::vm_threads::is_libjvm(&m.path)
            && let Some((lm, bias)) = module
        {
            let mem = || crate::sys::ProcessMemory::open(pid).map(|m| Box::new(m) as _);
            frames.jvm_mapped(pid, (*lm.image).as_ref(), *bias, mem);
        }
    }
    frames
}

/// A thread's registers as read: ip, bp when known, then sp, the stack copied from sp,
/// and r13 when sampled.
pub(super) type ThreadRegs<'a> = (u64, Option<u64>, (u64, &'a [u8], Option<u64>));

/// A thread's stack from its registers (`ip`, `bp` if known) and `copy` of its stack,
/// unwound through its JVM's code, with the Java frame id of each frame.
pub(super) fn unwind(
    frames: &mut JavaFrames,
    pid: u32,
    (ip, bp, (sp, stack, r13)): ThreadRegs<'_>,
    image: &Image,
    unwinder: &mut StackBuilder,
) -> (UnwindEnd, Stack) {
    let end = {
        let lookup = HeapCode::new(&image.space, frames, pid);
        unwinder.from_registers_with_regs((ip, sp, bp), stack, &lookup)
    };
    let addrs = unwinder.addrs().to_vec();
    let copy = JavaCopy { sp, stack, r13 };
    let now = crate::sys::monotonic_ns();
    let ids = java::java_ids(frames, (pid, now), copy, &addrs, unwinder.frame_regs());
    (end, Stack { addrs, java: ids })
}

/// The module a dump shows for frame `f`, named by the seam ([`crate::replay::runtimes`])
/// from `source`: where a Java frame ran (interpreter or compiled code), None for any
/// other frame.
pub(super) fn module(f: &Frame, source: SymbolSource) -> Option<String> {
    if f.kind != FrameKind::Interpreted {
        return None;
    }
    let module = match source {
        SymbolSource::JavaInterpreted => "[java interpreted]",
        SymbolSource::Jit => "[java compiled]",
        _ => return None,
    };
    Some(module.to_owned())
}
