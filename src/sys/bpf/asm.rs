//! A small assembler for the recorder's BPF programs: typed registers, operand sizes,
//! helpers and conditions, maps named in the program and bound to their descriptor,
//! and jumps to named labels that are resolved (and checked) when the program is
//! finished. A jump to a label that is never placed, a label placed twice or never
//! jumped to, and a jump too far for the instruction's 16-bit offset are errors, not a
//! jump to the next instruction. The finished program has a listing (one line per
//! instruction: its slot, its encoding, what it does), which the golden test holds
//! against a checked-in copy.

use std::fmt::{self, Write as _};

/// A register: r0 (return values), r1 to r5 (arguments, clobbered by calls), r6 to r9
/// (kept across calls), r10 (the frame pointer, read only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reg {
    R0 = 0,
    R1,
    R2,
    R3,
    R4,
    R5,
    R6,
    R7,
    R8,
    R9,
    R10,
}

/// The size of a memory access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Size {
    /// 4 bytes.
    W,
    /// 8 bytes.
    Dw,
}

impl Size {
    /// The size's bits of a load or store opcode.
    const fn code(self) -> u8 {
        match self {
            Size::W => 0x00,
            Size::Dw => 0x18,
        }
    }

    fn c_type(self) -> &'static str {
        match self {
            Size::W => "u32",
            Size::Dw => "u64",
        }
    }
}

/// A condition of a conditional jump, comparing a register with a constant (unsigned).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cond {
    Eq,
    Ne,
    Gt,
    Ge,
}

impl Cond {
    const fn code(self) -> u8 {
        match self {
            Cond::Eq => 0x15,
            Cond::Ne => 0x55,
            Cond::Gt => 0x25,
            Cond::Ge => 0x35,
        }
    }

    fn text(self) -> &'static str {
        match self {
            Cond::Eq => "==",
            Cond::Ne => "!=",
            Cond::Gt => ">",
            Cond::Ge => ">=",
        }
    }
}

/// The kernel helpers the programs call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Helper {
    MapLookupElem = 1,
    GetCurrentPidTgid = 14,
    PerfEventOutput = 25,
    ProbeReadUser = 112,
}

impl Helper {
    fn name(self) -> &'static str {
        match self {
            Helper::MapLookupElem => "map_lookup_elem",
            Helper::GetCurrentPidTgid => "get_current_pid_tgid",
            Helper::PerfEventOutput => "perf_event_output",
            Helper::ProbeReadUser => "probe_read_user",
        }
    }
}

/// A map a program refers to: its name in the listing, its descriptor in the code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Map {
    pub name: &'static str,
    pub fd: i32,
}

/// One instruction (`struct bpf_insn`), as the kernel reads it.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: Reg, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: dst as u8 | src << 4,
        off,
        imm,
    }
}

const ALU64_MOV_K: u8 = 0xb7;
const ALU64_MOV_X: u8 = 0xbf;
const ALU32_MOV_K: u8 = 0xb4; // zero-extends
const ALU64_ADD_K: u8 = 0x07;
const ALU64_ADD_X: u8 = 0x0f;
const ALU64_MUL_K: u8 = 0x27;
const LDX_MEM: u8 = 0x61; // | size
const STX_MEM: u8 = 0x63; // | size
const ST_MEM: u8 = 0x62; // | size
const LD_IMM_DW: u8 = 0x18; // two slots
const JMP_JA: u8 = 0x05;
const JMP_CALL: u8 = 0x85;
const JMP_EXIT: u8 = 0x95;
const PSEUDO_MAP_FD: u8 = 1;

/// One operation of a program being assembled.
#[derive(Debug, Clone, Copy)]
enum Op {
    Mov(Reg, Reg),
    MovImm(Reg, i32),
    Mov32Imm(Reg, i32),
    Add(Reg, Reg),
    AddImm(Reg, i32),
    MulImm(Reg, i32),
    Load(Size, Reg, Reg, i16),
    Store(Size, Reg, i16, Reg),
    StoreImm(Size, Reg, i16, i32),
    LoadMap(Reg, Map),
    Call(Helper),
    Jump(Option<(Cond, Reg, i32)>, &'static str),
    Exit,
}

impl Op {
    /// Instruction slots taken (a 64-bit immediate takes two).
    fn slots(self) -> usize {
        match self {
            Op::LoadMap(..) => 2,
            _ => 1,
        }
    }

    /// The encoding, with `off` the resolved jump offset of a jump.
    fn encode(self, off: i16) -> [Option<Insn>; 2] {
        let one = |i| [Some(i), None];
        match self {
            Op::Mov(d, s) => one(insn(ALU64_MOV_X, d, s as u8, 0, 0)),
            Op::MovImm(d, k) => one(insn(ALU64_MOV_K, d, 0, 0, k)),
            Op::Mov32Imm(d, k) => one(insn(ALU32_MOV_K, d, 0, 0, k)),
            Op::Add(d, s) => one(insn(ALU64_ADD_X, d, s as u8, 0, 0)),
            Op::AddImm(d, k) => one(insn(ALU64_ADD_K, d, 0, 0, k)),
            Op::MulImm(d, k) => one(insn(ALU64_MUL_K, d, 0, 0, k)),
            Op::Load(z, d, s, o) => one(insn(LDX_MEM | z.code(), d, s as u8, o, 0)),
            Op::Store(z, d, o, s) => one(insn(STX_MEM | z.code(), d, s as u8, o, 0)),
            Op::StoreImm(z, d, o, k) => one(insn(ST_MEM | z.code(), d, 0, o, k)),
            Op::LoadMap(d, m) => [
                Some(insn(LD_IMM_DW, d, PSEUDO_MAP_FD, 0, m.fd)),
                Some(insn(0, Reg::R0, 0, 0, 0)),
            ],
            Op::Call(h) => one(insn(JMP_CALL, Reg::R0, 0, 0, h as i32)),
            Op::Jump(None, _) => one(insn(JMP_JA, Reg::R0, 0, off, 0)),
            Op::Jump(Some((c, r, k)), _) => one(insn(c.code(), r, 0, off, k)),
            Op::Exit => one(insn(JMP_EXIT, Reg::R0, 0, 0, 0)),
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = |r: Reg| r as u8;
        let mem = |base: Reg, off: i16| match off {
            o if o < 0 => format!("(r{} - {})", r(base), -i32::from(o)),
            o => format!("(r{} + {o})", r(base)),
        };
        match *self {
            Op::Mov(d, s) => write!(f, "r{} = r{}", r(d), r(s)),
            Op::MovImm(d, k) => write!(f, "r{} = {k}", r(d)),
            Op::Mov32Imm(d, k) => write!(f, "w{} = {k}", r(d)),
            Op::Add(d, s) => write!(f, "r{} += r{}", r(d), r(s)),
            Op::AddImm(d, k) => write!(f, "r{} += {k}", r(d)),
            Op::MulImm(d, k) => write!(f, "r{} *= {k}", r(d)),
            Op::Load(z, d, s, o) => write!(f, "r{} = *({} *){}", r(d), z.c_type(), mem(s, o)),
            Op::Store(z, d, o, s) => write!(f, "*({} *){} = r{}", z.c_type(), mem(d, o), r(s)),
            Op::StoreImm(z, d, o, k) => write!(f, "*({} *){} = {k}", z.c_type(), mem(d, o)),
            Op::LoadMap(d, m) => write!(f, "r{} = map[{}] ll", r(d), m.name),
            Op::Call(h) => write!(f, "call {}", h.name()),
            Op::Jump(None, l) => write!(f, "goto {l}"),
            Op::Jump(Some((c, reg, k)), l) => {
                write!(f, "if r{} {} {k} goto {l}", r(reg), c.text())
            }
            Op::Exit => write!(f, "exit"),
        }
    }
}

/// Why a program could not be assembled (a defect of the program's source).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AsmError {
    #[error("BPF program: a jump to label `{0}`, which is never placed")]
    UnknownLabel(&'static str),
    #[error("BPF program: label `{0}` is placed twice")]
    DuplicateLabel(&'static str),
    #[error("BPF program: label `{0}` is placed but never jumped to")]
    UnusedLabel(&'static str),
    #[error("BPF program: the jump to `{0}` is too far for a 16-bit offset")]
    TooFar(&'static str),
}

/// A program being assembled, operation by operation.
#[derive(Debug, Default)]
pub(crate) struct Asm {
    ops: Vec<Op>,
    /// Each label and the index in `ops` of the operation it stands before.
    labels: Vec<(&'static str, usize)>,
}

impl Asm {
    pub(crate) fn new() -> Asm {
        Asm::default()
    }

    fn push(&mut self, op: Op) -> &mut Asm {
        self.ops.push(op);
        self
    }

    /// `dst = src`.
    pub(crate) fn mov(&mut self, dst: Reg, src: Reg) -> &mut Asm {
        self.push(Op::Mov(dst, src))
    }

    /// `dst = k`.
    pub(crate) fn mov_imm(&mut self, dst: Reg, k: i32) -> &mut Asm {
        self.push(Op::MovImm(dst, k))
    }

    /// `wdst = k`: the low 32 bits, the high ones cleared.
    pub(crate) fn mov32_imm(&mut self, dst: Reg, k: i32) -> &mut Asm {
        self.push(Op::Mov32Imm(dst, k))
    }

    /// `dst += src`.
    pub(crate) fn add(&mut self, dst: Reg, src: Reg) -> &mut Asm {
        self.push(Op::Add(dst, src))
    }

    /// `dst += k`.
    pub(crate) fn add_imm(&mut self, dst: Reg, k: i32) -> &mut Asm {
        self.push(Op::AddImm(dst, k))
    }

    /// `dst *= k`.
    pub(crate) fn mul_imm(&mut self, dst: Reg, k: i32) -> &mut Asm {
        self.push(Op::MulImm(dst, k))
    }

    /// `dst = *(size *)(src + off)`.
    pub(crate) fn load(&mut self, size: Size, dst: Reg, src: Reg, off: i16) -> &mut Asm {
        self.push(Op::Load(size, dst, src, off))
    }

    /// `*(size *)(dst + off) = src`.
    pub(crate) fn store(&mut self, size: Size, dst: Reg, off: i16, src: Reg) -> &mut Asm {
        self.push(Op::Store(size, dst, off, src))
    }

    /// `*(size *)(dst + off) = k`.
    pub(crate) fn store_imm(&mut self, size: Size, dst: Reg, off: i16, k: i32) -> &mut Asm {
        self.push(Op::StoreImm(size, dst, off, k))
    }

    /// `dst = map` (the map's address, which the kernel puts for its descriptor).
    pub(crate) fn load_map(&mut self, dst: Reg, map: Map) -> &mut Asm {
        self.push(Op::LoadMap(dst, map))
    }

    /// `r0 = helper(r1, .., r5)`, r1 to r5 clobbered.
    pub(crate) fn call(&mut self, helper: Helper) -> &mut Asm {
        self.push(Op::Call(helper))
    }

    /// `r0 = map_lookup_elem(map, r10 + key)`: the value of the key on the stack at
    /// `key`, or 0 (r1 and r2 clobbered).
    pub(crate) fn map_lookup(&mut self, map: Map, key: i16) -> &mut Asm {
        self.load_map(Reg::R1, map)
            .mov(Reg::R2, Reg::R10)
            .add_imm(Reg::R2, i32::from(key))
            .call(Helper::MapLookupElem)
    }

    /// `if reg COND k goto label`.
    pub(crate) fn jump_if(
        &mut self,
        reg: Reg,
        cond: Cond,
        k: i32,
        label: &'static str,
    ) -> &mut Asm {
        self.push(Op::Jump(Some((cond, reg, k)), label))
    }

    /// `goto label`.
    pub(crate) fn goto(&mut self, label: &'static str) -> &mut Asm {
        self.push(Op::Jump(None, label))
    }

    /// `exit` (r0 is the program's result).
    pub(crate) fn exit(&mut self) -> &mut Asm {
        self.push(Op::Exit)
    }

    /// Places `label` before the next operation.
    pub(crate) fn label(&mut self, label: &'static str) -> &mut Asm {
        self.labels.push((label, self.ops.len()));
        self
    }

    /// Resolves the labels: the program, or why it has a defect.
    pub(crate) fn finish(self) -> Result<Program, AsmError> {
        let mut slot = Vec::with_capacity(self.ops.len() + 1);
        let mut at = 0usize;
        for op in &self.ops {
            slot.push(at);
            at += op.slots();
        }
        slot.push(at);
        for (i, (name, _)) in self.labels.iter().enumerate() {
            if self.labels[..i].iter().any(|(n, _)| n == name) {
                return Err(AsmError::DuplicateLabel(name));
            }
            let used = self
                .ops
                .iter()
                .any(|op| matches!(op, Op::Jump(_, l) if l == name));
            if !used {
                return Err(AsmError::UnusedLabel(name));
            }
        }
        let mut insns = Vec::with_capacity(at);
        for (i, op) in self.ops.iter().enumerate() {
            let mut off = 0;
            if let Op::Jump(_, label) = *op {
                let (_, to) = (self.labels.iter().find(|(n, _)| *n == label))
                    .ok_or(AsmError::UnknownLabel(label))?;
                let delta = slot[*to] as i64 - slot[i] as i64 - 1;
                off = i16::try_from(delta).map_err(|_| AsmError::TooFar(label))?;
            }
            insns.extend(op.encode(off).into_iter().flatten());
        }
        Ok(Program {
            insns,
            ops: self.ops,
            labels: self.labels,
        })
    }
}

/// An assembled program: its instructions, and what they came from for the listing.
#[derive(Debug)]
pub(crate) struct Program {
    insns: Vec<Insn>,
    // What the listing is made from (the golden test's).
    #[cfg_attr(not(test), allow(dead_code))]
    ops: Vec<Op>,
    #[cfg_attr(not(test), allow(dead_code))]
    labels: Vec<(&'static str, usize)>,
}

impl Program {
    /// The instructions, as the kernel loads them.
    pub(crate) fn insns(&self) -> &[Insn] {
        &self.insns
    }

    /// One line per instruction: its slot, its encoding (opcode, registers, offset,
    /// immediate, in hex) and what it does; each label on a line of its own.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn listing(&self) -> String {
        let mut out = String::new();
        let mut slot = 0;
        for (i, op) in self.ops.iter().enumerate() {
            for (name, _) in self.labels.iter().filter(|(_, at)| *at == i) {
                let _ = writeln!(out, "{name}:");
            }
            let first = &self.insns[slot];
            let _ = writeln!(
                out,
                "{slot:4}  {:02x} {:02x} {:04x} {:08x}  {op}",
                first.code, first.regs, first.off as u16, first.imm as u32
            );
            slot += op.slots();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_resolve_forward_and_back_over_wide_instructions() {
        let map = Map { name: "m", fd: 7 };
        let mut a = Asm::new();
        a.label("top")
            .jump_if(Reg::R1, Cond::Eq, 0, "end")
            .load_map(Reg::R2, map)
            .goto("top")
            .label("end")
            .exit();
        let p = a.finish().unwrap();
        let i = p.insns();
        assert_eq!(i.len(), 5);
        // The jump over the two slots of the map load and the goto.
        assert_eq!((i[0].code, i[0].regs, i[0].off), (0x15, 1, 3));
        assert_eq!((i[1].code, i[1].regs, i[1].imm), (0x18, 0x12, 7));
        assert_eq!(i[2], insn(0, Reg::R0, 0, 0, 0));
        assert_eq!((i[3].code, i[3].off), (0x05, -4));
        assert!(
            p.listing()
                .contains("top:\n   0  15 01 0003 00000000  if r1 == 0 goto end")
        );
        assert!(p.listing().contains("   3  05 00 fffc 00000000  goto top"));
    }

    #[test]
    fn a_label_missing_twice_or_unused_is_an_error() {
        let mut a = Asm::new();
        a.goto("nowhere").exit();
        assert_eq!(a.finish().unwrap_err(), AsmError::UnknownLabel("nowhere"));
        let mut a = Asm::new();
        a.label("idle").exit();
        assert_eq!(a.finish().unwrap_err(), AsmError::UnusedLabel("idle"));
        let mut a = Asm::new();
        a.label("x").goto("x").label("x").exit();
        assert_eq!(a.finish().unwrap_err(), AsmError::DuplicateLabel("x"));
    }

    #[test]
    fn a_jump_beyond_sixteen_bits_is_an_error() {
        let mut a = Asm::new();
        a.goto("far");
        for _ in 0..40_000 {
            a.mov_imm(Reg::R0, 0);
        }
        a.label("far").exit();
        assert_eq!(a.finish().unwrap_err(), AsmError::TooFar("far"));
    }
}
