//! JIT and interpreter frames from perf map files (`/tmp/perf-PID.map`), the format
//! Node (`--perf-basic-prof`), CPython 3.12+ (`-X perf`) and Java (`jcmd PID
//! Compiler.perfmap`) write: one `START SIZE name` line per code region, START and SIZE
//! in hex (with or without `0x`), the name the rest of the line, spaces included.
//! Runtimes append to the file while they run and reuse freed code memory, so a later
//! line replaces whatever earlier lines said about the range it covers.

use std::collections::BTreeMap;

/// The regions of one perf map, flattened so that no two overlap.
#[derive(Debug, Default)]
pub struct PerfMap {
    /// start -> (end, index into `names`)
    regions: BTreeMap<u64, (u64, usize)>,
    names: Vec<String>,
}

impl PerfMap {
    /// Parses the text of a perf map; lines that do not parse are skipped.
    pub fn parse(text: &str) -> PerfMap {
        let mut map = PerfMap::default();
        for line in text.lines() {
            if let Some((start, size, name)) = parse_line(line) {
                if size == 0 {
                    continue;
                }
                map.names.push(name.to_owned());
                let idx = map.names.len() - 1;
                map.insert(start, start.saturating_add(size), idx);
            }
        }
        map
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
        let (_, &(end, idx)) = self.regions.range(..=addr).next_back()?;
        (addr < end).then(|| self.names[idx].as_str())
    }

    /// Number of distinct regions after flattening.
    #[cfg(test)]
    pub fn len(&self) -> usize {
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

        let map = PerfMap::parse("100 100 old\n150 10 new\n");
        assert_eq!(map.lookup(0x120), Some("old"));
        assert_eq!(map.lookup(0x155), Some("new"));
        assert_eq!(map.lookup(0x160), Some("old"));
        assert_eq!(map.lookup(0x1ff), Some("old"));
        assert_eq!(map.lookup(0x200), None);
    }
}
