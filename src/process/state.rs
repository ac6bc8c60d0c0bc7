//! The state of a thread already off the CPU when `record --off-cpu` attaches (and
//! of a blocked thread in `profile dump`): read from /proc, its state letter and the
//! system call it is blocked in.

use crate::format::ThreadState;

/// The state of a thread of `pid` that is off the CPU now, from /proc: its state
/// letter and the system call it is blocked in. None when it is running or runnable
/// (`R`) or gone.
pub(crate) fn state_now(pid: u32, tid: u32) -> Option<ThreadState> {
    let stat = super::read_proc_text(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    // The state letter follows the `(comm)`, which may itself hold spaces and `)`.
    let letter = stat.rsplit_once(')')?.1.split_whitespace().next()?;
    if letter == "R" {
        return None;
    }
    let syscall = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/syscall")).ok();
    let nr = syscall
        .as_deref()
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse::<i64>().ok());
    Some(match (letter, nr) {
        ("D", _) => ThreadState::Io,
        (_, Some(n)) => syscall_state(n),
        _ => ThreadState::Other,
    })
}

/// The state a thread blocked in system call `nr` (x86_64 numbers) is in.
pub(crate) fn syscall_state(nr: i64) -> ThreadState {
    if !cfg!(target_arch = "x86_64") {
        return ThreadState::Other;
    }
    match nr {
        202 => ThreadState::Lock,              // futex
        35 | 230 => ThreadState::Sleep,        // nanosleep, clock_nanosleep
        // epoll_wait, epoll_pwait, epoll_pwait2: an event loop's idle wait, as its
        // kernel frames (`do_epoll_wait`) say when it blocks while recorded.
        232 | 281 | 441 => ThreadState::Wait,
        0 | 1 | 17 | 18 | 19 | 20 | 295 | 296 // read, write, pread64, pwrite64, readv, writev, preadv, pwritev
        | 7 | 23 | 270 | 271                   // poll, select, pselect6, ppoll
        | 42 | 43 | 44 | 45 | 46 | 47 | 288    // connect, accept, sendto, recvfrom, sendmsg, recvmsg, accept4
        | 74 | 75 | 299 | 307 => ThreadState::Io, // fsync, fdatasync, recvmmsg, sendmmsg
        _ => ThreadState::Other,
    }
}
