//! A Ruby thread found from outside: by its kernel id in the main ractor's thread
//! list (one read per thread walked), then, at its next samples, read again from
//! its struct in one system call with its execution context, its control frames
//! and the pieces its frames needed the sample before ([`Known::reread`]), checked
//! to still be the thread's.

use super::layout::Layout;
use super::stack::{Ec, MAX_FRAMES, PIECE, Pieces, fields, span, words};
use super::walk::{WalkError, is_object};
use crate::interp::Memory;
use crate::interp::budget::Walk;

/// What a thread's struct says: the next node of the thread list, its execution
/// context, its kernel id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadWords {
    /// The next node of the list (its `lt_node.next`).
    pub next: u64,
    /// Its execution context (`ec`): the fiber it runs now.
    pub ec: u64,
    /// Its kernel thread id.
    pub tid: u32,
}

/// Thread struct `th`, in one read.
pub fn thread_at<M: Memory + ?Sized>(
    mem: &M,
    l: &Layout,
    th: u64,
) -> Result<ThreadWords, WalkError> {
    let [next, ec, tid] = fields(mem, th, [l.th_node, l.th_ec, l.th_tid])?;
    Ok(ThreadWords {
        next,
        ec,
        tid: tid as u32,
    })
}

/// The thread struct of thread `tid` of the VM whose pointer is at `vm_ptr`, and its
/// execution context, walking at most `max` threads. The main thread of a forked
/// child still carries its parent's thread id: a `main` thread (the process's
/// first) not in the list is the VM's main thread.
pub fn find_thread<M: Memory + ?Sized>(
    mem: &M,
    l: &Layout,
    vm_ptr: u64,
    (tid, main): (u32, bool),
    max: usize,
) -> Result<(u64, ThreadWords), WalkError> {
    let vm = rd(mem, vm_ptr)?;
    let found = match thread_in_list(mem, l, vm, tid, max) {
        Err(WalkError::NoThread) if main => {
            let th = rd(mem, vm.checked_add(l.vm_main_thread).ok_or(WalkError::Bad)?)?;
            if !is_object(th) {
                return Err(WalkError::Bad);
            }
            (th, thread_at(mem, l, th)?)
        }
        found => found?,
    };
    if is_object(found.1.ec) {
        Ok(found)
    } else {
        Err(WalkError::Bad)
    }
}

fn rd<M: Memory + ?Sized>(mem: &M, addr: u64) -> Result<u64, WalkError> {
    mem.u64_at(addr).ok_or(WalkError::Read)
}

/// Thread `tid` in the main ractor's thread list of VM `vm`.
fn thread_in_list<M: Memory + ?Sized>(
    mem: &M,
    l: &Layout,
    vm: u64,
    tid: u32,
    max: usize,
) -> Result<(u64, ThreadWords), WalkError> {
    let ractor = rd(mem, vm.checked_add(l.vm_main_ractor).ok_or(WalkError::Bad)?)?;
    let head = ractor.checked_add(l.ractor_threads).ok_or(WalkError::Bad)?;
    let mut walk = Walk::new(max);
    let mut node = rd(mem, head)?;
    while node != head {
        if !walk.step(node) {
            return Err(if walk.bounded || walk.looped {
                WalkError::List
            } else {
                WalkError::Bad
            });
        }
        let th = node.checked_sub(l.th_node).ok_or(WalkError::Bad)?;
        let w = thread_at(mem, l, th)?;
        if w.tid == tid {
            return Ok((th, w));
        }
        node = w.next;
    }
    Err(WalkError::NoThread)
}

/// A thread met at an earlier sample: its struct, the kernel id it held then, the
/// execution context it ran and what that said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Known {
    /// Its struct.
    pub th: u64,
    /// The id its struct held.
    pub tid: u32,
    /// Its execution context.
    pub ec: u64,
    /// What that said.
    pub ctx: Ec,
    /// Where the pieces its frames needed at the last sample are, by address.
    pub pieces: Vec<u64>,
}

/// Control frames' bytes read ahead of knowing the current frame: from `from` to the
/// base of the stack.
#[derive(Debug)]
pub struct Ahead {
    /// The first byte's address.
    pub from: u64,
    /// The bytes.
    pub bytes: Vec<u8>,
    /// The pieces the frames of the last sample needed, read with them.
    pub pieces: Pieces,
}

/// Frames read ahead past the deepest one expected, in case the thread went deeper.
const SLACK: u64 = 16;

impl Known {
    /// Where to read its frames from ahead: a few frames deeper than the deeper of
    /// the sample's frame (`at`, when it lies in the stack) and the current one when
    /// last read.
    fn ahead_from(&self, l: &Layout, at: Option<u64>) -> u64 {
        let base = self.ctx.base(l);
        let deepest = [at, Some(self.ctx.cfp)]
            .into_iter()
            .flatten()
            .filter(|&c| self.ctx.holds(l, c))
            .min()
            .unwrap_or(base);
        let depth = ((base - deepest) / l.cfp_size + SLACK)
            .min((base - self.ctx.stack) / l.cfp_size)
            .min(MAX_FRAMES);
        base - depth * l.cfp_size
    }

    /// The thread read again in one read of three parts: its struct, its execution
    /// context, and its control frames ahead (from a few frames deeper than the
    /// sample's frame `at` or the current one when last read). The context (where
    /// it is, what it says) and the frames' bytes while it runs the same stack; the
    /// context alone when it runs another (a fiber); an error when the struct no
    /// longer says it is the thread.
    pub fn reread<M: Memory + ?Sized>(
        &self,
        mem: &M,
        l: &Layout,
        at: Option<u64>,
    ) -> Result<(u64, Ec, Option<Ahead>), WalkError> {
        let th_offs = [l.th_node, l.th_ec, l.th_tid];
        let ((th_lo, th_len), (ec_lo, ec_len)) = (span(th_offs), span(Ec::offsets(l)));
        let from = self.ahead_from(l, at);
        let n = ((self.ctx.base(l) - from) / l.cfp_size) as usize;
        let (mut th, mut ec) = (vec![0; th_len], vec![0; ec_len]);
        let mut frames = vec![0; n * l.cfp_size as usize];
        let mut pieces: Vec<(u64, Vec<u8>)> = (Pieces::ranges(&self.pieces, PIECE).into_iter())
            .map(|(at, len)| (at, vec![0; len]))
            .collect();
        let mut parts = vec![
            (self.th.wrapping_add(th_lo), &mut th[..]),
            (self.ec.wrapping_add(ec_lo), &mut ec[..]),
            (from, &mut frames[..]),
        ];
        parts.extend(pieces.iter_mut().map(|(at, b)| (*at, &mut b[..])));
        let ok = mem.read_parts(&mut parts);
        if !ok.first().copied().unwrap_or(false) {
            return Err(WalkError::Read);
        }
        let pieces = (pieces.into_iter().zip(ok.iter().skip(3)))
            .filter(|(_, ok)| **ok)
            .map(|(p, _)| p)
            .collect();
        let [_, now, tid] = words(&th, th_lo, th_offs);
        if tid as u32 != self.tid || !is_object(now) {
            return Err(WalkError::Bad);
        }
        if now != self.ec || !ok.get(1).copied().unwrap_or(false) {
            return Ok((now, Ec::read(mem, l, now)?, None));
        }
        let ctx = Ec::checked(l, words(&ec, ec_lo, Ec::offsets(l)))?;
        let same = ctx.stack == self.ctx.stack && ctx.size == self.ctx.size;
        let ahead = (same && ok.get(2).copied().unwrap_or(false)).then(|| Ahead {
            from,
            bytes: frames,
            pieces: Pieces::new(pieces),
        });
        Ok((now, ctx, ahead))
    }
}
