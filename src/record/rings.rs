//! The per-CPU ring buffers and putting their records back in time order.
//!
//! Each CPU has one ring, owned by a dummy event of the recorder's own, into which
//! every target event of that CPU is redirected. Records of different rings interleave
//! in time, so [`Reorder`] buffers them and hands them out in time order once no ring
//! can still hold an earlier one.

use super::parse::{Record, parse_record_as, record_time, split_records};
use super::sys::{self, EventFd, Ring};
use super::{RecordError, RecordOptions, kernel_error, read_sysctl};

/// One CPU's ring buffer and the dummy event that owns it.
pub(super) struct CpuRing {
    pub owner: EventFd,
    pub ring: Ring,
}

/// Opens one ring per CPU in `cpus`, sized from the options, the mode and the
/// locked-memory limit.
pub(super) fn open_rings(
    cpus: &[u32],
    opts: &RecordOptions,
    dwarf: bool,
) -> Result<Vec<CpuRing>, RecordError> {
    let page = sys::page_size();
    let mlock_kb = read_sysctl("perf_event_mlock_kb");
    let pages = opts.ring_pages.unwrap_or_else(|| {
        // Root is exempt from the mlock limit: give dwarf mode room for bursts of
        // stack copies. Otherwise stay within perf_event_mlock_kb per CPU.
        let want: usize = if dwarf { 1024 } else { 128 };
        if sys::is_root() {
            want
        } else {
            let allowed = mlock_kb.parse::<usize>().unwrap_or(516) * 1024 / page;
            let fit = allowed.saturating_sub(1).max(1);
            want.min(1 << (usize::BITS - 1 - fit.leading_zeros()))
        }
    });
    if !pages.is_power_of_two() {
        return Err(RecordError::Invalid(format!(
            "--mmap-pages {pages} is not a power of two"
        )));
    }
    let mut rings = Vec::with_capacity(cpus.len());
    for &cpu in cpus {
        let owner = EventFd::open_ring_owner(cpu as i32)
            .map_err(|e| kernel_error(e, "open the ring-buffer event", "this process"))?;
        let ring = Ring::map(&owner, pages).map_err(|cause| RecordError::RingBuffer {
            kib: pages * page / 1024,
            mlock_kb: mlock_kb.clone(),
            cause,
        })?;
        rings.push(CpuRing { owner, ring });
    }
    Ok(rings)
}

/// Records drained from every ring, waiting to be handled in time order.
#[derive(Default)]
pub(super) struct Reorder {
    /// Raw records, each one's bytes contiguous.
    raw: Vec<u8>,
    /// (time, offset, length) of each record in `raw`.
    index: Vec<(u64, usize, usize)>,
}

impl Reorder {
    pub fn new() -> Reorder {
        Reorder {
            raw: Vec::with_capacity(1 << 20),
            index: Vec::new(),
        }
    }

    /// Moves every complete record out of the rings into the buffer.
    pub fn drain(&mut self, rings: &mut [CpuRing]) {
        for r in rings {
            let start = self.raw.len();
            r.ring.drain_into(&mut self.raw);
            let mut off = start;
            for rec in split_records(&self.raw[start..]) {
                let len = rec.len();
                self.index.push((record_time(rec), off, len));
                off += len;
            }
        }
    }

    /// Hands the buffered records with time <= `upto` to `handle` in time order (an
    /// undecodable one to `bad`), and keeps the rest.
    /// `sample_read`: samples carry their count (exact accounting).
    pub fn release(
        &mut self,
        upto: u64,
        sample_read: bool,
        mut handle: impl FnMut(Record),
        mut bad: impl FnMut(),
    ) {
        self.index.sort_by_key(|&(t, off, _)| (t, off));
        let n = self.index.partition_point(|&(t, _, _)| t <= upto);
        let raw = std::mem::take(&mut self.raw);
        let index = std::mem::take(&mut self.index);
        for &(_, off, len) in &index[..n] {
            match parse_record_as(&raw[off..off + len], sample_read) {
                Ok(rec) => handle(rec),
                Err(_) => bad(),
            }
        }
        // Keep the records not yet due, compacted.
        let mut rest = Vec::with_capacity(raw.len());
        for &(t, off, len) in &index[n..] {
            self.index.push((t, rest.len(), len));
            rest.extend_from_slice(&raw[off..off + len]);
        }
        self.raw = rest;
    }
}
