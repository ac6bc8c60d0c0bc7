//! Bounded reads of a Go table's bytes: little-endian integers, NUL-terminated
//! strings and the pc-value tables' varints, each at an offset the table itself gave
//! (so never trusted): a read past the end is an error, not a panic.

use super::GoTableError;

/// The longest name or file path read (Go's longest generated names are a few
/// hundred bytes).
const MAX_STRING: usize = 4096;

/// A table's bytes, read at offsets that may lie.
#[derive(Clone, Copy)]
pub(super) struct Bytes<'a> {
    pub(super) data: &'a [u8],
}

impl<'a> Bytes<'a> {
    /// `n` bytes at `offset`.
    pub(super) fn slice(
        &self,
        offset: u64,
        n: usize,
        what: &'static str,
    ) -> Result<&'a [u8], GoTableError> {
        usize::try_from(offset)
            .ok()
            .and_then(|o| self.data.get(o..o.checked_add(n)?))
            .ok_or(GoTableError::OutOfBounds {
                what,
                offset,
                len: self.data.len(),
            })
    }

    pub(super) fn u8(&self, offset: u64, what: &'static str) -> Result<u8, GoTableError> {
        Ok(self.slice(offset, 1, what)?[0])
    }

    pub(super) fn u32(&self, offset: u64, what: &'static str) -> Result<u32, GoTableError> {
        let b = self.slice(offset, 4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A pointer-sized word (4 or 8 bytes).
    pub(super) fn word(
        &self,
        offset: u64,
        size: u8,
        what: &'static str,
    ) -> Result<u64, GoTableError> {
        if size == 4 {
            return self.u32(offset, what).map(u64::from);
        }
        let b = self.slice(offset, 8, what)?;
        let mut w = [0u8; 8];
        w.copy_from_slice(b);
        Ok(u64::from_le_bytes(w))
    }

    /// The NUL-terminated string at `offset` (at most [`MAX_STRING`] bytes; bytes that
    /// are not UTF-8 are replaced).
    pub(super) fn cstr(&self, offset: u64, what: &'static str) -> Result<String, GoTableError> {
        let o = usize::try_from(offset)
            .ok()
            .filter(|&o| o < self.data.len())
            .ok_or(GoTableError::OutOfBounds {
                what,
                offset,
                len: self.data.len(),
            })?;
        let rest = &self.data[o..self.data.len().min(o.saturating_add(MAX_STRING))];
        let end = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or(GoTableError::Unterminated { what, offset })?;
        Ok(String::from_utf8_lossy(&rest[..end]).into_owned())
    }

    /// The unsigned varint at `*pos` (7 bits a byte, at most 5 bytes); moves `*pos`
    /// past it.
    pub(super) fn varint(&self, pos: &mut u64) -> Result<u32, GoTableError> {
        let mut v: u32 = 0;
        for shift in (0..35).step_by(7) {
            let b = self.u8(*pos, "pc-value table")?;
            *pos += 1;
            v |= u32::from(b & 0x7f).wrapping_shl(shift);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(GoTableError::LongVarint(*pos))
    }

    /// The value a pc-value table at `offset` gives `target`, the function starting at
    /// `entry`; `None` when the table ends before `target`. Each step of a real
    /// table moves the pc on by at least one instruction, so a table that takes more
    /// steps than there are instructions before `target` (a forged one going round
    /// in place) is an error, as one running off the end of the bytes is.
    pub(super) fn pc_value(
        &self,
        offset: u64,
        entry: u64,
        target: u64,
        quantum: u8,
    ) -> Result<Option<i32>, GoTableError> {
        let (mut pos, mut pc, mut val) = (offset, entry, -1i32);
        let steps = target.saturating_sub(entry) / u64::from(quantum.max(1)) + 8;
        for _ in 0..steps {
            let uv = self.varint(&mut pos)?;
            if uv == 0 && pc != entry {
                return Ok(None);
            }
            let delta = if uv & 1 != 0 {
                !(uv >> 1) as i32
            } else {
                (uv >> 1) as i32
            };
            let pc_delta = u64::from(self.varint(&mut pos)?) * u64::from(quantum);
            pc = pc.saturating_add(pc_delta);
            val = val.wrapping_add(delta);
            if target < pc {
                return Ok(Some(val));
            }
        }
        Err(GoTableError::EndlessTable(offset))
    }
}
