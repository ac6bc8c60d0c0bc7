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

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use object::read::elf::{FileHeader, ProgramHeader, SectionHeader};
use object::{Endianness, elf};

/// The bytes of a module (an ELF file or an in-memory image such as the vdso), shared
/// between the unwinder and the symbolizer without copying.
pub type Image = Arc<dyn ImageData>;

/// What an [`Image`] offers: the bytes read into memory, and reads of the parts that
/// were left on disk (code, see [`read_module`]).
pub trait ImageData: AsRef<[u8]> + Send + Sync {
    /// The image with its DWARF (`.debug_*`) sections too, when they were left on disk
    /// (see [`read_module`]); `None` when this image already has everything it has.
    fn with_debug_info(&self) -> Option<Image> {
        None
    }

    /// Whether the DWARF (`.debug_*`) sections were left on disk: [`ImageData::read_at`]
    /// reads them from the open file.
    fn debug_on_disk(&self) -> bool {
        false
    }

    /// The memory the image's bytes take: for an image read in part, the pages
    /// holding what was read (the rest was never touched); else its length.
    fn resident_bytes(&self) -> usize {
        (*self).as_ref().len()
    }

    /// Fills `buf` with the file's bytes at `offset`; false when they are not there
    /// (past the end, or the file was cut since it was opened).
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> bool {
        let data = (*self).as_ref();
        let Some(src) = usize::try_from(offset)
            .ok()
            .and_then(|o| data.get(o..o.checked_add(buf.len())?))
        else {
            return false;
        };
        buf.copy_from_slice(src);
        true
    }
}

impl ImageData for Vec<u8> {}

/// Files larger than this are not read (a module or debug file of 4 GiB is not an ELF
/// file anyone links; a device or a sparse file would exhaust memory).
pub const MAX_FILE_SIZE: u64 = 4 << 30;

/// A module read for unwinding and naming: the file's length in memory, where every
/// section the unwinder and the symbolizer use (headers, notes, symbol tables, CFI, PLT,
/// DWARF) holds the file's bytes and the rest (code and data) stays zero, never
/// touched, so it costs no memory. Code bytes are read from the open file on demand.
///
/// The file is read, not mapped: a library truncated or rewritten on disk while we
/// hold it then gives wrong or missing names, where a mapping would kill the process
/// reading it with SIGBUS.
struct ModuleImage {
    bytes: Vec<u8>,
    file: File,
    /// DWARF sections were left on disk (read by [`ImageData::with_debug_info`]).
    debug_left: bool,
    /// [`ImageData::resident_bytes`]: the pages the reads filled.
    resident: usize,
}

impl AsRef<[u8]> for ModuleImage {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl ImageData for ModuleImage {
    fn resident_bytes(&self) -> usize {
        self.resident
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> bool {
        self.file.read_exact_at(buf, offset).is_ok()
    }

    fn debug_on_disk(&self) -> bool {
        self.debug_left
    }

    fn with_debug_info(&self) -> Option<Image> {
        if !self.debug_left {
            return None;
        }
        // From the descriptor opened at first, so a file replaced since (a new inode)
        // still reads as it was; a file cut since fails here and names fall back to
        // the symbol tables read at first.
        let file = self.file.try_clone().ok()?;
        let len = self.bytes.len() as u64;
        load(file, len, true, usize::MAX).ok()
    }
}

fn open_regular_file(path: &Path) -> io::Result<(File, u64)> {
    checked_regular_file(File::open(path)?)
}

/// `file` with its length, if it is a regular file no larger than the most read.
fn checked_regular_file(file: File) -> io::Result<(File, u64)> {
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    if meta.len() > MAX_FILE_SIZE {
        return Err(io::Error::other(format!(
            "{} bytes is more than the {MAX_FILE_SIZE} read",
            meta.len()
        )));
    }
    Ok((file, meta.len()))
}

/// Reads the file's `len` bytes at `offset` into the same place of `buf`. False when
/// the range lies outside the file (a header that lies); an error when the file
/// cannot be read (cut short since it was opened).
fn fill(file: &File, buf: &mut [u8], offset: u64, len: u64) -> io::Result<bool> {
    let Some(range) = usize::try_from(offset)
        .ok()
        .zip(usize::try_from(len).ok())
        .and_then(|(o, l)| Some(o..o.checked_add(l)?))
        .filter(|r| r.end <= buf.len())
    else {
        return Ok(false);
    };
    file.read_exact_at(&mut buf[range], offset)?;
    Ok(true)
}

/// [`fill`] for the headers every later step needs: a range outside the file is an error.
fn fill_header(file: &File, buf: &mut [u8], offset: u64, len: u64) -> io::Result<()> {
    if fill(file, buf, offset, len)? {
        Ok(())
    } else {
        Err(io::Error::other("an ELF header points outside the file"))
    }
}

/// Reads a module for unwinding and naming: see [`ModuleImage`]. A file that is not a
/// 64-bit little-endian ELF file, or whose headers point outside it, is an error.
///
/// DWARF (`.debug_*` sections) is left on disk: it is most of a debug build and only
/// naming at the end of a recording needs it ([`ImageData::with_debug_info`]).
pub fn read_module(path: &Path) -> io::Result<Image> {
    read_module_within(path, usize::MAX)
}

/// [`read_module`], unless what it would read ([`ImageData::resident_bytes`]) is more
/// than `max` bytes: then an error, with nothing but the headers read.
pub fn read_module_within(path: &Path, max: usize) -> io::Result<Image> {
    let (file, len) = open_regular_file(path)?;
    load(file, len, false, max)
}

/// The bytes of a module's file, `debug`: DWARF sections included; an error if they
/// would take more than `max` bytes.
fn load(file: File, len: u64, debug: bool, max: usize) -> io::Result<Image> {
    // Zeroed memory from the allocator is untouched pages: only what is read costs.
    let mut bytes = vec![0u8; len as usize];
    let bad = |e: object::read::Error| io::Error::other(e.to_string());
    fill_header(&file, &mut bytes, 0, len.min(64))?;
    let header = elf::FileHeader64::<Endianness>::parse(&*bytes).map_err(bad)?;
    let endian = header.endian().map_err(bad)?;
    let (phoff, phsize) = (
        header.e_phoff(endian),
        u64::from(header.e_phnum(endian)) * u64::from(header.e_phentsize(endian)),
    );
    let shoff = header.e_shoff(endian);
    let shentsize = u64::from(header.e_shentsize(endian));
    fill_header(&file, &mut bytes, phoff, phsize)?;
    if shoff == 0 {
        // No section headers: nothing says which bytes matter, read them all.
        file.read_exact_at(&mut bytes, 0)?;
        let resident = bytes.len();
        return Ok(Arc::new(ModuleImage {
            bytes,
            file,
            debug_left: false,
            resident,
        }));
    }
    // Section 0 holds the real count and string-table index when they overflow.
    fill_header(&file, &mut bytes, shoff, shentsize)?;
    let header = elf::FileHeader64::<Endianness>::parse(&*bytes).map_err(bad)?;
    let shnum = header.shnum(endian, &*bytes).map_err(bad)? as u64;
    fill_header(&file, &mut bytes, shoff, shnum.saturating_mul(shentsize))?;
    let header = elf::FileHeader64::<Endianness>::parse(&*bytes).map_err(bad)?;
    let sections = header.sections(endian, &*bytes).map_err(bad)?;
    let strndx = header.shstrndx(endian, &*bytes).map_err(bad)?;
    let strtab = sections.section(object::SectionIndex(strndx as usize)).ok();
    let mut wanted: Vec<(u64, u64)> = Vec::new();
    if let Some(range) = strtab.and_then(|s| s.file_range(endian)) {
        wanted.push(range);
    }
    for ph in header.program_headers(endian, &*bytes).map_err(bad)? {
        if ph.p_type(endian) == elf::PT_NOTE {
            wanted.push((ph.p_offset(endian), ph.p_filesz(endian)));
        }
    }
    // Names need the string table read first.
    let first = std::mem::take(&mut wanted);
    for &(offset, size) in &first {
        fill(&file, &mut bytes, offset, size)?;
    }
    let header = elf::FileHeader64::<Endianness>::parse(&*bytes).map_err(bad)?;
    let sections = header.sections(endian, &*bytes).map_err(bad)?;
    let mut debug_left = false;
    for section in sections.iter() {
        let flags = section.sh_flags(endian);
        let kind = section.sh_type(endian);
        let name = sections.section_name(endian, section).unwrap_or_default();
        let needed = flags.0 & elf::SHF_ALLOC.0 == 0
            || matches!(
                kind,
                elf::SHT_NOTE
                    | elf::SHT_DYNSYM
                    | elf::SHT_SYMTAB
                    | elf::SHT_STRTAB
                    | elf::SHT_GNU_HASH
                    | elf::SHT_HASH
            )
            || matches!(name, b".eh_frame" | b".eh_frame_hdr" | b".debug_frame")
            // PLT stubs and the relocations that say whose they are, to name them
            // `NAME@plt` (16 and 24 bytes per imported function).
            || matches!(name, b".plt" | b".plt.sec" | b".rela.plt");
        let dwarf = name.starts_with(b".debug_") && name != b".debug_frame"
            || name.starts_with(b".zdebug_");
        if dwarf && !debug {
            debug_left = true;
            continue;
        }
        if needed && let Some((offset, size)) = section.file_range(endian) {
            wanted.push((offset, size));
        }
    }
    let header_ranges = [
        (0, len.min(64)),
        (phoff, phsize),
        (shoff, shnum.saturating_mul(shentsize)),
    ];
    let read = wanted.iter().chain(&first).chain(&header_ranges);
    let resident = pages_touched(read.copied(), len);
    if resident > max {
        return Err(io::Error::other(format!(
            "its tables take {resident} bytes, more than the {max} allowed"
        )));
    }
    for &(offset, size) in &wanted {
        fill(&file, &mut bytes, offset, size)?;
    }
    Ok(Arc::new(ModuleImage {
        bytes,
        file,
        debug_left,
        resident,
    }))
}

/// The bytes of the 4 KiB pages that the `(offset, size)` ranges of a `len`-byte
/// buffer touch, each page once: what reading those ranges into zeroed memory
/// costs (the allocator's untouched pages cost nothing).
pub(crate) fn pages_touched(ranges: impl Iterator<Item = (u64, u64)>, len: u64) -> usize {
    const PAGE: u64 = 4096;
    let mut spans: Vec<(u64, u64)> = ranges
        .filter(|&(_, size)| size > 0)
        .map(|(offset, size)| {
            let end = offset.saturating_add(size).min(len);
            (offset / PAGE, end.div_ceil(PAGE))
        })
        .filter(|(first, end)| first < end)
        .collect();
    spans.sort_unstable();
    let (mut pages, mut covered) = (0u64, 0u64);
    for (first, end) in spans {
        let first = first.max(covered);
        if end > first {
            pages += end - first;
            covered = end;
        }
    }
    usize::try_from(pages.saturating_mul(PAGE)).unwrap_or(usize::MAX)
}

/// Reads a whole file (a separate debug file, whose checksum covers every byte).
pub fn read_whole(path: &Path) -> io::Result<Image> {
    let (file, len) = open_regular_file(path)?;
    let mut bytes = vec![0u8; len as usize];
    file.read_exact_at(&mut bytes, 0)?;
    Ok(Arc::new(bytes))
}

/// Reads an open regular file whole (as [`read_whole`] reads a path).
pub fn read_open_file(file: File) -> io::Result<Image> {
    let (file, len) = checked_regular_file(file)?;
    let mut bytes = vec![0u8; len as usize];
    file.read_exact_at(&mut bytes, 0)?;
    Ok(Arc::new(bytes))
}

/// Wraps owned bytes (a vdso copy, a test fixture) as an [`Image`].
pub fn image_from_vec(bytes: Vec<u8>) -> Image {
    Arc::new(bytes)
}

/// The most bytes a compressed section of a target file may say it holds once
/// inflated: far above real debug info (a large Rust binary's `.debug_info` is a few
/// hundred MiB), far below what would exhaust the machine.
pub const MAX_INFLATED_SECTION: u64 = 2 << 30;

/// The most a compressed section may inflate relative to its compressed size: zlib and
/// zstd cannot exceed about 1,032:1 on real data, so more is a lie in the header.
const MAX_INFLATE_RATIO: u64 = 1100;

/// Checks a section's declared size before it is inflated, so that a crafted header
/// cannot make `profile` allocate terabytes (found by fuzzing the unwinder).
pub fn check_inflated_size<'d>(section: &impl object::ObjectSection<'d>) -> Result<(), String> {
    let range = section.compressed_file_range().map_err(|e| e.to_string())?;
    if range.format == object::CompressionFormat::None {
        return Ok(());
    }
    inflated_size_ok(range.compressed_size, range.uncompressed_size)
}

/// [`check_inflated_size`] for a section of `compressed` bytes whose header says it
/// inflates to `uncompressed`.
pub fn inflated_size_ok(compressed: u64, uncompressed: u64) -> Result<(), String> {
    let limit = compressed
        .saturating_mul(MAX_INFLATE_RATIO)
        .clamp(64 << 10, MAX_INFLATED_SECTION);
    if uncompressed > limit {
        return Err(format!(
            "compressed section says it inflates to {uncompressed} bytes from {compressed} \
             (at most {limit} accepted)"
        ));
    }
    Ok(())
}

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

/// A copy of the running test binary (a real ELF with CFI and DWARF) in a temporary
/// directory: the directory (kept alive), the copy's path, its bytes, and the module
/// read from it.
#[cfg(test)]
fn copy_of_this_test_binary() -> (tempfile::TempDir, std::path::PathBuf, Vec<u8>, Image) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("copy");
    std::fs::copy("/proc/self/exe", &path).unwrap();
    let whole = std::fs::read(&path).unwrap();
    let image = read_module(&path).unwrap();
    (dir, path, whole, image)
}

/// Truncates the file at `path` to its first page, as a library rewritten on disk.
#[cfg(test)]
fn cut_to_one_page(path: &Path) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(4096)
        .unwrap();
}

#[cfg(test)]
mod read_tests {
    use super::*;

    /// Issue 14: a library truncated on disk while `profile` held it mapped killed
    /// `profile` with SIGBUS. Now the parts that are used are copied in when the file
    /// is opened; a later cut only makes the code bytes unreadable.
    #[test]
    fn a_module_cut_after_opening_keeps_its_tables_and_never_faults() {
        let (_dir, path, whole, image) = copy_of_this_test_binary();
        let info = ElfInfo::parse((*image).as_ref()).unwrap();
        assert_eq!(info, ElfInfo::parse(&whole).unwrap());
        let text = info.segments.iter().find(|s| s.executable).unwrap();
        let mut code = [0u8; 16];
        assert!(image.read_at(text.file_offset, &mut code));
        let at = text.file_offset as usize;
        assert_eq!(code[..], whole[at..at + 16]);

        cut_to_one_page(&path);
        // Every byte of the image is still readable (a mapping would fault here).
        let sum: u64 = (*image).as_ref().iter().map(|&b| u64::from(b)).sum();
        assert!(sum > 0);
        assert!(!image.read_at(text.file_offset, &mut code));
        let cfi = crate::unwind::ModuleCfi::new(image.clone());
        assert!(cfi.has_cfi());
    }

    #[test]
    fn what_is_not_an_elf_module_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("text");
        std::fs::write(&path, b"hello").unwrap();
        assert!(read_module(&path).is_err());
        assert!(read_module(dir.path()).is_err());
        assert!(read_module(Path::new("/dev/zero")).is_err());
        // Headers that point past the end of the file.
        let mut bytes = std::fs::read("/proc/self/exe").unwrap();
        bytes[0x28..0x30].copy_from_slice(&u64::MAX.to_le_bytes()); // e_shoff
        std::fs::write(&path, &bytes).unwrap();
        assert!(read_module(&path).is_err());
    }
}

#[cfg(test)]
mod debug_info_tests {
    use super::*;

    /// DWARF stays on disk until naming asks for it: reading a module for recording
    /// costs its tables, not its debug info.
    #[test]
    fn dwarf_is_read_only_when_asked_for() {
        let (_dir, path, whole, image) = copy_of_this_test_binary();
        let file = object::File::parse(&whole[..]).unwrap();
        use object::{Object, ObjectSection};
        let info = file.section_by_name(".debug_info").unwrap();
        let (off, size) = info.file_range().unwrap();
        let range = off as usize..(off + size) as usize;
        assert!((*image).as_ref()[range.clone()].iter().all(|&b| b == 0));
        let full = image.with_debug_info().expect("DWARF was left on disk");
        assert_eq!((*full).as_ref()[range.clone()], whole[range]);
        assert!(full.with_debug_info().is_none());

        // Cut the file: the DWARF is gone, the first image still has its tables.
        cut_to_one_page(&path);
        assert!(image.with_debug_info().is_none());
        assert!(ElfInfo::parse((*image).as_ref()).is_ok());
    }
}

#[cfg(test)]
mod inflate_tests {
    use object::{Object, ObjectSection};

    /// Found by fuzzing the unwinder: an `.eh_frame_hdr` marked compressed whose header
    /// says it inflates to 70 TB made the CFI loader ask for that much memory. The
    /// declared size is now checked against the compressed size first.
    #[test]
    fn a_compressed_section_cannot_claim_terabytes() {
        let input = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fuzz/regressions/unwind/crash-7561cf1d23a8a732fff3f95abec78967dc4abd4a"
        ))
        .unwrap();
        let len = u32::from_le_bytes(input[..4].try_into().unwrap()) as usize;
        let elf = &input[4..4 + len];
        let file = object::File::parse(elf).unwrap();
        let hdr = file.section_by_name(".eh_frame_hdr").unwrap();
        let range = hdr.compressed_file_range().unwrap();
        assert!(range.uncompressed_size > 1 << 40);
        let err = super::check_inflated_size(&hdr).unwrap_err();
        assert!(err.contains("at most"), "{err}");
        // The unwinder loads the module without its tables instead of allocating.
        let cfi = crate::unwind::ModuleCfi::new(super::image_from_vec(elf.to_vec()));
        assert!(!cfi.has_cfi());
    }

    /// The same found by fuzzing the symbolizer: a zstd `.debug_line_str` claiming
    /// 288 PB.
    #[test]
    fn compressed_debug_info_cannot_claim_petabytes() {
        let elf = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fuzz/regressions/symbolize/crash-051d0093788b5f8dd0e77d0a99e80feb45258013"
        ))
        .unwrap();
        let file = object::File::parse(&elf[..]).unwrap();
        let huge: Vec<_> = file
            .sections()
            .filter(|s| {
                s.compressed_file_range().is_ok_and(|r| {
                    r.format != object::CompressionFormat::None && r.uncompressed_size > 1 << 40
                })
            })
            .collect();
        assert!(!huge.is_empty());
        for s in &huge {
            assert!(super::check_inflated_size(s).is_err());
        }
    }
}
