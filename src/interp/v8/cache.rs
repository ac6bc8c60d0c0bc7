//! What a Node binary says of V8 ([`Layout`]), kept between recordings. Finding its
//! `v8dbg_*` values and the range of its `Builtins_*` means passing over the names
//! of its 185,000 symbols (12.8 MB of string tables): a few milliseconds of every
//! recording, and the reason those tables were read at all (docs/runtimes.md,
//! "Recorder CPU"). The values and the range are kept under the user's cache
//! directory (`$XDG_CACHE_HOME/profile/v8`, else `~/.cache/profile/v8`), as the
//! kernel's symbols are (`symbolize/kernel_cache.rs`): one entry per binary,
//! named by its build id and its file's identity (device, inode, size, change
//! time), so that another file with the same build id (a copy with a symbol
//! renamed, a binary patched in place) never takes an entry that is not its own. The directory is walked as
//! debuginfod's cache is: a link, or a component or entry of another user, and the
//! entry is neither read nor written. The newest 64 entries are kept: storing
//! another removes the oldest.
//!
//! An entry is text, `profile v8 layout 1`, then `builtins LO HI` (or `builtins -`),
//! then one `NAME VALUE` line per value; anything else is no entry, and the layout
//! is read from the binary again. What an entry says is checked as the binary's own
//! values are ([`Layout::from_values`]).

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use object::read::elf::ElfFile64;
use object::{Endianness, Object};

use super::layout::{Layout, V8Error};
use crate::cache_dir::CacheDir;

/// The first line of an entry.
const HEADER: &str = "profile v8 layout 1";
/// The file name of an entry.
const LEAF: &str = "layout";
/// Entries kept: past it, a new entry removes the oldest ([`CacheDir::prune`]).
/// Each is some 30 KiB; each Node build a machine runs makes one.
const MAX_ENTRIES: usize = 64;
/// An entry larger than this is not read (Node 20's is some 30 KiB).
const MAX_ENTRY: u64 = 1 << 20;

/// Where entries are kept: under [`crate::cache_dir::default_dir`].
pub fn default_dir() -> Option<PathBuf> {
    crate::cache_dir::default_dir().map(|d| d.join("v8"))
}

/// The layout of the ELF file whose headers `image` holds and whose identity is
/// `identity` ([`crate::elf::ImageData::file_identity`]), from its entry in `dir`
/// when there is one, else read by `read` and kept there. Without a build id, an
/// identity or `dir`, simply `read`.
pub fn layout(
    dir: Option<&Path>,
    (image, identity): (&[u8], Option<&str>),
    read: impl FnOnce() -> Result<Layout, V8Error>,
) -> Result<Layout, V8Error> {
    let Some((key, dir)) = dir.and_then(|d| Some((key(image, identity)?, d))) else {
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
        c.prune(MAX_ENTRIES);
    }
    Ok(layout)
}

/// An entry's name: the build id and the file's `identity`; None without either.
fn key(image: &[u8], identity: Option<&str>) -> Option<String> {
    let file = ElfFile64::<Endianness>::parse(image).ok()?;
    let id = file.build_id().ok()??;
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let identity: String = (identity?.chars())
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    Some(format!("{hex}-{identity}"))
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
        let file = (&bytes[..], Some("803-1d2f-5e58d90-1700000000.5"));
        let first = super::layout(Some(dir.path()), file, || Ok(layout.clone()));
        assert_eq!(first.as_ref(), Ok(&layout));
        let again = super::layout(Some(dir.path()), file, || panic!("read again"));
        assert_eq!(again.as_ref(), Ok(&layout));
        // Another file with the same build id (a copy, or written since): its own.
        let copy = (&bytes[..], Some("803-1d30-5e58d90-1700000009.1"));
        let other = super::layout(Some(dir.path()), copy, || Err(V8Error::NoMetadata));
        assert_eq!(other, Err(V8Error::NoMetadata));
        // No identity: nothing kept.
        let unknown = super::layout(Some(dir.path()), (&bytes[..], None), || {
            Err(V8Error::NoMetadata)
        });
        assert_eq!(unknown, Err(V8Error::NoMetadata));
    }
}
