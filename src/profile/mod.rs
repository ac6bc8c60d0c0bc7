//! The in-memory profile every output reads: samples with their thread, time, CPU
//! weight and a root-first stack of display frames. Built once from a
//! [`Recording`](crate::format::Recording): frames get their stored names (inlined
//! functions expanded into frames of their own), or `module+0xoffset` when no name is
//! known, and threads get the name they had when each sample was taken.
//!
//! Each stack exists at two levels: [`Profile::stacks`] lists functions (what folded
//! stacks, flame graphs and tables show) and [`Profile::stack_locations`] lists the
//! sampled addresses ([`Location`]s, each expanding to one or more functions, with
//! the [`Module`] it was in), which exports such as pprof need. [`filter`] narrows a
//! profile once for every output.

pub mod classify;
pub mod filter;

use std::collections::HashMap;

use crate::format::{
    FrameKind, FrameSymbols, Meta, OffCpu, Recording, StackId, Summary, SymbolSource, ThreadEvent,
    Truncation,
};

pub use crate::format::ThreadState;

/// Declares an index into one table of the [`Profile`], a type of its own so that
/// indices into different tables cannot be mixed.
macro_rules! index_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u32);

        impl $name {
            /// The index, for slices.
            pub fn index(self) -> usize {
                self.0 as usize
            }

            /// The index of the next entry of a table `len` long.
            ///
            /// # Panics
            /// If the table already holds 2^32 entries (a model of that size does not
            /// fit in memory).
            pub fn next(len: usize) -> Self {
                $name(u32::try_from(len).expect("a profile table holds fewer than 2^32 entries"))
            }
        }

        impl TableIndex for $name {
            fn index(self) -> usize {
                self.0 as usize
            }
            fn next(len: usize) -> Self {
                $name::next(len)
            }
        }
    };
}

/// What the index types have in common, for code generic over tables.
pub(crate) trait TableIndex: Copy {
    fn index(self) -> usize;
    fn next(len: usize) -> Self;
}

index_type!(
    /// Index into [`Profile::threads`].
    ThreadIndex
);
index_type!(
    /// Index into [`Profile::functions`].
    FunctionIndex
);
index_type!(
    /// Index into [`Profile::stacks`] and [`Profile::stack_locations`].
    StackIndex
);
index_type!(
    /// Index into [`Profile::locations`].
    LocationIndex
);
index_type!(
    /// Index into [`Profile::modules`].
    ModuleIndex
);

/// What kind of code a display frame is; outputs colour by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FrameClass {
    /// Compiled code of a mapped file.
    Native,
    /// Inlined into the frame below it (its caller).
    Inlined,
    /// Kernel code.
    Kernel,
    /// JIT-compiled or interpreted code named by a perf map.
    Jit,
    /// A stack marker such as the truncation frame, or a thread root.
    Marker,
    /// The `[off-cpu: STATE]` frame that ends an off-CPU stack.
    OffCpu(ThreadState),
}

impl FrameClass {
    /// The suffix inferno's flame graphs colour by (`_[k]` kernel, `_[j]` JIT,
    /// `_[i]` inlined).
    pub fn folded_suffix(self) -> &'static str {
        match self {
            FrameClass::Kernel => "_[k]",
            FrameClass::Jit => "_[j]",
            FrameClass::Inlined => "_[i]",
            FrameClass::Native | FrameClass::Marker | FrameClass::OffCpu(_) => "",
        }
    }
}

/// One function as outputs show it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Function {
    /// The name shown (with `:LINE` when lines are told apart).
    pub name: String,
    /// The kind of code.
    pub class: FrameClass,
    /// Source file, when known.
    pub file: Option<String>,
    /// Source line, when lines are told apart and it is known.
    pub line: Option<u32>,
}

/// A thread under one name (a renamed thread appears once per name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thread {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The thread's name.
    pub name: String,
    /// The process's name (its main thread's name) when the samples were taken.
    pub process: String,
}

/// One sampled address and the functions it stands for: the function that was
/// compiled, then each function inlined into the one before it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Location {
    /// The address names were looked up at (a return address's call instruction);
    /// 0 for markers.
    pub address: u64,
    /// The module the address is in.
    pub module: Option<ModuleIndex>,
    /// The functions, outermost (the function that was compiled) first.
    pub functions: Vec<FunctionIndex>,
}

/// A mapped file (or anonymous code) that sampled addresses fell in.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Module {
    /// First address of the mapping.
    pub start: u64,
    /// Address just past the mapping.
    pub end: u64,
    /// File offset mapped at `start`.
    pub file_offset: u64,
    /// Path as the target saw it (`[vdso]`, `//anon`, empty for anonymous).
    pub path: String,
    /// GNU build id of the file, when it has one.
    pub build_id: Option<Vec<u8>>,
}

/// One sample in the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProfileSample {
    /// Nanoseconds since the start of the recording.
    pub time: u64,
    /// The thread it was taken in.
    pub thread: ThreadIndex,
    /// CPU time the sample stands for, in nanoseconds.
    pub weight: u64,
    /// Its stack.
    pub stack: StackIndex,
    /// Running for CPU samples; the off-CPU state for an off-CPU interval's stack,
    /// whose weight is then off-CPU nanoseconds (wall time).
    pub state: ThreadState,
}

/// One interval a thread spent off the CPU, for outputs that show time (the
/// timeline). Their time-weighted stacks are [`ProfileSample`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval {
    /// The thread.
    pub thread: ThreadIndex,
    /// Nanoseconds since the start of the recording when it left the CPU.
    pub time: u64,
    /// Nanoseconds until it ran again (or the thread or the recording ended).
    pub duration: u64,
    /// Why it was off the CPU.
    pub state: ThreadState,
    /// Its stack (ending in the `[off-cpu: STATE]` frame) when it has one.
    pub stack: Option<StackIndex>,
}

/// The name of the frame that ends an off-CPU stack: `[off-cpu: STATE]`.
pub fn off_cpu_frame_name(state: ThreadState) -> String {
    format!("[off-cpu: {}]", state.name())
}

/// How to build the model.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct ProfileOptions {
    /// Tell functions apart by source line (`name:line`). Default is false.
    pub lines: bool,
}

/// The profile every output reads.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    /// How the recording was made.
    pub meta: Meta,
    /// Totals of a recording that ended normally.
    pub summary: Option<Summary>,
    /// Samples the kernel dropped (PERF_RECORD_LOST).
    pub lost: u64,
    /// What was lost when the recording was cut short.
    pub damage: Option<String>,
    /// Threads, indexed by [`ThreadIndex`].
    pub threads: Vec<Thread>,
    /// Functions, indexed by [`FunctionIndex`].
    pub functions: Vec<Function>,
    /// Stacks as function indices, root first. Two stacks may list the same
    /// functions when their addresses differ (or the same locations, in a file
    /// that repeats a stack node).
    pub stacks: Vec<Vec<FunctionIndex>>,
    /// The same stacks as location indices, root first: concatenating their
    /// locations' functions gives the entry of [`Profile::stacks`] at the same index.
    pub stack_locations: Vec<Vec<LocationIndex>>,
    /// Sampled addresses, indexed by [`LocationIndex`].
    pub locations: Vec<Location>,
    /// Mapped files, indexed by [`ModuleIndex`].
    pub modules: Vec<Module>,
    /// Samples in the order they were recorded.
    pub samples: Vec<ProfileSample>,
    /// Every off-CPU interval (`record --off-cpu`), in time order; empty otherwise.
    pub intervals: Vec<Interval>,
    /// Each thread's life within the recording, nanoseconds from its start: from its
    /// creation (or the attach) to its exit (or the end). Indexed like `threads`.
    pub spans: Vec<(u64, u64)>,
}

impl Profile {
    /// Builds the model from a recording.
    pub fn from_recording(rec: &Recording, opts: ProfileOptions) -> Profile {
        let mut b = Builder {
            rec,
            opts,
            functions: Vec::new(),
            function_ids: HashMap::new(),
            stacks: Vec::new(),
            stack_locations: Vec::new(),
            locations: Vec::new(),
            location_ids: HashMap::new(),
            modules: Vec::new(),
            module_ids: HashMap::new(),
            by_leaf: vec![None; rec.nodes.len() + 1],
            off_cpu_ids: HashMap::new(),
            state_locations: HashMap::new(),
        };
        let names = ThreadNames::new(&rec.thread_events);
        let mut threads = ThreadTable::default();
        let start = rec.meta.start_time_ns;
        let mut samples = Vec::with_capacity(rec.samples.len() + rec.off_cpu.len());
        for s in &rec.samples {
            let thread = threads.get(&names, s.pid, s.tid, s.time);
            let stack = b.stack(s.stack);
            samples.push(ProfileSample {
                time: s.time.saturating_sub(start),
                thread,
                weight: s.weight,
                stack,
                state: ThreadState::Running,
            });
        }
        // Stacks taken at a bounded rate stand for the intervals without one: per
        // thread and state, scale the stacked intervals' weights so that they add up
        // to the state's measured time (docs/off-cpu.md).
        let class = |o: &OffCpu| (o.pid, o.tid, o.state);
        let mut measured: HashMap<(u32, u32, ThreadState), (u64, u64)> = HashMap::new();
        for o in &rec.off_cpu {
            let e = measured.entry(class(o)).or_default();
            e.0 = e.0.saturating_add(o.duration);
            if o.stack.is_some() {
                e.1 = e.1.saturating_add(o.weight);
            }
        }
        let mut intervals = Vec::with_capacity(rec.off_cpu.len());
        for o in &rec.off_cpu {
            let thread = threads.get(&names, o.pid, o.tid, o.time);
            let mut state = o.state;
            let kernel_frames = rec
                .stack_frames(o.stack)
                .any(|f| rec.frames[f as usize].kind == FrameKind::Kernel);
            if state == ThreadState::Other && o.stack.is_some() && !kernel_frames {
                // A stack without kernel frames: the user-space syscall wrapper
                // names the wait.
                state = b.user_state(o.stack);
            }
            let stack = o.stack.map(|leaf| b.off_cpu_stack(leaf, state));
            let time = o.time.saturating_sub(start);
            let (total, stacked) = measured[&class(o)];
            let weight = if stacked == 0 {
                // No stack in this state: each interval counts its own time.
                o.duration
            } else if o.stack.is_some() {
                (u128::from(o.weight) * u128::from(total) / u128::from(stacked)) as u64
            } else {
                0
            };
            if weight > 0 {
                // An interval without a stack still counts: its time goes under the
                // state frame alone.
                let stack = stack.unwrap_or_else(|| b.off_cpu_stack_none(state));
                samples.push(ProfileSample {
                    time,
                    thread,
                    weight,
                    stack,
                    state,
                });
            }
            intervals.push(Interval {
                thread,
                time,
                duration: o.duration,
                state,
                stack,
            });
        }
        if !intervals.is_empty() {
            samples.sort_by_key(|s| s.time);
            intervals.sort_by_key(|i| i.time);
        }
        let spans = threads.spans(rec);
        let threads = threads.threads;
        Profile {
            meta: rec.meta.clone(),
            summary: rec.summary.clone(),
            lost: rec.lost,
            damage: rec.damage.clone(),
            threads,
            functions: b.functions,
            stacks: b.stacks,
            stack_locations: b.stack_locations,
            locations: b.locations,
            modules: b.modules,
            samples,
            intervals,
            spans,
        }
    }

    /// Nanoseconds per state for each thread (indexed like `threads`), from the
    /// samples: CPU samples count as running, off-CPU stacks as their state.
    pub fn thread_states(&self) -> Vec<[u64; 6]> {
        let mut v = vec![[0u64; 6]; self.threads.len()];
        for s in &self.samples {
            let e = &mut v[s.thread.index()][s.state as usize];
            *e = e.saturating_add(s.weight);
        }
        v
    }

    /// Whether the profile holds off-CPU time (then weights are wall time).
    pub fn is_wall_time(&self) -> bool {
        self.meta.off_cpu
    }

    /// Sum of all sample weights, nanoseconds.
    pub fn total_weight(&self) -> u64 {
        self.samples
            .iter()
            .fold(0u64, |t, s| t.saturating_add(s.weight))
    }

    /// A thread by index.
    pub fn thread(&self, i: ThreadIndex) -> &Thread {
        &self.threads[i.index()]
    }

    /// A function by index.
    pub fn function(&self, i: FunctionIndex) -> &Function {
        &self.functions[i.index()]
    }

    /// A stack's functions, root first.
    pub fn stack(&self, i: StackIndex) -> &[FunctionIndex] {
        &self.stacks[i.index()]
    }

    /// A stack's locations, root first.
    pub fn stack_locations(&self, i: StackIndex) -> &[LocationIndex] {
        &self.stack_locations[i.index()]
    }

    /// A location by index.
    pub fn location(&self, i: LocationIndex) -> &Location {
        &self.locations[i.index()]
    }

    /// A module by index.
    pub fn module(&self, i: ModuleIndex) -> &Module {
        &self.modules[i.index()]
    }

    /// How much of the CPU time the samples' stacks stand for, and how much is the
    /// `[unsampled]` remainder of threads (time no sample stands for). Off-CPU
    /// intervals are not CPU time and count in neither.
    pub fn coverage(&self) -> Coverage {
        let unsampled_stack = |stack: StackIndex| {
            matches!(self.stack(stack), [f]
                if self.function(*f).class == FrameClass::Marker
                    && self.function(*f).name == Truncation::Unsampled.label())
        };
        let mut c = Coverage {
            exact: self.summary.as_ref().is_some_and(Summary::exact),
            ..Coverage::default()
        };
        // CPU samples only: an off-CPU interval's weight is wall time off the CPU.
        for s in self
            .samples
            .iter()
            .filter(|s| s.state == ThreadState::Running)
        {
            if unsampled_stack(s.stack) {
                c.unsampled_ns += s.weight;
            } else {
                c.sampled_ns += s.weight;
            }
        }
        c
    }
}

/// The split of a profile's CPU time between stacks and `[unsampled]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Coverage {
    /// CPU time the samples' stacks stand for, nanoseconds.
    pub sampled_ns: u64,
    /// Per-thread remainders no sample stands for, nanoseconds.
    pub unsampled_ns: u64,
    /// Per-thread totals are the kernel's own counts (else samples x period).
    pub exact: bool,
}

impl Coverage {
    /// One line for the reports: the CPU time, the share stacks cover, and whether
    /// the totals are exact.
    pub fn describe(&self) -> String {
        let total = self.sampled_ns + self.unsampled_ns;
        if self.exact {
            format!(
                "CPU time: {:.3} s (each thread's own count); stacks cover {:.1}% of it, the rest is [unsampled]",
                total as f64 / 1e9,
                self.sampled_ns as f64 * 100.0 / total.max(1) as f64
            )
        } else {
            format!(
                "CPU time: {:.3} s, estimated as samples x period (this recording has no per-thread counts)",
                total as f64 / 1e9
            )
        }
    }
}

struct Builder<'a> {
    rec: &'a Recording,
    opts: ProfileOptions,
    functions: Vec<Function>,
    function_ids: HashMap<Function, FunctionIndex>,
    stacks: Vec<Vec<FunctionIndex>>,
    stack_locations: Vec<Vec<LocationIndex>>,
    locations: Vec<Location>,
    /// Recording frame id -> location index.
    location_ids: HashMap<u32, LocationIndex>,
    modules: Vec<Module>,
    /// Recording mapping id -> module index.
    module_ids: HashMap<u32, ModuleIndex>,
    /// Recording stack node + 1 (0: no stack) -> stack index, once seen.
    by_leaf: Vec<Option<StackIndex>>,
    /// (leaf node, state) of off-CPU stacks -> stack index.
    off_cpu_ids: HashMap<(StackId, ThreadState), StackIndex>,
    /// The location of each state's `[off-cpu: STATE]` frame, and its stack alone.
    state_locations: HashMap<ThreadState, (LocationIndex, Option<StackIndex>)>,
}

impl Builder<'_> {
    fn stack(&mut self, leaf: Option<StackId>) -> StackIndex {
        // The recording interns stacks already: one lookup per sample, by leaf node.
        let slot = leaf.map_or(0, |l| l as usize + 1);
        if let Some(&Some(id)) = self.by_leaf.get(slot) {
            return id;
        }
        let id = self.new_stack(leaf);
        if let Some(s) = self.by_leaf.get_mut(slot) {
            *s = Some(id);
        }
        id
    }

    /// A recording stack node's stack. The reader bounds the depth and the sum of
    /// the depths of all sampled stacks, so this is linear in what the model holds.
    /// Nodes are unique in a recording and each frame has its own location, so
    /// distinct nodes give distinct location lists.
    fn new_stack(&mut self, leaf: Option<StackId>) -> StackIndex {
        let frames: Vec<u32> = self.rec.stack_frames(leaf).collect();
        let locs: Vec<LocationIndex> = frames.iter().rev().map(|&f| self.location(f)).collect();
        let funcs = locs
            .iter()
            .flat_map(|&l| self.locations[l.index()].functions.iter().copied())
            .collect();
        let id = StackIndex::next(self.stacks.len());
        self.stacks.push(funcs);
        self.stack_locations.push(locs);
        id
    }

    /// The stack of an off-CPU interval: where it blocked, then `[off-cpu: STATE]`.
    fn off_cpu_stack(&mut self, leaf: StackId, state: ThreadState) -> StackIndex {
        let key = (leaf, state);
        if let Some(&id) = self.off_cpu_ids.get(&key) {
            return id;
        }
        let frames: Vec<u32> = self.rec.stack_frames(Some(leaf)).collect();
        let mut locs: Vec<LocationIndex> = frames.iter().rev().map(|&f| self.location(f)).collect();
        locs.push(self.state_location(state));
        let id = self.push_stack(locs);
        self.off_cpu_ids.insert(key, id);
        id
    }

    /// The state a user-only stack's innermost user functions name.
    fn user_state(&mut self, leaf: Option<StackId>) -> ThreadState {
        let stack = self.stack(leaf);
        let names: Vec<&str> = self.stacks[stack.index()]
            .iter()
            .rev()
            .map(|&f| &self.functions[f.index()])
            .filter(|f| f.class != FrameClass::Kernel && f.class != FrameClass::Marker)
            .map(|f| f.name.as_str())
            .collect();
        classify::from_user(names)
    }

    /// The stack of an off-CPU interval that has no stack: the state frame alone.
    fn off_cpu_stack_none(&mut self, state: ThreadState) -> StackIndex {
        let loc = self.state_location(state);
        if let Some((_, Some(id))) = self.state_locations.get(&state) {
            return *id;
        }
        let id = self.push_stack(vec![loc]);
        self.state_locations.insert(state, (loc, Some(id)));
        id
    }

    fn state_location(&mut self, state: ThreadState) -> LocationIndex {
        if let Some(&(l, _)) = self.state_locations.get(&state) {
            return l;
        }
        let f = self.function(Function {
            name: off_cpu_frame_name(state),
            class: FrameClass::OffCpu(state),
            file: None,
            line: None,
        });
        let l = LocationIndex::next(self.locations.len());
        self.locations.push(Location {
            address: 0,
            module: None,
            functions: vec![f],
        });
        self.state_locations.insert(state, (l, None));
        l
    }

    /// Adds a stack of these locations.
    fn push_stack(&mut self, locs: Vec<LocationIndex>) -> StackIndex {
        let funcs = locs
            .iter()
            .flat_map(|&l| self.locations[l.index()].functions.iter().copied())
            .collect();
        let id = StackIndex::next(self.stacks.len());
        self.stacks.push(funcs);
        self.stack_locations.push(locs);
        id
    }

    fn function(&mut self, f: Function) -> FunctionIndex {
        let next = FunctionIndex::next(self.functions.len());
        *self.function_ids.entry(f.clone()).or_insert_with(|| {
            self.functions.push(f);
            next
        })
    }

    fn location(&mut self, id: u32) -> LocationIndex {
        if let Some(&l) = self.location_ids.get(&id) {
            return l;
        }
        let frame = self.rec.frames[id as usize];
        let functions = self
            .describe(id)
            .into_iter()
            .map(|f| self.function(f))
            .collect();
        let module = frame.mapping.and_then(|m| self.module(m));
        let address = if frame.kind == FrameKind::Truncated {
            0
        } else {
            frame.kind.lookup_address(frame.addr)
        };
        let l = LocationIndex::next(self.locations.len());
        self.locations.push(Location {
            address,
            module,
            functions,
        });
        self.location_ids.insert(id, l);
        l
    }

    fn module(&mut self, mapping: u32) -> Option<ModuleIndex> {
        if let Some(&m) = self.module_ids.get(&mapping) {
            return Some(m);
        }
        let m = self.rec.mappings.get(mapping as usize)?;
        let id = ModuleIndex::next(self.modules.len());
        self.modules.push(Module {
            start: m.start,
            end: m.end,
            file_offset: m.file_offset,
            path: m.path.clone(),
            build_id: m.build_id.clone(),
        });
        self.module_ids.insert(mapping, id);
        Some(id)
    }

    /// The display functions of one recording frame, outermost first.
    fn describe(&self, id: u32) -> Vec<Function> {
        let frame = self.rec.frames[id as usize];
        let plain = |name: String, class| Function {
            name,
            class,
            file: None,
            line: None,
        };
        if frame.kind == FrameKind::Truncated {
            let label = Truncation::from_code(frame.addr).map_or("[truncated]", Truncation::label);
            return vec![plain(label.to_owned(), FrameClass::Marker)];
        }
        if let Some(Some(FrameSymbols { source, lines, .. })) = self.rec.symbols.get(id as usize)
            && !lines.is_empty()
        {
            return lines
                .iter()
                .rev()
                .map(|l| {
                    let class = match source {
                        SymbolSource::Kernel => FrameClass::Kernel,
                        SymbolSource::Jit => FrameClass::Jit,
                        SymbolSource::Native if l.inlined => FrameClass::Inlined,
                        SymbolSource::Native => FrameClass::Native,
                    };
                    let (name, line) = match (self.opts.lines, l.line) {
                        (true, Some(n)) => (format!("{}:{n}", l.function), Some(n)),
                        _ => (l.function.clone(), None),
                    };
                    Function {
                        name,
                        class,
                        file: l.file.clone(),
                        line,
                    }
                })
                .collect();
        }
        if frame.kind == FrameKind::Kernel {
            return vec![plain(
                format!("[kernel]+0x{:x}", frame.addr),
                FrameClass::Kernel,
            )];
        }
        match frame
            .mapping
            .and_then(|m| self.rec.mappings.get(m as usize))
        {
            Some(m) => {
                let module = m
                    .path
                    .rsplit('/')
                    .next()
                    .filter(|s| !s.is_empty())
                    .unwrap_or("[anon]");
                // A hostile file may put the address outside its mapping.
                let Some(offset) = frame
                    .addr
                    .checked_sub(m.start)
                    .and_then(|o| o.checked_add(m.file_offset))
                else {
                    return vec![plain(
                        format!("[{module}: 0x{:x} outside the mapping]", frame.addr),
                        FrameClass::Native,
                    )];
                };
                let class = if m.path.is_empty()
                    || m.path.starts_with("//anon")
                    || m.path.starts_with("[anon")
                {
                    FrameClass::Jit
                } else {
                    FrameClass::Native
                };
                vec![plain(format!("{module}+0x{offset:x}"), class)]
            }
            None => vec![plain("[unknown]".to_owned(), FrameClass::Native)],
        }
    }
}

/// The model's threads: one per (pid, tid, thread name, process name).
#[derive(Default)]
struct ThreadTable {
    threads: Vec<Thread>,
    // A renamed thread is a thread per name: samples go under the name the
    // thread had when they were taken.
    ids: HashMap<(u32, u32, String, String), ThreadIndex>,
    // Threads never renamed (nearly all) map straight from (pid, tid).
    unrenamed: HashMap<(u32, u32), ThreadIndex>,
}

impl ThreadTable {
    fn get(&mut self, names: &ThreadNames, pid: u32, tid: u32, time: u64) -> ThreadIndex {
        if let Some(&t) = self.unrenamed.get(&(pid, tid)) {
            return t;
        }
        let name = names.name_at(pid, tid, time);
        let process = names.name_at(pid, pid, time);
        let threads = &mut self.threads;
        let t = *self
            .ids
            .entry((pid, tid, name, process))
            .or_insert_with_key(|k| {
                let t = ThreadIndex::next(threads.len());
                threads.push(Thread {
                    pid,
                    tid,
                    name: k.2.clone(),
                    process: k.3.clone(),
                });
                t
            });
        if !names.renamed(pid, tid) && !names.renamed(pid, pid) {
            self.unrenamed.insert((pid, tid), t);
        }
        t
    }

    /// Each thread's life in the recording, nanoseconds from its start: from its
    /// THREAD_START (else the attach) to its THREAD_EXIT (else the end).
    fn spans(&self, rec: &Recording) -> Vec<(u64, u64)> {
        let start = rec.meta.start_time_ns;
        let end = rec
            .summary
            .as_ref()
            .map(|s| s.end_time_ns)
            .filter(|&e| e > start)
            .or_else(|| {
                let last_sample = rec.samples.iter().map(|s| s.time).max();
                let last_off = rec
                    .off_cpu
                    .iter()
                    .map(|o| o.time.saturating_add(o.duration))
                    .max();
                last_sample.max(last_off)
            })
            .unwrap_or(start)
            .saturating_sub(start);
        let mut born: HashMap<u32, u64> = HashMap::new();
        let mut died: HashMap<u32, u64> = HashMap::new();
        for e in &rec.thread_events {
            match *e {
                ThreadEvent::Start { time, tid, .. } => {
                    born.insert(tid, time.saturating_sub(start));
                }
                ThreadEvent::Exit { time, tid, .. } => {
                    died.insert(tid, time.saturating_sub(start));
                }
                _ => {}
            }
        }
        // Threads present at attach begin when the events were attached.
        let attached = rec
            .summary
            .as_ref()
            .map_or(0, |s| s.attached_ns.saturating_sub(start));
        self.threads
            .iter()
            .map(|t| {
                let b = born.get(&t.tid).copied().unwrap_or(attached).min(end);
                let d = died.get(&t.tid).copied().unwrap_or(end).clamp(b, end);
                (b, d)
            })
            .collect()
    }
}

/// Thread names over time, from the recording's thread events.
struct ThreadNames {
    /// (pid, tid) -> [(time, name)] in time order.
    names: HashMap<(u32, u32), Vec<(u64, String)>>,
}

impl ThreadNames {
    fn new(events: &[ThreadEvent]) -> ThreadNames {
        let mut names: HashMap<(u32, u32), Vec<(u64, String)>> = HashMap::new();
        for e in events {
            if let ThreadEvent::Name {
                time,
                pid,
                tid,
                name,
            } = e
            {
                names
                    .entry((*pid, *tid))
                    .or_default()
                    .push((*time, name.clone()));
            }
        }
        for v in names.values_mut() {
            v.sort_by_key(|(t, _)| *t);
        }
        ThreadNames { names }
    }

    /// Whether the thread had more than one name.
    fn renamed(&self, pid: u32, tid: u32) -> bool {
        self.names.get(&(pid, tid)).is_some_and(|v| v.len() > 1)
    }

    /// The name a thread had at `time`: its latest name by then, else its first, else
    /// its process's main thread's name (a new thread starts with its creator's name).
    fn name_at(&self, pid: u32, tid: u32, time: u64) -> String {
        let pick = |v: &Vec<(u64, String)>| {
            v.iter()
                .take_while(|(t, _)| *t <= time)
                .last()
                .or(v.first())
                .map(|(_, n)| n.clone())
        };
        self.names
            .get(&(pid, tid))
            .and_then(pick)
            .or_else(|| self.names.get(&(pid, pid)).and_then(pick))
            .unwrap_or_else(|| format!("[tid {tid}]"))
    }
}

#[cfg(test)]
mod tests;
