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

mod build;
pub mod classify;
pub mod filter;
mod index;
mod programs;
mod split;
pub mod vm_threads;

use crate::format::{Meta, Summary, Truncation};

pub use crate::format::ThreadState;
pub(crate) use index::TableIndex;
pub use index::{FunctionIndex, LocationIndex, ModuleIndex, StackIndex, ThreadIndex};

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
    /// A Python function, read from the interpreter's own structures.
    Python,
    /// A method an interpreter was running, read from the interpreter's own frames
    /// (HotSpot's interpreter). Folded output marks it `_[j]`, as inferno knows no
    /// mark for it.
    Interpreted,
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
            // Folded files have no suffix for interpreter frames: inferno's JIT one.
            FrameClass::Jit | FrameClass::Python | FrameClass::Interpreted => "_[j]",
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
    /// The runtime's own threads (a JVM's GC, JIT compiler, housekeeping): their group.
    /// None for the application's threads.
    pub group: Option<vm_threads::ThreadGroup>,
    /// The process's service when the samples were taken
    /// ([`crate::workload::Workload::service`]); None in recordings without
    /// workloads.
    pub service: Option<String>,
    /// The container the process ran in, as its cgroup path (read by the recorder
    /// from the kernel) names it: 64 hex digits. None outside containers and in
    /// recordings without workloads.
    pub container: Option<String>,
    /// The file name of the process's executable, when the recording holds its
    /// workload (`/proc/PID/exe` as the recorder read it); None otherwise.
    pub exe: Option<String>,
    /// The program the process runs, the tower processes of one program merge into:
    /// its name, unless processes of that name ran different executables (paths as
    /// recorded in the workloads, which a process cannot change by renaming a thread
    /// as it can its name): then the name and the path, `postgres [/tmp/postgres]`.
    pub program: String,
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
    /// The source line of each of `functions` at this address, when known: kept
    /// whatever [`ProfileOptions::lines`] says, for the exports that carry lines
    /// beside functions (pprof, OTLP). Same length as `functions`, or empty.
    pub lines: Vec<Option<u32>>,
}

impl Location {
    /// The source line of `functions[i]` here: the function's own (`--lines`), else
    /// the one the symbols gave.
    pub fn line(&self, i: usize, f: &Function) -> Option<u32> {
        f.line.or_else(|| self.lines.get(i).copied().flatten())
    }
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
    /// Totals of a recording that ended normally; its `samples` are the CPU samples
    /// the kernel took (the file also counts its `[unsampled]` remainders: they are
    /// left out, as [`Profile::counts`] leaves them out).
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
    /// Nanoseconds per state for each thread (indexed like `threads`), from the
    /// samples: CPU samples count as running, off-CPU stacks as their state.
    pub fn thread_states(&self) -> Vec<[u64; ThreadState::COUNT]> {
        let mut v = vec![[0u64; ThreadState::COUNT]; self.threads.len()];
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

    /// The processes that have samples, grouped by name (a process's name is its main
    /// thread's, inherited from its parent until it renames itself or execs): the
    /// programs with the most processes first, then by name; pids in order.
    pub fn processes(&self) -> Vec<ProcessGroup> {
        let mut by_pid: std::collections::BTreeMap<u32, &str> = Default::default();
        for t in &self.threads {
            by_pid.entry(t.pid).or_insert(&t.process);
        }
        let mut groups: Vec<ProcessGroup> = Vec::new();
        for (pid, name) in by_pid {
            match groups.iter_mut().find(|g| g.name == name) {
                Some(g) => g.pids.push(pid),
                None => groups.push(ProcessGroup {
                    name: name.to_owned(),
                    pids: vec![pid],
                }),
            }
        }
        groups.sort_by(|a, b| b.pids.len().cmp(&a.pids.len()).then(a.name.cmp(&b.name)));
        groups
    }

    /// Whether a sample is one the kernel took of a thread on the CPU: not an
    /// off-CPU interval's stack, not an `[unsampled]` remainder (time no sample
    /// stands for).
    pub fn is_cpu_sample(&self, s: &ProfileSample) -> bool {
        s.state == ThreadState::Running && !self.is_unsampled(s.stack)
    }

    /// The counts every output gives, under these names: `samples` (CPU samples the
    /// kernel took, as the record summary counts them) and `off-CPU intervals`.
    pub fn counts(&self) -> Counts {
        Counts {
            samples: self
                .samples
                .iter()
                .filter(|s| self.is_cpu_sample(s))
                .count() as u64,
            off_cpu_intervals: self.intervals.len() as u64,
        }
    }

    /// Whether a stack is the `[unsampled]` marker alone: a thread's CPU time no
    /// sample stands for, not a function that ran.
    pub fn is_unsampled(&self, stack: StackIndex) -> bool {
        matches!(self.stack(stack), [f]
            if self.function(*f).class == FrameClass::Marker
                && self.function(*f).name == Truncation::Unsampled.label())
    }

    /// How much of the CPU time the samples' stacks stand for, and how much is the
    /// `[unsampled]` remainder of threads (time no sample stands for). Off-CPU
    /// intervals are not CPU time and count in neither.
    pub fn coverage(&self) -> Coverage {
        let unsampled_stack = |stack: StackIndex| self.is_unsampled(stack);
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
                c.unsampled_ns = c.unsampled_ns.saturating_add(s.weight);
            } else {
                c.sampled_ns = c.sampled_ns.saturating_add(s.weight);
            }
        }
        c
    }
}

/// How many samples and off-CPU intervals a profile holds ([`Profile::counts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// CPU samples: those the kernel took, not the `[unsampled]` remainders (time),
    /// not the off-CPU intervals.
    pub samples: u64,
    /// Off-CPU intervals (`record --off-cpu`), with a stack or not.
    pub off_cpu_intervals: u64,
}

impl Counts {
    /// `352 samples`, or `352 samples, 967 off-CPU intervals` when off-CPU time is
    /// recorded (`wall`).
    pub fn describe(&self, wall: bool) -> String {
        let samples = crate::text::plural(self.samples as usize, "sample", "samples");
        if wall {
            format!(
                "{samples}, {}",
                crate::text::plural(
                    self.off_cpu_intervals as usize,
                    "off-CPU interval",
                    "off-CPU intervals"
                )
            )
        } else {
            samples
        }
    }
}

/// Processes of one name (one program: a server's master and workers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessGroup {
    /// The processes' name.
    pub name: String,
    /// Their pids, in order.
    pub pids: Vec<u32>,
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
        let total = self.sampled_ns.saturating_add(self.unsampled_ns);
        if self.exact {
            format!(
                "CPU time: {:.3} s (each thread's exact total); stacks cover {:.1}% of it, the rest is [unsampled]",
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

#[cfg(test)]
mod tests;
