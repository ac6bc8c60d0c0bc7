//! What every later stage needs to know about one ELF file: its build-id, its loadable
//! segments, and how an address in a process that mapped it translates into the file's
//! own addresses.
//!
//! Vocabulary used across the crate (borrowed from framehop and samply):
//! - **AVMA**, actual virtual memory address: an address in the target process.
//! - **SVMA**, stated virtual memory address: the address the ELF file itself gives
//!   (symbol values, DWARF ranges, CFI). `svma = avma - bias`.
//! - **file offset**: a byte position in the file; `/proc/PID/maps` and MMAP2 records
//!   give the file offset at which each mapping starts.
//!
//! The bias is computed from the program headers, never assumed: the loadable segment
//! that contains the mapping's file offset says which SVMA that offset is loaded at.

use object::read::elf::{FileHeader, ProgramHeader};
use object::{Endianness, elf};

pub mod gopclntab;
mod image;
mod inflate;
#[cfg(test)]
mod tests;

#[cfg(test)]
pub(crate) use image::pages_touched;
pub use image::{
    Image, ImageData, MAX_FILE_SIZE, MAX_NAME, image_from_vec, read_module,
    read_module_leaving_names, read_module_within, read_name, read_open_file, read_whole,
};
pub use inflate::{InflateError, MAX_INFLATED_SECTION, check_inflated_size, inflated_size_ok};

/// A loadable (PT_LOAD) segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Where the segment's bytes start in the file.
    pub file_offset: u64,
    /// How many bytes of it the file holds.
    pub file_size: u64,
    /// The address the segment is loaded at, as the file states it.
    pub svma: u64,
    /// Its size in memory (at least `file_size`; the rest is zeroed).
    pub mem_size: u64,
    /// Mapped executable (PF_X).
    pub executable: bool,
}

/// The facts about an ELF file that the recorder, unwinder and symbolizer share.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ElfInfo {
    /// The GNU build-id note, if the file has one.
    pub build_id: Option<Vec<u8>>,
    /// PT_LOAD segments in file order.
    pub segments: Vec<Segment>,
    /// The `.gnu_debuglink` file name and CRC, if present.
    pub debuglink: Option<(String, u32)>,
}

/// Why a file could not be read as ELF.
#[derive(Debug, thiserror::Error)]
pub enum ElfError {
    /// The headers could not be parsed.
    #[error("not a 64-bit ELF file: {0}")]
    Parse(#[from] object::read::Error),
}

impl ElfInfo {
    /// Reads the build-id, segments and debuglink of a 64-bit ELF image.
    pub fn parse(data: &[u8]) -> Result<ElfInfo, ElfError> {
        use object::Object;
        let header = elf::FileHeader64::<Endianness>::parse(data)?;
        let endian = header.endian()?;
        let mut segments = Vec::new();
        for ph in header.program_headers(endian, data)? {
            if ph.p_type(endian) != elf::PT_LOAD {
                continue;
            }
            segments.push(Segment {
                file_offset: ph.p_offset(endian),
                file_size: ph.p_filesz(endian),
                svma: ph.p_vaddr(endian),
                mem_size: ph.p_memsz(endian),
                executable: ph.p_flags(endian).0 & elf::PF_X.0 != 0,
            });
        }
        let file = object::File::parse(data)?;
        let build_id = file.build_id().ok().flatten().map(<[u8]>::to_vec);
        let debuglink = file
            .gnu_debuglink()
            .ok()
            .flatten()
            .and_then(|(name, crc)| Some((std::str::from_utf8(name).ok()?.to_owned(), crc)));
        Ok(ElfInfo {
            build_id,
            segments,
            debuglink,
        })
    }

    /// The bias (`avma - svma`) of a mapping that starts at `map_start` and maps the
    /// file from `file_offset`. `None` when no loadable segment covers that offset
    /// (for example a data-only mapping of a non-ELF region).
    pub fn bias_for_mapping(&self, map_start: u64, file_offset: u64) -> Option<u64> {
        // The loader maps segments page-aligned: the mapping's file offset is the
        // segment's offset rounded down to a page, so compare within the page.
        // Segments can share a page (the end of a read-only segment and the start of
        // the text segment), so take the last segment that starts at or before it.
        let seg = self
            .segments
            .iter()
            .filter(|s| {
                let aligned = s.file_offset & !0xfff;
                file_offset >= aligned
                    && file_offset < s.file_offset.saturating_add(s.file_size.max(1))
            })
            .max_by_key(|s| s.file_offset)?;
        // avma of the segment start = map_start + (seg.file_offset - file_offset)
        let seg_avma = map_start
            .wrapping_add(seg.file_offset)
            .wrapping_sub(file_offset);
        Some(seg_avma.wrapping_sub(seg.svma))
    }

    /// Translates a file offset into the SVMA it is loaded at, if any segment holds it.
    pub fn svma_for_file_offset(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|s| offset >= s.file_offset && offset < s.file_offset.saturating_add(s.file_size))
            .and_then(|s| s.svma.checked_add(offset - s.file_offset))
    }
}

/// Hex form of a build-id, as used in `/usr/lib/debug/.build-id/xx/yyyy.debug`.
pub fn build_id_hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}
