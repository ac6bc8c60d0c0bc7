//! The per-CPU ring buffers.
//!
//! Each CPU has one ring, owned by a dummy event of the recorder's own, into which
//! every target event of that CPU is redirected. Records of different rings interleave
//! in time: [`Reorder`](super::reorder::Reorder) hands them out in time order.

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
        // Woken at each quarter: records wait in the ring for the next round (see
        // `Reorder`), so a round's worth stays in it while the next one comes.
        let wakeup = (pages * page / 4).min(u32::MAX as usize) as u32;
        let owner = EventFd::open_ring_owner(cpu as i32, wakeup)
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
