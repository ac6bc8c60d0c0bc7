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
    // An event loop waiting for any of its descriptors: idle, waiting for work.
    (ThreadState::Wait, &["ep_poll", "do_epoll_wait"]),
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
        ThreadState::Wait,
        &[
            "pthread_cond_",
            "sem_wait",
            "sem_timedwait",
            "sem_clockwait",
            "epoll_wait",
            "epoll_pwait",
        ],
    ),
    (
        ThreadState::Lock,
        &[
            "futex",
            "lll_lock",
            "pthread_mutex_lock",
            "pthread_mutex_timedlock",
            "pthread_rwlock_",
            "pthread_barrier_wait",
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

/// User functions (name fragments) that take a contended lock: the wait under them is
/// contention, `lock`.
const CONTENDED: &[&str] = &[
    "lll_lock_wait",
    "pthread_mutex_lock",
    "pthread_mutex_timedlock",
    "pthread_mutex_cond_lock",
    "pthread_rwlock_rdlock",
    "pthread_rwlock_wrlock",
    "pthread_rwlock_timed",
    "pthread_spin_lock",
    "lock_contended",      // std::sys::sync::mutex::futex::Mutex::lock_contended
    "RawMutex::lock_slow", // parking_lot
    "RawRwLock::lock_",    // parking_lot
    "read_contended",      // std's futex rwlock
    "write_contended",
    "ObjectMonitor::enter", // HotSpot: a contended `synchronized`
    "ObjectMonitor::EnterI",
    "ObjectSynchronizer::enter",
    "AbstractQueuedSynchronizer.acquire", // java.util.concurrent locks
    "AbstractQueuedSynchronizer::acquire",
    "ReentrantLock",
    "ReentrantReadWriteLock",
];

/// User functions that wait for work or a signal: the wait under them is idle, `wait`.
const WAITS: &[&str] = &[
    "pthread_cond_wait",
    "pthread_cond_timedwait",
    "pthread_cond_clockwait",
    "pthread_cond_wait_common",
    "sem_wait",
    "sem_timedwait",
    "sem_clockwait",
    "do_futex_wait", // glibc's semaphores
    "Condvar::wait", // std::sync::Condvar, parking_lot::Condvar
    "Condvar>::wait",
    "thread::park",                       // std::thread::park, park_timeout
    "mpmc::context::Context::wait_until", // std::sync::mpsc receivers
    "park::Inner::park",                  // tokio's idle workers
    "ObjectMonitor::wait",                // HotSpot: Object.wait
    "Object.wait",
    "Object::wait",
    "ConditionObject.await",
    "ConditionObject::await",
    "LockSupport.park",
    "LockSupport::park",
    "Unsafe.park",
    "Unsafe::park",
    "Unsafe_Park",
    "epoll_wait",
    "epoll_pwait",
];

/// A runtime's own blocking primitive (HotSpot's Parker, PlatformEvent and
/// PlatformMonitor, Java's and Rust's park): what glibc does under it is the
/// primitive's business, its callers above say why it waits.
fn primitive(name: &str) -> bool {
    name.contains("park")
        || name.contains("Park")
        || name.contains("PlatformEvent")
        || name.contains("PlatformMonitor")
}

/// How many user frames, leaf first, are looked at to tell a wait from contention.
const REFINE_DEPTH: usize = 32;

/// Tells idle waits apart from contention for a thread blocked on a futex (`lock`
/// from its kernel frames): its user functions, leaf first, decide. Above a runtime's
/// own primitive (a park, HotSpot's PlatformEvent or PlatformMonitor), only the
/// callers count; below it, the first function that takes a lock
/// (`__lll_lock_wait`, `pthread_mutex_lock`, a Java monitor enter, a
/// `java.util.concurrent` lock's acquire, Rust's `lock_contended`, ...) makes it
/// `lock`, the first that waits for work or a signal (`pthread_cond_wait`,
/// `sem_wait`, `Condvar::wait`, `Object.wait`, `ConditionObject.await`, an mpsc
/// receive, ...) makes it `wait`. A park with no caller that says which is `wait`
/// (parking is how `java.util.concurrent` waits for work; a lock's acquire shows
/// above it), and so is glibc's `__futex_abstimed_wait_common` alone (a stack cut
/// below its callers: under condition variables, semaphores and joins, but also
/// rwlocks, which such a stack cannot tell). Other states are returned as they are.
pub fn refine<'a>(
    state: ThreadState,
    user_leaf_first: impl IntoIterator<Item = &'a str>,
) -> ThreadState {
    if state != ThreadState::Lock {
        return state;
    }
    let frames: Vec<&str> = user_leaf_first.into_iter().take(REFINE_DEPTH).collect();
    let above = frames.iter().rposition(|f| primitive(f));
    let from = above.map_or(0, |i| i + 1);
    for name in &frames[from..] {
        if CONTENDED.iter().any(|f| name.contains(f)) {
            return ThreadState::Lock;
        }
        if WAITS.iter().any(|f| name.contains(f)) {
            return ThreadState::Wait;
        }
    }
    if above.is_some() || frames.iter().any(|f| f.contains("futex_abstimed_wait")) {
        ThreadState::Wait
    } else {
        ThreadState::Lock
    }
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
            (&["__pthread_cond_wait", "worker"], ThreadState::Wait),
            (&["read", "main"], ThreadState::Io),
            (&["__waitpid", "main"], ThreadState::Other),
            (&["compute", "main"], ThreadState::Other),
        ];
        for (frames, want) in cases {
            assert_eq!(from_user(frames.iter().copied()), *want, "{frames:?}");
        }
    }

    /// User frames leaf first, as `report --folded` showed them (reversed), for
    /// futex waits recorded with `--off-cpu` on this machine: tests/data/busy.c
    /// (glibc 2.41, DWARF unwinding) and a Rust 1.9x program using std's Condvar,
    /// mpsc and Mutex.
    const C_COND_WAIT: &[&str] = &[
        "__futex_abstimed_wait_common64",
        "__futex_abstimed_wait_common",
        "__pthread_cond_wait_common",
        "___pthread_cond_wait",
        "wait_for_work",
        "thread_main",
        "start_thread",
        "clone3",
    ];
    const C_COND_RELOCK: &[&str] = &[
        "futex_wait",
        "__GI___lll_lock_wait",
        "__pthread_mutex_cond_lock",
        "__pthread_cond_wait_common",
        "___pthread_cond_wait",
        "wait_for_work",
    ];
    const C_MUTEX: &[&str] = &[
        "futex_wait",
        "__GI___lll_lock_wait",
        "lll_mutex_lock_optimized",
        "___pthread_mutex_lock",
        "fight_for_lock",
        "thread_main",
    ];
    const RUST_CONDVAR: &[&str] = &[
        "syscall",
        "std::sys::pal::unix::futex::futex_wait",
        "<std::sys::sync::condvar::futex::Condvar>::wait_optional_timeout",
        "<std::sys::sync::condvar::futex::Condvar>::wait",
        "std::sync::poison::condvar::Condvar::wait::<u64>",
        "cv::main::{{closure}}",
    ];
    const RUST_RECV: &[&str] = &[
        "syscall",
        "std::sys::pal::unix::futex::futex_wait",
        "<std::sys::sync::thread_parking::futex::Parker>::park",
        "<std::thread::thread::Thread>::park",
        "std::sync::mpmc::context::Context::wait_until",
        "std::sync::mpmc::list::Channel<T>::recv::{{closure}}::<u32>",
    ];
    const RUST_MUTEX: &[&str] = &[
        "syscall",
        "std::sys::pal::unix::futex::futex_wait",
        "<std::sys::sync::mutex::futex::Mutex>::lock_contended",
        "std::sys::sync::mutex::futex::Mutex::lock",
        "std::sync::poison::mutex::Mutex<T>::lock::<u64>",
        "cv::main::{{closure}}",
    ];
    // HotSpot (symbol names of libjvm.so and the JIT's perf map): Object.wait,
    // a worker idle in a ThreadPoolExecutor, a contended ReentrantLock and a
    // contended `synchronized`.
    const JAVA_OBJECT_WAIT: &[&str] = &[
        "__futex_abstimed_wait_common",
        "___pthread_cond_timedwait",
        "PlatformMonitor::wait",
        "ObjectMonitor::wait",
        "ObjectSynchronizer::wait",
        "JVM_MonitorWait",
        "java.lang.Object::wait0",
        "java.lang.Object::wait",
    ];
    const JAVA_POOL_IDLE: &[&str] = &[
        "__futex_abstimed_wait_common",
        "___pthread_cond_wait",
        "Parker::park",
        "Unsafe_Park",
        "jdk.internal.misc.Unsafe::park",
        "java.util.concurrent.locks.LockSupport::park",
        "java.util.concurrent.locks.AbstractQueuedSynchronizer$ConditionObject::await",
        "java.util.concurrent.LinkedBlockingQueue::take",
        "java.util.concurrent.ThreadPoolExecutor::getTask",
    ];
    const JAVA_REENTRANT: &[&str] = &[
        "__futex_abstimed_wait_common",
        "___pthread_cond_wait",
        "Parker::park",
        "Unsafe_Park",
        "jdk.internal.misc.Unsafe::park",
        "java.util.concurrent.locks.LockSupport::park",
        "java.util.concurrent.locks.AbstractQueuedSynchronizer::acquire",
        "java.util.concurrent.locks.ReentrantLock$Sync::lock",
    ];
    const JAVA_MONITOR_ENTER: &[&str] = &[
        "__futex_abstimed_wait_common",
        "___pthread_cond_wait",
        "PlatformEvent::park",
        "ObjectMonitor::EnterI",
        "ObjectMonitor::enter",
        "ObjectSynchronizer::enter",
        "InterpreterRuntime::monitorenter",
    ];

    #[test]
    fn idle_waits_are_told_apart_from_contention_by_the_user_stack() {
        let cases: &[(&str, &[&str], ThreadState)] = &[
            ("C condition variable", C_COND_WAIT, ThreadState::Wait),
            ("C relock after a signal", C_COND_RELOCK, ThreadState::Lock),
            ("C mutex", C_MUTEX, ThreadState::Lock),
            ("Rust Condvar", RUST_CONDVAR, ThreadState::Wait),
            ("Rust mpsc recv", RUST_RECV, ThreadState::Wait),
            ("Rust Mutex", RUST_MUTEX, ThreadState::Lock),
            ("Java Object.wait", JAVA_OBJECT_WAIT, ThreadState::Wait),
            ("Java idle pool worker", JAVA_POOL_IDLE, ThreadState::Wait),
            ("Java ReentrantLock", JAVA_REENTRANT, ThreadState::Lock),
            ("Java monitor enter", JAVA_MONITOR_ENTER, ThreadState::Lock),
            // Cut below its callers (frame pointers, glibc without them): glibc's
            // futex wait alone is a wait; the mutex wrapper alone a lock.
            ("cut cond wait", &C_COND_WAIT[..2], ThreadState::Wait),
            ("cut mutex", &C_MUTEX[..2], ThreadState::Lock),
            (
                "C rwlock",
                &[
                    "__futex_abstimed_wait_common",
                    "__pthread_rwlock_rdlock_full64",
                    "___pthread_rwlock_rdlock",
                    "reader",
                ],
                ThreadState::Lock,
            ),
            ("no user stack", &[], ThreadState::Lock),
        ];
        for (what, frames, want) in cases {
            assert_eq!(
                refine(ThreadState::Lock, frames.iter().copied()),
                *want,
                "{what}"
            );
        }
        // Only futex waits are refined.
        assert_eq!(
            refine(ThreadState::Io, C_COND_WAIT.iter().copied()),
            ThreadState::Io
        );
        // Without kernel frames the wrapper names it, then the stack refines it.
        let user_only = from_user(C_COND_WAIT.iter().copied());
        assert_eq!(
            refine(user_only, C_COND_WAIT.iter().copied()),
            ThreadState::Wait
        );
    }

    #[test]
    fn epoll_is_an_idle_wait() {
        assert_eq!(from_kernel(EPOLL.iter().copied()), ThreadState::Wait);
        assert_eq!(
            from_user(["epoll_wait", "aeApiPoll", "aeProcessEvents"]),
            ThreadState::Wait
        );
    }
}
