//! Fuzz target `hotspot`: a HotSpot JVM's memory (one of the JDK 17 snapshots in
//! tests/data/java, mutated) read as the recorder reads it: the VMStructs tables, the
//! interpreter and code heaps, the count of unloaded classes, then several samples'
//! Java frames in a row through one [`JavaFrames`] (interpreted frames by their
//! `Method*` and bytecode pointer, compiled frames by their nmethod's scopes, inlined
//! methods included; warmed ahead and ticked as the recorder does), every id named,
//! and the code heap as the unwinder asks it.
//!
//! The snapshots are ~100 KB each (3,500 regions: every byte the readers read), too
//! large to be the input itself, so they are built into the target and the input is
//! a sample plus patches over one of them; each patch names a region by its index, so
//! every byte a mutation writes is one the readers read. The snapshots lack what was
//! not read when they were captured (the interpreter's code range, the performance
//! counters); [`base`] adds those few words so the readers get past them.
//!
//! Input (little-endian):
//! ```text
//! 0      u8      snapshot: b % 2 (jvm17, jvm17-inline)
//! 1      u8      flags: b & 3: 0 no perf map, 1 an empty one, 2-3 one entry
//!                (below, named as the snapshot's compiled method); 4 warm each
//!                sample first; 8 tick after each sample
//! 2      u8      samples: 1 + b % 4
//! 3      u8      frames per sample: b % 9
//! 4      u64     sp: the stack copy's address
//! 12     u16     the stack copy's length
//! 14     u64     r13 (the interpreter's bytecode pointer)
//! 22     u64     perf map entry start, 30: its end
//! 38     17 bytes per frame: kind (1: a return address, else the pc), pc, fp (0: none)
//! ...    the stack copy
//! ...    patches, to the end: u8 tag; even: u16 region, u16 offset, u8 length,
//!        bytes (written over that snapshot region); odd: u64 address, u16 length,
//!        bytes (a region added)
//! ```

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use profile::format::{Frame, FrameKind};
use profile::interp::jvm::vmstructs::{VmStructs, VmSymbols};
use profile::interp::jvm::{HeapCode, JavaFrames};
use profile::interp::{CodeRegions, Memory, Snapshot};
use profile::unwind::{CodeModule, FrameAddress, FrameRegisters, ModuleLookup};

const HEADER: usize = 38;
const FRAME: usize = 17;
/// Where [`base`] puts the interpreter's `StubQueue`, its code, and the performance
/// data: addresses neither snapshot holds.
const STUB_QUEUE: u64 = 0x10_0000_0000;
pub const INTERPRETER: u64 = 0x11_0000_0000;
const INTERPRETER_LEN: u32 = 0x1_0000;
const PROLOGUE: u64 = 0x12_0000_0000;
const TABLES: u64 = 0x13_0000_0000;
/// The process id the JVM is known by (no process has it: no hsperfdata is opened).
const PID: u32 = 0;

/// A snapshot the target patches, and what it was captured with.
pub struct Base {
    /// The memory, with [`base`]'s additions.
    pub snap: Snapshot,
    /// Each region's address and length, for patches.
    pub regions: Vec<(u64, usize)>,
    /// libjvm's symbols and load bias.
    pub syms: VmSymbols,
    pub bias: u64,
    /// The header's other values (`method`; `start`, `end`, `pc_a`, `pc_b`).
    pub values: HashMap<String, u64>,
    /// The perf map's name of the compiled method, when there is one.
    pub name: &'static str,
}

fn load(gz: &[u8], name: &'static str) -> Base {
    let mut text = String::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_string(&mut text)
        .expect("a built-in snapshot");
    let mut syms = VmSymbols::default();
    let mut values = HashMap::new();
    for l in text.lines().filter_map(|l| l.strip_prefix("# ")) {
        let Some((k, v)) = l.split_once(' ') else {
            continue;
        };
        let v = u64::from_str_radix(v, 16).expect("a hex value");
        let k = k.strip_prefix("sym:").unwrap_or(k);
        if k.starts_with("VM") {
            syms.addrs.insert(k.to_owned(), v);
        } else {
            values.insert(k.to_owned(), v);
        }
    }
    let mut snap = Snapshot::from_text(&text).expect("a snapshot");
    let bias = values.get("bias").copied().unwrap_or(0);
    if let Ok(vm) = VmStructs::read(&snap, &syms, bias) {
        add_runtime(&mut snap, &vm);
    }
    compact_tables(&mut snap, &syms, bias);
    let regions = snap.regions().map(|(a, b)| (a, b.len())).collect();
    Base {
        snap,
        regions,
        syms,
        bias,
        values,
        name,
    }
}

/// Adds what the capture did not read: `AbstractInterpreter::_code` pointing to a
/// `StubQueue` whose buffer is [`INTERPRETER`], and `PerfMemory::_prologue` to
/// performance data holding one `sun.cls.unloadedClasses` counter, zero.
fn add_runtime(snap: &mut Snapshot, vm: &VmStructs) {
    let mut add = |addr: u64, fields: &[(u64, &[u8])]| {
        let len = fields.iter().map(|(o, b)| *o as usize + b.len()).max();
        let mut bytes = vec![0u8; len.unwrap_or(0)];
        for (o, b) in fields {
            bytes[*o as usize..*o as usize + b.len()].copy_from_slice(b);
        }
        snap.insert(addr, bytes);
    };
    let off = |k: &str| vm.offset(k).ok();
    if let Ok(code) = vm.static_addr("AbstractInterpreter::_code")
        && let (Some(buffer), Some(limit)) = (
            off("StubQueue::_stub_buffer"),
            off("StubQueue::_buffer_limit"),
        )
    {
        add(code, &[(0, &STUB_QUEUE.to_le_bytes())]);
        add(
            STUB_QUEUE,
            &[
                (buffer, &INTERPRETER.to_le_bytes()),
                (limit, &INTERPRETER_LEN.to_le_bytes()),
            ],
        );
    }
    if let Ok(prologue) = vm.static_addr("PerfMemory::_prologue")
        && let (Some(first), Some(count), Some(length), Some(name), Some(data)) = (
            off("PerfDataPrologue::entry_offset"),
            off("PerfDataPrologue::num_entries"),
            off("PerfDataEntry::entry_length"),
            off("PerfDataEntry::name_offset"),
            off("PerfDataEntry::data_offset"),
        )
    {
        add(prologue, &[(0, &PROLOGUE.to_le_bytes())]);
        let entry = 0x100u64;
        add(
            PROLOGUE,
            &[
                (first, &(entry as u32).to_le_bytes()),
                (count, &1u32.to_le_bytes()),
                (entry + length, &0x80u32.to_le_bytes()),
                (entry + name, &0x20u32.to_le_bytes()),
                (entry + data, &0x60u32.to_le_bytes()),
                (entry + 0x20, b"sun.cls.unloadedClasses\0"),
                (entry + 0x60, &0u64.to_le_bytes()),
            ],
        );
    }
}

/// The readers' sources: the table entries they look up are string literals there.
const READERS: &[&str] = &[
    include_str!("../../src/interp/jvm/compiled.rs"),
    include_str!("../../src/interp/jvm/epochs.rs"),
    include_str!("../../src/interp/jvm/frames.rs"),
    include_str!("../../src/interp/jvm/method.rs"),
];

/// A table's symbol, its stride's, and its members' (with their sizes).
type Table = (&'static str, &'static str, &'static [(&'static str, usize)]);

/// Rewrites the four VMStructs tables, at new addresses, to hold only the entries
/// that the readers look up (of some 2,000): reading them all was nine tenths of a
/// run, and a mutation of an entry no reader looks up finds nothing.
fn compact_tables(snap: &mut Snapshot, syms: &VmSymbols, bias: u64) {
    let wanted: std::collections::HashSet<&str> = READERS
        .iter()
        .flat_map(|src| src.split('"').skip(1).step_by(2))
        .collect();
    let sym = |k: &str| syms.addrs.get(k).map(|a| a.wrapping_add(bias));
    let word = |snap: &Snapshot, k: &str| snap.u64_at(sym(k)?);
    let name = |snap: &Snapshot, a: u64| {
        let b = snap.c_string_at(a, 256)?;
        Some(String::from_utf8_lossy(&b).into_owned())
    };
    // (table, stride, [(member, bytes)]): the first member is the name, the second
    // (VMStructs) the field's.
    let tables: [Table; 4] = [
        (
            "VMStructs",
            "VMStructEntryArrayStride",
            &[
                ("VMStructEntryTypeNameOffset", 8),
                ("VMStructEntryFieldNameOffset", 8),
                ("VMStructEntryIsStaticOffset", 4),
                ("VMStructEntryOffsetOffset", 8),
                ("VMStructEntryAddressOffset", 8),
            ],
        ),
        (
            "VMTypes",
            "VMTypeEntryArrayStride",
            &[
                ("VMTypeEntryTypeNameOffset", 8),
                ("VMTypeEntrySizeOffset", 8),
            ],
        ),
        (
            "VMIntConstants",
            "VMIntConstantEntryArrayStride",
            &[
                ("VMIntConstantEntryNameOffset", 8),
                ("VMIntConstantEntryValueOffset", 4),
            ],
        ),
        (
            "VMLongConstants",
            "VMLongConstantEntryArrayStride",
            &[
                ("VMLongConstantEntryNameOffset", 8),
                ("VMLongConstantEntryValueOffset", 8),
            ],
        ),
    ];
    for (t, (table, stride, members)) in tables.iter().enumerate() {
        let (Some(at), Some(start), Some(stride)) =
            (sym(table), word(snap, table), word(snap, stride))
        else {
            continue;
        };
        let Some(offs) = members
            .iter()
            .map(|(m, n)| Some((word(snap, m)? as usize, *n)))
            .collect::<Option<Vec<_>>>()
        else {
            continue;
        };
        let mut out = Vec::new();
        for i in 0..10_000u64 {
            let e = start.wrapping_add(i * stride);
            let Some(n) = snap.u64_at(e.wrapping_add(offs[0].0 as u64)) else {
                break;
            };
            if n == 0 {
                break;
            }
            let key = match (name(snap, n), t) {
                (Some(ty), 0) => {
                    let field = snap.u64_at(e.wrapping_add(offs[1].0 as u64));
                    match field.and_then(|f| name(snap, f)) {
                        Some(f) => format!("{ty}::{f}"),
                        None => continue,
                    }
                }
                (Some(n), _) => n,
                (None, _) => continue,
            };
            if !wanted.contains(key.as_str()) {
                continue;
            }
            let mut entry = vec![0u8; stride as usize];
            for &(o, len) in &offs {
                if let Some(dst) = entry.get_mut(o..o + len) {
                    snap.read(e.wrapping_add(o as u64), dst);
                }
            }
            out.extend_from_slice(&entry);
        }
        out.resize(out.len() + stride as usize, 0);
        let new = TABLES + 0x10_0000 * t as u64;
        snap.insert(new, out);
        // The table's pointer, in the region that holds it.
        if let Some((r, bytes)) = snap.regions().filter(|(a, _)| *a <= at).last() {
            let mut bytes = bytes.to_vec();
            let o = (at - r) as usize;
            if let Some(w) = bytes.get_mut(o..o + 8) {
                w.copy_from_slice(&new.to_le_bytes());
                snap.insert(r, bytes);
            }
        }
    }
}

/// Snapshot `i % 2`: jvm17 (an interpreted `long Huge.huge(long)`), jvm17-inline
/// (`void Inline.work()` compiled with calls inlined).
pub fn base(i: u8) -> &'static Base {
    static BASES: OnceLock<[Base; 2]> = OnceLock::new();
    let bases = BASES.get_or_init(|| {
        [
            load(
                include_bytes!("../../tests/data/java/jvm17.snapshot.gz"),
                "long Huge.huge(long)",
            ),
            load(
                include_bytes!("../../tests/data/java/jvm17-inline.snapshot.gz"),
                "void Inline.work()",
            ),
        ]
    });
    &bases[usize::from(i % 2)]
}

/// A base snapshot with regions patched or added in front of it.
struct Patched {
    base: &'static Snapshot,
    over: Snapshot,
}

impl Memory for Patched {
    fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        self.over.read(addr, buf) || self.base.read(addr, buf)
    }
}

/// One perf map entry, or none.
struct PerfEntry(Option<(u64, u64, &'static str)>);

impl CodeRegions for PerfEntry {
    fn region(&self, addr: u64) -> Option<(u64, u64, &str)> {
        self.0.filter(|(s, e, _)| (*s..*e).contains(&addr))
    }
}

/// No native module anywhere: the unwinder's view of JIT code alone.
struct NoModules;

impl ModuleLookup for NoModules {
    fn lookup(&self, _avma: u64) -> Option<CodeModule<'_>> {
        None
    }
}

static CLOCK: AtomicU64 = AtomicU64::new(0);

/// The recording's clock: a microsecond more at each look.
fn clock() -> u64 {
    CLOCK.fetch_add(1_000, Ordering::Relaxed)
}

fn u16_at(d: &[u8], at: usize) -> u16 {
    d.get(at..at + 2)
        .map_or(0, |b| u16::from_le_bytes([b[0], b[1]]))
}

fn u64_at(d: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    if let Some(s) = d.get(at..at + 8) {
        b.copy_from_slice(s);
    }
    u64::from_le_bytes(b)
}

/// The patches to the end of `d` over `base`.
fn patched(base: &'static Base, mut d: &[u8]) -> Patched {
    let mut changed: BTreeMap<usize, Vec<u8>> = BTreeMap::new();
    let mut over = Snapshot::default();
    while let Some((&tag, rest)) = d.split_first() {
        if tag % 2 == 0 {
            let Some(p) = rest.get(..5) else { break };
            let i = usize::from(u16_at(p, 0)) % base.regions.len().max(1);
            let len = usize::from(p[4]).min(rest.len() - 5);
            let bytes = &rest[5..5 + len];
            d = &rest[5 + len..];
            let Some(&(addr, size)) = base.regions.get(i) else {
                continue;
            };
            let region = changed.entry(i).or_insert_with(|| {
                let mut v = vec![0; size];
                base.snap.read(addr, &mut v);
                v
            });
            let at = usize::from(u16_at(p, 2)) % size.max(1);
            let n = bytes.len().min(size - at.min(size));
            region[at..at + n].copy_from_slice(&bytes[..n]);
        } else {
            let Some(p) = rest.get(..10) else { break };
            let len = usize::from(u16_at(p, 8)).min(rest.len() - 10);
            over.insert(u64_at(p, 0), rest[10..10 + len].to_vec());
            d = &rest[10 + len..];
        }
    }
    for (i, bytes) in changed {
        over.insert(base.regions[i].0, bytes);
    }
    Patched {
        base: &base.snap,
        over,
    }
}

/// What a run named, for the tests that check the seeds reach the names.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HotspotRun {
    /// Each Java frame's names, innermost first, `function:line` joined by `;`.
    pub frames: Vec<String>,
}

/// The `hotspot` target.
pub fn hotspot(data: &[u8]) {
    let _ = hotspot_run(data);
}

/// [`hotspot`], saying what it named.
pub fn hotspot_run(data: &[u8]) -> HotspotRun {
    let mut run = HotspotRun::default();
    let Some(header) = data.get(..HEADER) else {
        return run;
    };
    let base = base(header[0]);
    let (flags, samples) = (header[1], 1 + header[2] % 4);
    let nframes = usize::from(header[3] % 9);
    let sp = u64_at(header, 4);
    let r13 = Some(u64_at(header, 14)).filter(|&r| r != 0);
    let Some(descs) = data.get(HEADER..HEADER + FRAME * nframes) else {
        return run;
    };
    let rest = &data[HEADER + FRAME * nframes..];
    let stack_len = usize::from(u16_at(header, 12)).min(rest.len());
    let (stack, rest) = rest.split_at(stack_len);
    let mem = patched(base, rest);
    let jit = match flags & 3 {
        0 => None,
        1 => Some(PerfEntry(None)),
        _ => Some(PerfEntry(Some((
            u64_at(header, 22),
            u64_at(header, 30),
            base.name,
        )))),
    };
    let mut addrs = Vec::new();
    let mut regs = Vec::new();
    for f in descs.chunks_exact(FRAME) {
        let pc = u64_at(f, 1);
        addrs.push(match f[0] & 1 {
            1 => FrameAddress::ReturnAddress(pc),
            _ => FrameAddress::InstructionPointer(pc),
        });
        let fp = u64_at(f, 9);
        regs.push(FrameRegisters {
            pc,
            sp,
            fp: (fp != 0).then_some(fp),
        });
    }
    CLOCK.store(1_000_000, Ordering::Relaxed);
    let mut java = JavaFrames::new(clock);
    java.jvm_found(PID, Some(base.syms.clone()), base.bias, || {
        Some(Box::new(mem) as Box<dyn Memory + Send>)
    });
    for _ in 0..samples {
        let time = clock();
        if flags & 4 != 0
            && let Some(FrameAddress::InstructionPointer(ip)) = addrs.first()
        {
            let bp = regs.first().and_then(|r| r.fp).unwrap_or(0);
            java.warm(PID, time, (*ip, sp, bp, stack));
        }
        let mut frames: Vec<Frame> = addrs
            .iter()
            .map(|a| Frame {
                kind: match a {
                    FrameAddress::InstructionPointer(_) => FrameKind::User,
                    FrameAddress::ReturnAddress(_) => FrameKind::Return,
                },
                pid: PID,
                addr: a.address(),
                mapping: None,
            })
            .collect();
        let jit = jit.as_ref().map(|j| j as &dyn CodeRegions);
        java.expand(PID, time, (sp, stack, r13), &addrs, &regs, jit, &mut frames);
        for f in frames.iter().filter(|f| f.kind == FrameKind::Interpreted) {
            let (_, lines) = java.names(PID, f.addr).expect("an id with no names");
            assert!(!lines.is_empty(), "frame {} has no line", f.addr);
            let named: Vec<String> = lines
                .iter()
                .map(|l| format!("{}:{}", l.function, l.line.unwrap_or(0)))
                .collect();
            run.frames.push(named.join(";"));
        }
        if flags & 8 != 0 {
            java.tick();
        }
    }
    let heap = HeapCode::new(&NoModules, &java, PID);
    for a in &addrs {
        let _ = heap.jit(a.address());
        let _ = heap.jit_code_before(a.address());
    }
    let _ = java.notes();
    let _ = java.rewarm_due();
    run
}
