//! The unwind tables of one ELF image ([`ModuleCfi`]) and the lookup that turns an SVMA
//! into a compact, cacheable [`UnwindRule`].
//!
//! A module is parsed once: the section ranges of `.eh_frame_hdr`, `.eh_frame` and
//! `.debug_frame` are located, and where there is no binary-search table (`.debug_frame`
//! never has one, `.eh_frame` without `.eh_frame_hdr` may lack it) an index of FDE
//! address ranges is built. Lookups then re-borrow the image's bytes, so the struct
//! holds no self-references and is `Send + Sync`.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use gimli::{
    BaseAddresses, CfaRule as GimliCfa, DebugFrame, EhFrame, EhFrameHdr, EndianSlice, LittleEndian,
    Register, RegisterRule as GimliRule, UnwindContext, UnwindSection,
};
use object::{Object, ObjectSection};

use crate::elf::Image;

type Slice<'a> = EndianSlice<'a, LittleEndian>;

/// Why a module's CFI could not be loaded. The module is then used without tables.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CfiLoadError {
    #[error("not an ELF file the object crate can read: {0}")]
    /// The object crate could not parse the file.
    Elf(String),
    #[error("section {name} lies outside the file (offset {offset:#x}, size {size:#x})")]
    /// A section's range lies past the end of the file.
    SectionOutOfFile {
        /// The section.
        name: &'static str,
        /// Its file offset.
        offset: u64,
        /// Its size.
        size: u64,
    },
    #[error("cannot decompress {name}: {reason}")]
    /// A compressed section did not decompress.
    Decompress {
        /// The section.
        name: &'static str,
        /// Why.
        reason: String,
    },
    #[error("malformed {name}: {source}")]
    /// gimli could not parse a section.
    Malformed {
        /// The section.
        name: &'static str,
        /// Why.
        source: gimli::Error,
    },
}

/// Which CFI section an expression or FDE lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SectionKind {
    EhFrame,
    DebugFrame,
}

/// A DWARF expression inside one of the module's CFI sections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExprRef {
    pub section: SectionKind,
    pub offset: u32,
    pub len: u32,
}

/// How to compute the canonical frame address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CfaRule {
    RegOffset { reg: u16, offset: i64 },
    Expr(ExprRef),
}

/// How to recover one register of the caller. `Default` is "no rule in the row".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RegRule {
    Default,
    Undefined,
    SameValue,
    Offset(i64),
    ValOffset(i64),
    Register(u16),
    Expr(ExprRef),
    ValExpr(ExprRef),
    Unsupported,
}

/// The part of one unwind-table row that the unwinder needs: the CFA, the return
/// address, rsp and rbp, and whether the FDE is a signal trampoline ('S').
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UnwindRule {
    pub cfa: CfaRule,
    pub ra: RegRule,
    pub sp: RegRule,
    pub bp: RegRule,
    pub signal_frame: bool,
}

/// What a lookup of one SVMA found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RuleLookup {
    Found(UnwindRule),
    /// The module has no FDE for this address.
    NoFde,
    /// The FDE or its instructions could not be parsed.
    Bad,
    /// A Go function that moves the stack pointer to another stack (see
    /// [`crate::elf::gopclntab::GoFrameSize::switches_stack`]): its caller cannot be
    /// found from this stack.
    StackSwitch,
}

/// Bytes of a section: a range of the image, or decompressed bytes owned here.
#[derive(Debug)]
enum SectionBytes {
    InImage(Range<usize>),
    Owned(Vec<u8>),
}

#[derive(Debug)]
struct Section {
    bytes: SectionBytes,
    svma: u64,
}

/// FDE address ranges sorted by start, for sections without a search table.
#[derive(Debug, Default)]
struct FdeIndex {
    /// (start svma, end svma, offset of the FDE in the section)
    entries: Vec<(u64, u64, usize)>,
}

impl FdeIndex {
    fn find(&self, svma: u64) -> Option<usize> {
        let i = self.entries.partition_point(|e| e.0 <= svma);
        let (start, end, offset) = *self.entries.get(i.checked_sub(1)?)?;
        (start <= svma && svma < end).then_some(offset)
    }
}

static NEXT_MODULE_ID: AtomicU64 = AtomicU64::new(1);

/// Parsed unwind tables of one ELF image; shared between threads through an `Arc`.
pub struct ModuleCfi {
    image: Image,
    id: u64,
    bases: BaseAddresses,
    eh_frame: Option<Section>,
    /// Whether `.eh_frame_hdr` has a usable binary-search table.
    eh_frame_hdr: Option<Section>,
    /// Index of `.eh_frame` FDEs, built only when there is no search table.
    eh_frame_index: Option<FdeIndex>,
    debug_frame: Option<(Section, FdeIndex)>,
    /// A Go module's own table, for a module without CFI: its `pcsp` tables give
    /// each frame's size (see [`super::go::go_rule`]).
    go: Option<crate::elf::gopclntab::GoTable>,
    load_error: Option<CfiLoadError>,
    /// Executable segments, to read code bytes (see [`ModuleCfi::code_before`]).
    code: Vec<crate::elf::Segment>,
}

impl std::fmt::Debug for ModuleCfi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModuleCfi")
            .field("id", &self.id)
            .field("eh_frame", &self.eh_frame.is_some())
            .field("eh_frame_hdr", &self.eh_frame_hdr.is_some())
            .field("debug_frame", &self.debug_frame.is_some())
            .field("load_error", &self.load_error)
            .finish()
    }
}

impl ModuleCfi {
    /// Parses the unwind tables of `image`. Never fails on a broken file: a module whose
    /// CFI cannot be read yields a `ModuleCfi` with no tables (frame pointers are then
    /// used for its frames), and [`ModuleCfi::load_error`] says why.
    pub fn new(image: Image) -> ModuleCfi {
        let mut cfi = ModuleCfi::without_tables(image);
        if let Err(e) = cfi.load() {
            cfi.eh_frame = None;
            cfi.eh_frame_hdr = None;
            cfi.eh_frame_index = None;
            cfi.debug_frame = None;
            cfi.load_error = Some(e);
        }
        cfi
    }

    /// A module whose frames are always unwound with frame pointers (its CFI is ignored).
    pub fn without_tables(image: Image) -> ModuleCfi {
        let code = crate::elf::ElfInfo::parse((*image).as_ref())
            .map(|i| i.segments.into_iter().filter(|s| s.executable).collect())
            .unwrap_or_default();
        ModuleCfi {
            code,
            image,
            id: NEXT_MODULE_ID.fetch_add(1, Ordering::Relaxed),
            bases: BaseAddresses::default(),
            eh_frame: None,
            eh_frame_hdr: None,
            eh_frame_index: None,
            debug_frame: None,
            go: None,
            load_error: None,
        }
    }

    /// Whether the module has any CFI tables.
    pub fn has_cfi(&self) -> bool {
        self.eh_frame.is_some() || self.debug_frame.is_some() || self.go.is_some()
    }

    /// Why the module's tables could not be loaded, if they could not.
    pub fn load_error(&self) -> Option<&CfiLoadError> {
        self.load_error.as_ref()
    }

    /// The `N` bytes of code that end just before `svma`, when one executable segment
    /// of the file holds all of them (read from the file: code is not kept in memory).
    pub fn code_before<const N: usize>(&self, svma: u64) -> Option<[u8; N]> {
        let n = N as u64;
        let start = svma.checked_sub(n)?;
        let seg = self.code.iter().find(|s| {
            start >= s.svma
                && s.svma
                    .checked_add(s.file_size)
                    .is_some_and(|end| svma <= end)
        })?;
        let off = seg.file_offset.checked_add(start - seg.svma)?;
        let mut buf = [0u8; N];
        self.image.read_at(off, &mut buf).then_some(buf)
    }

    /// The heap bytes these tables hold beside their image's: decompressed sections
    /// and FDE indexes (each entry 24 bytes), counted by capacity.
    pub fn heap_bytes(&self) -> usize {
        let section = |s: &Section| match &s.bytes {
            SectionBytes::InImage(_) => 0,
            SectionBytes::Owned(v) => v.capacity(),
        };
        let index = |i: &FdeIndex| i.entries.capacity() * std::mem::size_of::<(u64, u64, usize)>();
        self.eh_frame.as_ref().map_or(0, section)
            + self.eh_frame_hdr.as_ref().map_or(0, section)
            + self.eh_frame_index.as_ref().map_or(0, index)
            + self
                .debug_frame
                .as_ref()
                .map_or(0, |(s, i)| section(s) + index(i))
            + self.code.capacity() * std::mem::size_of::<crate::elf::Segment>()
            + self
                .go
                .as_ref()
                .map_or(0, crate::elf::gopclntab::GoTable::approx_bytes)
    }

    /// The image this module was parsed from.
    pub fn image(&self) -> &Image {
        &self.image
    }

    /// The address ranges of the functions the unwind tables describe (one per FDE of
    /// `.eh_frame` and `.debug_frame`), sorted by start: where a stripped module's
    /// functions begin and end, though no symbol names them.
    pub fn function_ranges(&self) -> Vec<(u64, u64)> {
        let mut ranges = Vec::new();
        if let Some(eh) = &self.eh_frame {
            let index = match &self.eh_frame_index {
                Some(index) => Ok(index.entries.clone()),
                None => build_index(&self.eh_frame_section(eh), &self.bases, ".eh_frame")
                    .map(|i| i.entries),
            };
            ranges.extend(index.unwrap_or_default().iter().map(|e| (e.0, e.1)));
        }
        if let Some((_, index)) = &self.debug_frame {
            ranges.extend(index.entries.iter().map(|e| (e.0, e.1)));
        }
        ranges.sort_unstable();
        ranges.dedup();
        ranges
    }

    /// A process-unique identity, used as part of the rule-cache key.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    fn load(&mut self) -> Result<(), CfiLoadError> {
        let image = self.image.clone();
        let data: &[u8] = (*image).as_ref();
        let file = object::File::parse(data).map_err(|e| CfiLoadError::Elf(e.to_string()))?;
        let find = |name: &'static str| -> Result<Option<Section>, CfiLoadError> {
            let Some(section) = file.section_by_name(name) else {
                return Ok(None);
            };
            let compressed = section
                .compressed_file_range()
                .map_err(|e| CfiLoadError::Elf(e.to_string()))?;
            let bytes = if compressed.format == object::CompressionFormat::None {
                let (offset, size) = section.file_range().unwrap_or((0, 0));
                let out_of_file = || CfiLoadError::SectionOutOfFile { name, offset, size };
                let start = usize::try_from(offset).map_err(|_| out_of_file())?;
                let end =
                    usize::try_from(offset.saturating_add(size)).map_err(|_| out_of_file())?;
                if end > data.len() {
                    return Err(out_of_file());
                }
                SectionBytes::InImage(start..end)
            } else {
                let decompress = |reason: String| CfiLoadError::Decompress { name, reason };
                crate::elf::check_inflated_size(&section).map_err(|e| decompress(e.to_string()))?;
                let owned = section
                    .uncompressed_data()
                    .map_err(|e| decompress(e.to_string()))?;
                SectionBytes::Owned(owned.into_owned())
            };
            Ok(Some(Section {
                bytes,
                svma: section.address(),
            }))
        };
        let eh_frame = find(".eh_frame")?.filter(|s| !self.bytes_of(&s.bytes).is_empty());
        let eh_frame_hdr = find(".eh_frame_hdr")?;
        let debug_frame = find(".debug_frame")?.filter(|s| !self.bytes_of(&s.bytes).is_empty());
        let mut bases = BaseAddresses::default();
        if let Some(s) = file.section_by_name(".text") {
            bases = bases.set_text(s.address());
        }
        if let Some(s) = file.section_by_name(".got") {
            bases = bases.set_got(s.address());
        }
        if let Some(s) = &eh_frame {
            bases = bases.set_eh_frame(s.svma);
        }
        if let Some(s) = &eh_frame_hdr {
            bases = bases.set_eh_frame_hdr(s.svma);
        }
        self.bases = bases;

        if let Some(eh) = &eh_frame {
            let hdr_ok = eh_frame_hdr.as_ref().is_some_and(|hdr| {
                EhFrameHdr::new(self.bytes_of(&hdr.bytes), LittleEndian)
                    .parse(&self.bases, 8)
                    .is_ok_and(|parsed| {
                        parsed.table().is_some()
                            && parsed.eh_frame_ptr().direct().ok() == Some(eh.svma)
                    })
            });
            if hdr_ok {
                self.eh_frame_hdr = eh_frame_hdr;
            } else {
                let section = self.eh_frame_section(eh);
                self.eh_frame_index = Some(build_index(&section, &self.bases, ".eh_frame")?);
            }
        }
        self.eh_frame = eh_frame;
        if let Some(df) = debug_frame {
            let section = self.debug_frame_section(&df);
            let index = build_index(&section, &self.bases, ".debug_frame")?;
            self.debug_frame = Some((df, index));
        }
        // A Go module's own table: its frame sizes where it has no CFI (stripped as
        // Go binaries ship), and Go's conventions either way (the functions that
        // switch stacks, the roots). A table that cannot be read leaves the module
        // to its CFI or frame pointers.
        self.go = crate::elf::gopclntab::GoTable::frames_only(&image)
            .ok()
            .flatten();
        Ok(())
    }

    fn bytes_of<'a>(&'a self, bytes: &'a SectionBytes) -> &'a [u8] {
        match bytes {
            SectionBytes::InImage(range) => {
                let data: &[u8] = (*self.image).as_ref();
                data.get(range.clone()).unwrap_or(&[])
            }
            SectionBytes::Owned(v) => v,
        }
    }

    fn eh_frame_section<'a>(&'a self, s: &'a Section) -> EhFrame<Slice<'a>> {
        let mut section = EhFrame::new(self.bytes_of(&s.bytes), LittleEndian);
        section.set_address_size(8);
        section
    }

    fn debug_frame_section<'a>(&'a self, s: &'a Section) -> DebugFrame<Slice<'a>> {
        let mut section = DebugFrame::new(self.bytes_of(&s.bytes), LittleEndian);
        section.set_address_size(8);
        section
    }

    /// The bytes of a DWARF expression referenced by a cached rule.
    pub(crate) fn expression_bytes(&self, expr: ExprRef) -> Option<&[u8]> {
        let section = match expr.section {
            SectionKind::EhFrame => &self.eh_frame.as_ref()?.bytes,
            SectionKind::DebugFrame => &self.debug_frame.as_ref()?.0.bytes,
        };
        let start = expr.offset as usize;
        self.bytes_of(section)
            .get(start..start.checked_add(expr.len as usize)?)
    }

    /// Finds the FDE for `svma` through the binary-search table of `.eh_frame_hdr`.
    /// (gimli's own `fde_for_address` subtracts the table's pointer from the section
    /// address unchecked, which a corrupt table turns into an overflow panic.)
    fn fde_from_hdr<'a>(
        &'a self,
        hdr: &'a Section,
        section: &EhFrame<Slice<'a>>,
        svma: u64,
    ) -> gimli::Result<gimli::FrameDescriptionEntry<Slice<'a>>> {
        let parsed =
            EhFrameHdr::new(self.bytes_of(&hdr.bytes), LittleEndian).parse(&self.bases, 8)?;
        let table = parsed.table().ok_or(gimli::Error::NoUnwindInfoForAddress)?;
        let fde_svma = table.lookup(svma, &self.bases)?.direct()?;
        let eh_frame_svma = parsed.eh_frame_ptr().direct()?;
        let offset = fde_svma
            .checked_sub(eh_frame_svma)
            .and_then(|o| usize::try_from(o).ok())
            .ok_or(gimli::Error::NoUnwindInfoForAddress)?;
        let fde = section.fde_from_offset(
            &self.bases,
            gimli::EhFrameOffset(offset),
            EhFrame::cie_from_offset,
        )?;
        if fde.contains(svma) {
            Ok(fde)
        } else {
            Err(gimli::Error::NoUnwindInfoForAddress)
        }
    }

    /// Finds the unwind rule for `svma`: `.eh_frame` first, then `.debug_frame`.
    pub(crate) fn rule_for(&self, svma: u64, ctx: &mut UnwindContext<usize>) -> RuleLookup {
        let mut result = RuleLookup::NoFde;
        if let Some(eh) = &self.eh_frame {
            let section = self.eh_frame_section(eh);
            let fde = if let Some(hdr) = &self.eh_frame_hdr {
                self.fde_from_hdr(hdr, &section, svma)
            } else {
                match self.eh_frame_index.as_ref().and_then(|i| i.find(svma)) {
                    Some(offset) => section.fde_from_offset(
                        &self.bases,
                        gimli::EhFrameOffset(offset),
                        EhFrame::cie_from_offset,
                    ),
                    None => Err(gimli::Error::NoUnwindInfoForAddress),
                }
            };
            result = rule_from_fde(&section, &self.bases, ctx, fde, svma, SectionKind::EhFrame);
        }
        if result != RuleLookup::NoFde {
            return result;
        }
        if let Some((df, index)) = &self.debug_frame {
            let section = self.debug_frame_section(df);
            let fde = match index.find(svma) {
                Some(offset) => section.fde_from_offset(
                    &self.bases,
                    gimli::DebugFrameOffset(offset),
                    DebugFrame::cie_from_offset,
                ),
                None => Err(gimli::Error::NoUnwindInfoForAddress),
            };
            result = rule_from_fde(
                &section,
                &self.bases,
                ctx,
                fde,
                svma,
                SectionKind::DebugFrame,
            );
        }
        result
    }

    /// The module's Go table: the frames no CFI describes ([`super::go::go_rule`])
    /// and Go's conventions ([`super::go::go_convention`]).
    pub(crate) fn go(&self) -> Option<&crate::elf::gopclntab::GoTable> {
        self.go.as_ref()
    }
}

fn build_index<'a, S>(
    section: &S,
    bases: &BaseAddresses,
    name: &'static str,
) -> Result<FdeIndex, CfiLoadError>
where
    S: UnwindSection<Slice<'a>>,
    S::Offset: gimli::UnwindOffset<usize>,
{
    let malformed = |source| CfiLoadError::Malformed { name, source };
    let mut entries = Vec::new();
    let mut iter = section.entries(bases);
    loop {
        let entry = match iter.next() {
            Ok(Some(entry)) => entry,
            Ok(None) => break,
            // A broken entry ends the walk (its length cannot be trusted); the FDEs
            // before it are still good, so only a section with none is an error.
            Err(e) if entries.is_empty() => return Err(malformed(e)),
            Err(_) => break,
        };
        if let gimli::CieOrFde::Fde(partial) = entry {
            // An FDE whose CIE is broken is skipped, not fatal for the whole module.
            if let Ok(fde) = partial.parse(S::cie_from_offset) {
                let start = fde.initial_address();
                let end = start.saturating_add(fde.len());
                entries.push((start, end, fde.offset()));
            }
        }
    }
    entries.sort_unstable_by_key(|e| e.0);
    Ok(FdeIndex { entries })
}

fn rule_from_fde<'a, S>(
    section: &S,
    bases: &BaseAddresses,
    ctx: &mut UnwindContext<usize>,
    fde: gimli::Result<gimli::FrameDescriptionEntry<Slice<'a>>>,
    svma: u64,
    kind: SectionKind,
) -> RuleLookup
where
    S: UnwindSection<Slice<'a>>,
{
    let fde = match fde {
        Ok(fde) => fde,
        Err(gimli::Error::NoUnwindInfoForAddress) => return RuleLookup::NoFde,
        Err(_) => return RuleLookup::Bad,
    };
    let row = match fde.unwind_info_for_address(section, bases, ctx, svma) {
        Ok(row) => row,
        Err(gimli::Error::NoUnwindInfoForAddress) => return RuleLookup::NoFde,
        Err(_) => return RuleLookup::Bad,
    };
    let expr = |e: gimli::UnwindExpression<usize>| -> Option<ExprRef> {
        Some(ExprRef {
            section: kind,
            offset: u32::try_from(e.offset).ok()?,
            len: u32::try_from(e.length).ok()?,
        })
    };
    let cfa = match row.cfa() {
        GimliCfa::RegisterAndOffset { register, offset } => CfaRule::RegOffset {
            reg: register.0,
            offset: *offset,
        },
        GimliCfa::Expression(e) => match expr(*e) {
            Some(e) => CfaRule::Expr(e),
            None => return RuleLookup::Bad,
        },
    };
    let convert = |reg: Register| -> RegRule {
        match row.register(reg) {
            None => RegRule::Default,
            Some(GimliRule::Undefined) => RegRule::Undefined,
            Some(GimliRule::SameValue) => RegRule::SameValue,
            Some(GimliRule::Offset(n)) => RegRule::Offset(n),
            Some(GimliRule::ValOffset(n)) => RegRule::ValOffset(n),
            Some(GimliRule::Register(r)) => RegRule::Register(r.0),
            Some(GimliRule::Expression(e)) => expr(e).map_or(RegRule::Unsupported, RegRule::Expr),
            Some(GimliRule::ValExpression(e)) => {
                expr(e).map_or(RegRule::Unsupported, RegRule::ValExpr)
            }
            // Architectural rules and gimli's constant pseudo-registers do not occur
            // in x86_64 CFI.
            Some(_) => RegRule::Unsupported,
        }
    };
    RuleLookup::Found(UnwindRule {
        cfa,
        ra: convert(fde.cie().return_address_register()),
        sp: convert(gimli::X86_64::RSP),
        bp: convert(gimli::X86_64::RBP),
        signal_frame: fde.is_signal_trampoline(),
    })
}
