//! `/proc/PID/maps`, read and taken apart once for every reader: the recorder's
//! address spaces, `dump`, the perf.data reader's checks and the runtime readers
//! (a JVM's `libjvm.so`, its performance-data file). The parser is a pure function,
//! tested on text.

use std::io;

/// One line of `/proc/PID/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MapsEntry {
    pub start: u64,
    pub end: u64,
    pub executable: bool,
    /// Mapped shared (`s`), not as a private copy (`p`).
    pub shared: bool,
    pub offset: u64,
    /// Path, `[vdso]`-style pseudo name, or empty for anonymous memory.
    pub path: String,
}

/// Parses the text of `/proc/PID/maps`; malformed lines are skipped.
pub(crate) fn parse_maps(text: &str) -> Vec<MapsEntry> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.splitn(6, ' ');
            let (range, perms, offset) = (f.next()?, f.next()?, f.next()?);
            let (_dev, _inode) = (f.next()?, f.next()?);
            let path = f.next().unwrap_or("").trim_start().to_owned();
            let (a, b) = range.split_once('-')?;
            Some(MapsEntry {
                start: u64::from_str_radix(a, 16).ok()?,
                end: u64::from_str_radix(b, 16).ok()?,
                executable: perms.as_bytes().get(2) == Some(&b'x'),
                shared: perms.as_bytes().get(3) == Some(&b's'),
                offset: u64::from_str_radix(offset, 16).ok()?,
                path,
            })
        })
        .collect()
}

/// Reads and parses process `pid`'s maps. A path that is not UTF-8 (any bytes the
/// process's files are named with) has those bytes replaced: its line is kept.
pub(crate) fn read_maps(pid: u32) -> io::Result<Vec<MapsEntry>> {
    read(format!("/proc/{pid}/maps"))
}

/// Reads and parses the maps of process `pid` as its thread `tid` sees them (the
/// same address space: through a live thread when the main one has exited).
pub(crate) fn read_maps_at(pid: u32, tid: u32) -> io::Result<Vec<MapsEntry>> {
    read(format!("/proc/{pid}/task/{tid}/maps"))
}

fn read(path: String) -> io::Result<Vec<MapsEntry>> {
    std::fs::read(path).map(|b| parse_maps(&String::from_utf8_lossy(&b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines() {
        let text = "\
55d0c7a00000-55d0c7a01000 r--p 00000000 fe:01 1234                       /usr/bin/my prog
55d0c7a01000-55d0c7a02000 r-xp 00001000 fe:01 1234                       /usr/bin/my prog
7ffd1a3fe000-7ffd1a400000 r-xp 00000000 00:00 0                          [vdso]
7f0000000000-7f0000001000 rwxp 00000000 00:00 0 
7f0000001000-7f0000009000 rw-s 00000000 00:1f 77                         /tmp/hsperfdata_u/42
garbage line
";
        let m = parse_maps(text);
        assert_eq!(m.len(), 5);
        assert_eq!(m[1].path, "/usr/bin/my prog");
        assert!(m[1].executable && !m[0].executable);
        assert_eq!(m[1].offset, 0x1000);
        assert_eq!(m[2].path, "[vdso]");
        assert_eq!(m[3].path, "");
        assert!(m[3].executable);
        assert!(m[4].shared && !m[3].shared);
    }

    #[test]
    fn own_maps_hold_this_test() {
        let here = own_maps_hold_this_test as fn() as usize as u64;
        let me = std::process::id();
        let m = read_maps(me).unwrap();
        assert!(
            m.iter()
                .any(|e| e.executable && (e.start..e.end).contains(&here))
        );
        // The same address space through the main thread (its size may change as
        // other tests run).
        assert!(!read_maps_at(me, me).unwrap().is_empty());
    }
}
