//! One sample's Ruby frames read from the process, in a handful of system calls: the
//! thread's struct kept from the sample before (checked with one read, found again
//! in the thread list when it does not check out), its execution context (one read),
//! its control frames from the deeper of the sample's and the current one (one read,
//! then one of many pieces for their environments and sequences), and each frame
//! named from what the process's reader keeps.

use super::{PLACED_BYTES, ReadFrames, Ruby, Sampled};
use crate::interp::Memory;
use crate::interp::ruby::stack::{self, Ec, Frames};
use crate::interp::ruby::thread::{self, Ahead, Known};
use crate::interp::ruby::walk::{Raw, RawFrame, WalkError};

/// Threads whose struct is kept, at most per process (then all forgotten).
const MAX_THREADS: usize = 4096;
/// Samples of a process between two walks of its thread list for every thread (a
/// thread's struct freed and its kernel id reused would still check out).
const THREADS_EVERY: u64 = 1000;

impl Ruby {
    /// The execution context of thread `tid` (`main`: the process's first thread)
    /// and its control frames' bytes read ahead from around the sample's frame `at`:
    /// from its struct kept since an earlier sample, in one read, when that still
    /// says it is `tid`'s; else found again in the thread list walking at most `max`
    /// threads (and no frames read ahead).
    fn ec<M: Memory + ?Sized>(
        &mut self,
        mem: &M,
        (tid, main, max): (u32, bool, usize),
        at: Option<u64>,
    ) -> Result<(Ec, Option<Ahead>), WalkError> {
        let r = self.ready(mem)?;
        let (l, vm_ptr) = (r.layout, r.vm_ptr);
        if self.samples.is_multiple_of(THREADS_EVERY) || self.threads.len() >= MAX_THREADS {
            self.threads.clear();
        }
        if let Some(known) = self.threads.get_mut(&tid) {
            if let Ok((ec, ctx, ahead)) = known.reread(mem, &l, at) {
                (known.ec, known.ctx) = (ec, ctx);
                return Ok((ctx, ahead));
            }
            self.threads.remove(&tid);
        }
        let (th, w) = thread::find_thread(mem, &l, vm_ptr, (tid, main), max)?;
        let ctx = Ec::read(mem, &l, w.ec)?;
        let known = Known {
            th,
            tid: w.tid,
            ec: w.ec,
            ctx,
            pieces: Vec::new(),
        };
        self.threads.insert(tid, known);
        Ok((ctx, None))
    }

    /// Thread `tid`'s frames, as (frame id, FINISH), innermost first, and whether
    /// the sample placed them: see [`super::RubyFrames::read`]. `frames` and
    /// `sampled` are buffers.
    pub(super) fn read_frames<M: Memory + ?Sized>(
        &mut self,
        mem: &M,
        (tid, main, max): (u32, bool, usize),
        at: Option<Sampled<'_>>,
        (frames, copy): (&mut Frames, &mut Vec<RawFrame>),
    ) -> ReadFrames {
        let (ec, ahead) = self.ec(mem, (tid, main, max), at.map(|a| a.cfp))?;
        let l = self.ready(mem)?.layout;
        let now = ec.cfp;
        // One read from the deeper of the sample's frame and the current one.
        let from = match at.map(|a| a.cfp).filter(|&c| ec.holds(&l, c)) {
            Some(c) if ec.holds(&l, now) => c.min(now),
            Some(c) => c,
            None => now,
        };
        stack::control_frames(mem, &l, &ec, (from, ahead.as_ref()), frames)?;
        // What to read ahead at the thread's next sample.
        if let Some(known) = self.threads.get_mut(&tid) {
            known.pieces.clone_from(&frames.wanted);
        }
        self.bodies.clear();
        self.bodies.extend(frames.bodies.iter().copied());
        let sampled = at.and_then(|Sampled { pc, cfp, stack }| {
            copy.clear();
            copy.extend_from_slice(frames.from(frames.index(cfp)?).ok()?);
            self.at_sample(mem, copy, (pc, now), stack)
        });
        // The current frames stand for the sample's only where the sample knew the
        // current frame: in its control frame register, or saved in its stack copy
        // (by a C function the VM loop called).
        let placed = sampled.is_some()
            || at.is_none_or(|a| {
                let top = &a.stack[..a.stack.len().min(PLACED_BYTES)];
                a.cfp == now
                    || (top.chunks_exact(8))
                        .any(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()) == now)
            });
        let chosen: &[RawFrame] = match sampled {
            Some(_) => {
                self.stats.at_sample += 1;
                copy
            }
            None => frames.from(frames.index(now).ok_or(WalkError::Bad)?)?,
        };
        let mut ids = Vec::with_capacity(chosen.len());
        for (i, f) in chosen.iter().enumerate() {
            let id = match f.raw {
                Raw::Other => None,
                Raw::Iseq { iseq, pc, ep } => {
                    // The leaf's line at the sample's own pc.
                    let pc = sampled.filter(|_| i == 0).unwrap_or(pc);
                    Some(self.iseq_id(mem, (iseq, pc, ep)))
                }
                Raw::Cfunc { me } => Some(self.cfunc_id(mem, me)),
            };
            // A frame shown or not, its FINISH ends a stretch.
            match id {
                Some(id) => ids.push((id, f.finish)),
                None if f.finish => ids.push((u64::MAX, true)),
                None => {}
            }
        }
        Ok((ids, placed))
    }
}
