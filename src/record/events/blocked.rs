//! The stacks of threads already blocked when `record --off-cpu` attaches, read
//! from /proc as `profile dump` reads them, without stopping the threads.

use super::*;
use crate::interp::jvm::HeapCode;

impl EventHandler {
    /// The user stack of thread `tid` of `pid` blocked in a system call now, read as
    /// `profile dump` reads it, without stopping it: its user SP and PC from
    /// /proc/PID/task/TID/syscall, its stack from /proc/PID/mem, unwound like a
    /// sample's (`--off-cpu`: threads already blocked at the attach; with `site`, its
    /// user PC and SP, a long wait whose switch-out had no stack copy). None when it
    /// is not blocked in a system call (at `site`) or moved on while it was read.
    pub(crate) fn stack_of_blocked(
        &mut self,
        pid: u32,
        tid: u32,
        site: Option<(u64, u64)>,
    ) -> Option<StackId> {
        use crate::process::task::{SyscallLine, read_syscall};
        use std::os::unix::fs::FileExt;
        const MOST: usize = 64 * 1024;
        let line = read_syscall(pid, tid)?;
        let SyscallLine::Blocked { sp, pc, .. } = line else {
            return None;
        };
        if site.is_some_and(|s| s != (pc, sp)) {
            return None;
        }
        let mem = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
        let mut bytes = vec![0u8; MOST];
        // A stack shorter than MOST ends in an unmapped page: read what there is.
        let mut n = 0;
        while n < MOST {
            match mem.read_at(&mut bytes[n..], sp + n as u64) {
                Ok(0) | Err(_) => break,
                Ok(k) => n += k,
            }
        }
        bytes.truncate(n);
        // The stack belongs to these registers only if the thread is still there.
        if n == 0 || read_syscall(pid, tid) != Some(line) {
            return None;
        }
        let empty = Space::default();
        let space = self.bind.spaces.space(pid).unwrap_or(&empty);
        let lookup = Lookup {
            space,
            jit: self.jit.get(pid),
            java: None,
        };
        // No drain has met this stack's code: a JVM's is found in its code heaps now.
        let lookup = HeapCode::new(&lookup, &self.runtimes.java, pid);
        // /proc gives no rbp: unwound without it first, then, if that stops short,
        // from the frame-pointer chain found on the stack, as `dump` does (a frame
        // whose CFI needs rbp before any frame restored it).
        let end = self.stacks.from_registers(pc, sp, None, &bytes, &lookup);
        let copy = crate::unwind::StackCopy { sp, bytes: &bytes };
        let in_code = |a: u64| space.find(a).is_some_and(|(_, m)| m.module.is_some());
        if end != crate::unwind::UnwindEnd::Complete
            && let Some(bp) = crate::unwind::frame_chain_base(&copy, in_code)
        {
            let first = self.stacks.addrs().len();
            self.stacks
                .from_registers(pc, sp, Some(bp), &bytes, &lookup);
            if self.stacks.addrs().len() < first {
                self.stacks.from_registers(pc, sp, None, &bytes, &lookup);
            }
        }
        let frames = self.stacks.finish(pid, &self.bind.spaces);
        self.writer.intern_stack(frames)
    }

    /// Reads from /proc the stacks of threads blocked for a while (since before
    /// `before`) whose switch-out had no stack copy and whose site had none yet (at
    /// most a few a round: a few hundred microseconds each).
    pub(crate) fn stack_long_waits(&mut self, before: u64) {
        const MOST_A_ROUND: usize = 8;
        // Frame-pointer mode: every switch-out sample has its whole stack.
        let Some(o) = self.off_cpu.as_ref().filter(|_| self.dwarf) else {
            return;
        };
        for (pid, tid, site) in o.tracker.unstacked_waits(before, MOST_A_ROUND) {
            let stack = self.stack_of_blocked(pid, tid, Some(site));
            if let Some(o) = &mut self.off_cpu {
                o.tracker.blocked_stack(tid, stack);
            }
        }
    }
}
