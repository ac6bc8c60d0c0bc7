//! Interpreted Java frames in a sample's stack: where a frame's pc is in HotSpot's
//! interpreter, the frame keeps the `Method*` it runs and its bytecode pointer at
//! fixed offsets below its frame pointer (x86_64: `fp - 3` and `fp - 8` words), in the
//! stack copy taken at the sample instant. [`JavaFrames`] turns such a native
//! `Interpreter` frame into a [`FrameKind::Interpreted`] frame whose id stands for
//! (method, line), and names the ids for the recording's symbols.
//!
//! Naming is done once per (`Method*`, bci) and cached. A method's memory is freed
//! when its class is unloaded and may then hold another class's method, so a name is
//! only trusted while the JVM's count of unloaded classes (its `java.cls.unloadedClasses`
//! performance counter) has not moved since before the sample was taken: the count is
//! read at each sample with interpreted frames, the cache dropped when it moves, and a
//! frame sampled before a move is marked `[java: unknown method]`, never misnamed. A
//! frame whose `Method*` or bytecode pointer does not check out is marked the same way.

use std::collections::{HashMap, HashSet};

use super::method::{Layout, MethodInfo, line_at, line_table, read_method};
use super::vmstructs::{VmError, VmStructs, VmSymbols};
use crate::format::{Frame, FrameKind, SymbolLine};
use crate::interp::{Memory, Overlay};
use crate::unwind::{FrameAddress, FrameRegisters};

/// Words below the frame pointer where an interpreter frame keeps its `Method*` and
/// bytecode pointer (HotSpot frame_x86.hpp; checked against the exported
/// `frame::interpreter_frame_last_sp_offset`).
const METHOD_SLOT: u64 = 3;
const BCP_SLOT: u64 = 8;
/// Between two tries to read the tables of a JVM not initialized yet.
const RETRY_NS: u64 = 100_000_000;
/// The id of the `[java: unknown method]` frame of every JVM.
pub const UNKNOWN_ID: u64 = 0;
/// Its name.
pub const UNKNOWN_NAME: &str = "[java: unknown method]";

/// What the VM's tables give, read once the VM is initialized.
struct Ready {
    layout: Layout,
    /// HotSpot's interpreter code.
    interpreter: (u64, u64),
    /// Addresses of the performance counters of unloaded classes.
    unloaded: Vec<u64>,
}

/// One JVM.
struct Jvm {
    mem: Box<dyn Memory + Send>,
    syms: VmSymbols,
    bias: u64,
    ready: Option<Ready>,
    /// Why the tables could not be read, at the last try, and when.
    last_error: Option<VmError>,
    last_try: Option<u64>,
    /// The unloaded-classes count last read, the time since which it has held, and
    /// the time of the last read.
    unloaded: Option<(u64, u64, u64)>,
    named: Named,
}

/// What was named in one JVM.
struct Named {
    /// Method* → the method and its line table, for methods that checked out.
    methods: HashMap<u64, (MethodInfo, Vec<(u32, u32)>)>,
    /// Words of held samples' stacks tried as `Method*` by [`JavaFrames::warm`].
    tried: HashSet<u64>,
    /// (Method*, line) → frame id.
    ids: HashMap<(u64, Option<u32>), u64>,
    /// Frame id → its name.
    names: HashMap<u64, SymbolLine>,
    next_id: u64,
}

/// Counts for the summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JavaStats {
    /// Interpreter frames named.
    pub named: u64,
    /// Interpreter frames marked unknown (did not check out, or sampled before classes
    /// were unloaded).
    pub unknown: u64,
}

/// The interpreted Java frames of every JVM recorded.
pub struct JavaFrames {
    jvms: HashMap<u32, Jvm>,
    clock: fn() -> u64,
    /// What was done.
    pub stats: JavaStats,
}

impl std::fmt::Debug for JavaFrames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JavaFrames")
            .field("jvms", &self.jvms.len())
            .field("stats", &self.stats)
            .finish()
    }
}

impl JavaFrames {
    /// No JVM yet; `clock` gives the time samples are stamped with (CLOCK_MONOTONIC
    /// ns for the recorder).
    pub fn new(clock: fn() -> u64) -> JavaFrames {
        JavaFrames {
            jvms: HashMap::new(),
            clock,
            stats: JavaStats::default(),
        }
    }

    /// Process `pid` mapped libjvm.so (its ELF `image`) at load bias `bias`; `mem`
    /// reads the process. Ignored if the library lacks HotSpot's tables or the
    /// process is known already.
    pub fn jvm_mapped(
        &mut self,
        pid: u32,
        image: &[u8],
        bias: u64,
        mem: impl FnOnce() -> Option<Box<dyn Memory + Send>>,
    ) {
        if self.jvms.get(&pid).is_some_and(|j| j.bias == bias) {
            return;
        }
        // Another JVM under a known pid (an exec, a reused pid): nothing read of the
        // earlier one holds, but its frames' names stay and ids keep counting, so that
        // ids stay unique within the pid.
        let old = self.jvms.remove(&pid);
        let (Some(syms), Some(mem)) = (VmSymbols::from_elf(image), mem()) else {
            // Not readable: the earlier JVM's names stay, nothing more is read.
            if let Some(mut j) = old {
                j.ready = None;
                j.last_try = Some(u64::MAX);
                j.named.methods.clear();
                j.named.ids.clear();
                self.jvms.insert(pid, j);
            }
            return;
        };
        let (names, next_id) = old.map_or((HashMap::new(), UNKNOWN_ID + 1), |j| {
            (j.named.names, j.named.next_id)
        });
        self.jvms.insert(
            pid,
            Jvm {
                mem,
                syms,
                bias,
                ready: None,
                last_error: None,
                last_try: None,
                unloaded: None,
                named: Named {
                    methods: HashMap::new(),
                    tried: HashSet::new(),
                    ids: HashMap::new(),
                    names,
                    next_id,
                },
            },
        );
        // An attached JVM is ready now: its count of unloaded classes is then read
        // before its first sample.
        let now = (self.clock)();
        if let Some(jvm) = self.jvms.get_mut(&pid)
            && jvm.ensure_ready(now)
        {
            jvm.trusted(now, 0);
        }
    }

    /// Whether any JVM is known.
    pub fn any(&self) -> bool {
        !self.jvms.is_empty()
    }

    /// Whether `pid` is a JVM whose frames are read (the stack builder then asks the
    /// unwinder for each frame's registers).
    pub fn wants(&self, pid: u32) -> bool {
        self.jvms.contains_key(&pid)
    }

    /// Turns the interpreter frames among `frames` (the user frames of a sample of
    /// `pid` taken at `time`, leaf first, one per `addrs` and `regs` entry) into
    /// interpreted Java frames. `sp` and `stack` are the sample's stack copy, `r13`
    /// the sampled register where the interpreter keeps the bytecode pointer of the
    /// method it is running (the leaf's frame slot is only written at calls).
    pub fn expand(
        &mut self,
        pid: u32,
        time: u64,
        (sp, stack, r13): (u64, &[u8], Option<u64>),
        addrs: &[FrameAddress],
        regs: &[FrameRegisters],
        frames: &mut [Frame],
    ) {
        let Some(jvm) = self.jvms.get_mut(&pid) else {
            return;
        };
        let now = (self.clock)();
        if !jvm.ensure_ready(now) {
            return;
        }
        let Some((lo, hi)) = jvm.ready.as_ref().map(|r| r.interpreter) else {
            return;
        };
        let in_interpreter = |a: &FrameAddress| (lo..hi).contains(&a.lookup_address());
        if !addrs.iter().any(in_interpreter) {
            return;
        }
        // Names are trusted only if no class was unloaded since before the sample.
        let trusted = jvm.trusted(now, time);
        let Some(ready) = jvm.ready.as_ref() else {
            return;
        };
        let mem = Overlay {
            sp,
            stack,
            rest: &*jvm.mem,
        };
        for ((a, r), f) in addrs.iter().zip(regs).zip(frames.iter_mut()) {
            if !in_interpreter(a) || f.kind == FrameKind::Interpreted {
                continue;
            }
            let id = match r.fp.filter(|&fp| fp > sp) {
                Some(fp) if trusted => {
                    let method = mem.u64_at(fp.wrapping_sub(METHOD_SLOT * 8));
                    let bcp = mem.u64_at(fp.wrapping_sub(BCP_SLOT * 8));
                    // A caller's slot was written at its call; the running frame's
                    // bytecode pointer is in r13 (its slot may be stale).
                    let line_bcp = match a {
                        FrameAddress::ReturnAddress(_) => bcp,
                        FrameAddress::InstructionPointer(_) => r13,
                    };
                    match (method, bcp) {
                        (Some(m), Some(b)) => jvm.named.name(&ready.layout, &mem, m, b, line_bcp),
                        _ => UNKNOWN_ID,
                    }
                }
                _ => UNKNOWN_ID,
            };
            if id == UNKNOWN_ID {
                self.stats.unknown += 1;
            } else {
                self.stats.named += 1;
            }
            *f = interpreted(pid, id);
        }
    }

    /// Reads what is due of every JVM: its tables once it is initialized, its count of
    /// unloaded classes (so that samples handled later, after a wait or the JVM's
    /// exit, find a read from before them). Called by the recorder's loop.
    pub fn tick(&mut self) {
        let now = (self.clock)();
        for jvm in self.jvms.values_mut() {
            if jvm.ensure_ready(now) {
                jvm.trusted(now, 0);
            }
        }
    }

    /// Reads ahead the methods of the interpreter frames in a sample's stack copy
    /// (`sp`, `stack`) as it is drained: it may be unwound only after the JVM exited
    /// (held for a newer perf map, or drained at the exit), when its memory can no
    /// longer be read. Interpreter frames are
    /// recognized by their shape (a saved frame pointer and sender sp above, locals
    /// pointer above, a `Method*` and a bytecode pointer in their slots); each
    /// candidate `Method*` is read once and kept only if it checks out, so this never
    /// names a frame by itself.
    pub fn warm(&mut self, pid: u32, (sp, stack): (u64, &[u8])) {
        let Some(jvm) = self.jvms.get_mut(&pid) else {
            return;
        };
        let Some(ready) = jvm.ready.as_ref() else {
            return;
        };
        let end = sp.saturating_add(stack.len() as u64);
        let word = |i: usize| {
            let b = stack.get(i * 8..i * 8 + 8)?;
            Some(u64::from_le_bytes(b.try_into().ok()?))
        };
        let on_stack = |v: u64| (sp..end.saturating_add(1 << 20)).contains(&v);
        let words = stack.len() / 8;
        for i in BCP_SLOT as usize..words {
            let at = sp.wrapping_add(8 * i as u64);
            // The saved frame pointer first: most words are not one.
            if !word(i).is_some_and(|link| link > at && on_stack(link)) {
                continue;
            }
            let (Some(link), Some(sender), Some(method), Some(locals), Some(bcp)) = (
                word(i),
                word(i - 1),
                word(i - METHOD_SLOT as usize),
                word(i - 7),
                word(i - BCP_SLOT as usize),
            ) else {
                continue;
            };
            let shaped = link > at
                && on_stack(link)
                && sender > at
                && on_stack(sender)
                && locals > at
                && on_stack(locals)
                && bcp != 0
                && method != 0
                && method.is_multiple_of(8)
                && !on_stack(method);
            if !shaped || jvm.named.methods.contains_key(&method) {
                continue;
            }
            if jvm.named.tried.len() >= 1 << 20 || !jvm.named.tried.insert(method) {
                continue;
            }
            if let Some(m) = read_method(&*jvm.mem, &ready.layout, method) {
                let lines = line_table(&*jvm.mem, &ready.layout, &m);
                jvm.named.methods.insert(method, (m, lines));
            }
        }
    }

    /// The name of interpreted frame `id` of `pid`.
    pub fn name(&self, pid: u32, id: u64) -> Option<SymbolLine> {
        let jvm = self.jvms.get(&pid)?;
        if id == UNKNOWN_ID {
            return Some(SymbolLine {
                function: UNKNOWN_NAME.to_owned(),
                file: None,
                line: None,
                inlined: false,
            });
        }
        jvm.named.names.get(&id).cloned()
    }

    /// Why the tables of JVMs could not be read, one note each.
    pub fn notes(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .jvms
            .iter()
            .filter(|(_, j)| j.ready.is_none())
            .filter_map(|(pid, j)| {
                let e = j.last_error.as_ref()?;
                Some(format!(
                    "interpreted Java methods of process {pid} not named: {e}"
                ))
            })
            .collect();
        v.sort();
        v
    }
}

fn interpreted(pid: u32, id: u64) -> Frame {
    Frame {
        kind: FrameKind::Interpreted,
        pid,
        addr: id,
        mapping: None,
    }
}

impl Jvm {
    /// Whether the tables are read, reading them now if they were not and it is time
    /// to try again.
    fn ensure_ready(&mut self, now: u64) -> bool {
        if self.ready.is_some() {
            return true;
        }
        if self
            .last_try
            .is_some_and(|t| now.saturating_sub(t) < RETRY_NS)
        {
            return false;
        }
        self.last_try = Some(now);
        match read_ready(&*self.mem, &self.syms, self.bias) {
            Ok(r) => {
                self.last_error = None;
                self.ready = Some(r);
                true
            }
            Err(e) => {
                self.last_error = Some(e);
                false
            }
        }
    }

    /// Whether no class was unloaded between `time` (a sample's) and now: the count
    /// of unloaded classes read now equals one read before `time`. A JVM that can no
    /// longer be read (it exited) vouches for samples up to its last good read. Drops
    /// what was named when the count moved.
    fn trusted(&mut self, now: u64, time: u64) -> bool {
        let Some(ready) = self.ready.as_ref() else {
            return false;
        };
        let mut count = Some(0u64);
        for &c in &ready.unloaded {
            count = count.and_then(|n| Some(n.wrapping_add(self.mem.u64_at(c)?)));
        }
        let Some(count) = count else {
            return self
                .unloaded
                .is_some_and(|(_, since, last)| since < time && time <= last);
        };
        match &mut self.unloaded {
            Some((seen, since, last)) if *seen == count => {
                *last = now;
                *since < time
            }
            _ => {
                // Classes were unloaded (or this is the first look): what was named
                // may now be another class's memory.
                self.named.methods.clear();
                self.named.tried.clear();
                self.named.ids.clear();
                // None ever unloaded: nothing was freed, ever.
                let since = if count == 0 { 0 } else { now };
                self.unloaded = Some((count, since, now));
                since < time
            }
        }
    }
}

impl Named {
    /// The frame id of `method` whose frame slot holds `bcp`, with the line of
    /// `line_bcp` when it is in the method's bytecode; [`UNKNOWN_ID`] if they do not
    /// check out (the slot or `line_bcp` must point into the method's bytecode).
    fn name(
        &mut self,
        l: &Layout,
        mem: &dyn Memory,
        method: u64,
        bcp: u64,
        line_bcp: Option<u64>,
    ) -> u64 {
        // Only methods that check out are kept: a read that failed (the JVM exited,
        // the class is not loaded yet) is tried again at the next frame.
        let (m, lines) = match self.methods.entry(method) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let Some(m) = read_method(mem, l, method) else {
                    return UNKNOWN_ID;
                };
                let lines = line_table(mem, l, &m);
                e.insert((m, lines))
            }
        };
        let bci = line_bcp.and_then(|b| m.bci(b));
        if m.code_size != 0 && m.bci(bcp).is_none() && bci.is_none() {
            return UNKNOWN_ID;
        }
        let line = bci.and_then(|b| line_at(lines, b));
        if let Some(&id) = self.ids.get(&(method, line)) {
            return id;
        }
        let id = self.next_id;
        self.next_id += 1;
        self.ids.insert((method, line), id);
        self.names.insert(
            id,
            SymbolLine {
                function: m.name.clone(),
                file: m.file.clone(),
                line,
                inlined: false,
            },
        );
        id
    }
}

/// The tables and what is read from them once.
fn read_ready(mem: &dyn Memory, syms: &VmSymbols, bias: u64) -> Result<Ready, VmError> {
    let vm = VmStructs::read(mem, syms, bias)?;
    if vm.int("frame::interpreter_frame_last_sp_offset")? != -2
        || vm.int("frame::interpreter_frame_sender_sp_offset")? != -1
    {
        return Err(VmError::Malformed(
            "VMIntConstants",
            "interpreter frame layout",
        ));
    }
    let layout = Layout::new(&vm)?;
    let read = |a: u64| mem.u64_at(a).ok_or(VmError::Read(a));
    let code = read(vm.static_addr("AbstractInterpreter::_code")?)?;
    if code == 0 {
        return Err(VmError::Missing("interpreter (not initialized yet)".into()));
    }
    let start = read(code.wrapping_add(vm.offset("StubQueue::_stub_buffer")?))?;
    let limit_at = code.wrapping_add(vm.offset("StubQueue::_buffer_limit")?);
    let limit = mem.u32_at(limit_at).ok_or(VmError::Read(limit_at))?;
    let unloaded = unloaded_counters(mem, &vm)?;
    if unloaded.is_empty() {
        return Err(VmError::Missing(
            "count of unloaded classes (run without -XX:-UsePerfData)".into(),
        ));
    }
    Ok(Ready {
        layout,
        interpreter: (start, start.saturating_add(u64::from(limit))),
        unloaded,
    })
}

/// The addresses of the JVM's performance counters of unloaded classes.
fn unloaded_counters(mem: &dyn Memory, vm: &VmStructs) -> Result<Vec<u64>, VmError> {
    let read = |a: u64| mem.u64_at(a).ok_or(VmError::Read(a));
    let read32 = |a: u64| mem.u32_at(a).ok_or(VmError::Read(a));
    let prologue = read(vm.static_addr("PerfMemory::_prologue")?)?;
    if prologue == 0 {
        return Ok(Vec::new());
    }
    let first = read32(prologue.wrapping_add(vm.offset("PerfDataPrologue::entry_offset")?))?;
    let count = read32(prologue.wrapping_add(vm.offset("PerfDataPrologue::num_entries")?))?;
    let length = vm.offset("PerfDataEntry::entry_length")?;
    let name = vm.offset("PerfDataEntry::name_offset")?;
    let data = vm.offset("PerfDataEntry::data_offset")?;
    let mut out = Vec::new();
    let mut e = prologue.wrapping_add(u64::from(first));
    for _ in 0..count.min(100_000) {
        let len = read32(e.wrapping_add(length))?;
        if len == 0 || len > 1 << 16 {
            break;
        }
        let n = mem
            .c_string_at(
                e.wrapping_add(u64::from(read32(e.wrapping_add(name))?)),
                256,
            )
            .ok_or(VmError::Read(e))?;
        if n == b"java.cls.unloadedClasses" || n == b"sun.cls.unloadedClasses" {
            out.push(e.wrapping_add(u64::from(read32(e.wrapping_add(data))?)));
        }
        e = e.wrapping_add(u64::from(len));
    }
    Ok(out)
}
