//! Function names, inline chains and file:line from DWARF, through the addr2line crate.
//! The sections addr2line reads are loaded once per module (decompressed when
//! `SHF_COMPRESSED`, borrowed from the mapping otherwise); the [`addr2line::Context`]
//! built on them parses units, functions and line tables lazily, only for the units the
//! looked-up addresses fall in. Names are made readable here: demangled, and for
//! legacy-mangled Rust symbols completed with the generic arguments of `DW_AT_name`;
//! `DW_AT_name` also stands in for a C++ linkage name the demangler cannot read.
//!
//! A module read by the recorder left its DWARF on disk: only the sections used are
//! read then, each straight from the open file into the buffer that holds it while
//! it is used ([`DwarfSections::read`], [`read_shared`]), not the whole file's
//! debug sections into one image and then again into copies.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use gimli::{EndianSlice, Endianity, RunTimeEndian, SectionId};
use object::{Object, ObjectSection};

use crate::elf::Image;

use super::demangle::{demangle, is_legacy_rust_symbol, with_rust_generics};

type Slice<'a> = EndianSlice<'a, RunTimeEndian>;
/// A reader over sections the context owns (kept between windows).
pub(super) type ArcSlice = gimli::EndianArcSlice<RunTimeEndian>;

/// The DWARF sections addr2line uses; the others (locations, macros, types) stay empty.
const USED: [SectionId; 10] = [
    SectionId::DebugAbbrev,
    SectionId::DebugAddr,
    SectionId::DebugAranges,
    SectionId::DebugInfo,
    SectionId::DebugLine,
    SectionId::DebugLineStr,
    SectionId::DebugStr,
    SectionId::DebugStrOffsets,
    SectionId::DebugRanges,
    SectionId::DebugRngLists,
];

/// The raw bytes of the DWARF sections of one ELF file.
pub(super) struct DwarfSections<'a> {
    endian: RunTimeEndian,
    sections: Vec<(SectionId, Cow<'a, [u8]>)>,
    /// Units blanked because no looked-up address falls in them.
    pub units_skipped: usize,
}

/// Where one used section's bytes are: in the file at `offset` (read as they are),
/// or inflated already (a compressed section).
enum SectionBytes {
    Plain { offset: u64, len: usize },
    Inflated(Vec<u8>),
}

/// Where section `id` of `file` is in `image` (compressed ones read and inflated
/// now); None when the file has none, or its header points outside the file or
/// claims a size no real section inflates to. Only the section headers of `image`
/// are read here: its DWARF may be on disk, so a compressed section's own header
/// (its inflated size) is read from the file with its bytes.
fn locate(file: &object::File<'_>, image: &Image, id: SectionId) -> Option<SectionBytes> {
    let section = file.section_by_name(id.name())?;
    let (offset, size) = section.file_range()?;
    if offset.checked_add(size)? > (**image).as_ref().len() as u64 {
        return None;
    }
    let len = usize::try_from(size).ok()?;
    let elf_compressed = matches!(
        section.flags(),
        object::SectionFlags::Elf { sh_flags, .. } if sh_flags.0 & object::elf::SHF_COMPRESSED.0 != 0
    );
    let gnu_compressed = section.name().is_ok_and(|n| n.starts_with(".zdebug_"));
    if !elf_compressed && !gnu_compressed {
        return Some(SectionBytes::Plain { offset, len });
    }
    let mut raw = vec![0u8; len];
    if !image.read_at(offset, &mut raw) {
        return None;
    }
    let (format, uncompressed_size, data) = if elf_compressed {
        // Elf64_Chdr: type, reserved, size, alignment.
        let endian = endian_of(file);
        let u32_at = |at: usize| Some(endian.read_u32(raw.get(at..at + 4)?));
        let u64_at = |at: usize| Some(endian.read_u64(raw.get(at..at + 8)?));
        let format = match object::elf::CompressionType(u32_at(0)?) {
            object::elf::ELFCOMPRESS_ZLIB => object::CompressionFormat::Zlib,
            object::elf::ELFCOMPRESS_ZSTD => object::CompressionFormat::Zstandard,
            _ => return None,
        };
        (format, u64_at(8)?, raw.get(24..)?)
    } else {
        // "ZLIB" and the inflated size, big-endian.
        let size = raw.get(4..12)?;
        if raw.get(..4)? != b"ZLIB" {
            return None;
        }
        let size = RunTimeEndian::Big.read_u64(size);
        (object::CompressionFormat::Zlib, size, raw.get(12..)?)
    };
    crate::elf::inflated_size_ok(data.len() as u64, uncompressed_size).ok()?;
    let inflated = object::CompressedData {
        format,
        data,
        uncompressed_size,
    };
    Some(SectionBytes::Inflated(
        inflated.decompress().ok()?.into_owned(),
    ))
}

fn endian_of(file: &object::File<'_>) -> RunTimeEndian {
    if file.is_little_endian() {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    }
}

/// The used DWARF sections of `file`, read through `image` (from the open file for a
/// module whose DWARF was left on disk), each straight into a buffer shared by every
/// reader of the context, for as long as it is kept: no copy of them is made. With
/// the bytes read; None without a `.debug_info`.
pub(super) fn read_shared(
    file: &object::File<'_>,
    image: &Image,
) -> Option<(Dwarf<ArcSlice>, usize)> {
    let mut owned: Vec<(SectionId, Arc<[u8]>)> = Vec::new();
    for id in USED {
        let Some(found) = locate(file, image, id) else {
            continue;
        };
        let bytes: Arc<[u8]> = match found {
            SectionBytes::Plain { offset, len } => {
                let mut buf: Arc<[u8]> = std::iter::repeat_n(0u8, len).collect();
                let Some(dst) = Arc::get_mut(&mut buf) else {
                    continue;
                };
                if !image.read_at(offset, dst) {
                    continue;
                }
                buf
            }
            // Inflated into a vector: moved into the shared buffer by one copy.
            SectionBytes::Inflated(v) => Arc::from(v),
        };
        owned.push((id, bytes));
    }
    let info = owned.iter().find(|(id, _)| *id == SectionId::DebugInfo);
    if info.is_none_or(|(_, d)| d.is_empty()) {
        return None;
    }
    let bytes = owned.iter().map(|(_, d)| d.len()).sum();
    let dwarf = context_over(owned, endian_of(file)).ok()?;
    Some((dwarf, bytes))
}

/// An addr2line context over sections it shares.
fn context_over(
    owned: Vec<(SectionId, Arc<[u8]>)>,
    endian: RunTimeEndian,
) -> Result<Dwarf<ArcSlice>, gimli::Error> {
    let empty: Arc<[u8]> = Arc::from(&[][..]);
    let dwarf = gimli::Dwarf::load(|id| -> Result<ArcSlice, gimli::Error> {
        let data = owned
            .iter()
            .find(|(sid, _)| *sid == id)
            .map_or(&empty, |(_, d)| d);
        Ok(gimli::EndianArcSlice::new(Arc::clone(data), endian))
    })?;
    Ok(Dwarf {
        ctx: addr2line::Context::from_dwarf(dwarf)?,
        names: HashMap::new(),
    })
}

impl DwarfSections<'static> {
    /// [`DwarfSections::load`] for a file whose DWARF `image` left on disk: the used
    /// sections are read from the open file, each into a buffer of its own, so the
    /// units holding none of `svmas` can be blanked (as in an inflated one).
    pub(super) fn read(
        file: &object::File<'_>,
        image: &Image,
        svmas: &[u64],
    ) -> Option<DwarfSections<'static>> {
        let mut sections: Vec<(SectionId, Cow<'static, [u8]>)> = Vec::new();
        let endian = endian_of(file);
        for id in USED {
            let bytes = match locate(file, image, id) {
                Some(SectionBytes::Plain { offset, len }) if id == SectionId::DebugInfo => {
                    let got = |id| sections.iter().find(|s| s.0 == id).map(|s| &s.1[..]);
                    let read = |at: usize, buf: &mut [u8]| image.read_at(offset + at as u64, buf);
                    let (abbrev, aranges) =
                        (got(SectionId::DebugAbbrev), got(SectionId::DebugAranges));
                    let Some(info) =
                        super::unit_filter::read_needed(len, read, abbrev, aranges, endian, svmas)
                    else {
                        continue;
                    };
                    info
                }
                Some(SectionBytes::Plain { offset, len }) => {
                    let mut buf = vec![0u8; len];
                    if !image.read_at(offset, &mut buf) {
                        continue;
                    }
                    buf
                }
                Some(SectionBytes::Inflated(v)) => v,
                None => continue,
            };
            sections.push((id, Cow::Owned(bytes)));
        }
        let mut this = DwarfSections {
            endian,
            sections,
            units_skipped: 0,
        };
        this.blank_unused_units(svmas);
        this.section(SectionId::DebugInfo)
            .is_some_and(|d| !d.is_empty())
            .then_some(this)
    }
}

impl<'a> DwarfSections<'a> {
    /// Reads the sections; `None` when the file has no `.debug_info`. `svmas` are the
    /// addresses that will be looked up: when `.debug_info` had to be decompressed
    /// anyway, the units holding none of them are blanked in the copy (see
    /// [`super::unit_filter`]) so that the context does not parse them.
    pub(super) fn load(file: &object::File<'a>, svmas: &[u64]) -> Option<DwarfSections<'a>> {
        let endian = endian_of(file);
        let mut sections = Vec::new();
        for id in USED {
            // object maps `.debug_x` to `.zdebug_x` too, and decompresses either form.
            let Some(section) = file.section_by_name(id.name()) else {
                continue;
            };
            if crate::elf::check_inflated_size(&section).is_err() {
                continue;
            }
            let Ok(data) = section.uncompressed_data() else {
                continue;
            };
            sections.push((id, data));
        }
        let mut this = DwarfSections {
            endian,
            sections,
            units_skipped: 0,
        };
        this.blank_unused_units(svmas);
        this.section(SectionId::DebugInfo)
            .is_some_and(|d| !d.is_empty())
            .then_some(this)
    }

    /// The bytes the sections say they hold (compressed ones: once inflated), before
    /// reading them.
    pub(super) fn stated_bytes(file: &object::File<'_>) -> usize {
        USED.iter()
            .filter_map(|id| file.section_by_name(id.name()))
            .map(|s| {
                s.compressed_file_range()
                    .map_or(s.size(), |r| r.uncompressed_size) as usize
            })
            .fold(0, usize::saturating_add)
    }

    fn section(&self, id: SectionId) -> Option<&[u8]> {
        self.sections
            .iter()
            .find(|(sid, _)| *sid == id)
            .map(|(_, d)| &d[..])
    }

    fn blank_unused_units(&mut self, svmas: &[u64]) {
        let Some(pos) = self
            .sections
            .iter()
            .position(|(id, d)| *id == SectionId::DebugInfo && matches!(d, Cow::Owned(_)))
        else {
            return; // borrowed from the mapping: copying it would cost more than it saves
        };
        let mut info = std::mem::take(&mut self.sections[pos].1);
        if let (Cow::Owned(info), Some(abbrev), Some(aranges)) = (
            &mut info,
            self.section(SectionId::DebugAbbrev),
            self.section(SectionId::DebugAranges),
        ) {
            self.units_skipped =
                super::unit_filter::keep_only_units_for(info, abbrev, aranges, self.endian, svmas);
        }
        self.sections[pos].1 = info;
    }

    /// The lazily parsing addr2line context over these sections.
    pub(super) fn context(&self) -> Result<Dwarf<Slice<'_>>, gimli::Error> {
        let dwarf = gimli::Dwarf::load(|id| -> Result<Slice<'_>, gimli::Error> {
            Ok(EndianSlice::new(
                self.section(id).unwrap_or(&[]),
                self.endian,
            ))
        })?;
        Ok(Dwarf {
            ctx: addr2line::Context::from_dwarf(dwarf)?,
            names: HashMap::new(),
        })
    }
}

/// One frame as DWARF describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DwarfFrame {
    /// Readable name; `None` when DWARF knows the line but not the function.
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
}

/// An addr2line context plus a cache of readable names keyed by where their raw
/// bytes are (the sections stay put while the context lives) and their length.
pub(crate) struct Dwarf<R: gimli::Reader<Offset = usize>> {
    ctx: addr2line::Context<R>,
    names: HashMap<(u64, usize), String>,
}

impl<R: gimli::Reader<Offset = usize>> Dwarf<R> {
    /// The frames at `svma`, innermost first; empty when DWARF does not cover it.
    /// Errors in the DWARF end the list early rather than fail.
    pub(crate) fn frames(&mut self, svma: u64) -> Vec<DwarfFrame> {
        let mut out = Vec::new();
        let mut raw = Vec::new();
        {
            let Ok(mut iter) = self.ctx.find_frames(svma).skip_all_loads() else {
                return out;
            };
            while let Ok(Some(frame)) = iter.next() {
                let name = frame.function.map(|f| (f.name, f.language));
                raw.push((name, frame.dw_die_offset));
                out.push(DwarfFrame {
                    function: None,
                    file: frame
                        .location
                        .as_ref()
                        .and_then(|l| l.file.map(str::to_owned)),
                    line: frame.location.as_ref().and_then(|l| l.line),
                });
                if out.len() > 256 {
                    break; // a cycle in broken DWARF
                }
            }
        }
        for ((name, die), frame) in raw.into_iter().zip(out.iter_mut()) {
            if let Some((bytes, lang)) = name {
                frame.function = Some(self.readable(svma, bytes, lang, die));
            }
        }
        out
    }

    fn readable(
        &mut self,
        svma: u64,
        raw: R,
        lang: Option<gimli::DwLang>,
        die: Option<gimli::UnitOffset>,
    ) -> String {
        let key = (raw.offset_id().0, raw.len());
        if let Some(name) = self.names.get(&key) {
            return name.clone();
        }
        let Ok(text) = raw.to_string_lossy() else {
            return String::new();
        };
        let mut name = demangle(&text);
        let rust = lang == Some(gimli::DW_LANG_Rust) || lang.is_none();
        if rust && is_legacy_rust_symbol(&text) {
            if let Some(dw_name) = die.and_then(|die| self.dw_at_name(svma, die)) {
                name = with_rust_generics(name, &dw_name);
            }
        } else if name.starts_with("_Z") && name == text {
            // The demangler gave up: the DIE's own name (`__fill_a1<int*, int>`) reads
            // better than the mangled one, though it lacks the scope.
            if let Some(dw_name) = die.and_then(|die| self.dw_at_name(svma, die)) {
                name = dw_name;
            }
        }
        self.names.insert(key, name.clone());
        name
    }

    /// `DW_AT_name` of the DIE at `die` in the unit holding `svma`, following
    /// `DW_AT_abstract_origin` and `DW_AT_specification` within that unit.
    fn dw_at_name(&self, svma: u64, die: gimli::UnitOffset) -> Option<String> {
        let unit = self.ctx.find_dwarf_and_unit(svma).skip_all_loads()?;
        let mut offset = die;
        for _ in 0..4 {
            let entry = unit.entry(offset).ok()?;
            if let Some(value) = entry.attr_value(gimli::DW_AT_name) {
                let name = unit.attr_string(value).ok()?;
                return name.to_string_lossy().ok().map(|n| n.into_owned());
            }
            let next = entry
                .attr_value(gimli::DW_AT_abstract_origin)
                .or_else(|| entry.attr_value(gimli::DW_AT_specification))?;
            match next {
                gimli::AttributeValue::UnitRef(o) => offset = o,
                _ => return None,
            }
        }
        None
    }
}
