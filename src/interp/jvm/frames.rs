//! Interpreted Java frames in a sample's stack: where a frame's pc is in HotSpot's
//! interpreter, the frame keeps the `Method*` it runs and its bytecode pointer at
//! fixed offsets below its frame pointer (x86_64: `fp - 3` and `fp - 8` words), in the
//! stack copy taken at the sample instant. [`JavaFrames`] turns such a native
//! `Interpreter` frame into a [`FrameKind::Interpreted`] frame whose id stands for
//! (method, line), and names the ids for the recording's symbols.
//!
//! Naming is done once per (`Method*`, bci) and cached. A method's memory is freed
//! when its class is unloaded and may then hold another class's method, so a method
//! read is only trusted for the samples of the same epoch ([`Epochs`]: no class
//! unloaded between the sample and the read). Methods are read ahead as samples are
//! drained ([`JavaFrames::warm`]), so a sample unwound late (held for a newer perf map,
//! or after classes were unloaded) is still named from a read of its own epoch; one
//! taken while classes were being unloaded, or whose method was not read in its epoch,
//! is marked `[java: unknown method]`, never misnamed. A frame whose `Method*` or
//! bytecode pointer does not check out is marked the same way.

use std::collections::{HashMap, HashSet};

use super::ahead::{Ahead, Found, Unread};
use super::compiled::CodeCache;
use super::epochs::{Counter, CounterFile, Epochs, unloaded_counters};
use super::inlined::{Compiled, Region};
use super::method::{Layout, MethodInfo};
use super::named::{Lines, Named};
pub use super::named::{UNKNOWN_ID, UNKNOWN_NAME};
use super::vmstructs::{VmError, VmStructs, VmSymbols};
use crate::format::{Frame, FrameKind, SymbolLine, SymbolSource};
use crate::interp::Budgets;
use crate::interp::budget::{Lru, Meter, Pool, Trips};

mod notes;
mod unwinding;
mod warm;
use crate::interp::{CodeRegions, Memory, Overlay};
use crate::unwind::{FrameAddress, FrameRegisters};

/// Words below the frame pointer where an interpreter frame keeps its `Method*` and
/// bytecode pointer (HotSpot frame_x86.hpp; checked against the exported
/// `frame::interpreter_frame_last_sp_offset`).
const METHOD_SLOT: u64 = 3;
const BCP_SLOT: u64 = 8;
/// Between two tries to read the tables of a JVM not initialized yet.
const RETRY_NS: u64 = 100_000_000;

/// What the VM's tables give, read once the VM is initialized.
struct Ready {
    layout: Layout,
    /// HotSpot's interpreter code.
    interpreter: (u64, u64),
    /// The code heaps, where compiled frames' nmethods are found (None if this VM's
    /// tables lack what finding them needs).
    code: Option<CodeCache>,
    /// Addresses of the performance counters of unloaded classes.
    unloaded: Vec<u64>,
    /// The same counters in the JVM's performance data file (hsperfdata), kept open:
    /// it still reads after the JVM exited, so samples taken up to its exit are
    /// vouched for by the final count.
    counter_file: Option<CounterFile>,
}

/// One JVM.
struct Jvm {
    pid: u32,
    mem: Box<dyn Memory + Send>,
    syms: VmSymbols,
    bias: u64,
    ready: Option<Ready>,
    /// Why the tables could not be read, at the last try, and when.
    last_error: Option<VmError>,
    last_try: Option<u64>,
    /// When the count of unloaded classes held.
    epochs: Epochs,
    /// Methods read ahead since the last [`JavaFrames::tick`], and the epoch they were
    /// read in if the count still holds at the tick.
    pending: Vec<(u64, MethodInfo, Lines)>,
    pending_epoch: Option<u64>,
    /// Its tables were read since the last [`JavaFrames::rewarm_due`].
    fresh: bool,
    named: Named,
    /// The nmethods read, for compiled frames' inlined methods (where a perf map
    /// names their code).
    compiled: Compiled,
    /// Compiled frames read as their samples were drained.
    ahead: Ahead,
    /// What the unwinder learnt of return addresses into its JIT code.
    returns: unwinding::Returns,
}

/// Counts for the summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JavaStats {
    /// Interpreter frames named.
    pub named: u64,
    /// Interpreter frames marked unknown (did not check out, or sampled before classes
    /// were unloaded).
    pub unknown: u64,
    /// Compiled frames named with their scopes (the methods inlined, lines).
    pub compiled: u64,
    /// Compiled frames of nmethods left unread (as the perf map names them, with no
    /// line), by reason ([`Unread::ALL`]'s order).
    pub unread: [u64; Unread::ALL.len()],
}

/// The interpreted Java frames of every JVM recorded.
pub struct JavaFrames {
    jvms: HashMap<u32, Jvm>,
    clock: fn() -> u64,
    /// What every JVM's reader may keep, and the bytes they keep in all.
    budgets: Budgets,
    pool: Pool,
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
            budgets: Budgets::default(),
            pool: Pool::default(),
            stats: JavaStats::default(),
        }
    }

    /// The bytes every JVM's reader keeps now (what the bytes budgets count).
    pub fn kept_bytes(&self) -> usize {
        self.pool.kept()
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
        self.jvm_found(pid, VmSymbols::from_elf(image), bias, mem);
    }

    /// As [`JavaFrames::jvm_mapped`], with libjvm's symbols read already (`syms` None:
    /// the library lacks HotSpot's tables).
    pub fn jvm_found(
        &mut self,
        pid: u32,
        syms: Option<VmSymbols>,
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
        let (Some(syms), Some(mem)) = (syms, mem()) else {
            // Not readable: the earlier JVM's names stay, nothing more is read.
            if let Some(mut j) = old {
                j.ready = None;
                j.last_try = Some(u64::MAX);
                j.named.methods.clear(&mut j.named.meter);
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
                pid,
                mem,
                syms,
                bias,
                ready: None,
                last_error: None,
                last_try: None,
                epochs: Epochs::default(),
                pending: Vec::new(),
                pending_epoch: None,
                fresh: false,
                compiled: Compiled::default(),
                ahead: Ahead::default(),
                returns: unwinding::Returns::default(),
                named: Named {
                    methods: Lru::default(),
                    meter: Meter::new(self.pool.clone(), self.budgets),
                    trips: Trips::default(),
                    tried: HashSet::new(),
                    ids: HashMap::new(),
                    names,
                    next_id,
                    pruned: 0,
                },
            },
        );
        // An attached JVM is ready now: its count of unloaded classes is then read
        // before its first sample.
        let now = (self.clock)();
        if let Some(jvm) = self.jvms.get_mut(&pid)
            && jvm.ensure_ready(now)
        {
            jvm.refresh(self.clock);
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
    /// interpreted Java frames, and its compiled frames into the chains of methods
    /// inlined there (`jit`: the JVM's perf map, whose entries say which nmethod a pc
    /// is in). `sp` and `stack` are the sample's stack copy, `r13` the sampled register
    /// where the interpreter keeps the bytecode pointer of the method it is running
    /// (the leaf's frame slot is only written at calls).
    #[allow(clippy::too_many_arguments)]
    pub fn expand(
        &mut self,
        pid: u32,
        time: u64,
        (sp, stack, r13): (u64, &[u8], Option<u64>),
        addrs: &[FrameAddress],
        regs: &[FrameRegisters],
        jit: Option<&dyn CodeRegions>,
        frames: &mut [Frame],
    ) {
        let Some(jvm) = self.jvms.get_mut(&pid) else {
            return;
        };
        // What the sample's pcs were when it was drained.
        let ahead = jvm.ahead.take(time, sp);
        let now = (self.clock)();
        if !jvm.ensure_ready(now) {
            return;
        }
        let Some((lo, hi)) = jvm.ready.as_ref().map(|r| r.interpreter) else {
            return;
        };
        let in_interpreter = |a: &FrameAddress| (lo..hi).contains(&a.lookup_address());
        let code = jvm.ready.as_ref().and_then(|r| r.code.as_ref());
        // Compiled frames are read where they were read ahead or the JVM has a perf
        // map (without either, every frame would cost a walk of the code heap).
        let in_code = |a: &FrameAddress| {
            (jit.is_some() || ahead.is_some())
                && code.is_some_and(|c| c.contains(a.lookup_address()))
        };
        if !addrs.iter().any(|a| in_interpreter(a) || in_code(a)) {
            return;
        }
        // Methods are named from reads of the sample's epoch: no class unloaded
        // between the sample and the read.
        let mut epoch = jvm.epochs.at(time);
        if epoch.is_none() && jvm.epochs.last_read().is_none_or(|t| t < time) {
            jvm.refresh(self.clock);
            epoch = jvm.epochs.at(time);
        }
        let Some(ready) = jvm.ready.as_ref() else {
            return;
        };
        let mem = Overlay {
            sp,
            stack,
            rest: &*jvm.mem,
        };
        let may_read = epoch.is_some() && jvm.epochs.current() == epoch;
        let mut counter = Counter {
            mem: &*jvm.mem,
            at: &ready.unloaded,
            file: ready.counter_file.as_ref(),
            epochs: &mut jvm.epochs,
            clock: self.clock,
        };
        for ((a, r), f) in addrs.iter().zip(regs).zip(frames.iter_mut()) {
            if f.kind == FrameKind::Interpreted {
                continue;
            }
            if !in_interpreter(a) {
                let pc = a.lookup_address();
                if !ready.code.as_ref().is_some_and(|c| c.contains(pc)) {
                    continue;
                }
                let found = ahead.as_ref().and_then(|v| {
                    let i = v.binary_search_by_key(&a.address(), |e| e.0).ok()?;
                    Some(v[i].1)
                });
                let why = match ahead_frame(found, pid, &mut self.stats) {
                    Ok(Some(frame)) => {
                        *f = frame;
                        continue;
                    }
                    Ok(None) => continue,
                    Err(why) => why,
                };
                let named_before = self.stats.compiled;
                let mapped = jit.and_then(|m| m.region(pc));
                let (rest, code) = (&*jvm.mem, &ready.code);
                // Code compiled since the last perf map: its entry as it will be
                // written, from the nmethod itself (only while the sample's epoch
                // holds: the nmethod is then the sample's).
                let unmapped = match (mapped, code) {
                    (None, Some(code)) if may_read && jit.is_some() => {
                        jvm.compiled.region_of(rest, code, &ready.layout, pc)
                    }
                    _ => None,
                };
                let region = mapped.or(unmapped.as_ref().map(|(s, e, n)| (*s, *e, &n[..])));
                if let (Some(code), Some((start, end, name))) = (code, region) {
                    let named = &mut jvm.named;
                    let mut new_id = |lines| named.add(SymbolSource::Jit, lines);
                    let region = Region { start, end, name };
                    if let Some(id) = jvm.compiled.frame(
                        rest,
                        code,
                        &ready.layout,
                        region,
                        a.address(),
                        epoch.filter(|_| may_read),
                        &mut new_id,
                    ) {
                        self.stats.compiled += 1;
                        *f = interpreted(pid, id);
                    }
                }
                let nmethod = || {
                    (ready.code.as_ref())
                        .and_then(|c| c.blob_header(&*jvm.mem, a.address()))
                        .is_some_and(|h| h.compile_id.is_some())
                };
                if self.stats.compiled == named_before && (found.is_some() || nmethod()) {
                    self.stats.unread[why as usize] += 1;
                }
                continue;
            }
            let id = match (r.fp.filter(|&fp| fp > sp), epoch) {
                (Some(fp), Some(epoch)) => {
                    let method = mem.u64_at(fp.wrapping_sub(METHOD_SLOT * 8));
                    let bcp = mem.u64_at(fp.wrapping_sub(BCP_SLOT * 8));
                    // A caller's slot was written at its call; the running frame's
                    // bytecode pointer is in r13 (its slot may be stale).
                    let line_bcp = match a {
                        FrameAddress::ReturnAddress(_) => bcp,
                        FrameAddress::InstructionPointer(_) => r13,
                    };
                    match (method, bcp) {
                        (Some(m), Some(b)) => {
                            let slots = (m, b, line_bcp);
                            jvm.named
                                .name(&ready.layout, &mem, &mut counter, slots, epoch)
                        }
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
    /// exit, find a read from after them), and keeps the methods read ahead since the
    /// last tick if the count held. Called by the recorder's loop after each drain.
    pub fn tick(&mut self) {
        let now = (self.clock)();
        for jvm in self.jvms.values_mut() {
            jvm.flush_ahead();
            jvm.ahead.tick();
            if jvm.ensure_ready(now) {
                let count = jvm.refresh(self.clock);
                let pending = std::mem::take(&mut jvm.pending);
                if let Some(e) = jvm.pending_epoch.take()
                    && count == Some(e)
                {
                    for (m, info, lines) in pending {
                        jvm.named.keep((m, e), info, lines);
                    }
                }
            }
        }
    }

    /// What an unwinder with no perf map needs of JVM `pid`'s code (see
    /// [`super::code::HeapCode`]): its memory, the interpreter's range and its code
    /// heaps; None until its tables are read, or if its code heaps cannot be.
    pub(super) fn code_heap(&self, pid: u32) -> Option<(&dyn Memory, (u64, u64), &CodeCache)> {
        let jvm = self.jvms.get(&pid)?;
        let ready = jvm.ready.as_ref()?;
        Some((&*jvm.mem, ready.interpreter, ready.code.as_ref()?))
    }

    /// Whether a JVM's tables were read since the last call: the samples drained
    /// before, still waiting to be unwound, are then to be [`warm`](Self::warm)ed again
    /// (at startup, samples held for a newer perf map may be unwound only after
    /// classes were unloaded).
    pub fn rewarm_due(&mut self) -> bool {
        let mut due = false;
        for jvm in self.jvms.values_mut() {
            due |= std::mem::take(&mut jvm.fresh);
        }
        due
    }

    /// The names of Java frame `id` of `pid`, innermost first (more than one for a
    /// compiled frame with methods inlined), and where they came from: the interpreter
    /// ([`SymbolSource::JavaInterpreted`]) or compiled code ([`SymbolSource::Jit`]).
    pub fn names(&self, pid: u32, id: u64) -> Option<(SymbolSource, Vec<SymbolLine>)> {
        let jvm = self.jvms.get(&pid)?;
        if id == UNKNOWN_ID {
            let line = SymbolLine {
                function: UNKNOWN_NAME.to_owned(),
                file: None,
                line: None,
                inlined: false,
            };
            return Some((SymbolSource::JavaInterpreted, vec![line]));
        }
        jvm.named.names.get(&id).cloned()
    }
}

/// A compiled frame as its sample's drain read it (`found`): the frame it becomes
/// (None: a stub with no name, left as it is), or why it was not read (None: not read
/// ahead, counted by the caller only if it is an nmethod's).
fn ahead_frame(
    found: Option<Found>,
    pid: u32,
    stats: &mut JavaStats,
) -> Result<Option<Frame>, Unread> {
    match found {
        Some(Found::Frame(id)) => {
            stats.compiled += 1;
            Ok(Some(interpreted(pid, id)))
        }
        Some(Found::Bare(id)) => {
            stats.unread[Unread::NoDebugInfo as usize] += 1;
            Ok(Some(interpreted(pid, id)))
        }
        Some(Found::Stub(Some(id))) => Ok(Some(interpreted(pid, id))),
        Some(Found::Stub(None)) => Ok(None),
        Some(Found::Unread(why)) => Err(why),
        None => Err(Unread::NotAhead),
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
            Ok(mut r) => {
                r.counter_file = CounterFile::open(self.pid, &*self.mem, &r.unloaded);
                self.fresh = true;
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

    /// Reads the count of unloaded classes now; when it moved, lets go of what was
    /// read in epochs no longer kept. None if it cannot be read (the JVM exited).
    fn refresh(&mut self, clock: fn() -> u64) -> Option<u64> {
        let ready = self.ready.as_ref()?;
        let mut counter = Counter {
            mem: &*self.mem,
            at: &ready.unloaded,
            file: ready.counter_file.as_ref(),
            epochs: &mut self.epochs,
            clock,
        };
        let count = counter.read();
        if self.named.pruned != self.epochs.begun {
            self.named.pruned = self.epochs.begun;
            let e = &self.epochs;
            let named = &mut self.named;
            named.methods.retain(&mut named.meter, |k, _| e.kept(k.1));
            self.named.tried.retain(|k| e.kept(k.1));
            self.named.ids.retain(|k, _| e.kept(k.1));
        }
        count
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
        code: CodeCache::read(mem, &vm).ok(),
        unloaded,
        counter_file: None,
    })
}
