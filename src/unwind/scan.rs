//! The last resort for code that has neither CFI nor a frame-pointer chain, such as the
//! small trampolines JIT runtimes emit (CPython 3.12's perf trampoline is
//! `sub $8,%rsp; call *%rcx; add $8,%rsp; ret`): look at the next few words of the
//! stack for a return address. A word counts only if it lands in a module that has
//! CFI (or in JIT code the perf map names, see [`super::jit`]) **and** the bytes before
//! it are a call instruction, so a stale code pointer left on the stack is not mistaken
//! for a frame.

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

/// One step by scanning: the caller's frame starts just above the first validated
/// return address. rbp is left as it was (a stub that kept no frame did not touch it).
pub(crate) fn scan_step(
    frame: &FrameRegs,
    stack: &StackCopy,
    modules: &dyn ModuleLookup,
) -> Option<Step> {
    for i in 0..SCAN_WORDS {
        let slot = frame.sp.checked_add(i * 8)?;
        let ra = stack.read(slot, 8).ok()?;
        if super::jit::is_return_address(ra, modules) {
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

#[cfg(test)]
mod tests {
    use super::*;

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
