//! Reading a target's memory with `process_vm_readv`: no file descriptor is held, the
//! target is never stopped, and a read of memory the target unmapped fails cleanly.
//! The pid is checked against the process's start time, so memory is never read from
//! a process that reused the pid of the one asked for.

use crate::interp::Memory;

/// The memory of one live process.
#[derive(Debug)]
pub struct ProcessMemory {
    pid: u32,
    /// Start time (field 22 of /proc/PID/stat) of the process asked for.
    start: Option<u64>,
}

/// A process's start time in clock ticks since boot (field 22 of /proc/PID/stat).
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The name (field 2) may hold spaces and parentheses: fields follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

impl ProcessMemory {
    /// The memory of `pid` as it is now; None if the process is gone.
    pub fn open(pid: u32) -> Option<ProcessMemory> {
        let start = start_time(pid)?;
        Some(ProcessMemory {
            pid,
            start: Some(start),
        })
    }

    /// The process this reads.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the pid still names the process opened (not one that reused it).
    pub fn same_process(&self) -> bool {
        self.start.is_some() && start_time(self.pid) == self.start
    }
}

impl Memory for ProcessMemory {
    #[allow(unsafe_code)]
    fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_our_own_memory_and_fails_on_unmapped() {
        let value: u64 = 0x1122_3344_5566_7788;
        let me = ProcessMemory::open(std::process::id()).unwrap();
        assert!(me.same_process());
        assert_eq!(me.u64_at(&value as *const u64 as u64), Some(value));
        assert_eq!(me.u64_at(8), None);
    }
}
