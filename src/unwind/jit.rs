//! Frames of JIT-compiled code, which has neither CFI nor (in HotSpot without
//! `-XX:+PreserveFramePointer`) a frame-pointer chain, but whose code ranges the
//! runtime's perf map gives. What the map says about a range ([`JitKind`]) decides how its
//! frame is unwound:
//!
//! - **A compiled method** has one fixed frame size, set up by its prologue
//!   (`push %rbp; sub $N,%rsp`, `push %rbp; mov %rsp,%rbp; sub $N,%rsp` with
//!   PreserveFramePointer, or an OSR entry's `sub $N,%rsp; mov %rbp,M(%rsp)`), which
//!   [`decode_prologue`] reads: the return address is at `sp + N + 8` and the caller's
//!   rbp at `sp + N` wherever the pc is past the prologue. A method whose first bytes
//!   set up no frame is frameless (its return address is at `sp`).
//! - **The interpreter** keeps rbp: return address at `rbp + 8`, caller's rbp at `rbp`,
//!   and the caller's stack pointer at `rbp - 8` (HotSpot's "sender sp", which is exact
//!   when a compiled caller reached the interpreter through an adapter that extended
//!   its stack).
//! - **Stubs** (call stubs, adapters, runtime stubs: one map entry may hold many) follow
//!   rbp when that leads to a return address, else the validated scan of [`super::scan`].
//!
//! Every link is validated before it is taken: the return address must land right after a
//! call instruction in known code (a module with CFI, or JIT code whose bytes the
//! [`ModuleLookup`] reads from the target), or, in the interpreter, which pushes its
//! return addresses itself, right after a bytecode dispatch. A link that does not validate ends the
//! stack as truncated; no guessed frame is presented as a found one.

use super::jit_code::{JitCode, JitFrame, JitKind};
use super::scan::{self, is_return_address};
use super::step::{FrameRegs, Step};
use super::{ModuleLookup, StackCopy};

/// Bytes of a method's start that [`decode_prologue`] looks at.
pub const PROLOGUE_BYTES: usize = 64;

/// The frame a compiled method's prologue sets up, from its first bytes (at most
/// [`PROLOGUE_BYTES`] are looked at). Entry code before the prologue (an inline-cache
/// check, a patched `jmp` of a not-entrant method, an OSR method's normal entry) is
/// skipped: the first frame set-up found is the method's, since all its entries share
/// one frame size.
pub fn decode_prologue(code: &[u8]) -> JitFrame {
    let code = &code[..code.len().min(PROLOGUE_BYTES)];
    for i in 0..code.len() {
        let at = &code[i..];
        // push %rbp; [mov %rsp,%rbp;] sub $N,%rsp
        if at.first() == Some(&0x55) {
            let rest = &at[1..];
            let (rest, skipped) = match rest {
                // mov %rsp,%rbp in either encoding (HotSpot emits 48 8B EC)
                [0x48, 0x89, 0xE5, tail @ ..] | [0x48, 0x8B, 0xEC, tail @ ..] => (tail, 3),
                _ => (rest, 0),
            };
            if let Some((n, len)) = sub_rsp(rest) {
                return sized(n + 8, n, i + 1 + skipped + len);
            }
        }
        // sub $N,%rsp; mov %rbp,M(%rsp)   (an OSR entry: the return address is kept)
        if let Some((n, len)) = sub_rsp(at)
            && let [0x48, 0x89, 0x6C, 0x24, m, ..] = at[len..]
            && u32::from(m) + 8 == n
        {
            return sized(n, u32::from(m), i + len + 5);
        }
    }
    JitFrame::Frameless
}

fn sized(ra: u32, bp: u32, body: usize) -> JitFrame {
    JitFrame::Sized {
        ra,
        bp,
        body: body as u32,
    }
}

/// `sub $imm8,%rsp` (48 83 EC ib) or `sub $imm32,%rsp` (48 81 EC id): the immediate and
/// the instruction's length. Frames are word-aligned and under 1 MiB.
fn sub_rsp(code: &[u8]) -> Option<(u32, usize)> {
    let (n, len) = match code {
        [0x48, 0x83, 0xEC, n, ..] => (u32::from(*n), 4),
        [0x48, 0x81, 0xEC, a, b, c, d, ..] => (u32::from_le_bytes([*a, *b, *c, *d]), 7),
        _ => return None,
    };
    (n % 8 == 0 && n < 1 << 20).then_some((n, len))
}

/// One step out of a frame whose pc is in JIT code `code`; None when no link validates.
pub(crate) fn jit_step(
    code: &JitCode,
    frame: &FrameRegs,
    stack: &StackCopy,
    sampled_frame: bool,
    modules: &dyn ModuleLookup,
) -> Option<Step> {
    let caller = |ip, sp, bp| {
        Some(Step::Caller {
            regs: FrameRegs { ip, sp, bp },
            exact_pc: false,
        })
    };
    // The return address at `slot`, if it is one; the caller's sp is just above it.
    let at = |slot: u64| -> Option<u64> {
        let ra = stack.read(slot, 8).ok()?;
        is_return_address(ra, modules).then_some(ra)
    };
    let word = |addr: u64| stack.read(addr, 8).ok();
    let sp = frame.sp;
    match code.kind {
        JitKind::Interpreter => {
            let bp = frame.bp?;
            if bp < sp || bp % 8 != 0 {
                return None;
            }
            let ra = at(bp.checked_add(8)?)?;
            let caller_bp = word(bp)?;
            let above = bp + 16;
            let caller_sp = match word(bp - 8) {
                Some(s) if s >= above && s - above < 1 << 20 => s,
                _ => above,
            };
            caller(ra, caller_sp, Some(caller_bp))
        }
        JitKind::Method(JitFrame::Sized { ra, bp, body }) => {
            let offset = frame.ip.wrapping_sub(code.start);
            let in_prologue = sampled_frame && offset < u64::from(body);
            if !in_prologue && let Some(ret) = at(sp.checked_add(u64::from(ra))?) {
                let caller_bp = word(sp + u64::from(bp));
                return caller(ret, sp + u64::from(ra) + 8, caller_bp);
            }
            if !sampled_frame {
                return None;
            }
            // The sampled pc is in the prologue or the epilogue: the return address is
            // at sp (rbp not pushed yet, or popped already) or just above the saved rbp.
            if let Some(ret) = at(sp) {
                return caller(ret, sp + 8, frame.bp);
            }
            let ret = at(sp + 8)?;
            caller(ret, sp + 16, word(sp))
        }
        JitKind::Method(JitFrame::Frameless) => {
            let ret = at(sp)?;
            caller(ret, sp + 8, frame.bp)
        }
        JitKind::Stub => {
            if let Some(bp) = frame.bp
                && bp >= sp
                && bp % 8 == 0
                && let Some(ret) = bp.checked_add(8).and_then(at)
            {
                return caller(ret, bp + 16, word(bp));
            }
            scan::scan_step(frame, stack, modules)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::unwind::{CodeModule, FrameAddress, Regs, TruncateReason, UnwindEnd, Unwinder};

    /// Two compiled methods (frames of 0x30 and 0x20 bytes) and an interpreter; call
    /// sites at 0x10050 and 0x11010, interpreter return entries at 0x20100 and 0x20200.
    struct Jvm;

    impl ModuleLookup for Jvm {
        fn lookup(&self, _: u64) -> Option<CodeModule<'_>> {
            None
        }
        fn jit(&self, avma: u64) -> Option<JitCode> {
            let sized = |ra, body| {
                JitKind::Method(JitFrame::Sized {
                    ra,
                    bp: ra - 8,
                    body,
                })
            };
            match avma {
                0x10000..0x10100 => Some(JitCode {
                    start: 0x10000,
                    kind: sized(0x18, 12),
                }),
                0x11000..0x11100 => Some(JitCode {
                    start: 0x11000,
                    kind: sized(0x28, 12),
                }),
                0x20000..0x30000 => Some(JitCode {
                    start: 0x20000,
                    kind: JitKind::Interpreter,
                }),
                _ => None,
            }
        }
        fn jit_code_before(&self, ra: u64) -> Option<[u8; 7]> {
            match ra {
                0x10050 | 0x11010 => Some([0x90, 0x90, 0xE8, 1, 2, 3, 4]),
                0x20100 | 0x20200 => Some([0x90, 0x90, 0x90, 0x41, 0xFF, 0x24, 0xDA]),
                _ => Some([0x90; 7]),
            }
        }
    }

    fn unwind(ip: u64, words: &[(u64, u64)]) -> (Vec<u64>, UnwindEnd) {
        let sp = 0x7000_0000u64;
        let mut bytes = vec![0u8; 0x400];
        for &(off, w) in words {
            bytes[off as usize..off as usize + 8].copy_from_slice(&w.to_le_bytes());
        }
        let mut out = Vec::new();
        let end = Unwinder::new().unwind(
            &Regs { ip, sp, bp: 0x1234 },
            &StackCopy { sp, bytes: &bytes },
            &Jvm,
            &mut out,
        );
        (
            out.iter().map(|a: &FrameAddress| a.address()).collect(),
            end,
        )
    }

    #[test]
    fn compiled_frames_by_frame_size_interpreter_by_rbp() {
        let sp = 0x7000_0000u64;
        let (b1, b2) = (sp + 0x100, sp + 0x200);
        let (frames, end) = unwind(
            0x11020,
            &[
                // method at 0x11000: saved rbp (garbage), return address into 0x10000
                (0x20, 0xdead),
                (0x28, 0x10050),
                // method at 0x10000 (sp + 0x30): saved rbp = interpreter fp, return address
                (0x40, b1),
                (0x48, 0x20100),
                // interpreter frame at b1, then b2 whose return address is no code
                (0xf8, b1 + 0x40),
                (0x100, b2),
                (0x108, 0x20200),
                (0x208, 0x5555),
            ],
        );
        assert_eq!(frames, [0x11020, 0x10050, 0x20100, 0x20200]);
        assert_eq!(end, UnwindEnd::Truncated(TruncateReason::NoUnwindInfo));
    }

    #[test]
    fn a_link_that_does_not_check_out_is_not_taken() {
        // The slot holds an address in a method but not after a call, and the prologue
        // and epilogue slots hold nothing: the stack ends there, marked.
        let (frames, end) = unwind(0x11020, &[(0x28, 0x10060), (0x8, 0x10070)]);
        assert_eq!(frames, [0x11020]);
        assert_eq!(end, UnwindEnd::Truncated(TruncateReason::NoUnwindInfo));
        // In the prologue of the method (before `sub`), the return address is at sp + 8.
        let (frames, _) = unwind(0x11002, &[(0x8, 0x10050)]);
        assert_eq!(frames[..2], [0x11002, 0x10050]);
    }

    #[test]
    fn hotspot_prologues() {
        // C2: stack bang, push %rbp, sub $0x10,%rsp.
        let c2 = [
            0x89, 0x84, 0x24, 0x00, 0xc0, 0xfe, 0xff, 0x55, 0x48, 0x83, 0xec, 0x10, 0x4c, 0x8b,
        ];
        assert_eq!(
            decode_prologue(&c2),
            JitFrame::Sized {
                ra: 0x18,
                bp: 0x10,
                body: 12
            }
        );
        // A not-entrant method: its first bytes patched into a jmp.
        let patched = [
            0xe9, 0x3b, 0x55, 0x58, 0x07, 0xfe, 0xff, 0x55, 0x48, 0x83, 0xec, 0x30, 0x48,
        ];
        assert_eq!(
            decode_prologue(&patched),
            JitFrame::Sized {
                ra: 0x38,
                bp: 0x30,
                body: 12
            }
        );
        // PreserveFramePointer as HotSpot encodes it: push %rbp; mov %rsp,%rbp (48 8b ec).
        let hotspot_pfp = [
            0x89, 0x84, 0x24, 0x00, 0xc0, 0xfe, 0xff, 0x55, 0x48, 0x8b, 0xec, 0x48, 0x83, 0xec,
            0x20, 0x33,
        ];
        assert_eq!(
            decode_prologue(&hotspot_pfp),
            JitFrame::Sized {
                ra: 0x28,
                bp: 0x20,
                body: 15
            }
        );
        // PreserveFramePointer, a large frame.
        let pfp = [
            0x55, 0x48, 0x89, 0xe5, 0x48, 0x81, 0xec, 0x00, 0x01, 0x00, 0x00, 0x90,
        ];
        assert_eq!(
            decode_prologue(&pfp),
            JitFrame::Sized {
                ra: 0x108,
                bp: 0x100,
                body: 11
            }
        );
        // OSR entry: sub $0x18,%rsp; mov %rbp,0x10(%rsp), after the normal entry.
        let osr = [
            0xe8, 0x9b, 0xd1, 0xb5, 0x17, 0x66, 0x66, 0x66, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0, 0x48,
            0x81, 0xec, 0x18, 0, 0, 0, 0x48, 0x89, 0x6c, 0x24, 0x10, 0x8b,
        ];
        assert_eq!(
            decode_prologue(&osr),
            JitFrame::Sized {
                ra: 0x18,
                bp: 0x10,
                body: 28
            }
        );
        // A method handle intrinsic: no frame.
        let frameless = [0x48, 0x8b, 0x5e, 0x08, 0x41, 0xff, 0xe3];
        assert_eq!(decode_prologue(&frameless), JitFrame::Frameless);
        // A push %rbp not followed by a frame allocation is no prologue; an odd size is
        // no frame.
        assert_eq!(
            decode_prologue(&[0x55, 0x90, 0x48, 0x83, 0xec, 0x13]),
            JitFrame::Frameless
        );
        assert_eq!(decode_prologue(&[]), JitFrame::Frameless);
    }
}
