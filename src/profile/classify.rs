//! Why a thread left the CPU, from the stack it left with: the states of
//! `record --off-cpu`.
//!
//! The recorder knows "preempted" exactly (the SWITCH record's
//! PERF_RECORD_MISC_SWITCH_OUT_PREEMPT flag: the task was still runnable); every
//! other switch-out is a block, and its kind is read from the kernel callchain,
//! leaf first: the first frame that names a kind of wait decides. A futex or a
//! kernel mutex/rwsem is `lock`; nanosleep is `sleep`; pipes, sockets, poll, select,
//! epoll, page-cache and block I/O are `io`; anything else is `other`, never dropped.
//! Without kernel callchains (perf_event_paranoid 2 without CAP_PERFMON) the
//! user-space frames are all there is: the libc syscall wrapper (`__GI___nanosleep`,
//! `__lll_lock_wait`, `__libc_read`, ...) names the wait instead ([`from_user`]).
//!
//! poll/select/epoll count as `io` even when they only wait for their timeout: the
//! kernel stack is the same either way, and telling them apart needs the syscall's
//! arguments.

use crate::format::ThreadState;

/// Kernel frames that mean the task was preempted or yielded: still runnable. Used
/// when the SWITCH record's flag is not available.
const KERNEL_RUNNABLE: &[&str] = &[
    "irqentry_exit_to_user_mode",
    "exit_to_user_mode_loop",
    "irqentry_exit",
    "raw_irqentry_exit_cond_resched",
    "preempt_schedule",
    "preempt_schedule_irq",
    "preempt_schedule_common",
    "preempt_schedule_notrace",
    "__cond_resched",
    "_cond_resched",
    "do_sched_yield",
];

/// Kernel function-name prefixes per state, checked in this order for each frame.
const KERNEL_RULES: &[(ThreadState, &[&str])] = &[
    (
        ThreadState::Lock,
        &[
            "futex_",
            "__futex",
            "do_futex",
            "__x64_sys_futex",
            "rwsem_down",
            "__mutex_lock",
            "mutex_lock",
            "__rt_mutex",
            "rt_mutex",
            "rtlock_",
            "percpu_down",
            "__down",
        ],
    ),
    (
        ThreadState::Sleep,
        &[
            "do_nanosleep",
            "hrtimer_nanosleep",
            "common_nsleep",
            "__x64_sys_nanosleep",
            "__x64_sys_clock_nanosleep",
            "msleep",
            "usleep_range",
        ],
    ),
    (
        ThreadState::Io,
        &[
            "io_schedule",
            "folio_wait",
            "__folio_lock",
            "wait_on_page",
            "__lock_page",
            "pipe_read",
            "pipe_write",
            "anon_pipe_",
            "pipe_wait",
            "wait_for_partner",
            "unix_stream_",
            "unix_dgram_",
            "unix_wait",
            "sk_wait_",
            "sk_stream_wait",
            "tcp_",
            "udp_",
            "inet_csk_accept",
            "inet_accept",
            "__skb_",
            "sock_",
            "__sys_recv",
            "__sys_send",
            "__sys_accept",
            "__sys_connect",
            "do_sys_poll",
            "do_poll",
            "do_select",
            "core_sys_select",
            "poll_schedule_timeout",
            "ep_poll",
            "do_epoll_wait",
            "n_tty_",
            "tty_",
            "wait_woken",
            "blk_",
            "bio_",
            "submit_bio",
            "filemap_",
            "wait_on_buffer",
            "__wait_on_buffer",
            "jbd2_",
            "ext4_",
            "xfs_",
            "btrfs_",
            "nfs_",
            "fuse_",
            "eventfd_",
            "inotify_read",
            "vfs_read",
            "vfs_write",
            "ksys_read",
            "ksys_write",
            "exc_page_fault",
            "handle_mm_fault",
            "do_user_addr_fault",
        ],
    ),
];

/// The state of a blocked (not preempted) switch-out from its kernel frames' names,
/// leaf first. Frames of the preemption paths make it `runnable`, for callers that
/// have no SWITCH flag.
pub fn from_kernel<'a>(leaf_first: impl IntoIterator<Item = &'a str>) -> ThreadState {
    for name in leaf_first {
        if KERNEL_RUNNABLE.contains(&name) {
            return ThreadState::Runnable;
        }
        for (state, prefixes) in KERNEL_RULES {
            if prefixes.iter().any(|p| name.starts_with(p)) {
                return *state;
            }
        }
    }
    ThreadState::Other
}

/// User-space name fragments per state, for the syscall wrappers of glibc, musl and
/// language runtimes; checked in this order for each frame.
const USER_RULES: &[(ThreadState, &[&str])] = &[
    (
        ThreadState::Lock,
        &[
            "futex",
            "lll_lock",
            "pthread_mutex_lock",
            "pthread_mutex_timedlock",
            "pthread_cond_",
            "pthread_rwlock_",
            "pthread_barrier_wait",
            "sem_wait",
            "sem_timedwait",
            "sem_clockwait",
            "parking_lot",
        ],
    ),
    (
        ThreadState::Sleep,
        &["nanosleep", "usleep", "__sleep", "clock_nanosleep"],
    ),
    (
        ThreadState::Io,
        &[
            "libc_read",
            "libc_write",
            "libc_pread",
            "libc_pwrite",
            "__read",
            "__write",
            "readv",
            "writev",
            "recv",
            "send",
            "accept",
            "connect",
            "poll",
            "select",
            "epoll_wait",
            "epoll_pwait",
            "libc_open",
            "fsync",
            "fdatasync",
        ],
    ),
];

/// The state of a blocked switch-out from its innermost user-space functions (leaf
/// first): the fallback without kernel callchains. Only the first few frames are
/// looked at, where the syscall wrapper is.
pub fn from_user<'a>(leaf_first: impl IntoIterator<Item = &'a str>) -> ThreadState {
    for name in leaf_first.into_iter().take(4) {
        let plain = name.trim_start_matches('_');
        for (state, frags) in USER_RULES {
            if frags.iter().any(|f| name.contains(f) || plain == *f) {
                return *state;
            }
        }
        // Exact wrapper names too short to match as fragments.
        match plain {
            "read" | "write" | "pread64" | "pwrite64" => return ThreadState::Io,
            "sleep" => return ThreadState::Sleep,
            _ => {}
        }
    }
    ThreadState::Other
}

#[cfg(test)]
mod tests {
    use super::*;

    // Kernel callchains as `perf script` showed them on Linux 6.18 for the states
    // fixture (tests/data/states.c), leaf first.
    const NANOSLEEP: &[&str] = &[
        "schedule",
        "do_nanosleep",
        "hrtimer_nanosleep",
        "common_nsleep",
        "__x64_sys_clock_nanosleep",
        "do_syscall_64",
        "entry_SYSCALL_64_after_hwframe",
    ];
    const MUTEX: &[&str] = &[
        "schedule",
        "futex_do_wait",
        "__futex_wait",
        "futex_wait",
        "do_futex",
        "__x64_sys_futex",
        "do_syscall_64",
        "entry_SYSCALL_64_after_hwframe",
    ];
    const PIPE: &[&str] = &[
        "schedule",
        "anon_pipe_read",
        "vfs_read",
        "ksys_read",
        "do_syscall_64",
        "entry_SYSCALL_64_after_hwframe",
    ];
    const SOCKET: &[&str] = &[
        "schedule",
        "schedule_timeout",
        "unix_stream_read_generic",
        "unix_stream_recvmsg",
        "sock_recvmsg",
        "__sys_recvfrom",
        "__x64_sys_recvfrom",
        "do_syscall_64",
        "entry_SYSCALL_64_after_hwframe",
    ];
    const PREEMPTED: &[&str] = &[
        "schedule",
        "irqentry_exit_to_user_mode",
        "asm_sysvec_apic_timer_interrupt",
    ];
    const EPOLL: &[&str] = &[
        "schedule",
        "schedule_hrtimeout_range_clock",
        "do_epoll_wait",
        "__x64_sys_epoll_wait",
        "do_syscall_64",
    ];
    const WAITPID: &[&str] = &["schedule", "do_wait", "kernel_wait4", "__do_sys_wait4"];
    const DISK: &[&str] = &[
        "schedule",
        "io_schedule",
        "folio_wait_bit_common",
        "filemap_get_pages",
        "filemap_read",
        "vfs_read",
    ];

    #[test]
    fn kernel_callchains_name_their_state() {
        assert_eq!(from_kernel(NANOSLEEP.iter().copied()), ThreadState::Sleep);
        assert_eq!(from_kernel(MUTEX.iter().copied()), ThreadState::Lock);
        assert_eq!(from_kernel(PIPE.iter().copied()), ThreadState::Io);
        assert_eq!(from_kernel(SOCKET.iter().copied()), ThreadState::Io);
        assert_eq!(from_kernel(EPOLL.iter().copied()), ThreadState::Io);
        assert_eq!(from_kernel(DISK.iter().copied()), ThreadState::Io);
        assert_eq!(
            from_kernel(PREEMPTED.iter().copied()),
            ThreadState::Runnable
        );
        assert_eq!(from_kernel(WAITPID.iter().copied()), ThreadState::Other);
        assert_eq!(from_kernel([]), ThreadState::Other);
    }

    #[test]
    fn a_kernel_lock_inside_a_read_is_a_lock() {
        // The leaf-most frame that names a wait decides.
        let chain = [
            "schedule",
            "__mutex_lock.constprop.0",
            "anon_pipe_read",
            "vfs_read",
        ];
        assert_eq!(from_kernel(chain), ThreadState::Lock);
    }

    #[test]
    fn user_wrappers_name_their_state_without_kernel_frames() {
        let cases: &[(&[&str], ThreadState)] = &[
            (
                &["__GI___clock_nanosleep", "__GI___nanosleep", "do_sleep"],
                ThreadState::Sleep,
            ),
            (
                &[
                    "futex_wait",
                    "__GI___lll_lock_wait",
                    "___pthread_mutex_lock",
                    "wait_lock",
                ],
                ThreadState::Lock,
            ),
            (&["__GI___libc_read", "read_pipe"], ThreadState::Io),
            (&["__libc_recv", "recv_sock"], ThreadState::Io),
            (&["__GI___poll", "main"], ThreadState::Io),
            (&["__pthread_cond_wait", "worker"], ThreadState::Lock),
            (&["read", "main"], ThreadState::Io),
            (&["__waitpid", "main"], ThreadState::Other),
            (&["compute", "main"], ThreadState::Other),
        ];
        for (frames, want) in cases {
            assert_eq!(from_user(frames.iter().copied()), *want, "{frames:?}");
        }
    }
}
