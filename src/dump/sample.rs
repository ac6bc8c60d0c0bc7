//! A running thread's user registers and top of stack without stopping it: one
//! `task-clock` perf event per thread with the kernel's shortest period (10 us of that
//! thread's CPU time), a ring of its own, closed at its first sample. A thread that
//! does not run before the deadline (it blocked meanwhile, or waits for a CPU) gives
//! nothing here; the caller reads it from /proc again.

use std::collections::HashMap;
use std::io;
use std::time::{Duration, Instant};

use crate::replay::decode::{Layouts, Record, split_records};
use crate::sys::{self, EventFd, Ring};

/// One sample of a thread: its user registers (ip, sp, bp) and stack bytes from sp.
#[derive(Debug, Clone)]
pub(super) struct Sampled {
    /// rip, rsp, rbp.
    pub regs: [u64; 3],
    /// r13 (HotSpot's interpreter keeps its bytecode pointer there).
    pub r13: Option<u64>,
    /// User stack bytes from rsp.
    pub stack: Vec<u8>,
    /// rbx, rbp, r12 to r15 (for the Python stage: where the eval loop keeps its
    /// instruction pointer).
    pub callee: [u64; 6],
}

/// Ring data pages per thread: room for one whole sample (at most 64 KiB).
const RING_PAGES: usize = 32;

/// Samples each of `tids` once, waiting at most `timeout` for them to run. Threads
/// gone meanwhile are skipped; a refusal for lack of privilege is an error.
pub(super) fn sample_once(
    tids: &[u32],
    stack_size: u32,
    timeout: Duration,
) -> io::Result<HashMap<u32, Sampled>> {
    let mut open: Vec<(u32, EventFd, Ring)> = Vec::new();
    for &tid in tids {
        let fd = match EventFd::open_one_sample(tid as i32, stack_size) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => continue,
            Err(e) => return Err(e),
        };
        let ring = Ring::map(&fd, RING_PAGES)?;
        open.push((tid, fd, ring));
    }
    let layouts = Layouts::one(sys::one_sample_layout(stack_size).into());
    let deadline = Instant::now() + timeout;
    let mut got = HashMap::new();
    let mut buf = Vec::new();
    let mut ready = Vec::new();
    while !open.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let fds: Vec<i32> = open.iter().map(|(_, fd, _)| fd.raw()).collect();
        sys::poll_readable(&fds, left.as_millis().clamp(1, 20) as i32, &mut ready)?;
        // Closing an event at its first sample stops it: nothing more is taken.
        open.retain_mut(|(tid, _, ring)| {
            buf.clear();
            if ring.drain_into(&mut buf) == 0 {
                return true;
            }
            let sample = split_records(&buf).find_map(|rec| match layouts.decode(rec) {
                Ok(Record::Sample(s)) => Some(Sampled {
                    regs: s.regs?,
                    r13: s.reg(crate::replay::decode::REG_R13),
                    stack: s.stack.to_vec(),
                    callee: crate::replay::python::Copied::of(&s).regs,
                }),
                _ => None,
            });
            match sample {
                Some(s) => {
                    got.insert(*tid, s);
                    false
                }
                None => true,
            }
        });
    }
    Ok(got)
}
