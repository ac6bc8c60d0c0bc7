//! The header of a `.gopclntab`: which of the four formats it is (by its magic), and
//! where its parts start. Go's `runtime/symtab.go` (`pcHeader`) and
//! `debug/gosym/pclntab.go` describe them:
//! - Go 1.2 to 1.15 (`0xfffffffb`): 8 bytes, the function count, then the function
//!   table; every other offset is from the table's start.
//! - Go 1.16 and 1.17 (`0xfffffffa`): the counts and the offsets of the name, CU,
//!   file, pc-value and function tables.
//! - Go 1.18 and 1.19 (`0xfffffff0`) and 1.20 onward (`0xfffffff1`): the same with
//!   the text start in between, and function entries as 32-bit offsets from it.

use super::GoTableError;
use super::read::Bytes;

/// A pclntab format, by the Go release that introduced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum GoFormat {
    /// Go 1.2 to 1.15.
    Go12,
    /// Go 1.16 and 1.17.
    Go116,
    /// Go 1.18 and 1.19.
    Go118,
    /// Go 1.20 and later.
    Go120,
}

impl GoFormat {
    fn from_magic(magic: u32) -> Option<GoFormat> {
        match magic {
            0xffff_fffb => Some(GoFormat::Go12),
            0xffff_fffa => Some(GoFormat::Go116),
            0xffff_fff0 => Some(GoFormat::Go118),
            0xffff_fff1 => Some(GoFormat::Go120),
            _ => None,
        }
    }

    /// The releases that write this format, for messages.
    pub fn releases(self) -> &'static str {
        match self {
            GoFormat::Go12 => "Go 1.2-1.15",
            GoFormat::Go116 => "Go 1.16-1.17",
            GoFormat::Go118 => "Go 1.18-1.19",
            GoFormat::Go120 => "Go 1.20+",
        }
    }
}

/// Whether `table` starts with a known format's magic (its bytes were read).
pub(super) fn has_magic(table: &[u8]) -> bool {
    table
        .get(..4)
        .and_then(|m| GoFormat::from_magic(u32::from_le_bytes(m.try_into().ok()?)))
        .is_some()
}

/// Where a table's parts start (offsets into the table) and what sizes it uses.
#[derive(Debug, Clone)]
pub(super) struct Layout {
    pub format: GoFormat,
    /// Instruction size quantum of the pc-value tables (1 on x86, 4 on arm64).
    pub quantum: u8,
    pub ptr_size: u8,
    pub nfunc: u64,
    /// The text start the header states (Go 1.18 and 1.19; 0 or absent otherwise).
    pub text_start: u64,
    pub funcnametab: u64,
    pub cutab: u64,
    pub filetab: u64,
    pub pctab: u64,
    /// Where the `_func` records' offsets count from.
    pub funcdata: u64,
    pub functab: u64,
}

impl Layout {
    /// Reads the header of `t`, and checks that the function table fits in it.
    pub(super) fn parse(t: Bytes<'_>) -> Result<Layout, GoTableError> {
        let magic = t.u32(0, "header")?;
        let format = GoFormat::from_magic(magic).ok_or(GoTableError::UnknownMagic(magic))?;
        let (pad, quantum, ptr_size) = (
            t.u8(4, "header")? | t.u8(5, "header")?,
            t.u8(6, "header")?,
            t.u8(7, "header")?,
        );
        if pad != 0 || !matches!(quantum, 1 | 2 | 4) || !matches!(ptr_size, 4 | 8) {
            return Err(GoTableError::BadHeader { quantum, ptr_size });
        }
        let word = |i: u64| t.word(8 + i * u64::from(ptr_size), ptr_size, "header");
        let mut l = Layout {
            format,
            quantum,
            ptr_size,
            nfunc: 0,
            text_start: 0,
            funcnametab: 0,
            cutab: 0,
            filetab: 0,
            pctab: 0,
            funcdata: 0,
            functab: 0,
        };
        match format {
            GoFormat::Go12 => {
                l.nfunc = word(0)?;
                l.functab = 8 + u64::from(ptr_size);
                let end = l.functab_end()?;
                l.filetab = u64::from(t.u32(end, "file table offset")?);
            }
            GoFormat::Go116 => {
                l.nfunc = word(0)?;
                l.funcnametab = word(2)?;
                l.cutab = word(3)?;
                l.filetab = word(4)?;
                l.pctab = word(5)?;
                l.funcdata = word(6)?;
                l.functab = l.funcdata;
            }
            GoFormat::Go118 | GoFormat::Go120 => {
                l.nfunc = word(0)?;
                l.text_start = word(2)?;
                l.funcnametab = word(3)?;
                l.cutab = word(4)?;
                l.filetab = word(5)?;
                l.pctab = word(6)?;
                l.funcdata = word(7)?;
                l.functab = l.funcdata;
            }
        }
        let end = l.functab_end()?;
        if end > t.data.len() as u64 {
            return Err(GoTableError::TooManyFunctions(l.nfunc));
        }
        Ok(l)
    }

    /// The size of one field of the function table: entries are 32-bit offsets from
    /// Go 1.18, pointers before.
    pub(super) fn functab_field(&self) -> u64 {
        if self.format >= GoFormat::Go118 {
            4
        } else {
            u64::from(self.ptr_size)
        }
    }

    /// Where the function table (`nfunc` pairs and the end pc) ends.
    fn functab_end(&self) -> Result<u64, GoTableError> {
        self.nfunc
            .checked_mul(2)
            .and_then(|n| n.checked_add(1))
            .and_then(|n| n.checked_mul(self.functab_field()))
            .and_then(|n| n.checked_add(self.functab))
            .ok_or(GoTableError::TooManyFunctions(self.nfunc))
    }

    /// The size of a `_func`'s fixed part, up to its pc-data offsets (Go 1.18 on; the
    /// only formats whose inline trees are read).
    pub(super) fn func_fixed_size(&self) -> u64 {
        match self.format {
            GoFormat::Go120 => 44,
            _ => 40,
        }
    }
}
