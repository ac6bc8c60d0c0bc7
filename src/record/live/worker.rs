//! The window worker's naming: a window's frames named from the names found in
//! recent windows, kept by what names a frame (a module's code once for every
//! process that maps it, the kernel's once, JIT code per process) and dropped a
//! minute after their last use, so a host agent's names follow what runs now.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::naming::{self, Answer, NamingThread, Request};
use super::{Job, Window};
use crate::format::{Frame, FrameId, FrameKind, FrameSymbols, Mapping};
use crate::replay::bind::LoadedModule;
use crate::symbolize::frames::Namer;

/// A frame's name as far as the live namer knows it.
#[derive(Debug, Clone)]
enum Name {
    Known(FrameSymbols),
    /// Named from its module's symbol tables alone, the module's DWARF deferred: asked
    /// for again once the module has lived [`Worker::defer_windows`] windows.
    Provisional(FrameSymbols),
    /// Tried, no name (for JIT frames: the size of the perf map then).
    Unnamed(Option<u64>),
}

/// The worker's side: the namer (on a thread of its own, [`naming`]) and the names
/// found in recent windows, by what names a frame (a module's code is named once for
/// every process mapping it).
pub(super) struct Worker {
    /// The naming thread; the namer itself if no thread could be started (windows
    /// are then named inline, on time or not).
    naming: Result<NamingThread, Box<Namer>>,
    names: HashMap<NameKey, Cached>,
    /// Windows taken so far: a name unused for `keep` windows is dropped.
    generation: u64,
    /// Windows a name (and, for a host agent, a module) is kept after its last use:
    /// a minute's worth, at least 3.
    keep: u64,
    interval: Duration,
    pub(super) uids: HashMap<u32, crate::symbolize::perfmap::TargetUser>,
    /// Requests sent, by id: each wanted frame's key and module, by frame id.
    asked: HashMap<u64, HashMap<FrameId, Asked>>,
    next_id: u64,
    /// Windows ended since the namer was last told.
    windows_ended: u64,
    /// Frames handed on as `[name pending: FILE]` so far.
    pub(super) pending: u64,
    /// Windows a module is named from its symbol tables alone after the first
    /// window with a sample in it (0: never); see [`Seen`].
    defer_windows: u64,
    /// The programs sampled in recent windows (see [`SeenKey`]).
    seen: HashMap<SeenKey, Seen>,
}

/// A program as [`Worker::seen`] knows it: by its build-id, so that a module the
/// tables budget let go and read again (a new [`LoadedModule`]) is the program it
/// was; else by its module's address. A user who writes another program's build-id
/// into hers has her program's DWARF read as early as that one's (her frames are
/// still named from her file).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum SeenKey {
    BuildId(Vec<u8>),
    Module(usize),
}

/// When a module was first and last sampled. A host agent names a module's frames
/// from its symbol tables alone (cheap: no DWARF read and parsed) until it has
/// been sampled `defer_windows` windows after its first: a program that lives a
/// window or less (a build's tests, a compiler's passes) costs its symbol table
/// only, and one that lives on gets its inlined frames and lines from then on, its
/// earlier frames named again.
struct Seen {
    first: u64,
    used: u64,
    /// For a key by address: held so that the address is not another module's
    /// while kept, and gone with the module's last user.
    module: Option<Weak<LoadedModule>>,
}

/// A frame a request asked to name.
struct Asked {
    key: NameKey,
    module: Option<Weak<LoadedModule>>,
    /// JIT code's process (its perf map may grow), else None.
    jit: Option<u32>,
    /// Asked from its module's symbol tables alone (its name is provisional).
    deferred: bool,
}

/// What names a frame: its kind and, in a loaded module, the module and the address
/// in its file; else its process and address (kernel frames: process 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct NameKey {
    kind: FrameKind,
    pid: u32,
    addr: u64,
    module: usize,
}

/// A name and the last window that used it; the module's allocation is held (weakly:
/// not its tables, which the tables budget may let go) so that its address (part of
/// the key) is not another module's while the name is kept.
struct Cached {
    name: Name,
    used: u64,
    _module: Option<Weak<LoadedModule>>,
}

/// How long a name, or a module no process maps, is kept after its last use: a
/// program that runs again within it is not read and named again.
const KEEP_FOR: Duration = Duration::from_secs(60);

/// [`KEEP_FOR`] in windows of `interval`, at least 3.
pub(super) fn keep_windows(interval: Duration) -> u64 {
    (KEEP_FOR.as_millis() / interval.as_millis().max(1)).max(3) as u64
}

impl Worker {
    /// A worker naming with `namer` windows of `interval`, keeping parsed modules
    /// within `budget` bytes, naming a module from its symbol tables alone for
    /// `defer_windows` windows after the first that samples it (0: never).
    pub(super) fn new(
        mut namer: Namer,
        interval: Duration,
        budget: usize,
        defer_windows: u64,
    ) -> Worker {
        let keep = keep_windows(interval);
        // A module's symbols and DWARF, once parsed, name the next windows' new
        // frames too, for as long as names are kept, within `budget` bytes.
        namer.keep_parsed(budget, keep);
        Worker {
            naming: NamingThread::spawn(namer),
            names: HashMap::new(),
            generation: 0,
            keep,
            interval,
            uids: HashMap::new(),
            asked: HashMap::new(),
            next_id: 0,
            windows_ended: 0,
            pending: 0,
            defer_windows,
            seen: HashMap::new(),
        }
    }

    /// Names the window's frames and returns the window with its names, by the
    /// window's deadline: half a window after its end (the last window: whatever
    /// naming takes).
    pub(super) fn take(&mut self, job: Job) -> Window {
        if let Some(uids) = job.uids {
            self.uids = uids;
        }
        let mut window = job.window;
        let deadline = (!window.last).then(|| deadline(window.end_ns, self.interval));
        self.windows_ended += 1;
        let r = &window.recording;
        let mut names = self.name_all(&r.frames, &r.mappings, &job.modules, deadline);
        for fs in job.interp_names {
            if let Some(n) = names.get_mut(fs.frame as usize) {
                *n = Some(fs);
            }
        }
        self.age_namer();
        if super::super::events::debug_tables() {
            eprintln!(
                "profile: worker tables: names {}, pending frames {}",
                self.names.len(),
                self.pending
            );
        }
        window.recording.symbols = names;
        // Names not used for a few windows go: the host's programs come and go.
        let (now, keep) = (self.generation, self.keep);
        self.names.retain(|_, c| now.saturating_sub(c.used) < keep);
        self.seen.retain(|_, s| {
            now.saturating_sub(s.used) < keep
                && s.module.as_ref().is_none_or(|m| m.strong_count() > 0)
        });
        self.generation += 1;
        window
    }

    /// Tells the namer of the windows ended, when no request did (it ages what it
    /// keeps by them).
    fn age_namer(&mut self) {
        if self.windows_ended == 0 {
            return;
        }
        let ended = std::mem::take(&mut self.windows_ended);
        match &mut self.naming {
            Ok(t) if t.in_flight == 0 => {
                let empty = Request {
                    id: u64::MAX,
                    frames: Vec::new(),
                    mappings: Vec::new(),
                    modules: Vec::new(),
                    wanted: Vec::new(),
                    uids: HashMap::new(),
                    windows_ended: ended,
                    defer_dwarf: HashSet::new(),
                };
                if let Some(r) = t.send(empty) {
                    self.windows_ended = r.windows_ended;
                }
            }
            Ok(_) => self.windows_ended = ended,
            Err(namer) => {
                for _ in 0..ended {
                    namer.end_window();
                }
            }
        }
    }

    /// Names `frames` (with their `mappings` and those mappings' `modules`), from
    /// the names kept where it can (JIT frames without one are tried again when their
    /// process's perf map has grown), the others by the naming thread until
    /// `deadline` (None: however long it takes); the result is indexed by frame id,
    /// and a frame not named by the deadline is `[name pending: FILE]`.
    pub(super) fn name_all(
        &mut self,
        frames: &[Frame],
        mappings: &[Mapping],
        modules: &[Option<(Arc<LoadedModule>, u64)>],
        deadline: Option<Instant>,
    ) -> Vec<Option<FrameSymbols>> {
        // Answers that came since the last window name its frames too.
        while self.take_answers(Some(Instant::now()), None) {}
        let mut out = vec![None; frames.len()];
        let (wanted, defer_dwarf) = self.name_kept(frames, modules, &mut out);
        if wanted.is_empty() {
            return out;
        }
        let id = self.next_id;
        self.next_id += 1;
        let request = Request {
            id,
            frames: frames.to_vec(),
            mappings: mappings.to_vec(),
            modules: modules.to_vec(),
            wanted: wanted.iter().map(|a| a.0).collect(),
            uids: self.uids.clone(),
            windows_ended: std::mem::take(&mut self.windows_ended),
            defer_dwarf,
        };
        let keys: Vec<(FrameId, NameKey)> = wanted.iter().map(|a| (a.0, a.1.key)).collect();
        self.asked.insert(id, wanted.into_iter().collect());
        self.ask(request, deadline);
        for (frame, key) in keys {
            let i = frame as usize;
            out[i] = match self.names.get(&key) {
                Some(Cached {
                    name: Name::Known(fs) | Name::Provisional(fs),
                    ..
                }) => Some(FrameSymbols {
                    frame,
                    ..fs.clone()
                }),
                Some(_) => None,
                None => {
                    self.pending += 1;
                    let f = &frames[i];
                    let path = match f.mapping.and_then(|m| mappings.get(m as usize)) {
                        Some(m) => Some(m.path.as_str()),
                        None if !f.kind.is_user() => Some("kernel"),
                        None => None,
                    };
                    Some(naming::pending(frame, path))
                }
            };
        }
        out
    }

    /// Names into `out` the frames whose names are kept; returns the frames to ask
    /// the naming thread for, and the modules whose DWARF waits (decided once per
    /// module of the window).
    fn name_kept(
        &mut self,
        frames: &[Frame],
        modules: &[Option<(Arc<LoadedModule>, u64)>],
        out: &mut [Option<FrameSymbols>],
    ) -> (Vec<(FrameId, Asked)>, HashSet<usize>) {
        let mut map_sizes: HashMap<u32, Option<u64>> = HashMap::new();
        let mut wanted: Vec<(FrameId, Asked)> = Vec::new();
        let mut defer_dwarf = HashSet::new();
        let mut by_module: HashMap<usize, bool> = HashMap::new();
        for (i, f) in frames.iter().enumerate() {
            let (key, module) = name_key(f, modules);
            let deferred = match &module {
                Some(m) => *by_module
                    .entry(key.module)
                    .or_insert_with(|| self.defers(m)),
                None => false,
            };
            if deferred {
                defer_dwarf.insert(key.module);
            }
            let asked = Asked {
                key,
                module: module.as_ref().map(Arc::downgrade),
                jit: is_jit(f, modules).then_some(f.pid),
                deferred,
            };
            let Some(c) = self.names.get_mut(&key) else {
                wanted.push((i as FrameId, asked));
                continue;
            };
            c.used = self.generation;
            let again = match &c.name {
                Name::Known(fs) | Name::Provisional(fs) => {
                    out[i] = Some(FrameSymbols {
                        frame: i as FrameId,
                        ..fs.clone()
                    });
                    // A provisional name's module has lived long enough: named
                    // again, with its DWARF.
                    matches!(c.name, Name::Provisional(_)) && !deferred
                }
                Name::Unnamed(Some(size)) => {
                    let now = *map_sizes
                        .entry(f.pid)
                        .or_insert_with(|| perf_map_size(f.pid));
                    now.is_some_and(|n| n != *size)
                }
                Name::Unnamed(None) => false,
            };
            if again {
                wanted.push((i as FrameId, asked));
            }
        }
        (wanted, defer_dwarf)
    }

    /// Sends `request` to the naming thread (or names it here when there is none),
    /// once the request before it is answered, by `deadline`; then takes answers
    /// until it is answered or the deadline passes. A request not sent is forgotten:
    /// its frames are asked for again by a later window.
    fn ask(&mut self, request: Request, deadline: Option<Instant>) {
        let id = request.id;
        let mut unsent = Some(request);
        while let Some(r) = unsent.take() {
            match &mut self.naming {
                Ok(thread) => {
                    if let Some(r) = thread.send(r) {
                        unsent = Some(r);
                        if !self.take_answers(deadline, None) {
                            break;
                        }
                    }
                }
                Err(namer) => {
                    for _ in 0..r.windows_ended {
                        namer.end_window();
                    }
                    let named = naming::name(namer, &r, &r.wanted);
                    self.answered(Answer {
                        id,
                        covered: r.wanted.clone(),
                        named,
                        done: true,
                    });
                }
            }
        }
        match unsent {
            Some(r) => {
                self.windows_ended += r.windows_ended;
                self.asked.remove(&id);
            }
            None => {
                self.take_answers(deadline, Some(id));
            }
        }
    }

    /// Takes answers until request `until` is answered whole (None: one part of
    /// any) or `deadline` passes (None: however long it takes); false when none came.
    fn take_answers(&mut self, deadline: Option<Instant>, until: Option<u64>) -> bool {
        loop {
            let Ok(thread) = &mut self.naming else {
                return false;
            };
            let Some(a) = thread.answer(deadline) else {
                return false;
            };
            let (id, done) = (a.id, a.done);
            self.answered(a);
            if until.is_none_or(|u| u == id && done) {
                return true;
            }
        }
    }

    /// Files part of a request's names: each frame it covers gets its name, or is
    /// known to have none (JIT code: until its process's perf map grows).
    fn answered(&mut self, a: Answer) {
        let Some(asked) = self.asked.get_mut(&a.id) else {
            return;
        };
        let generation = self.generation;
        let mut map_sizes: HashMap<u32, Option<u64>> = HashMap::new();
        let mut keys: HashMap<FrameId, (NameKey, bool)> = HashMap::with_capacity(a.covered.len());
        let mut again = Vec::new();
        for frame in &a.covered {
            let Some(q) = asked.remove(frame) else {
                continue;
            };
            // A provisional name named again stays until the new one is in.
            if !q.deferred
                && let Some(Cached {
                    name: Name::Provisional(_),
                    ..
                }) = self.names.get(&q.key)
            {
                keys.insert(*frame, (q.key, false));
                again.push(q.key);
                continue;
            }
            let name = Name::Unnamed(q.jit.map(|pid| {
                map_sizes
                    .entry(pid)
                    .or_insert_with(|| perf_map_size(pid))
                    .unwrap_or(0)
            }));
            keys.insert(*frame, (q.key, q.deferred));
            self.names.insert(
                q.key,
                Cached {
                    name,
                    used: generation,
                    _module: q.module,
                },
            );
        }
        if a.done {
            self.asked.remove(&a.id);
        }
        for fs in a.named {
            let Some(&(key, deferred)) = keys.get(&fs.frame) else {
                continue;
            };
            if let Some(c) = self.names.get_mut(&key) {
                c.name = if deferred {
                    Name::Provisional(fs)
                } else {
                    Name::Known(fs)
                };
            }
        }
        // Named again without a better name: the symbol's is final.
        for key in again {
            if let Some(c) = self.names.get_mut(&key)
                && let Name::Provisional(fs) = &c.name
            {
                c.name = Name::Known(fs.clone());
            }
        }
    }

    /// Whether `module`'s frames are named from its symbol tables alone in this
    /// window (see [`Seen`]); notes it sampled now.
    fn defers(&mut self, module: &Arc<LoadedModule>) -> bool {
        if self.defer_windows == 0 {
            return false;
        }
        let now = self.generation;
        let (key, weak) = match &module.info.build_id {
            Some(id) => (SeenKey::BuildId(id.clone()), None),
            None => (
                SeenKey::Module(Arc::as_ptr(module) as usize),
                Some(Arc::downgrade(module)),
            ),
        };
        let seen = self.seen.entry(key).or_insert_with(|| Seen {
            first: now,
            used: now,
            module: weak,
        });
        seen.used = now;
        now < seen.first + self.defer_windows
    }
}

/// When a window ending at `end_ns` (CLOCK_MONOTONIC) is handed on at the latest:
/// half a window after its end, so that its push starts within one window of it.
fn deadline(end_ns: u64, interval: Duration) -> Instant {
    let now_ns = super::super::sys::monotonic_ns();
    let half = u64::try_from(interval.as_nanos() / 2).unwrap_or(u64::MAX);
    let due = end_ns.saturating_add(half);
    Instant::now() + Duration::from_nanos(due.saturating_sub(now_ns))
}

/// What names `f` (see [`NameKey`]), and the module it is in.
fn name_key(
    f: &Frame,
    modules: &[Option<(Arc<LoadedModule>, u64)>],
) -> (NameKey, Option<Arc<LoadedModule>>) {
    let loaded = f
        .mapping
        .filter(|_| f.kind.is_user())
        .and_then(|m| modules.get(m as usize)?.as_ref());
    match loaded {
        Some((module, bias)) => (
            NameKey {
                kind: f.kind,
                pid: 0,
                addr: f.kind.lookup_address(f.addr).wrapping_sub(*bias),
                module: Arc::as_ptr(module) as usize,
            },
            Some(Arc::clone(module)),
        ),
        None => (
            NameKey {
                kind: f.kind,
                pid: f.pid,
                addr: f.addr,
                module: 0,
            },
            None,
        ),
    }
}

fn is_jit(f: &Frame, modules: &[Option<(Arc<LoadedModule>, u64)>]) -> bool {
    f.kind.is_user()
        && f.kind != FrameKind::Truncated
        && f.mapping
            .and_then(|m| modules.get(m as usize)?.as_ref())
            .is_none()
}

/// The size of a process's perf map, as the target sees its /tmp.
fn perf_map_size(pid: u32) -> Option<u64> {
    std::fs::metadata(format!("/proc/{pid}/root/tmp/perf-{pid}.map"))
        .or_else(|_| std::fs::metadata(format!("/tmp/perf-{pid}.map")))
        .ok()
        .map(|m| m.len())
}
