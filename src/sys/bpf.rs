//! A kernel-side sample filter by thread: a BPF program attached to the recorder's
//! inherited `task-clock` events that drops the samples of the threads in a map.
//!
//! Why: a thread created during a recording is sampled through copies of its
//! parent's events, which keep the period drawn when the thread was created
//! (PERF_EVENT_IOC_PERIOD reaches no inherited copy), so a thread whose work has a
//! rhythm commensurate with that draw is sampled in lock-step with it for its whole
//! life (docs/accounting.md). The recorder gives such a thread events of its own,
//! whose period it varies, and puts the thread in this map: its inherited copies go on
//! counting (the thread's exact total at exit) but their samples are dropped in the
//! kernel, before any stack is copied. A program attached to an event is inherited
//! with it (`perf_event_alloc()` takes the parent's `prog`), so one attach per opened
//! event covers every thread created later.
//!
//! The program, eleven instructions assembled here (no compiler, no BTF):
//!
//! ```text
//! call bpf_get_current_pid_tgid      ; r0 = tgid << 32 | tid
//! *(u32 *)(r10 - 4) = w0             ; the key: the thread id
//! r1 = MAP ll
//! r2 = r10; r2 += -4
//! call bpf_map_lookup_elem
//! if r0 == 0 goto keep
//! r0 = 0; exit                       ; in the map: no sample
//! keep: r0 = 1; exit
//! ```
//!
//! Loading needs CAP_BPF and CAP_PERFMON (or root): without them the recorder keeps
//! the inherited copies' samples, as before.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use perf_event_open_sys as sys;

use super::perf::EventFd;

pub(super) const BPF_MAP_CREATE: libc::c_long = 0;
pub(super) const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
pub(super) const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
const BPF_PROG_LOAD: libc::c_long = 5;
pub(super) const BPF_MAP_TYPE_HASH: u32 = 1;
pub(super) const BPF_MAP_TYPE_PERF_EVENT_ARRAY: u32 = 4;
pub(super) const BPF_MAP_TYPE_PERCPU_ARRAY: u32 = 6;
const BPF_PROG_TYPE_PERF_EVENT: u32 = 7;
pub(super) const BPF_PSEUDO_MAP_FD: u8 = 1;
pub(super) const HELPER_MAP_LOOKUP_ELEM: i32 = 1;
const HELPER_GET_CURRENT_PID_TGID: i32 = 14;
pub(super) const HELPER_PERF_EVENT_OUTPUT: i32 = 25;
pub(super) const HELPER_PROBE_READ_USER: i32 = 112;

/// Threads the map holds at most: a thread beyond keeps its inherited samples.
pub(crate) const FILTER_CAPACITY: u32 = 16_384;

/// `union bpf_attr`, as the commands used here lay it out; the kernel requires the
/// bytes it does not know to be zero, which the padding is.
#[repr(C, align(8))]
pub(super) struct BpfAttr(pub(super) [u32; 32]);

/// One BPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct Insn {
    pub(super) code: u8,
    regs: u8,
    pub(super) off: i16,
    imm: i32,
}

pub(super) const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: dst | src << 4,
        off,
        imm,
    }
}

/// The program of the module's doc, its map's descriptor in the load instruction;
/// with `capture` (`super::StackCapture`'s part), a sample the filter keeps goes on
/// to it (`ctx` in r6, the tid at r10 - 4) instead of `keep`. Without `filter`, the
/// capture part alone (for the events of the threads in the map: their own samples).
fn program(map: i32, capture: Option<&[Insn]>, filter: bool) -> Vec<Insn> {
    let mut p = vec![
        insn(MOV_X, 6, 1, 0, 0),
        insn(CALL, 0, 0, 0, HELPER_GET_CURRENT_PID_TGID),
        insn(STX_W, 10, 0, -4, 0),
    ];
    if filter {
        p.extend(lookup(map, -4));
        p.extend([
            insn(JEQ_K, 0, 0, 2, 0),
            insn(MOV_K, 0, 0, 0, 0),
            insn(EXIT, 0, 0, 0, 0),
        ]);
    }
    match capture {
        Some(c) => p.extend_from_slice(c),
        None => p.extend([insn(MOV_K, 0, 0, 0, 1), insn(EXIT, 0, 0, 0, 0)]),
    }
    p
}

/// `r0 = lookup(map, r10 + key)`: the value of the key on the stack at `key`, or 0
/// (r1 and r2 clobbered).
pub(super) fn lookup(map: i32, key: i32) -> [Insn; 5] {
    [
        insn(LD_DW, 1, BPF_PSEUDO_MAP_FD, 0, map),
        insn(0, 0, 0, 0, 0),
        insn(MOV_X, 2, 10, 0, 0),
        insn(ADD_K, 2, 0, 0, key),
        insn(CALL, 0, 0, 0, HELPER_MAP_LOOKUP_ELEM),
    ]
}

/// `r0 = bpf_probe_read_user(r8 + at, len, r3)`: `len` bytes from the user address in
/// r3 into the buffer r8 points to, at `at` (r1 to r5 clobbered).
pub(super) fn read_user_into_r8(at: i32, len: i32) -> [Insn; 4] {
    [
        insn(MOV_X, 1, 8, 0, 0),
        insn(ADD_K, 1, 0, 0, at),
        insn(MOV_K, 2, 0, 0, len),
        insn(CALL, 0, 0, 0, HELPER_PROBE_READ_USER),
    ]
}

pub(super) const CALL: u8 = 0x85; // BPF_JMP | BPF_CALL
pub(super) const STX_W: u8 = 0x63; // BPF_STX | BPF_MEM | BPF_W
pub(super) const STX_DW: u8 = 0x7b; // BPF_STX | BPF_MEM | BPF_DW
pub(super) const ST_W: u8 = 0x62; // BPF_ST | BPF_MEM | BPF_W
pub(super) const ST_DW: u8 = 0x7a; // BPF_ST | BPF_MEM | BPF_DW
pub(super) const LDX_W: u8 = 0x61; // BPF_LDX | BPF_MEM | BPF_W
pub(super) const LDX_DW: u8 = 0x79; // BPF_LDX | BPF_MEM | BPF_DW
pub(super) const LD_DW: u8 = 0x18; // BPF_LD | BPF_DW | BPF_IMM (two slots)
pub(super) const MOV_X: u8 = 0xbf; // BPF_ALU64 | BPF_MOV | BPF_X
pub(super) const MOV_K: u8 = 0xb7; // BPF_ALU64 | BPF_MOV | BPF_K
pub(super) const MOV32_K: u8 = 0xb4; // BPF_ALU | BPF_MOV | BPF_K (zero-extends)
pub(super) const ADD_K: u8 = 0x07; // BPF_ALU64 | BPF_ADD | BPF_K
pub(super) const ADD_X: u8 = 0x0f; // BPF_ALU64 | BPF_ADD | BPF_X
pub(super) const MUL_K: u8 = 0x27; // BPF_ALU64 | BPF_MUL | BPF_K
pub(super) const JA: u8 = 0x05; // BPF_JMP | BPF_JA
pub(super) const JEQ_K: u8 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
pub(super) const JNE_K: u8 = 0x55; // BPF_JMP | BPF_JNE | BPF_K
pub(super) const JGT_K: u8 = 0x25; // BPF_JMP | BPF_JGT | BPF_K
pub(super) const JGE_K: u8 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
pub(super) const EXIT: u8 = 0x95; // BPF_JMP | BPF_EXIT

fn set_bpf(event: &EventFd, prog: &OwnedFd) -> io::Result<()> {
    // SAFETY: an open perf event descriptor and a BPF program descriptor (the ioctl
    // takes the descriptor as its value).
    let rc = unsafe {
        libc::ioctl(
            event.raw(),
            sys::bindings::SET_BPF as _,
            prog.as_raw_fd() as libc::c_ulong,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Loads a perf-event program; `gpl`: it calls the kernel's GPL-only helpers (reading
/// user memory, writing records), and that part is offered under the GPL too. A
/// refusal says the verifier's last lines.
fn load(insns: &[Insn], gpl: bool) -> io::Result<OwnedFd> {
    let license = if gpl {
        c"Dual MIT/GPL"
    } else {
        c"MIT OR Apache-2.0"
    };
    let attempt = |log: &mut [u8]| {
        let mut a = BpfAttr([0; 32]);
        // prog_type, insn_cnt, insns, license, log_level, log_size, log_buf.
        a.0[0] = BPF_PROG_TYPE_PERF_EVENT;
        a.0[1] = insns.len() as u32;
        set_u64(&mut a, 2, insns.as_ptr() as u64);
        set_u64(&mut a, 4, license.as_ptr() as u64);
        if !log.is_empty() {
            a.0[6] = 1;
            a.0[7] = log.len() as u32;
            set_u64(&mut a, 8, log.as_mut_ptr() as u64);
        }
        bpf_call(BPF_PROG_LOAD, &mut a)
    };
    match attempt(&mut []) {
        Ok(fd) => Ok(owned(fd)),
        Err(e) if !gpl => Err(e),
        Err(e) => {
            let mut log = vec![0u8; 1 << 16];
            let _ = attempt(&mut log);
            let text = String::from_utf8_lossy(&log);
            let tail: Vec<&str> = text.trim_end_matches('\0').lines().rev().take(3).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            Err(io::Error::other(format!("{e} ({})", tail.join(" / "))))
        }
    }
}

pub(super) fn bpf_call(cmd: libc::c_long, attr: &mut BpfAttr) -> io::Result<libc::c_long> {
    // SAFETY: attr is a zero-padded `union bpf_attr` of the size passed, laid out for
    // `cmd`; every pointer in it points at memory that outlives the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut BpfAttr,
            std::mem::size_of::<BpfAttr>(),
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

pub(super) fn owned(fd: libc::c_long) -> OwnedFd {
    // SAFETY: a descriptor the kernel just returned, owned by nothing else.
    unsafe { OwnedFd::from_raw_fd(fd as i32) }
}

pub(super) fn set_u64(a: &mut BpfAttr, word: usize, v: u64) {
    a.0[word] = v as u32;
    a.0[word + 1] = (v >> 32) as u32;
}

/// The map of threads whose inherited samples are dropped, and the program that
/// drops them.
#[derive(Debug)]
pub(crate) struct ThreadFilter {
    map: OwnedFd,
    prog: OwnedFd,
    /// With a capture: its part alone, for the threads' own events.
    own: Option<OwnedFd>,
}

impl ThreadFilter {
    /// Creates the map and loads the program; refused without the privileges.
    pub(crate) fn new() -> io::Result<ThreadFilter> {
        ThreadFilter::with_capture(None)
    }

    /// Creates the map and loads the program, with `capture`'s part when given (see
    /// `super::StackCapture::filter`).
    pub(super) fn with_capture(capture: Option<&[Insn]>) -> io::Result<ThreadFilter> {
        let mut a = BpfAttr([0; 32]);
        // map_type, key_size, value_size, max_entries.
        a.0[..4].copy_from_slice(&[BPF_MAP_TYPE_HASH, 4, 1, FILTER_CAPACITY]);
        let map = owned(bpf_call(BPF_MAP_CREATE, &mut a)?);
        let prog = load(&program(map.as_raw_fd(), capture, true), capture.is_some())?;
        let own = match capture {
            Some(c) => Some(load(&program(map.as_raw_fd(), Some(c), false), true)?),
            None => None,
        };
        Ok(ThreadFilter { map, prog, own })
    }

    /// Runs the program at every sample of `event` and of the copies the kernel
    /// inherits from it afterwards.
    pub(crate) fn attach(&self, event: &EventFd) -> io::Result<()> {
        set_bpf(event, &self.prog)
    }

    /// Runs the capture (and no filter) at every sample of `event`, an event of a
    /// thread in the map; nothing without a capture.
    pub(crate) fn attach_own(&self, event: &EventFd) -> io::Result<()> {
        self.own.as_ref().map_or(Ok(()), |p| set_bpf(event, p))
    }

    fn elem(&self, cmd: libc::c_long, tid: u32) -> io::Result<()> {
        let key = tid;
        let value = 1u8;
        let mut a = BpfAttr([0; 32]);
        // map_fd, (pad), key, value, flags (BPF_ANY).
        a.0[0] = self.map.as_raw_fd() as u32;
        set_u64(&mut a, 2, &key as *const u32 as u64);
        set_u64(&mut a, 4, &value as *const u8 as u64);
        bpf_call(cmd, &mut a).map(drop)
    }

    /// Drops the inherited samples of thread `tid` from now on. Fails when the map is
    /// full ([`FILTER_CAPACITY`]).
    pub(crate) fn exclude(&self, tid: u32) -> io::Result<()> {
        self.elem(BPF_MAP_UPDATE_ELEM, tid)
    }

    /// Keeps the inherited samples of thread `tid` again (it ended: its id may be
    /// reused).
    pub(crate) fn include(&self, tid: u32) -> io::Result<()> {
        self.elem(BPF_MAP_DELETE_ELEM, tid)
    }
}
