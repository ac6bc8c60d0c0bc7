//! A Ruby thread's VM stack read in a few system calls: its execution context (its
//! stack and current frame), its control frames from a given one to the base of the
//! stack (one read, or the bytes read ahead with the thread: [`super::thread`]),
//! then every frame's environment and instruction sequence header (the pieces: those
//! read ahead, the rest in one read of many). Every pointer is checked before it is
//! followed, every length bounded; what does not check out is an error, never a
//! guess.

use super::layout::Layout;
use super::thread::Ahead;
use super::walk::{Raw, RawFrame, WalkError, is_object};
use crate::interp::Memory;

/// `VM_FRAME_MAGIC_MASK` and the magic of a C function's frame.
const MAGIC_MASK: u64 = 0x7fff_0001;
const MAGIC_CFUNC: u64 = 0x5555_0001;
/// `VM_FRAME_FLAG_FINISH`: the frame a `vm_exec` began with.
const FLAG_FINISH: u64 = 0x0020;
/// Frames of one thread read at most.
pub const MAX_FRAMES: u64 = 4096;
/// VALUEs a VM stack holds at most (Ruby's default is 1 MiB of them).
const MAX_STACK_VALUES: u64 = 1 << 24;
/// Bytes read at each frame's environment (`me_cref`, `specval`, flags, from
/// `ep - 16`) and at each instruction sequence (up to and with its body pointer).
pub(super) const PIECE: usize = 24;
/// Pieces read ahead closer than this are read as one range.
const GAP: u64 = 512;
/// Bytes of one range of pieces read ahead, at most.
const MAX_RANGE: u64 = 16 * 1024;
/// Pieces a thread's frames needed that are kept to read ahead, at most.
const MAX_PIECES: usize = 1024;

/// Where the fields at `offs` of a struct lie, from its start: the first byte, and
/// how many bytes reach past the last.
pub(super) fn span<const N: usize>(offs: [u64; N]) -> (u64, usize) {
    let lo = offs.iter().copied().min().unwrap_or(0);
    let hi = offs.iter().copied().max().unwrap_or(0) + 8;
    (lo, (hi - lo) as usize)
}

/// The words at `offs` of the bytes of a struct read from `lo` on ([`span`]).
pub(super) fn words<const N: usize>(bytes: &[u8], lo: u64, offs: [u64; N]) -> [u64; N] {
    offs.map(|o| {
        let i = (o - lo) as usize;
        (bytes.get(i..i + 8)).map_or(0, |w| u64::from_le_bytes(w.try_into().unwrap_or_default()))
    })
}

/// The words of fields at `offs` of a struct at `at`, read in one read.
pub(super) fn fields<M: Memory + ?Sized, const N: usize>(
    mem: &M,
    at: u64,
    offs: [u64; N],
) -> Result<[u64; N], WalkError> {
    let (lo, len) = span(offs);
    let start = at.checked_add(lo).ok_or(WalkError::Bad)?;
    let bytes = mem.bytes_at(start, len, 4096).ok_or(WalkError::Read)?;
    Ok(words(&bytes, lo, offs))
}

/// An execution context as one read finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ec {
    /// The base of its VM stack.
    pub stack: u64,
    /// The stack's size, in VALUEs.
    pub size: u64,
    /// Its current control frame.
    pub cfp: u64,
}

impl Ec {
    /// Execution context `ec`, its stack checked for size and place.
    pub fn read<M: Memory + ?Sized>(mem: &M, l: &Layout, ec: u64) -> Result<Ec, WalkError> {
        Ec::checked(l, fields(mem, ec, Ec::offsets(l))?)
    }

    pub(super) fn offsets(l: &Layout) -> [u64; 3] {
        [l.ec_stack, l.ec_stack_size, l.ec_cfp]
    }

    /// The words read at [`Ec::offsets`], checked.
    pub(super) fn checked(l: &Layout, [stack, size, cfp]: [u64; 3]) -> Result<Ec, WalkError> {
        if size * 8 < 2 * l.cfp_size || size > MAX_STACK_VALUES || !is_object(stack) {
            return Err(WalkError::Bad);
        }
        stack.checked_add(size * 8).ok_or(WalkError::Bad)?;
        Ok(Ec { stack, size, cfp })
    }

    /// Its base frame: the dummy frame at the end of the stack (frames grow down
    /// from there, one `cfp_size` each).
    pub(super) fn base(&self, l: &Layout) -> u64 {
        self.stack + self.size * 8 - l.cfp_size
    }

    /// Whether `cfp` may be a control frame of this stack.
    pub fn holds(&self, l: &Layout, cfp: u64) -> bool {
        let base = self.base(l);
        cfp >= self.stack && cfp <= base && (base - cfp).is_multiple_of(l.cfp_size)
    }
}

/// Pieces of a process read at one instant, by address.
#[derive(Debug, Default)]
pub struct Pieces(Vec<(u64, Vec<u8>)>);

impl Pieces {
    /// The ranges read, each an address and its bytes.
    pub fn new(mut ranges: Vec<(u64, Vec<u8>)>) -> Pieces {
        ranges.sort_unstable_by_key(|r| r.0);
        Pieces(ranges)
    }

    /// The `len` bytes at `addr`, if a range holds them.
    fn get(&self, addr: u64, len: usize) -> Option<&[u8]> {
        let i = self.0.partition_point(|(a, _)| *a <= addr).checked_sub(1)?;
        let (start, bytes) = &self.0[i];
        let off = usize::try_from(addr - start).ok()?;
        bytes.get(off..off.checked_add(len)?)
    }

    /// The ranges that hold pieces of `len` bytes at each of `addrs` (sorted): those
    /// closer than [`GAP`] in one, of [`MAX_RANGE`] bytes at most.
    pub fn ranges(addrs: &[u64], len: usize) -> Vec<(u64, usize)> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        for &a in addrs {
            let end = a.saturating_add(len as u64);
            match out.last_mut() {
                Some((start, e)) if a <= e.saturating_add(GAP) && end - *start <= MAX_RANGE => {
                    *e = (*e).max(end);
                }
                _ => out.push((a, end)),
            }
        }
        out.into_iter()
            .map(|(a, e)| (a, (e - a) as usize))
            .collect()
    }
}

/// Control frames as read, innermost first, with the innermost that did not check
/// out: a run of them is whole from any frame past that one.
#[derive(Debug, Default)]
pub struct Frames {
    /// The frames (one that did not check out is [`Raw::Other`]).
    pub frames: Vec<RawFrame>,
    /// Each frame's instruction sequence and its body pointer, as read with it.
    pub bodies: Vec<(u64, u64)>,
    /// Where the pieces the frames needed are, by address (to be read ahead at the
    /// thread's next sample).
    pub wanted: Vec<u64>,
    /// The bytes of a control frame.
    size: u64,
    /// The outermost frame that did not check out, and why.
    bad: Option<(usize, WalkError)>,
}

impl Frames {
    /// The index of control frame `cfp`, if read.
    pub fn index(&self, cfp: u64) -> Option<usize> {
        let d = cfp.checked_sub(self.frames.first()?.at)?;
        let i = usize::try_from(d / self.size.max(1)).ok()?;
        (d.is_multiple_of(self.size.max(1)) && i < self.frames.len()).then_some(i)
    }

    /// The frames from the one at index `from` to the base, if they all checked out.
    pub fn from(&self, from: usize) -> Result<&[RawFrame], WalkError> {
        match self.bad {
            Some((i, why)) if i >= from => Err(why),
            _ => self.frames.get(from..).ok_or(WalkError::Bad),
        }
    }

    fn mark(&mut self, i: usize, why: WalkError) {
        if self.bad.is_none_or(|(j, _)| i > j) {
            self.bad = Some((i, why));
        }
    }
}

/// The control frames of the stack of `ec` from frame `from` (checked to lie in it)
/// to its base (less the dummy frame there), into `out`: their words (from the bytes
/// read `ahead` when they hold them, else in one read), then each one's environment
/// and instruction sequence header in one read of many pieces. The environment lives in this stack, or on the heap once it escaped (a
/// block made a Proc, a binding taken).
pub fn control_frames<M: Memory + ?Sized>(
    mem: &M,
    l: &Layout,
    ec: &Ec,
    (from, ahead): (u64, Option<&Ahead>),
    out: &mut Frames,
) -> Result<(), WalkError> {
    out.frames.clear();
    out.bodies.clear();
    out.wanted.clear();
    out.bad = None;
    out.size = l.cfp_size;
    if !ec.holds(l, from) {
        return Err(WalkError::Bad);
    }
    let n = ((ec.base(l) - from) / l.cfp_size).min(MAX_FRAMES);
    let len = (n * l.cfp_size) as usize;
    let read_ahead = ahead.and_then(|a| {
        let off = usize::try_from(from.checked_sub(a.from)?).ok()?;
        a.bytes.get(off..off.checked_add(len)?)
    });
    let read_now;
    let bytes = match read_ahead {
        Some(b) => b,
        None => {
            let max = (MAX_FRAMES * l.cfp_size) as usize;
            read_now = mem.bytes_at(from, len, max).ok_or(WalkError::Read)?;
            &read_now[..]
        }
    };
    let word = |f: u64, off: u64| {
        let at = (f * l.cfp_size + off) as usize;
        u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or_default())
    };
    let raw: Vec<(u64, u64, u64)> = (0..n)
        .map(|f| (word(f, l.cfp_pc), word(f, l.cfp_iseq), word(f, l.cfp_ep)))
        .collect();
    // The pieces: each frame's environment, then each sequence's header.
    let seqs: Vec<u64> = (raw.iter())
        .filter(|&&(pc, iseq, _)| pc != 0 && is_object(iseq))
        .map(|&(_, iseq, _)| iseq)
        .collect();
    let body_at = l.iseq_body.min(16);
    let addrs: Vec<u64> = (raw.iter())
        .map(|&(_, _, ep)| ep.wrapping_sub(16))
        .chain(seqs.iter().map(|&s| s.wrapping_add(l.iseq_body - body_at)))
        .collect();
    let pieces = pieces(mem, &addrs, ahead.map(|a| &a.pieces));
    out.wanted.extend(
        (addrs.iter().enumerate())
            .filter(|&(i, _)| i >= raw.len() || is_object(raw[i].2))
            .map(|(_, &a)| a),
    );
    out.wanted.sort_unstable();
    out.wanted.dedup();
    out.wanted.truncate(MAX_PIECES);
    let piece_word =
        |p: &[u8], w: usize| u64::from_le_bytes(p[w * 8..w * 8 + 8].try_into().unwrap_or_default());
    for (f, &(pc, iseq, ep)) in raw.iter().enumerate() {
        let at = from + f as u64 * l.cfp_size;
        let piece = pieces.get(f).and_then(Option::as_deref);
        let read = match piece {
            _ if !is_object(ep) => Err(WalkError::Bad),
            None => Err(WalkError::Read),
            Some(p) => Ok((piece_word(p, 0), piece_word(p, 2))),
        };
        let (me, flags) = match read {
            Ok(words) => words,
            Err(why) => {
                out.mark(f, why);
                (0, 0)
            }
        };
        let raw = if flags & MAGIC_MASK == MAGIC_CFUNC {
            Raw::Cfunc { me }
        } else if pc != 0 && is_object(iseq) {
            Raw::Iseq { iseq, pc, ep }
        } else {
            Raw::Other
        };
        out.frames.push(RawFrame {
            at,
            raw,
            finish: flags & FLAG_FINISH != 0,
        });
    }
    let headers = pieces.get(raw.len()..).unwrap_or_default();
    for (&iseq, piece) in seqs.iter().zip(headers) {
        if let Some(p) = piece {
            out.bodies
                .push((iseq, piece_word(p, (body_at / 8) as usize)));
        }
    }
    Ok(())
}

/// The [`PIECE`] bytes at each of `addrs`: from those read `ahead`, the rest in one
/// read.
fn pieces<M: Memory + ?Sized>(
    mem: &M,
    addrs: &[u64],
    ahead: Option<&Pieces>,
) -> Vec<Option<Vec<u8>>> {
    let mut out: Vec<Option<Vec<u8>>> = (addrs.iter())
        .map(|&a| Some(ahead?.get(a, PIECE)?.to_vec()))
        .collect();
    let missing: Vec<usize> = (0..addrs.len()).filter(|&i| out[i].is_none()).collect();
    if !missing.is_empty() {
        let at: Vec<u64> = missing.iter().map(|&i| addrs[i]).collect();
        for (i, p) in missing.into_iter().zip(mem.read_pages(&at, PIECE)) {
            out[i] = p.map(Vec::from);
        }
    }
    out
}
