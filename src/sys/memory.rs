//! Reading a target's memory with `process_vm_readv`: no file descriptor is held, the
//! target is never stopped, and a read of memory the target unmapped fails cleanly.
//! The pid is checked against the process's start time, so memory is never read from
//! a process that reused the pid of the one asked for.

/// The memory of one live process.
#[derive(Debug)]
pub(crate) struct ProcessMemory {
    pid: u32,
    /// Start time (field 22 of /proc/PID/stat) of the process asked for.
    start: Option<u64>,
}

/// A process's start time in clock ticks since boot (field 22 of /proc/PID/stat).
pub(crate) fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The name (field 2) may hold spaces and parentheses: fields follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// When process `pid` started, on the wall clock: its start time (clock ticks of
/// the boot-time clock) after the moment the machine booted (the wall clock less the
/// boot-time clock, now). Good to a clock tick (10 ms at 100 Hz).
pub(crate) fn started_at(pid: u32) -> Option<std::time::SystemTime> {
    let ticks = start_time(pid)?;
    // SAFETY: sysconf has no memory effects.
    let hz = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) })
        .ok()
        .filter(|&h| h > 0)?;
    let clock = |id| {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: ts is a valid timespec.
        unsafe { libc::clock_gettime(id, &mut ts) };
        std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    };
    let booted = std::time::UNIX_EPOCH
        .checked_add(clock(libc::CLOCK_REALTIME))?
        .checked_sub(clock(libc::CLOCK_BOOTTIME))?;
    let since_boot = std::time::Duration::from_nanos(
        u64::try_from(u128::from(ticks) * 1_000_000_000 / u128::from(hz)).ok()?,
    );
    booted.checked_add(since_boot)
}

impl ProcessMemory {
    /// The memory of `pid` as it is now; None if the process is gone.
    pub(crate) fn open(pid: u32) -> Option<ProcessMemory> {
        let start = start_time(pid)?;
        Some(ProcessMemory {
            pid,
            start: Some(start),
        })
    }

    /// The process this reads.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the pid still names the process opened (not one that reused it).
    pub(crate) fn same_process(&self) -> bool {
        self.start.is_some() && start_time(self.pid) == self.start
    }
}

impl ProcessMemory {
    /// Fills `buf` from `addr` in the process; false if any byte of it could not be
    /// read (what `crate::interp::Memory::read` is for a live process).
    pub(crate) fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        if buf.is_empty() {
            return true;
        }
        let local = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let remote = libc::iovec {
            iov_base: addr as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: `local` describes `buf`, which is valid for writes of its length and
        // borrowed mutably for the call; `remote` is only an address in another
        // process, which the kernel checks (a bad one fails with EFAULT).
        let n =
            unsafe { libc::process_vm_readv(self.pid as libc::pid_t, &local, 1, &remote, 1, 0) };
        n == buf.len() as isize
    }

    /// One `process_vm_readv` for all the pages (in batches of the kernel's iovec
    /// limit), where reading them one by one took a system call each. The kernel
    /// stops at the first page it cannot read: that one is None, and the rest are
    /// read on from the next.
    pub(crate) fn read_pages(&self, addrs: &[u64], size: usize) -> Vec<Option<Box<[u8]>>> {
        const MOST: usize = 1024; // IOV_MAX
        let mut bufs: Vec<Box<[u8]>> = addrs.iter().map(|_| vec![0u8; size].into()).collect();
        let mut ok = vec![false; addrs.len()];
        let mut from = 0;
        while from < addrs.len() {
            let upto = (from + MOST).min(addrs.len());
            let local: Vec<libc::iovec> = bufs[from..upto]
                .iter_mut()
                .map(|b| libc::iovec {
                    iov_base: b.as_mut_ptr().cast(),
                    iov_len: b.len(),
                })
                .collect();
            let remote: Vec<libc::iovec> = addrs[from..upto]
                .iter()
                .map(|&a| libc::iovec {
                    iov_base: a as *mut libc::c_void,
                    iov_len: size,
                })
                .collect();
            // SAFETY: each local iovec describes one of `bufs`, valid for writes of its
            // length and not otherwise borrowed during the call; the remote ones are
            // only addresses in another process, which the kernel checks.
            let n = unsafe {
                libc::process_vm_readv(
                    self.pid as libc::pid_t,
                    local.as_ptr(),
                    local.len() as libc::c_ulong,
                    remote.as_ptr(),
                    remote.len() as libc::c_ulong,
                    0,
                )
            };
            let whole = if n > 0 { n as usize / size.max(1) } else { 0 };
            for flag in &mut ok[from..from + whole.min(upto - from)] {
                *flag = true;
            }
            // The page after the last one read whole failed (or the call did): skip it.
            from += whole + 1;
        }
        bufs.into_iter()
            .zip(ok)
            .map(|(b, ok)| ok.then_some(b))
            .collect()
    }
}

/// Asks the kernel to back the whole pages of `bytes` with transparent huge pages
/// (`MADV_HUGEPAGE`): a large buffer filled in part (a module's tables,
/// `elf::read_module`) then faults once per 2 MiB, not per 4 KiB. Whether the kernel
/// took the advice (a kernel without huge pages refuses it).
pub(crate) fn advise_huge_pages(bytes: &mut [u8]) -> bool {
    const PAGE: usize = 4096;
    let at = bytes.as_mut_ptr() as usize;
    let start = at.next_multiple_of(PAGE);
    let end = (at + bytes.len()) & !(PAGE - 1);
    if start >= end {
        return false;
    }
    // SAFETY: [start, end) lies within `bytes`, memory this process owns and holds
    // borrowed mutably; the advice changes how it is backed, never its contents.
    unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::Memory;

    #[test]
    fn reads_our_own_memory_and_fails_on_unmapped() {
        let value: u64 = 0x1122_3344_5566_7788;
        let me = ProcessMemory::open(std::process::id()).unwrap();
        assert!(me.same_process());
        assert_eq!(me.u64_at(&value as *const u64 as u64), Some(value));
        assert_eq!(me.u64_at(8), None);
    }

    /// Pages read in one call: a page that cannot be read is None and those after it
    /// are still read.
    #[test]
    fn reads_pages_in_one_go_past_an_unreadable_one() {
        let data: Vec<u8> = (0..3 * 4096u32).map(|i| (i / 4096 + 1) as u8).collect();
        let base = (data.as_ptr() as u64 + 4095) & !4095;
        let me = ProcessMemory::open(std::process::id()).unwrap();
        let got = me.read_pages(&[base, 8, base], 4096);
        assert_eq!(got.len(), 3);
        let first = got[0].as_ref().unwrap();
        let at = (base - data.as_ptr() as u64) as usize;
        assert_eq!(&first[..], &data[at..at + 4096]);
        assert!(got[1].is_none());
        assert_eq!(got[2].as_deref(), got[0].as_deref());
    }
}
