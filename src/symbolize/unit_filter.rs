//! Keeps addr2line from reading compilation units no looked-up address falls in.
//!
//! [`addr2line::Context`] starts by visiting every unit of `.debug_info`: it parses each
//! unit's abbreviation table, root entry and line-program header to learn the unit's
//! address ranges. For a large C library with thousands of units (Debian's libc6-dbg:
//! 4,126) that costs tens of milliseconds, though a recording's few dozen libc
//! addresses fall in a handful of units. `.debug_aranges` already maps every address
//! to its unit, so [`keep_only_units_for`] uses it: the header of every unit that
//! aranges lists but that holds none of the addresses is rewritten, in the decompressed
//! copy of `.debug_info`, into an empty version-4 unit of the same length (an empty
//! abbreviation table, no root entry), which addr2line skips at once. No offset
//! changes, so everything the kept units refer to stays where it was.
//!
//! It leaves the data alone (and addr2line reads every unit, as before) when a kept
//! unit could refer into another unit (`DW_FORM_ref_addr` and kin, as LTO and dwz
//! output does), when the headers or aranges cannot be read, or when nothing would be
//! skipped. Units aranges does not list are always kept: they may hold code.

use std::collections::HashSet;

use gimli::{Endianity, RunTimeEndian};

/// One unit header of `.debug_info`.
#[derive(Debug, Clone, Copy)]
struct UnitHeader {
    offset: usize,
    /// Offset of the version field (after the initial length).
    body: usize,
    end: usize,
    dwarf64: bool,
    abbrev_offset: u64,
}

/// Rewrites, in `info`, the units that aranges lists but that contain none of `svmas`;
/// returns how many were rewritten (0 when it left `info` alone).
pub(super) fn keep_only_units_for(
    info: &mut [u8],
    abbrev: &[u8],
    aranges: &[u8],
    endian: RunTimeEndian,
    svmas: &[u64],
) -> usize {
    let Some((units, skipped)) = plan(info, abbrev, aranges, endian, svmas) else {
        return 0;
    };
    // An offset pointing at the last byte of .debug_abbrev reads as an empty table
    // (see `may_skip`).
    let empty_table = (abbrev.len() - 1) as u64;
    let skip: Vec<&UnitHeader> = (units.iter().zip(&skipped))
        .filter_map(|(u, &s)| s.then_some(u))
        .collect();
    // Each run of neighbouring skipped units becomes one empty unit, so addr2line
    // steps over thousands of them at once.
    let mut i = 0;
    while i < skip.len() {
        let mut run = *skip[i];
        i += 1;
        while i < skip.len() && skip[i].offset == run.end && skip[i].end - run.offset < 0xffff_0000
        {
            run.end = skip[i].end;
            i += 1;
        }
        make_empty(info, &run, empty_table, endian);
    }
    skip.len()
}

/// Whether a lookup of `svmas` may skip units with `abbrev`: some address is looked
/// up, and the last byte of `.debug_abbrev` ends its last table (an offset pointing
/// at it reads as the empty table the skipped units are given).
fn may_skip(abbrev: &[u8], svmas: &[u64]) -> bool {
    abbrev.last() == Some(&0) && !svmas.is_empty()
}

/// The units of `info`, and whether each can be skipped for a lookup of `svmas`: it
/// is listed by aranges and holds none of them. None when none can, when the data
/// cannot be read, or when a unit that stays could refer into another
/// (`DW_FORM_ref_addr` and kin).
fn plan(
    info: &[u8],
    abbrev: &[u8],
    aranges: &[u8],
    endian: RunTimeEndian,
    svmas: &[u64],
) -> Option<(Vec<UnitHeader>, Vec<bool>)> {
    if !may_skip(abbrev, svmas) {
        return None;
    }
    let units = unit_headers(info, endian)?;
    let (listed, needed) = units_from_aranges(aranges, endian, svmas)?;
    let skipped: Vec<bool> = (units.iter())
        .map(|u| listed.contains(&(u.offset as u64)) && !needed.contains(&(u.offset as u64)))
        .collect();
    if !skipped.contains(&true) {
        return None;
    }
    let mut tables_seen = HashSet::new();
    let kept_refer_out = (units.iter().zip(&skipped))
        .filter(|(u, s)| !**s && tables_seen.insert(u.abbrev_offset))
        .any(|(u, _)| refers_outside_unit(abbrev, u.abbrev_offset, endian).unwrap_or(true));
    (!kept_refer_out).then_some((units, skipped))
}

/// `.debug_info` of `len` bytes read through `read_at` (an offset in the section, a
/// buffer to fill) for a lookup of `svmas`: the units [`keep_only_units_for`] would
/// blank are not read, only their headers (left as zeros in between, which
/// it then rewrites). A big module's DWARF left on disk (libpython's 14 MB) is read
/// in a few of its units rather than whole: reading it all was a fifth of the
/// recorder's CPU over a ten-second recording of a Python process. Everything is
/// read when the filter would keep everything. None when a read fails.
pub(super) fn read_needed(
    len: usize,
    read_at: impl Fn(usize, &mut [u8]) -> bool,
    abbrev: Option<&[u8]>,
    aranges: Option<&[u8]>,
    endian: RunTimeEndian,
    svmas: &[u64],
) -> Option<Vec<u8>> {
    let mut info = vec![0u8; len];
    let whole = |mut info: Vec<u8>| read_at(0, &mut info).then_some(info);
    let (Some(abbrev), Some(aranges)) = (abbrev, aranges) else {
        return whole(info);
    };
    if !may_skip(abbrev, svmas) {
        return whole(info);
    }
    // Each unit's header (at most 24 bytes: a 64-bit length, then v5's fields), then
    // the next unit's from the length read.
    let mut offset = 0usize;
    while offset < len {
        let end = (offset + 24).min(len);
        if !read_at(offset, &mut info[offset..end]) {
            return None;
        }
        let Some((_, _, next)) = unit_at(&info, offset, endian) else {
            return whole(info);
        };
        offset = next;
    }
    let Some((units, skipped)) = plan(&info, abbrev, aranges, endian, svmas) else {
        return whole(info);
    };
    // The kept units, neighbours read in one call.
    let mut i = 0;
    while i < units.len() {
        if skipped[i] {
            i += 1;
            continue;
        }
        let start = units[i].offset;
        let mut end = units[i].end;
        i += 1;
        while i < units.len() && !skipped[i] {
            end = units[i].end;
            i += 1;
        }
        if !read_at(start, &mut info[start..end]) {
            return None;
        }
    }
    Some(info)
}

/// The unit at `offset` in `info`, from its initial length: whether it is 64-bit
/// DWARF, where its body starts and where it ends; None if the length cannot be read
/// or the unit does not fit.
fn unit_at(info: &[u8], offset: usize, endian: RunTimeEndian) -> Option<(bool, usize, usize)> {
    let len32 = endian.read_u32(info.get(offset..offset.checked_add(4)?)?);
    let (dwarf64, body, len) = match len32 {
        0xffff_ffff => (
            true,
            offset + 12,
            endian.read_u64(info.get(offset + 4..offset + 12)?),
        ),
        0xffff_fff0.. => return None,
        n => (false, offset + 4, u64::from(n)),
    };
    let end = body.checked_add(usize::try_from(len).ok()?)?;
    (end <= info.len()).then_some((dwarf64, body, end))
}

fn unit_headers(info: &[u8], endian: RunTimeEndian) -> Option<Vec<UnitHeader>> {
    let u16_at = |at: usize| Some(endian.read_u16(info.get(at..at + 2)?));
    let u32_at = |at: usize| Some(endian.read_u32(info.get(at..at + 4)?));
    let u64_at = |at: usize| Some(endian.read_u64(info.get(at..at + 8)?));
    let mut units = Vec::new();
    let mut offset = 0usize;
    while offset < info.len() {
        let (dwarf64, body, end) = unit_at(info, offset, endian)?;
        let version = u16_at(body)?;
        // v2-4: version, abbrev offset, address size; v5: version, unit type,
        // address size, abbrev offset.
        let abbrev_at = match version {
            2..=4 => body + 2,
            5 => body + 4,
            _ => return None,
        };
        let abbrev_offset = if dwarf64 {
            u64_at(abbrev_at)?
        } else {
            u64::from(u32_at(abbrev_at)?)
        };
        units.push(UnitHeader {
            offset,
            body,
            end,
            dwarf64,
            abbrev_offset,
        });
        offset = end;
    }
    Some(units)
}

/// (every unit offset aranges lists, the offsets of the units holding `svmas`).
fn units_from_aranges(
    aranges: &[u8],
    endian: RunTimeEndian,
    svmas: &[u64],
) -> Option<(HashSet<u64>, HashSet<u64>)> {
    let mut listed = HashSet::new();
    let mut ranges = Vec::new();
    let mut headers = gimli::DebugAranges::new(aranges, endian).headers();
    while let Some(header) = headers.next().ok()? {
        let unit = header.debug_info_offset().0 as u64;
        listed.insert(unit);
        let mut entries = header.entries();
        loop {
            match entries.next() {
                Ok(Some(e)) if e.length() != 0 => {
                    let r = e.range();
                    ranges.push((r.begin, r.end, unit));
                }
                Ok(Some(_)) => {}
                Ok(None) => break,
                // An overflowing entry: keep this unit whatever is looked up.
                Err(_) => {
                    listed.remove(&unit);
                    break;
                }
            }
        }
    }
    if listed.is_empty() {
        return None;
    }
    ranges.sort_unstable();
    let mut needed = HashSet::new();
    for &svma in svmas {
        // Ranges may overlap (functions the linker dropped sit at 0): keep every unit
        // whose range holds the address.
        let upto = ranges.partition_point(|r| r.0 <= svma);
        for r in ranges[..upto].iter().rev().take(64) {
            if svma < r.1 {
                needed.insert(r.2);
            }
        }
    }
    Some((listed, needed))
}

/// Whether the abbreviation table at `offset` uses a form that points outside its own
/// unit; `None` when the table cannot be read.
fn refers_outside_unit(abbrev: &[u8], offset: u64, endian: RunTimeEndian) -> Option<bool> {
    let mut r = gimli::EndianSlice::new(abbrev.get(usize::try_from(offset).ok()?..)?, endian);
    let uleb = |r: &mut gimli::EndianSlice<RunTimeEndian>| gimli::leb128::read::unsigned(r).ok();
    loop {
        let code = uleb(&mut r)?;
        if code == 0 {
            return Some(false);
        }
        uleb(&mut r)?; // tag
        gimli::Reader::read_u8(&mut r).ok()?; // has children
        loop {
            let name = uleb(&mut r)?;
            let form = uleb(&mut r)?;
            if name == 0 && form == 0 {
                break;
            }
            match gimli::DwForm(form as u16) {
                gimli::DW_FORM_ref_addr
                | gimli::DW_FORM_GNU_ref_alt
                | gimli::DW_FORM_ref_sup4
                | gimli::DW_FORM_ref_sup8
                | gimli::DW_FORM_indirect => return Some(true),
                gimli::DW_FORM_implicit_const => {
                    gimli::leb128::read::signed(&mut r).ok()?;
                }
                _ => {}
            }
        }
    }
}

/// Turns `u` into a version-4 unit of the same length with an empty abbreviation
/// table and no entries.
fn make_empty(info: &mut [u8], u: &UnitHeader, empty_table: u64, endian: RunTimeEndian) {
    let need = if u.dwarf64 { 12 } else { 8 };
    if u.end - u.body < need {
        return;
    }
    let mut put = |at: usize, bytes: &[u8]| info[at..at + bytes.len()].copy_from_slice(bytes);
    let mut v = [0u8; 8];
    // The length: a merged run may span more than the first unit did.
    if u.dwarf64 {
        endian.write_u64(&mut v, (u.end - u.body) as u64);
        put(u.offset + 4, &v);
    } else {
        endian.write_u32(&mut v[..4], (u.end - u.body) as u32);
        put(u.offset, &v[..4]);
    }
    endian.write_u16(&mut v[..2], 4);
    put(u.body, &v[..2]);
    let after_abbrev = if u.dwarf64 {
        endian.write_u64(&mut v, empty_table);
        put(u.body + 2, &v);
        u.body + 10
    } else {
        endian.write_u32(&mut v[..4], empty_table as u32);
        put(u.body + 2, &v[..4]);
        u.body + 6
    };
    put(after_abbrev, &[8, 0]); // address size, then a null entry where the root was
}

#[cfg(test)]
mod tests {
    use super::*;

    const LE: RunTimeEndian = RunTimeEndian::Little;

    /// A v4 unit: header, then `body` bytes of entries.
    fn unit_v4(abbrev_offset: u32, body: &[u8]) -> Vec<u8> {
        let mut u = Vec::new();
        u.extend_from_slice(&((7 + body.len()) as u32).to_le_bytes());
        u.extend_from_slice(&4u16.to_le_bytes());
        u.extend_from_slice(&abbrev_offset.to_le_bytes());
        u.push(8);
        u.extend_from_slice(body);
        u
    }

    /// A v2 aranges set for one unit with the given (start, length) entries.
    fn aranges_set(unit: u32, entries: &[(u64, u64)]) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&2u16.to_le_bytes());
        body.extend_from_slice(&unit.to_le_bytes());
        body.push(8); // address size
        body.push(0); // segment size
        body.extend_from_slice(&[0; 4]); // pad to 16 bytes (2 * address size)
        for &(a, l) in entries.iter().chain(&[(0, 0)]) {
            body.extend_from_slice(&a.to_le_bytes());
            body.extend_from_slice(&l.to_le_bytes());
        }
        let mut set = (body.len() as u32).to_le_bytes().to_vec();
        set.extend_from_slice(&body);
        set
    }

    // Table at 0: code 1, DW_TAG_compile_unit, no children, DW_AT_name strng.
    const ABBREV: &[u8] = &[1, 0x11, 0, 0x03, 0x08, 0, 0, 0];

    fn fixture() -> (Vec<u8>, Vec<u8>) {
        let mut info = unit_v4(0, &[1, b'a', 0]);
        let second = info.len() as u32;
        info.extend(unit_v4(0, &[1, b'b', 0]));
        let third = info.len() as u32;
        info.extend(unit_v4(0, &[1, b'c', 0]));
        let mut aranges = aranges_set(0, &[(0x1000, 0x100)]);
        aranges.extend(aranges_set(second, &[(0x2000, 0x100), (0x3000, 0x10)]));
        let _ = third; // not in aranges: always kept
        (info, aranges)
    }

    #[test]
    fn units_without_looked_up_addresses_become_empty() {
        let (mut info, aranges) = fixture();
        let before = info.clone();
        let n = keep_only_units_for(&mut info, ABBREV, &aranges, LE, &[0x3008]);
        assert_eq!(n, 1, "only the first unit is listed and unneeded");
        assert_eq!(info.len(), before.len());
        // First unit: same length, version 4, empty table (offset 7), null root.
        assert_eq!(&info[..4], &before[..4]);
        assert_eq!(&info[4..6], &4u16.to_le_bytes());
        assert_eq!(&info[6..10], &7u32.to_le_bytes());
        assert_eq!(info[11], 0);
        assert_eq!(&info[14..], &before[14..], "the other units are untouched");
        // gimli reads the rewritten unit as one with no root entry.
        let units = unit_headers(&info, LE).unwrap();
        assert_eq!(units.len(), 3);
    }

    #[test]
    fn only_the_kept_units_are_read_and_blanked_alike() {
        // Units with bodies longer than a header read.
        let mut info = unit_v4(0, &[&[1, b'a', 0][..], &[0; 60]].concat());
        let second = info.len() as u32;
        info.extend(unit_v4(0, &[&[1, b'b', 0][..], &[0; 60]].concat()));
        info.extend(unit_v4(0, &[1, b'c', 0]));
        let mut aranges = aranges_set(0, &[(0x1000, 0x100)]);
        aranges.extend(aranges_set(second, &[(0x2000, 0x100), (0x3000, 0x10)]));
        for svmas in [&[0x3008][..], &[0x9999], &[0x1000, 0x2000], &[]] {
            let read = std::cell::Cell::new(0);
            let read_at = |at: usize, buf: &mut [u8]| {
                read.set(read.get() + buf.len());
                buf.copy_from_slice(&info[at..at + buf.len()]);
                true
            };
            let mut part =
                read_needed(info.len(), read_at, Some(ABBREV), Some(&aranges), LE, svmas).unwrap();
            let mut whole = info.clone();
            let n = keep_only_units_for(&mut whole, ABBREV, &aranges, LE, svmas);
            assert_eq!(
                keep_only_units_for(&mut part, ABBREV, &aranges, LE, svmas),
                n
            );
            assert_eq!(part, whole, "{svmas:x?}");
            // Blanked units are not read (past their headers).
            assert_eq!(read.get() < info.len(), n > 0, "{svmas:x?}");
        }
        // A failed read is no section.
        let fail = |_: usize, _: &mut [u8]| false;
        assert_eq!(
            read_needed(info.len(), fail, Some(ABBREV), Some(&aranges), LE, &[1]),
            None
        );
    }

    #[test]
    fn neighbouring_skipped_units_merge_into_one() {
        let (mut info, aranges) = fixture();
        let len = info.len();
        assert_eq!(
            keep_only_units_for(&mut info, ABBREV, &aranges, LE, &[0x9999]),
            2
        );
        let units = unit_headers(&info, LE).unwrap();
        assert_eq!(units.len(), 2, "the two listed units became one: {units:?}");
        assert_eq!((units[0].offset, units[0].end), (0, 2 * 14));
        assert_eq!(units[1].end, len, "the unlisted unit is kept");
    }

    #[test]
    fn cross_unit_references_leave_everything() {
        let (mut info, aranges) = fixture();
        // DW_AT_abstract_origin as DW_FORM_ref_addr.
        let abbrev = [1, 0x11, 0, 0x31, 0x10, 0, 0, 0];
        let before = info.clone();
        assert_eq!(
            keep_only_units_for(&mut info, &abbrev, &aranges, LE, &[0x3008]),
            0
        );
        assert_eq!(info, before);
    }

    #[test]
    fn unreadable_input_is_left_alone() {
        let (info, aranges) = fixture();
        let mut cut = info[..info.len() - 2].to_vec();
        let before = cut.clone();
        assert_eq!(
            keep_only_units_for(&mut cut, ABBREV, &aranges, LE, &[0x3008]),
            0
        );
        assert_eq!(cut, before);
        let mut whole = info.clone();
        assert_eq!(
            keep_only_units_for(&mut whole, ABBREV, &[1, 2, 3], LE, &[0x3008]),
            0
        );
        assert_eq!(
            keep_only_units_for(&mut whole, &ABBREV[..7], &aranges, LE, &[1]),
            0
        );
        assert_eq!(whole, info);
    }

    #[test]
    fn every_needed_unit_is_kept() {
        let (mut info, aranges) = fixture();
        assert_eq!(
            keep_only_units_for(&mut info, ABBREV, &aranges, LE, &[0x1000, 0x20ff]),
            0,
            "both listed units hold an address"
        );
    }
}
