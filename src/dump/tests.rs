//! `dump` on this test process itself: a thread parked in a known function is found
//! there, named, with its state, and the JSON carries the same.

use std::sync::mpsc;
use std::time::Duration;

use super::*;
use crate::process::task;
use crate::unwind::StackCopy;
use crate::unwind::addrspace::Mapped;
use thread::unsteady;

#[inline(never)]
fn dump_test_blocks_here(rx: mpsc::Receiver<()>) {
    // Blocks in futex (a channel's receive parks the thread).
    let _ = rx.recv();
    std::hint::black_box(());
}

#[test]
fn a_parked_thread_is_found_in_its_function_with_its_state() {
    let (tx, rx) = mpsc::channel();
    let t = std::thread::Builder::new()
        .name("dump-parked".into())
        .spawn(move || dump_test_blocks_here(rx))
        .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let d = dump(&DumpOptions::new(std::process::id())).unwrap();
    tx.send(()).unwrap();
    t.join().unwrap();
    let th = d
        .threads
        .iter()
        .find(|t| t.name == "dump-parked")
        .expect("the parked thread is listed");
    assert_eq!(th.capture, Capture::Proc, "{th:?}");
    // Waiting for a message is idle, not contention (issue 28).
    assert_eq!(th.state, ThreadState::Wait, "{th:?}");
    assert_eq!(th.syscall.as_deref(), Some("futex"));
    let names: Vec<&str> = th
        .frames
        .iter()
        .filter_map(|f| f.function.as_deref())
        .collect();
    assert!(
        names.iter().any(|n| n.ends_with("dump_test_blocks_here")),
        "{names:?}"
    );
    assert_eq!(d.stopped_threads, 0);
    let mut json = Vec::new();
    write_json(&d, &mut json).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let jt = v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "dump-parked")
        .unwrap();
    assert_eq!(jt["state"], "wait");
    assert_eq!(jt["capture"], "proc");
}

#[test]
fn the_frame_chain_base_is_the_lowest_link() {
    // A fake image whose only code is at 0x1000..0x2000.
    let mut image = Image {
        space: Space::default(),
        mappings: Vec::new(),
        modules: Vec::new(),
        all: Vec::new(),
    };
    let cfi = Arc::new(crate::unwind::ModuleCfi::new(Arc::new(Vec::new())));
    image.space.insert(
        0x1000,
        Mapped {
            end: 0x2000,
            id: 0,
            module: Some((cfi, 0)),
        },
    );
    let sp = 0x7000u64;
    // Words: [0] junk, [1] 0x7020 (link) [2] ra, [3] junk, [4] 0 (outermost) [5] ra.
    let words = [0x55u64, 0x7020, 0x1234, 0x9, 0, 0x1400];
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let copy = StackCopy { sp, bytes: &bytes };
    assert_eq!(
        crate::unwind::frame_chain_base(&copy, |a| image.in_code(a)),
        Some(0x7008)
    );
    // Without a code address after it, no link.
    let words = [0x55u64, 0x7020, 0x9999, 0x9, 0, 0x1400];
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let copy = StackCopy { sp, bytes: &bytes };
    assert_eq!(
        crate::unwind::frame_chain_base(&copy, |a| image.in_code(a)),
        None
    );
}

/// Issue 26: a process that exits while it is read (the kernel answers ESRCH or
/// ENOENT) is called exited, or a zombie while its parent has not reaped it; only a
/// refusal (EACCES, EPERM) is a permission error with its ptrace hint.
#[test]
fn a_process_gone_mid_dump_is_called_exited_not_refused() {
    let err = |pid: u32, errno: i32| read_error(pid, std::io::Error::from_raw_os_error(errno));
    let gone_pid = 999_999_999;
    assert!(matches!(err(gone_pid, libc::ESRCH), DumpError::Exited(p) if p == gone_pid));
    assert!(matches!(err(gone_pid, libc::ENOENT), DumpError::Exited(_)));
    assert!(matches!(
        err(gone_pid, libc::EACCES),
        DumpError::Permission { .. }
    ));
    assert!(matches!(
        err(gone_pid, libc::EPERM),
        DumpError::Permission { .. }
    ));
    assert!(matches!(
        err(gone_pid, libc::EMFILE),
        DumpError::Read { .. }
    ));
    // Alive: a vanished thread is not the process exiting.
    let me = std::process::id();
    assert!(matches!(err(me, libc::ESRCH), DumpError::Read { .. }));
    // Not reaped yet: every thread a zombie.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    let zombie = (0..500).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
    });
    assert!(zombie);
    let e = err(pid, libc::ESRCH);
    let _ = child.wait();
    assert!(matches!(e, DumpError::Zombie(p) if p == pid), "{e}");
    assert!(!e.to_string().contains("not permitted"), "{e}");
    // This process, alive: a live thread to read it through.
    assert_eq!(reader_tid(std::process::id()), Some(std::process::id()));
}

/// A thread that woke and blocked between every read (state S, syscall line
/// `running`): reported with /proc's state, kernel stack and wait channel and a note,
/// never `running` with no frames (Redis under load gave 2 such threads in 25 dumps).
#[test]
fn a_thread_that_changes_under_every_read_is_not_running_with_no_stack() {
    let p = task::ProcThread {
        letter: 'S',
        name: "io-thd".into(),
        syscall: Some(task::SyscallLine::Running),
        kernel_stack: vec![
            "__schedule".into(),
            "schedule".into(),
            "futex_wait_queue".into(),
            "futex_wait".into(),
        ],
        wchan: Some("futex_wait_queue".into()),
    };
    let t = unsteady(7, p);
    assert_eq!(t.tid, 7);
    assert_eq!(t.letter, 'S');
    assert_ne!(t.state, ThreadState::Running);
    assert_eq!(t.state, ThreadState::Lock);
    assert_eq!(t.blocked_in.as_deref(), Some("futex_wait_queue"));
    assert_eq!(t.kernel_stack.len(), 4);
    assert!(
        t.note
            .as_deref()
            .is_some_and(|n| n.contains("no user stack"))
    );
    // No wait channel and no kernel stack (not root): still not running, still a note.
    let t = unsteady(
        8,
        task::ProcThread {
            letter: 'D',
            ..Default::default()
        },
    );
    assert_eq!(t.state, ThreadState::Io);
    assert!(t.note.is_some());
}
