//! Interpreter frames copied at the sample instant, in the kernel: the part of the
//! sampling events' BPF program ([`super::ThreadFilter`]) that, for a thread the
//! recorder registered, follows its chain of interpreter frames from its thread state
//! and writes the first bytes of each frame into a record of the CPU's `bpf-output`
//! event, redirected into that CPU's ring just before the sample's own record.
//!
//! Why: an interpreter's frames live in its memory, not on the native stack the
//! sample copies, and CPython reuses a returned call's frame at once (3.11+: its slot
//! of the data stack; 3.8–3.10: its frame object, kept by the code object for the
//! next call). Read from outside after the sample (however soon), a fast-changing chain
//! is often no longer the sample's (docs/runtimes.md); read by the program while the
//! sampled thread is interrupted, it is exactly the sample's, and the recorder needs
//! no wake-up per sample to read it in time.
//!
//! What the recorder registers per thread ([`StackCapture::register`]): where its
//! thread state is, the offset there of the pointer to its innermost frame (or to a
//! structure holding it, at a second offset: 3.11 and 3.12's `_PyCFrame`), which
//! bytes of a frame to copy (3.11+: a `_PyInterpreterFrame`'s first 72; 3.8–3.10: a
//! frame object's from `f_back` to `f_lasti`) and where the caller's frame is in
//! them. The program, in outline:
//!
//! ```text
//! entry = threads[tid] or keep            ; not registered: the sample as it is
//! buf = scratch[0] or keep                ; a per-CPU buffer
//! p = *(tstate + first); [p = *(p + second)]  (bpf_probe_read_user)
//! for i in 0..MAX_FRAMES while p != 0:
//!     slot i = p, then len bytes read at p + skip   (stop at the first fault)
//!     p = the caller's frame, from the slot's bytes
//! bpf_perf_event_output(buf: header + i slots); keep
//! ```
//!
//! Nothing read is trusted: a thread state that is not the thread's, a chain cut by
//! a fault or by [`MAX_FRAMES`], bytes of a frame being written: the recorder checks
//! each chain as it checks one it reads itself (`replay::python`). The program only
//! reads the target's memory, a bounded number of times.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use super::asm::Map;
use super::capture_program::CaptureMaps;
use super::filter::ThreadFilter;
use super::layout::{COPY, ENTRY, Entry, Field, HEADER, Header, MAX_FRAMES, SLOT, SLOT_BYTES};
use super::syscall::{self, MapKind};
use crate::sys::perf::EventFd;

/// Where a registered thread's chain starts and how it is followed: the words the
/// program reads are at offsets the interpreter's reader gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChainEntry {
    /// The thread state's address.
    pub tstate: u64,
    /// The offset there of the pointer read first.
    pub first: u64,
    /// The offset of the innermost frame's pointer in what the first points to.
    pub second: Option<u64>,
    /// The offset of the caller's frame pointer in a frame.
    pub previous: u64,
    /// Where in a frame the bytes copied start.
    pub skip: u64,
    /// How many bytes of a frame are copied.
    pub len: u64,
}

/// A chain as the program copied it at a sample instant (a capture record's fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CopiedChain {
    pub tid: u32,
    pub tstate: u64,
    /// The pointers read from the thread state (0: not read).
    pub first: u64,
    pub second: u64,
    /// Each frame's address and the bytes copied of it, innermost first.
    pub frames: Vec<(u64, [u8; COPY])>,
}
/// Threads registered at most: a thread beyond is read from outside.
const CAPACITY: u32 = 16_384;

/// The maps and events of the capture.
#[derive(Debug)]
pub(crate) struct StackCapture {
    threads: OwnedFd,
    scratch: OwnedFd,
    out: OwnedFd,
    /// The `bpf-output` event of each CPU, redirected into its ring.
    events: Vec<EventFd>,
}

impl StackCapture {
    /// Creates the maps and opens one `bpf-output` event per CPU of `cpus`, each
    /// redirected into the ring of `owners` at the same index, enabled.
    pub(crate) fn new(cpus: &[u32], owners: &[&EventFd]) -> io::Result<StackCapture> {
        let threads = syscall::create_map(MapKind::Hash, 4, ENTRY as u32, CAPACITY)?;
        let record = (HEADER + MAX_FRAMES * SLOT) as u32;
        let scratch = syscall::create_map(MapKind::PercpuArray, 4, record, 1)?;
        let slots = cpus.iter().max().map_or(1, |&c| c + 1);
        let out = syscall::create_map(MapKind::PerfEventArray, 4, 4, slots)?;
        let mut events = Vec::with_capacity(cpus.len());
        for (&cpu, owner) in cpus.iter().zip(owners) {
            let ev = EventFd::open_bpf_output(cpu as i32)?;
            ev.set_output(owner)?;
            let fd = ev.raw() as u32;
            syscall::update(&out, &cpu.to_le_bytes(), &fd.to_le_bytes())?;
            ev.enable()?;
            events.push(ev);
        }
        Ok(StackCapture {
            threads,
            scratch,
            out,
            events,
        })
    }

    /// The thread filter's program with this capture's part: see
    /// [`ThreadFilter`].
    pub(crate) fn filter(&self) -> io::Result<ThreadFilter> {
        ThreadFilter::with_capture(Some(self.maps()))
    }

    /// The maps, as the program names them.
    fn maps(&self) -> CaptureMaps {
        let map = |name, fd: &OwnedFd| Map {
            name,
            fd: fd.as_raw_fd(),
        };
        CaptureMaps {
            threads: map("threads", &self.threads),
            scratch: map("scratch", &self.scratch),
            out: map("out", &self.out),
        }
    }

    /// The ids of the `bpf-output` events: their samples are the captures.
    pub(crate) fn event_ids(&self) -> Vec<u64> {
        self.events.iter().filter_map(|e| e.id().ok()).collect()
    }

    /// Copies thread `tid`'s chain at each of its samples from now on, as `start`
    /// says: from the pointer at `tstate + first` (then at `second` in what it points
    /// to, if given), `len` bytes of each frame from `skip` in it, each frame's
    /// caller at `previous` in it.
    pub(crate) fn register(&self, tid: u32, start: &ChainEntry) -> io::Result<()> {
        let v = entry(start).ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
        syscall::update(&self.threads, &tid.to_le_bytes(), &v)
    }

    /// Stops copying thread `tid`'s chain (it ended: its id may be reused).
    pub(crate) fn forget(&self, tid: u32) {
        let _ = syscall::delete(&self.threads, &tid.to_le_bytes());
    }
}

/// The `threads` map's value for `start`; None when an offset or length is out of
/// the program's bounds.
fn entry(start: &ChainEntry) -> Option<[u8; ENTRY]> {
    let small = |v: u64| u32::try_from(v).ok().filter(|&v| v < 1 << 16);
    let first = small(start.first)?;
    let second = small(start.second.unwrap_or(0))?;
    let skip = small(start.skip)?;
    let len = small(start.len)?;
    // The caller's pointer, in the bytes copied.
    let previous = start.previous.checked_sub(start.skip).and_then(small);
    let previous = previous.filter(|&p| p + 8 <= len && len as usize <= COPY)?;
    let mut v = [0u8; ENTRY];
    Entry::Tstate.put(&mut v, start.tstate);
    Entry::First.put(&mut v, first.into());
    Entry::Second.put(&mut v, second.into());
    Entry::Previous.put(&mut v, previous.into());
    Entry::HasSecond.put(&mut v, start.second.is_some().into());
    Entry::Skip.put(&mut v, skip.into());
    Entry::Len.put(&mut v, len.into());
    Some(v)
}

/// Parses a capture record's raw fields (see the module's doc); None when they are
/// cut short.
pub(crate) fn parse_capture(raw: &[u8]) -> Option<CopiedChain> {
    let n = (Header::Frames.get(raw)? as usize).min(MAX_FRAMES);
    let mut frames = Vec::with_capacity(n);
    for i in 0..n {
        let at = HEADER + i * SLOT;
        let address = u64::from_le_bytes(raw.get(at..at + 8)?.try_into().ok()?);
        let bytes: [u8; COPY] = raw.get(at + SLOT_BYTES..at + SLOT)?.try_into().ok()?;
        frames.push((address, bytes));
    }
    Some(CopiedChain {
        tid: Header::Tid.get(raw)? as u32,
        tstate: Header::Tstate.get(raw)?,
        first: Header::First.get(raw)?,
        second: Header::Second.get(raw)?,
        frames,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_record_parses_and_a_cut_one_does_not() {
        let mut raw = vec![0u8; HEADER + 2 * SLOT + 4];
        raw[..4].copy_from_slice(&7u32.to_le_bytes());
        raw[4..8].copy_from_slice(&2u32.to_le_bytes());
        raw[8..16].copy_from_slice(&0x1000u64.to_le_bytes());
        raw[16..24].copy_from_slice(&0x2000u64.to_le_bytes());
        raw[HEADER..HEADER + 8].copy_from_slice(&0x3000u64.to_le_bytes());
        raw[HEADER + 8] = 0xaa;
        raw[HEADER + SLOT..HEADER + SLOT + 8].copy_from_slice(&0x4000u64.to_le_bytes());
        let c = parse_capture(&raw).unwrap();
        assert_eq!((c.tid, c.tstate, c.first, c.second), (7, 0x1000, 0x2000, 0));
        assert_eq!(c.frames.len(), 2);
        assert_eq!((c.frames[0].0, c.frames[0].1[0]), (0x3000, 0xaa));
        assert_eq!(c.frames[1].0, 0x4000);
        // A record that says more frames than it holds is refused.
        raw[4..8].copy_from_slice(&3u32.to_le_bytes());
        assert_eq!(parse_capture(&raw), None);
        assert_eq!(parse_capture(&raw[..HEADER - 1]), None);
    }

    #[test]
    fn an_entry_is_laid_out_as_the_program_reads_it() {
        let start = ChainEntry {
            tstate: 0x1122_3344_5566_7788,
            first: 0x10,
            second: Some(0x20),
            previous: 0x38,
            skip: 0x8,
            len: 72,
        };
        let v = entry(&start).unwrap();
        let word = |at: usize| u32::from_le_bytes(v[at..at + 4].try_into().unwrap());
        assert_eq!(v[..8], 0x1122_3344_5566_7788u64.to_le_bytes());
        let words: Vec<u32> = (8..32).step_by(4).map(word).collect();
        assert_eq!(words, [0x10, 0x20, 0x30, 1, 0x8, 72]);
        // A caller's pointer outside the bytes copied, or too many bytes: refused.
        assert_eq!(
            entry(&ChainEntry {
                previous: 0x4c,
                ..start
            }),
            None
        );
        assert_eq!(entry(&ChainEntry { len: 96, ..start }), None);
    }
}
