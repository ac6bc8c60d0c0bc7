//! The last resort for code that has neither CFI nor a frame-pointer chain, such as the
//! small trampolines JIT runtimes emit (CPython 3.12's perf trampoline is
//! `sub $8,%rsp; call *%rcx; add $8,%rsp; ret`): look at the next few words of the
//! stack for a return address. A word counts only if it lands in a module that has
//! CFI (or in JIT code the perf map names, see [`super::jit`]) **and** the bytes before
//! it are a call instruction, so a stale code pointer left on the stack is not mistaken
//! for a frame.

use super::jit_code::JitKind;
use super::step::{FrameRegs, Step};
use super::{ModuleLookup, StackCopy};

/// Stack words looked at above sp.
const SCAN_WORDS: u64 = 8;

/// Whether the code ending at a return address ends in a call: `call rel32` (E8), or
/// `call r/m64` (FF /2, optionally after a REX prefix) of any length up to 7 bytes.
pub(crate) fn ends_in_call(code: &[u8]) -> bool {
    let n = code.len();
    if n >= 5 && code[n - 5] == 0xE8 {
        return true;
    }
    (2..=7.min(n)).any(|k| {
        let (op, modrm) = (code[n - k], code[n - k + 1]);
        op == 0xFF
            && (modrm >> 3) & 7 == 2
            && indirect_call_len(modrm, code.get(n - k + 2).copied()) == k
    })
}

/// Length of `FF /2` with this ModRM (and SIB byte, if any), opcode included.
fn indirect_call_len(modrm: u8, sib: Option<u8>) -> usize {
    let (md, rm) = (modrm >> 6, modrm & 7);
    let sib_len = usize::from(md != 3 && rm == 4);
    let base_is_disp32 = sib_len == 1 && md == 0 && sib.is_some_and(|s| s & 7 == 5);
    let disp = match md {
        0 if rm == 5 || base_is_disp32 => 4,
        1 => 1,
        2 => 4,
        _ => 0,
    };
    2 + sib_len + disp
}

/// Whether `ra` is a return address: it lands right after a call instruction in a
/// module with CFI, or in JIT code whose bytes say so. The lookup may remember the
/// answer ([`ModuleLookup::remembered_return`]).
pub(crate) fn is_return_address(ra: u64, modules: &dyn ModuleLookup) -> bool {
    modules.remembered_return(ra, &|| check_return_address(ra, modules))
}

fn check_return_address(ra: u64, modules: &dyn ModuleLookup) -> bool {
    if ra < 8 {
        return false;
    }
    if let Some(module) = modules.lookup(ra - 1) {
        if !module.cfi.has_cfi() {
            return false;
        }
        let svma = ra.wrapping_sub(module.bias);
        return module
            .cfi
            .code_before::<7>(svma)
            .map(|c| ends_in_call(&c))
            .or_else(|| module.cfi.code_before::<5>(svma).map(|c| ends_in_call(&c)))
            .unwrap_or(false);
    }
    let Some(code) = modules.jit(ra - 1) else {
        return false;
    };
    let Some(before) = modules.jit_code_before(ra) else {
        return false;
    };
    // The interpreter pushes its own return address, the entry that goes on with the
    // caller's next bytecode, and jumps to the callee; that entry follows the previous
    // template's dispatch, an indirect jmp.
    ends_in_call(&before) || (code.kind == JitKind::Interpreter && ends_in_indirect_jmp(&before))
}

/// Whether code ends in `jmp *(%r10,%rbx,8)`-like dispatch: `FF /4` with a SIB byte
/// and no displacement (optionally after a REX prefix), HotSpot's bytecode dispatch.
fn ends_in_indirect_jmp(code: &[u8; 7]) -> bool {
    let [.., op, modrm, sib] = *code;
    let _ = sib;
    op == 0xFF && (modrm >> 3) & 7 == 4 && modrm >> 6 == 0 && modrm & 7 == 4
}

/// One step by scanning: the caller's frame starts just above the first validated
/// return address. rbp is left as it was (a stub that kept no frame did not touch it).
pub(crate) fn scan_step(
    frame: &FrameRegs,
    stack: &StackCopy,
    modules: &dyn ModuleLookup,
) -> Option<Step> {
    scan_words(frame, stack, modules, SCAN_WORDS)
}

/// [`scan_step`] over the first `words` words above sp.
fn scan_words(
    frame: &FrameRegs,
    stack: &StackCopy,
    modules: &dyn ModuleLookup,
    words: u64,
) -> Option<Step> {
    for i in 0..words {
        let slot = frame.sp.checked_add(i * 8)?;
        let ra = stack.read(slot, 8).ok()?;
        if is_return_address(ra, modules) {
            let regs = FrameRegs {
                ip: ra,
                sp: slot + 8,
                bp: frame.bp,
            };
            return Some(Step::Caller {
                regs,
                exact_pc: false,
            });
        }
    }
    None
}

/// One step for a sampled frame that has pushed nothing (a stub without CFI in a
/// module that has CFI): its return address is the word at sp, if it is one.
pub(crate) fn leaf_step(
    frame: &FrameRegs,
    stack: &StackCopy,
    modules: &dyn ModuleLookup,
) -> Option<Step> {
    scan_words(frame, stack, modules, 1)
}

/// Where a frame-pointer chain starts on a stack whose rbp is not known (a thread
/// blocked in a system call, of which /proc gives only rip and rsp): the lowest slot
/// whose value is 0 or a higher slot that is itself such a link, each followed by an
/// address `in_code`. That is the rbp a frame built with frame pointers set, for
/// unwinding a frame whose CFI needs it before any frame restored it.
pub(crate) fn frame_chain_base(copy: &StackCopy, in_code: impl Fn(u64) -> bool) -> Option<u64> {
    let word = |addr: u64| -> Option<u64> {
        let off = usize::try_from(addr.checked_sub(copy.sp)?).ok()?;
        Some(u64::from_le_bytes(
            copy.bytes.get(off..off.checked_add(8)?)?.try_into().ok()?,
        ))
    };
    let link = |a: u64| -> Option<u64> {
        let saved = word(a)?;
        let ra = word(a.checked_add(8)?)?;
        (in_code(ra.wrapping_sub(1)) && (saved == 0 || (saved > a && saved % 8 == 0)))
            .then_some(saved)
    };
    let words = (copy.bytes.len() / 8).min(8192) as u64;
    let base = copy.sp.next_multiple_of(8);
    (0..words).map(|i| base + i * 8).find(|&a| match link(a) {
        Some(0) | None => false,
        Some(next) => link(next).is_some(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpreter_return_entries_follow_a_dispatch() {
        // jmp *(%r10,%rbx,8)
        assert!(ends_in_indirect_jmp(&[
            0xc5, 0x02, 0x49, 0x41, 0xff, 0x24, 0xda
        ]));
        // call *(%r10,%rbx,8) and jmp *%rax are not dispatches.
        assert!(!ends_in_indirect_jmp(&[0, 0, 0, 0x41, 0xff, 0x14, 0xda]));
        assert!(!ends_in_indirect_jmp(&[0, 0, 0, 0, 0, 0xff, 0xe0]));
    }

    #[test]
    fn recognises_calls() {
        assert!(ends_in_call(&[0x90, 0x90, 0xE8, 1, 2, 3, 4])); // call rel32
        assert!(ends_in_call(&[0x90, 0x90, 0x90, 0x90, 0x90, 0xFF, 0xD1])); // call *%rcx
        assert!(ends_in_call(&[0x90, 0x90, 0x90, 0x90, 0x41, 0xFF, 0xD3])); // call *%r11
        assert!(ends_in_call(&[0x90, 0xFF, 0x15, 1, 2, 3, 4])); // call *disp32(%rip)
        assert!(ends_in_call(&[0x90, 0x90, 0x90, 0x90, 0xFF, 0x50, 0x08])); // call *8(%rax)
        assert!(ends_in_call(&[0x90, 0x90, 0x90, 0xFF, 0x54, 0x24, 0x08])); // call *8(%rsp)
        assert!(!ends_in_call(&[0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0xC3])); // ret
        assert!(!ends_in_call(&[0x90, 0x90, 0x90, 0x90, 0x90, 0xFF, 0xE0])); // jmp *%rax
        assert!(!ends_in_call(&[0x48, 0x89, 0xC7, 0x48, 0x01, 0xD8, 0x90]));
    }
}
