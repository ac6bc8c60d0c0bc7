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
//! merged map stays (to name its frames at the end), cut down ten seconds later to
//! the regions its frames hit, and counted in [`tracker::MAX_JIT_WEIGHT`] until then: the maps
//! of the JVMs that exited first are dropped first when the JVMs together would hold
//! more.

use std::cell::RefCell;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::Duration;

use std::sync::Arc;

use crate::interp::AddrMap;
use crate::interp::jvm::JavaFrames;

mod tracker;

pub(super) use tracker::JitTracker;

use super::jvm::JvmId;
use crate::symbolize::perfmap::{Changed, Merged, PerfMap, PerfMapFile, TargetUser};
use crate::unwind::addrspace::Space;
use crate::unwind::{CodeModule, JitCode, JitKind, ModuleLookup, PROLOGUE_BYTES, decode_prologue};

/// How often a JVM is asked again for its perf map while recording.
pub(super) const REFRESH: Duration = Duration::from_secs(5);
/// The shortest gap between two requests to one JVM.
const MIN_GAP: Duration = Duration::from_secs(1);
/// The longest gap between two requests that cut stacks ask for.
const MAX_GAP: Duration = Duration::from_secs(30);
/// The longest a sample cut in code the map does not name waits for the map asked for
/// it (a JVM answers in milliseconds; a stuck one must not stall the recording).
pub(super) const HOLD_LIMIT: Duration = Duration::from_millis(1500);
/// How long holding pauses after a held sample was still cut with the maps it waited
/// for.
const HOLD_PAUSE: Duration = Duration::from_secs(10);
/// The maps a held sample waits for at most (the first may have been asked for before
/// the code that cut it was compiled).
const HOLD_TRIES: u32 = 8;
/// The gap before the first retry of a held sample that came out still cut: the map
/// it waited for was asked for before its code was compiled, and the next one is
/// likely to name it. Doubled with each retry, never past [`Pacing::gap`]. Waiting
/// [`MIN_GAP`] instead let the records queued behind a twice-held sample outgrow the
/// memory they may take, and all of them came out cut (issue 30).
const RETRY_GAP: Duration = Duration::from_millis(50);
/// Remembered answers per cache and process before the cache starts over.
const MAX_REMEMBERED: usize = 1 << 16;

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
pub(super) struct JitProcess {
    /// Every snapshot of its perf map, merged.
    pub map: PerfMap,
    /// Its memory and what was learnt reading it.
    reader: CodeReader,
    /// The JVM as it was seen (None once it exited: retired).
    id: Option<Arc<JvmId>>,
    /// Whose the perf map and attach socket must be, and who reads the map.
    pub user: TargetUser,
    retire: Retirement,
    /// How its requests went, for the summary.
    pub outcomes: Outcomes,
    /// When to ask for a map, and which samples wait for it.
    pub pacing: Pacing,
}

/// A JVM's memory and what was learnt reading it, each cache bounded
/// ([`MAX_REMEMBERED`]) and dropped where a new map changed the code.
struct CodeReader {
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
}

/// When a JVM that exited was retired, and what was dropped of it since.
#[derive(Default)]
struct Retirement {
    /// When it was retired (an order: the first retired are dropped first).
    retired: Option<u64>,
    /// When it was retired, and whether its map was cut down to the code its samples
    /// hit since ([`JitTracker::prune`]).
    retired_at: Option<std::time::Instant>,
    pruned: bool,
    /// Its map was dropped to keep the maps within [`tracker::MAX_JIT_WEIGHT`].
    dropped: bool,
}

/// How a JVM's map requests went.
#[derive(Default)]
pub(super) struct Outcomes {
    /// Requests abandoned at the time limit (the reply never came whole).
    abandoned: u32,
    /// Snapshots that rebuilt the map (it would have grown past its budget).
    rebuilds: u32,
    /// Snapshots cut at the budget.
    cuts: u32,
    /// Why the last request failed, if it did.
    pub last_error: Option<String>,
    /// Requests that brought a map back.
    pub snapshots: u32,
}

/// When a JVM is asked for its map, and which of its samples wait for one.
pub(super) struct Pacing {
    /// A sample landed in anonymous code the map does not cover.
    pub wants_refresh: bool,
    /// The shortest gap before the next request a cut stack asks for: doubled (up to
    /// [`MAX_GAP`]) each time a map brings nothing new, since each request has the JVM
    /// write its whole map.
    gap: Duration,
    /// The gap the request a held sample waits for may come after: `gap`, or shorter
    /// for a retry ([`RETRY_GAP`]).
    hold_gap: Duration,
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
            reader: CodeReader {
                mem: File::open(format!("/proc/{pid}/mem")).ok(),
                kinds: RefCell::default(),
                code: RefCell::default(),
                calls: RefCell::default(),
                returns: RefCell::default(),
            },
            id,
            user: TargetUser::of(pid),
            retire: Retirement::default(),
            outcomes: Outcomes::default(),
            pacing: Pacing {
                wants_refresh: false,
                gap: MIN_GAP,
                hold_gap: MIN_GAP,
                refused: false,
                replies: 0,
                hold: None,
                no_hold_until: None,
            },
        }
    }

    /// Whether the map names the code at `addr`.
    pub(super) fn covers(&self, addr: u64) -> bool {
        self.map.region(addr).is_some()
    }

    /// Whether `ra`, an address the map does not name, follows a call in the target's
    /// memory: a return address into code compiled since the last map, not one of the
    /// pointers to code blobs' headers that fill a JVM thread's stack (those held
    /// samples for maps that could never name them, and a hold that runs out of tries
    /// releases every sample behind it cut).
    pub(super) fn follows_call(&self, ra: u64) -> bool {
        let mut code = [0u8; 7];
        ra >= 7 && self.read(ra - 7, &mut code) && crate::unwind::ends_in_call(&code)
    }

    fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        self.reader
            .mem
            .as_ref()
            .is_some_and(|m| m.read_exact_at(buf, addr).is_ok())
    }

    fn code_at(&self, avma: u64) -> Option<JitCode> {
        if let Some(&known) = self.reader.code.borrow().get(&avma) {
            return known;
        }
        let code = self.find_code(avma);
        remember(&self.reader.code, avma, code);
        code
    }

    fn find_code(&self, avma: u64) -> Option<JitCode> {
        let (start, end, name) = self.map.region(avma)?;
        if let Some(&(e, kind)) = self.reader.kinds.borrow().get(&start)
            && e == end
        {
            return Some(JitCode { start, kind });
        }
        let kind = classify(name, || {
            let mut buf = [0u8; PROLOGUE_BYTES];
            let n = (end - start).min(PROLOGUE_BYTES as u64) as usize;
            self.read(start, &mut buf[..n]).then(|| buf[..n].to_vec())
        });
        remember(&self.reader.kinds, start, (end, kind));
        Some(JitCode { start, kind })
    }

    fn code_before(&self, ra: u64) -> Option<[u8; 7]> {
        if let Some(&known) = self.reader.calls.borrow().get(&ra) {
            return known;
        }
        let mut code = [0u8; 7];
        let read = (ra >= 7 && self.covers(ra - 7) && self.read(ra - 7, &mut code)).then_some(code);
        remember(&self.reader.calls, ra, read);
        read
    }

    fn is_return(&self, ra: u64, check: &dyn Fn() -> bool) -> bool {
        if let Some(&known) = self.reader.returns.borrow().get(&ra) {
            return known;
        }
        let answer = check();
        remember(&self.reader.returns, ra, answer);
        answer
    }

    /// Takes a new snapshot of the map, read from its file within `budget`; what was
    /// learnt of the ranges it changed is dropped, the rest kept.
    fn merge(&mut self, mut file: PerfMapFile, budget: usize) {
        match self.map.merge_from(&mut file.file, budget) {
            Ok(merged) => self.merged(merged),
            Err(e) => {
                self.outcomes.last_error =
                    Some(format!("cannot read {}: {e}", file.path.display()));
            }
        }
    }

    /// What a merge changed, applied to what was learnt.
    fn merged(&mut self, merged: Merged) {
        match merged.changed {
            Changed::Ranges(r) if r.is_empty() => {
                self.pacing.gap = (self.pacing.gap * 2).min(MAX_GAP)
            }
            Changed::Ranges(r) => {
                self.forget(&r);
                self.pacing.gap = MIN_GAP;
            }
            Changed::All => {
                self.forget_all();
                self.pacing.gap = MIN_GAP;
            }
        }
        self.outcomes.rebuilds += u32::from(merged.rebuilt);
        self.outcomes.cuts += u32::from(merged.cut);
        self.outcomes.snapshots += 1;
        self.outcomes.last_error = None;
    }

    /// Drops everything learnt.
    fn forget_all(&mut self) {
        self.reader.kinds.get_mut().clear();
        self.reader.code.get_mut().clear();
        self.reader.calls.get_mut().clear();
        self.reader.returns.get_mut().clear();
    }

    /// It exited: everything but its map is released, and it is never asked again.
    fn retire(&mut self, seq: u64) {
        self.id = None;
        self.reader.mem = None;
        self.forget_all();
        for cache in [self.reader.kinds.get_mut().capacity(), 0] {
            let _ = cache;
        }
        self.reader.kinds = RefCell::default();
        self.reader.code = RefCell::default();
        self.reader.calls = RefCell::default();
        self.reader.returns = RefCell::default();
        self.pacing.refused = true;
        self.pacing.wants_refresh = false;
        self.pacing.hold = None;
        self.retire.retired = Some(seq);
        self.retire.retired_at = Some(std::time::Instant::now());
    }

    /// Drops what was learnt of addresses in `changed` (sorted, disjoint ranges): their
    /// code, and return addresses whose call instruction is in them.
    fn forget(&mut self, changed: &[(u64, u64)]) {
        self.reader
            .kinds
            .get_mut()
            .retain(|&start, &mut (end, _)| !overlaps(changed, start, end));
        self.reader
            .code
            .get_mut()
            .retain(|&avma, _| !overlaps(changed, avma, avma + 1));
        self.reader
            .calls
            .get_mut()
            .retain(|&ra, _| !overlaps(changed, ra.saturating_sub(7), ra));
        self.reader
            .returns
            .get_mut()
            .retain(|&ra, _| !overlaps(changed, ra.saturating_sub(7), ra));
    }
}

#[cfg(test)]
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

/// What a perf-map entry of HotSpot is, from its name (and for a compiled method, its
/// first bytes, read by `prologue`).
pub(super) fn classify(name: &str, prologue: impl FnOnce() -> Option<Vec<u8>>) -> JitKind {
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

/// The address space of a process plus its JIT code, as the unwinder looks them up:
/// the JVM's code heaps as the drains found them (`java`, with the process's pid),
/// and where a perf map was asked for (`jit`), what it names.
pub(super) struct Lookup<'a> {
    pub space: &'a Space,
    pub jit: Option<&'a JitProcess>,
    pub java: Option<(&'a JavaFrames, u32)>,
}

impl ModuleLookup for Lookup<'_> {
    fn lookup(&self, avma: u64) -> Option<CodeModule<'_>> {
        self.space.lookup(avma)
    }

    fn jit(&self, avma: u64) -> Option<JitCode> {
        if let Some((java, pid)) = self.java
            && let Some(code) = java.jit_code(pid, avma)
        {
            return Some(code);
        }
        self.jit?.code_at(avma)
    }

    fn jit_code_before(&self, ra: u64) -> Option<[u8; 7]> {
        if let Some((java, pid)) = self.java
            && let Some(code) = java.jit_code_before(pid, ra)
        {
            return Some(code);
        }
        self.jit?.code_before(ra)
    }

    fn remembered_return(&self, ra: u64, check: &dyn Fn() -> bool) -> bool {
        match (self.jit, self.java) {
            (Some(jit), _) => jit.is_return(ra, check),
            (None, Some((java, pid))) => java.is_return(pid, ra, check),
            (None, None) => check(),
        }
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
        assert!(p.reader.code.borrow().contains_key(&(base + 9)));
        // The same snapshot again changes nothing and forgets nothing.
        p.merge_text(&format!("{base:x} 20 long A.a(long)\n"));
        assert_eq!(checks.get(), 1);
        // New code over this range: asked again, and its new name is the one used.
        p.merge_text(&format!("{base:x} 10 StubRoutines (1)\n"));
        assert!(p.is_return(ra, &check));
        assert_eq!(checks.get(), 2);
        assert_eq!(p.code_at(base + 9).map(|c| c.kind), Some(JitKind::Stub));
    }

    #[test]
    fn only_words_after_a_call_are_return_addresses_into_new_code() {
        let base = std::hint::black_box(CODE.as_ptr()) as u64;
        // No map names it: new code, read from memory.
        let p = JitProcess::new(std::process::id(), None);
        assert!(!p.covers(base + 12));
        assert!(p.follows_call(base + 12));
        // A pointer past other code, or to data, is not.
        assert!(!p.follows_call(base + 16));
        assert!(!p.follows_call(base + 24));
        assert!(!p.follows_call(3));
    }
}
