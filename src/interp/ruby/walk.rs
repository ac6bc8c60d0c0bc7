//! Reading a Ruby thread's frames over [`Memory`]: the thread found by its kernel id
//! in the main ractor's thread list, its execution context's control frames from the
//! current one to the base of its VM stack, and what each ran: an instruction
//! sequence (its label such as `block in alpha`, its file, the line of its pc) or a
//! C function (its method entry's name and owner: `Array#each`). Every pointer is
//! checked before it is followed (the object's type bits, the frame within its
//! stack), every length bounded; what does not check out is an error, never a guess.

use super::layout::Layout;
use crate::interp::Memory;
use crate::interp::budget::Walk;

/// `VM_FRAME_MAGIC_MASK` and the magic of a C function's frame.
const MAGIC_MASK: u64 = 0x7fff_0001;
const MAGIC_CFUNC: u64 = 0x5555_0001;
/// `VM_FRAME_FLAG_FINISH`: the frame a `vm_exec` began with.
const FLAG_FINISH: u64 = 0x0020;
/// `VM_ENV_FLAG_LOCAL`: the environment of a method (or top), not of a block.
const ENV_LOCAL: u64 = 0x0002;
/// Environments a block's chain is followed through at most, to its method's.
const MAX_ENV_DEPTH: usize = 64;
/// `VM_METHOD_TYPE_ISEQ`: a method written in Ruby (the low 4 bits of its
/// definition's first word).
pub const METHOD_ISEQ: u32 = 0;
/// `ISEQ_TYPE_METHOD`.
const ISEQ_TYPE_METHOD: u32 = 1;
/// Object types (`flags & T_MASK`).
const T_MASK: u64 = 0x1f;
const T_STRING: u64 = 0x05;
const T_ARRAY: u64 = 0x07;
const T_IMEMO: u64 = 0x1a;
/// `imemo` kinds (`(flags >> FL_USHIFT) & 0xf`).
const IMEMO_SVAR: u64 = 2;
const IMEMO_MENT: u64 = 6;
const IMEMO_ISEQ: u64 = 7;
/// `RSTRING_NOEMBED` / `RARRAY_EMBED_FLAG` (`FL_USER1`).
const FL_USER1: u64 = 1 << 13;
/// Bytes of a name or path kept at most.
pub const MAX_STRING: usize = 4096;
/// Frames of one thread read at most.
pub const MAX_FRAMES: u64 = 4096;
/// VALUEs a VM stack holds at most (Ruby's default is 1 MiB of them).
const MAX_STACK_VALUES: u64 = 1 << 24;
/// Entries of a line table searched at most.
const MAX_LINE_ENTRIES: u64 = 1 << 20;

/// Why a thread's frames could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalkError {
    /// A read failed (unmapped, refused, or the sample's budget spent).
    Read,
    /// The thread is not in the VM's thread list.
    NoThread,
    /// The thread list loops or is longer than the walk budget.
    List,
    /// The execution context or a frame does not check out.
    Bad,
}

/// One control frame, as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Raw {
    /// Running instruction sequence `iseq` at `pc`.
    Iseq {
        /// The `rb_iseq_t`.
        iseq: u64,
        /// The frame's pc.
        pc: u64,
        /// The frame's environment (0 when not known: a frame put back in place of
        /// one the thread reused).
        ep: u64,
    },
    /// A C function, by its method entry.
    Cfunc {
        /// The `rb_callable_method_entry_t`.
        me: u64,
    },
    /// Neither (a dummy or internal frame): not shown.
    Other,
}

/// One control frame and whether a `vm_exec` began with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawFrame {
    /// Where it is (its `rb_control_frame_t`).
    pub at: u64,
    /// What it ran.
    pub raw: Raw,
    /// `VM_FRAME_FLAG_FINISH`.
    pub finish: bool,
}

/// What an instruction sequence says of itself.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IseqInfo {
    /// Its label (`alpha`, `block in alpha`, `<main>`).
    pub label: String,
    /// Its file.
    pub path: Option<String>,
    /// The line it begins at.
    pub first_line: u32,
    /// Where its instructions are, and how many VALUEs.
    pub encoded: (u64, u64),
    /// Its line table: entries, positions (0 when Ruby dropped it), size.
    pub lines: (u64, u64, u64),
    /// The sequence of the method (or top) it belongs to: itself unless a block's.
    pub home: u64,
    /// Whether it is a method's (`ISEQ_TYPE_METHOD`), not a block's, a class body's,
    /// the top's.
    pub method: bool,
}

impl IseqInfo {
    /// Whether `pc` points into its instructions (at most just past the last).
    pub fn holds(&self, pc: u64) -> bool {
        let (start, len) = self.encoded;
        pc.checked_sub(start)
            .is_some_and(|d| d % 8 == 0 && d / 8 <= len)
    }
}

fn rd<M: Memory + ?Sized>(mem: &M, addr: u64) -> Result<u64, WalkError> {
    mem.u64_at(addr).ok_or(WalkError::Read)
}

/// Whether `v` is a heap object (not an immediate, not nil) aligned as Ruby's are.
pub(super) fn is_object(v: u64) -> bool {
    v != 0 && v & 7 == 0 && v >= 0x1000
}

/// The execution context of thread `tid` of the VM whose pointer is at `vm_ptr`,
/// walking at most `max` threads. The main thread of a forked child still carries
/// its parent's thread id: a `main` thread (the process's first) not in the list is
/// the VM's main thread.
pub fn thread_ec<M: Memory + ?Sized>(
    mem: &M,
    l: &Layout,
    vm_ptr: u64,
    (tid, main): (u32, bool),
    max: usize,
) -> Result<u64, WalkError> {
    let vm = rd(mem, vm_ptr)?;
    match thread_in_list(mem, l, vm, tid, max) {
        Err(WalkError::NoThread) if main => {
            let th = rd(mem, vm.checked_add(l.vm_main_thread).ok_or(WalkError::Bad)?)?;
            let ec = rd(mem, th.checked_add(l.th_ec).ok_or(WalkError::Bad)?)?;
            if is_object(th) && is_object(ec) {
                Ok(ec)
            } else {
                Err(WalkError::Bad)
            }
        }
        found => found,
    }
}

/// The execution context of thread `tid` in the main ractor's thread list of VM `vm`.
fn thread_in_list<M: Memory + ?Sized>(
    mem: &M,
    l: &Layout,
    vm: u64,
    tid: u32,
    max: usize,
) -> Result<u64, WalkError> {
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
        let id = mem
            .u32_at(th.checked_add(l.th_tid).ok_or(WalkError::Bad)?)
            .ok_or(WalkError::Read)?;
        if id == tid {
            let ec = rd(mem, th + l.th_ec)?;
            return if is_object(ec) {
                Ok(ec)
            } else {
                Err(WalkError::Bad)
            };
        }
        node = rd(mem, node)?;
    }
    Err(WalkError::NoThread)
}

/// The control frames of execution context `ec`, innermost first: from its current
/// frame (or from `start`, a frame the sample's registers gave) to the base of its
/// VM stack (less the dummy frame at the base), each one within the stack.
pub fn control_frames<M: Memory + ?Sized>(
    mem: &M,
    l: &Layout,
    ec: u64,
    start: Option<u64>,
    out: &mut Vec<RawFrame>,
) -> Result<(), WalkError> {
    out.clear();
    let stack = rd(mem, ec + l.ec_stack)?;
    let size = rd(mem, ec + l.ec_stack_size)?;
    let cfp = match start {
        Some(c) => c,
        None => rd(mem, ec + l.ec_cfp)?,
    };
    if size == 0 || size > MAX_STACK_VALUES || !is_object(stack) {
        return Err(WalkError::Bad);
    }
    let end = stack.checked_add(size * 8).ok_or(WalkError::Bad)?;
    // Frames grow down from the end, one `cfp_size` each; the last is a dummy.
    let base = end - l.cfp_size;
    if cfp < stack || cfp > base || !(base - cfp).is_multiple_of(l.cfp_size) {
        return Err(WalkError::Bad);
    }
    let n = ((base - cfp) / l.cfp_size).min(MAX_FRAMES);
    let bytes = mem
        .bytes_at(
            cfp,
            (n * l.cfp_size) as usize,
            (MAX_FRAMES * l.cfp_size) as usize,
        )
        .ok_or(WalkError::Read)?;
    let word = |f: u64, off: u64| {
        let at = (f * l.cfp_size + off) as usize;
        u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or_default())
    };
    for f in 0..n {
        let (pc, iseq, ep) = (word(f, l.cfp_pc), word(f, l.cfp_iseq), word(f, l.cfp_ep));
        // The environment lives in this stack, or on the heap once it escaped (a
        // block made a Proc, a binding taken).
        if !is_object(ep) {
            return Err(WalkError::Bad);
        }
        let flags = rd(mem, ep)?;
        let finish = flags & FLAG_FINISH != 0;
        let raw = if flags & MAGIC_MASK == MAGIC_CFUNC {
            Raw::Cfunc {
                me: rd(mem, ep - 16)?,
            }
        } else if pc != 0 && is_object(iseq) {
            Raw::Iseq { iseq, pc, ep }
        } else {
            Raw::Other
        };
        out.push(RawFrame {
            at: cfp + f * l.cfp_size,
            raw,
            finish,
        });
    }
    Ok(())
}

/// The flags word of object `v` if it is of type `t` (and, for an imemo, of kind
/// `imemo`).
pub(super) fn typed<M: Memory + ?Sized>(
    mem: &M,
    v: u64,
    t: u64,
    imemo: Option<u64>,
) -> Option<u64> {
    if !is_object(v) {
        return None;
    }
    let flags = mem.u64_at(v)?;
    let kind_ok = imemo.is_none_or(|k| (flags >> 12) & 0xf == k);
    (flags & T_MASK == t && kind_ok).then_some(flags)
}

/// The text of String `v`.
pub fn string<M: Memory + ?Sized>(mem: &M, l: &Layout, v: u64) -> Option<String> {
    let flags = typed(mem, v, T_STRING, None)?;
    let bytes = if flags & FL_USER1 == 0 {
        // Embedded: its length in FL_USER2..6.
        let len = (flags >> 14) & 0x1f;
        if len > l.str_embed_max {
            return None;
        }
        mem.bytes_at(v + l.str_embed, len as usize, MAX_STRING)?
    } else {
        let len = mem.u64_at(v + l.str_len)?;
        let ptr = mem.u64_at(v + l.str_ptr)?;
        mem.bytes_at(ptr, usize::try_from(len).ok()?, MAX_STRING)?
    };
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// Element `i` of Array `v`, if it has that many.
pub fn element<M: Memory + ?Sized>(mem: &M, l: &Layout, v: u64, i: u64) -> Option<u64> {
    let flags = typed(mem, v, T_ARRAY, None)?;
    let (ptr, len) = if flags & FL_USER1 != 0 {
        (v + l.ary_embed, (flags >> 15) & 3)
    } else {
        (mem.u64_at(v + l.ary_ptr)?, mem.u64_at(v + l.ary_len)?)
    };
    (i < len).then(|| mem.u64_at(ptr.checked_add(i.checked_mul(8)?)?))?
}

/// What instruction sequence `iseq` says of itself, if it is one.
pub fn iseq_info<M: Memory + ?Sized>(mem: &M, l: &Layout, iseq: u64) -> Option<IseqInfo> {
    typed(mem, iseq, T_IMEMO, Some(IMEMO_ISEQ))?;
    let body = mem.u64_at(iseq + l.iseq_body)?;
    if !is_object(body) {
        return None;
    }
    let label = string(mem, l, mem.u64_at(body + l.body_label)?)?;
    let pathobj = mem.u64_at(body + l.body_path)?;
    let path = string(mem, l, pathobj).or_else(|| string(mem, l, element(mem, l, pathobj, 0)?));
    let first = mem.u64_at(body + l.body_first_line)?;
    // A Fixnum.
    let first_line = if first & 1 == 1 {
        u32::try_from(first >> 1).unwrap_or(0)
    } else {
        0
    };
    let encoded = (
        mem.u64_at(body + l.body_encoded)?,
        u64::from(mem.u32_at(body + l.body_size)?),
    );
    let lines = (
        mem.u64_at(body + l.body_insns)?,
        mem.u64_at(body + l.body_positions)?,
        u64::from(mem.u32_at(body + l.body_insns_size)?),
    );
    let home = mem.u64_at(body + l.body_local)?;
    let method = mem.u32_at(body + l.body_type)? == ISEQ_TYPE_METHOD;
    Some(IseqInfo {
        label,
        path,
        first_line,
        encoded,
        lines,
        home,
        method,
    })
}

/// The line of the instruction before `pc` in `info` (a frame's pc points past the
/// instruction it runs), by a binary search of the positions table; the first line
/// when the table is gone (Ruby replaces it with a succinct bit vector in big
/// sequences) or does not check out.
pub fn line_at<M: Memory + ?Sized>(mem: &M, l: &Layout, info: &IseqInfo, pc: u64) -> u32 {
    let (entries, positions, size) = info.lines;
    let (start, len) = info.encoded;
    let pos = match pc.checked_sub(start) {
        Some(d) if d % 8 == 0 && d / 8 <= len => (d / 8).saturating_sub(1),
        _ => return info.first_line,
    };
    if size == 0 || size > MAX_LINE_ENTRIES || entries == 0 {
        return info.first_line;
    }
    let entry_line = |i: u64| {
        let at = entries.checked_add(i.checked_mul(l.insn_entry_size)?)?;
        u32::try_from(mem.u32_at(at)? as i32).ok()
    };
    if size == 1 || positions == 0 {
        if size == 1 {
            return entry_line(0).unwrap_or(info.first_line);
        }
        return info.first_line;
    }
    // The last entry whose position is at or before `pos`.
    let (mut lo, mut hi) = (0u64, size);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        let Some(p) = mem.u32_at(positions + mid * 4) else {
            return info.first_line;
        };
        if u64::from(p) <= pos {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    entry_line(lo).unwrap_or(info.first_line)
}

/// What a method entry says of its method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodEntry {
    /// Its name (an ID).
    pub id: u64,
    /// The class or module that owns it.
    pub owner: u64,
    /// Its definition's type ([`METHOD_ISEQ`], a C function...).
    pub kind: u32,
    /// The instruction sequence of a method written in Ruby.
    pub iseq: u64,
}

/// What method entry `me` says, if it is one.
pub fn method_entry<M: Memory + ?Sized>(mem: &M, l: &Layout, me: u64) -> Option<MethodEntry> {
    typed(mem, me, T_IMEMO, Some(IMEMO_MENT))?;
    let def = mem.u64_at(me + l.me_def)?;
    if !is_object(def) {
        return None;
    }
    let kind = mem.u32_at(def)? & 0xf;
    let iseq = match kind {
        METHOD_ISEQ => mem.u64_at(def + l.def_iseq)?,
        _ => 0,
    };
    Some(MethodEntry {
        id: mem.u64_at(def + l.def_original_id)?,
        owner: mem.u64_at(me + l.me_owner)?,
        kind,
        iseq,
    })
}

/// The method entry of the frame whose environment is at `ep`, as Ruby finds it
/// (`rb_vm_frame_method_entry`): in the environment's `me_cref` slot (`ep[-2]`), else
/// in the environments of the blocks' chain (`ep[-1]`, its low two bits a tag) up to
/// the method's (flagged local), where `$~` may have wrapped it in an `svar`. None
/// for a frame of no method (`<main>`, a class body) or a chain that does not check
/// out.
pub fn frame_method<M: Memory + ?Sized>(mem: &M, l: &Layout, ep: u64) -> Option<u64> {
    let ment = |v: u64| typed(mem, v, T_IMEMO, Some(IMEMO_MENT)).map(|_| v);
    let mut ep = ep;
    for _ in 0..MAX_ENV_DEPTH {
        if !is_object(ep) {
            return None;
        }
        let flags = mem.u64_at(ep)?;
        let slot = mem.u64_at(ep - 16)?;
        if let Some(me) = ment(slot) {
            return Some(me);
        }
        if flags & ENV_LOCAL != 0 {
            typed(mem, slot, T_IMEMO, Some(IMEMO_SVAR))?;
            return ment(mem.u64_at(slot + l.svar_me)?);
        }
        ep = mem.u64_at(ep - 8)? & !3;
    }
    None
}

/// The name of symbol `id` from the global symbol table at `table`
/// (`ruby_global_symbols`: `last_id`, then `ids` 16 bytes on, an Array of Arrays of
/// 512 (string, symbol) pairs).
pub fn id_name<M: Memory + ?Sized>(mem: &M, l: &Layout, table: u64, id: u64) -> Option<String> {
    const UNIT: u64 = 512;
    let serial = if id > l.last_op_id { id >> 4 } else { id };
    let last = u64::from(mem.u32_at(table)?);
    if serial == 0 || serial > last {
        return None;
    }
    let ids = mem.u64_at(table + 16)?;
    let chunk = element(mem, l, ids, serial / UNIT)?;
    let s = element(mem, l, chunk, (serial % UNIT) * 2)?;
    string(mem, l, s)
}
