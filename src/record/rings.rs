//! The per-CPU ring buffers and putting their records back in time order.
//!
//! Each CPU has one ring, owned by a dummy event of the recorder's own, into which
//! every target event of that CPU is redirected. Records of different rings interleave
//! in time, so [`Reorder`] buffers them and hands them out in time order once no ring
//! can still hold an earlier one.

use super::sys::{self, EventFd, Ring};
use super::{RecordError, RecordOptions, kernel_error, read_sysctl};
use crate::replay::decode::{Layouts, Record, split_records};

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

    /// Moves every complete record out of the rings into the buffer, each filed
    /// under its time as `layouts` say where it is; returns how many records were
    /// buffered before (the new ones follow them).
    pub fn drain(&mut self, rings: &mut [CpuRing], layouts: &Layouts) -> usize {
        let before = self.index.len();
        for r in rings {
            let start = self.raw.len();
            r.ring.drain_into(&mut self.raw);
            let mut off = start;
            for rec in split_records(&self.raw[start..]) {
                let len = rec.len();
                self.index.push((layouts.time(rec), off, len));
                off += len;
            }
        }
        before
    }

    /// Shows `look` the records buffered from index `from` on (in drain order).
    pub fn peek_from(&self, from: usize, layouts: &Layouts, mut look: impl FnMut(Record)) {
        for &(_, off, len) in self.index.get(from..).unwrap_or_default() {
            if let Ok(rec) = layouts.decode(&self.raw[off..off + len]) {
                look(rec);
            }
        }
    }

    /// Hands the buffered records with time <= `upto` to `handle` in time order (an
    /// undecodable one to `bad`), and keeps the rest. `handle` may refuse a record
    /// (return false): it and every later one are kept, and its time is returned.
    /// `layouts`: how each event's records are laid out.
    pub fn release(
        &mut self,
        upto: u64,
        layouts: &Layouts,
        mut handle: impl FnMut(Record) -> bool,
        mut bad: impl FnMut(),
    ) -> Option<u64> {
        self.index.sort_by_key(|&(t, off, _)| (t, off));
        let mut n = self.index.partition_point(|&(t, _, _)| t <= upto);
        let raw = std::mem::take(&mut self.raw);
        let index = std::mem::take(&mut self.index);
        let mut refused = None;
        for (i, &(t, off, len)) in index[..n].iter().enumerate() {
            match layouts.decode(&raw[off..off + len]) {
                Ok(rec) => {
                    if !handle(rec) {
                        refused = Some(t);
                        n = i;
                        break;
                    }
                }
                Err(_) => bad(),
            }
        }
        if n == 0 {
            // Nothing handled (a held record first): keep everything as it is.
            self.raw = raw;
            self.index = index;
            return refused;
        }
        // Keep the records not yet due, compacted.
        let mut rest = Vec::with_capacity(raw.len());
        for &(t, off, len) in &index[n..] {
            self.index.push((t, rest.len(), len));
            rest.extend_from_slice(&raw[off..off + len]);
        }
        self.raw = rest;
        refused
    }

    /// Bytes of records buffered.
    pub fn buffered(&self) -> usize {
        self.raw.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perf_event_open_sys::bindings as b;

    /// A COMM record of thread `tid` at `time`, in the kernel's layout.
    fn comm(tid: u32, time: u64) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&1u32.to_le_bytes());
        body.extend_from_slice(&tid.to_le_bytes());
        body.extend_from_slice(b"t\0\0\0\0\0\0\0");
        for v in [1u32, tid] {
            body.extend_from_slice(&v.to_le_bytes());
        }
        body.extend_from_slice(&time.to_le_bytes());
        body.extend_from_slice(&[0; 8]); // cpu, reserved
        body.extend_from_slice(&7u64.to_le_bytes()); // identifier
        let mut r = Vec::new();
        r.extend_from_slice(&b::PERF_RECORD_COMM.to_le_bytes());
        r.extend_from_slice(&0u16.to_le_bytes());
        r.extend_from_slice(&((8 + body.len()) as u16).to_le_bytes());
        r.extend_from_slice(&body);
        r
    }

    /// The recorder's own layout, for CPU samples.
    fn layouts() -> Layouts {
        Layouts::one(sys::sample_layout(&sys::EventConfig {
            period_ns: 1_000_000,
            stack_size: 0,
            kernel: true,
            enable_on_exec: false,
            exact: false,
        }))
    }

    fn buffer(times: &[u64]) -> Reorder {
        let mut r = Reorder::new();
        for (i, &t) in times.iter().enumerate() {
            let rec = comm(i as u32 + 10, t);
            r.index.push((layouts().time(&rec), r.raw.len(), rec.len()));
            r.raw.extend_from_slice(&rec);
        }
        r
    }

    fn time(rec: &Record) -> u64 {
        match rec {
            Record::Comm { time, .. } => *time,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_refused_record_and_all_after_it_come_again() {
        let mut r = buffer(&[30, 10, 20, 50]);
        let mut seen = Vec::new();
        // Up to 40, refusing the record at 20: 10 handled, 20 and 30 kept (50 is not due).
        let plain = layouts();
        let held = r.release(
            40,
            &plain,
            |rec| {
                let t = time(&rec);
                if t == 20 {
                    return false;
                }
                seen.push(t);
                true
            },
            || panic!("bad record"),
        );
        assert_eq!(held, Some(20));
        assert_eq!(seen, [10]);
        // Refused first: nothing moves.
        let before = r.buffered();
        assert_eq!(r.release(40, &plain, |_| false, || ()), Some(20));
        assert_eq!(r.buffered(), before);
        // Accepted now: in time order, then the rest when due.
        let mut seen = Vec::new();
        assert_eq!(
            r.release(
                u64::MAX,
                &plain,
                |rec| {
                    seen.push(time(&rec));
                    true
                },
                || ()
            ),
            None
        );
        assert_eq!(seen, [20, 30, 50]);
        assert_eq!(r.buffered(), 0);
    }
}
