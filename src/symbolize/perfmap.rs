//! JIT and interpreter frames from perf map files (`/tmp/perf-PID.map`), the format
//! Node (`--perf-basic-prof`), CPython 3.12+ (`-X perf`) and Java (`jcmd PID
//! Compiler.perfmap`) write: one `START SIZE name` line per code region, START and SIZE
//! in hex (with or without `0x`), the name the rest of the line, spaces included.
//! Runtimes append to the file while they run and reuse freed code memory, so a later
//! line replaces whatever earlier lines said about the range it covers.
//!
//! The file sits in a world-writable directory and `profile` runs as root, so it is
//! opened the way perf opens it ([`open_perf_map`]): only a regular file owned by the
//! target's user or by root, never through a symlink (resolved inside the target's
//! root, never ours), never blocking (a FIFO), never more than [`MAX_PERF_MAP`] bytes.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

/// The largest perf map read: a long-running JVM writes some tens of MB.
pub const MAX_PERF_MAP: u64 = 256 << 20;

/// Why a perf map was not used. `Display` is the sentence for the summary.
#[derive(Debug, thiserror::Error)]
pub enum PerfMapSkip {
    /// There is none (the usual case: the target is no JIT runtime).
    #[error("no perf map at {0}")]
    Missing(PathBuf),
    /// The path is a symlink (opened with O_NOFOLLOW).
    #[error("{0} is a symbolic link; perf maps are not followed through links")]
    Symlink(PathBuf),
    /// A FIFO, a device, a directory.
    #[error("{0} is not a regular file")]
    NotRegular(PathBuf),
    /// Neither root's nor the target's user's.
    #[error("{path} is owned by uid {owner}, not by the target's user ({target}) or root")]
    Owner {
        /// The file.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// The target's uids, as text (`unknown` when the target was never seen).
        target: String,
    },
    /// Larger than [`MAX_PERF_MAP`].
    #[error("{path} is {size} bytes, more than the {MAX_PERF_MAP} read")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        size: u64,
    },
    /// Another error opening or reading it.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// A perf map read past the checks of [`open_perf_map`].
#[derive(Debug)]
pub struct PerfMapFile {
    /// Where it was read from (in our namespace: `/proc/PID/root/...` or `/tmp/...`).
    pub path: PathBuf,
    /// Its text (invalid UTF-8 replaced).
    pub text: String,
    /// When it was last written, when known.
    pub modified: Option<std::time::SystemTime>,
}

/// Reads the perf map of process `pid`. `owners` are the users the file may belong to
/// besides root (the target's real, effective and filesystem uids, taken while the
/// target ran). The target's own `/tmp` is used while the target lives (through
/// `/proc/PID/root`, symlinks resolved inside that root); after it exited, ours.
///
/// The runtime names the file by the pid it knows itself by: in a container, its pid in
/// its own PID namespace (the last `NSpid` of /proc/PID/status).
pub fn open_perf_map(pid: u32, owners: &[u32]) -> Result<PerfMapFile, PerfMapSkip> {
    let root = PathBuf::from(format!("/proc/{pid}/root"));
    let (root, own_pid) = if root.exists() {
        (root, ns_pid(pid).unwrap_or(pid))
    } else {
        (PathBuf::from("/"), pid)
    };
    let rel = PathBuf::from(format!("tmp/perf-{own_pid}.map"));
    open_in_root(&root, &rel, owners)
}

/// The pid process `pid` has in its innermost PID namespace.
pub fn ns_pid(pid: u32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))?
        .split_whitespace()
        .last()?
        .parse()
        .ok()
}

/// [`open_perf_map`] for the file `rel` under `root`.
pub fn open_in_root(root: &Path, rel: &Path, owners: &[u32]) -> Result<PerfMapFile, PerfMapSkip> {
    let shown = root.join(rel);
    let Some(dir) = rel
        .parent()
        .and_then(|d| resolve_in_root(root, d, MAX_LINKS))
    else {
        return Err(PerfMapSkip::Missing(shown));
    };
    let Some(name) = rel.file_name() else {
        return Err(PerfMapSkip::Missing(shown));
    };
    let path = dir.join(name);
    let file = std::fs::OpenOptions::new()
        .read(true)
        // A FIFO must not block the open, a link must not be followed.
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(&path)
        .map_err(|source| match source.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::ENOTDIR) => PerfMapSkip::Missing(path.clone()),
            Some(libc::ELOOP) => PerfMapSkip::Symlink(path.clone()),
            _ => PerfMapSkip::Io {
                path: path.clone(),
                source,
            },
        })?;
    let io = |source| PerfMapSkip::Io {
        path: path.clone(),
        source,
    };
    let meta = file.metadata().map_err(io)?;
    if !meta.file_type().is_file() {
        return Err(PerfMapSkip::NotRegular(path));
    }
    if meta.uid() != 0 && !owners.contains(&meta.uid()) {
        let target = owners
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        return Err(PerfMapSkip::Owner {
            owner: meta.uid(),
            target: if target.is_empty() {
                "unknown".into()
            } else {
                target
            },
            path,
        });
    }
    if meta.len() > MAX_PERF_MAP {
        return Err(PerfMapSkip::TooLarge {
            size: meta.len(),
            path,
        });
    }
    // The runtime may still be appending: read at most the cap.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    read_capped(file, &mut bytes).map_err(io)?;
    Ok(PerfMapFile {
        text: String::from_utf8_lossy(&bytes).into_owned(),
        path,
        modified: meta.modified().ok(),
    })
}

fn read_capped(file: File, out: &mut Vec<u8>) -> std::io::Result<()> {
    file.take(MAX_PERF_MAP).read_to_end(out).map(drop)
}

/// Symlink hops allowed while resolving, as the kernel's own limit.
const MAX_LINKS: u32 = 40;

/// `dir` (relative to `root`) with every symlink in it resolved inside `root`: an
/// absolute link target starts again at `root`, `..` never climbs above it. What the
/// kernel's `RESOLVE_IN_ROOT` does, without a syscall the standard library lacks.
/// `None` when a component is missing or the links go round.
fn resolve_in_root(root: &Path, dir: &Path, mut budget: u32) -> Option<PathBuf> {
    let mut parts: Vec<std::ffi::OsString> = Vec::new();
    let mut pending: Vec<std::ffi::OsString> = dir
        .components()
        .rev()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_owned()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect();
    while let Some(part) = pending.pop() {
        if part == ".." {
            parts.pop();
            continue;
        }
        let here: PathBuf = std::iter::once(root.as_os_str().to_owned())
            .chain(parts.iter().cloned())
            .chain(std::iter::once(part.clone()))
            .collect();
        let meta = std::fs::symlink_metadata(&here).ok()?;
        if meta.file_type().is_symlink() {
            budget = budget.checked_sub(1)?;
            let target = std::fs::read_link(&here).ok()?;
            if target.is_absolute() {
                parts.clear();
            }
            for c in target.components().rev() {
                match c {
                    Component::Normal(n) => pending.push(n.to_owned()),
                    Component::ParentDir => pending.push("..".into()),
                    _ => {}
                }
            }
        } else if meta.is_dir() {
            parts.push(part);
        } else {
            return None;
        }
    }
    Some(
        std::iter::once(root.as_os_str().to_owned())
            .chain(parts)
            .collect(),
    )
}

/// The regions of one perf map, flattened so that no two overlap.
#[derive(Debug, Default)]
pub struct PerfMap {
    /// start -> (end, index into `names`)
    regions: BTreeMap<u64, (u64, usize)>,
    names: Vec<String>,
    /// The last line merged at each start, as given (end, index into `names`): a
    /// later line may have split its region, yet the same line again changes nothing.
    lines: HashMap<u64, (u64, usize)>,
}

impl PerfMap {
    /// Parses the text of a perf map; lines that do not parse are skipped.
    pub fn parse(text: &str) -> PerfMap {
        let mut map = PerfMap::default();
        map.merge(text);
        map
    }

    /// Adds the lines of `text` as if appended to the map's file: they replace what
    /// they overlap. A line that says again what the map already holds for its range is
    /// skipped, so merging the same snapshot (a JVM rewrites its whole map on each
    /// request) again and again keeps the map's size bounded. Returns whether the map
    /// changed.
    pub fn merge(&mut self, text: &str) -> bool {
        !self.merge_ranges(text).is_empty()
    }

    /// [`PerfMap::merge`], returning the ranges whose names changed, sorted and
    /// disjoint (empty when the map did not change): what was learnt of the code
    /// outside them still holds.
    pub fn merge_ranges(&mut self, text: &str) -> Vec<(u64, u64)> {
        let mut changed = Vec::new();
        for line in text.lines() {
            if let Some((start, size, name)) = parse_line(line) {
                if size == 0 {
                    continue;
                }
                let end = start.saturating_add(size);
                if self
                    .lines
                    .get(&start)
                    .is_some_and(|&(e, i)| e == end && self.names[i] == name)
                {
                    continue;
                }
                self.names.push(name.to_owned());
                let idx = self.names.len() - 1;
                self.insert(start, end, idx);
                self.lines.insert(start, (end, idx));
                changed.push((start, end));
            }
        }
        changed.sort_unstable();
        changed.dedup_by(|next, kept| {
            let touches = next.0 <= kept.1;
            if touches {
                kept.1 = kept.1.max(next.1);
            }
            touches
        });
        changed
    }

    /// The region containing `addr`: its start, end and name.
    pub fn region(&self, addr: u64) -> Option<(u64, u64, &str)> {
        let (&start, &(end, idx)) = self.regions.range(..=addr).next_back()?;
        (addr < end).then(|| (start, end, self.names[idx].as_str()))
    }

    /// Whether the map holds no region.
    pub fn is_empty(&self) -> bool {
        self.regions.is_empty()
    }

    /// The map as perf-map text, one line per region (for the names at the end of a
    /// recording, which read text).
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for (start, &(end, idx)) in &self.regions {
            out.push_str(&format!(
                "{start:x} {:x} {}\n",
                end - start,
                self.names[idx]
            ));
        }
        out
    }

    /// Records `[start, end)` as `names[idx]`, trimming or removing the parts of
    /// earlier regions that it overlaps.
    fn insert(&mut self, start: u64, end: u64, idx: usize) {
        let overlapping: Vec<(u64, u64, usize)> = self
            .regions
            .range(..end)
            .rev()
            .take_while(|&(_, &(e, _))| e > start)
            .map(|(&s, &(e, i))| (s, e, i))
            .collect();
        // Regions do not overlap each other, so they are sorted by end as well and
        // `take_while` stops at the first one that ends before `start`.
        for (s, e, i) in overlapping {
            self.regions.remove(&s);
            if s < start {
                self.regions.insert(s, (start, i));
            }
            if e > end {
                self.regions.insert(end, (e, i));
            }
        }
        self.regions.insert(start, (end, idx));
    }

    /// The name of the region containing `addr`.
    pub fn lookup(&self, addr: u64) -> Option<&str> {
        self.region(addr).map(|(_, _, name)| name)
    }

    /// Number of distinct regions after flattening.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.regions.len()
    }
}

fn parse_line(line: &str) -> Option<(u64, u64, &str)> {
    let line = line.trim_end_matches(['\r', '\n']);
    let (start, rest) = line.trim_start().split_once(' ')?;
    let rest = rest.trim_start();
    let (size, name) = rest.split_once(' ').unwrap_or((rest, ""));
    let name = name.trim();
    if name.is_empty() {
        return None;
    }
    Some((hex(start)?, hex(size)?, name))
}

fn hex(s: &str) -> Option<u64> {
    let s = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    u64::from_str_radix(s, 16).ok()
}

#[cfg(test)]
#[path = "perfmap_tests.rs"]
mod open_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_python_and_java_lines() {
        let map = PerfMap::parse(
            "3ef414c0 398 RegExp:[{(]\n\
             7f2b3c2d1000 b py::foo:/srv/app/x.py\n\
             0x00007f00c0001000 0x0000000000000140 java.lang.String::hashCode()\n\
             1000 10 LazyCompile:~f /a b/c.js:1:2\r\n\
             bogus line\n\
             2000 zz bad size\n\
             3000 10\n",
        );
        assert_eq!(map.len(), 4);
        assert_eq!(map.lookup(0x3ef414c0 + 0x397), Some("RegExp:[{(]"));
        assert_eq!(map.lookup(0x3ef414c0 + 0x398), None);
        assert_eq!(map.lookup(0x7f2b3c2d1005), Some("py::foo:/srv/app/x.py"));
        assert_eq!(
            map.lookup(0x7f00c0001100),
            Some("java.lang.String::hashCode()")
        );
        assert_eq!(map.lookup(0x1008), Some("LazyCompile:~f /a b/c.js:1:2"));
        assert_eq!(map.lookup(0x3005), None);
    }

    #[test]
    fn later_lines_win() {
        let map = PerfMap::parse(
            "100 100 old\n\
             180 10 inner\n\
             300 10 keep\n\
             0 1000 everything\n\
             400 10 newest\n",
        );
        assert_eq!(map.lookup(0x185), Some("everything"));
        assert_eq!(map.lookup(0x305), Some("everything"));
        assert_eq!(map.lookup(0x3ff), Some("everything"));
        assert_eq!(map.lookup(0x405), Some("newest"));
        assert_eq!(map.lookup(0x410), Some("everything"));

        let mut map = PerfMap::parse("100 100 old\n150 10 new\n");
        // The same snapshot merged again changes nothing; a new line does.
        assert!(!map.merge("100 100 old\n150 10 new\n"));
        assert_eq!(map.lookup(0x155), Some("new"));
        assert_eq!(map.names.len(), 2);
        let again = PerfMap::parse(&map.to_text());
        assert_eq!(again.lookup(0x120), Some("old"));
        assert_eq!(again.lookup(0x155), Some("new"));
        assert_eq!(again.region(0x1ff), Some((0x160, 0x200, "old")));
        assert_eq!(map.lookup(0x120), Some("old"));
        assert_eq!(map.lookup(0x155), Some("new"));
        assert_eq!(map.lookup(0x160), Some("old"));
        assert_eq!(map.lookup(0x1ff), Some("old"));
        assert_eq!(map.lookup(0x200), None);
    }

    #[test]
    fn merge_says_what_changed() {
        let mut map = PerfMap::parse("100 100 a\n300 10 b\n");
        // Known lines change nothing; new ones are reported sorted, overlaps joined.
        assert_eq!(map.merge_ranges("100 100 a\n300 10 b\n"), vec![]);
        assert_eq!(
            map.merge_ranges("300 10 b\n500 10 d\n150 10 c\n158 10 e\n"),
            vec![(0x150, 0x168), (0x500, 0x510)]
        );
        // The same address again with another name or size is a change.
        assert_eq!(map.merge_ranges("300 20 b\n"), vec![(0x300, 0x320)]);
        assert_eq!(map.lookup(0x15f), Some("e"));
    }
}
