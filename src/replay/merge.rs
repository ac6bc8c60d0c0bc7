//! The merge of runtime and native frames, written once: a stack's native frames (as
//! [`super::stack::StackBuilder`] unwound them, or as `dump` read a thread) and what
//! each runtime captured of it become the stack the recording keeps, HotSpot's
//! interpreter and compiled frames replaced by the Java methods they ran
//! ([`super::java`]), V8's JavaScript frames by the functions they ran
//! ([`crate::interp::v8`]), then CPython's eval-loop frames by the Python functions
//! they ran ([`super::python`]). The recorder (and so its live windows), perf.data conversion
//! and `dump` all call [`merge`]; what differs between them is only which stages they
//! have and how the Java frames were found ([`JavaAt`]). Naming the frames the merge
//! put in is [`super::runtimes`]'s part.

pub(crate) use super::bound::Bound;
use super::python::{Copied, PythonFrames};
use super::stack::StackBuilder;
use crate::format::{Frame, FrameKind};
use crate::interp::jvm::JavaFrames;
use crate::interp::v8::V8Frames;
use crate::interp::{CodeRegions, Memory};
use crate::unwind::{FrameAddress, FrameRegisters};

/// The runtime stages a road in has, each None where it reads no such runtime.
pub(crate) struct Stages<'s, M: Memory> {
    /// HotSpot's.
    pub java: Option<&'s mut JavaFrames>,
    /// CPython's.
    pub python: Option<&'s mut PythonFrames<M>>,
    /// V8's.
    pub v8: Option<&'s mut V8Frames>,
    /// CRuby's.
    pub ruby: Option<&'s mut crate::interp::ruby::RubyFrames>,
}

/// How the Java stage finds a stack's Java frames.
#[derive(Clone, Copy)]
pub(crate) enum JavaAt<'a> {
    /// Read now from the stack copy of a sample taken at `time` (the copy's stack
    /// pointer and bytes are the Python stage's, `r13` the sampled register) and the
    /// frames' registers the unwind kept; `map` is the JVM's perf map, or
    /// [`super::java::NO_MAP`].
    Copy {
        /// The sample's time.
        time: u64,
        /// The sampled r13 (HotSpot's bytecode pointer in the interpreter).
        r13: Option<u64>,
        /// Where compiled code is, or None to read no compiled frame.
        map: Option<&'a dyn CodeRegions>,
    },
    /// Found already, as the stack was unwound: the Java frame id of each user frame,
    /// by position (`dump`, which reads a thread's JVM at the moment it unwinds it).
    Ids(&'a [Option<u64>]),
}

/// What the runtimes captured of one stack of `pid`'s thread `tid`, beside its native
/// frames.
#[derive(Clone, Copy)]
pub(crate) struct Captured<'a> {
    /// The process.
    pub pid: u32,
    /// The thread.
    pub tid: u32,
    /// The registers and stack copy of the sample (or of the dumped thread).
    pub copy: Copied<'a>,
    /// How the Java frames are found.
    pub java: JavaAt<'a>,
    /// Whether the native stack was cut.
    pub cut: bool,
}

/// A native stack the merge rewrites.
pub(crate) trait NativeStack {
    /// The user frames, with the address and registers the unwind found for each
    /// (registers empty when none were kept).
    fn user_frames_mut(&mut self) -> (&[FrameAddress], &[FrameRegisters], &mut [Frame]);

    /// Every frame, leaf first, for a stage that changes their number.
    fn frames_mut(&mut self) -> &mut Vec<Frame>;
}

impl NativeStack for StackBuilder {
    fn user_frames_mut(&mut self) -> (&[FrameAddress], &[FrameRegisters], &mut [Frame]) {
        StackBuilder::user_frames_mut(self)
    }

    fn frames_mut(&mut self) -> &mut Vec<Frame> {
        StackBuilder::frames_mut(self)
    }
}

/// A stack that is user frames only (a dumped thread's), with the address and
/// registers the unwind found for each when they are kept (empty otherwise: its Java
/// frames then come as [`JavaAt::Ids`]).
pub(crate) struct UserFrames<'a> {
    /// Each frame's address, leaf first.
    pub addrs: &'a [FrameAddress],
    /// Each frame's registers, leaf first.
    pub regs: &'a [FrameRegisters],
    /// The frames.
    pub frames: &'a mut Vec<Frame>,
}

impl NativeStack for UserFrames<'_> {
    fn user_frames_mut(&mut self) -> (&[FrameAddress], &[FrameRegisters], &mut [Frame]) {
        (self.addrs, self.regs, &mut self.frames[..])
    }

    fn frames_mut(&mut self) -> &mut Vec<Frame> {
        self.frames
    }
}

/// Puts in `stack` (a stack of `captured.pid`, ended) the frames of every runtime of
/// `stages` in place of the native frames that ran them: Java first (its frames are
/// rewritten in place, one per native frame), then Python (one eval-loop frame becomes
/// the Python frames it ran). `bound` is the recording's modules and mappings.
pub(crate) fn merge<M: Memory>(
    stages: Stages<'_, M>,
    stack: &mut dyn NativeStack,
    captured: Captured<'_>,
    bound: Bound<'_>,
) {
    let Captured {
        pid,
        tid,
        copy,
        java: at,
        cut,
    } = captured;
    merge_java(stages.java, stack, pid, copy, at);
    if let Some(v8) = stages.v8 {
        merge_v8(v8, stack, pid, copy, bound);
    }
    if let Some(ruby) = stages.ruby
        && ruby.wants(pid)
    {
        // Each `rb_vm_exec` frame becomes the stretch of Ruby frames it ran.
        let at = (copy.regs[5] != 0).then_some(crate::interp::ruby::Sampled {
            pc: copy.regs[4],
            cfp: copy.regs[5],
            stack: copy.stack,
        });
        ruby.expand(pid, (tid, copy.time, at), stack.frames_mut());
    }
    if let Some(python) = stages.python {
        python.merge(pid, tid, copy, cut, stack.frames_mut(), bound);
    }
}

/// The Java frames of `stack` (of `pid`), rewritten in place.
fn merge_java(
    java: Option<&mut JavaFrames>,
    stack: &mut dyn NativeStack,
    pid: u32,
    copy: Copied<'_>,
    at: JavaAt<'_>,
) {
    match at {
        JavaAt::Copy { time, r13, map } => {
            let (addrs, regs, frames) = stack.user_frames_mut();
            if let Some(jvm) = java
                && !regs.is_empty()
                && jvm.wants(pid)
            {
                let state = (copy.sp, copy.stack, r13);
                jvm.expand(pid, time, state, addrs, regs, map, frames);
            }
        }
        // Found by the Java stage as the stack was unwound: no stage needed now.
        JavaAt::Ids(ids) => {
            let (_, _, frames) = stack.user_frames_mut();
            for (f, id) in frames.iter_mut().zip(ids) {
                if let Some(id) = *id {
                    *f = Frame {
                        kind: FrameKind::Interpreted,
                        pid,
                        addr: id,
                        mapping: None,
                    };
                }
            }
        }
    }
}

/// The JavaScript frames of `stack` (of `pid`) in place of the JIT code and
/// builtins that ran them.
fn merge_v8(
    v8: &mut V8Frames,
    stack: &mut dyn NativeStack,
    pid: u32,
    copy: Copied<'_>,
    bound: Bound<'_>,
) {
    let (addrs, regs, frames) = stack.user_frames_mut();
    if regs.is_empty() || !v8.wants(pid) {
        return;
    }
    // JIT code lives in anonymous executable memory.
    let anon = |m: &crate::format::Mapping| {
        m.path.is_empty() || m.path.starts_with("//anon") || m.path.starts_with("[anon")
    };
    let in_jit = |f: &Frame| f.mapping.and_then(|id| bound.mapping(id)).is_some_and(anon);
    let jit_at = |a: u64| {
        (bound.mappings.iter().rev())
            .find(|m| m.pid == pid && (m.start..m.end).contains(&a))
            .is_some_and(anon)
    };
    let jit = crate::interp::v8::InJit {
        frame: &in_jit,
        at: &jit_at,
    };
    let user = frames.len();
    let copied = (copy.sp, copy.stack);
    if let Some(caller) = v8.expand(pid, copied, (addrs, regs), jit, frames) {
        // The caller of the frameless builtin at the leaf goes just above it.
        let all = stack.frames_mut();
        let leaf = all.len().saturating_sub(user);
        all.insert((leaf + 1).min(all.len()), caller);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Mapping;

    /// A live recorder's tables after a forgotten generation hold the mappings from id
    /// `base` on: ids are looked up less the base (every window after the first lost
    /// its Python frames when they were not).
    #[test]
    fn bound_looks_mappings_up_by_id_less_the_base() {
        let mappings = vec![
            Mapping {
                path: "/usr/lib/libpython3.12.so".into(),
                ..Mapping::default()
            },
            Mapping {
                path: "/usr/bin/python3.12".into(),
                ..Mapping::default()
            },
        ];
        let modules = vec![None, None];
        let b = Bound::new(&modules, &mappings).with_base(7);
        assert_eq!(
            b.mapping(7).map(|m| m.path.as_str()),
            Some("/usr/lib/libpython3.12.so")
        );
        assert_eq!(
            b.mapping(8).map(|m| m.path.as_str()),
            Some("/usr/bin/python3.12")
        );
        assert!(b.mapping(0).is_none() && b.mapping(6).is_none() && b.mapping(9).is_none());
        assert!(b.module(7).is_none() && b.module(0).is_none());
        let fresh = Bound::new(&modules, &mappings);
        assert_eq!(
            fresh.mapping(1).map(|m| m.path.as_str()),
            Some("/usr/bin/python3.12")
        );
    }
}
