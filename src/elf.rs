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

use std::path::Path;
use std::sync::Arc;

use object::read::elf::{FileHeader, ProgramHeader};
use object::{Endianness, elf};

/// The bytes of a module (an ELF file or an in-memory image such as the vdso), shared
/// between the unwinder and the symbolizer without copying.
pub type Image = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// Maps a whole file read-only.
#[allow(unsafe_code)]
pub fn map_file(path: &Path) -> std::io::Result<Image> {
    let file = std::fs::File::open(path)?;
    // SAFETY: the mapping is read-only and private; if another process truncates the
    // file while we hold it, reads past the new end fault. Targets' binaries are not
    // rewritten in place by any loader or package manager (they replace the inode).
    let map = unsafe { memmap2::Mmap::map(&file)? };
    Ok(Arc::new(map))
}

/// Wraps owned bytes (a vdso copy, a test fixture) as an [`Image`].
pub fn image_from_vec(bytes: Vec<u8>) -> Image {
    Arc::new(bytes)
}

/// A loadable (PT_LOAD) segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub file_offset: u64,
    pub file_size: u64,
    pub svma: u64,
    pub mem_size: u64,
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
                file_offset >= aligned && file_offset < s.file_offset + s.file_size.max(1)
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
            .find(|s| offset >= s.file_offset && offset < s.file_offset + s.file_size)
            .map(|s| s.svma + (offset - s.file_offset))
    }
}

/// Hex form of a build-id, as used in `/usr/lib/debug/.build-id/xx/yyyy.debug`.
pub fn build_id_hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own_exe() -> Vec<u8> {
        std::fs::read("/proc/self/exe").unwrap()
    }

    #[test]
    fn parses_own_executable() {
        let info = ElfInfo::parse(&own_exe()).unwrap();
        assert!(info.segments.iter().any(|s| s.executable));
        assert!(info.build_id.as_ref().is_some_and(|id| id.len() >= 16));
    }

    #[test]
    fn bias_matches_the_loader() {
        // The address of a function in this process minus the bias must equal its
        // SVMA; check through /proc/self/maps, exactly as the recorder does.
        let data = own_exe();
        let info = ElfInfo::parse(&data).unwrap();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let exe = exe.to_str().unwrap();
        let here = bias_matches_the_loader as fn() as usize as u64;
        let m = crate::test_fixture::mapping_of("self", here);
        assert_eq!(m.path, exe);
        let (start, off) = (m.start, m.offset);
        let bias = info.bias_for_mapping(start, off).unwrap();
        let svma = here - bias;
        // The SVMA must fall in an executable segment of the file.
        assert!(
            info.segments
                .iter()
                .any(|s| s.executable && (s.svma..s.svma + s.mem_size).contains(&svma))
        );
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(ElfInfo::parse(b"not an elf file at all").is_err());
        assert!(ElfInfo::parse(&[0x7f, b'E', b'L', b'F', 2, 1, 1]).is_err());
    }
}
