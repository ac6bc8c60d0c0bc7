//! User-stack unwinding: sampled registers (rip, rsp, rbp) plus a copy of the top of
//! the user stack, plus the CFI of each mapped module, become a list of return
//! addresses. Pure computation, no syscalls: the recorder owns the process state.
//!
//! Each frame is unwound with the module's CFI (`.eh_frame` through `.eh_frame_hdr`,
//! else `.debug_frame`); where a pc has no module or no FDE (JIT code, hand-written
//! assembly) one step follows the frame-pointer chain instead, and CFI takes over again
//! at the next return address that lands in a module with tables. JIT code that a perf
//! map names (HotSpot's compiled methods, interpreter and stubs) is unwound by what the
//! map and the code's prologue say of its frame, every link validated ([`jit`]). Rules are cached per
//! (module, SVMA) in the [`Unwinder`], so a hot stack costs a few hash lookups.
//!
//! The lookup address of a caller frame is `ra - 1`, so that a call to a noreturn
//! function at the very end of a function resolves to that function's FDE; the frame
//! interrupted by a signal (the one above an FDE with the 'S' augmentation) has an
//! exact pc and is looked up as is.
//!
//! The register numbers and frame layout are those of x86_64 (DWARF 6 = rbp, 7 = rsp,
//! 16 = return address). The code itself is portable, so a recording made on x86_64
//! can be unwound anywhere; the tests capture real stacks with x86_64 inline asm and
//! only build there.

/// Each process's executable mappings, shared by the recorder and the perf.data reader.
pub(crate) mod addrspace;
mod cache;
mod cfi;
pub(crate) mod frames;
mod go;
mod jit;
mod jit_code;
mod scan;
mod step;
#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests;

pub use cfi::{CfiLoadError, ModuleCfi};
pub use jit::{PROLOGUE_BYTES, decode_prologue};
pub use jit_code::{JitCode, JitFrame, JitKind};
pub(crate) use scan::ends_in_call;
pub(crate) use scan::frame_chain_base;

use cache::RuleCache;
use cfi::RuleLookup;
use step::{FrameRegs, Step, StepError};

/// User registers at the sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Regs {
    /// Instruction pointer.
    pub ip: u64,
    /// Stack pointer.
    pub sp: u64,
    /// Frame pointer (rbp).
    pub bp: u64,
}

/// One frame's registers as an unwind found them ([`Unwinder::unwind_with_regs`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FrameRegisters {
    /// The frame's pc (for a caller: its return address).
    pub pc: u64,
    /// Its stack pointer.
    pub sp: u64,
    /// Its frame pointer (rbp), when it could be recovered.
    pub fp: Option<u64>,
}

/// A copy of the top of the user stack: `bytes[0]` is the byte at address `sp`.
#[derive(Debug, Clone, Copy)]
pub struct StackCopy<'a> {
    /// The stack pointer the copy starts at.
    pub sp: u64,
    /// The bytes copied.
    pub bytes: &'a [u8],
}

/// A module mapped executable in the target: its CFI and its bias (`svma = avma - bias`).
#[derive(Debug, Clone, Copy)]
pub struct CodeModule<'a> {
    /// The module's unwind tables.
    pub cfi: &'a ModuleCfi,
    /// `avma - svma` of its mapping.
    pub bias: u64,
}

/// Finds the module mapped at an address of the target.
pub trait ModuleLookup {
    /// The module mapped executable at `avma`, or None (anonymous JIT code, unmapped).
    fn lookup(&self, avma: u64) -> Option<CodeModule<'_>>;

    /// The JIT code at `avma` that the runtime's perf map names, if any. Default: none.
    fn jit(&self, _avma: u64) -> Option<JitCode> {
        None
    }

    /// The 7 bytes of JIT code just before `ra` (read from the target), if it can be
    /// read. Default: none.
    fn jit_code_before(&self, _ra: u64) -> Option<[u8; 7]> {
        None
    }

    /// Whether `ra` is a return address, as `check` finds. A lookup may remember the
    /// answers (the recorder's does, per JVM: the same return addresses come back in
    /// every sample). Default: asks `check` each time.
    fn remembered_return(&self, _ra: u64, check: &dyn Fn() -> bool) -> bool {
        check()
    }
}

/// A frame's address and what kind of address it is, so that every later stage looks
/// it up the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameAddress {
    /// An exact instruction address: the sampled pc, or the pc of a frame that a signal
    /// interrupted (the caller of a signal trampoline).
    InstructionPointer(u64),
    /// A return address read from the stack: the call is the instruction before it.
    ReturnAddress(u64),
}

impl FrameAddress {
    /// The address itself.
    pub fn address(self) -> u64 {
        match self {
            FrameAddress::InstructionPointer(a) | FrameAddress::ReturnAddress(a) => a,
        }
    }

    /// Where names and unwind rules are looked up: the address itself, or for a return
    /// address the byte before it, inside the call (a call to a noreturn function can
    /// be the last instruction of its function).
    pub fn lookup_address(self) -> u64 {
        match self {
            FrameAddress::InstructionPointer(a) => a,
            FrameAddress::ReturnAddress(a) => a.wrapping_sub(1),
        }
    }
}

/// How an unwind ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnwindEnd {
    /// The outermost frame was reached (return address undefined or zero).
    Complete,
    /// Unwinding stopped early; the frames found so far are kept.
    Truncated(TruncateReason),
}

/// Why an unwind stopped before the outermost frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TruncateReason {
    /// A read went past the end of the stack copy.
    StackCopyExhausted,
    /// No CFI for the frame and the frame-pointer chain did not hold (or the CFI needs
    /// a register that is not sampled).
    NoUnwindInfo,
    /// The CFI is malformed or gives an impossible result (the stack does not grow).
    BadUnwindInfo,
    /// More frames than [`UnwindOptions::max_frames`].
    TooDeep,
    /// A Go function that switched stacks (to the thread's own, for a cgo call, to
    /// the signal stack): what called it is on another stack.
    GoStackSwitch,
}

/// Tuning of an [`Unwinder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct UnwindOptions {
    /// The most frames one unwind produces (the sampled ip included). Default is 512.
    pub max_frames: usize,
    /// Slots of the direct-mapped rule cache (rounded up to a power of two; 0 turns
    /// caching off). Default is 4096 (about 350 KiB).
    pub cache_slots: usize,
}

impl Default for UnwindOptions {
    fn default() -> Self {
        UnwindOptions {
            max_frames: 512,
            cache_slots: 4096,
        }
    }
}

/// Counters of what the unwinder did, for diagnostics and tuning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UnwindStats {
    /// Unwinds performed.
    pub unwinds: u64,
    /// Frames unwound with CFI whose rule came from the cache.
    pub cache_hits: u64,
    /// Frames whose rule had to be looked up in the module's tables.
    pub cache_misses: u64,
    /// Frames unwound by following frame pointers.
    pub frame_pointer_steps: u64,
    /// Frames without CFI or frame pointer unwound by a validated stack scan.
    pub scan_steps: u64,
    /// Frames of JIT code (named by a perf map) unwound by what the map says of them.
    pub jit_steps: u64,
}

/// Unwinds user stacks; holds the rule cache and gimli's scratch space. One per
/// recorder (it is `Send`, not shared).
pub struct Unwinder {
    options: UnwindOptions,
    cache: RuleCache,
    ctx: Box<gimli::UnwindContext<usize>>,
    stats: UnwindStats,
}

impl Default for Unwinder {
    fn default() -> Self {
        Unwinder::new()
    }
}

impl std::fmt::Debug for Unwinder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unwinder")
            .field("options", &self.options)
            .field("stats", &self.stats)
            .finish()
    }
}

impl Unwinder {
    /// An unwinder with the default options.
    pub fn new() -> Unwinder {
        Unwinder::with_options(UnwindOptions::default())
    }

    /// An unwinder with the given options.
    pub fn with_options(options: UnwindOptions) -> Unwinder {
        Unwinder {
            options,
            cache: RuleCache::new(options.cache_slots),
            ctx: Box::new(gimli::UnwindContext::new()),
            stats: UnwindStats::default(),
        }
    }

    /// What the unwinder has done so far.
    pub fn stats(&self) -> UnwindStats {
        self.stats
    }

    /// Forgets every cached rule (for example after modules were unloaded; not needed
    /// for correctness, since each [`ModuleCfi`] has its own identity).
    pub fn clear_cache(&mut self) {
        self.cache.clear();
    }

    /// Appends frames leaf first: `out[0]` is the sampled `regs.ip`, then each caller's
    /// address exactly as found ([`FrameAddress::lookup_address`] says where to look
    /// it up).
    pub fn unwind(
        &mut self,
        regs: &Regs,
        stack: &StackCopy,
        modules: &dyn ModuleLookup,
        out: &mut Vec<FrameAddress>,
    ) -> UnwindEnd {
        self.unwind_from(regs.ip, regs.sp, Some(regs.bp), stack, modules, out)
    }

    /// As [`Unwinder::unwind`], and also each frame's registers as the unwind found
    /// them: `regs[i]` is the (pc, sp, fp) of the frame at `out[i]` (fp None where rbp
    /// could not be recovered). Readers of frames that keep their state at fixed
    /// offsets from their frame pointer (HotSpot's interpreter) need these.
    pub fn unwind_with_regs(
        &mut self,
        regs: &Regs,
        stack: &StackCopy,
        modules: &dyn ModuleLookup,
        out: &mut Vec<FrameAddress>,
        frame_regs: &mut Vec<FrameRegisters>,
    ) -> UnwindEnd {
        let (ip, sp, bp) = (regs.ip, regs.sp, Some(regs.bp));
        self.unwind_inner(ip, sp, bp, stack, modules, out, Some(frame_regs))
    }

    /// As [`Unwinder::unwind`] when only rip and rsp are known (a thread blocked in a
    /// system call, whose registers `/proc/PID/task/TID/syscall` gives without stopping
    /// it): frames whose CFI needs rbp before any frame restored it from the stack end
    /// the unwind as [`TruncateReason::NoUnwindInfo`], unless `bp` supplies a value.
    pub fn unwind_from(
        &mut self,
        ip: u64,
        sp: u64,
        bp: Option<u64>,
        stack: &StackCopy,
        modules: &dyn ModuleLookup,
        out: &mut Vec<FrameAddress>,
    ) -> UnwindEnd {
        self.unwind_inner(ip, sp, bp, stack, modules, out, None)
    }

    /// [`Unwinder::unwind_from`] with each frame's registers, as
    /// [`Unwinder::unwind_with_regs`] gives them.
    #[allow(clippy::too_many_arguments)]
    pub fn unwind_from_with_regs(
        &mut self,
        ip: u64,
        sp: u64,
        bp: Option<u64>,
        stack: &StackCopy,
        modules: &dyn ModuleLookup,
        out: &mut Vec<FrameAddress>,
        frame_regs: &mut Vec<FrameRegisters>,
    ) -> UnwindEnd {
        self.unwind_inner(ip, sp, bp, stack, modules, out, Some(frame_regs))
    }

    #[allow(clippy::too_many_arguments)]
    fn unwind_inner(
        &mut self,
        ip: u64,
        sp: u64,
        bp: Option<u64>,
        stack: &StackCopy,
        modules: &dyn ModuleLookup,
        out: &mut Vec<FrameAddress>,
        mut frame_regs: Option<&mut Vec<FrameRegisters>>,
    ) -> UnwindEnd {
        self.stats.unwinds += 1;
        let max_frames = self.options.max_frames.max(1);
        let mut frame = FrameRegs { ip, sp, bp };
        let mut address = FrameAddress::InstructionPointer(frame.ip);
        out.push(address);
        let mut record = |f: &FrameRegs| {
            if let Some(r) = frame_regs.as_deref_mut() {
                r.push(FrameRegisters {
                    pc: f.ip,
                    sp: f.sp,
                    fp: f.bp,
                });
            }
        };
        record(&frame);
        let mut frames = 1;
        loop {
            let caller = match self.step(&frame, address, frames == 1, stack, modules) {
                Ok(Step::End) => return UnwindEnd::Complete,
                Ok(Step::Caller { regs, exact_pc }) => {
                    address = if exact_pc {
                        FrameAddress::InstructionPointer(regs.ip)
                    } else {
                        FrameAddress::ReturnAddress(regs.ip)
                    };
                    regs
                }
                Err(e) => return UnwindEnd::Truncated(e.reason()),
            };
            if caller.ip == 0 {
                return UnwindEnd::Complete;
            }
            if frames >= max_frames {
                return UnwindEnd::Truncated(TruncateReason::TooDeep);
            }
            out.push(address);
            record(&caller);
            frames += 1;
            frame = caller;
        }
    }

    /// The caller of a frame-pointer walk's sampled frame when the walk skips it, for
    /// `--call-graph fp`: a function that has not set up its frame yet (in its
    /// prologue, at its `ret`, or built without frame pointers) leaves rbp as its
    /// caller's, so the kernel's walk goes from the sampled pc straight to the
    /// caller's caller. When the CFI of the sampled pc (`regs.ip`) says the frame's
    /// address is not rbp-based, the return address it gives, read from `stack` (a
    /// small copy from `regs.sp`), is that missing caller. None when the frame is
    /// rbp-based (the walk was right), or the module has no CFI, or the copy is too
    /// short.
    pub fn caller_of_frameless_leaf(
        &mut self,
        regs: &Regs,
        stack: &StackCopy,
        modules: &dyn ModuleLookup,
    ) -> Option<u64> {
        let module = modules.lookup(regs.ip).filter(|m| m.cfi.has_cfi())?;
        let RuleLookup::Found(rule) = self.rule_at(&module, regs.ip) else {
            return None;
        };
        if matches!(rule.cfa, cfi::CfaRule::RegOffset { reg, .. } if reg == step::RBP) {
            return None;
        }
        let frame = FrameRegs {
            ip: regs.ip,
            sp: regs.sp,
            bp: Some(regs.bp),
        };
        match step::cfi_step(&rule, module.cfi, &frame, stack) {
            Ok(Step::Caller { regs, .. }) if regs.ip != 0 => Some(regs.ip),
            _ => None,
        }
    }

    /// The CFI row of `pc` in `module`, cached.
    fn rule_at(&mut self, module: &CodeModule, pc: u64) -> RuleLookup {
        let svma = pc.wrapping_sub(module.bias);
        let id = module.cfi.id();
        match self.cache.get(id, svma) {
            Some(rule) => {
                self.stats.cache_hits += 1;
                rule
            }
            None => {
                self.stats.cache_misses += 1;
                let go = module.cfi.go();
                let rule = match go.and_then(|go| go::go_convention(go, svma)) {
                    Some(rule) => rule,
                    None => match module.cfi.rule_for(svma, &mut self.ctx) {
                        // A stripped Go binary's frames, from its own table.
                        RuleLookup::NoFde => {
                            go.map_or(RuleLookup::NoFde, |go| go::go_rule(go, svma))
                        }
                        rule => rule,
                    },
                };
                self.cache.insert(id, svma, rule);
                rule
            }
        }
    }

    /// Unwinds one frame whose pc is `address`.
    fn step(
        &mut self,
        frame: &FrameRegs,
        address: FrameAddress,
        sampled_frame: bool,
        stack: &StackCopy,
        modules: &dyn ModuleLookup,
    ) -> Result<Step, StepError> {
        let pc = address.lookup_address();
        let module = modules.lookup(pc).filter(|m| m.cfi.has_cfi());
        if let Some(module) = module {
            match self.rule_at(&module, pc) {
                RuleLookup::Found(rule) => return step::cfi_step(&rule, module.cfi, frame, stack),
                RuleLookup::Bad => return Err(StepError::MalformedFde),
                RuleLookup::StackSwitch => return Err(StepError::GoStackSwitch),
                RuleLookup::NoFde => {
                    // The sampled pc in a gap of its module's CFI: glibc ends the CFI
                    // of clone and clone3 before their system call (so that the new
                    // thread's unwind stops there), and the parent is sampled in that
                    // call each time it creates a thread. Such a stub has pushed
                    // nothing: its return address is the word at sp, taken only when
                    // the code before it is a call.
                    if sampled_frame && let Some(step) = scan::leaf_step(frame, stack, modules) {
                        self.stats.scan_steps += 1;
                        return Ok(step);
                    }
                }
            }
        }
        if module.is_none()
            && let Some(code) = modules.jit(pc)
            && modules.lookup(pc).is_none()
        {
            self.stats.jit_steps += 1;
            let r = jit::jit_step(&code, frame, stack, sampled_frame, modules);
            return r.ok_or(StepError::NoFramePointer {
                bp: frame.bp,
                sp: frame.sp,
            });
        }
        self.stats.frame_pointer_steps += 1;
        let fp = step::frame_pointer_step(frame, stack, sampled_frame);
        if fp.is_err() && module.is_none() && modules.lookup(pc).is_none() {
            // Code in no module (JIT stubs) that keeps no frame pointer.
            if let Some(step) = scan::scan_step(frame, stack, modules) {
                self.stats.scan_steps += 1;
                return Ok(step);
            }
        }
        fp
    }
}
