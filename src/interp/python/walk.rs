//! A thread's Python frames, read from outside: its thread state found from
//! `_PyRuntime` (interpreters, then their threads, matched by the kernel's thread id),
//! then the chain of frames from the current one, cut into one segment per native call
//! of the eval loop (`_PyEval_EvalFrameDefault`), innermost first. 3.8–3.10 run one
//! `PyFrameObject` per eval call; 3.11+ run several `_PyInterpreterFrame`s per call,
//! the call's bottom marked by `is_entry` (3.11) or a shim frame owned by the C stack
//! (3.12+), which lives in the eval call's own C frame and so is read from the
//! sample's stack copy, as it was at the sample instant.

use std::collections::HashMap;

use super::layout::{self, FrameShape, Layout};
use crate::interp::Memory;
use crate::interp::budget::Walk;

/// Frames followed at most in one chain (CPython's default recursion limit is 1000).
pub const MAX_FRAMES: usize = 2048;
/// Where glibc keeps a thread's tid in its `struct pthread` (x86-64, glibc 2.x): how
/// 3.8–3.10, which record only the `pthread_t`, are matched to kernel threads.
pub const PTHREAD_TID: u64 = 0x2d0;

/// Where a process's interpreter is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Runtime {
    /// How this version lays its structures out.
    pub layout: Layout,
    /// The address of `_PyRuntime`.
    pub runtime: u64,
    /// The address of `PyCode_Type`: every code object's type.
    pub code_type: u64,
}

/// One Python frame of a chain: its code object and where it was in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RawFrame {
    /// The frame's address.
    pub frame: u64,
    /// The code object's address.
    pub code: u64,
    /// The byte offset of the instruction in the bytecode (None: not started yet),
    /// or u64::MAX when the instruction pointer was outside the bytecode's start
    /// (checked against its length when the code object is read).
    pub offset: Option<u64>,
}

/// Why a thread's frames could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalkError {
    /// No thread state has this thread's id: not a Python thread (or not yet one).
    NoThreadState,
    /// A read failed or a pointer led nowhere sane mid-chain.
    Unreadable,
    /// The chain is longer than [`MAX_FRAMES`] (or loops).
    TooLong,
}

impl Runtime {
    /// Every thread state of every interpreter, by the kernel thread id it runs on,
    /// as far as `walk` goes: the interpreters and their threads are nodes of one
    /// walk, each met once (a list made to loop ends where it loops) and at most as
    /// many as its bound.
    pub fn thread_states(&self, mem: &impl Memory, walk: &mut Walk) -> HashMap<u32, u64> {
        let l = &self.layout;
        let mut out = HashMap::new();
        let mut interp = mem
            .u64_at(self.runtime.wrapping_add(l.runtime_interpreters_head))
            .unwrap_or(0);
        while walk.step(interp) {
            let mut t = mem
                .u64_at(interp.wrapping_add(l.interp_threads_head))
                .unwrap_or(0);
            while walk.step(t) {
                if let Some(tid) = self.tid_of(mem, t) {
                    out.entry(tid).or_insert(t);
                }
                t = mem.u64_at(t.wrapping_add(l.tstate_next)).unwrap_or(0);
            }
            interp = mem.u64_at(interp.wrapping_add(l.interp_next)).unwrap_or(0);
        }
        out
    }

    /// The kernel thread id the thread state at `tstate` runs on.
    pub fn tid_of(&self, mem: &impl Memory, tstate: u64) -> Option<u32> {
        let l = &self.layout;
        let tid = match l.tstate_native_thread_id {
            Some(off) => mem.u64_at(tstate.wrapping_add(off))?,
            None => {
                let pthread = mem.u64_at(tstate.wrapping_add(l.tstate_thread_id))?;
                u64::from(mem.u32_at(pthread.checked_add(PTHREAD_TID)?)?)
            }
        };
        u32::try_from(tid).ok().filter(|&t| t != 0)
    }

    /// The frame the thread state at `tstate` is running (0 for none).
    pub fn current_frame(&self, mem: &impl Memory, tstate: u64) -> Option<u64> {
        let l = &self.layout;
        let f = mem.u64_at(tstate.wrapping_add(l.tstate_frame))?;
        match l.cframe_current_frame {
            Some(off) if f != 0 => mem.u64_at(f.wrapping_add(off)),
            Some(_) => Some(0),
            None => Some(f),
        }
    }

    /// Whether the chain from `from` reaches `to` (both frames; `from` itself counts).
    pub fn reaches(&self, mem: &impl Memory, mut from: u64, to: u64) -> bool {
        let back = match self.layout.frame {
            FrameShape::Object { back, .. } => back,
            FrameShape::Interpreter { previous, .. } => previous,
        };
        for _ in 0..MAX_FRAMES {
            if from == to {
                return true;
            }
            match mem.u64_at(from.wrapping_add(back)) {
                Some(next) if from != 0 => from = next,
                _ => return false,
            }
        }
        false
    }

    /// The chain of frames from `frame`, cut into one segment per native eval call,
    /// innermost first, each leaf first; and the addresses of the 3.12+ shim frames
    /// met (each in its eval call's C frame). `sp` is the sample's stack pointer: a
    /// shim below it belongs to a call that had returned, so the chain is not the
    /// sample's.
    #[allow(clippy::type_complexity)]
    pub fn segments(
        &self,
        mem: &impl Memory,
        frame: u64,
        sp: u64,
    ) -> Result<(Vec<Vec<RawFrame>>, Vec<u64>), WalkError> {
        self.segments_joined(mem, mem, frame, sp, |_| true)
    }

    /// [`Runtime::segments`] of a chain whose inner frames were copied at the sample
    /// instant and whose outer ones are read afterwards: each frame is read through
    /// `copy` while `copied` says it is one of the copy's, then through `after` from
    /// the first that is not on. A chain that comes back to a copied frame after
    /// that was read at two moments that do not join (a frame read afterwards that
    /// points into the copy): [`WalkError::Unreadable`].
    #[allow(clippy::type_complexity)]
    pub fn segments_joined(
        &self,
        copy: &impl Memory,
        after: &impl Memory,
        mut frame: u64,
        sp: u64,
        copied: impl Fn(u64) -> bool,
    ) -> Result<(Vec<Vec<RawFrame>>, Vec<u64>), WalkError> {
        let mut walk = ChainWalk::default();
        let mut past_copy = false;
        let mut steps = 0;
        while frame != 0 {
            steps += 1;
            if steps > MAX_FRAMES {
                return Err(WalkError::TooLong);
            }
            if !frame.is_multiple_of(8) {
                return Err(WalkError::Unreadable);
            }
            if past_copy && copied(frame) {
                return Err(WalkError::Unreadable);
            }
            past_copy = past_copy || !copied(frame);
            frame = if past_copy {
                self.step(after, frame, sp, &mut walk)?
            } else {
                self.step(copy, frame, sp, &mut walk)?
            };
        }
        let ChainWalk {
            mut segments,
            shims,
            current,
        } = walk;
        // 3.11+: frames below the last entry (none in a sane chain) stay with it.
        if !current.is_empty() {
            segments.push(current);
        }
        Ok((segments, shims))
    }

    /// Reads the frame at `frame` into `walk`; its caller's address.
    fn step(
        &self,
        mem: &impl Memory,
        frame: u64,
        sp: u64,
        walk: &mut ChainWalk,
    ) -> Result<u64, WalkError> {
        match self.layout.frame {
            FrameShape::Object {
                back,
                code,
                lasti,
                lasti_in_units,
            } => {
                let read = |off: u64| mem.u64_at(frame.wrapping_add(off));
                let code = read(code).ok_or(WalkError::Unreadable)?;
                let lasti = mem
                    .u32_at(frame.wrapping_add(lasti))
                    .ok_or(WalkError::Unreadable)? as i32;
                let offset = match lasti {
                    l if l < 0 => None,
                    l if lasti_in_units => Some(l as u64 * 2),
                    l => Some(l as u64),
                };
                walk.segments.push(vec![RawFrame {
                    frame,
                    code,
                    offset,
                }]);
                read(back).ok_or(WalkError::Unreadable)
            }
            FrameShape::Interpreter { .. } => self.step_interpreter(mem, frame, sp, walk),
        }
    }

    /// [`Runtime::step`] for 3.11+'s interpreter frames: a shim ends the segment of
    /// its eval call, an entry frame ends it after itself.
    fn step_interpreter(
        &self,
        mem: &impl Memory,
        frame: u64,
        sp: u64,
        walk: &mut ChainWalk,
    ) -> Result<u64, WalkError> {
        let FrameShape::Interpreter {
            previous,
            code,
            instr,
            owner,
            is_entry,
        } = self.layout.frame
        else {
            return Err(WalkError::Unreadable);
        };
        let ChainWalk {
            segments,
            shims,
            current,
        } = walk;
        let mut head = [0u8; layout::FRAME_HEAD as usize];
        if !mem.read(frame, &mut head) {
            return Err(WalkError::Unreadable);
        }
        let word = |off: u64| {
            let o = off as usize;
            u64::from_le_bytes(head[o..o + 8].try_into().unwrap_or_default())
        };
        let owner = head[owner as usize];
        let next = word(previous);
        if is_entry.is_none() && owner == layout::OWNED_BY_CSTACK {
            // A shim: the bottom of an eval call, in its C frame.
            if frame < sp {
                return Err(WalkError::Unreadable);
            }
            shims.push(frame);
            segments.push(std::mem::take(current));
            return Ok(next);
        }
        let code_addr = word(code);
        let ip = word(instr);
        let start = super::code::bytecode_start(mem, &self.layout, code_addr)
            .ok_or(WalkError::Unreadable)?;
        let offset = if self.layout.version >= (3, 13) {
            Some(ip.wrapping_sub(start))
        } else if ip.wrapping_add(2) == start {
            None
        } else {
            Some(ip.wrapping_sub(start))
        };
        current.push(RawFrame {
            frame,
            code: code_addr,
            offset,
        });
        if is_entry.is_some_and(|e| head[e as usize] != 0) {
            segments.push(std::mem::take(current));
        }
        Ok(next)
    }
}

/// A walk's state: the segments ended, the shims met, the segment being read.
#[derive(Default)]
struct ChainWalk {
    segments: Vec<Vec<RawFrame>>,
    shims: Vec<u64>,
    current: Vec<RawFrame>,
}
