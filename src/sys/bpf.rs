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

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_MAP_TYPE_HASH: u32 = 1;
const BPF_PROG_TYPE_PERF_EVENT: u32 = 7;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const HELPER_MAP_LOOKUP_ELEM: i32 = 1;
const HELPER_GET_CURRENT_PID_TGID: i32 = 14;

/// Threads the map holds at most: a thread beyond keeps its inherited samples.
pub(crate) const FILTER_CAPACITY: u32 = 16_384;

/// `union bpf_attr`, as the commands used here lay it out; the kernel requires the
/// bytes it does not know to be zero, which the padding is.
#[repr(C, align(8))]
struct BpfAttr([u32; 32]);

/// One BPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Clone, Copy)]
struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: dst | src << 4,
        off,
        imm,
    }
}

/// The program of the module's doc, its map's descriptor in the load instruction.
fn program(map: i32) -> [Insn; 12] {
    const CALL: u8 = 0x85; // BPF_JMP | BPF_CALL
    const STX_W: u8 = 0x63; // BPF_STX | BPF_MEM | BPF_W
    const LD_DW: u8 = 0x18; // BPF_LD | BPF_DW | BPF_IMM (two slots)
    const MOV_X: u8 = 0xbf; // BPF_ALU64 | BPF_MOV | BPF_X
    const ADD_K: u8 = 0x07; // BPF_ALU64 | BPF_ADD | BPF_K
    const JEQ_K: u8 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const MOV_K: u8 = 0xb7; // BPF_ALU64 | BPF_MOV | BPF_K
    const EXIT: u8 = 0x95; // BPF_JMP | BPF_EXIT
    [
        insn(CALL, 0, 0, 0, HELPER_GET_CURRENT_PID_TGID),
        insn(STX_W, 10, 0, -4, 0),
        insn(LD_DW, 1, BPF_PSEUDO_MAP_FD, 0, map),
        insn(0, 0, 0, 0, 0),
        insn(MOV_X, 2, 10, 0, 0),
        insn(ADD_K, 2, 0, 0, -4),
        insn(CALL, 0, 0, 0, HELPER_MAP_LOOKUP_ELEM),
        insn(JEQ_K, 0, 0, 2, 0),
        insn(MOV_K, 0, 0, 0, 0),
        insn(EXIT, 0, 0, 0, 0),
        insn(MOV_K, 0, 0, 0, 1),
        insn(EXIT, 0, 0, 0, 0),
    ]
}

fn bpf(cmd: libc::c_long, attr: &mut BpfAttr) -> io::Result<libc::c_long> {
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

fn owned(fd: libc::c_long) -> OwnedFd {
    // SAFETY: a descriptor the kernel just returned, owned by nothing else.
    unsafe { OwnedFd::from_raw_fd(fd as i32) }
}

fn set_u64(a: &mut BpfAttr, word: usize, v: u64) {
    a.0[word] = v as u32;
    a.0[word + 1] = (v >> 32) as u32;
}

/// The map of threads whose inherited samples are dropped, and the program that
/// drops them.
#[derive(Debug)]
pub(crate) struct ThreadFilter {
    map: OwnedFd,
    prog: OwnedFd,
}

impl ThreadFilter {
    /// Creates the map and loads the program; refused without the privileges.
    pub(crate) fn new() -> io::Result<ThreadFilter> {
        let mut a = BpfAttr([0; 32]);
        // map_type, key_size, value_size, max_entries.
        a.0[..4].copy_from_slice(&[BPF_MAP_TYPE_HASH, 4, 1, FILTER_CAPACITY]);
        let map = owned(bpf(BPF_MAP_CREATE, &mut a)?);
        let insns = program(map.as_raw_fd());
        let license = c"MIT OR Apache-2.0";
        let mut a = BpfAttr([0; 32]);
        // prog_type, insn_cnt, insns, license.
        a.0[0] = BPF_PROG_TYPE_PERF_EVENT;
        a.0[1] = insns.len() as u32;
        set_u64(&mut a, 2, insns.as_ptr() as u64);
        set_u64(&mut a, 4, license.as_ptr() as u64);
        let prog = owned(bpf(BPF_PROG_LOAD, &mut a)?);
        Ok(ThreadFilter { map, prog })
    }

    /// Runs the program at every sample of `event` and of the copies the kernel
    /// inherits from it afterwards.
    pub(crate) fn attach(&self, event: &EventFd) -> io::Result<()> {
        // SAFETY: an open perf event descriptor and a BPF program descriptor (the
        // ioctl takes the descriptor as its value).
        let rc = unsafe {
            libc::ioctl(
                event.raw(),
                sys::bindings::SET_BPF as _,
                self.prog.as_raw_fd() as libc::c_ulong,
            )
        };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    fn elem(&self, cmd: libc::c_long, tid: u32) -> io::Result<()> {
        let key = tid;
        let value = 1u8;
        let mut a = BpfAttr([0; 32]);
        // map_fd, (pad), key, value, flags (BPF_ANY).
        a.0[0] = self.map.as_raw_fd() as u32;
        set_u64(&mut a, 2, &key as *const u32 as u64);
        set_u64(&mut a, 4, &value as *const u8 as u64);
        bpf(cmd, &mut a).map(drop)
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
