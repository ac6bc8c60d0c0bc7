//! What `/proc` says about one thread without stopping it, read and parsed: its state
//! letter and name (`stat`), the system call it is blocked in with its user stack
//! pointer and instruction pointer (`syscall`), the kernel stack it sleeps on
//! (`stack`, root only) and the kernel function it waits in (`wchan`). Parsers are
//! pure functions, tested on text.

use std::io;

/// Where a thread is, by `/proc/PID/task/TID/syscall`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SyscallLine {
    /// `running`: on a CPU (or about to be); its registers are not in /proc.
    Running,
    /// Blocked in system call `nr` (or, with `nr` None, off the CPU outside any
    /// system call, e.g. in a page fault), with its user stack pointer and the user
    /// instruction after the `syscall` instruction.
    Blocked {
        /// The system call number (x86_64 numbering), None for `-1`.
        nr: Option<i64>,
        /// User stack pointer.
        sp: u64,
        /// User instruction pointer.
        pc: u64,
    },
}

/// Parses `/proc/PID/task/TID/syscall`: `running`, or `NR ARG1..ARG6 SP PC` (hex
/// arguments, sp and pc), or `-1 SP PC` outside a system call.
pub(crate) fn parse_syscall(text: &str) -> Option<SyscallLine> {
    let text = text.trim();
    if text == "running" {
        return Some(SyscallLine::Running);
    }
    let fields: Vec<&str> = text.split_whitespace().collect();
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    let nr: i64 = fields.first()?.parse().ok()?;
    let (sp, pc) = match fields.len() {
        3 if nr < 0 => (hex(fields[1])?, hex(fields[2])?),
        9 if nr >= 0 => (hex(fields[7])?, hex(fields[8])?),
        _ => return None,
    };
    Some(SyscallLine::Blocked {
        nr: (nr >= 0).then_some(nr),
        sp,
        pc,
    })
}

/// The kernel function names of `/proc/PID/task/TID/stack`, leaf first
/// (`[<0>] do_nanosleep+0x6c/0x130` lines).
pub(crate) fn parse_kernel_stack(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let name = l.split_once("] ").map_or(l, |(_, n)| n).trim();
            let name = name.split('+').next()?.trim();
            (!name.is_empty()).then(|| name.to_owned())
        })
        .collect()
}

/// The state letter and name of a thread from its `stat` line.
pub(crate) fn parse_stat(text: &str) -> Option<(char, String)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let name = text.get(open + 1..close)?.to_owned();
    let letter = text
        .get(close + 1..)?
        .split_whitespace()
        .next()?
        .chars()
        .next()?;
    Some((letter, name))
}

/// A system call's name (x86_64), for the few that threads usually block in.
pub(crate) fn syscall_name(nr: i64) -> Option<&'static str> {
    if !cfg!(target_arch = "x86_64") {
        return None;
    }
    Some(match nr {
        0 => "read",
        1 => "write",
        7 => "poll",
        17 => "pread64",
        18 => "pwrite64",
        19 => "readv",
        20 => "writev",
        23 => "select",
        35 => "nanosleep",
        43 => "accept",
        44 => "sendto",
        45 => "recvfrom",
        46 => "sendmsg",
        47 => "recvmsg",
        61 => "wait4",
        74 => "fsync",
        202 => "futex",
        230 => "clock_nanosleep",
        232 => "epoll_wait",
        270 => "pselect6",
        271 => "ppoll",
        281 => "epoll_pwait",
        288 => "accept4",
        441 => "epoll_pwait2",
        _ => return None,
    })
}

/// What one thread's `/proc` entries say now.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProcThread {
    /// The state letter (`R`, `S`, `D`, `T`, `t`, `Z`, ...).
    pub letter: char,
    /// Its name (comm).
    pub name: String,
    /// The `syscall` line, None when unreadable.
    pub syscall: Option<SyscallLine>,
    /// Kernel stack, leaf first; empty when not readable (not root).
    pub kernel_stack: Vec<String>,
    /// The kernel function it waits in (`wchan`), when /proc says.
    pub wchan: Option<String>,
}

/// Reads a thread's `/proc` entries; an error when the thread is gone.
pub(crate) fn read_thread(pid: u32, tid: u32) -> io::Result<ProcThread> {
    let dir = format!("/proc/{pid}/task/{tid}");
    let stat = super::read_proc_text(format!("{dir}/stat"))?;
    let (letter, name) = parse_stat(&stat)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "malformed stat line"))?;
    let syscall = read_syscall(pid, tid);
    let kernel_stack = std::fs::read_to_string(format!("{dir}/stack"))
        .map(|t| parse_kernel_stack(&t))
        .unwrap_or_default();
    let wchan = std::fs::read_to_string(format!("{dir}/wchan"))
        .ok()
        .map(|w| w.trim().to_owned())
        .filter(|w| !w.is_empty() && w != "0");
    Ok(ProcThread {
        letter,
        name,
        syscall,
        kernel_stack,
        wchan,
    })
}

/// Reads and parses a thread's `syscall` line.
pub(crate) fn read_syscall(pid: u32, tid: u32) -> Option<SyscallLine> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/syscall"))
        .ok()
        .and_then(|t| parse_syscall(&t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syscall_lines() {
        assert_eq!(parse_syscall("running\n"), Some(SyscallLine::Running));
        assert_eq!(
            parse_syscall(
                "202 0x55d0c7a04040 0x80 0x2 0x0 0x0 0x0 0x7f3a2b1fed40 0x7f3a2c291d61\n"
            ),
            Some(SyscallLine::Blocked {
                nr: Some(202),
                sp: 0x7f3a2b1fed40,
                pc: 0x7f3a2c291d61
            })
        );
        assert_eq!(
            parse_syscall("-1 0x7ffd1000 0x401000\n"),
            Some(SyscallLine::Blocked {
                nr: None,
                sp: 0x7ffd1000,
                pc: 0x401000
            })
        );
        assert_eq!(parse_syscall(""), None);
        assert_eq!(parse_syscall("202 0x1 0x2"), None);
        assert_eq!(parse_syscall("x 0x1 0x2"), None);
    }

    #[test]
    fn kernel_stacks() {
        let text = "[<0>] futex_wait_queue+0x60/0x90\n[<0>] __futex_wait+0x13f/0x1b0\n\
                    [<0>] entry_SYSCALL_64_after_hwframe+0x76/0x7e\n";
        assert_eq!(
            parse_kernel_stack(text),
            [
                "futex_wait_queue",
                "__futex_wait",
                "entry_SYSCALL_64_after_hwframe"
            ]
        );
        assert!(parse_kernel_stack("").is_empty());
    }

    #[test]
    fn stat_lines() {
        assert_eq!(
            parse_stat("4243 (spin a) (x)) R 1 2 3"),
            Some(('R', "spin a) (x)".to_owned()))
        );
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn own_thread() {
        let me = std::process::id();
        // This test's own thread (the main thread waits for the harness): PID/task/TID.
        let link = std::fs::read_link("/proc/thread-self").unwrap();
        let tid: u32 = link.file_name().unwrap().to_str().unwrap().parse().unwrap();
        let t = read_thread(me, tid).unwrap();
        // Reading our own entries while running: the kernel shows the calling thread
        // in the system call that reads its `syscall` file (read, 0).
        assert_eq!(t.letter, 'R');
        assert!(
            matches!(t.syscall, Some(SyscallLine::Blocked { nr: Some(0), sp, .. }) if sp != 0),
            "{:?}",
            t.syscall
        );
    }
}
