//! One thread read off the CPU from `/proc`, without stopping it: its state, kernel
//! stack and wait channel, and its user stack unwound from the registers its
//! `syscall` line gives (see the module docs of [`super`] for rbp). A thread that
//! changes between the reads is read again, and reported from a reading that agrees
//! with itself.

use std::os::unix::fs::FileExt;

use super::errors::permission;
use super::{Capture, DumpError, DumpOptions, Image, Stack, StackRead, ThreadDump, ThreadState};
use crate::interp::jvm::JavaFrames;
use crate::process::{state, task};
use crate::profile::classify;
use crate::replay::stack::StackBuilder;
use crate::unwind::{self, StackCopy, UnwindEnd};
use task::SyscallLine;

/// What one reading of a blocked thread gave.
enum Reading {
    /// The thread as read (None: gone).
    Done(Option<Box<(ThreadDump, Stack, StackRead)>>),
    /// It changed between the reads: this is what /proc said, to read again.
    Changed(task::ProcThread),
}

/// Reads a thread from /proc; unwinds its stack when it is off the CPU, and gives
/// the stack copy it was unwound from (empty when none). None when the thread is gone.
pub(super) fn read_blocked(
    pid: u32,
    tid: u32,
    (image, java): (&Image, &mut JavaFrames),
    mem: &std::fs::File,
    opts: &DumpOptions,
    unwinder: &mut StackBuilder,
) -> Result<Option<(ThreadDump, Stack, StackRead)>, DumpError> {
    // The last reading, for a thread that changed under every one.
    let mut last = None;
    for _attempt in 0..4 {
        match read_once(pid, tid, (image, java), mem, opts, unwinder)? {
            Reading::Done(read) => return Ok(read.map(|r| *r)),
            Reading::Changed(p) => last = Some(p),
        }
    }
    // Woke between every pair of reads: busy, but never running when looked at. What
    // /proc said last: its state, kernel stack and wait channel, and why no user stack.
    let Some(mut p) = last else {
        return Ok(None);
    };
    // A reading asleep by its letter but with neither wait channel nor kernel stack
    // was taken while the thread ran between the reads: look again (a few /proc
    // reads, microseconds each) for one that agrees with itself.
    for _ in 0..64 {
        if !matches!(p.letter, 'S' | 'D') || p.wchan.is_some() || !p.kernel_stack.is_empty() {
            break;
        }
        match task::read_thread(pid, tid) {
            Ok(again) => p = again,
            Err(_) => return Ok(None),
        }
    }
    Ok(Some((
        unsteady(tid, p),
        Stack::default(),
        StackRead::default(),
    )))
}

/// One reading: /proc's view of the thread, and for a blocked one its user stack
/// copied and unwound, unless the thread moved between the reads.
fn read_once(
    pid: u32,
    tid: u32,
    (image, java): (&Image, &mut JavaFrames),
    mem: &std::fs::File,
    opts: &DumpOptions,
    unwinder: &mut StackBuilder,
) -> Result<Reading, DumpError> {
    let Ok(p) = task::read_thread(pid, tid) else {
        return Ok(Reading::Done(None));
    };
    let mut t = as_listed(tid, &p);
    let no_stack = |t| {
        let read = (t, Stack::default(), StackRead::default());
        Ok(Reading::Done(Some(Box::new(read))))
    };
    if p.letter == 'Z' || p.letter == 'X' {
        // An exited leader's `syscall` still reads (`-1 0x0 0x0`): no registers.
        t.state = ThreadState::Other;
        t.note = Some(if tid == pid {
            "exited (a zombie): no stack; the process lives on in its other threads".into()
        } else {
            "exited (a zombie): no stack".into()
        });
        return no_stack(t);
    }
    let (nr, sp, pc) = match p.syscall {
        None => {
            unreadable_syscall(pid, tid)?;
            return Ok(Reading::Done(None));
        }
        // Runnable and running: sampled by the caller.
        Some(SyscallLine::Running) if p.letter == 'R' => return no_stack(t),
        // Asleep by its state, running by its syscall line: it woke between the
        // two reads. Not `running` with no stack: read it again.
        Some(SyscallLine::Running) => return Ok(Reading::Changed(p)),
        Some(SyscallLine::Blocked { nr, sp, pc }) => (nr, sp, pc),
    };
    t.state = state_of(&p, nr);
    t.syscall = nr.map(|n| task::syscall_name(n).map_or_else(|| n.to_string(), str::to_owned));
    t.blocked_in = p
        .wchan
        .clone()
        .or_else(|| p.kernel_stack.iter().find(|f| !is_scheduler(f)).cloned());
    let bytes = copy_stack(image, mem, sp, opts.max_stack);
    // The stack belongs to these registers only if the thread is still where it was.
    if task::read_syscall(pid, tid) != p.syscall {
        return Ok(Reading::Changed(p));
    }
    let (end, addrs) = unwind_blocked(pid, (pc, sp, &bytes), (image, java), unwinder);
    t.note = truncation_note(end);
    t.capture = Capture::Proc;
    let read = StackRead {
        sp,
        bytes,
        regs: [0; 6],
        blocked: p.syscall,
    };
    Ok(Reading::Done(Some(Box::new((t, addrs, read)))))
}

/// The thread as /proc lists it, before its stack is read: running until its
/// syscall line says otherwise.
fn as_listed(tid: u32, p: &task::ProcThread) -> ThreadDump {
    ThreadDump {
        tid,
        name: p.name.clone(),
        letter: p.letter,
        state: ThreadState::Running,
        syscall: None,
        blocked_in: None,
        kernel_stack: p.kernel_stack.clone(),
        frames: Vec::new(),
        note: None,
        capture: Capture::None,
    }
}

/// Why a thread's syscall line did not read: /proc refuses `syscall` to a reader
/// who may not ptrace the target (a permission error, said as one); else the
/// thread is gone (Ok).
fn unreadable_syscall(pid: u32, tid: u32) -> Result<(), DumpError> {
    let e = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/syscall"))
        .err()
        .unwrap_or_else(|| std::io::Error::other("unreadable syscall line"));
    if matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM)) {
        return Err(permission(pid, e));
    }
    Ok(())
}

/// The bytes of a thread's user stack from `sp` up to the stack's end, at most
/// `max` of them (fewer when the read stops short).
fn copy_stack(image: &Image, mem: &std::fs::File, sp: u64, max: u64) -> Vec<u8> {
    let end = image
        .stack_end(sp)
        .unwrap_or(sp)
        .min(sp.saturating_add(max));
    let mut bytes = vec![0u8; end.saturating_sub(sp) as usize];
    let n = mem.read_at(&mut bytes, sp).unwrap_or(0);
    bytes.truncate(n);
    bytes
}

/// A blocked thread's user stack unwound from its copy, first without rbp, then,
/// when that stops short, from the frame-pointer chain found on the stack if that
/// goes further.
fn unwind_blocked(
    pid: u32,
    (pc, sp, bytes): (u64, u64, &[u8]),
    (image, java): (&Image, &mut JavaFrames),
    unwinder: &mut StackBuilder,
) -> (UnwindEnd, Stack) {
    let copy = StackCopy { sp, bytes };
    let state = (sp, bytes, None);
    let (mut end, mut addrs) = super::java::unwind(java, pid, (pc, None, state), image, unwinder);
    if end != UnwindEnd::Complete
        && let Some(bp) = crate::unwind::frame_chain_base(&copy, |a| image.in_code(a))
    {
        let again = super::java::unwind(java, pid, (pc, Some(bp), state), image, unwinder);
        if again.1.addrs.len() > addrs.addrs.len() {
            (end, addrs) = again;
        }
    }
    (end, addrs)
}

/// A thread whose user stack could not be read because it changed under every read:
/// reported with the state, kernel stack and wait channel of /proc's last reading (a
/// runnable one is sampled by the caller), and a note saying why there is no stack.
pub(super) fn unsteady(tid: u32, p: task::ProcThread) -> ThreadDump {
    let blocked_in = p
        .wchan
        .clone()
        .or_else(|| p.kernel_stack.iter().find(|f| !is_scheduler(f)).cloned());
    ThreadDump {
        tid,
        state: state_of(&p, None),
        letter: p.letter,
        syscall: None,
        blocked_in,
        frames: Vec::new(),
        note: Some(
            "no user stack: it woke and blocked again between every read (it runs microseconds at a time); state, kernel stack and wait channel as /proc last gave them"
                .into(),
        ),
        capture: Capture::None,
        name: p.name,
        kernel_stack: p.kernel_stack,
    }
}

/// The state of a thread off the CPU: its kernel frames classified as `record
/// --off-cpu` classifies them, else its system call, else its state letter.
fn state_of(p: &task::ProcThread, nr: Option<i64>) -> ThreadState {
    if p.letter == 'R' {
        return ThreadState::Runnable;
    }
    if !p.kernel_stack.is_empty() {
        let s = classify::from_kernel(p.kernel_stack.iter().map(String::as_str));
        if s != ThreadState::Other && s != ThreadState::Runnable {
            return s;
        }
    }
    match (p.letter, nr) {
        ('D', _) => ThreadState::Io,
        (_, Some(n)) => state::syscall_state(n),
        _ => ThreadState::Other,
    }
}

/// Scheduler functions at the top of every blocked kernel stack: not where it waits.
fn is_scheduler(f: &str) -> bool {
    f.starts_with("__schedule")
        || f.starts_with("schedule")
        || f.starts_with("preempt_schedule")
        || f == "__switch_to"
}

pub(super) fn truncation_note(end: UnwindEnd) -> Option<String> {
    match end {
        UnwindEnd::Complete => None,
        UnwindEnd::Truncated(r) => Some(
            match r {
                unwind::TruncateReason::StackCopyExhausted => "stack read exhausted",
                unwind::TruncateReason::NoUnwindInfo => "no unwind info",
                unwind::TruncateReason::BadUnwindInfo => "bad unwind info",
                unwind::TruncateReason::TooDeep => "too deep",
                unwind::TruncateReason::GoStackSwitch => "Go stack switch",
            }
            .to_owned(),
        ),
    }
}
