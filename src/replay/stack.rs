//! One stack builder: a sample's kernel callchain, its user callchain or registers and
//! stack copy, and the address spaces, become the recording's frames, leaf first, with
//! a marker where the stack was cut. The recorder and the perf.data reader build every
//! stack here; what only the recorder decides (holding a sample for a JIT's newer map)
//! happens between [`StackBuilder::unwind`] and [`StackBuilder::finish`], around it.

use super::decode::{Sample, context};
use crate::format::{Frame, FrameKind, Truncation};
use crate::unwind::addrspace::AddressSpaces;
use crate::unwind::{self, FrameAddress, FrameRegisters, ModuleLookup, UnwindEnd, Unwinder};

/// Builds stacks, reusing its buffers from one sample to the next.
pub struct StackBuilder {
    unwinder: Unwinder,
    /// User stacks come as register + stack copies (`--call-graph dwarf`), not as the
    /// kernel's frame-pointer walk.
    dwarf: bool,
    /// The most callchain entries a sample carries: a frame-pointer chain that long
    /// was cut.
    max_stack: usize,
    frames: Vec<Frame>,
    addrs: Vec<FrameAddress>,
    /// Each user frame's registers, when the unwind was asked for them.
    frame_regs: Vec<FrameRegisters>,
    /// Where the user frames start in `frames` (after the kernel's).
    user_start: usize,
    /// Callchain entries of the sample being built.
    entries: usize,
    /// The user addresses being built came from the kernel's frame-pointer walk.
    fp_walk: bool,
    /// Why the stack being built was cut, so far.
    cut: Option<Truncation>,
    /// A caller the frame-pointer walk skipped was put back in `addrs`.
    added_caller: bool,
}

impl StackBuilder {
    /// A builder for samples with copied stacks (`dwarf`) or frame-pointer callchains,
    /// whose callchains hold at most `max_stack` entries.
    pub fn new(dwarf: bool, max_stack: usize) -> StackBuilder {
        StackBuilder {
            unwinder: Unwinder::new(),
            dwarf,
            max_stack,
            frames: Vec::with_capacity(256),
            addrs: Vec::with_capacity(256),
            frame_regs: Vec::new(),
            user_start: 0,
            entries: 0,
            fp_walk: false,
            cut: None,
            added_caller: false,
        }
    }

    /// Starts a sample's stack: its kernel frames and, with frame pointers, its user
    /// callchain. A sample without a callchain (perf recorded without `-g`) keeps its
    /// sampled address alone.
    pub fn begin(&mut self, s: &Sample) {
        self.clear();
        self.fp_walk = !self.dwarf;
        let mut ctx = 0u64;
        let mut entries = 0;
        for e in s.callchain_entries() {
            entries += 1;
            if e >= context::MAX {
                ctx = e;
                continue;
            }
            if ctx == context::KERNEL {
                self.frames.push(kernel_frame(e));
            } else if ctx == context::USER && !self.dwarf {
                // The kernel's user callchain: the sampled pc, then return addresses.
                self.addrs.push(if self.addrs.is_empty() {
                    FrameAddress::InstructionPointer(e)
                } else {
                    FrameAddress::ReturnAddress(e)
                });
            }
        }
        if entries == 0
            && let Some(ip) = s.ip
        {
            if s.in_kernel {
                self.frames.push(kernel_frame(ip));
            } else if !self.dwarf {
                self.addrs.push(FrameAddress::InstructionPointer(ip));
            }
        }
        self.entries = entries;
    }

    /// Unwinds the sample's copied user stack (dwarf mode) with the modules `lookup`
    /// finds, and returns how the unwind ended; in frame-pointer mode, puts back the
    /// caller the kernel's walk skipped, if it did, and returns None. `with_regs`: keep each
    /// frame's registers too ([`StackBuilder::frame_regs`]), for a reader of interpreter
    /// frames that finds its state at fixed places in the frame.
    pub fn unwind(
        &mut self,
        s: &Sample,
        lookup: &dyn ModuleLookup,
        with_regs: bool,
    ) -> Option<UnwindEnd> {
        if !self.dwarf {
            self.add_skipped_caller(s, lookup);
            return None;
        }
        let [ip, sp, bp] = s.regs?;
        let regs = unwind::Regs { ip, sp, bp };
        let stack = unwind::StackCopy { sp, bytes: s.stack };
        let end = if with_regs {
            let out = &mut self.frame_regs;
            self.unwinder
                .unwind_with_regs(&regs, &stack, lookup, &mut self.addrs, out)
        } else {
            self.unwinder.unwind(&regs, &stack, lookup, &mut self.addrs)
        };
        if let UnwindEnd::Truncated(r) = end {
            self.cut = Some(unwind::frames::truncation(r));
        }
        Some(end)
    }

    /// A frame-pointer walk from a sampled function that has no frame (yet) skips its
    /// caller: put the caller back, found by the function's CFI in the few bytes of
    /// stack copied with the sample (`--call-graph fp` records them; see
    /// [`unwind::Unwinder::caller_of_frameless_leaf`]).
    fn add_skipped_caller(&mut self, s: &Sample, lookup: &dyn ModuleLookup) {
        let (Some([ip, sp, bp]), Some(&FrameAddress::InstructionPointer(pc))) =
            (s.regs, self.addrs.first())
        else {
            return;
        };
        if pc != ip || s.stack.is_empty() {
            return;
        }
        let regs = unwind::Regs { ip, sp, bp };
        let stack = unwind::StackCopy { sp, bytes: s.stack };
        if let Some(ra) = self
            .unwinder
            .caller_of_frameless_leaf(&regs, &stack, lookup)
        {
            self.addrs.insert(1, FrameAddress::ReturnAddress(ra));
            self.added_caller = true;
        }
    }

    /// Starts the stack of a thread from its registers and a copy of its stack read
    /// outside any sample (a thread blocked in a system call, read from /proc as
    /// `dump` reads it), unwound with CFI whatever the recording's mode; `bp` when it
    /// is known. Returns how the unwind ended.
    pub fn from_registers(
        &mut self,
        ip: u64,
        sp: u64,
        bp: Option<u64>,
        stack: &[u8],
        lookup: &dyn ModuleLookup,
    ) -> UnwindEnd {
        self.clear();
        let copy = unwind::StackCopy { sp, bytes: stack };
        let end = self
            .unwinder
            .unwind_from(ip, sp, bp, &copy, lookup, &mut self.addrs);
        if let UnwindEnd::Truncated(r) = end {
            self.cut = Some(unwind::frames::truncation(r));
        }
        end
    }

    /// [`StackBuilder::from_registers`], keeping each frame's registers
    /// ([`StackBuilder::frame_regs`]) for a reader of interpreter frames.
    pub fn from_registers_with_regs(
        &mut self,
        (ip, sp, bp): (u64, u64, Option<u64>),
        stack: &[u8],
        lookup: &dyn ModuleLookup,
    ) -> UnwindEnd {
        self.clear();
        let copy = unwind::StackCopy { sp, bytes: stack };
        let (addrs, regs) = (&mut self.addrs, &mut self.frame_regs);
        let end = (self.unwinder).unwind_from_with_regs(ip, sp, bp, &copy, lookup, addrs, regs);
        if let UnwindEnd::Truncated(r) = end {
            self.cut = Some(unwind::frames::truncation(r));
        }
        end
    }

    fn clear(&mut self) {
        self.frames.clear();
        self.addrs.clear();
        self.frame_regs.clear();
        self.user_start = 0;
        self.cut = None;
        self.entries = 0;
        self.fp_walk = false;
        self.added_caller = false;
    }

    /// The user addresses found so far, leaf first.
    pub fn addrs(&self) -> &[FrameAddress] {
        &self.addrs
    }

    /// Ends the stack of `pid`'s sample: the user frames with their mappings, and the
    /// marker of why the stack was cut, if it was. The frames are leaf first.
    pub fn finish(&mut self, pid: u32, spaces: &AddressSpaces) -> &[Frame] {
        let fp = self.fp_walk;
        self.user_start = self.frames.len();
        if fp && !self.addrs.is_empty() && self.entries >= self.max_stack {
            self.cut = Some(Truncation::TooDeep);
        }
        if let Some(c) =
            unwind::frames::push_user_frames(&self.addrs, spaces, pid, fp, &mut self.frames)
        {
            self.cut = Some(c);
        }
        // A frame-pointer walk that found no caller at all: the frame-pointer register
        // held no frame (code built without them). Only a thread's outermost function
        // (`_start`, the clone entry) has no caller, and samples land there rarely. A
        // sample with no callchain at all walked nothing: not a broken walk.
        let walked = self.addrs.len() - usize::from(self.added_caller);
        if fp && self.cut.is_none() && walked == 1 && self.entries > 0 {
            self.cut = Some(Truncation::NoFramePointer);
        }
        if let Some(reason) = self.cut {
            self.frames.push(Frame::marker(reason));
        }
        &self.frames
    }

    /// The frames of the stack [`StackBuilder::finish`] ended, leaf first.
    pub fn frames(&self) -> &[Frame] {
        &self.frames
    }

    /// Each user frame's registers, leaf first, when [`StackBuilder::unwind`] was asked
    /// for them (empty otherwise).
    pub fn frame_regs(&self) -> &[FrameRegisters] {
        &self.frame_regs
    }

    /// Where the ended stack's user frames start (after its kernel frames).
    pub fn user_start(&self) -> usize {
        self.user_start
    }

    /// The frames of the ended stack, for a reader of interpreter frames to put its
    /// frames in place of the interpreter's own.
    pub fn frames_mut(&mut self) -> &mut Vec<Frame> {
        &mut self.frames
    }

    /// The ended stack's user frames with the address and registers the unwind found
    /// for each, for a reader of interpreter frames to rewrite in place.
    pub fn user_frames_mut(&mut self) -> (&[FrameAddress], &[FrameRegisters], &mut [Frame]) {
        let user = self.frames.get_mut(self.user_start..).unwrap_or_default();
        (&self.addrs, &self.frame_regs, user)
    }

    /// Whether the stack [`StackBuilder::finish`] ended was cut.
    pub fn was_cut(&self) -> bool {
        self.cut.is_some()
    }
}

fn kernel_frame(addr: u64) -> Frame {
    Frame {
        kind: FrameKind::Kernel,
        pid: 0,
        addr,
        mapping: None,
    }
}

#[cfg(test)]
mod tests;
