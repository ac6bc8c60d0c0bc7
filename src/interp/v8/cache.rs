//! What a Node binary says of V8 ([`Layout`]), kept between recordings. Finding its
//! `v8dbg_*` values and the range of its `Builtins_*` means passing over the names
//! of its 185,000 symbols (12.8 MB of string tables): a few milliseconds of every
//! recording, and the reason those tables were read at all (docs/runtimes.md,
//! "Recorder CPU"). The values and the range are kept under the user's cache
//! directory (`$XDG_CACHE_HOME/profile/v8`, else `~/.cache/profile/v8`), as the
//! kernel's symbols are ([`crate::symbolize::kernel_cache`]): one entry per binary,
//! named by its build id, its size and a hash of its `.data` section (where the
//! values are), so that another file with the same build id (a patched binary)
//! never takes an entry that is not its own. The directory is walked as
//! debuginfod's cache is: a link, or a component or entry of another user, and the
//! entry is neither read nor written.
//!
//! An entry is text, `profile v8 layout 1`, then `builtins LO HI` (or `builtins -`),
//! then one `NAME VALUE` line per value; anything else is no entry, and the layout
//! is read from the binary again. What an entry says is checked as the binary's own
//! values are ([`Layout::from_values`]).

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use object::read::elf::{ElfFile64, SectionHeader};
use object::{Endianness, Object};

use super::layout::{Layout, V8Error};
use crate::interp::elf_symbols::ReadAt;
use crate::symbolize::debuginfod_cache::CacheDir;

/// The first line of an entry.
const HEADER: &str = "profile v8 layout 1";
/// The file name of an entry.
const LEAF: &str = "layout";
/// An entry larger than this is not read (Node 20's is some 30 KiB).
const MAX_ENTRY: u64 = 1 << 20;
/// A `.data` section larger than this is not hashed: no entry (node's is 124 KiB).
const MAX_DATA: u64 = 16 << 20;

/// Where entries are kept: under [`crate::symbolize::kernel_cache::default_dir`].
pub fn default_dir() -> Option<PathBuf> {
    crate::symbolize::kernel_cache::default_dir().map(|d| d.join("v8"))
}

/// The layout of the ELF file whose headers and symbol tables `image` holds (read
/// with `read_at` what it lacks), from its entry in `dir` when there is one, else
/// read by `read` and kept there. Without a build id, `.data` section or `dir`,
/// simply `read`.
pub fn layout(
    dir: Option<&Path>,
    image: &[u8],
    read_at: ReadAt<'_>,
    read: impl FnOnce() -> Result<Layout, V8Error>,
) -> Result<Layout, V8Error> {
    let Some((key, dir)) = dir.and_then(|d| Some((key(image, read_at)?, d))) else {
        return read();
    };
    let cache = CacheDir::open_for(dir, LEAF, 0o644).ok();
    if let Some(c) = &cache
        && let Ok(Some(file)) = c.cached(&key)
        && let Some(layout) = read_entry(file)
    {
        return Ok(layout);
    }
    let layout = read()?;
    if let Some(c) = &cache {
        // Best effort: an entry not kept costs the next recording the scan.
        let text = entry(&layout);
        let _ = c.store(&key, |f| std::io::Write::write_all(f, text.as_bytes()));
    }
    Ok(layout)
}

/// An entry's name: the build id, the file's size, and an FNV-1a hash of its
/// `.data` section; None without a build id or a readable `.data`.
fn key(image: &[u8], read_at: ReadAt<'_>) -> Option<String> {
    let file = ElfFile64::<Endianness>::parse(image).ok()?;
    let id = file.build_id().ok()??;
    let endian = file.endian();
    let sections = file.elf_section_table();
    let (_, data) = sections.section_by_name(endian, b".data")?;
    let (offset, size) = data.file_range(endian)?;
    if size > MAX_DATA {
        return None;
    }
    let mut bytes = vec![0u8; size as usize];
    if !read_at(offset, &mut bytes) {
        return None;
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in &bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    Some(format!("{hex}-{:x}-{h:016x}", image.len()))
}

/// `layout` as an entry's text.
fn entry(layout: &Layout) -> String {
    let mut text = format!("{HEADER}\n");
    match layout.builtins {
        Some((lo, hi)) => text.push_str(&format!("builtins {lo:x} {hi:x}\n")),
        None => text.push_str("builtins -\n"),
    }
    for (name, value) in &layout.values {
        text.push_str(&format!("{name} {value}\n"));
    }
    text
}

/// The layout an entry's file holds; None if it is not an entry (too large, cut,
/// a line out of place) or its values do not make a layout.
fn read_entry(file: std::fs::File) -> Option<Layout> {
    let mut text = String::new();
    file.take(MAX_ENTRY).read_to_string(&mut text).ok()?;
    parse_entry(&text)
}

/// [`read_entry`] over the text.
fn parse_entry(text: &str) -> Option<Layout> {
    let mut lines = text.lines();
    (lines.next()? == HEADER).then_some(())?;
    let builtins = match lines.next()?.strip_prefix("builtins ")? {
        "-" => None,
        range => {
            let (lo, hi) = range.split_once(' ')?;
            let (lo, hi) = (
                u64::from_str_radix(lo, 16).ok()?,
                u64::from_str_radix(hi, 16).ok()?,
            );
            (lo < hi).then_some(())?;
            Some((lo, hi))
        }
    };
    let mut values = HashMap::new();
    for line in lines {
        let (name, value) = line.split_once(' ')?;
        values.insert(name.to_owned(), value.parse::<i64>().ok()?);
    }
    let mut layout = Layout::from_values(&values).ok()?;
    layout.builtins = builtins;
    Some(layout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_reads_back_as_the_layout_it_was_made_from() {
        let node = Path::new("/usr/bin/node");
        let Ok(bytes) = std::fs::read(node) else {
            eprintln!("skipped: no {}", node.display());
            return;
        };
        let layout = Layout::from_elf(&bytes).expect("node's layout");
        let text = entry(&layout);
        assert_eq!(parse_entry(&text), Some(layout.clone()));
        // Cut, or a line out of place: no entry.
        assert_eq!(parse_entry(&text[..text.len() / 2]), None);
        assert_eq!(parse_entry(&text.replacen("builtins", "builtin", 1)), None);
        assert_eq!(parse_entry(&format!("{text}off_fp_function x\n")), None);
        // The same binary again, from a cache: the same layout, and an entry kept.
        let dir = tempfile::tempdir().unwrap();
        let read_at = |off: u64, buf: &mut [u8]| {
            let Some(src) = bytes.get(off as usize..off as usize + buf.len()) else {
                return false;
            };
            buf.copy_from_slice(src);
            true
        };
        let first = super::layout(Some(dir.path()), &bytes, &read_at, || Ok(layout.clone()));
        assert_eq!(first.as_ref(), Ok(&layout));
        let again = super::layout(Some(dir.path()), &bytes, &read_at, || {
            panic!("read from the binary again")
        });
        assert_eq!(again, Ok(layout));
    }
}
