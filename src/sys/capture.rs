//! Interpreter frames copied at the sample instant, in the kernel: the part of the
//! sampling events' BPF program ([`super::ThreadFilter`]) that, for a thread the
//! recorder registered, follows its chain of interpreter frames from its thread state
//! and writes the first bytes of each frame into a record of the CPU's `bpf-output`
//! event, redirected into that CPU's ring just before the sample's own record.
//!
//! Why: an interpreter's frames live in its memory, not on the native stack the
//! sample copies, and CPython reuses a returned call's frame at once (3.11+: its slot
//! of the data stack; 3.8–3.10: its frame object, kept by the code object for the
//! next call). Read from outside after the sample (however soon), a fast-changing chain
//! is often no longer the sample's (docs/runtimes.md); read by the program while the
//! sampled thread is interrupted, it is exactly the sample's, and the recorder needs
//! no wake-up per sample to read it in time.
//!
//! What the recorder registers per thread ([`StackCapture::register`]): where its
//! thread state is, the offset there of the pointer to its innermost frame (or to a
//! structure holding it, at a second offset: 3.11 and 3.12's `_PyCFrame`), which
//! bytes of a frame to copy (3.11+: a `_PyInterpreterFrame`'s first 72; 3.8–3.10: a
//! frame object's from `f_back` to `f_lasti`) and where the caller's frame is in
//! them. The program, in outline:
//!
//! ```text
//! entry = threads[tid] or keep            ; not registered: the sample as it is
//! buf = scratch[0] or keep                ; a per-CPU buffer
//! p = *(tstate + first); [p = *(p + second)]  (bpf_probe_read_user)
//! for i in 0..MAX_FRAMES while p != 0:
//!     slot i = p, then len bytes read at p + skip   (stop at the first fault)
//!     p = the caller's frame, from the slot's bytes
//! bpf_perf_event_output(buf: header + i slots); keep
//! ```
//!
//! Nothing read is trusted: a thread state that is not the thread's, a chain cut by
//! a fault or by [`MAX_FRAMES`], bytes of a frame being written: the recorder checks
//! each chain as it checks one it reads itself (`replay::python`). The program only
//! reads the target's memory, a bounded number of times.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use super::bpf::*;
use super::perf::EventFd;
/// Frames copied at most per sample.
pub(crate) const MAX_FRAMES: usize = 128;
/// Bytes copied of each frame, at most (the interpreter's reader sets it:
/// `crate::interp::python::COPIED`, which the recorder checks is the same).
pub(crate) const COPY: usize = 88;

/// Where a registered thread's chain starts and how it is followed: the words the
/// program reads are at offsets the interpreter's reader gives (for CPython,
/// `crate::interp::python::ChainStart`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChainEntry {
    /// The thread state's address.
    pub tstate: u64,
    /// The offset there of the pointer read first.
    pub first: u64,
    /// The offset of the innermost frame's pointer in what the first points to.
    pub second: Option<u64>,
    /// The offset of the caller's frame pointer in a frame.
    pub previous: u64,
    /// Where in a frame the bytes copied start.
    pub skip: u64,
    /// How many bytes of a frame are copied.
    pub len: u64,
}

/// A chain as the program copied it at a sample instant (a capture record's fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CopiedChain {
    pub tid: u32,
    pub tstate: u64,
    /// The pointers read from the thread state (0: not read).
    pub first: u64,
    pub second: u64,
    /// Each frame's address and the bytes copied of it, innermost first.
    pub frames: Vec<(u64, [u8; COPY])>,
}
/// The record's header: tid (u32), frames (u32), thread state, then the two
/// pointers read from it (the second 0 when there is none).
pub(crate) const HEADER: usize = 32;
/// Each frame's slot: its address, then [`COPY`] bytes.
pub(crate) const SLOT: usize = 8 + COPY;
/// Threads registered at most: a thread beyond is read from outside.
const CAPACITY: u32 = 16_384;
/// A registered thread's entry: thread state (u64), first offset (u32), second
/// offset (u32), caller's offset in the bytes copied of a frame (u32), whether there
/// is a second (u32), where in a frame the bytes copied start (u32), how many (u32,
/// at most [`COPY`]).
const ENTRY: usize = 32;

/// The maps and events of the capture.
#[derive(Debug)]
pub(crate) struct StackCapture {
    threads: OwnedFd,
    scratch: OwnedFd,
    out: OwnedFd,
    /// The `bpf-output` event of each CPU, redirected into its ring.
    events: Vec<EventFd>,
}

impl StackCapture {
    /// Creates the maps and opens one `bpf-output` event per CPU of `cpus`, each
    /// redirected into the ring of `owners` at the same index, enabled.
    pub(crate) fn new(cpus: &[u32], owners: &[&EventFd]) -> io::Result<StackCapture> {
        let map = |kind: u32, key: u32, value: u32, entries: u32| {
            let mut a = BpfAttr([0; 32]);
            a.0[..4].copy_from_slice(&[kind, key, value, entries]);
            bpf_call(BPF_MAP_CREATE, &mut a).map(owned)
        };
        let threads = map(BPF_MAP_TYPE_HASH, 4, ENTRY as u32, CAPACITY)?;
        let scratch = map(
            BPF_MAP_TYPE_PERCPU_ARRAY,
            4,
            (HEADER + MAX_FRAMES * SLOT) as u32,
            1,
        )?;
        let slots = cpus.iter().max().map_or(1, |&c| c + 1);
        let out = map(BPF_MAP_TYPE_PERF_EVENT_ARRAY, 4, 4, slots)?;
        let mut events = Vec::with_capacity(cpus.len());
        for (&cpu, owner) in cpus.iter().zip(owners) {
            let ev = EventFd::open_bpf_output(cpu as i32)?;
            ev.set_output(owner)?;
            let fd = ev.raw() as u32;
            update(&out, &cpu.to_le_bytes(), &fd.to_le_bytes())?;
            ev.enable()?;
            events.push(ev);
        }
        Ok(StackCapture {
            threads,
            scratch,
            out,
            events,
        })
    }

    /// The thread filter's program with this capture's part: see
    /// [`ThreadFilter`].
    pub(crate) fn filter(&self) -> io::Result<ThreadFilter> {
        ThreadFilter::with_capture(Some(&self.program()))
    }

    /// The ids of the `bpf-output` events: their samples are the captures.
    pub(crate) fn event_ids(&self) -> Vec<u64> {
        self.events.iter().filter_map(|e| e.id().ok()).collect()
    }

    /// Copies thread `tid`'s chain at each of its samples from now on, as `start`
    /// says: from the pointer at `tstate + first` (then at `second` in what it points
    /// to, if given), `len` bytes of each frame from `skip` in it, each frame's
    /// caller at `previous` in it.
    pub(crate) fn register(&self, tid: u32, start: &ChainEntry) -> io::Result<()> {
        let small = |v: u64| u32::try_from(v).ok().filter(|&v| v < 1 << 16);
        let invalid = || io::Error::from_raw_os_error(libc::EINVAL);
        let (Some(first), Some(second), Some(skip), Some(len)) = (
            small(start.first),
            small(start.second.unwrap_or(0)),
            small(start.skip),
            small(start.len),
        ) else {
            return Err(invalid());
        };
        // The caller's pointer, in the bytes copied.
        let previous = start.previous.checked_sub(start.skip).and_then(small);
        let Some(previous) = previous.filter(|&p| p + 8 <= len && len as usize <= COPY) else {
            return Err(invalid());
        };
        let mut v = [0u8; ENTRY];
        v[..8].copy_from_slice(&start.tstate.to_le_bytes());
        v[8..12].copy_from_slice(&first.to_le_bytes());
        v[12..16].copy_from_slice(&second.to_le_bytes());
        v[16..20].copy_from_slice(&previous.to_le_bytes());
        v[20..24].copy_from_slice(&u32::from(start.second.is_some()).to_le_bytes());
        v[24..28].copy_from_slice(&skip.to_le_bytes());
        v[28..32].copy_from_slice(&len.to_le_bytes());
        update(&self.threads, &tid.to_le_bytes(), &v)
    }

    /// Stops copying thread `tid`'s chain (it ended: its id may be reused).
    pub(crate) fn forget(&self, tid: u32) {
        let key = tid.to_le_bytes();
        let mut a = BpfAttr([0; 32]);
        a.0[0] = self.threads.as_raw_fd() as u32;
        set_u64(&mut a, 2, key.as_ptr() as u64);
        let _ = bpf_call(BPF_MAP_DELETE_ELEM, &mut a);
    }

    /// The program's part after the filter (ctx in r6; ends with `r0 = 1; exit`).
    pub(super) fn program(&self) -> Vec<Insn> {
        let threads = self.threads.as_raw_fd();
        let scratch = self.scratch.as_raw_fd();
        let out = self.out.as_raw_fd();
        let (header, copy) = (HEADER as i32, COPY as i32);
        // Labels are resolved below: (index of the jump, label).
        let mut p: Vec<Insn> = Vec::new();
        let mut jumps: Vec<(usize, &str)> = Vec::new();
        let mut labels: Vec<(&str, usize)> = Vec::new();
        macro_rules! jump {
            ($code:expr, $dst:expr, $imm:expr, $label:expr) => {{
                jumps.push((p.len(), $label));
                p.push(insn($code, $dst, 0, 0, $imm));
            }};
        }
        // ctx to the stack: r6 counts the frames.
        p.push(insn(STX_DW, 10, 6, -16, 0));
        // entry = threads[tid] (the key is at r10 - 4 already).
        p.extend(lookup(threads, -4));
        jump!(JEQ_K, 0, 0, "keep");
        p.push(insn(MOV_X, 7, 0, 0, 0));
        // buf = scratch[0].
        p.push(insn(ST_W, 10, 0, -8, 0));
        p.extend(lookup(scratch, -8));
        jump!(JEQ_K, 0, 0, "keep");
        p.push(insn(MOV_X, 8, 0, 0, 0));
        p.push(insn(MOV_K, 6, 0, 0, 0));
        // Header: tid, 0 frames, the thread state, no pointers yet.
        p.push(insn(LDX_W, 1, 10, -4, 0));
        p.push(insn(STX_W, 8, 1, 0, 0));
        p.push(insn(ST_W, 8, 0, 4, 0));
        p.push(insn(LDX_DW, 1, 7, 0, 0));
        p.push(insn(STX_DW, 8, 1, 8, 0));
        p.push(insn(ST_DW, 8, 0, 16, 0));
        p.push(insn(ST_DW, 8, 0, 24, 0));
        // buf[16] = *(tstate + first).
        p.push(insn(LDX_DW, 3, 7, 0, 0));
        p.push(insn(LDX_W, 1, 7, 8, 0));
        p.push(insn(ADD_X, 3, 1, 0, 0));
        p.extend(read_user_into_r8(16, 8));
        jump!(JNE_K, 0, 0, "emit");
        p.push(insn(LDX_DW, 9, 8, 16, 0));
        // buf[24] = *(p + second), when there is one.
        p.push(insn(LDX_W, 1, 7, 20, 0));
        jump!(JEQ_K, 1, 0, "chain");
        p.push(insn(MOV_X, 3, 9, 0, 0));
        p.push(insn(LDX_W, 1, 7, 12, 0));
        p.push(insn(ADD_X, 3, 1, 0, 0));
        p.extend(read_user_into_r8(24, 8));
        jump!(JNE_K, 0, 0, "emit");
        p.push(insn(LDX_DW, 9, 8, 24, 0));
        // The caller's offset, bounded for the verifier, to the stack.
        labels.push(("chain", p.len()));
        p.push(insn(LDX_W, 1, 7, 16, 0));
        jump!(JGT_K, 1, copy - 8, "emit");
        p.push(insn(STX_DW, 10, 1, -24, 0));
        labels.push(("loop", p.len()));
        jump!(JEQ_K, 9, 0, "done");
        jump!(JGE_K, 6, MAX_FRAMES as i32, "done");
        // r2 = the slot: its address, then the frame's first bytes.
        p.extend(slot_offset(1, header));
        p.push(insn(MOV_X, 2, 8, 0, 0));
        p.push(insn(ADD_X, 2, 1, 0, 0));
        p.push(insn(STX_DW, 2, 9, 0, 0));
        p.push(insn(MOV_X, 1, 2, 0, 0));
        p.push(insn(ADD_K, 1, 0, 0, 8));
        // The thread's length, bounded for the verifier, from p + its skip.
        p.push(insn(LDX_W, 2, 7, 28, 0));
        jump!(JGT_K, 2, copy, "done");
        jump!(JEQ_K, 2, 0, "done");
        p.push(insn(LDX_W, 3, 7, 24, 0));
        p.push(insn(ADD_X, 3, 9, 0, 0));
        p.push(insn(CALL, 0, 0, 0, HELPER_PROBE_READ_USER));
        jump!(JNE_K, 0, 0, "done");
        // p = the caller, from the bytes just copied.
        p.extend(slot_offset(1, header + 8));
        p.push(insn(LDX_DW, 2, 10, -24, 0));
        p.push(insn(ADD_X, 1, 2, 0, 0));
        p.push(insn(MOV_X, 2, 8, 0, 0));
        p.push(insn(ADD_X, 2, 1, 0, 0));
        p.push(insn(LDX_DW, 9, 2, 0, 0));
        p.push(insn(ADD_K, 6, 0, 0, 1));
        jump!(JA, 0, 0, "loop");
        labels.push(("done", p.len()));
        p.push(insn(STX_W, 8, 6, 4, 0));
        // bpf_perf_event_output(ctx, out, BPF_F_CURRENT_CPU, buf, size).
        labels.push(("emit", p.len()));
        p.extend(slot_offset(5, header));
        p.push(insn(LDX_DW, 1, 10, -16, 0));
        p.push(insn(LD_DW, 2, BPF_PSEUDO_MAP_FD, 0, out));
        p.push(insn(0, 0, 0, 0, 0));
        p.push(insn(MOV32_K, 3, 0, 0, -1));
        p.push(insn(MOV_X, 4, 8, 0, 0));
        p.push(insn(CALL, 0, 0, 0, HELPER_PERF_EVENT_OUTPUT));
        labels.push(("keep", p.len()));
        p.push(insn(MOV_K, 0, 0, 0, 1));
        p.push(insn(EXIT, 0, 0, 0, 0));
        for (at, label) in jumps {
            let to = labels
                .iter()
                .find(|(l, _)| *l == label)
                .map_or(at + 1, |l| l.1);
            p[at].off = (to as i64 - at as i64 - 1) as i16;
        }
        p
    }
}

/// `rDST = r6 * SLOT + plus`: the offset in the buffer of frame r6's slot, plus
/// `plus` (r6 counts the frames copied; the verifier knows it below [`MAX_FRAMES`]).
fn slot_offset(dst: u8, plus: i32) -> [Insn; 3] {
    [
        insn(MOV_X, dst, 6, 0, 0),
        insn(MUL_K, dst, 0, 0, SLOT as i32),
        insn(ADD_K, dst, 0, 0, plus),
    ]
}

fn update(map: &OwnedFd, key: &[u8], value: &[u8]) -> io::Result<()> {
    let mut a = BpfAttr([0; 32]);
    // map_fd, (pad), key, value, flags (BPF_ANY).
    a.0[0] = map.as_raw_fd() as u32;
    set_u64(&mut a, 2, key.as_ptr() as u64);
    set_u64(&mut a, 4, value.as_ptr() as u64);
    bpf_call(BPF_MAP_UPDATE_ELEM, &mut a).map(drop)
}

/// Parses a capture record's raw fields (see the module's doc); None when they are
/// cut short.
pub(crate) fn parse_capture(raw: &[u8]) -> Option<CopiedChain> {
    let u32_at = |o: usize| Some(u32::from_le_bytes(raw.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(raw.get(o..o + 8)?.try_into().ok()?));
    let n = (u32_at(4)? as usize).min(MAX_FRAMES);
    let mut frames = Vec::with_capacity(n);
    for i in 0..n {
        let at = HEADER + i * SLOT;
        let bytes: [u8; COPY] = raw.get(at + 8..at + SLOT)?.try_into().ok()?;
        frames.push((u64_at(at)?, bytes));
    }
    Some(CopiedChain {
        tid: u32_at(0)?,
        tstate: u64_at(8)?,
        first: u64_at(16)?,
        second: u64_at(24)?,
        frames,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_record_parses_and_a_cut_one_does_not() {
        let mut raw = vec![0u8; HEADER + 2 * SLOT + 4];
        raw[..4].copy_from_slice(&7u32.to_le_bytes());
        raw[4..8].copy_from_slice(&2u32.to_le_bytes());
        raw[8..16].copy_from_slice(&0x1000u64.to_le_bytes());
        raw[16..24].copy_from_slice(&0x2000u64.to_le_bytes());
        raw[HEADER..HEADER + 8].copy_from_slice(&0x3000u64.to_le_bytes());
        raw[HEADER + 8] = 0xaa;
        raw[HEADER + SLOT..HEADER + SLOT + 8].copy_from_slice(&0x4000u64.to_le_bytes());
        let c = parse_capture(&raw).unwrap();
        assert_eq!((c.tid, c.tstate, c.first, c.second), (7, 0x1000, 0x2000, 0));
        assert_eq!(c.frames.len(), 2);
        assert_eq!((c.frames[0].0, c.frames[0].1[0]), (0x3000, 0xaa));
        assert_eq!(c.frames[1].0, 0x4000);
        // A record that says more frames than it holds is refused.
        raw[4..8].copy_from_slice(&3u32.to_le_bytes());
        assert_eq!(parse_capture(&raw), None);
        assert_eq!(parse_capture(&raw[..HEADER - 1]), None);
    }

    #[test]
    fn the_program_jumps_inside_itself() {
        // Every jump lands on an instruction of the program (the kernel's
        // verifier, run by the integration tests, checks the rest).
        let fake = StackCapture {
            threads: std::fs::File::open("/dev/null").unwrap().into(),
            scratch: std::fs::File::open("/dev/null").unwrap().into(),
            out: std::fs::File::open("/dev/null").unwrap().into(),
            events: Vec::new(),
        };
        let p = fake.program();
        for (i, ins) in p.iter().enumerate() {
            let jump = ins.code & 0x07 == 0x05 && ins.code != CALL && ins.code != EXIT;
            if jump {
                let to = i as i64 + 1 + i64::from(ins.off);
                assert!((0..p.len() as i64).contains(&to), "jump at {i} to {to}");
            }
        }
        assert_eq!(p.last().map(|i| i.code), Some(EXIT));
    }
}
