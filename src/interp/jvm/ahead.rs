//! Compiled Java frames read as their samples are drained (issue 48), not when the
//! samples are unwound. A JVM's first seconds replace code every few tens of
//! milliseconds (C1 code by C2 code, a class loader's copy by the next one's), and
//! free what it replaced: a sample held for a newer perf map, unwound a second later,
//! would find its nmethod gone and its memory holding another's. So each sample's
//! pcs in the code heaps (its instruction pointer and the words of its stack copy that
//! point into them: the return addresses among them) are resolved at the drain, a few
//! milliseconds after the sample: the blob holding each, its compile id, and for an
//! nmethod the chain of methods inlined at that pc, with lines, made into a frame id.
//! The nmethod's debug information is read once per (address, compile id) and kept
//! within the JVM's bytes budget; a chain is named once per (nmethod, scope). What a
//! sample's pcs turned out to be waits, keyed by the sample's time and stack pointer,
//! until the sample is unwound ([`Ahead::take`]); the perf map is then only a fallback.
//!
//! A pc that could not be read says why ([`Unread`]), and the summary counts the
//! frames left so. The nmethod found at the drain is taken to be the one sampled:
//! HotSpot frees an nmethod only sweeps after it stopped being entered and once no
//! thread runs in it, far longer than a drain takes.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::compiled::{BlobHeader, CodeCache, Nmethod};
use super::inlined::{Methods, chain, method};
use super::method::Layout;
use super::named::Named;
use crate::format::{SymbolLine, SymbolSource};
use crate::interp::Memory;
use crate::unwind::{JitCode, JitFrame, JitKind, PROLOGUE_BYTES, decode_prologue, ends_in_call};

/// Most pcs of one sample resolved (the instruction pointer and stack words).
const MAX_PCS: usize = 512;
/// Most samples waiting to be unwound with what their pcs are: past it, the oldest go
/// (their frames then fall back on the perf map).
const MAX_SAMPLES: usize = 1 << 16;
/// Most chains named, and methods read, before their caches start over.
const MAX_IDS: usize = 1 << 16;
/// The longest stub name read.
const MAX_STUB_NAME: usize = 96;
/// For how many drains a pc found in no blob is taken to be in none.
pub(super) const NOWHERE_DRAINS: u64 = 8;

/// Why a compiled frame's methods and lines could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Unread {
    /// When its sample was drained, its pc was in no nmethod any more (its code was
    /// freed already) or not yet (being installed).
    Freed,
    /// Its sample was not read as it was drained (drained before the JVM's tables
    /// were read, or converted from a perf.data file), and its code was not read when
    /// it was unwound either.
    NotAhead,
    /// Its nmethod's debug information, or a method in it, did not check out.
    Unchecked,
    /// The JVM's count of unloaded classes could not be read (it had exited).
    Unloading,
    /// Its nmethod was read, but the JVM kept no debug information at its pc (HotSpot's
    /// compilers keep it at calls and safepoints only, unless told
    /// `-XX:+DebugNonSafepoints`): named as its compiled method alone.
    NoDebugInfo,
}

impl Unread {
    /// Every reason, in the order the summary gives them (their own).
    pub const ALL: [Unread; 5] = [
        Unread::Freed,
        Unread::NotAhead,
        Unread::Unchecked,
        Unread::Unloading,
        Unread::NoDebugInfo,
    ];

    /// What the summary says of the frames left so.
    pub fn describe(self) -> &'static str {
        match self {
            Unread::NotAhead => {
                "they were not read as their sample was drained (before the JVM's tables \
                 were read, or from a perf.data file) and no longer when it was unwound"
            }
            Unread::Freed => "their code was freed before their sample was drained",
            Unread::Unchecked => "their nmethod's debug information did not check out",
            Unread::Unloading => "the JVM's count of unloaded classes could not be read",
            Unread::NoDebugInfo => {
                "the JVM kept no debug information at their pc, named by their compiled \
                 method alone (its compilers keep it at calls and safepoints; \
                 -XX:+UnlockDiagnosticVMOptions -XX:+DebugNonSafepoints keeps it at every \
                 pc)"
            }
        }
    }
}

/// What a pc of a sample was, at the drain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Found {
    /// A compiled Java frame: its frame id, named with its chain.
    Frame(u64),
    /// A compiled Java frame at a pc with no debug information: its frame id, named
    /// with its compiled method alone.
    Bare(u64),
    /// Code that is no nmethod (a stub, an adapter): the frame id naming it as its
    /// blob does (`StubRoutines (1)`, as HotSpot's perf map would), or None to leave
    /// it as it is (its name could not be read).
    Stub(Option<u64>),
    /// An nmethod's frame that could not be read, and why.
    Unread(Unread),
}

/// A blob met: its header, the drain it was last checked in, and for an nmethod the
/// frame its prologue sets up (None: a stub, or a prologue that could not be read):
/// what the unwinder needs of it ([`Ahead::jit_code`]).
#[derive(Debug, Clone, Copy)]
struct Known {
    header: BlobHeader,
    checked: u64,
    frame: Option<JitFrame>,
}

/// Whether the bytes before `pc` end in a call instruction (a return address).
fn follows_call(mem: &dyn Memory, pc: u64) -> bool {
    let mut code = [0u8; 7];
    pc.checked_sub(7)
        .is_some_and(|at| mem.read(at, &mut code) && ends_in_call(&code))
}

/// The frame an nmethod's prologue at the start of `code` sets up (None: unreadable).
fn prologue(mem: &dyn Memory, (start, end): (u64, u64)) -> Option<JitFrame> {
    let mut buf = [0u8; PROLOGUE_BYTES];
    let n = usize::try_from(end.saturating_sub(start))
        .map_or(PROLOGUE_BYTES, |n| n.min(PROLOGUE_BYTES));
    mem.read(start, &mut buf[..n])
        .then(|| decode_prologue(&buf[..n]))
}

/// The read-ahead state of one JVM.
#[derive(Default)]
pub(super) struct Ahead {
    /// (nmethod address, compile id) → its debug information (None: did not check out).
    nmethods: HashMap<(u64, u32), Option<Arc<Nmethod>>>,
    /// Bytes of debug information kept in `nmethods`.
    kept: usize,
    /// (nmethod address, compile id, scope decode offset) → what a pc there is: a
    /// frame, or why it is not one.
    ids: HashMap<(u64, u32, u32), Found>,
    /// pc → the blob it was in (code start, compile id) and what it was there.
    by_pc: HashMap<u64, ((u64, Option<u32>), Found)>,
    /// Stack words found to be no frame, and the blob (code start, compile id) they
    /// were in then.
    not_frames: HashMap<u64, (u64, Option<u32>)>,
    /// The methods read in one epoch of class unloading (the first field).
    methods: (Option<u64>, Methods),
    /// The blobs met, by code start, each checked again once per drain (its memory
    /// may have been reused since).
    known: BTreeMap<u64, Known>,
    /// Where a stub's name is (the same string for every blob of its kind) → the frame
    /// id naming it (None: not a name).
    stub_names: HashMap<u64, Option<u64>>,
    /// Pcs found in no blob, and the drain they were looked up in: not looked up
    /// again for [`NOWHERE_DRAINS`] drains. Most are stale words of a stack (an
    /// old return address into code freed since), met at every sample of the frame
    /// holding them; a pc that code placed there since makes a real frame of is
    /// counted unread ([`Unread::Freed`]) for those drains and named by the perf map.
    nowhere: HashMap<u64, u64>,
    /// Drains, ever.
    drains: u64,
    /// (time, stack pointer) of a sample → each of its pcs and what it was.
    samples: BTreeMap<(u64, u64), Vec<(u64, Found)>>,
    /// The samples of this drain queued (their time and stack pointer, their
    /// instruction pointer, their pcs in the code heaps, sorted), resolved together at [`Ahead::flush`].
    pending: Vec<((u64, u64), u64, Vec<u64>)>,
    /// Samples read ahead, ever.
    pub(super) read: u64,
}

/// What reading ahead needs of a JVM.
pub(super) struct Reader<'a> {
    pub(super) mem: &'a dyn Memory,
    pub(super) code: &'a CodeCache,
    pub(super) layout: &'a Layout,
    pub(super) interpreter: (u64, u64),
    /// The count of unloaded classes last read: the epoch what is read now belongs to.
    pub(super) epoch: Option<u64>,
}

impl Ahead {
    /// Resolves the pcs of a sample taken at `time` (`ip` its instruction pointer,
    /// `sp` and `stack` its stack copy) and keeps them for [`Ahead::take`]: what
    /// [`Ahead::queue_sample`] then [`Ahead::flush`] do for a drain's samples.
    #[cfg(test)]
    pub(super) fn read_sample(
        &mut self,
        r: &Reader<'_>,
        named: &mut Named,
        time: u64,
        sample: (u64, u64, &[u8]),
    ) {
        self.queue_sample(r, time, sample);
        self.flush(r, named);
    }

    /// Queues the pcs in the code heaps of a sample taken at `time` (`ip` its
    /// instruction pointer, `sp` and `stack` its stack copy), to be resolved with the
    /// rest of its drain at [`Ahead::flush`]. A sample read ahead already (drained
    /// again, or held) is left as first read.
    pub(super) fn queue_sample(
        &mut self,
        r: &Reader<'_>,
        time: u64,
        (ip, sp, stack): (u64, u64, &[u8]),
    ) {
        if self.samples.contains_key(&(time, sp)) || self.pending.len() >= MAX_SAMPLES {
            return;
        }
        let (lo, hi) = r.interpreter;
        let in_code = |pc: u64| r.code.contains(pc) && !(lo..hi).contains(&pc);
        let words = stack
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()));
        let mut pcs: Vec<u64> = std::iter::once(ip)
            .chain(words)
            .filter(|&pc| in_code(pc))
            .take(MAX_PCS)
            .collect();
        if pcs.is_empty() {
            return;
        }
        pcs.sort_unstable();
        pcs.dedup();
        self.pending.push(((time, sp), ip, pcs));
    }

    /// Resolves the pcs of the samples queued since the last flush and keeps them
    /// for [`Ahead::take`]: the blobs met in earlier drains that hold any of them are
    /// checked again with one read for all, and each distinct pc is resolved once.
    pub(super) fn flush(&mut self, r: &Reader<'_>, named: &mut Named) {
        if self.pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        let mut all: Vec<u64> = pending
            .iter()
            .flat_map(|(_, _, p)| p.iter().copied())
            .collect();
        all.sort_unstable();
        all.dedup();
        self.check_known(r, &all);
        // (pc, whether it must be a return address) → what it is.
        let mut now: HashMap<(u64, bool), Option<Found>> = HashMap::with_capacity(all.len());
        for (key, ip, pcs) in pending {
            if self.samples.contains_key(&key) {
                continue;
            }
            let found = pcs
                .into_iter()
                .filter_map(|pc| {
                    let at = (pc, pc != ip);
                    let f = *now
                        .entry(at)
                        .or_insert_with(|| self.resolve(r, named, pc, at.1));
                    Some((pc, f?))
                })
                .collect();
            self.read += 1;
            self.samples.insert(key, found);
        }
        while self.samples.len() > MAX_SAMPLES {
            self.samples.pop_first();
        }
    }

    /// What the pcs of the sample taken at `time` with stack pointer `sp` were, read
    /// ahead (None: it was not); samples older than it, never unwound, are let go.
    pub(super) fn take(&mut self, time: u64, sp: u64) -> Option<Vec<(u64, Found)>> {
        let found = self.samples.remove(&(time, sp));
        while self
            .samples
            .first_key_value()
            .is_some_and(|(k, _)| k.0 < time)
        {
            self.samples.pop_first();
        }
        found
    }

    /// A new drain: blobs met are checked again (their memory may have been reused).
    pub(super) fn tick(&mut self) {
        self.drains += 1;
        if self.nowhere.len() >= MAX_IDS / 2 {
            let drains = self.drains;
            self.nowhere
                .retain(|_, at| drains.saturating_sub(*at) < NOWHERE_DRAINS);
        }
    }

    /// Checks again, with one read for all, the blobs met in earlier drains that hold
    /// the pcs (sorted) of a drain's samples: what [`Ahead::blob`] would otherwise check with a
    /// read each. One that is not as it was is forgotten (and looked up anew).
    fn check_known(&mut self, r: &Reader<'_>, pcs: &[u64]) {
        let Some(span) = r.code.header_span() else {
            return;
        };
        let mut due: Vec<(u64, u64)> = Vec::new();
        for &pc in pcs {
            if let Some((&start, k)) = self.known.range(..=pc).next_back()
                && pc < k.header.code.1
                && k.checked != self.drains
                && due.last().is_none_or(|d| d.0 != start)
                && let Some(at) = r.code.header_at(&k.header)
            {
                due.push((start, at));
            }
        }
        if due.len() < 2 {
            return;
        }
        let addrs: Vec<u64> = due.iter().map(|d| d.1).collect();
        let read = r.mem.read_pages(&addrs, span);
        for ((start, _), bytes) in due.into_iter().zip(read) {
            let Some(k) = self.known.get_mut(&start) else {
                continue;
            };
            if bytes.is_some_and(|b| r.code.still_in(&k.header, &b)) {
                k.checked = self.drains;
            } else {
                self.known.remove(&start);
            }
        }
    }

    /// The blob holding `pc` now: one met already and checked this drain, or checked
    /// now, or found through the segment map.
    fn blob(&mut self, r: &Reader<'_>, pc: u64) -> Option<BlobHeader> {
        if let Some((&start, k)) = self.known.range_mut(..=pc).next_back()
            && pc < k.header.code.1
        {
            if k.checked == self.drains {
                return Some(k.header);
            }
            if r.code.still(r.mem, &k.header) {
                k.checked = self.drains;
                return Some(k.header);
            }
            self.known.remove(&start);
        }
        if self
            .nowhere
            .get(&pc)
            .is_some_and(|&at| self.drains.saturating_sub(at) < NOWHERE_DRAINS)
        {
            return None;
        }
        let Some(header) = r.code.blob_header(r.mem, pc) else {
            if self.nowhere.len() < MAX_IDS {
                self.nowhere.insert(pc, self.drains);
            }
            return None;
        };
        if self.known.len() >= MAX_IDS {
            self.known.clear();
        }
        // Blobs it overlaps are gone.
        let (from, to) = header.code;
        let gone: Vec<u64> = (self.known.range(..to))
            .rev()
            .take_while(|(_, k)| k.header.code.1 > from)
            .map(|(&s, _)| s)
            .collect();
        for s in gone {
            self.known.remove(&s);
        }
        let checked = self.drains;
        let frame = header.compile_id.and_then(|_| prologue(r.mem, header.code));
        self.known.insert(
            from,
            Known {
                header,
                checked,
                frame,
            },
        );
        Some(header)
    }

    /// The blob holding `pc` as the last drains found it, as the unwinder needs it:
    /// an nmethod with the frame its prologue sets up, or a stub. The samples a drain
    /// unwinds had every pc of their stack copies looked up at that drain, so what
    /// they meet is known here; a blob changed since is found changed at the next.
    pub(super) fn jit_code(&self, pc: u64) -> Option<JitCode> {
        let (&start, k) = self.known.range(..=pc).next_back()?;
        if pc >= k.header.code.1 {
            return None;
        }
        let kind = match k.frame {
            Some(frame) => JitKind::Method(frame),
            None => JitKind::Stub,
        };
        Some(JitCode { start, kind })
    }

    /// The identity of the blob holding `pc` as last found (its code start and compile
    /// id): what an answer about `pc` learnt then holds for as long as it stays.
    pub(super) fn blob_of(&self, pc: u64) -> Option<(u64, Option<u32>)> {
        let (&start, k) = self.known.range(..=pc).next_back()?;
        (pc < k.header.code.1).then_some((start, k.header.compile_id))
    }

    /// What `pc` is now: as last time if its blob is the one it was in then (a
    /// return address is met again at every sample of its call). A word of the
    /// stack (`ret`: not the instruction pointer) in an nmethod is a frame only if
    /// it is a return address: where HotSpot keeps a `PcDesc` (at every call that
    /// may reach a safepoint), or right after a call instruction (a leaf call into
    /// a stub keeps none: C2's array copies); None for one that is neither (a stale
    /// or unrelated word), remembered with its blob, its chain not read.
    fn resolve(&mut self, r: &Reader<'_>, named: &mut Named, pc: u64, ret: bool) -> Option<Found> {
        let Some(header) = self.blob(r, pc) else {
            return Some(Found::Unread(Unread::Freed));
        };
        if header.compile_id.is_some() && r.epoch.is_none() {
            return Some(Found::Unread(Unread::Unloading));
        }
        let blob = (header.code.0, header.compile_id);
        if let Some(&(was, found)) = self.by_pc.get(&pc)
            && was == blob
        {
            return Some(found);
        }
        if ret && self.not_frames.get(&pc) == Some(&blob) {
            return None;
        }
        let Some(found) = self.resolve_in(r, named, pc, header, ret) else {
            if self.not_frames.len() >= MAX_IDS {
                self.not_frames.clear();
            }
            self.not_frames.insert(pc, blob);
            return None;
        };
        if matches!(found, Found::Frame(_) | Found::Bare(_) | Found::Stub(_)) {
            if self.by_pc.len() >= MAX_IDS {
                self.by_pc.clear();
            }
            self.by_pc.insert(pc, (blob, found));
        }
        Some(found)
    }

    /// What `pc`, in the blob `header` describes, is.
    fn resolve_in(
        &mut self,
        r: &Reader<'_>,
        named: &mut Named,
        pc: u64,
        header: BlobHeader,
        ret: bool,
    ) -> Option<Found> {
        let Some(key) = header.compile_id.map(|id| (header.blob, id)) else {
            return Some(Found::Stub(self.stub_name(r, named, header.name_at)));
        };
        let Some(epoch) = r.epoch else {
            return Some(Found::Unread(Unread::Unloading));
        };
        if self.methods.0 != Some(epoch) || self.methods.1.len() > MAX_IDS {
            self.methods = (Some(epoch), HashMap::new());
        }
        let Some(nm) = self.nmethod(r, named, key, pc) else {
            return Some(Found::Unread(Unread::Unchecked));
        };
        let Some(desc) = nm.pc_desc(pc) else {
            return Some(Found::Unread(Unread::Unchecked));
        };
        let offset = nm.scope_offset(desc).unwrap_or(0);
        if ret && offset != 0 && !nm.desc_at(desc, pc) && !follows_call(r.mem, pc) {
            return None;
        }
        if let Some(&found) = self.ids.get(&(key.0, key.1, offset)) {
            return Some(found);
        }
        let found = match self.lines(r, &nm, desc) {
            None => Found::Unread(Unread::Unchecked),
            Some((lines, false)) => Found::Frame(named.add(SymbolSource::Jit, lines)),
            Some((lines, true)) => Found::Bare(named.add(SymbolSource::Jit, lines)),
        };
        if self.ids.len() >= MAX_IDS {
            self.ids.clear();
        }
        self.ids.insert((key.0, key.1, offset), found);
        Some(found)
    }

    /// The frame id of a stub whose blob's name is at `name_at`, read once: at most
    /// [`MAX_STUB_NAME`] bytes of printable ASCII, as HotSpot names its stubs.
    fn stub_name(&mut self, r: &Reader<'_>, named: &mut Named, name_at: u64) -> Option<u64> {
        if let Some(&id) = self.stub_names.get(&name_at) {
            return id;
        }
        let id = r
            .mem
            .c_string_at(name_at, MAX_STUB_NAME)
            .filter(|b| !b.is_empty() && b.iter().all(|c| (0x20..0x7f).contains(c)))
            .map(|b| {
                let line = SymbolLine {
                    function: String::from_utf8_lossy(&b).into_owned(),
                    file: None,
                    line: None,
                    inlined: false,
                };
                named.add(SymbolSource::Jit, vec![line])
            });
        if self.stub_names.len() < MAX_IDS {
            self.stub_names.insert(name_at, id);
        }
        id
    }

    /// The names of `PcDesc` `desc` of `nm`: its chain, innermost first; the compiled
    /// method alone (no line) where the `PcDesc` has no scope, and then true (the pc
    /// has no debug information: past the nmethod's last scope).
    fn lines(
        &mut self,
        r: &Reader<'_>,
        nm: &Nmethod,
        desc: usize,
    ) -> Option<(Vec<SymbolLine>, bool)> {
        if nm.scopes(desc)?.is_empty() {
            let m = method(r.mem, r.layout, nm.method, Some(&mut self.methods.1))?;
            let line = SymbolLine {
                function: m.0.name.clone(),
                file: m.0.file.clone(),
                line: None,
                inlined: false,
            };
            return Some((vec![line], true));
        }
        let mut own = HashMap::new();
        let shared = Some(&mut self.methods.1);
        let lines = chain(r.mem, r.layout, nm, desc, (&mut own, shared))?;
        Some((lines, false))
    }

    /// The nmethod `key` holding `pc`, read once and kept on the JVM's meter: past
    /// its budget, every nmethod kept is let go (and read again as samples need it).
    fn nmethod(
        &mut self,
        r: &Reader<'_>,
        named: &mut Named,
        key: (u64, u32),
        pc: u64,
    ) -> Option<Arc<Nmethod>> {
        if let Some(nm) = self.nmethods.get(&key) {
            return nm.clone();
        }
        let nm = Nmethod::read(r.mem, r.code.layout(), key.0, pc)
            .filter(|n| n.compile_id == key.1)
            .map(Arc::new);
        let weight = nm.as_ref().map_or(64, |n| n.weight() + 64);
        if !named.meter.fits(weight) {
            named.trips.evicted += self.nmethods.len() as u64;
            self.nmethods.clear();
            named.meter.sub(self.kept);
            self.kept = 0;
            if !named.meter.fits(weight) {
                named.trips.refused += 1;
                return nm;
            }
        }
        self.kept += weight;
        named.meter.add(weight);
        self.nmethods.insert(key, nm.clone());
        nm
    }
}
