//! User-stack unwinding (placeholder until the CFI unwinder lands): walks frame
//! pointers through the copied stack. The types are the unwinder's contract.

use crate::elf::Image;

pub struct Regs {
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
}

pub struct StackCopy<'a> {
    pub sp: u64,
    pub bytes: &'a [u8],
}

pub struct ModuleCfi {
    _image: Image,
}

impl ModuleCfi {
    pub fn new(image: Image) -> ModuleCfi {
        ModuleCfi { _image: image }
    }
    pub fn has_cfi(&self) -> bool {
        false
    }
}

pub struct CodeModule<'a> {
    pub cfi: &'a ModuleCfi,
    pub bias: u64,
}

pub trait ModuleLookup {
    fn lookup(&self, avma: u64) -> Option<CodeModule<'_>>;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnwindEnd {
    Complete,
    Truncated(TruncateReason),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TruncateReason {
    StackCopyExhausted,
    NoUnwindInfo,
    BadUnwindInfo,
    TooDeep,
}

#[derive(Default)]
pub struct Unwinder;

impl Unwinder {
    pub fn new() -> Unwinder {
        Unwinder
    }

    pub fn unwind(
        &mut self,
        regs: &Regs,
        stack: &StackCopy,
        _modules: &dyn ModuleLookup,
        out: &mut Vec<u64>,
    ) -> UnwindEnd {
        out.push(regs.ip);
        let read = |addr: u64| -> Option<u64> {
            let off = usize::try_from(addr.checked_sub(stack.sp)?).ok()?;
            Some(u64::from_le_bytes(
                stack.bytes.get(off..off + 8)?.try_into().ok()?,
            ))
        };
        let mut bp = regs.bp;
        for _ in 0..512 {
            let (Some(next_bp), Some(ra)) = (read(bp), read(bp + 8)) else {
                return UnwindEnd::Truncated(TruncateReason::StackCopyExhausted);
            };
            if ra == 0 {
                return UnwindEnd::Complete;
            }
            out.push(ra);
            if next_bp <= bp {
                return UnwindEnd::Complete;
            }
            bp = next_bp;
        }
        UnwindEnd::Truncated(TruncateReason::TooDeep)
    }
}
