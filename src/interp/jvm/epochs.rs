//! When a HotSpot JVM unloaded classes, as far as it can be told from outside: its
//! count of unloaded classes (the `java.cls.unloadedClasses` performance counter) read
//! now and then. The count never goes down, so between two reads that give the same
//! count no class was unloaded: [`Epochs`] keeps such spans, and a sample taken inside
//! one belongs to that count (its epoch). A method read while the count held is good
//! for the samples of that epoch, and only for them: once a class is unloaded, its
//! methods' memory may hold another class's methods, which check out as well. The
//! count is read from the JVM's performance data file when it can be (kept open, it
//! still gives the final count after the JVM exited), else from its memory.

use std::collections::VecDeque;

use super::vmstructs::{VmError, VmStructs};
use crate::interp::Memory;

/// Spans of time kept (an epoch older than that is the last of its samples, long gone).
const MAX_SPANS: usize = 8;

/// Spans of time over which the count of unloaded classes held, oldest first.
#[derive(Debug, Default)]
pub struct Epochs {
    /// (from, to, count): the count was read after `from` and before `to`, the same
    /// both times, so it held in between.
    spans: VecDeque<(u64, u64, u64)>,
    /// Spans begun, ever.
    pub begun: u64,
}

impl Epochs {
    /// A read of `count` made between times `before` and `after`. Returns whether it
    /// began a new epoch.
    pub fn seen(&mut self, before: u64, after: u64, count: u64) -> bool {
        if let Some(last) = self.spans.back_mut()
            && last.2 == count
        {
            last.1 = last.1.max(before);
            return false;
        }
        // None ever unloaded: nothing was freed, ever.
        let from = if count == 0 && self.spans.is_empty() {
            0
        } else {
            after
        };
        self.spans.push_back((from, before, count));
        self.begun += 1;
        while self.spans.len() > MAX_SPANS {
            self.spans.pop_front();
        }
        true
    }

    /// The count at `time`, if a span covers it: else the count may have moved then
    /// (or it was never read so late).
    pub fn at(&self, time: u64) -> Option<u64> {
        self.spans
            .iter()
            .rev()
            .find(|&&(from, to, _)| from <= time && time <= to)
            .map(|s| s.2)
    }

    /// The count last read.
    pub fn current(&self) -> Option<u64> {
        self.spans.back().map(|s| s.2)
    }

    /// When the count was last read.
    pub fn last_read(&self) -> Option<u64> {
        self.spans.back().map(|s| s.1)
    }

    /// Whether an epoch is still kept.
    pub fn kept(&self, count: u64) -> bool {
        self.spans.iter().any(|s| s.2 == count)
    }
}

/// An open hsperfdata file and the offsets of the counters in it.
pub(super) struct CounterFile {
    file: std::fs::File,
    offsets: Vec<u64>,
}

/// Reads a JVM's count of unloaded classes into its [`Epochs`].
pub(super) struct Counter<'a> {
    pub(super) mem: &'a dyn Memory,
    pub(super) at: &'a [u64],
    pub(super) file: Option<&'a CounterFile>,
    pub(super) epochs: &'a mut Epochs,
    pub(super) clock: fn() -> u64,
}

impl Counter<'_> {
    /// The count now.
    pub(super) fn read(&mut self) -> Option<u64> {
        let before = (self.clock)();
        let count = match self.file {
            Some(f) => f.read(),
            None => self
                .at
                .iter()
                .try_fold(0u64, |n, &c| Some(n.wrapping_add(self.mem.u64_at(c)?))),
        };
        let after = (self.clock)();
        if let Some(c) = count {
            self.epochs.seen(before, after, c);
        }
        count
    }
}

impl CounterFile {
    /// The file mapped at the counters' addresses in process `pid`, opened through
    /// /proc (as the process's own mapping, not by a path it could swap). None if
    /// they are not all in one shared mapping of a regular file
    /// (`-XX:+PerfDisableSharedMem`), or the file does not give the count `mem` does.
    pub(super) fn open(pid: u32, mem: &dyn Memory, at: &[u64]) -> Option<CounterFile> {
        for m in crate::process::read_maps(pid).ok()? {
            let (lo, hi, off) = (m.start, m.end, m.offset);
            if !at.iter().all(|a| (lo..hi).contains(a)) {
                continue;
            }
            // Shared (a private copy's file would not see the counts move), and a
            // regular file: looked at before it is opened (no device or pipe opened).
            let path = format!("/proc/{pid}/map_files/{lo:x}-{hi:x}");
            if !m.shared || !std::fs::metadata(&path).ok()?.is_file() {
                return None;
            }
            use std::os::unix::fs::OpenOptionsExt;
            let file = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
                .open(&path)
                .ok()?;
            if !file.metadata().ok()?.is_file() {
                return None;
            }
            let offsets = at.iter().map(|a| a - lo + off).collect();
            let f = CounterFile { file, offsets };
            // The file says what the memory says.
            let mem = at
                .iter()
                .try_fold(0u64, |n, &c| Some(n.wrapping_add(mem.u64_at(c)?)));
            return (f.read().is_some() && f.read() == mem).then_some(f);
        }
        None
    }

    pub(super) fn read(&self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        self.offsets.iter().try_fold(0u64, |n, &o| {
            let mut b = [0u8; 8];
            self.file.read_exact_at(&mut b, o).ok()?;
            Some(n.wrapping_add(u64::from_le_bytes(b)))
        })
    }
}

/// The addresses of the JVM's performance counters of unloaded classes.
pub(super) fn unloaded_counters(mem: &dyn Memory, vm: &VmStructs) -> Result<Vec<u64>, VmError> {
    let read = |a: u64| mem.u64_at(a).ok_or(VmError::Read(a));
    let read32 = |a: u64| mem.u32_at(a).ok_or(VmError::Read(a));
    let prologue = read(vm.static_addr("PerfMemory::_prologue")?)?;
    if prologue == 0 {
        return Ok(Vec::new());
    }
    let first = read32(prologue.wrapping_add(vm.offset("PerfDataPrologue::entry_offset")?))?;
    let count = read32(prologue.wrapping_add(vm.offset("PerfDataPrologue::num_entries")?))?;
    let length = vm.offset("PerfDataEntry::entry_length")?;
    let name = vm.offset("PerfDataEntry::name_offset")?;
    let data = vm.offset("PerfDataEntry::data_offset")?;
    let mut out = Vec::new();
    let mut e = prologue.wrapping_add(u64::from(first));
    for _ in 0..count.min(100_000) {
        let len = read32(e.wrapping_add(length))?;
        if len == 0 || len > 1 << 16 {
            break;
        }
        let n = mem
            .c_string_at(
                e.wrapping_add(u64::from(read32(e.wrapping_add(name))?)),
                256,
            )
            .ok_or(VmError::Read(e))?;
        if n == b"java.cls.unloadedClasses" || n == b"sun.cls.unloadedClasses" {
            out.push(e.wrapping_add(u64::from(read32(e.wrapping_add(data))?)));
        }
        e = e.wrapping_add(u64::from(len));
    }
    Ok(out)
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_belongs_to_the_count_read_on_both_sides_of_it() {
        let mut e = Epochs::default();
        assert!(e.seen(10, 11, 0));
        assert!(!e.seen(20, 21, 0));
        assert_eq!(
            e.at(5),
            Some(0),
            "nothing ever unloaded before the first read"
        );
        assert_eq!(e.at(20), Some(0));
        assert_eq!(e.at(21), None, "not read since");
        assert!(e.seen(30, 31, 2));
        assert_eq!(e.at(25), None, "classes were unloaded somewhere in there");
        assert_eq!(e.at(31), None, "one read is no span");
        e.seen(40, 41, 2);
        assert_eq!(e.at(35), Some(2));
        assert_eq!(e.at(20), Some(0), "older epochs stay");
        assert_eq!(e.current(), Some(2));
        for i in 0..MAX_SPANS as u64 {
            e.seen(50 + 10 * i, 51 + 10 * i, 3 + i);
        }
        assert!(!e.kept(0) && e.at(20).is_none(), "the oldest let go");
    }

    #[test]
    fn a_first_read_of_a_moved_count_vouches_for_nothing_before_it() {
        let mut e = Epochs::default();
        e.seen(100, 101, 5);
        e.seen(200, 201, 5);
        assert_eq!(e.at(50), None);
        assert_eq!(e.at(150), Some(5));
    }
}
