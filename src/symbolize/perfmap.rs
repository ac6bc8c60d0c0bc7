//! JIT and interpreter frames from perf map files (`/tmp/perf-PID.map`), the format
//! Node (`--perf-basic-prof`), CPython 3.12+ (`-X perf`) and Java (`jcmd PID
//! Compiler.perfmap`) write: one `START SIZE name` line per code region, START and SIZE
//! in hex (with or without `0x`), the name the rest of the line, spaces included.
//! Runtimes append to the file while they run and reuse freed code memory, so a later
//! line replaces whatever earlier lines said about the range it covers.
//!
//! The file sits in a world-writable directory and `profile` runs as root, so it is
//! opened the way perf opens it ([`open_perf_map`]), and more strictly: only a regular
//! file owned by the target's user (root's only when the target is root's), never
//! through a symlink (resolved inside the target's root, never ours), never blocking
//! (a FIFO), opened with the target's filesystem uid and gid (so a file that user could
//! not read, bind-mounted there from a namespace they own, is not read either), and
//! never more than [`MAX_PERF_MAP`] bytes, parsed as a stream.
//!
//! A map's memory is bounded: each line costs its name plus [`ENTRY_COST`], and a map
//! holds at most the budget its caller gives (the recorder: [`MAX_MAP_WEIGHT`] per
//! process, less when its JVMs together hold much). A snapshot that would overflow the
//! budget rebuilds the map from that snapshot alone, and the snapshot itself is cut at
//! the budget; [`Merged`] says so.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, Read, Seek};

use std::sync::Arc;

mod open;
pub use open::{
    PerfMapFile, PerfMapSkip, STALE_SLACK, TargetUser, ns_pid, open_in_root, open_perf_map,
};

/// The largest perf map read: a long-running JVM writes some tens of MB.
pub const MAX_PERF_MAP: u64 = 256 << 20;

/// What one line of a map costs besides its name's bytes (its region, its last-line
/// entry, the name's header), counted generously.
pub const ENTRY_COST: usize = 128;

/// The most a process's map may weigh (names plus [`ENTRY_COST`] per line).
pub const MAX_MAP_WEIGHT: usize = 64 << 20;

/// The longest line kept (a longer name is cut).
pub const MAX_LINE: usize = 4096;

/// The regions of one perf map, flattened so that no two overlap.
#[derive(Debug, Default)]
pub struct PerfMap {
    /// start -> (end, name)
    regions: BTreeMap<u64, (u64, Arc<str>)>,
    /// The last line merged at each start, as given (end, name): a later line may have
    /// split its region, yet the same line again changes nothing.
    lines: HashMap<u64, (u64, Arc<str>)>,
    /// What the lines merged since the map was last emptied cost (names plus
    /// [`ENTRY_COST`] each): at least what the map holds.
    weight: usize,
}

/// What a merge changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changed {
    /// These ranges (sorted, disjoint; empty: nothing).
    Ranges(Vec<(u64, u64)>),
    /// The map was rebuilt: anything may have.
    All,
}

/// What [`PerfMap::merge_from`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merged {
    /// What changed, for the caches built on the map.
    pub changed: Changed,
    /// The snapshot would have overflowed the budget: the map was emptied and rebuilt
    /// from it alone (names of code it no longer lists were dropped).
    pub rebuilt: bool,
    /// Even alone the snapshot overflowed the budget: its lines past it were left out.
    pub cut: bool,
}

impl crate::interp::CodeRegions for PerfMap {
    fn region(&self, addr: u64) -> Option<(u64, u64, &str)> {
        PerfMap::region(self, addr)
    }
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
    /// changed. No budget: for text already in memory.
    pub fn merge(&mut self, text: &str) -> bool {
        !self.merge_ranges(text).is_empty()
    }

    /// [`PerfMap::merge`], returning the ranges whose names changed, sorted and
    /// disjoint (empty when the map did not change): what was learnt of the code
    /// outside them still holds.
    pub fn merge_ranges(&mut self, text: &str) -> Vec<(u64, u64)> {
        let mut changed = Vec::new();
        for line in text.lines() {
            self.merge_line(line.as_bytes(), usize::MAX, &mut changed);
        }
        joined(changed)
    }

    /// Merges a snapshot read from `file` (from its start, at most [`MAX_PERF_MAP`]
    /// bytes, lines cut at [`MAX_LINE`]) without holding its text, keeping the map's
    /// weight within `budget`: a snapshot that would overflow it empties the map and is
    /// read again alone, cut at the budget if it must be.
    pub fn merge_from(
        &mut self,
        file: &mut (impl Read + Seek),
        budget: usize,
    ) -> std::io::Result<Merged> {
        let was_empty = self.regions.is_empty() && self.lines.is_empty();
        let mut changed = Vec::new();
        file.rewind()?;
        let over = self.merge_stream(file, budget, &mut changed)?;
        if !over {
            return Ok(Merged {
                changed: Changed::Ranges(joined(changed)),
                rebuilt: false,
                cut: false,
            });
        }
        if was_empty {
            return Ok(Merged {
                changed: Changed::All,
                rebuilt: false,
                cut: true,
            });
        }
        *self = PerfMap::default();
        file.rewind()?;
        let cut = self.merge_stream(file, budget, &mut Vec::new())?;
        Ok(Merged {
            changed: Changed::All,
            rebuilt: true,
            cut,
        })
    }

    /// Merges the lines of `file` until its end or the budget; returns whether the
    /// budget stopped it.
    fn merge_stream(
        &mut self,
        file: &mut impl Read,
        budget: usize,
        changed: &mut Vec<(u64, u64)>,
    ) -> std::io::Result<bool> {
        let mut reader = std::io::BufReader::with_capacity(1 << 16, file.take(MAX_PERF_MAP));
        let mut line: Vec<u8> = Vec::with_capacity(256);
        loop {
            let buf = match reader.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if buf.is_empty() {
                break;
            }
            let (take, ends) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (buf.len(), false),
            };
            let room = MAX_LINE.saturating_sub(line.len());
            line.extend_from_slice(&buf[..take.min(room)]);
            reader.consume(take);
            if ends {
                if !self.merge_line(&line, budget, changed) {
                    return Ok(true);
                }
                line.clear();
            }
        }
        Ok(!line.is_empty() && !self.merge_line(&line, budget, changed))
    }

    /// Merges one line; false when it would take the weight past `budget` (then the map
    /// is unchanged).
    fn merge_line(&mut self, line: &[u8], budget: usize, changed: &mut Vec<(u64, u64)>) -> bool {
        let line = String::from_utf8_lossy(line);
        let Some((start, size, name)) = parse_line(&line) else {
            return true;
        };
        if size == 0 {
            return true;
        }
        let end = start.saturating_add(size);
        if self
            .lines
            .get(&start)
            .is_some_and(|(e, n)| *e == end && **n == *name)
        {
            return true;
        }
        let cost = name.len() + ENTRY_COST;
        if self.weight.saturating_add(cost) > budget {
            return false;
        }
        self.weight += cost;
        let name: Arc<str> = Arc::from(name);
        self.insert(start, end, Arc::clone(&name));
        self.lines.insert(start, (end, name));
        changed.push((start, end));
        true
    }

    /// What the map weighs (see [`ENTRY_COST`]).
    pub fn weight(&self) -> usize {
        self.weight
    }

    /// The regions holding one of `addrs`, alone: what naming those addresses needs.
    pub fn only(&self, addrs: &[u64]) -> PerfMap {
        let mut out = PerfMap::default();
        for &a in addrs {
            let Some((&start, (end, name))) = self.regions.range(..=a).next_back() else {
                continue;
            };
            if a >= *end || out.regions.contains_key(&start) {
                continue;
            }
            out.weight += name.len() + ENTRY_COST;
            out.regions.insert(start, (*end, Arc::clone(name)));
        }
        out
    }

    /// The region containing `addr`: its start, end and name.
    pub fn region(&self, addr: u64) -> Option<(u64, u64, &str)> {
        let (&start, (end, name)) = self.regions.range(..=addr).next_back()?;
        (addr < *end).then_some((start, *end, &**name))
    }

    /// Whether the map holds no region.
    pub fn is_empty(&self) -> bool {
        self.regions.is_empty()
    }

    /// Records `[start, end)` as `name`, trimming or removing the parts of earlier
    /// regions that it overlaps.
    fn insert(&mut self, start: u64, end: u64, name: Arc<str>) {
        let overlapping: Vec<u64> = self
            .regions
            .range(..end)
            .rev()
            .take_while(|&(_, &(e, _))| e > start)
            .map(|(&s, _)| s)
            .collect();
        // Regions do not overlap each other, so they are sorted by end as well and
        // `take_while` stops at the first one that ends before `start`.
        for s in overlapping {
            let Some((e, n)) = self.regions.remove(&s) else {
                continue;
            };
            if s < start {
                self.regions.insert(s, (start, Arc::clone(&n)));
            }
            if e > end {
                self.regions.insert(end, (e, n));
            }
        }
        self.regions.insert(start, (end, name));
    }

    /// The name of the region containing `addr`.
    pub fn lookup(&self, addr: u64) -> Option<&str> {
        self.region(addr).map(|(_, _, name)| name)
    }

    /// Number of distinct regions after flattening.
    pub fn len(&self) -> usize {
        self.regions.len()
    }
}

/// `changed` sorted, with overlapping or touching ranges joined.
fn joined(mut changed: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
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
#[path = "perfmap_merge_tests.rs"]
mod merge_tests;
