//! JIT code the unwinder needs to know while recording: for each HotSpot JVM among the
//! recorded processes, the perf map it wrote (merged over the recording: a later
//! snapshot replaces what it overlaps, code unloaded midway keeps its name), what each
//! range is ([`JitKind`], its prologue read from the target's memory on first use), and
//! whether the bytes before a return address are a call. What is learnt of an address
//! (its code, whether it is a return address) is remembered until a newer map changes
//! the range holding it: the same return addresses come back in sample after sample.
//!
//! When the maps are asked for ([`JitTracker`]): at attach (the recorder waits a moment
//! for the first one before it handles samples), whenever a sample lands in anonymous
//! executable memory the map does not cover (new code was compiled; at most once a
//! second), every [`REFRESH`] (code is unloaded and its memory reused), and at the end.
//!
//! A JVM is asked only while it provably is the process seen mapping `libjvm.so`
//! ([`JvmId`]). Once it exited, its exit map is read once and it is retired: its pidfd,
//! its `/proc/PID/mem` and its caches are closed, it is never asked again, and only its
//! merged map stays (to name its frames at the end), cut down [`PRUNE_AFTER`] later to
//! the regions its frames hit, and counted in [`MAX_JIT_WEIGHT`] until then: the maps
//! of the JVMs that exited first are dropped first when the JVMs together would hold
//! more.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::hash::{BuildHasherDefault, Hasher};
use std::os::unix::fs::FileExt;
use std::time::Duration;

use std::sync::Arc;

use super::jvm::{JvmId, PerfMapRequests};
use crate::symbolize::perfmap::{
    Changed, MAX_MAP_WEIGHT, Merged, PerfMap, PerfMapFile, TargetUser,
};
use crate::unwind::addrspace::Space;
use crate::unwind::{CodeModule, JitCode, JitKind, ModuleLookup, PROLOGUE_BYTES, decode_prologue};

/// How often a JVM is asked again for its perf map while recording.
pub const REFRESH: Duration = Duration::from_secs(5);
/// The shortest gap between two requests to one JVM.
const MIN_GAP: Duration = Duration::from_secs(1);
/// The longest gap between two requests that cut stacks ask for.
const MAX_GAP: Duration = Duration::from_secs(30);
/// The longest a sample cut in code the map does not name waits for the map asked for
/// it (a JVM answers in milliseconds; a stuck one must not stall the recording).
pub const HOLD_LIMIT: Duration = Duration::from_millis(1500);
/// How long holding pauses after a held sample was still cut with the maps it waited
/// for.
const HOLD_PAUSE: Duration = Duration::from_secs(10);
/// The maps a held sample waits for at most (the first may have been asked for before
/// the code that cut it was compiled).
const HOLD_TRIES: u32 = 8;
/// Remembered answers per cache and process before the cache starts over.
const MAX_REMEMBERED: usize = 1 << 16;
/// The most the merged maps of all JVMs may weigh together (see
/// [`crate::symbolize::perfmap::ENTRY_COST`]); one JVM's is at most [`MAX_MAP_WEIGHT`].
pub const MAX_JIT_WEIGHT: usize = 256 << 20;

/// A hasher for addresses, the keys of the per-sample caches (SipHash, the default,
/// was a tenth of the JIT step's time): a multiply and a rotate.
#[derive(Default)]
pub struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(26);
    }
}

/// A map keyed by address.
type AddrMap<V> = HashMap<u64, V, BuildHasherDefault<AddrHasher>>;

/// Inserts into a bounded cache, starting it over when full.
fn remember<V>(cache: &RefCell<AddrMap<V>>, key: u64, value: V) {
    let mut cache = cache.borrow_mut();
    if cache.len() >= MAX_REMEMBERED {
        cache.clear();
    }
    cache.insert(key, value);
}

/// Whether `[lo, hi)` overlaps one of `ranges` (sorted, disjoint).
fn overlaps(ranges: &[(u64, u64)], lo: u64, hi: u64) -> bool {
    let i = ranges.partition_point(|&(start, _)| start < hi);
    i > 0 && ranges[i - 1].1 > lo
}

/// One JVM's code, as its perf map and its memory say.
pub struct JitProcess {
    /// Every snapshot of its perf map, merged.
    pub map: PerfMap,
    /// Its memory (`/proc/PID/mem`), to read prologues and call sites.
    mem: Option<File>,
    /// What each range is, by start (with its end, which changes when it is reused).
    kinds: RefCell<AddrMap<(u64, JitKind)>>,
    /// The code at each address looked up (None: the map names none).
    code: RefCell<AddrMap<Option<JitCode>>>,
    /// The bytes before return addresses, as read (None: unreadable).
    calls: RefCell<AddrMap<Option<[u8; 7]>>>,
    /// Whether each address checked is a return address.
    returns: RefCell<AddrMap<bool>>,
    /// The JVM as it was seen (None once it exited: retired).
    id: Option<Arc<JvmId>>,
    /// Whose the perf map and attach socket must be, and who reads the map.
    pub user: TargetUser,
    /// When it was retired (an order: the first retired are dropped first).
    retired: Option<u64>,
    /// When it was retired, and whether its map was cut down to the code its samples
    /// hit since ([`JitTracker::prune`]).
    retired_at: Option<std::time::Instant>,
    pruned: bool,
    /// Its map was dropped to keep the maps within [`MAX_JIT_WEIGHT`].
    dropped: bool,
    /// Requests abandoned at the time limit (the reply never came whole).
    abandoned: u32,
    /// Snapshots that rebuilt the map (it would have grown past its budget).
    rebuilds: u32,
    /// Snapshots cut at the budget.
    cuts: u32,
    /// A sample landed in anonymous code the map does not cover.
    pub wants_refresh: bool,
    /// Why the last request failed, if it did.
    pub last_error: Option<String>,
    /// Requests that brought a map back.
    pub snapshots: u32,
    /// The shortest gap before the next request a cut stack asks for: doubled (up to
    /// [`MAX_GAP`]) each time a map brings nothing new, since each request has the JVM
    /// write its whole map.
    gap: Duration,
    /// The JVM refused the command (JDK 16 or older), or opened no attach listener when
    /// signalled: it is not asked again.
    refused: bool,
    /// Replies that arrived (maps or errors).
    replies: u32,
    /// Samples are held until this time, or until a reply has come (`replies` differs
    /// from the count kept here); with the time of the sample that began the hold, and
    /// how many maps it has waited for.
    hold: Option<(std::time::Instant, u32, u64, u32)>,
    /// A held sample came out cut even with the map it waited for: no sample is held
    /// again before this time (a new map would not help those).
    no_hold_until: Option<std::time::Instant>,
}

impl JitProcess {
    fn new(pid: u32, id: Option<Arc<JvmId>>) -> JitProcess {
        JitProcess {
            map: PerfMap::default(),
            mem: File::open(format!("/proc/{pid}/mem")).ok(),
            kinds: RefCell::default(),
            code: RefCell::default(),
            calls: RefCell::default(),
            returns: RefCell::default(),
            id,
            user: TargetUser::of(pid),
            retired: None,
            retired_at: None,
            pruned: false,
            dropped: false,
            abandoned: 0,
            rebuilds: 0,
            cuts: 0,
            wants_refresh: false,
            last_error: None,
            snapshots: 0,
            gap: MIN_GAP,
            refused: false,
            replies: 0,
            hold: None,
            no_hold_until: None,
        }
    }

    /// Whether the map names the code at `addr`.
    pub fn covers(&self, addr: u64) -> bool {
        self.map.region(addr).is_some()
    }

    fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        self.mem
            .as_ref()
            .is_some_and(|m| m.read_exact_at(buf, addr).is_ok())
    }

    fn code_at(&self, avma: u64) -> Option<JitCode> {
        if let Some(&known) = self.code.borrow().get(&avma) {
            return known;
        }
        let code = self.find_code(avma);
        remember(&self.code, avma, code);
        code
    }

    fn find_code(&self, avma: u64) -> Option<JitCode> {
        let (start, end, name) = self.map.region(avma)?;
        if let Some(&(e, kind)) = self.kinds.borrow().get(&start)
            && e == end
        {
            return Some(JitCode { start, kind });
        }
        let kind = classify(name, || {
            let mut buf = [0u8; PROLOGUE_BYTES];
            let n = (end - start).min(PROLOGUE_BYTES as u64) as usize;
            self.read(start, &mut buf[..n]).then(|| buf[..n].to_vec())
        });
        remember(&self.kinds, start, (end, kind));
        Some(JitCode { start, kind })
    }

    fn code_before(&self, ra: u64) -> Option<[u8; 7]> {
        if let Some(&known) = self.calls.borrow().get(&ra) {
            return known;
        }
        let mut code = [0u8; 7];
        let read = (ra >= 7 && self.covers(ra - 7) && self.read(ra - 7, &mut code)).then_some(code);
        remember(&self.calls, ra, read);
        read
    }

    fn is_return(&self, ra: u64, check: &dyn Fn() -> bool) -> bool {
        if let Some(&known) = self.returns.borrow().get(&ra) {
            return known;
        }
        let answer = check();
        remember(&self.returns, ra, answer);
        answer
    }

    /// Takes a new snapshot of the map, read from its file within `budget`; what was
    /// learnt of the ranges it changed is dropped, the rest kept.
    fn merge(&mut self, mut file: PerfMapFile, budget: usize) {
        match self.map.merge_from(&mut file.file, budget) {
            Ok(merged) => self.merged(merged),
            Err(e) => {
                self.last_error = Some(format!("cannot read {}: {e}", file.path.display()));
            }
        }
    }

    /// What a merge changed, applied to what was learnt.
    fn merged(&mut self, merged: Merged) {
        match merged.changed {
            Changed::Ranges(r) if r.is_empty() => self.gap = (self.gap * 2).min(MAX_GAP),
            Changed::Ranges(r) => {
                self.forget(&r);
                self.gap = MIN_GAP;
            }
            Changed::All => {
                self.forget_all();
                self.gap = MIN_GAP;
            }
        }
        self.rebuilds += u32::from(merged.rebuilt);
        self.cuts += u32::from(merged.cut);
        self.snapshots += 1;
        self.last_error = None;
    }

    /// Drops everything learnt.
    fn forget_all(&mut self) {
        self.kinds.get_mut().clear();
        self.code.get_mut().clear();
        self.calls.get_mut().clear();
        self.returns.get_mut().clear();
    }

    /// It exited: everything but its map is released, and it is never asked again.
    fn retire(&mut self, seq: u64) {
        self.id = None;
        self.mem = None;
        self.forget_all();
        for cache in [self.kinds.get_mut().capacity(), 0] {
            let _ = cache;
        }
        self.kinds = RefCell::default();
        self.code = RefCell::default();
        self.calls = RefCell::default();
        self.returns = RefCell::default();
        self.refused = true;
        self.wants_refresh = false;
        self.hold = None;
        self.retired = Some(seq);
        self.retired_at = Some(std::time::Instant::now());
    }

    /// Drops what was learnt of addresses in `changed` (sorted, disjoint ranges): their
    /// code, and return addresses whose call instruction is in them.
    fn forget(&mut self, changed: &[(u64, u64)]) {
        self.kinds
            .get_mut()
            .retain(|&start, &mut (end, _)| !overlaps(changed, start, end));
        self.code
            .get_mut()
            .retain(|&avma, _| !overlaps(changed, avma, avma + 1));
        self.calls
            .get_mut()
            .retain(|&ra, _| !overlaps(changed, ra.saturating_sub(7), ra));
        self.returns
            .get_mut()
            .retain(|&ra, _| !overlaps(changed, ra.saturating_sub(7), ra));
    }
}

/// What a perf-map entry of HotSpot is, from its name (and for a compiled method, its
/// first bytes, read by `prologue`).
pub fn classify(name: &str, prologue: impl FnOnce() -> Option<Vec<u8>>) -> JitKind {
    if name == "Interpreter" {
        return JitKind::Interpreter;
    }
    if is_java_method(name) {
        return match prologue() {
            Some(code) => JitKind::Method(decode_prologue(&code)),
            None => JitKind::Stub,
        };
    }
    JitKind::Stub
}

/// HotSpot names compiled methods `RET Class.method(ARGS)` (`long Chain.spin(long)`);
/// its stubs and blobs have other names (`StubRoutines (1)`, `I2C/C2I adapters`).
fn is_java_method(name: &str) -> bool {
    let Some(open) = name.find('(') else {
        return false;
    };
    let head = &name[..open];
    name.ends_with(')')
        && head.contains(' ')
        && head.rsplit(' ').next().is_some_and(|m| m.contains('.'))
}

/// The address space of a process plus its JIT code, as the unwinder looks them up.
pub struct Lookup<'a> {
    pub space: &'a Space,
    pub jit: Option<&'a JitProcess>,
}

impl ModuleLookup for Lookup<'_> {
    fn lookup(&self, avma: u64) -> Option<CodeModule<'_>> {
        self.space.lookup(avma)
    }

    fn jit(&self, avma: u64) -> Option<JitCode> {
        self.jit?.code_at(avma)
    }

    fn jit_code_before(&self, ra: u64) -> Option<[u8; 7]> {
        self.jit?.code_before(ra)
    }

    fn remembered_return(&self, ra: u64, check: &dyn Fn() -> bool) -> bool {
        match self.jit {
            Some(jit) => jit.is_return(ra, check),
            None => check(),
        }
    }
}

/// How long after a JVM was retired its map is cut down to the code its samples hit
/// (the samples of its last moments may still be on their way until then).
const PRUNE_AFTER: Duration = Duration::from_secs(10);

/// The JVMs of a recording and their perf-map requests.
pub struct JitTracker {
    /// Ask JVMs for perf maps (`--no-jvm-perfmap` turns it off).
    pub enabled: bool,
    pub processes: HashMap<u32, JitProcess>,
    requests: PerfMapRequests,
    last_refresh: std::time::Instant,
    /// When tracking began: a perf map written before it is not this recording's.
    started: std::time::SystemTime,
    /// Whether samples may be held for a map ([`JitTracker::hold`]); false once recording
    /// ends.
    pub holding: bool,
    /// Holds begun.
    pub holds: u64,
    /// JVMs retired so far (the order they are dropped in).
    retired: u64,
    /// When retired maps were last pruned.
    last_prune: std::time::Instant,
}

impl JitTracker {
    pub fn new(enabled: bool) -> JitTracker {
        JitTracker {
            enabled,
            processes: HashMap::new(),
            requests: PerfMapRequests::default(),
            last_refresh: std::time::Instant::now(),
            started: std::time::SystemTime::now(),
            holding: true,
            holds: 0,
            retired: 0,
            last_prune: std::time::Instant::now(),
        }
    }

    /// Whether a JVM retired [`PRUNE_AFTER`] ago still holds its whole map (and no
    /// prune ran in that time): then [`JitTracker::prune`] is due.
    pub fn prune_due(&self) -> bool {
        self.last_prune.elapsed() >= PRUNE_AFTER
            && self.processes.values().any(|p| self.prunable(p))
    }

    fn prunable(&self, p: &JitProcess) -> bool {
        !p.pruned && p.retired_at.is_some_and(|t| t.elapsed() >= PRUNE_AFTER)
    }

    /// Cuts the map of each JVM retired [`PRUNE_AFTER`] ago down to the regions that
    /// the recording's `frames` (every frame so far) hit: all that naming them at the
    /// end needs. One pass over the frames for every such JVM.
    pub fn prune(&mut self, frames: &[crate::format::Frame]) {
        self.last_prune = std::time::Instant::now();
        let mut hit: HashMap<u32, Vec<u64>> = self
            .processes
            .iter()
            .filter(|(_, p)| self.prunable(p))
            .map(|(&pid, _)| (pid, Vec::new()))
            .collect();
        for f in frames {
            if f.kind.is_user()
                && let Some(addrs) = hit.get_mut(&f.pid)
            {
                addrs.push(f.kind.lookup_address(f.addr));
            }
        }
        for (pid, addrs) in hit {
            if let Some(p) = self.processes.get_mut(&pid) {
                p.map = p.map.only(&addrs);
                p.pruned = true;
            }
        }
    }

    /// Process `pid` maps HotSpot: track it (if it still runs and maps it: see
    /// [`JvmId::seen`]), and ask for its map at once. A pid tracked before whose JVM
    /// exited is another process now: the old one's map is dropped.
    pub fn jvm_seen(&mut self, pid: u32) {
        if !self.enabled
            || self
                .processes
                .get(&pid)
                .is_some_and(|p| p.id.as_ref().is_some_and(|id| !id.exited()))
        {
            return;
        }
        let Some(id) = JvmId::seen(pid) else {
            return;
        };
        let id = Arc::new(id);
        let p = JitProcess::new(pid, Some(Arc::clone(&id)));
        self.requests.forget(pid);
        let _ = self.requests.request(&id, &p.user, Duration::ZERO);
        self.processes.insert(pid, p);
    }

    /// The budget of `pid`'s next snapshot: [`MAX_MAP_WEIGHT`], less when the other
    /// JVMs' maps together come near [`MAX_JIT_WEIGHT`] (the maps of retired JVMs are
    /// dropped first, the first retired first).
    fn budget(&mut self, pid: u32) -> usize {
        let others = |ps: &HashMap<u32, JitProcess>| -> usize {
            ps.iter()
                .filter(|&(&q, _)| q != pid)
                .map(|(_, p)| p.map.weight())
                .sum()
        };
        while others(&self.processes) > MAX_JIT_WEIGHT - MAX_MAP_WEIGHT {
            let oldest = self
                .processes
                .iter_mut()
                .filter(|(q, p)| **q != pid && !p.dropped && p.retired.is_some())
                .min_by_key(|(_, p)| p.retired)
                .map(|(_, p)| p);
            let Some(p) = oldest else {
                break;
            };
            p.map = PerfMap::default();
            p.dropped = true;
        }
        MAX_MAP_WEIGHT.min(MAX_JIT_WEIGHT.saturating_sub(others(&self.processes)))
    }

    /// JVM `pid` exited (or is no longer the JVM seen): its map as it wrote it at exit is
    /// read once (`-XX:+DumpPerfMapAtExit`, which `--jvm-flags` adds), then it is retired.
    fn exited(&mut self, pid: u32) {
        let budget = self.budget(pid);
        let started = self.started;
        self.requests.forget(pid);
        self.retired += 1;
        let seq = self.retired;
        let Some(p) = self.processes.get_mut(&pid) else {
            return;
        };
        if p.retired.is_some() {
            return;
        }
        if let Ok(file) = super::jvm::read_map(pid, &p.user)
            && file.modified.is_some_and(|m| m >= started)
        {
            // Its map was written during the recording: by the JVM at its exit, or by
            // our last request (then merging it changes nothing).
            p.merge(file, budget);
        }
        p.retire(seq);
    }

    /// The JIT code of process `pid`, if it is a tracked JVM.
    pub fn get(&self, pid: u32) -> Option<&JitProcess> {
        self.processes.get(&pid)
    }

    pub fn get_mut(&mut self, pid: u32) -> Option<&mut JitProcess> {
        self.processes.get_mut(&pid)
    }

    /// Merges the maps that arrived, waiting up to `wait` for one; sends the requests
    /// that are due.
    pub fn poll(&mut self, wait: Duration) {
        if self.processes.is_empty() {
            return;
        }
        let mut gone = Vec::new();
        for (pid, reply) in self.requests.replies(wait) {
            let budget = self.budget(pid);
            let Some(p) = self.processes.get_mut(&pid) else {
                continue;
            };
            if p.retired.is_some() {
                continue;
            }
            p.replies += 1;
            match reply {
                Ok(file) => p.merge(file, budget),
                Err(e) => {
                    // A JVM that refused the command, or got SIGQUIT and opened no
                    // listener (it printed a thread dump instead), is not asked again.
                    p.refused = e.starts_with(super::jvm::REFUSED)
                        || e.starts_with(super::jvm::NO_LISTENER);
                    if e.starts_with(super::jvm::ABANDONED) {
                        p.abandoned += 1;
                    }
                    if e.starts_with(super::jvm::GONE) {
                        gone.push(pid);
                    }
                    p.last_error = Some(e);
                }
            }
        }
        // JVMs that exited: their exit map once, then retired.
        gone.extend(
            self.processes
                .iter()
                .filter(|(_, p)| p.id.as_ref().is_some_and(|id| id.exited()))
                .map(|(&pid, _)| pid),
        );
        for pid in gone {
            self.exited(pid);
        }
        let periodic = self.last_refresh.elapsed() >= REFRESH;
        if periodic {
            self.last_refresh = std::time::Instant::now();
        }
        for p in self.processes.values_mut() {
            let Some(id) = p.id.as_ref().filter(|_| !p.refused) else {
                continue;
            };
            // A wanted map stays wanted until it is asked for (a held sample waits for
            // it).
            if periodic && self.requests.request(id, &p.user, MIN_GAP)
                || p.wants_refresh && self.requests.request(id, &p.user, p.gap)
            {
                p.wants_refresh = false;
            }
        }
    }

    /// A sample of JVM `pid` was cut in code its map does not name (code compiled since
    /// the last map): whether to hold it (and every later record) until a newer map
    /// arrives, so that it is unwound with it. A hold waits for the request in flight,
    /// or for the next one the gaps of [`JitProcess::gap`] allow if that comes within
    /// [`HOLD_LIMIT`] (a JVM whose maps bring nothing new is asked rarely, and then
    /// nothing waits); it ends with the reply, an error, or [`HOLD_LIMIT`] after the
    /// request is due. If the sample that waited (`sample_time`) is still cut with
    /// [`HOLD_TRIES`] new maps, holding pauses for [`HOLD_PAUSE`]. While recording ends nothing is held.
    pub fn hold(&mut self, pid: u32, sample_time: u64) -> bool {
        if !self.enabled || !self.holding {
            return false;
        }
        let Some(p) = self.processes.get_mut(&pid) else {
            return false;
        };
        let now = std::time::Instant::now();
        let mut tries = 0;
        if let Some((until, replies, held, waited)) = p.hold {
            if p.replies == replies && now < until {
                return true;
            }
            p.hold = None;
            if held == sample_time {
                // The map came (or no map will) and the sample that waited for it is
                // still cut. The map may have been asked for before its code was
                // compiled: it waits for one more. After that it is unwound with what
                // there is, and holding pauses (each hold delays every record).
                if waited + 1 >= HOLD_TRIES {
                    p.no_hold_until = Some(now + HOLD_PAUSE);
                    return false;
                }
                tries = waited + 1;
            }
        }
        let due = self.requests.due_in(pid, p.gap);
        if p.refused || due > HOLD_LIMIT || p.no_hold_until.is_some_and(|t| now < t) {
            return false;
        }
        // poll() sends the request when it is due.
        p.wants_refresh = true;
        self.holds += 1;
        p.hold = Some((now + due + HOLD_LIMIT, p.replies, sample_time, tries));
        true
    }

    /// Whether a sample of `pid` could be held now (see [`JitTracker::hold`]): cheap, for
    /// the recorder to skip the checks that would decide it.
    pub fn can_hold(&self, pid: u32) -> bool {
        if !self.enabled || !self.holding {
            return false;
        }
        let Some(p) = self.processes.get(&pid) else {
            return false;
        };
        let now = std::time::Instant::now();
        p.hold.is_some()
            || !p.refused
                && p.no_hold_until.is_none_or(|t| now >= t)
                && self.requests.due_in(pid, p.gap) <= HOLD_LIMIT
    }

    /// Whether a held sample still waits (no reply yet, time left): then handling it
    /// again would only hold it again.
    pub fn waiting(&self) -> bool {
        let now = std::time::Instant::now();
        self.processes.values().any(|p| {
            p.hold
                .is_some_and(|(until, replies, ..)| p.replies == replies && now < until)
        })
    }

    /// Waits (up to the request time limit) for the answers to the first requests.
    pub fn wait_first(&mut self) {
        let deadline = std::time::Instant::now() + self.requests.limit;
        while self.processes.keys().any(|&p| self.requests.busy(p)) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            self.poll(left.min(Duration::from_millis(100)));
        }
    }

    /// At the end of the recording: one last map from every JVM still running, so that
    /// code compiled since the last request is named, and from every JVM that exited
    /// the map it wrote as it exited if it did (`-XX:+DumpPerfMapAtExit`, which
    /// `--jvm-flags` adds). Returns each JVM's merged map (taken out of the tracker).
    pub fn finish(&mut self) -> HashMap<u32, PerfMap> {
        let pids: Vec<u32> = self.processes.keys().copied().collect();
        for &pid in &pids {
            let Some(p) = self.processes.get(&pid) else {
                continue;
            };
            match &p.id {
                None => {}
                Some(id) if id.exited() => self.exited(pid),
                Some(id) => {
                    if !p.refused {
                        let _ = self.requests.request(id, &p.user, Duration::ZERO);
                    }
                }
            }
        }
        self.wait_first();
        self.processes
            .iter_mut()
            .filter(|(_, p)| !p.map.is_empty())
            .map(|(&pid, p)| (pid, std::mem::take(&mut p.map)))
            .collect()
    }

    /// Why JVMs gave no perf map, or not all of it, for the summary.
    pub fn notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = Vec::new();
        for (pid, p) in &self.processes {
            if let Some(e) = &p.last_error
                && !e.starts_with(super::jvm::GONE)
            {
                notes.push(format!("JVM {pid} wrote no perf map: {e}"));
            }
            if p.abandoned > 0 {
                notes.push(format!(
                    "JVM {pid}: {} perf-map request(s) abandoned: no whole reply within {:?}",
                    p.abandoned, self.requests.limit
                ));
            }
            if p.cuts > 0 || p.rebuilds > 0 {
                notes.push(format!(
                    "JVM {pid}: its perf map was cut to stay within {} MiB ({} snapshot(s) \
                     rebuilt the map, dropping names of code they no longer listed; {} cut)",
                    MAX_MAP_WEIGHT >> 20,
                    p.rebuilds,
                    p.cuts
                ));
            }
            if p.dropped {
                notes.push(format!(
                    "JVM {pid} exited and its perf map was dropped to keep the JVMs' maps \
                     within {} MiB: its compiled frames are unnamed",
                    MAX_JIT_WEIGHT >> 20
                ));
            }
        }
        notes.sort();
        notes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unwind::JitFrame;

    #[test]
    fn hotspot_names() {
        let code = || Some(vec![0x55, 0x48, 0x83, 0xec, 0x10]);
        assert_eq!(classify("Interpreter", code), JitKind::Interpreter);
        assert!(matches!(
            classify("long Chain.spin(long)", code),
            JitKind::Method(crate::unwind::JitFrame::Sized { ra: 0x18, .. })
        ));
        assert!(matches!(
            classify("void java.lang.Thread.run()", || None),
            JitKind::Stub
        ));
        for stub in [
            "StubRoutines (1)",
            "I2C/C2I adapters",
            "RuntimeStub - _new_array_Java",
            "vtable chunks",
        ] {
            assert_eq!(classify(stub, code), JitKind::Stub, "{stub}");
        }
    }

    /// A retired JVM keeps, after a while, only the names its frames need.
    #[test]
    fn a_retired_jvm_keeps_only_the_code_its_frames_hit() {
        use crate::format::{Frame, FrameKind};
        let mut t = JitTracker::new(true);
        let mut p = JitProcess::new(std::process::id(), None);
        p.merge_text("1000 100 hit\n2000 100 missed\n");
        p.retire(1);
        t.processes.insert(7, p);
        assert!(!t.prune_due(), "too soon");
        let old = std::time::Instant::now() - PRUNE_AFTER * 2;
        t.last_prune = old;
        t.processes.get_mut(&7).unwrap().retired_at = Some(old);
        assert!(t.prune_due());
        let frame = |pid, addr| Frame {
            kind: FrameKind::User,
            pid,
            addr,
            mapping: None,
        };
        t.prune(&[frame(7, 0x1010), frame(8, 0x2010)]);
        let map = &t.processes[&7].map;
        assert_eq!(map.lookup(0x1010), Some("hit"));
        assert_eq!(map.lookup(0x2010), None);
        assert!(!t.prune_due());
    }

    #[test]
    fn changed_ranges() {
        let changed = [(0x100, 0x200), (0x300, 0x310)];
        assert!(overlaps(&changed, 0x1f0, 0x1f8));
        assert!(overlaps(&changed, 0xf9, 0x101));
        assert!(overlaps(&changed, 0x2ff, 0x400));
        assert!(!overlaps(&changed, 0xf9, 0x100));
        assert!(!overlaps(&changed, 0x200, 0x300));
        assert!(!overlaps(&changed, 0x310, 0x320));
        assert!(!overlaps(&[], 0, u64::MAX));
    }

    /// "Compiled code" in this test's own memory: a prologue, then a call whose return
    /// address is at offset 12.
    static CODE: [u8; 32] = [
        0x55, 0x48, 0x83, 0xEC, 0x10, 0x90, 0x90, 0xE8, 1, 2, 3, 4, 0x90, 0x90, 0x90, 0x90, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];

    impl JitProcess {
        /// [`JitProcess::merge`] of text already in memory.
        fn merge_text(&mut self, text: &str) {
            let changed = self.map.merge_ranges(text);
            self.merged(Merged {
                changed: Changed::Ranges(changed),
                rebuilt: false,
                cut: false,
            });
        }
    }

    #[test]
    fn remembers_what_it_learnt_until_a_map_changes_its_range() {
        let base = std::hint::black_box(CODE.as_ptr()) as u64;
        let mut p = JitProcess::new(std::process::id(), None);
        p.merge_text(&format!("{base:x} 20 long A.a(long)\n"));
        let frame = JitFrame::Sized {
            ra: 0x18,
            bp: 0x10,
            body: 5,
        };
        assert_eq!(
            p.code_at(base + 9).map(|c| c.kind),
            Some(JitKind::Method(frame))
        );
        let ra = base + 12;
        let mut before = [0u8; 7];
        before.copy_from_slice(&CODE[5..12]);
        assert_eq!(p.code_before(ra), Some(before));
        let checks = std::cell::Cell::new(0);
        let check = || {
            checks.set(checks.get() + 1);
            true
        };
        assert!(p.is_return(ra, &check));
        assert!(p.is_return(ra, &check));
        assert_eq!(checks.get(), 1, "the second answer is remembered");
        // A map that changes other code keeps what was learnt here.
        p.merge_text(&format!("{:x} 10 other\n", base + 0x100));
        assert!(p.is_return(ra, &check));
        assert_eq!(checks.get(), 1);
        assert!(p.code.borrow().contains_key(&(base + 9)));
        // The same snapshot again changes nothing and forgets nothing.
        p.merge_text(&format!("{base:x} 20 long A.a(long)\n"));
        assert_eq!(checks.get(), 1);
        // New code over this range: asked again, and its new name is the one used.
        p.merge_text(&format!("{base:x} 10 StubRoutines (1)\n"));
        assert!(p.is_return(ra, &check));
        assert_eq!(checks.get(), 2);
        assert_eq!(p.code_at(base + 9).map(|c| c.kind), Some(JitKind::Stub));
    }
}
