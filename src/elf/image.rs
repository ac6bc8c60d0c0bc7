//! A module's bytes in memory: what every stage reads of an ELF file (headers, symbol
//! tables, CFI) copied in when it is opened, its code and debug info read from disk
//! only when asked for, so that a file cut or rewritten on disk while `profile` holds
//! it never faults.

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

    /// Whether the string tables of the symbol tables were left on disk (see
    /// [`read_module_leaving_names`]): a symbol's name is then read from the file
    /// ([`read_name`]), the entries being in memory.
    fn names_on_disk(&self) -> bool {
        false
    }

    /// The image with its symbol names in memory too, when they were left on disk;
    /// `None` when this image has them already.
    fn with_names(&self) -> Option<Image> {
        None
    }

    /// The memory the image's bytes take: for an image read in part, the pages
    /// holding what was read (the rest was never touched); else its length.
    fn resident_bytes(&self) -> usize {
        (*self).as_ref().len()
    }

    /// The identity of the file the image was read from, as text: its device,
    /// inode, size and change time (which every write to it moves); None for an
    /// image read whole or made in memory. Caches of what a file says are keyed by
    /// it, so that a file written since, or a copy, never takes another's entry.
    fn file_identity(&self) -> Option<String> {
        None
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
    /// The symbol tables' string tables were left on disk ([`ImageData::names_on_disk`]).
    names_left: bool,
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

    fn file_identity(&self) -> Option<String> {
        use std::os::unix::fs::MetadataExt;
        let m = self.file.metadata().ok()?;
        let (dev, ino, size) = (m.dev(), m.ino(), m.size());
        Some(format!(
            "{dev:x}-{ino:x}-{size:x}-{}.{}",
            m.ctime(),
            m.ctime_nsec()
        ))
    }

    fn debug_on_disk(&self) -> bool {
        self.debug_left
    }

    fn names_on_disk(&self) -> bool {
        self.names_left
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
        let wanted = Wanted {
            debug: true,
            names: !self.names_left,
        };
        load(file, len, wanted, usize::MAX).ok()
    }

    fn with_names(&self) -> Option<Image> {
        if !self.names_left {
            return None;
        }
        let file = self.file.try_clone().ok()?;
        let len = self.bytes.len() as u64;
        let wanted = Wanted {
            debug: !self.debug_left,
            names: true,
        };
        load(file, len, wanted, usize::MAX).ok()
    }
}

/// The longest symbol name [`read_name`] reads (node's longest C++ names are about
/// 1,000 bytes).
pub const MAX_NAME: usize = 16 << 10;

/// The zero-terminated name at file offset `at` of `image`'s file, read in pieces
/// from disk; `end` is where its string table ends. None past the table or its
/// end, when the file cannot be read (cut since), or for a name longer than
/// [`MAX_NAME`].
pub fn read_name(image: &dyn ImageData, at: u64, end: u64) -> Option<Vec<u8>> {
    let mut name = Vec::new();
    let mut piece = [0u8; 256];
    let mut at = at;
    while at < end && name.len() < MAX_NAME {
        let n = usize::try_from(end - at).map_or(piece.len(), |left| left.min(piece.len()));
        if !image.read_at(at, &mut piece[..n]) {
            return None;
        }
        if let Some(zero) = piece[..n].iter().position(|&b| b == 0) {
            name.extend_from_slice(&piece[..zero]);
            return Some(name);
        }
        name.extend_from_slice(&piece[..n]);
        at += n as u64;
    }
    None
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
    let wanted = Wanted {
        debug: false,
        names: true,
    };
    load(file, len, wanted, max)
}

/// [`read_module_within`], leaving the string tables of the symbol tables on disk
/// ([`ImageData::names_on_disk`]): for a module whose names only the naming at the
/// end of a recording reads, a few hundred of them. Node's are 12.8 MB of its 21
/// MB of tables; reading them into memory (a fault, a zeroing and a copy per page)
/// was a third of the recorder's CPU on a Node target (docs/runtimes.md).
pub fn read_module_leaving_names(path: &Path, max: usize) -> io::Result<Image> {
    let (file, len) = open_regular_file(path)?;
    let wanted = Wanted {
        debug: false,
        names: false,
    };
    load(file, len, wanted, max)
}

/// What [`load`] reads beyond the tables every module needs.
#[derive(Clone, Copy)]
struct Wanted {
    /// DWARF sections.
    debug: bool,
    /// The string tables of the symbol tables.
    names: bool,
}

/// The bytes of a module's file, with what `wanted` asks; an error if they would
/// take more than `max` bytes.
fn load(file: File, len: u64, wanted_too: Wanted, max: usize) -> io::Result<Image> {
    // Zeroed memory from the allocator is untouched pages: only what is read costs.
    let mut bytes = vec![0u8; len as usize];
    // Without the names, node's tables lie in pieces: in huge pages they would take
    // 18 MB to hold 8 (each zeroed, a cost that showed in the recorder's profile).
    let page = if len >= HUGE_FROM && wanted_too.names && huge_pages(&mut bytes) {
        HUGE_PAGE
    } else {
        PAGE
    };
    let Some(headers) = read_headers(&file, &mut bytes, len)? else {
        // No section headers: nothing says which bytes matter, read them all.
        file.read_exact_at(&mut bytes, 0)?;
        let resident = bytes.len();
        return Ok(Arc::new(ModuleImage {
            bytes,
            file,
            debug_left: false,
            names_left: false,
            resident,
        }));
    };
    // Names need the string table read first.
    let first = names_and_notes(&bytes, headers.endian)?;
    for &(offset, size) in &first {
        fill(&file, &mut bytes, offset, size)?;
    }
    let (wanted, left) = wanted_sections(&bytes, headers.endian, wanted_too)?;
    let (debug_left, names_left) = (left.debug, left.names);
    let read = wanted.iter().chain(&first).chain(&headers.ranges);
    let resident = spans_touched(read.copied(), len, page);
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
        names_left,
        resident,
    }))
}

/// A module's headers as read.
struct Headers {
    endian: Endianness,
    /// The (offset, size) of the file header, the program headers and the section
    /// headers.
    ranges: [(u64, u64); 3],
}

fn bad(e: object::read::Error) -> io::Error {
    io::Error::other(e.to_string())
}

/// Reads the file header, the program headers and the section headers into
/// `bytes`; None when the file has no section headers.
fn read_headers(file: &File, bytes: &mut [u8], len: u64) -> io::Result<Option<Headers>> {
    fill_header(file, bytes, 0, len.min(64))?;
    let header = elf::FileHeader64::<Endianness>::parse(&*bytes).map_err(bad)?;
    let endian = header.endian().map_err(bad)?;
    let (phoff, phsize) = (
        header.e_phoff(endian),
        u64::from(header.e_phnum(endian)) * u64::from(header.e_phentsize(endian)),
    );
    let shoff = header.e_shoff(endian);
    let shentsize = u64::from(header.e_shentsize(endian));
    fill_header(file, bytes, phoff, phsize)?;
    if shoff == 0 {
        return Ok(None);
    }
    // Section 0 holds the real count and string-table index when they overflow.
    fill_header(file, bytes, shoff, shentsize)?;
    let header = elf::FileHeader64::<Endianness>::parse(&*bytes).map_err(bad)?;
    let shnum = header.shnum(endian, &*bytes).map_err(bad)? as u64;
    fill_header(file, bytes, shoff, shnum.saturating_mul(shentsize))?;
    Ok(Some(Headers {
        endian,
        ranges: [
            (0, len.min(64)),
            (phoff, phsize),
            (shoff, shnum.saturating_mul(shentsize)),
        ],
    }))
}

/// The (offset, size) of the section-name string table and of the notes.
fn names_and_notes(bytes: &[u8], endian: Endianness) -> io::Result<Vec<(u64, u64)>> {
    let header = elf::FileHeader64::<Endianness>::parse(bytes).map_err(bad)?;
    let sections = header.sections(endian, bytes).map_err(bad)?;
    let strndx = header.shstrndx(endian, bytes).map_err(bad)?;
    let strtab = sections.section(object::SectionIndex(strndx as usize)).ok();
    let mut wanted: Vec<(u64, u64)> = Vec::new();
    if let Some(range) = strtab.and_then(|s| s.file_range(endian)) {
        wanted.push(range);
    }
    for ph in header.program_headers(endian, bytes).map_err(bad)? {
        if ph.p_type(endian) == elf::PT_NOTE {
            wanted.push((ph.p_offset(endian), ph.p_filesz(endian)));
        }
    }
    Ok(wanted)
}

/// The (offset, size) of the sections unwinding and naming need (DWARF and the
/// symbol tables' string tables only when `wanted_too` says), and which of those
/// were left on disk (as a [`Wanted`] of what was left).
fn wanted_sections(
    bytes: &[u8],
    endian: Endianness,
    wanted_too: Wanted,
) -> io::Result<(Vec<(u64, u64)>, Wanted)> {
    let header = elf::FileHeader64::<Endianness>::parse(bytes).map_err(bad)?;
    let sections = header.sections(endian, bytes).map_err(bad)?;
    let strndx = header.shstrndx(endian, bytes).map_err(bad)?;
    // The string tables the symbol tables name (not the section names').
    let names: Vec<u32> = sections
        .iter()
        .filter(|s| matches!(s.sh_type(endian), elf::SHT_SYMTAB | elf::SHT_DYNSYM))
        .map(|s| s.sh_link(endian))
        .filter(|&link| link as usize != strndx as usize)
        .collect();
    let mut wanted = Vec::new();
    let mut left = Wanted {
        debug: false,
        names: false,
    };
    for (index, section) in sections.iter().enumerate() {
        let name = sections.section_name(endian, section).unwrap_or_default();
        let dwarf = name.starts_with(b".debug_") && name != b".debug_frame"
            || name.starts_with(b".zdebug_");
        if dwarf && !wanted_too.debug {
            left.debug = true;
            continue;
        }
        if !wanted_too.names && names.contains(&(index as u32)) {
            left.names = true;
            continue;
        }
        let needed = needed(section.sh_flags(endian).0, section.sh_type(endian), name);
        if needed && let Some((offset, size)) = section.file_range(endian) {
            wanted.push((offset, size));
        }
    }
    Ok((wanted, left))
}

/// Whether a section of these flags, type and name is read.
fn needed(flags: u64, kind: elf::SectionType, name: &[u8]) -> bool {
    flags & elf::SHF_ALLOC.0 == 0
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
        || matches!(name, b".plt" | b".plt.sec" | b".rela.plt")
        // A Go module's own table: its names, and its frames' sizes where it has no
        // CFI (stripped as Go binaries ship), see `elf::gopclntab`.
        || name == b".gopclntab"
}

/// A page of memory.
const PAGE: u64 = 4096;
/// A transparent huge page (x86_64).
const HUGE_PAGE: u64 = 2 << 20;
/// Files from this size up are read into memory in huge pages ([`huge_pages`]).
const HUGE_FROM: u64 = 32 << 20;

/// Asks the kernel to back `bytes` with huge pages where it can: filling the 21 MB
/// of tables of node's 99 MB binary then took 11 ms instead of 21 (a fault, a
/// zeroing and a charge per 2 MiB instead of per 4 KiB; docs/runtimes.md,
/// "Recorder CPU"). The untouched ranges still cost nothing; a touched range costs
/// up to a huge page more than its bytes. Whether the kernel took the advice.
fn huge_pages(bytes: &mut [u8]) -> bool {
    #[cfg(target_os = "linux")]
    return crate::sys::advise_huge_pages(bytes);
    #[cfg(not(target_os = "linux"))]
    return {
        let _ = bytes;
        false
    };
}

/// The bytes of the 4 KiB pages that the `(offset, size)` ranges of a `len`-byte
/// buffer touch, each page once: what reading those ranges into zeroed memory
/// costs (the allocator's untouched pages cost nothing).
#[cfg(test)]
pub(crate) fn pages_touched(ranges: impl Iterator<Item = (u64, u64)>, len: u64) -> usize {
    spans_touched(ranges, len, PAGE)
}

/// The bytes of the `page`-byte pages the ranges touch (`pages_touched` in 4 KiB pages).
fn spans_touched(ranges: impl Iterator<Item = (u64, u64)>, len: u64, page: u64) -> usize {
    let mut spans: Vec<(u64, u64)> = ranges
        .filter(|&(_, size)| size > 0)
        .map(|(offset, size)| {
            let end = offset.saturating_add(size).min(len);
            (offset / page, end.div_ceil(page))
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
    usize::try_from(pages.saturating_mul(page)).unwrap_or(usize::MAX)
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
