//! Source lines from a code object's line table and an instruction's offset, for each
//! encoding CPython has used: `co_lnotab` (3.8, 3.9), 3.10's `co_linetable`, and the
//! location table of 3.11+ (PEP 657). Pure functions over the table's bytes, which
//! come from the target and are trusted for nothing: a table that ends early or holds
//! nonsense gives no line, never a panic.

use super::layout::LineTable;

/// The line of the instruction at byte offset `offset` (from the start of the
/// bytecode) in a function whose first line is `first`; None if the table says the
/// instruction has no line or cannot be read.
pub fn line_at(kind: LineTable, table: &[u8], first: u32, offset: u64) -> Option<u32> {
    match kind {
        LineTable::Lnotab => lnotab(table, first, offset),
        LineTable::Linetable310 => linetable310(table, first, offset),
        LineTable::Locations => locations(table, first, offset / 2),
    }
}

/// 3.8, 3.9: pairs of (unsigned byte delta, signed line delta); the line of an
/// offset is the line reached before the address passes it.
fn lnotab(table: &[u8], first: u32, offset: u64) -> Option<u32> {
    let mut line = i64::from(first);
    let mut addr = 0u64;
    for pair in table.chunks_exact(2) {
        addr += u64::from(pair[0]);
        if addr > offset {
            break;
        }
        line += i64::from(pair[1] as i8);
    }
    u32::try_from(line).ok()
}

/// 3.10: pairs of (unsigned byte delta, signed line delta or -128 for none); each
/// pair covers the bytes from the previous end to the new one, at the line reached.
fn linetable310(table: &[u8], first: u32, offset: u64) -> Option<u32> {
    let mut line = i64::from(first);
    let mut end = 0u64;
    for pair in table.chunks_exact(2) {
        let start = end;
        end += u64::from(pair[0]);
        let delta = pair[1] as i8;
        if delta != -128 {
            line += i64::from(delta);
        }
        if start <= offset && offset < end {
            return (delta != -128).then(|| u32::try_from(line).ok()).flatten();
        }
    }
    None
}

/// Reads an unsigned varint of the location table (6 bits a byte, bit 6 continues).
fn varint(it: &mut std::slice::Iter<'_, u8>) -> Option<u64> {
    let mut value = 0u64;
    let mut shift = 0;
    loop {
        let b = *it.next()?;
        value |= u64::from(b & 63) << shift;
        if b & 64 == 0 {
            return Some(value);
        }
        shift += 6;
        if shift > 60 {
            return None;
        }
    }
}

/// A signed varint: the lowest bit is the sign.
fn svarint(it: &mut std::slice::Iter<'_, u8>) -> Option<i64> {
    let v = varint(it)?;
    let magnitude = (v >> 1) as i64;
    Some(if v & 1 == 1 { -magnitude } else { magnitude })
}

/// 3.11+: entries of a first byte (bit 7 set, a 4-bit code, the number of code units
/// covered less one) and the code's operands; `unit` counts 2-byte code units.
fn locations(table: &[u8], first: u32, unit: u64) -> Option<u32> {
    let mut line = i64::from(first);
    let mut at = 0u64;
    let mut it = table.iter();
    while let Some(&head) = it.next() {
        if head & 0x80 == 0 {
            return None;
        }
        let code = (head >> 3) & 15;
        let units = u64::from(head & 7) + 1;
        let has_line = match code {
            15 => false,
            14 => {
                line += svarint(&mut it)?;
                varint(&mut it)?; // end line
                varint(&mut it)?; // column
                varint(&mut it)?; // end column
                true
            }
            13 => {
                line += svarint(&mut it)?;
                true
            }
            10..=12 => {
                line += i64::from(code - 10);
                it.next()?;
                it.next()?;
                true
            }
            _ => {
                it.next()?;
                true
            }
        };
        if unit < at + units {
            return has_line.then(|| u32::try_from(line).ok()).flatten();
        }
        at += units;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lnotab_lines() {
        // Line 10 for bytes 0..6, 11 for 6..20, 13 from 20.
        let t = [6, 1, 14, 2];
        assert_eq!(line_at(LineTable::Lnotab, &t, 10, 0), Some(10));
        assert_eq!(line_at(LineTable::Lnotab, &t, 10, 6), Some(11));
        assert_eq!(line_at(LineTable::Lnotab, &t, 10, 19), Some(11));
        assert_eq!(line_at(LineTable::Lnotab, &t, 10, 40), Some(13));
        // A negative delta (a loop's test after its body).
        assert_eq!(line_at(LineTable::Lnotab, &[4, 3, 4, 0xfe], 1, 5), Some(4));
        assert_eq!(line_at(LineTable::Lnotab, &[4, 3, 4, 0xfe], 1, 8), Some(2));
    }

    #[test]
    fn linetable_310_lines() {
        // Bytes 0..4 line 5 (+0), 4..10 line 6, 10..12 none, 12..20 line 4.
        let t = [4, 0, 6, 1, 2, 0x80, 8, 0xfe];
        let at = |o| line_at(LineTable::Linetable310, &t, 5, o);
        assert_eq!(at(0), Some(5));
        assert_eq!(at(4), Some(6));
        assert_eq!(at(11), None);
        assert_eq!(at(12), Some(4));
        assert_eq!(at(20), None, "past the table");
    }

    #[test]
    fn location_table_lines() {
        // Entry 1: short form (code 0), 1 unit, line +0.
        // Entry 2: one-line form code 11 (+1), 3 units.
        // Entry 3: no-column form (13), line -2 (svarint 5), 2 units.
        // Entry 4: long form (14), +4 (svarint 8), end/col/endcol, 1 unit.
        // Entry 5: no location (15), 2 units.
        let t = [
            0x80,
            0x00,
            0x80 | (11 << 3) | 2,
            1,
            5,
            0x80 | (13 << 3) | 1,
            5,
            0x80 | (14 << 3),
            8,
            0,
            1,
            2,
            0x80 | (15 << 3) | 1,
        ];
        let at = |unit: u64| line_at(LineTable::Locations, &t, 20, unit * 2);
        assert_eq!(at(0), Some(20));
        assert_eq!(at(1), Some(21));
        assert_eq!(at(3), Some(21));
        assert_eq!(at(4), Some(19));
        assert_eq!(at(5), Some(19));
        assert_eq!(at(6), Some(23));
        assert_eq!(at(7), None);
        assert_eq!(at(9), None, "past the table");
        // A table cut inside an entry gives no line.
        assert_eq!(line_at(LineTable::Locations, &t[..8], 20, 12), None);
    }
}
