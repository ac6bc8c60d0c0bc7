//! JavaScript frames in a sample's stack. V8 keeps frame pointers in all the code it
//! generates, so the native unwind already steps through JavaScript frames; what it
//! cannot say is which function each ran. A JavaScript frame keeps its context and
//! its function at fixed places below its frame pointer (the binary says where:
//! [`super::Layout`]); a typed frame (an entry, exit, stub or builtin frame) keeps a
//! marker where a JavaScript frame keeps its context. [`V8Frames::expand`] reads those
//! slots in the sample's stack copy for each frame whose pc is in JIT code (optimized,
//! baseline) or in V8's builtins (the interpreter: there the frame must also hold its
//! bytecode array), follows the function to its `SharedFunctionInfo`, its name and its
//! script, each object checked, and puts an interpreted frame in place of the native
//! one, whose id stands for (function, script).
//!
//! A JIT frame that is not a typed frame and whose function does not check out is
//! marked `[js: unreadable]`, never named from what happens to be there. A frame in
//! the builtins that is not an interpreter frame (a builtin written in JavaScript
//! such as `Array.prototype.sort`, or a builtin without a frame of its own) keeps its
//! native name.

use std::collections::HashMap;
use std::sync::Arc;

use super::heap::{Function, Heap};
use super::layout::{Layout, V8Error};
use crate::elf::Image;
use crate::format::{Frame, FrameKind, SymbolLine, SymbolSource};
use crate::interp::budget::{Lru, Meter, Metered, Pool, SampleBudget, Trips};
use crate::interp::{Budgets, Memory, Overlay, Pages};
use crate::unwind::{FrameAddress, FrameRegisters};

mod leaf;
mod notes;

/// The id of the `[js: unreadable]` frame of every Node process.
pub const UNREADABLE_ID: u64 = 0;
/// Its name.
pub const UNREADABLE_NAME: &str = "[js: unreadable]";
/// The id of the frame of a function read when the names budget was spent.
pub const OVER_BUDGET_ID: u64 = 1;
/// Its name.
pub const OVER_BUDGET_NAME: &str = "[js: names budget spent]";
/// Mappings of the builtins kept per process (the binary's, V8's copy near its JIT
/// code; a process that maps the binary over and over gets no more).
const MAX_COPIES: usize = 4;
/// Bytes a cache entry and a name weigh besides their text.
const ENTRY_BYTES: usize = 96;
/// Heap pages (4 KiB each) a process's reader keeps between the samples of one round
/// of the recorder, at most: past it, they go after the sample that read them.
const KEPT_PAGES: usize = 64;

/// Counts for the summary, per process and in all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct V8Stats {
    /// JavaScript frames named.
    pub named: u64,
    /// JIT frames marked `[js: unreadable]`.
    pub unreadable: u64,
    /// Frames marked because the names budget was spent.
    pub over_budget: u64,
}

/// What is JIT code (anonymous executable memory), for [`V8Frames::expand`].
#[derive(Clone, Copy)]
pub struct InJit<'a> {
    /// Whether a frame is.
    pub frame: &'a dyn Fn(&Frame) -> bool,
    /// Whether an address is.
    pub at: &'a dyn Fn(u64) -> bool,
}

/// One Node process.
struct Node {
    /// Its memory, each heap page read once in a round of the recorder
    /// ([`V8Frames::handled`]).
    mem: Pages<Target>,
    layout: Arc<Layout>,
    /// The binary's path, for the summary.
    path: String,
    /// Where the builtins are in the process, if the binary says: where the binary
    /// is mapped, and where V8 mapped them again near its JIT code (so that JIT code
    /// reaches them with short calls).
    builtins: Vec<(u64, u64)>,
    named: Named,
}

/// What was named in one process.
struct Named {
    /// (SFI, its name word, its script word, [`Heap::name_check`] of its name) →
    /// frame id.
    cache: Lru<(u64, u64, u64, u64), u64>,
    meter: Meter,
    trips: Trips,
    /// (function, script) → frame id, and back.
    ids: HashMap<Function, u64>,
    names: HashMap<u64, Function>,
    next_id: u64,
    stats: V8Stats,
}

/// A binary whose V8 description could not be used.
struct Refused {
    path: String,
    why: V8Error,
}

/// The JavaScript frames of every Node process recorded.
pub struct V8Frames {
    nodes: HashMap<u32, Node>,
    refused: HashMap<u32, Refused>,
    /// Each binary's layout, by path and size: read once, shared by the processes
    /// that run it.
    layouts: HashMap<(String, usize), Result<Arc<Layout>, V8Error>>,
    /// Where layouts are kept between recordings ([`super::cache`]).
    cache_dir: Option<std::path::PathBuf>,
    budgets: Budgets,
    pool: Pool,
    /// What was done, in all.
    pub stats: V8Stats,
}

impl Default for V8Frames {
    fn default() -> V8Frames {
        V8Frames {
            nodes: HashMap::new(),
            refused: HashMap::new(),
            layouts: HashMap::new(),
            cache_dir: super::cache::default_dir(),
            budgets: Budgets::default(),
            pool: Pool::default(),
            stats: V8Stats::default(),
        }
    }
}

impl std::fmt::Debug for V8Frames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("V8Frames")
            .field("nodes", &self.nodes.len())
            .field("stats", &self.stats)
            .finish()
    }
}

impl V8Frames {
    /// No process yet, within `budgets`.
    pub fn new(budgets: Budgets) -> V8Frames {
        V8Frames {
            budgets,
            ..V8Frames::default()
        }
    }

    /// Process `pid` mapped `path` (a Node binary, read as `image`) at load bias
    /// `bias`, over addresses `range`; `mem` reads the process. A binary without a
    /// usable V8 description is remembered for the summary.
    pub fn node_mapped(
        &mut self,
        pid: u32,
        (path, image): (&str, &Image),
        (bias, range): (u64, (u64, u64)),
        mem: impl FnOnce() -> Option<Box<dyn Memory + Send>>,
    ) {
        if let Some(n) = self.nodes.get_mut(&pid)
            && n.path == path
        {
            // Another mapping of the same binary: V8's copy of its builtins.
            n.add_builtins(bias, range);
            return;
        }
        let bytes: &[u8] = (**image).as_ref();
        let layout = self
            .layouts
            .entry((path.to_owned(), bytes.len()))
            .or_insert_with(|| {
                let read = || {
                    // The names a recorder's image left on disk, read for the scan.
                    let named = image.with_names();
                    let named = named.as_ref().unwrap_or(image);
                    let read_at = |off: u64, buf: &mut [u8]| named.read_at(off, buf);
                    Layout::from_file((**named).as_ref(), &read_at)
                };
                let identity = image.file_identity();
                let file = (bytes, identity.as_deref());
                super::cache::layout(self.cache_dir.as_deref(), file, read).map(Arc::new)
            })
            .clone();
        self.node_found(pid, path, layout, (bias, range), mem);
    }

    /// As [`V8Frames::node_mapped`], with the binary's layout read already (or why it
    /// could not be).
    pub fn node_found(
        &mut self,
        pid: u32,
        path: &str,
        layout: Result<Arc<Layout>, V8Error>,
        (bias, range): (u64, (u64, u64)),
        mem: impl FnOnce() -> Option<Box<dyn Memory + Send>>,
    ) {
        let layout = match layout {
            Ok(l) => l,
            Err(why) => {
                let path = path.to_owned();
                self.refused.insert(pid, Refused { path, why });
                return;
            }
        };
        let Some(mem) = mem() else { return };
        let (ids, names, next_id) = match self.nodes.remove(&pid) {
            // An exec into another Node: names stay, ids keep counting.
            Some(old) => (old.named.ids, old.named.names, old.named.next_id),
            None => (HashMap::new(), HashMap::new(), OVER_BUDGET_ID + 1),
        };
        self.refused.remove(&pid);
        let mut node = Node {
            mem: Pages::new(Target(mem)),
            layout,
            path: path.to_owned(),
            builtins: Vec::new(),
            named: Named {
                cache: Lru::default(),
                meter: Meter::new(self.pool.clone(), self.budgets),
                trips: Trips::default(),
                ids,
                names,
                next_id,
                stats: V8Stats::default(),
            },
        };
        node.add_builtins(bias, range);
        self.nodes.insert(pid, node);
    }

    /// Whether `pid` is a Node process whose frames are read (the stack builder then
    /// keeps each frame's registers).
    pub fn wants(&self, pid: u32) -> bool {
        self.nodes.contains_key(&pid)
    }

    /// The bytes every process's reader keeps now.
    pub fn kept_bytes(&self) -> usize {
        self.pool.kept()
    }

    /// Turns the JavaScript frames among `frames` (the user frames of a sample of
    /// `pid`, leaf first, one per `addrs` and `regs` entry) into interpreted frames.
    /// `sp` and `stack` are the sample's stack copy; `jit` says what is JIT code.
    /// Returns the frame of the JavaScript function that called a frameless builtin
    /// sampled at the leaf, when the unwind stepped over it (module `leaf`): it goes
    /// just above the leaf.
    pub fn expand(
        &mut self,
        pid: u32,
        (sp, stack): (u64, &[u8]),
        (addrs, regs): (&[FrameAddress], &[FrameRegisters]),
        jit: InJit<'_>,
        frames: &mut [Frame],
    ) -> Option<Frame> {
        let node = self.nodes.get_mut(&pid)?;
        let Node {
            mem: rest,
            layout,
            builtins,
            named,
            ..
        } = node;
        let before = named.stats;
        let budget = SampleBudget::new(&self.budgets);
        // A sample's functions share maps and often pages, and the samples of one
        // round share most of their functions: each page is read once a round.
        let overlay = Overlay {
            sp,
            stack,
            rest: Paged {
                pages: &*rest,
                inner: &*rest.inner().0,
            },
        };
        let mem = Metered::new(overlay, &budget);
        let heap = Heap { layout, mem: &mem };
        let code = leaf::Code {
            builtins,
            jit_at: jit.at,
        };
        let mut above_leaf = None;
        for (i, ((a, r), f)) in addrs.iter().zip(regs).zip(frames.iter_mut()).enumerate() {
            if !f.kind.is_user() {
                continue;
            }
            let pc = a.lookup_address();
            let in_builtins = builtins.iter().any(|(lo, hi)| (*lo..*hi).contains(&pc));
            let place = if in_builtins {
                Place::Builtins
            } else if (jit.frame)(f) {
                Place::Jit
            } else {
                continue;
            };
            let next = if i == 0 { regs.get(1) } else { None };
            match read_frame(&heap, named, place, r, (next, &code)) {
                Read::Native => {}
                Read::Function(id) => named.mark(f, pid, id),
                Read::Leaf(caller) => above_leaf = caller.map(|id| named.frame(pid, id)),
            }
        }
        named.trips.spent(budget.spent());
        if rest.cached() > KEPT_PAGES {
            rest.clear();
        }
        let after = named.stats;
        self.stats.named += after.named - before.named;
        self.stats.unreadable += after.unreadable - before.unreadable;
        self.stats.over_budget += after.over_budget - before.over_budget;
        above_leaf
    }

    /// The samples of a round of the recorder were handled: the heap pages read for
    /// them go, so that the next round's samples read the heap as it is then. The
    /// samples of one round were drained together and their heaps are read within
    /// moments of each other, so one read of a page serves them all.
    pub fn handled(&mut self) {
        for node in self.nodes.values() {
            node.mem.clear();
        }
    }

    /// The names of frame `id` of `pid`.
    pub fn names(&self, pid: u32, id: u64) -> Option<(SymbolSource, Vec<SymbolLine>)> {
        let node = self.nodes.get(&pid)?;
        let (function, file) = match id {
            UNREADABLE_ID => (UNREADABLE_NAME.to_owned(), None),
            OVER_BUDGET_ID => (OVER_BUDGET_NAME.to_owned(), None),
            _ => {
                let f = node.named.names.get(&id)?;
                (f.name.clone(), f.script.clone())
            }
        };
        let line = SymbolLine {
            function,
            file,
            line: None,
            inlined: false,
        };
        Some((SymbolSource::Jit, vec![line]))
    }
}

/// Where a frame's code is: V8's builtins (where the interpreter runs) or JIT code.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Builtins,
    Jit,
}

/// What the walker makes of one frame in the builtins or JIT code.
enum Read {
    /// No JavaScript frame (a typed frame, a builtin that is no interpreter frame,
    /// a frame without a frame pointer): left as the native unwind named it.
    Native,
    /// A JavaScript frame: its function's id ([`UNREADABLE_ID`] when it does not
    /// check out).
    Function(u64),
    /// A frameless builtin at the leaf: the id of its JavaScript caller, when the
    /// unwind stepped over it and a checked scan found it ([`leaf`]).
    Leaf(Option<u64>),
}

/// Reads the frame whose registers are `r`, its code at `place`; `next` is the
/// frame above it when it is the leaf, where a frameless builtin's caller may be.
fn read_frame<M: Memory + ?Sized>(
    heap: &Heap<'_, M>,
    named: &mut Named,
    place: Place,
    r: &FrameRegisters,
    (next, code): (Option<&FrameRegisters>, &leaf::Code<'_>),
) -> Read {
    let Some(fp) = r.fp else {
        return Read::Native;
    };
    let layout = heap.layout;
    let s = &layout.slots;
    let slot = |off: i64| heap.mem.u64_at(fp.checked_add_signed(off)?);
    let Some(context) = slot(s.context_or_marker) else {
        return match place {
            Place::Jit => Read::Function(UNREADABLE_ID),
            Place::Builtins => Read::Native,
        };
    };
    if layout.is_marker(context) {
        return Read::Native;
    }
    // In the builtins, only the interpreter's frames: they hold their bytecode
    // array and offset.
    if place == Place::Builtins {
        let interpreted = slot(s.bytecode_array).is_some_and(|b| heap.is_bytecode_array(b))
            && slot(s.bytecode_offset).is_some_and(|o| layout.tagging.smi(o).is_some());
        if !interpreted {
            // A frameless builtin at the leaf, called from optimized or baseline
            // code whose frame the unwind stepped over.
            return match next {
                Some(next) => Read::Leaf(
                    leaf::frameless_caller(heap, code, r, next)
                        .and_then(|function| named.function_id(heap, function)),
                ),
                None => Read::Native,
            };
        }
    }
    let id = slot(s.function)
        .filter(|_| layout.tagging.is_heap_object(context))
        .and_then(|function| named.function_id(heap, function));
    Read::Function(id.unwrap_or(UNREADABLE_ID))
}

/// A process's memory read a page at a time for one sample, or as asked where a
/// whole page cannot be read (the end of a mapping, a snapshot's small regions).
struct Paged<'a, M: ?Sized> {
    pages: &'a Pages<Target>,
    inner: &'a M,
}

/// A Node process's memory, as its reader keeps it.
struct Target(Box<dyn Memory + Send>);

impl Memory for Target {
    fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        self.0.read(addr, buf)
    }

    fn read_pages(&self, addrs: &[u64], size: usize) -> Vec<Option<Box<[u8]>>> {
        self.0.read_pages(addrs, size)
    }
}

impl<M: Memory + ?Sized> Memory for Paged<'_, M> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        self.pages.read(addr, buf) || self.inner.read(addr, buf)
    }
}

impl Node {
    /// The builtins in the mapping of the binary over `range` at load bias `bias`, if
    /// it holds them.
    fn add_builtins(&mut self, bias: u64, (start, end): (u64, u64)) {
        let Some((lo, hi)) = self.layout.builtins else {
            return;
        };
        let (lo, hi) = (
            lo.wrapping_add(bias).max(start),
            hi.wrapping_add(bias).min(end),
        );
        if lo < hi && !self.builtins.contains(&(lo, hi)) && self.builtins.len() < MAX_COPIES {
            self.builtins.push((lo, hi));
        }
    }
}

impl Named {
    /// Makes `f` the interpreted frame `id` and counts it.
    fn mark(&mut self, f: &mut Frame, pid: u32, id: u64) {
        *f = self.frame(pid, id);
    }

    /// The interpreted frame `id`, counted.
    fn frame(&mut self, pid: u32, id: u64) -> Frame {
        match id {
            UNREADABLE_ID => self.stats.unreadable += 1,
            OVER_BUDGET_ID => self.stats.over_budget += 1,
            _ => self.stats.named += 1,
        }
        Frame {
            kind: FrameKind::Interpreted,
            pid,
            addr: id,
            mapping: None,
        }
    }

    /// The frame id of JavaScript function `function` (tagged), None if it does not
    /// check out.
    fn function_id<M: Memory + ?Sized>(
        &mut self,
        heap: &Heap<'_, M>,
        function: u64,
    ) -> Option<u64> {
        let sfi = heap.shared_of(function)?;
        let (name, script) = heap.identity(sfi)?;
        // Checked on every lookup, so a cached name is never given to another
        // function a collection moved to the same addresses.
        let key = (sfi, name, script, heap.name_check(name)?);
        if let Some(&id) = self.cache.get(&key) {
            return Some(id);
        }
        let f = heap.function((name, script))?;
        let id = match self.ids.get(&f) {
            Some(&id) => id,
            None => {
                let bytes = ENTRY_BYTES + f.name.len() + f.script.as_ref().map_or(0, String::len);
                if !self.meter.fits(bytes) {
                    self.trips.names += 1;
                    return Some(OVER_BUDGET_ID);
                }
                self.meter.add(bytes);
                let id = self.next_id;
                self.next_id += 1;
                self.ids.insert(f.clone(), id);
                self.names.insert(id, f);
                id
            }
        };
        self.cache.insert(&mut self.meter, key, id, ENTRY_BYTES);
        let evicted = self.cache.evict(&mut self.meter, |_| {});
        self.trips.evicted += evicted as u64;
        Some(id)
    }
}
