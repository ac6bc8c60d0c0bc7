//! Why a dump fails, said as what happened: a process that exited (or whose every
//! thread is a zombie) is called so, never "not permitted" with a ptrace hint, which is
//! kept for a real refusal (EACCES, EPERM). The kernel answers ESRCH or ENOENT both
//! for a process that is gone and for a zombie leader's memory, so the words come from
//! looking at the process again. Also: the live thread a process is read through.

use crate::process::{self, task};

/// Why a dump failed.
#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    /// No such process.
    #[error("no process with pid {0}")]
    NoSuchProcess(u32),
    /// Its memory or registers are not readable by this user.
    #[error(
        "not permitted to read the stacks of process {pid} ({cause})\n\
         hint: run as root or as its owner with ptrace allowed (/proc/sys/kernel/yama/ptrace_scope \
         is {scope}; CAP_SYS_PTRACE lifts it); running threads also need perf events \
         (CAP_PERFMON, or perf_event_paranoid {paranoid} lowered to 1 or less)"
    )]
    Permission {
        /// The process.
        pid: u32,
        /// /proc/sys/kernel/yama/ptrace_scope now.
        scope: String,
        /// /proc/sys/kernel/perf_event_paranoid now.
        paranoid: String,
        /// What refused.
        cause: std::io::Error,
    },
    /// Every thread of the process has exited; its parent has not reaped it yet.
    #[error(
        "process {0} has exited: every thread of it is a zombie (its parent has not reaped it)"
    )]
    Zombie(u32),
    /// The process exited while it was being read.
    #[error("process {0} exited during the dump")]
    Exited(u32),
    /// Another failure to read the process's `/proc` entries.
    #[error("cannot read process {pid}: {cause}")]
    Read {
        /// The process.
        pid: u32,
        /// What failed.
        cause: std::io::Error,
    },
    /// A kernel thread has no user stack to dump.
    #[error("process {0} is a kernel thread: it has no user stacks (see /proc/{0}/stack)")]
    KernelThread(u32),
}

/// The error for a failed read of the process's `/proc` entries: a process (or the
/// thread read through) that is gone or a zombie says so, never "not permitted"
/// (the kernel answers ESRCH or ENOENT for those); a refusal is a permission error.
pub(super) fn read_error(pid: u32, cause: std::io::Error) -> DumpError {
    match cause.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => permission(pid, cause),
        Some(libc::ESRCH) | Some(libc::ENOENT) => match gone(pid) {
            Some(e) => e,
            None => DumpError::Read { pid, cause },
        },
        _ => DumpError::Read { pid, cause },
    }
}

/// Whether a failed read means the thread or process read is gone.
pub(super) fn is_gone(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ESRCH) | Some(libc::ENOENT))
}

/// Why `pid` cannot be read any more: gone, or every thread a zombie. None while a
/// thread of it lives.
pub(super) fn gone(pid: u32) -> Option<DumpError> {
    match reader_tid(pid) {
        Some(_) => None,
        None if std::path::Path::new(&format!("/proc/{pid}/task")).exists() => {
            Some(DumpError::Zombie(pid))
        }
        None => Some(DumpError::Exited(pid)),
    }
}

/// A live thread of `pid` to read its address space through: the leader unless it
/// has exited (a zombie leader has no memory map in /proc, as when a Go program or a
/// server's main thread calls `pthread_exit`), else the first thread that lives.
/// None when no thread lives.
pub(super) fn reader_tid(pid: u32) -> Option<u32> {
    let live = |tid: u32| {
        process::read_proc_text(format!("/proc/{pid}/task/{tid}/stat"))
            .ok()
            .and_then(|s| task::parse_stat(&s))
            .is_some_and(|(letter, _)| !matches!(letter, 'Z' | 'X'))
    };
    if live(pid) {
        return Some(pid);
    }
    process::list_tids(pid).ok()?.into_iter().find(|&t| live(t))
}

pub(super) fn permission(pid: u32, cause: std::io::Error) -> DumpError {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|_| "absent".into())
    };
    DumpError::Permission {
        pid,
        scope: read("/proc/sys/kernel/yama/ptrace_scope"),
        paranoid: read("/proc/sys/kernel/perf_event_paranoid"),
        cause,
    }
}
