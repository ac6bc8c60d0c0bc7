//! Tests of the ELF facts, the module images read from disk and the inflate checks.

use std::path::Path;

use super::*;

mod parse {
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
fn copy_of_this_test_binary() -> (tempfile::TempDir, std::path::PathBuf, Vec<u8>, Image) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("copy");
    std::fs::copy("/proc/self/exe", &path).unwrap();
    let whole = std::fs::read(&path).unwrap();
    let image = read_module(&path).unwrap();
    (dir, path, whole, image)
}

/// Truncates the file at `path` to its first page, as a library rewritten on disk.
fn cut_to_one_page(path: &Path) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(4096)
        .unwrap();
}

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
        assert!(err.to_string().contains("at most"), "{err}");
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
