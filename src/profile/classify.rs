//! Why a thread left the CPU, from the stack it left with: the states of
//! `record --off-cpu`.
//!
//! The recorder knows "preempted" exactly (the SWITCH record's
//! PERF_RECORD_MISC_SWITCH_OUT_PREEMPT flag: the task was still runnable); every
//! other switch-out is a block, and its kind is read from the kernel callchain,
//! leaf first: the first frame that names a kind of wait decides. A futex or a
//! kernel mutex/rwsem is `lock`; nanosleep is `sleep`; an event loop's epoll is
//! `wait`; pipes, sockets, poll, select, page-cache and block I/O are `io`; anything
//! else is `other`, never dropped.
//! Without kernel callchains (perf_event_paranoid 2 without CAP_PERFMON) the
//! user-space frames are all there is: the libc syscall wrapper (`__GI___nanosleep`,
//! `__lll_lock_wait`, `__libc_read`, ...) names the wait instead ([`from_user`]).
//!
//! poll/select count as `io` even when they only wait for their timeout: the kernel
//! stack is the same either way, and telling them apart needs the syscall's
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
#[path = "classify_tests.rs"]
mod tests;
