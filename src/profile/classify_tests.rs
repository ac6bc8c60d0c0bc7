//! Thread-state and frame classification on stacks from real programs.

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
