//! One unwinding step: from the registers of a frame to the registers of its caller,
//! either by applying a CFI [`UnwindRule`] (with DWARF expressions evaluated against
//! the known registers and the stack copy) or by following the frame-pointer chain.
//!
//! Only rip, rsp and rbp are known (the recorder samples no others); rbp may become
//! unknown on the way up. A rule that needs any other register fails with
//! [`StepError::UntrackedRegister`].

use gimli::{
    EndianSlice, EvaluationResult, EvaluationStorage, LittleEndian, Location, Piece, Reader, Value,
};

use super::cfi::{CfaRule, ExprRef, ModuleCfi, RegRule, UnwindRule};
use super::{StackCopy, TruncateReason};

pub(crate) const RBP: u16 = 6;
pub(crate) const RSP: u16 = 7;
const RIP: u16 = 16;
/// DWARF expressions in CFI are a handful of operations; a loop is malformed input.
const MAX_EXPRESSION_STEPS: u32 = 256;

/// The registers of one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FrameRegs {
    pub ip: u64,
    pub sp: u64,
    /// `None` once rbp can no longer be recovered.
    pub bp: Option<u64>,
}

/// Why one step failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StepError {
    #[error("read of {size} bytes at {addr:#x} is past the end of the stack copy")]
    PastCopy { addr: u64, size: u8 },
    #[error("read of {size} bytes at {addr:#x} is below the stack copy")]
    BelowCopy { addr: u64, size: u8 },
    #[error("CFI needs register {0}, which is not sampled")]
    UntrackedRegister(u16),
    #[error("CFI needs rbp, whose value in this frame could not be recovered")]
    UnknownBp,
    #[error("malformed CFI expression: {0}")]
    Expression(gimli::Error),
    #[error("CFI expression needs something other than registers and memory")]
    UnsupportedExpression,
    #[error("the FDE covering this address is malformed")]
    MalformedFde,
    #[error("CFI gives no usable rule for the return address")]
    NoReturnAddressRule,
    #[error("caller sp {caller:#x} is not above callee sp {callee:#x}")]
    StackNotGrowing { callee: u64, caller: u64 },
    #[error("no frame pointer chain: rbp {bp:#x?} with sp {sp:#x}")]
    NoFramePointer { bp: Option<u64>, sp: u64 },
    #[error("address arithmetic overflowed")]
    Overflow,
    #[error("a Go function switched stacks here: its caller is on another stack")]
    GoStackSwitch,
}

impl StepError {
    /// The truncation reason reported for this failure in a CFI frame.
    pub(crate) fn reason(&self) -> TruncateReason {
        match self {
            StepError::PastCopy { .. } => TruncateReason::StackCopyExhausted,
            StepError::UntrackedRegister(_)
            | StepError::UnknownBp
            | StepError::NoFramePointer { .. } => TruncateReason::NoUnwindInfo,
            StepError::BelowCopy { .. }
            | StepError::Expression(_)
            | StepError::UnsupportedExpression
            | StepError::MalformedFde
            | StepError::NoReturnAddressRule
            | StepError::StackNotGrowing { .. }
            | StepError::Overflow => TruncateReason::BadUnwindInfo,
            StepError::GoStackSwitch => TruncateReason::GoStackSwitch,
        }
    }
}

/// The outcome of one successful step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// The caller's registers. `exact_pc` is set when the caller's ip is not a return
    /// address (the frame was a signal trampoline), so it must be looked up as is.
    Caller { regs: FrameRegs, exact_pc: bool },
    /// The return address is undefined: this was the outermost frame.
    End,
}

impl StackCopy<'_> {
    /// Reads `size` (1..=8) little-endian bytes at `addr`.
    pub(crate) fn read(&self, addr: u64, size: u8) -> Result<u64, StepError> {
        let below = StepError::BelowCopy { addr, size };
        let past = StepError::PastCopy { addr, size };
        let offset =
            usize::try_from(addr.checked_sub(self.sp).ok_or(below)?).map_err(|_| past.clone())?;
        let end = offset.checked_add(usize::from(size)).ok_or(past.clone())?;
        let bytes = self.bytes.get(offset..end).ok_or(past)?;
        let mut word = [0u8; 8];
        word.get_mut(..bytes.len())
            .ok_or(StepError::Overflow)?
            .copy_from_slice(bytes);
        Ok(u64::from_le_bytes(word))
    }
}

fn register(regs: &FrameRegs, reg: u16) -> Result<u64, StepError> {
    match reg {
        RSP => Ok(regs.sp),
        RBP => regs.bp.ok_or(StepError::UnknownBp),
        RIP => Ok(regs.ip),
        other => Err(StepError::UntrackedRegister(other)),
    }
}

fn offset(base: u64, offset: i64) -> Result<u64, StepError> {
    base.checked_add_signed(offset).ok_or(StepError::Overflow)
}

/// Fixed-size storage so that evaluating an expression never allocates.
struct InlineStorage;

impl<R: Reader> EvaluationStorage<R> for InlineStorage {
    type Stack = [Value; 16];
    type ExpressionStack = [(R, R); 0];
    type Result = [Piece<R>; 1];
}

/// Evaluates a CFI DWARF expression and returns the address (or value) it computes.
fn evaluate(
    bytes: &[u8],
    initial: Option<u64>,
    regs: &FrameRegs,
    stack: &StackCopy,
) -> Result<u64, StepError> {
    let encoding = gimli::Encoding {
        format: gimli::Format::Dwarf32,
        version: 4,
        address_size: 8,
    };
    let slice = EndianSlice::new(bytes, LittleEndian);
    let mut eval = gimli::Evaluation::<_, InlineStorage>::new_in(slice, encoding);
    eval.set_max_iterations(MAX_EXPRESSION_STEPS);
    if let Some(value) = initial {
        eval.set_initial_value(value);
    }
    let mut state = eval.evaluate().map_err(StepError::Expression)?;
    loop {
        state = match state {
            EvaluationResult::Complete => break,
            EvaluationResult::RequiresMemory { address, size, .. } => {
                let value = stack.read(address, size.min(8))?;
                eval.resume_with_memory(Value::Generic(value))
            }
            EvaluationResult::RequiresRegister { register: reg, .. } => {
                let value = register(regs, reg.0)?;
                eval.resume_with_register(Value::Generic(value))
            }
            _ => return Err(StepError::UnsupportedExpression),
        }
        .map_err(StepError::Expression)?;
    }
    match eval.as_result() {
        [
            Piece {
                location: Location::Address { address },
                ..
            },
        ] => Ok(*address),
        _ => Err(StepError::UnsupportedExpression),
    }
}

fn expression(module: &ModuleCfi, expr: ExprRef) -> Result<&[u8], StepError> {
    module
        .expression_bytes(expr)
        .ok_or(StepError::Expression(gimli::Error::UnexpectedEof(
            gimli::ReaderOffsetId(0),
        )))
}

/// Recovers one register of the caller. `Ok(None)` means "unknown in the caller".
fn recover(
    rule: RegRule,
    current: Option<u64>,
    cfa: u64,
    regs: &FrameRegs,
    stack: &StackCopy,
    module: &ModuleCfi,
) -> Result<Option<u64>, StepError> {
    Ok(match rule {
        RegRule::Default | RegRule::SameValue => current,
        RegRule::Undefined | RegRule::Unsupported => None,
        RegRule::Offset(n) => Some(stack.read(offset(cfa, n)?, 8)?),
        RegRule::ValOffset(n) => Some(offset(cfa, n)?),
        RegRule::Register(r) => Some(register(regs, r)?),
        RegRule::Expr(e) => {
            let addr = evaluate(expression(module, e)?, Some(cfa), regs, stack)?;
            Some(stack.read(addr, 8)?)
        }
        RegRule::ValExpr(e) => Some(evaluate(expression(module, e)?, Some(cfa), regs, stack)?),
    })
}

/// Applies a CFI rule to the frame `regs`.
pub(crate) fn cfi_step(
    rule: &UnwindRule,
    module: &ModuleCfi,
    regs: &FrameRegs,
    stack: &StackCopy,
) -> Result<Step, StepError> {
    let cfa = match rule.cfa {
        CfaRule::RegOffset { reg, offset: n } => offset(register(regs, reg)?, n)?,
        CfaRule::Expr(e) => evaluate(expression(module, e)?, None, regs, stack)?,
    };
    let ra = match rule.ra {
        RegRule::Undefined => return Ok(Step::End),
        RegRule::Default | RegRule::SameValue | RegRule::Unsupported => {
            return Err(StepError::NoReturnAddressRule);
        }
        other => {
            recover(other, None, cfa, regs, stack, module)?.ok_or(StepError::NoReturnAddressRule)?
        }
    };
    let sp = match rule.sp {
        RegRule::Default | RegRule::Undefined | RegRule::Unsupported => cfa,
        other => recover(other, Some(regs.sp), cfa, regs, stack, module)?.unwrap_or(cfa),
    };
    // A saved rbp that cannot be read only makes rbp unknown further up; the frame
    // itself is still good.
    let bp = recover(rule.bp, regs.bp, cfa, regs, stack, module).unwrap_or(None);
    if sp <= regs.sp {
        return Err(StepError::StackNotGrowing {
            callee: regs.sp,
            caller: sp,
        });
    }
    Ok(Step::Caller {
        regs: FrameRegs { ip: ra, sp, bp },
        exact_pc: rule.signal_frame,
    })
}

/// Follows the frame-pointer chain one step: ra = \[bp+8\], caller bp = \[bp\],
/// caller sp = bp+16. A zero rbp that came up the chain marks the outermost frame (the
/// x86_64 psABI asks `_start` to clear it); in the sampled frame itself rbp may be any
/// general-purpose value, so there it only means "no chain".
pub(crate) fn frame_pointer_step(
    regs: &FrameRegs,
    stack: &StackCopy,
    sampled_frame: bool,
) -> Result<Step, StepError> {
    if regs.bp == Some(0) && !sampled_frame {
        return Ok(Step::End);
    }
    let no_chain = StepError::NoFramePointer {
        bp: regs.bp,
        sp: regs.sp,
    };
    let bp = regs.bp.ok_or(no_chain.clone())?;
    if bp < regs.sp || bp < stack.sp || bp % 8 != 0 {
        return Err(no_chain);
    }
    let caller_bp = stack.read(bp, 8)?;
    let ra = stack.read(offset(bp, 8)?, 8)?;
    let sp = offset(bp, 16)?;
    Ok(Step::Caller {
        regs: FrameRegs {
            ip: ra,
            sp,
            bp: Some(caller_bp),
        },
        exact_pc: false,
    })
}
