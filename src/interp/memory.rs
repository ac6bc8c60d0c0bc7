//! Reading another process's memory through a trait, so that the interpreter walkers
//! run the same on a live process, on a sample's stack copy, and on a snapshot in a
//! test. Every read is bounded by the caller: nothing here follows a length it read.

use std::collections::BTreeMap;

/// An address space that can be read, never written. A read that cannot be served
/// whole (unmapped, gone, outside the snapshot) fails: no partial results.
pub trait Memory {
    /// Fills `buf` from `addr`; false if any byte of it could not be read.
    fn read(&self, addr: u64, buf: &mut [u8]) -> bool;

    /// A little-endian u64 at `addr`.
    fn u64_at(&self, addr: u64) -> Option<u64> {
        let mut b = [0; 8];
        self.read(addr, &mut b).then(|| u64::from_le_bytes(b))
    }

    /// A little-endian u32 at `addr`.
    fn u32_at(&self, addr: u64) -> Option<u32> {
        let mut b = [0; 4];
        self.read(addr, &mut b).then(|| u32::from_le_bytes(b))
    }

    /// A little-endian u16 at `addr`.
    fn u16_at(&self, addr: u64) -> Option<u16> {
        let mut b = [0; 2];
        self.read(addr, &mut b).then(|| u16::from_le_bytes(b))
    }

    /// `len` bytes at `addr`, if `len` is at most `max` (a length read from the
    /// target is never trusted further than its caller says).
    fn bytes_at(&self, addr: u64, len: usize, max: usize) -> Option<Vec<u8>> {
        if len > max {
            return None;
        }
        let mut v = vec![0; len];
        self.read(addr, &mut v).then_some(v)
    }

    /// A NUL-terminated string at `addr` of at most `max` bytes before the NUL, read
    /// in small steps so that a string near the end of a mapping still reads.
    fn c_string_at(&self, addr: u64, max: usize) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        let mut chunk = [0u8; 64];
        while out.len() <= max {
            let at = addr.checked_add(out.len() as u64)?;
            // Never read across a 64-byte boundary, so never across a page: the
            // next page may be unmapped.
            let n = 64 - (at % 64) as usize;
            if !self.read(at, &mut chunk[..n]) {
                return None;
            }
            if let Some(end) = chunk[..n].iter().position(|&b| b == 0) {
                out.extend_from_slice(&chunk[..end]);
                return (out.len() <= max).then_some(out);
            }
            out.extend_from_slice(&chunk[..n]);
        }
        None
    }

    /// The pages of `size` bytes at each of `addrs`, each None where it could not be
    /// read whole. Default: one read each; a process's memory reads them all in one
    /// system call.
    fn read_pages(&self, addrs: &[u64], size: usize) -> Vec<Option<Box<[u8]>>> {
        addrs
            .iter()
            .map(|&a| {
                let mut page = vec![0u8; size].into_boxed_slice();
                self.read(a, &mut page).then_some(page)
            })
            .collect()
    }

    /// The pages this memory has read so far, when it keeps them (a page cache); else
    /// none.
    fn pages_read(&self) -> Vec<u64> {
        Vec::new()
    }

    /// Reads the pages at `addrs` now, all at once, to serve later reads from, when
    /// this memory keeps pages (a page cache); else nothing.
    fn prefetch(&self, _addrs: &[u64]) {}
}

impl<M: Memory + ?Sized> Memory for &M {
    fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        (**self).read(addr, buf)
    }

    fn read_pages(&self, addrs: &[u64], size: usize) -> Vec<Option<Box<[u8]>>> {
        (**self).read_pages(addrs, size)
    }

    fn pages_read(&self) -> Vec<u64> {
        (**self).pages_read()
    }

    fn prefetch(&self, addrs: &[u64]) {
        (**self).prefetch(addrs)
    }
}

/// A live process, read with `process_vm_readv` (see [`crate::sys::ProcessMemory`]).
#[cfg(target_os = "linux")]
impl Memory for crate::sys::ProcessMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        crate::sys::ProcessMemory::read(self, addr, buf)
    }

    fn read_pages(&self, addrs: &[u64], size: usize) -> Vec<Option<Box<[u8]>>> {
        crate::sys::ProcessMemory::read_pages(self, addrs, size)
    }
}

/// A sample's stack copy in front of the process's memory: reads that fall wholly in
/// `[sp, sp + stack.len())` come from the copy (the stack as it was at the sample
/// instant), every other read from `rest` (as it is now).
pub struct Overlay<'a, M> {
    /// The stack pointer at the sample: the address of `stack[0]`.
    pub sp: u64,
    /// The copied bytes.
    pub stack: &'a [u8],
    /// Everything else.
    pub rest: M,
}

impl<M: Memory> Memory for Overlay<'_, M> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        if let Some(off) = addr.checked_sub(self.sp)
            && let Ok(off) = usize::try_from(off)
            && let Some(end) = off.checked_add(buf.len())
            && end <= self.stack.len()
        {
            buf.copy_from_slice(&self.stack[off..end]);
            return true;
        }
        self.rest.read(addr, buf)
    }
}

/// Bytes of a process copied at one instant (the frames a sample's capture copied),
/// sorted by address, in front of the process as it is now: a read inside one region
/// is served from it, any other from `rest`.
pub struct AtSample<'a, M> {
    /// Each region's address and bytes, sorted by address.
    pub regions: &'a [(u64, &'a [u8])],
    /// Everything else.
    pub rest: M,
}

impl<M: Memory> Memory for AtSample<'_, M> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        // The last region starting at or below `addr`.
        let i = self.regions.partition_point(|(a, _)| *a <= addr);
        if let Some((start, bytes)) = i.checked_sub(1).and_then(|i| self.regions.get(i)) {
            let off = (addr - start) as usize;
            if let Some(src) = off
                .checked_add(buf.len())
                .and_then(|end| bytes.get(off..end))
            {
                buf.copy_from_slice(src);
                return true;
            }
        }
        self.rest.read(addr, buf)
    }
}

/// Regions of memory captured from a process, for tests: each region is an address
/// and its bytes. Written and read as text (`ADDR HEX` per line, addresses in hex) so
/// fixtures can live in the repository and be read in a diff.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    regions: BTreeMap<u64, Vec<u8>>,
}

impl Snapshot {
    /// Adds `bytes` at `addr` (regions must not overlap).
    pub fn insert(&mut self, addr: u64, bytes: Vec<u8>) {
        self.regions.insert(addr, bytes);
    }

    /// Each region's address and bytes, by address.
    pub fn regions(&self) -> impl Iterator<Item = (u64, &[u8])> {
        self.regions.iter().map(|(&a, b)| (a, &b[..]))
    }

    /// The snapshot as text: one region per line, `ADDR HEX`.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for (addr, bytes) in &self.regions {
            s.push_str(&format!("{addr:x} "));
            for b in bytes {
                s.push_str(&format!("{b:02x}"));
            }
            s.push('\n');
        }
        s
    }

    /// Reads [`Snapshot::to_text`]'s output; None if a line is not `ADDR HEX`.
    pub fn from_text(text: &str) -> Option<Snapshot> {
        let mut snap = Snapshot::default();
        for line in text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let (addr, hex) = line.split_once(' ')?;
            let addr = u64::from_str_radix(addr, 16).ok()?;
            if hex.len() % 2 != 0 {
                return None;
            }
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
                .collect::<Option<Vec<u8>>>()?;
            snap.insert(addr, bytes);
        }
        Some(snap)
    }
}

impl Memory for Snapshot {
    fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        let Some((start, bytes)) = self.regions.range(..=addr).next_back() else {
            return false;
        };
        let off = (addr - start) as usize;
        match off.checked_add(buf.len()) {
            Some(end) if end <= bytes.len() => {
                buf.copy_from_slice(&bytes[off..end]);
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_copied_at_the_sample_come_before_the_process() {
        let mut now = Snapshot::default();
        now.insert(0x1000, vec![1; 0x100]);
        let (sevens, nines) = ([7u8; 16], [9u8; 8]);
        let regions = [(0x1010, &sevens[..]), (0x1040, &nines[..])];
        let m = AtSample {
            regions: &regions,
            rest: &now,
        };
        assert_eq!(m.u64_at(0x1010), Some(0x0707_0707_0707_0707));
        assert_eq!(m.u64_at(0x1018), Some(0x0707_0707_0707_0707));
        assert_eq!(m.u64_at(0x1040), Some(0x0909_0909_0909_0909));
        // Past a region's end, or across it: the process as it is now.
        assert_eq!(m.u64_at(0x1020), Some(0x0101_0101_0101_0101));
        assert_eq!(m.u64_at(0x101c), Some(0x0101_0101_0101_0101));
        assert_eq!(m.u64_at(0x1000), Some(0x0101_0101_0101_0101));
        assert_eq!(m.u64_at(0x2000), None);
    }

    #[test]
    fn snapshots_read_whole_values_or_nothing() {
        let mut s = Snapshot::default();
        s.insert(0x1000, (0u8..16).collect());
        assert_eq!(s.u32_at(0x1004), Some(u32::from_le_bytes([4, 5, 6, 7])));
        assert_eq!(s.u64_at(0x1009), None, "runs past the region");
        assert_eq!(s.u64_at(0xff8), None, "before the region");
        let back = Snapshot::from_text(&s.to_text()).unwrap();
        assert_eq!(back, s);
        assert_eq!(Snapshot::from_text("10 abc"), None);
    }

    #[test]
    fn c_strings_are_bounded() {
        let mut s = Snapshot::default();
        let mut hello = b"hello\0world".to_vec();
        hello.resize(64, 0);
        s.insert(0x2000, hello);
        s.insert(0x3000, vec![b'a'; 256]);
        assert_eq!(s.c_string_at(0x2000, 16), Some(b"hello".to_vec()));
        assert_eq!(s.c_string_at(0x2000, 4), None, "longer than allowed");
        assert_eq!(s.c_string_at(0x3000, 1000), None, "no NUL before the end");
    }

    #[test]
    fn the_stack_copy_hides_what_the_process_holds_now() {
        let mut now = Snapshot::default();
        now.insert(0x7000, vec![0xee; 64]);
        let copy = [1u8, 2, 3, 4, 5, 6, 7, 8];
        let o = Overlay {
            sp: 0x7010,
            stack: &copy,
            rest: &now,
        };
        assert_eq!(o.u64_at(0x7010), Some(u64::from_le_bytes(copy)));
        assert_eq!(o.u32_at(0x7000), Some(0xeeee_eeee));
        // Straddling the copy's end: served by the process, whole.
        assert_eq!(o.u64_at(0x7014), Some(0xeeee_eeee_eeee_eeee));
    }
}
