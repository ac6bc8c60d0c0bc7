//! What the sample itself says of the innermost eval call's running function: the
//! eval loop's instruction pointer it holds (into which code object's bytecode), and,
//! on 3.11+ when the thread's state does not give it, the frame of that function it
//! holds in a register or its stack.

use super::{Confirmed, PythonProcess, RawFrame, SampleInstant, codes};
use crate::interp::Memory;
use crate::interp::python::code;
use crate::interp::python::layout::FrameShape;

impl PythonProcess {
    /// 3.11+, when the thread's state does not give the innermost eval call's frame
    /// as it was at the sample: the value among the sample's registers and its stack
    /// below that call's end (registers first, then the innermost words first) that is
    /// a frame of the function the sample's instruction pointer points into, read
    /// now: the eval loop keeps its current frame in a register, saved on the stack by
    /// the calls it makes.
    pub(super) fn scan_frame(
        &mut self,
        mem: &impl Memory,
        tstate: u64,
        at: &SampleInstant<'_>,
    ) -> Option<u64> {
        let FrameShape::Interpreter { code, .. } = self.runtime.layout.frame else {
            return None;
        };
        let end = at.eval_frame(0).1;
        let rt = self.runtime;
        let now = rt.current_frame(mem, tstate)?;
        self.learn(mem, mem.u64_at(now.checked_add(code)?)?);
        let codes::Pointer::Into(leaf) = self.pointer(mem, at, None, None) else {
            return None;
        };
        at.find(
            |v| {
                v != 0
                    && v.is_multiple_of(8)
                    && v.checked_add(code)
                        .and_then(|a| mem.u64_at(a))
                        .is_some_and(|c| c == leaf.code)
            },
            true,
            at.sp,
            end,
        )
    }

    /// Whether the sample holds the eval loop's instruction pointer into `leaf`'s
    /// bytecode (see [`PythonProcess::pointer`]): then `leaf` takes its offset. Else,
    /// whether it points into another code object met before (the thread ran that one
    /// at the sample, and another since).
    pub(super) fn confirm(
        &mut self,
        mem: &impl Memory,
        at: &SampleInstant<'_>,
        leaf: &mut RawFrame,
    ) -> Confirmed {
        let rt = self.runtime;
        self.learn(mem, leaf.code);
        let bounds = (self.print(mem, leaf.code))
            .zip(code::bytecode_start(mem, &rt.layout, leaf.code))
            .map(|(print, start)| (leaf.code, start, print.bytecode_len()));
        let own = bounds
            .zip(leaf.offset)
            .and_then(|((_, start, _), o)| start.checked_add(o));
        match self.pointer(mem, at, bounds, own) {
            codes::Pointer::Into(p) if p.code == leaf.code => {
                leaf.offset = p.offset;
                Confirmed::Yes
            }
            codes::Pointer::Into(mut other) => {
                other.frame = leaf.frame;
                Confirmed::Other(other)
            }
            codes::Pointer::Ambiguous => {
                self.counts.ambiguous += 1;
                Confirmed::No
            }
            codes::Pointer::Nothing => Confirmed::No,
        }
    }
}
