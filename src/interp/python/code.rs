//! Code objects read from a CPython process: checked to be code objects (their type
//! is the runtime's `PyCode_Type`, their sizes sane), then named (qualified name where
//! the version has one, file, first line) and given the line of an instruction. What
//! a code object says is remembered by address with a fingerprint of its fields, so
//! each sample re-reads only the fingerprint: a code object freed and another built at
//! its address is seen as new.

use super::layout::{self, Bytecode, Layout};
use super::lines;
use crate::interp::Memory;

/// Longest name or file name read whole: of a longer one, this many characters are
/// read, then [`CUT`].
const MAX_STRING: u64 = 1024;
/// What ends a name or file name cut at [`MAX_STRING`] characters.
pub const CUT: &str = "…";
/// Largest line table read.
const MAX_LINE_TABLE: u64 = 1 << 20;
/// Bytes of line table a byte of bytecode can need at most, and what any code object
/// may need besides: 3.11+ give each code unit (2 bytes) at most one entry of at most
/// 25 bytes; 3.8-3.10 a pair of bytes per 127 lines skipped.
const LINE_TABLE_PER_BYTE: u64 = 16;
const LINE_TABLE_BASE: u64 = 4096;
/// Largest bytecode accepted, in bytes.
const MAX_BYTECODE: u64 = 1 << 24;

/// The fields of a code object that say which code it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint {
    filename: u64,
    name: u64,
    qualname: u64,
    linetable: u64,
    first_line: u32,
    /// Bytecode length in bytes.
    len: u64,
}

/// What a code object says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Code {
    /// The fields that say which code object it is.
    pub fingerprint: Fingerprint,
    /// The qualified name (3.11+) or the name.
    pub name: String,
    /// The file it was compiled from (`co_filename`).
    pub file: String,
    /// `co_firstlineno`.
    pub first_line: u32,
    line_table: Vec<u8>,
    /// Its line table was refused: larger than its bytecode could need (its frames
    /// keep their names, without a line).
    pub lines_refused: bool,
}

impl Fingerprint {
    /// The bytecode's length in bytes.
    pub fn bytecode_len(&self) -> u64 {
        self.len
    }
}

/// The largest line table a code object of `len` bytes of bytecode could need.
pub fn line_table_bound(len: u64) -> u64 {
    len.saturating_mul(LINE_TABLE_PER_BYTE)
        .saturating_add(LINE_TABLE_BASE)
        .min(MAX_LINE_TABLE)
}

impl Code {
    /// The bytes it keeps (its texts and line table, and its own size).
    pub fn bytes(&self) -> usize {
        std::mem::size_of::<Code>() + self.name.len() + self.file.len() + self.line_table.len()
    }

    /// The line of the instruction at byte `offset`; `offset` None (a frame that has
    /// not started: 3.11/3.12's `prev_instr` before the first instruction) is the
    /// function's first line.
    pub fn line(&self, layout: &Layout, offset: Option<u64>) -> Option<u32> {
        match offset {
            None => Some(self.first_line),
            Some(o) => lines::line_at(layout.line_table, &self.line_table, self.first_line, o),
        }
    }
}

/// Reads the fingerprint of the code object at `addr`, checking that it is one: its
/// type is `code_type` and its bytecode's length is sane.
pub fn fingerprint(
    mem: &impl Memory,
    layout: &Layout,
    code_type: u64,
    addr: u64,
) -> Option<Fingerprint> {
    if addr == 0
        || !addr.is_multiple_of(8)
        || mem.u64_at(addr.wrapping_add(layout::OB_TYPE))? != code_type
    {
        return None;
    }
    let len = match layout.code_bytecode {
        Bytecode::Inline(_) => mem
            .u64_at(addr.wrapping_add(layout::OB_SIZE))?
            .checked_mul(2)?,
        Bytecode::BytesObject(off) => {
            let bytes = mem.u64_at(addr.wrapping_add(off))?;
            mem.u64_at(bytes.checked_add(layout::OB_SIZE)?)?
        }
    };
    if len == 0 || len > MAX_BYTECODE {
        return None;
    }
    Some(Fingerprint {
        filename: mem.u64_at(addr.wrapping_add(layout.code_filename))?,
        name: mem.u64_at(addr.wrapping_add(layout.code_name))?,
        qualname: match layout.code_qualname {
            Some(off) => mem.u64_at(addr.wrapping_add(off))?,
            None => 0,
        },
        linetable: mem.u64_at(addr.wrapping_add(layout.code_linetable))?,
        first_line: mem.u32_at(addr.wrapping_add(layout.code_firstlineno))?,
        len,
    })
}

/// Reads the code object at `addr` whole; None if it does not check out.
pub fn read(mem: &impl Memory, layout: &Layout, code_type: u64, addr: u64) -> Option<Code> {
    let fingerprint = fingerprint(mem, layout, code_type, addr)?;
    let name_obj = match fingerprint.qualname {
        0 => fingerprint.name,
        q => q,
    };
    let name = string(mem, layout, name_obj)?;
    let file = string(mem, layout, fingerprint.filename)?;
    let table_len = mem.u64_at(fingerprint.linetable.checked_add(layout::OB_SIZE)?)?;
    let lines_refused = table_len > line_table_bound(fingerprint.len);
    let line_table = if lines_refused {
        Vec::new()
    } else {
        mem.bytes_at(
            fingerprint.linetable.checked_add(layout::BYTES_SVAL)?,
            usize::try_from(table_len).ok()?,
            MAX_LINE_TABLE as usize,
        )?
    };
    Some(Code {
        fingerprint,
        name,
        file,
        first_line: fingerprint.first_line,
        line_table,
        lines_refused,
    })
}

/// The address the bytecode of the code object at `addr` starts at.
pub fn bytecode_start(mem: &impl Memory, layout: &Layout, addr: u64) -> Option<u64> {
    match layout.code_bytecode {
        Bytecode::Inline(off) => addr.checked_add(off),
        Bytecode::BytesObject(off) => mem
            .u64_at(addr.wrapping_add(off))?
            .checked_add(layout::BYTES_SVAL),
    }
}

/// The words a frame of the code object at `addr` takes in the data stack (3.11+).
pub fn frame_words(mem: &impl Memory, layout: &Layout, addr: u64) -> Option<u64> {
    let int = |off: u64| mem.u32_at(addr.checked_add(off)?).map(u64::from);
    match layout.code_framesize {
        layout::FrameSize::Unknown => None,
        layout::FrameSize::Field(off) => int(off),
        layout::FrameSize::Sum {
            nlocalsplus,
            stacksize,
            specials,
        } => Some(int(nlocalsplus)? + int(stacksize)? + specials),
    }
}

/// Names held at most in one tuple read by [`can_name`].
const MAX_NAMES: u64 = 4096;

/// Whether the code object at `caller` can call the one at `callee` by name: the
/// callee's `co_name` is among the caller's `co_names` (globals, attributes, methods)
/// or `co_localsplusnames` (locals, closures). Names are interned strings, so they
/// are compared by address. None when the version does not say where they are (or a
/// read failed).
pub fn can_name(mem: &impl Memory, layout: &Layout, caller: u64, callee: u64) -> Option<bool> {
    let (names, locals) = layout.code_names?;
    let name = mem.u64_at(callee.checked_add(layout.code_name)?)?;
    for off in [names, locals] {
        let tuple = mem.u64_at(caller.checked_add(off)?)?;
        let len = mem.u64_at(tuple.checked_add(layout::OB_SIZE)?)?;
        if len > MAX_NAMES {
            return None;
        }
        let items = mem.bytes_at(
            tuple.checked_add(layout::TUPLE_ITEMS)?,
            usize::try_from(len * 8).ok()?,
            (MAX_NAMES * 8) as usize,
        )?;
        if items
            .chunks_exact(8)
            .any(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()) == name)
        {
            return Some(true);
        }
    }
    Some(false)
}

/// A `str` object's text: compact strings only (all that code objects hold), decoded
/// by its kind (1, 2 or 4 bytes a character); of a longer string, its first
/// [`MAX_STRING`] characters and [`CUT`], so that a function whose name is made huge
/// is still named (by what it begins with) at a bounded cost.
pub fn string(mem: &impl Memory, layout: &Layout, addr: u64) -> Option<String> {
    if addr == 0 {
        return None;
    }
    let len = mem.u64_at(addr.wrapping_add(layout::UNICODE_LENGTH))?;
    let state = mem.u32_at(addr.wrapping_add(layout::UNICODE_STATE))?;
    // state: interned (2 bits in every version read), kind (3 bits), compact, ascii.
    let interned_bits = 2;
    let kind = (state >> interned_bits) & 7;
    let compact = (state >> (interned_bits + 3)) & 1 == 1;
    let ascii = (state >> (interned_bits + 4)) & 1 == 1;
    if !compact {
        return None;
    }
    let cut = len > MAX_STRING;
    let len = len.min(MAX_STRING) as usize;
    let mut text = if ascii {
        let b = mem.bytes_at(
            addr.wrapping_add(layout.unicode_ascii_size),
            len,
            MAX_STRING as usize,
        )?;
        String::from_utf8(b).ok()?
    } else {
        let data = addr.wrapping_add(layout.unicode_compact_size);
        let width = match kind {
            1 | 2 | 4 => kind as usize,
            _ => return None,
        };
        let b = mem.bytes_at(data, len * width, MAX_STRING as usize * 4)?;
        let chars = b.chunks_exact(width).map(|c| {
            let mut v = [0u8; 4];
            v[..width].copy_from_slice(c);
            char::from_u32(u32::from_le_bytes(v)).unwrap_or(char::REPLACEMENT_CHARACTER)
        });
        chars.collect()
    };
    if cut {
        text.push_str(CUT);
    }
    Some(text)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::interp::Snapshot;

    /// An ASCII str object at `addr` as CPython `layout` lays it out.
    pub(crate) fn put_str(s: &mut Snapshot, layout: &Layout, addr: u64, text: &str) {
        let mut v = vec![0u8; layout.unicode_ascii_size as usize + text.len() + 1];
        v[16..24].copy_from_slice(&(text.len() as u64).to_le_bytes());
        // kind 1, compact, ascii.
        let state: u32 = (1 << 2) | (1 << 5) | (1 << 6);
        v[32..36].copy_from_slice(&state.to_le_bytes());
        let at = layout.unicode_ascii_size as usize;
        v[at..at + text.len()].copy_from_slice(text.as_bytes());
        s.insert(addr, v);
    }

    #[test]
    fn strings_of_each_kind() {
        let l = Layout::for_version(3, 12).unwrap();
        let mut s = Snapshot::default();
        put_str(&mut s, &l, 0x1000, "work");
        assert_eq!(string(&s, &l, 0x1000).as_deref(), Some("work"));
        // A 2-byte string: "é€".
        let mut v = vec![0u8; 56 + 4];
        v[16..24].copy_from_slice(&2u64.to_le_bytes());
        v[32..36].copy_from_slice(&((2u32 << 2) | (1 << 5)).to_le_bytes());
        v[56..58].copy_from_slice(&0xe9u16.to_le_bytes());
        v[58..60].copy_from_slice(&0x20acu16.to_le_bytes());
        s.insert(0x2000, v);
        assert_eq!(string(&s, &l, 0x2000).as_deref(), Some("é€"));
        // Not compact: refused.
        let mut v = vec![0u8; 64];
        v[32..36].copy_from_slice(&(1u32 << 2).to_le_bytes());
        s.insert(0x3000, v);
        assert_eq!(string(&s, &l, 0x3000), None);
        // Longer than read whole: its beginning, marked.
        let long = format!("f7_{}", "x".repeat(70_000));
        put_str(&mut s, &l, 0x10_000, &long);
        let read = string(&s, &l, 0x10_000).unwrap();
        assert_eq!(read.chars().count(), MAX_STRING as usize + 1);
        assert!(
            read.starts_with("f7_xx") && read.ends_with(CUT),
            "{read:.20}"
        );
    }
}
