//! A JVM's threads in a dump: their stacks unwound through Java frames and those
//! frames named, with the recorder's own Java stage ([`crate::replay::java`]). The
//! JVM is asked nothing: its tables are read from its memory, and its code found in
//! its code heap ([`HeapCode`]), as it is at the moment each thread is read.

use super::{DumpFrame, Image, Inlined, Stack};
use crate::format::SymbolSource;
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

/// Java frame `id` (at address `addr`) as the dump shows it: the method, with those
/// inlined into it at that point innermost first; None if it has no name.
pub(super) fn frame(frames: &JavaFrames, pid: u32, addr: u64, id: u64) -> Option<DumpFrame> {
    let (source, lines) = frames.names(pid, id)?;
    let loc = |l: &crate::format::SymbolLine| Some(format!("{}:{}", l.file.as_deref()?, l.line?));
    let (outer, inlined) = lines.split_last()?;
    Some(DumpFrame {
        addr,
        function: Some(outer.function.clone()),
        location: loc(outer),
        module: Some(
            match source {
                SymbolSource::JavaInterpreted => "[java interpreted]",
                _ => "[java compiled]",
            }
            .to_owned(),
        ),
        inlined: inlined
            .iter()
            .map(|l| Inlined {
                function: l.function.clone(),
                location: loc(l),
            })
            .collect(),
    })
}
