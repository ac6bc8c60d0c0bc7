//! Go functions named from the binary's own `.gopclntab`, the table Go's runtime reads
//! for its tracebacks: every function's entry, name, and pc → file and line, stripped
//! binary or not (`go build -ldflags="-s -w"` drops the symbol table and DWARF, never
//! this). The namer uses it for a module without DWARF, before its symbol table.
//!
//! Formats of Go 1.2 to today are read ([`header`]); the inline tree of Go 1.18 and
//! later ([`inline`]) gives the functions inlined at a pc as frames of their own.
//! Every offset comes from the file and is checked ([`read`]): a forged or truncated
//! table gives an error, never a panic, an unbounded loop or allocation.

mod buildinfo;
mod header;
mod inline;
mod read;
#[cfg(test)]
mod tests;

pub use header::GoFormat;

use object::{Object, ObjectSection};

use crate::elf::Image;
use read::Bytes;

/// The largest `.gopclntab` read (the largest Go binaries have some 100 MiB).
pub const MAX_TABLE: u64 = 256 << 20;

/// Inlined calls followed at one pc at most (a forged tree may loop).
const MAX_INLINE_DEPTH: usize = 64;

/// Why a Go table could not be read, or a pc not named from it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GoTableError {
    /// The table's first word is no format known.
    #[error("pclntab magic {0:#x} is not one of Go 1.2 to 1.2x's")]
    UnknownMagic(u32),
    /// The header's sizes are not a machine's.
    #[error("pclntab header has pointer size {ptr_size} and pc quantum {quantum}")]
    BadHeader {
        /// The pc quantum stated.
        quantum: u8,
        /// The pointer size stated.
        ptr_size: u8,
    },
    /// An offset the table gave points past its end.
    #[error("pclntab {what} at {offset:#x} lies outside the {len}-byte table")]
    OutOfBounds {
        /// What was read there.
        what: &'static str,
        /// Where.
        offset: u64,
        /// The table's size.
        len: usize,
    },
    /// A name or path without its NUL within 4 KiB.
    #[error("pclntab {what} at {offset:#x} has no end within 4 KiB")]
    Unterminated {
        /// What was read there.
        what: &'static str,
        /// Where.
        offset: u64,
    },
    /// The function count is more than the table can hold.
    #[error("pclntab claims {0} functions, more than it holds")]
    TooManyFunctions(u64),
    /// A pc-value varint longer than 32 bits.
    #[error("pclntab varint runs past 5 bytes at {0:#x}")]
    LongVarint(u64),
    /// A pc-value table that takes more steps than its function has instructions.
    #[error("pclntab pc-value table at {0:#x} does not move on")]
    EndlessTable(u64),
    /// The section is larger than [`MAX_TABLE`].
    #[error(".gopclntab of {0} bytes is more than the {MAX_TABLE} read")]
    TooLarge(u64),
    /// The section's bytes could not be read from the file (cut short).
    #[error(".gopclntab could not be read from the file")]
    Unreadable,
    /// A Go 1.18+ table whose text start is unknown.
    #[error("no .text section gives the pclntab's text start")]
    NoTextStart,
    /// An inline tree entry outside the file or pointing outside its function.
    #[error("inline tree at {0:#x} cannot be read")]
    InlineTree(u64),
    /// Inlined calls that nest past [`MAX_INLINE_DEPTH`] (a loop in a forged tree).
    #[error("inlined calls at {0:#x} nest deeper than {MAX_INLINE_DEPTH}")]
    InlineTooDeep(u64),
}

/// One frame named from a Go table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoFrame {
    /// The function, as Go names it: `main.hashLoop`, `net/http.(*conn).serve`.
    pub function: String,
    /// The source file, as the build saw it.
    pub file: Option<String>,
    /// The line in it.
    pub line: Option<u32>,
    /// Inlined into the frame after it.
    pub inlined: bool,
}

/// A table's bytes: the module image's own when it holds them (read for the
/// recorder, see [`crate::elf::read_module`]), else a copy.
enum TableBytes {
    Owned(Vec<u8>),
    InImage(Image, std::ops::Range<usize>),
}

impl TableBytes {
    fn get(&self) -> &[u8] {
        match self {
            TableBytes::Owned(v) => v,
            TableBytes::InImage(image, range) => {
                (**image).as_ref().get(range.clone()).unwrap_or(&[])
            }
        }
    }
}

/// What unwinding one frame of a Go function needs (see [`GoTable::frame_at`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoFrameSize {
    /// How far the stack pointer is below its value at the function's entry.
    pub sp_delta: i32,
    /// The function has no caller to unwind to: the root of a goroutine's stack
    /// (`runtime.goexit`), of a thread's (`runtime.mstart`, `runtime.rt0_go`), the
    /// functions Go marks TOPFRAME.
    pub outermost: bool,
    /// The function moves the stack pointer to another stack (Go marks it SPWRITE):
    /// `runtime.systemstack`, `mcall` and `morestack` onto the thread's own stack
    /// (g0), `asmcgocall` for a cgo call, the signal trampolines onto the signal
    /// stack. Its caller is not where its frame size says: Go's own tracebacks stop
    /// there too, unless they read the goroutine the thread runs.
    pub switches_stack: bool,
}

/// Go's own marks of a function (`abi.FuncFlag`, Go 1.17 on).
const FLAG_TOPFRAME: u8 = 1;
const FLAG_SPWRITE: u8 = 2;

/// The functions Go marks TOPFRAME, by name: for tables that keep no flags (before
/// Go 1.17).
const TOPFRAME: [&str; 3] = ["runtime.goexit", "runtime.rt0_go", "runtime.mstart"];

/// The amd64 functions Go marks SPWRITE that a sampled stack goes through, by name
/// (tables before Go 1.17 keep no flags); the signal trampolines and the restorer
/// besides, which Go marks otherwise (sigtramp is TOPFRAME) but which run on the
/// signal stack, where what they interrupted is not.
const SWITCHES: [&str; 9] = [
    "runtime.systemstack",
    "runtime.mcall",
    "runtime.morestack",
    "runtime.gogo",
    "runtime.asmcgocall",
    "runtime.sigtramp",
    "runtime.cgoSigtramp",
    "runtime.sigreturn",
    "runtime.sigreturn__sigaction",
];

/// A parsed `.gopclntab` of one module.
pub struct GoTable {
    data: TableBytes,
    layout: header::Layout,
    /// What the function table's 32-bit entries count from (Go 1.18 on).
    text_start: u64,
    inline: Option<inline::InlineTrees>,
    /// The Go release that built it, from `.go.buildinfo` (Go 1.18 on).
    version: Option<String>,
}

/// One function of the table, found for a pc.
struct Func {
    /// Where its `_func` record starts in the table.
    off: u64,
    entry: u64,
    end: u64,
}

impl GoTable {
    /// The Go table of an ELF module (its bytes read from `image`, which may have left
    /// them on disk); `Ok(None)` when it has no `.gopclntab`.
    pub fn from_elf(image: &Image) -> Result<Option<GoTable>, GoTableError> {
        GoTable::read_elf(image, true)
    }

    /// [`GoTable::from_elf`] for unwinding only: no inline trees nor version read
    /// (what [`GoTable::frame_at`] needs is the function table and its `pcsp`).
    pub fn frames_only(image: &Image) -> Result<Option<GoTable>, GoTableError> {
        GoTable::read_elf(image, false)
    }

    fn read_elf(image: &Image, names: bool) -> Result<Option<GoTable>, GoTableError> {
        let data = (**image).as_ref();
        let Ok(file) = object::File::parse(data) else {
            return Ok(None);
        };
        let Some(section) = file.section_by_name(".gopclntab") else {
            return Ok(None);
        };
        let Some((offset, size)) = section.file_range() else {
            return Ok(None);
        };
        if size > MAX_TABLE {
            return Err(GoTableError::TooLarge(size));
        }
        let text = file.section_by_name(".text").map(|s| s.address());
        let range = usize::try_from(offset)
            .ok()
            .and_then(|o| Some(o..o.checked_add(size as usize)?))
            .filter(|r| data.get(r.clone()).is_some_and(header::has_magic));
        let bytes = match range {
            Some(range) => TableBytes::InImage(image.clone(), range),
            None => {
                let mut bytes = vec![0u8; size as usize];
                if !image.read_at(offset, &mut bytes) {
                    return Err(GoTableError::Unreadable);
                }
                TableBytes::Owned(bytes)
            }
        };
        let mut table = GoTable::with_bytes(bytes, text)?;
        if names {
            table.inline =
                inline::InlineTrees::find(image, &file, section.address(), &table.layout);
            table.version = buildinfo::version(&**image, &file);
        }
        Ok(Some(table))
    }

    /// A table from its bytes; `text` is the `.text` section's address, when known
    /// (Go 1.18 on count function entries from it).
    pub fn parse(data: Vec<u8>, text: Option<u64>) -> Result<GoTable, GoTableError> {
        GoTable::with_bytes(TableBytes::Owned(data), text)
    }

    fn with_bytes(data: TableBytes, text: Option<u64>) -> Result<GoTable, GoTableError> {
        let layout = header::Layout::parse(Bytes { data: data.get() })?;
        // The header's own text start (Go 1.18, 1.19; later ones leave it 0).
        let text_start = match (layout.format >= GoFormat::Go118, layout.text_start, text) {
            (false, _, _) => 0,
            (true, stated, _) if stated != 0 => stated,
            (true, _, Some(text)) => text,
            (true, _, None) => return Err(GoTableError::NoTextStart),
        };
        Ok(GoTable {
            data,
            layout,
            text_start,
            inline: None,
            version: None,
        })
    }

    /// The table's format.
    pub fn format(&self) -> GoFormat {
        self.layout.format
    }

    /// The Go release that built the binary (`go1.19.8`), when it says.
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// Whether inlined functions are read (a Go 1.18+ table whose inline trees were
    /// found).
    pub fn reads_inlined(&self) -> bool {
        self.inline.is_some()
    }

    /// About the memory the table takes beside its module's image.
    pub fn approx_bytes(&self) -> usize {
        match &self.data {
            TableBytes::Owned(v) => v.capacity(),
            TableBytes::InImage(..) => 0,
        }
    }

    /// How many functions it names.
    pub fn functions(&self) -> u64 {
        self.layout.nfunc
    }

    fn bytes(&self) -> Bytes<'_> {
        Bytes {
            data: self.data.get(),
        }
    }

    /// The frame of the function at `pc`, from its `pcsp` table; `None` when no
    /// function covers `pc`, or its table does not reach it.
    pub fn frame_at(&self, pc: u64) -> Result<Option<GoFrameSize>, GoTableError> {
        let Some(f) = self.find(pc)? else {
            return Ok(None);
        };
        let Some(sp_delta) = self.pc_value(self.field(&f, 4)?, f.entry, pc)? else {
            return Ok(None);
        };
        let (outermost, switches_stack) = self.conventions(&f)?;
        Ok(Some(GoFrameSize {
            sp_delta,
            outermost,
            switches_stack,
        }))
    }

    /// Whether the function at `pc` is outermost and whether it switches stacks (see
    /// [`GoFrameSize`]); None when no function covers `pc`.
    pub fn conventions_at(&self, pc: u64) -> Result<Option<(bool, bool)>, GoTableError> {
        match self.find(pc)? {
            Some(f) => self.conventions(&f).map(Some),
            None => Ok(None),
        }
    }

    /// Function `f`'s flags (Go 1.17 on: after its `cuOffset`, and its `startLine`
    /// from Go 1.20, its `funcID` then its `flag` byte), and its name's.
    fn conventions(&self, f: &Func) -> Result<(bool, bool), GoTableError> {
        let flag = match self.layout.format {
            GoFormat::Go12 => 0,
            GoFormat::Go116 | GoFormat::Go118 => self.flag_byte(f, 8)?,
            GoFormat::Go120 => self.flag_byte(f, 9)?,
        };
        let name = self.name(self.field(f, 1)?)?;
        let name = name.strip_suffix(".abi0").unwrap_or(&name);
        Ok((
            flag & FLAG_TOPFRAME != 0 || TOPFRAME.contains(&name),
            flag & FLAG_SPWRITE != 0 || SWITCHES.contains(&name),
        ))
    }

    /// The `flag` byte after the `_func` field `last` (counted as [`Self::field`]).
    fn flag_byte(&self, f: &Func, last: u64) -> Result<u8, GoTableError> {
        let first = if self.layout.format >= GoFormat::Go118 {
            4
        } else {
            u64::from(self.layout.ptr_size)
        };
        self.bytes()
            .u8(f.off.saturating_add(first + last * 4 + 1), "func flag")
    }

    /// The frames at `pc`, innermost first: the functions inlined there, then the
    /// function whose code it is; empty when no function covers `pc`. An inline tree
    /// that cannot be read leaves the function's own frame alone.
    pub fn frames(&self, pc: u64) -> Result<Vec<GoFrame>, GoTableError> {
        let Some(f) = self.find(pc)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        let outer_pc = match self.inlined(&f, pc, &mut out) {
            Ok(at) => at,
            Err(_) => {
                out.clear();
                pc
            }
        };
        let (file, line) = self.position(&f, outer_pc)?;
        out.push(GoFrame {
            function: self.name(self.field(&f, 1)?)?,
            file,
            line,
            inlined: false,
        });
        Ok(out)
    }

    /// Pushes the inlined frames at `pc` onto `out`; returns the pc of the call site in
    /// the function itself (`pc` when nothing is inlined there).
    fn inlined(&self, f: &Func, pc: u64, out: &mut Vec<GoFrame>) -> Result<u64, GoTableError> {
        let Some(trees) = &self.inline else {
            return Ok(pc);
        };
        let t = self.bytes();
        let fixed = self.layout.func_fixed_size();
        let npcdata = u64::from(self.field(f, 7)?);
        let nfuncdata = t.u8(f.off + fixed - 1, "func")?;
        if npcdata <= inline::PCDATA_INL_TREE_INDEX || nfuncdata <= inline::FUNCDATA_INL_TREE {
            return Ok(pc);
        }
        let index_table = t.u32(f.off + fixed + 4 * inline::PCDATA_INL_TREE_INDEX, "pcdata")?;
        let tree = t.u32(
            f.off + fixed + 4 * npcdata + 4 * u64::from(inline::FUNCDATA_INL_TREE),
            "funcdata",
        )?;
        if index_table == 0 || tree == u32::MAX {
            return Ok(pc);
        }
        let mut at = pc;
        for _ in 0..MAX_INLINE_DEPTH {
            let Some(ix) = self.pc_value(index_table, f.entry, at)?.filter(|&i| i >= 0) else {
                return Ok(at);
            };
            let call = trees.call(tree, ix, self.layout.format)?;
            let (file, line) = self.position(f, at)?;
            out.push(GoFrame {
                function: self.name(call.name_off)?,
                file,
                line,
                inlined: true,
            });
            let parent = u64::try_from(call.parent_pc)
                .ok()
                .and_then(|p| f.entry.checked_add(p))
                .filter(|&p| p < f.end && p != at)
                .ok_or(GoTableError::InlineTree(tree.into()))?;
            at = parent;
        }
        Err(GoTableError::InlineTooDeep(pc))
    }

    /// The function covering `pc`, by binary search of the function table.
    fn find(&self, pc: u64) -> Result<Option<Func>, GoTableError> {
        let n = self.layout.nfunc;
        if n == 0 || pc < self.entry(0)? || pc >= self.entry(n)? {
            return Ok(None);
        }
        let (mut lo, mut hi) = (0, n);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.entry(mid)? <= pc {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let sz = self.layout.functab_field();
        let func_off = self.bytes().word(
            self.layout.functab + (2 * lo + 1) * sz,
            sz as u8,
            "function table",
        )?;
        Ok(Some(Func {
            off: self.layout.funcdata.saturating_add(func_off),
            entry: self.entry(lo)?,
            end: self.entry(lo + 1)?,
        }))
    }

    /// The entry pc of function `i` (`i == nfunc`: the end of the last).
    fn entry(&self, i: u64) -> Result<u64, GoTableError> {
        let sz = self.layout.functab_field();
        let v = self
            .bytes()
            .word(self.layout.functab + 2 * i * sz, sz as u8, "function table")?;
        Ok(if self.layout.format >= GoFormat::Go118 {
            self.text_start.wrapping_add(v)
        } else {
            v
        })
    }

    /// The `n`th 32-bit field of a `_func` (1: name, 5: pcfile, 6: pcln, 7: npcdata,
    /// 8: CU offset), after its entry (a pointer before Go 1.18, 32 bits since).
    fn field(&self, f: &Func, n: u64) -> Result<u32, GoTableError> {
        let first = if self.layout.format >= GoFormat::Go118 {
            4
        } else {
            u64::from(self.layout.ptr_size)
        };
        self.bytes()
            .u32(f.off.saturating_add(first + (n - 1) * 4), "func")
    }

    fn name(&self, name_off: u32) -> Result<String, GoTableError> {
        self.bytes().cstr(
            self.layout.funcnametab.saturating_add(name_off.into()),
            "function name",
        )
    }

    /// The value at `pc` of the pc-value table at `table` (from the pc tables' start).
    fn pc_value(&self, table: u32, entry: u64, pc: u64) -> Result<Option<i32>, GoTableError> {
        if table == 0 {
            return Ok(None);
        }
        let at = self.layout.pctab.saturating_add(table.into());
        self.bytes().pc_value(at, entry, pc, self.layout.quantum)
    }

    /// The file and line of `pc` in function `f`.
    fn position(&self, f: &Func, pc: u64) -> Result<(Option<String>, Option<u32>), GoTableError> {
        let line = self
            .pc_value(self.field(f, 6)?, f.entry, pc)?
            .and_then(|l| u32::try_from(l).ok())
            .filter(|&l| l > 0);
        let Some(fileno) = self.pc_value(self.field(f, 5)?, f.entry, pc)? else {
            return Ok((None, line));
        };
        let t = self.bytes();
        let l = &self.layout;
        let file = if l.format == GoFormat::Go12 {
            // Indexes into a table of offsets from the start, 0 meaning none.
            let Some(i) = u64::try_from(fileno).ok().filter(|&i| i > 0) else {
                return Ok((None, line));
            };
            let off = t.u32(l.filetab.saturating_add(4 * i), "file table")?;
            t.cstr(off.into(), "file name")?
        } else {
            let Ok(i) = u64::try_from(fileno) else {
                return Ok((None, line));
            };
            let cu = u64::from(self.field(f, 8)?);
            let off = t.u32(l.cutab.saturating_add(4 * (cu + i)), "CU table")?;
            if off == u32::MAX {
                return Ok((None, line));
            }
            t.cstr(l.filetab.saturating_add(off.into()), "file name")?
        };
        Ok((Some(file), line))
    }
}
