//! The capture's part of the sampling events' program (outlined in `super::capture`'s
//! doc; its listing, after the filter's part: tests/data/bpf/programs.txt).
//! Registers: r6 the context, then the count of frames copied; r7 the thread's
//! [`Entry`]; r8 the per-CPU record buffer; r9 the frame being copied. Every offset
//! in the entry, the record and the stack is the layout's ([`super::layout`]).

use super::asm::{Asm, Cond, Helper, Map, Reg, Size};
use super::layout::{COPY, Entry, Field, HEADER, Header, MAX_FRAMES, SLOT, SLOT_BYTES, stack};

/// The capture's maps, as its part of the program names them.
#[derive(Debug, Clone, Copy)]
pub(super) struct CaptureMaps {
    /// Registered threads: tid to [`Entry`].
    pub threads: Map,
    /// One per-CPU buffer where the record is put together.
    pub scratch: Map,
    /// The `bpf-output` event of each CPU.
    pub out: Map,
}

/// `dst = *(base + field)`, at the field's width.
fn load(a: &mut Asm, dst: Reg, base: Reg, field: impl Field) {
    a.load(field.size(), dst, base, field.at());
}

/// `*(base + field) = src`, at the field's width.
fn store(a: &mut Asm, base: Reg, field: impl Field, src: Reg) {
    a.store(field.size(), base, field.at(), src);
}

/// `*(base + field) = 0`.
fn clear(a: &mut Asm, base: Reg, field: impl Field) {
    a.store_imm(field.size(), base, field.at(), 0);
}

/// `r0 = bpf_probe_read_user(r8 + field, 8, r3)`: the pointer at the user address in
/// r3 into the record's `field` (r1 to r5 clobbered).
fn read_pointer(a: &mut Asm, field: Header) {
    a.mov(Reg::R1, Reg::R8)
        .add_imm(Reg::R1, field.at().into())
        .mov_imm(Reg::R2, 8)
        .call(Helper::ProbeReadUser);
}

/// `dst = r6 * SLOT + HEADER + plus`: the offset in the buffer of frame r6's slot,
/// plus `plus` (r6 counts the frames copied; the verifier knows it below
/// [`MAX_FRAMES`]).
fn slot_offset(a: &mut Asm, dst: Reg, plus: usize) {
    a.mov(dst, Reg::R6)
        .mul_imm(dst, SLOT as i32)
        .add_imm(dst, (HEADER + plus) as i32);
}

/// Appends the capture's part to `a`: entered with the context in r6 and the
/// sampled thread's id at [`stack::TID`]; ends with `r0 = 1; exit` (keep the sample).
pub(super) fn capture_part(a: &mut Asm, maps: CaptureMaps) {
    header(a, maps);
    pointers(a);
    chain(a);
    // bpf_perf_event_output(ctx, out, BPF_F_CURRENT_CPU, buf, size).
    a.label("emit");
    slot_offset(a, Reg::R5, 0);
    a.load(Size::Dw, Reg::R1, Reg::R10, stack::CTX)
        .load_map(Reg::R2, maps.out)
        .mov32_imm(Reg::R3, -1)
        .mov(Reg::R4, Reg::R8)
        .call(Helper::PerfEventOutput);
    a.label("keep").mov_imm(Reg::R0, 1).exit();
}

/// The thread's entry in r7, the buffer in r8, r6 = 0 frames, and the buffer's
/// header: tid, 0 frames, the thread state, no pointers yet.
fn header(a: &mut Asm, maps: CaptureMaps) {
    // ctx to the stack: r6 counts the frames.
    a.store(Size::Dw, Reg::R10, stack::CTX, Reg::R6);
    // entry = threads[tid].
    a.map_lookup(maps.threads, stack::TID)
        .jump_if(Reg::R0, Cond::Eq, 0, "keep")
        .mov(Reg::R7, Reg::R0);
    // buf = scratch[0].
    a.store_imm(Size::W, Reg::R10, stack::SCRATCH_KEY, 0);
    a.map_lookup(maps.scratch, stack::SCRATCH_KEY)
        .jump_if(Reg::R0, Cond::Eq, 0, "keep")
        .mov(Reg::R8, Reg::R0)
        .mov_imm(Reg::R6, 0);
    a.load(Size::W, Reg::R1, Reg::R10, stack::TID);
    store(a, Reg::R8, Header::Tid, Reg::R1);
    clear(a, Reg::R8, Header::Frames);
    load(a, Reg::R1, Reg::R7, Entry::Tstate);
    store(a, Reg::R8, Header::Tstate, Reg::R1);
    clear(a, Reg::R8, Header::First);
    clear(a, Reg::R8, Header::Second);
}

/// The chain's first frame into r9: `*(tstate + first)`, then, when there is one,
/// `*(p + second)`; each pointer also into the header.
fn pointers(a: &mut Asm) {
    load(a, Reg::R3, Reg::R7, Entry::Tstate);
    load(a, Reg::R1, Reg::R7, Entry::First);
    a.add(Reg::R3, Reg::R1);
    read_pointer(a, Header::First);
    a.jump_if(Reg::R0, Cond::Ne, 0, "emit");
    load(a, Reg::R9, Reg::R8, Header::First);
    load(a, Reg::R1, Reg::R7, Entry::HasSecond);
    a.jump_if(Reg::R1, Cond::Eq, 0, "chain")
        .mov(Reg::R3, Reg::R9);
    load(a, Reg::R1, Reg::R7, Entry::Second);
    a.add(Reg::R3, Reg::R1);
    read_pointer(a, Header::Second);
    a.jump_if(Reg::R0, Cond::Ne, 0, "emit");
    load(a, Reg::R9, Reg::R8, Header::Second);
}

/// Copies the frames from r9 on, each into its slot, up to [`MAX_FRAMES`], and
/// stores their count in the header.
fn chain(a: &mut Asm) {
    let copy = COPY as i32;
    // The caller's offset, bounded for the verifier, to the stack.
    a.label("chain");
    load(a, Reg::R1, Reg::R7, Entry::Previous);
    a.jump_if(Reg::R1, Cond::Gt, copy - 8, "emit").store(
        Size::Dw,
        Reg::R10,
        stack::PREVIOUS,
        Reg::R1,
    );
    a.label("loop")
        .jump_if(Reg::R9, Cond::Eq, 0, "done")
        .jump_if(Reg::R6, Cond::Ge, MAX_FRAMES as i32, "done");
    // r2 = the slot: its address, then the frame's first bytes.
    slot_offset(a, Reg::R1, 0);
    a.mov(Reg::R2, Reg::R8)
        .add(Reg::R2, Reg::R1)
        .store(Size::Dw, Reg::R2, 0, Reg::R9)
        .mov(Reg::R1, Reg::R2)
        .add_imm(Reg::R1, SLOT_BYTES as i32);
    // The thread's length, bounded for the verifier, from p + its skip.
    load(a, Reg::R2, Reg::R7, Entry::Len);
    a.jump_if(Reg::R2, Cond::Gt, copy, "done")
        .jump_if(Reg::R2, Cond::Eq, 0, "done");
    load(a, Reg::R3, Reg::R7, Entry::Skip);
    a.add(Reg::R3, Reg::R9)
        .call(Helper::ProbeReadUser)
        .jump_if(Reg::R0, Cond::Ne, 0, "done");
    // p = the caller, from the bytes just copied.
    slot_offset(a, Reg::R1, SLOT_BYTES);
    a.load(Size::Dw, Reg::R2, Reg::R10, stack::PREVIOUS)
        .add(Reg::R1, Reg::R2)
        .mov(Reg::R2, Reg::R8)
        .add(Reg::R2, Reg::R1)
        .load(Size::Dw, Reg::R9, Reg::R2, 0)
        .add_imm(Reg::R6, 1)
        .goto("loop");
    a.label("done");
    store(a, Reg::R8, Header::Frames, Reg::R6);
}
