//! The Go release a binary was built with, from `.go.buildinfo` (what `go version
//! BINARY` prints): a 32-byte header (`\xff Go buildinf:`, pointer size, flags) and,
//! from Go 1.18 (flag 2), the version as a length-prefixed string right after it.
//! Older binaries point at their strings instead: no version is read from them.

use object::{Object, ObjectSection};

use crate::elf::ImageData;

const MAGIC: &[u8] = b"\xff Go buildinf:";

/// The version string (`go1.19.8`) of a Go 1.18+ binary, when it says.
pub(super) fn version(image: &dyn ImageData, file: &object::File<'_>) -> Option<String> {
    let (offset, size) = file.section_by_name(".go.buildinfo")?.file_range()?;
    let mut buf = [0u8; 128];
    let buf = &mut buf[..size.min(128) as usize];
    if !image.read_at(offset, buf) {
        return None;
    }
    parse(buf)
}

/// [`version`] from the section's first bytes.
fn parse(b: &[u8]) -> Option<String> {
    if !b.starts_with(MAGIC) || b.get(15)? & 2 == 0 {
        return None;
    }
    let len = usize::from(*b.get(32)?);
    // One varint byte: versions are short.
    if len == 0 || len >= 0x80 {
        return None;
    }
    let v = b.get(33..33 + len)?;
    let printable = v.iter().all(|c| c.is_ascii_graphic());
    (printable && (v.starts_with(b"go") || v.starts_with(b"devel")))
        .then(|| String::from_utf8_lossy(v).into_owned())
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn inline_version_strings_are_read_and_others_refused() {
        let mut b = MAGIC_HEADER.to_vec();
        b.push(8);
        b.extend_from_slice(b"go1.19.8");
        assert_eq!(parse(&b).as_deref(), Some("go1.19.8"));
        let mut pointers = b.clone();
        pointers[15] = 0;
        assert_eq!(parse(&pointers), None, "pre-1.18 pointer form");
        b[32] = 200;
        assert_eq!(parse(&b), None, "length past the bytes");
        assert_eq!(parse(&b[..20]), None);
        let mut junk = MAGIC_HEADER.to_vec();
        junk.extend_from_slice(b"\x03g\x1bo");
        assert_eq!(parse(&junk), None, "not printable");
    }

    const MAGIC_HEADER: [u8; 32] = {
        let mut h = [0u8; 32];
        let m = super::MAGIC;
        let mut i = 0;
        while i < m.len() {
            h[i] = m[i];
            i += 1;
        }
        h[14] = 8;
        h[15] = 2;
        h
    };
}
