//! The inline trees of Go 1.18 and later: for each function, the calls the compiler
//! inlined into it (`runtime.inlinedCall`), reached through its `FUNCDATA_InlTree`
//! offset, which counts from `moduledata.gofunc` (the `go:func.*` symbol). A stripped
//! binary has no symbol saying where that is, so it is read from the module's
//! `moduledata` itself: found in a writable section as the words holding the table's
//! address and its name table's, its `gofunc` is the word after `rodata` (the
//! `.rodata` section's address; `types` before it may hold the same value, so the
//! last such word is taken). Trees are read from the file as each pc asks.

use object::{Object, ObjectSection, SectionFlags, SectionKind};

use super::GoTableError;
use super::header::{GoFormat, Layout};
use crate::elf::{ElfInfo, Image, Segment};

/// `PCDATA_InlTreeIndex`: the pc-data table giving the inline tree index at a pc.
pub(super) const PCDATA_INL_TREE_INDEX: u64 = 2;
/// `FUNCDATA_InlTree`: the func-data slot of the inline tree.
pub(super) const FUNCDATA_INL_TREE: u8 = 3;

/// The most bytes of writable sections searched for `moduledata`.
const MAX_SEARCHED: u64 = 32 << 20;

/// Where a module's inline trees are.
pub(super) struct InlineTrees {
    image: Image,
    segments: Vec<Segment>,
    /// `moduledata.gofunc`: what func-data offsets count from.
    gofunc: u64,
}

/// One inlined call: the callee's name (in the name table) and the call site, as an
/// offset from the function's entry.
pub(super) struct Call {
    pub name_off: u32,
    pub parent_pc: i32,
}

impl InlineTrees {
    /// Finds `gofunc` of a 64-bit Go 1.18+ module whose table lies at `table_svma`;
    /// `None` when it cannot be found (older formats, no section headers, a layout not
    /// recognised: inlined functions then go unnamed, their callers named).
    pub(super) fn find(
        image: &Image,
        file: &object::File<'_>,
        table_svma: u64,
        layout: &Layout,
    ) -> Option<InlineTrees> {
        if layout.format < GoFormat::Go118 || layout.ptr_size != 8 {
            return None;
        }
        let segments = ElfInfo::parse((**image).as_ref()).ok()?.segments;
        let rodata = file.section_by_name(".rodata")?.address();
        let names = table_svma.checked_add(layout.funcnametab)?;
        let mut searched = 0u64;
        for section in file.sections() {
            let writable = match section.flags() {
                SectionFlags::Elf { sh_flags, .. } => sh_flags.0 & object::elf::SHF_WRITE.0 != 0,
                _ => false,
            };
            if !writable || section.kind() == SectionKind::UninitializedData {
                continue;
            }
            let Some((offset, size)) = section.file_range() else {
                continue;
            };
            searched = searched.saturating_add(size);
            if searched > MAX_SEARCHED {
                return None;
            }
            let mut bytes = vec![0u8; size as usize];
            if !image.read_at(offset, &mut bytes) {
                continue;
            }
            let words: Vec<u64> = bytes
                .chunks_exact(8)
                .map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()))
                .collect();
            let found = words
                .windows(2)
                .position(|w| w[0] == table_svma && w[1] == names);
            let Some(start) = found else { continue };
            // `text` is word 22 in every layout so far; `rodata` comes 15 to 25 words
            // after it.
            let fields = words.get(start + 22..(start + 50).min(words.len()))?;
            let at = fields.iter().rposition(|&w| w == rodata)?;
            let gofunc = *fields.get(at + 1)?;
            let readonly = segments.iter().any(|s| {
                !s.executable && (s.svma..s.svma.saturating_add(s.file_size)).contains(&gofunc)
            });
            if gofunc < rodata || !readonly {
                return None;
            }
            return Some(InlineTrees {
                image: image.clone(),
                segments,
                gofunc,
            });
        }
        None
    }

    /// Call `ix` of the tree at `tree` (a func-data offset).
    pub(super) fn call(&self, tree: u32, ix: i32, format: GoFormat) -> Result<Call, GoTableError> {
        let size: u64 = if format == GoFormat::Go118 { 20 } else { 16 };
        let bad = || GoTableError::InlineTree(u64::from(tree));
        let svma = u64::try_from(ix)
            .ok()
            .and_then(|ix| ix.checked_mul(size))
            .and_then(|o| o.checked_add(self.gofunc)?.checked_add(u64::from(tree)))
            .ok_or_else(bad)?;
        let seg = self
            .segments
            .iter()
            .find(|s| {
                svma >= s.svma && svma.saturating_add(size) <= s.svma.saturating_add(s.file_size)
            })
            .ok_or_else(bad)?;
        let mut buf = [0u8; 20];
        let buf = &mut buf[..size as usize];
        if !self.image.read_at(seg.file_offset + (svma - seg.svma), buf) {
            return Err(bad());
        }
        let word = |at: usize| i32::from_le_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]);
        // Go 1.18, 1.19: parent, funcID, pad, file, line, func_, parentPc.
        // Go 1.20 on: funcID, pad, nameOff, parentPc, startLine.
        let (name, parent_pc) = if format == GoFormat::Go118 {
            (word(12), word(16))
        } else {
            (word(4), word(8))
        };
        Ok(Call {
            name_off: u32::try_from(name).map_err(|_| bad())?,
            parent_pc,
        })
    }
}
