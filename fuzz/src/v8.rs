//! Fuzz target `v8`: a Node process's memory and a sample's stack read as the
//! recorder reads them ([`V8Frames::expand`], issue 47): the frames' slots, the
//! JSFunction → SharedFunctionInfo → name and script chain, every object checked
//! against the layout Node 20's `v8dbg_*` symbols give, and the scan for a frameless
//! builtin's caller at the leaf (its return address and the code before it); then
//! every id named and the notes made.
//!
//! The heap is built into the target ([`base`]: a meta map, functions `inner` and
//! `mega` in script `/srv/app.js`, a bytecode array, a context, a `call` before a
//! return address in JIT code) and the input is a sample plus patches over it, so
//! mutations reach the checks rather than stop at the first pointer.
//!
//! Input (little-endian):
//! ```text
//! 0      u8      frames: b % 9
//! 1      u16     the stack copy's length (at most 4,096), at [`SP`]
//! 3      25 bytes per frame: kind (1: a return address, else the pc), pc, sp, fp
//!                (0: none)
//! ...    the stack copy
//! ...    patches, to the end: u64 address, u8 length, bytes (written over the
//!        region that holds the address, or a region added)
//! ```

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::sync::Arc;

use profile::format::{Frame, FrameKind};
use profile::interp::v8::{InJit, Layout, V8Frames};
use profile::interp::{Budgets, Snapshot};
use profile::unwind::{FrameAddress, FrameRegisters};

/// The sample's stack pointer.
pub const SP: u64 = 0x7ff0_0000;
/// V8's builtins, in the process.
pub const BUILTINS: (u64, u64) = (0x40_0000, 0x50_0000);
/// JIT code: every address from here on.
pub const JIT: u64 = 0x7000_0000;
/// A return address in JIT code, after a `call rel32`.
pub const CALL_RA: u64 = JIT + 0x107;
const FRAME: usize = 25;
const PID: u32 = 1;

/// The values Node 20's binary gives for what the walker reads.
fn values() -> HashMap<String, i64> {
    [
        ("TaggedSize", 8),
        ("SystemPointerSize", 8),
        ("SmiShiftSize", 31),
        ("SmiTagSize", 1),
        ("HeapObjectTagMask", 3),
        ("HeapObjectTag", 1),
        ("SmiTagMask", 1),
        ("SmiTag", 0),
        ("off_fp_context_or_frame_type", -8),
        ("off_fp_function", -16),
        ("off_fp_bytecode_array", -32),
        ("off_fp_bytecode_offset", -40),
        ("class_HeapObject__map__Map", 0),
        ("class_Map__instance_type__uint16_t", 12),
        ("class_JSFunction__shared__SharedFunctionInfo", 24),
        ("class_SharedFunctionInfo__name_or_scope_info__Object", 16),
        (
            "class_SharedFunctionInfo__script_or_debug_info__HeapObject",
            32,
        ),
        ("class_Script__name__Object", 16),
        ("class_String__length__int32_t", 12),
        ("class_SeqOneByteString__chars__char", 16),
        ("class_SeqTwoByteString__chars__char", 16),
        ("class_ConsString__first__String", 16),
        ("class_ConsString__second__String", 24),
        ("class_ThinString__actual__String", 16),
        ("class_SlicedString__parent__String", 16),
        ("class_SlicedString__offset__SMI", 24),
        ("type_JSFunction__JS_FUNCTION_TYPE", 2066),
        ("type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE", 262),
        ("type_Script__SCRIPT_TYPE", 167),
        ("type_ScopeInfo__SCOPE_INFO_TYPE", 261),
        ("type_BytecodeArray__BYTECODE_ARRAY_TYPE", 191),
        ("type_Map__MAP_TYPE", 255),
        ("FirstNonstringType", 128),
        ("StringRepresentationMask", 7),
        ("SeqStringTag", 0),
        ("ConsStringTag", 1),
        ("SlicedStringTag", 3),
        ("ThinStringTag", 5),
        ("StringEncodingMask", 8),
        ("OneByteStringTag", 8),
        ("frametype_EntryFrame", 1),
        ("frametype_InterpretedFrame", 13),
        ("scopeinfo_idx_first_vars", 3),
        ("scopeinfo_idx_ncontextlocals", 2),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// The heap the input patches, and the tagged objects a seed's frames point at.
pub struct Base {
    pub regions: BTreeMap<u64, Vec<u8>>,
    pub inner: u64,
    pub mega: u64,
    pub context: u64,
    pub bytecode: u64,
}

/// Objects 0x100 bytes apart from 0x10_0000, tagged +1; the meta map first.
pub fn base() -> Base {
    let mut regions = BTreeMap::new();
    let mut next = 0x10_0000u64;
    let mut put = |words: &[u64], tail: &[u8]| {
        let at = next;
        next += 0x100;
        let mut bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        bytes.extend_from_slice(tail);
        bytes.resize(0x100, 0);
        regions.insert(at, bytes);
        at + 1
    };
    let meta = 0x10_0001;
    put(&[meta, 255 << 32], &[]);
    let mut map = |ty: u64| put(&[meta, ty << 32], &[]);
    let (string, script_map, sfi_map, fn_map, bytecode_map, context_map) =
        (map(8), map(167), map(262), map(2066), map(191), map(200));
    let mut string_of = |s: &str| {
        let mut tail = vec![0; 4];
        tail.extend_from_slice(&(s.len() as u32).to_le_bytes());
        tail.extend_from_slice(s.as_bytes());
        put(&[string], &tail)
    };
    let (inner_name, mega_name, file) = (
        string_of("inner"),
        string_of("mega"),
        string_of("/srv/app.js"),
    );
    let script = put(&[script_map, 0, file], &[]);
    let mut function = |name: u64| {
        let sfi = put(&[sfi_map, 0, name, 0, script], &[]);
        put(&[fn_map, 0, 0, sfi], &[])
    };
    let (inner, mega) = (function(inner_name), function(mega_name));
    let bytecode = put(&[bytecode_map], &[]);
    let context = put(&[context_map], &[]);
    regions.insert(JIT + 0x100, vec![0x90, 0x90, 0xE8, 1, 2, 3, 4]);
    Base {
        regions,
        inner,
        mega,
        context,
        bytecode,
    }
}

/// What a run named: each interpreted frame's function and file, leaf first, the
/// frame put above the leaf (if any), and the notes.
#[derive(Debug, Default)]
pub struct V8Run {
    pub frames: Vec<String>,
    pub above_leaf: Option<String>,
    pub notes: Vec<String>,
}

/// The input, read; None when it is too short for its header.
pub fn v8_run(data: &[u8]) -> Option<V8Run> {
    let n = usize::from(*data.first()? % 9);
    let len = usize::from(u16::from_le_bytes(data.get(1..3)?.try_into().ok()?)).min(4096);
    let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let frames_end = 3 + n * FRAME;
    let raw = data.get(3..frames_end)?;
    let stack = data.get(frames_end..frames_end + len)?;
    let mut addrs = Vec::new();
    let mut regs = Vec::new();
    for f in raw.chunks_exact(FRAME) {
        let pc = u64_at(f, 1);
        addrs.push(if f[0] == 1 {
            FrameAddress::ReturnAddress(pc)
        } else {
            FrameAddress::InstructionPointer(pc)
        });
        let fp = u64_at(f, 17);
        regs.push(FrameRegisters {
            pc: addrs.last()?.lookup_address(),
            sp: u64_at(f, 9),
            fp: (fp != 0).then_some(fp),
        });
    }
    let mut regions = base().regions;
    let mut rest = &data[frames_end + len..];
    while rest.len() >= 9 {
        let addr = u64_at(rest, 0);
        let n = usize::from(rest[8]).min(rest.len() - 9);
        let bytes = &rest[9..9 + n];
        rest = &rest[9 + n..];
        patch(&mut regions, addr, bytes);
    }
    let mut snap = Snapshot::default();
    for (at, bytes) in regions {
        snap.insert(at, bytes);
    }
    let mut layout = Layout::from_values(&values()).ok()?;
    layout.builtins = Some(BUILTINS);
    let mut v8 = V8Frames::new(Budgets::default());
    v8.node_found(
        PID,
        "/usr/bin/node",
        Ok(Arc::new(layout)),
        (0, (0, u64::MAX)),
        || Some(Box::new(snap) as _),
    );
    let mut frames: Vec<Frame> = addrs
        .iter()
        .map(|a| Frame {
            kind: FrameKind::Return,
            pid: PID,
            addr: a.lookup_address(),
            mapping: Some(u32::from(a.lookup_address() >= JIT)),
        })
        .collect();
    let in_jit = |f: &Frame| f.mapping == Some(1);
    let jit_at = |a: u64| a >= JIT;
    let jit = InJit {
        frame: &in_jit,
        at: &jit_at,
    };
    let above = v8.expand(PID, (SP, stack), (&addrs, &regs), jit, &mut frames);
    let name = |f: &Frame| {
        let (_, lines) = v8.names(PID, f.addr)?;
        lines
            .first()
            .map(|l| format!("{}:{}", l.function, l.file.as_deref().unwrap_or("")))
    };
    Some(V8Run {
        frames: (frames.iter())
            .filter(|f| f.kind == FrameKind::Interpreted)
            .map(|f| name(f).expect("every interpreted frame is named"))
            .collect(),
        above_leaf: above.map(|f| name(&f).expect("the frame above the leaf is named")),
        notes: v8.notes(),
    })
}

/// Writes `bytes` at `addr`: over the region that holds it (as much as fits), or as a
/// region of its own where none overlaps.
fn patch(regions: &mut BTreeMap<u64, Vec<u8>>, addr: u64, bytes: &[u8]) {
    if let Some((&start, region)) = regions.range_mut(..=addr).next_back() {
        let off = (addr - start) as usize;
        if off < region.len() {
            let n = bytes.len().min(region.len() - off);
            region[off..off + n].copy_from_slice(&bytes[..n]);
            return;
        }
    }
    let end = addr.saturating_add(bytes.len() as u64);
    if !bytes.is_empty() && regions.range(addr..end).next().is_none() {
        regions.insert(addr, bytes.to_vec());
    }
}

/// The fuzz target: any input, no panic, no hang.
pub fn v8(data: &[u8]) {
    let _ = v8_run(data);
}

/// The seeds: an interpreter frame of `inner` under a JIT frame of `mega`; and a
/// frameless builtin at the leaf whose caller `mega` the unwind stepped over.
pub fn v8_seeds() -> Vec<(String, Vec<u8>)> {
    let b = base();
    let frame = |kind: u8, pc: u64, sp: u64, fp: u64| {
        let mut v = vec![kind];
        for w in [pc, sp, fp] {
            v.extend_from_slice(&w.to_le_bytes());
        }
        v
    };
    let seed = |frames: &[Vec<u8>], stack: &[u64]| {
        let mut v = vec![frames.len() as u8];
        v.extend_from_slice(&((stack.len() * 8) as u16).to_le_bytes());
        frames.iter().for_each(|f| v.extend_from_slice(f));
        stack
            .iter()
            .for_each(|w| v.extend_from_slice(&w.to_le_bytes()));
        v
    };
    // Frame pointers 0x40 and 0x80 above sp; each frame's slots below it.
    let mut chain = vec![0u64; 16];
    let slots = |s: &mut Vec<u64>, fp_word: usize, words: &[u64]| {
        for (k, w) in words.iter().enumerate() {
            s[fp_word - 1 - k] = *w;
        }
    };
    slots(&mut chain, 8, &[b.context, b.inner, 0, b.bytecode, 3 << 32]);
    slots(&mut chain, 16, &[b.context, b.mega]);
    let interpreted = seed(
        &[
            frame(0, BUILTINS.0 + 0x10, SP, SP + 0x40),
            frame(1, JIT + 0x301, SP + 0x50, SP + 0x80),
        ],
        &chain,
    );
    let mut pushed = vec![0u64; 16];
    pushed[..3].copy_from_slice(&[7, 9, CALL_RA]);
    slots(&mut pushed, 8, &[b.context, b.mega]);
    let frameless = seed(
        &[
            frame(0, BUILTINS.0 + 0x80, SP, SP + 0x40),
            frame(1, 0x60_0000 + 1, SP + 0x50, SP + 0x80),
        ],
        &pushed,
    );
    vec![
        ("interpreted".to_owned(), interpreted),
        ("frameless-builtin".to_owned(), frameless),
    ]
}
