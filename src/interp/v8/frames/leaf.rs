//! The JavaScript caller of a frameless builtin sampled at the leaf. Builtins such as
//! the megamorphic inline caches (`LoadIC_Megamorphic`) set up no frame: the frame
//! pointer is still their JavaScript caller's, so the native unwind, which has no CFI
//! for V8's builtins, steps from the leaf straight to the caller's caller and the
//! function that did the work is not in the stack. The caller's return address is in
//! the few words the builtin pushed, between the stack pointer and the frame pointer;
//! a word counts only if it is in JIT code or in the builtins **and** the bytes before
//! it (read from the process) are a call instruction, and only if the frame pointer's
//! frame is a JavaScript frame whose function checks out: the frame then found is that
//! function's. A builtin that has a frame of its own keeps its function there (a
//! builtin written in JavaScript, such as `Array.prototype.join`): a stale word that
//! passed would name that function, never one from elsewhere.

use super::super::heap::Heap;
use crate::interp::Memory;
use crate::unwind::FrameRegisters;

/// Stack words looked at above the stack pointer: what a builtin pushes before it
/// calls or returns.
const SCAN_WORDS: u64 = 8;

/// Where a frameless builtin's caller may be.
pub(super) struct Code<'a> {
    /// The builtins, in the process.
    pub builtins: &'a [(u64, u64)],
    /// Whether an address is in JIT code (anonymous executable memory).
    pub jit_at: &'a dyn Fn(u64) -> bool,
}

/// The caller's JSFunction (tagged) of the builtin sampled at `leaf`, if the unwind
/// stepped over it: `next` (the frame the unwind found above the leaf) starts just
/// above the leaf's frame pointer's return address, and a call into the builtin is
/// found between the leaf's stack pointer and its frame pointer.
pub(super) fn frameless_caller<M: Memory + ?Sized>(
    heap: &Heap<'_, M>,
    code: &Code<'_>,
    leaf: &FrameRegisters,
    next: &FrameRegisters,
) -> Option<u64> {
    let fp = leaf.fp?;
    let stepped_by_fp = fp.checked_add(16) == Some(next.sp);
    if !stepped_by_fp || fp <= leaf.sp || fp % 8 != 0 {
        return None;
    }
    let layout = heap.layout;
    let slot = |off: i64| heap.mem.u64_at(fp.checked_add_signed(off)?);
    let context = slot(layout.slots.context_or_marker)?;
    if layout.is_marker(context) || !layout.tagging.is_heap_object(context) {
        return None;
    }
    let function = slot(layout.slots.function)?;
    let called = (0..SCAN_WORDS)
        .map_while(|i| leaf.sp.checked_add(8 * i).filter(|&s| s < fp))
        .filter_map(|s| heap.mem.u64_at(s))
        .any(|ra| is_call_return(heap.mem, code, ra));
    called.then_some(function)
}

/// Whether `ra` is just after a call instruction in JIT code or the builtins.
fn is_call_return<M: Memory + ?Sized>(mem: &M, code: &Code<'_>, ra: u64) -> bool {
    let Some(at) = ra.checked_sub(7) else {
        return false;
    };
    let in_builtins = code
        .builtins
        .iter()
        .any(|(lo, hi)| (*lo..*hi).contains(&(ra - 1)));
    if !(in_builtins || (code.jit_at)(ra - 1)) {
        return false;
    }
    let mut before = [0u8; 7];
    mem.read(at, &mut before) && crate::unwind::ends_in_call(&before)
}
