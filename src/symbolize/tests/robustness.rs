//! Broken input never panics: truncated copies of a real binary, garbage, and DWARF
//! sections overwritten with noise give fewer names, not a crash.

use super::*;
use crate::elf::image_from_vec;

fn image_module(bytes: Vec<u8>) -> ModuleSource {
    ModuleSource {
        image: image_from_vec(bytes),
        path: "/nonexistent/broken".into(),
        root: None,
    }
}

/// A simple deterministic byte stream (xorshift), so failures reproduce.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn addresses(bin: &Path) -> Vec<u64> {
    let (start, end) = text_range(bin);
    (start..end)
        .step_by(3)
        .chain([0, u64::MAX, start - 1])
        .collect()
}

#[test]
fn truncated_copies_of_a_real_binary() {
    let dir = tempfile::tempdir().unwrap();
    let bin = build_c(dir.path(), "inline", &[]);
    let data = std::fs::read(&bin).unwrap();
    let addrs = addresses(&bin);
    let mut s = Symbolizer::new(SymbolizerOptions::default());
    let full = s.symbolize_module(&image_module(data.clone()), &addrs);
    let named_full = full.iter().filter(|f| !f.is_empty()).count();
    let mut cuts: Vec<usize> = (0..64).map(|i| data.len() * i / 64).collect();
    cuts.extend([1, 16, 63, 64, 65, 200, data.len() - 1]);
    for cut in cuts {
        let out = s.symbolize_module(&image_module(data[..cut].to_vec()), &addrs);
        assert_eq!(out.len(), addrs.len());
        let named = out.iter().filter(|f| !f.is_empty()).count();
        assert!(
            named <= named_full,
            "cut at {cut}: more names than the whole file"
        );
    }
}

#[test]
fn garbage_images() {
    let mut s = Symbolizer::new(SymbolizerOptions::default());
    for (i, len) in [0usize, 4, 64, 4096, 1 << 16].into_iter().enumerate() {
        let mut bytes = noise(i as u64 + 7, len);
        // Half of them start like a 64-bit little-endian ELF, to get past the magic.
        if i % 2 == 1 && len >= 16 {
            bytes[..7].copy_from_slice(&[0x7f, b'E', b'L', b'F', 2, 1, 1]);
        }
        let out = s.symbolize_module(&image_module(bytes), &[0, 0x1000, u64::MAX]);
        assert_eq!(out.len(), 3);
        assert!(out.iter().all(Vec::is_empty));
    }
}

#[test]
fn noise_in_dwarf_sections() {
    let dir = tempfile::tempdir().unwrap();
    let bin = build_c(dir.path(), "inline", &[]);
    let data = std::fs::read(&bin).unwrap();
    let addrs = addresses(&bin);
    let sections: Vec<(String, usize, usize)> = {
        let file = object::File::parse(&*data).unwrap();
        file.sections()
            .filter_map(|s| {
                let name = s.name().ok()?.to_owned();
                let (off, len) = s.file_range()?;
                name.starts_with(".debug_")
                    .then_some((name, off as usize, len as usize))
            })
            .collect()
    };
    assert!(sections.iter().any(|s| s.0 == ".debug_info"));
    let (main, _) = symbol(&bin, "main");
    let mut s = Symbolizer::new(SymbolizerOptions::default());
    for (seed, (name, off, len)) in sections.iter().enumerate() {
        for keep in [0, len / 2] {
            let junk = noise(seed as u64 * 31 + keep as u64, len - keep);
            let broken = data_with(&data, off + keep, &junk);
            let m = image_module(broken);
            let out = s.symbolize_module(&m, &addrs);
            assert_eq!(out.len(), addrs.len(), "{name}");
            // The symbol table is intact, so `main` stays named somehow.
            let out = s.symbolize_module(&m, &[main]);
            assert!(!out[0].is_empty(), "{name}: main lost its name");
        }
    }
}

fn data_with(data: &[u8], at: usize, junk: &[u8]) -> Vec<u8> {
    let mut v = data.to_vec();
    v[at..at + junk.len()].copy_from_slice(junk);
    v
}
