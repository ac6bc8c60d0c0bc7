//! The recording file: what `profile record` writes and every report reads.
//!
//! A file is a 16-byte header (magic, format version) followed by append-only
//! chunks, each with its own length and CRC-32, so a recording whose writer was killed
//! or ran out of disk is readable up to its last whole chunk. The layout is specified
//! in `docs/recording-format.md`; this module owns the in-memory types, [`writer`]
//! encodes them and [`reader`] decodes them.
//!
//! Stacks are interned: each unique frame is stored once ([`Frame`]), and stacks form
//! a tree of ([`StackNode`]) (parent, frame) pairs shared by their common root-side
//! prefix, so a sample costs a handful of bytes. Raw stack bytes never reach the disk.

pub(crate) mod codec;
pub mod reader;
mod words;
pub mod writer;

use serde::{Deserialize, Serialize};

pub use reader::{ReadError, Recording};
pub use words::{CallGraph, CpuAccounting, SampleWeights, StopReason, ThreadState};
pub use writer::RecordingWriter;

/// First eight bytes of every recording.
pub const MAGIC: [u8; 8] = *b"PROFREC\0";
/// The format version this build writes; readers accept this and older ones.
/// Version 2 added exact accounting (samples weigh their thread's CPU time since its
/// previous sample, the `[unsampled]` marker frame, [`Summary::cpu_accounting`]) and
/// off-CPU intervals (OFF_CPU events, [`Meta::off_cpu`], [`Summary::attached_ns`]).
/// Version 3 added frames of interpreters read from outside the process
/// ([`FrameKind::Interpreted`], [`SymbolSource::Python`], [`SymbolSource::JavaInterpreted`]):
/// a version-2 reader would reject them as malformed, so it is told the version instead.
pub const VERSION: u32 = 3;
/// Bytes in the file header: magic, version, reserved.
pub const HEADER_LEN: usize = 16;
/// Bytes in a chunk header: kind, payload length, CRC-32 of the payload.
pub const CHUNK_HEADER_LEN: usize = 12;

/// Chunk kinds.
pub(crate) mod chunk {
    pub(crate) const META: u32 = 1;
    pub(crate) const EVENTS: u32 = 2;
    pub(crate) const SYMBOLS: u32 = 3;
    pub(crate) const END: u32 = 4;
    pub(crate) const WORKLOADS: u32 = 5;
    /// WORKLOADS with each one's [`super::Delegation`]: what builds since the labels
    /// of issue 46 write (older readers skip it, so they never read a user's cgroup
    /// names as a service's).
    pub(crate) const OWNED_WORKLOADS: u32 = 6;
}

/// Index of a [`Mapping`] in the order mappings were written.
pub type MappingId = u32;
/// Index of a [`Frame`] in the order frames were written.
pub type FrameId = u32;
/// Index of a [`StackNode`] in the order nodes were written.
pub type StackId = u32;

/// How the recording was made. Written once, first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Meta {
    /// Version of `profile` that wrote the file.
    pub tool_version: String,
    /// The launched command, empty when attaching.
    pub command: Vec<String>,
    /// The target process: the attached one (the first with `-p A,B`), or the
    /// launched command's (recordings before 0.2 leave it out in launch mode).
    pub pid: Option<u32>,
    /// The target was launched by `profile record -- CMD` (else attached to).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub launched: bool,
    /// Every attached process when there are several (`-p A,B`): reports root stacks
    /// at their processes. Absent (empty) with one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pids: Vec<u32>,
    /// The only threads recorded (`-t TID,...`). Absent (empty) when every thread of
    /// the target was.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tids: Vec<u32>,
    /// Name of the sampling event, e.g. `task-clock`.
    pub event: String,
    /// Nanoseconds of a thread's CPU time between two samples.
    pub sample_period_ns: u64,
    /// The rate asked for, samples per second of CPU time.
    pub frequency_hz: u64,
    /// How user stacks were unwound.
    pub call_graph: CallGraph,
    /// Bytes of user stack copied per sample (dwarf mode).
    pub stack_size: u32,
    /// CLOCK_MONOTONIC nanoseconds when sampling started; sample times are on this clock.
    pub start_time_ns: u64,
    /// Wall-clock time of the start, nanoseconds since the Unix epoch.
    pub start_unix_ns: u64,
    /// The machine's host name.
    pub hostname: String,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// The processor's model name (`/proc/cpuinfo`'s first `model name`), so that
    /// `profile diff` can tell whether two recordings' CPU times are comparable.
    /// Absent (empty) in recordings made before it was written, and where the kernel
    /// names no model.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cpu_model: String,
    /// Off-CPU intervals were recorded (`record --off-cpu`): the file is version 2
    /// and every thread's time is accounted for, on-CPU samples and off-CPU intervals
    /// alike. Absent (false) in CPU-only recordings.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub off_cpu: bool,
    /// A `record -a` recording: every process on the machine, each CPU sampled by its
    /// own time (a perf.data file of cpu-clock samples is not one).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all_cpus: bool,
}

impl Meta {
    /// The event of a `record -a` recording: every process, each CPU sampled by its
    /// own time.
    pub const ALL_CPUS_EVENT: &str = "cpu-clock";

    /// Whether this is a `record -a` recording (every process on the machine).
    pub fn all_cpus(&self) -> bool {
        self.all_cpus
    }
}

/// The processor's model name: the first `model name` (x86) or, failing that, the
/// first `CPU part`/`cpu model`/`Processor` line of `/proc/cpuinfo`; empty when none.
pub fn cpu_model() -> String {
    let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    cpu_model_of(&text)
}

/// [`cpu_model`] of a `/proc/cpuinfo` text.
pub fn cpu_model_of(cpuinfo: &str) -> String {
    for key in ["model name", "cpu model", "Processor", "CPU part"] {
        let found = cpuinfo.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key).then(|| v.split_whitespace().collect::<Vec<_>>().join(" "))
        });
        if let Some(v) = found.filter(|v| !v.is_empty()) {
            return v;
        }
    }
    String::new()
}

/// Totals written when a recording ends normally. Absent from a cut-short file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Summary {
    /// CLOCK_MONOTONIC nanoseconds when sampling stopped.
    pub end_time_ns: u64,
    /// SAMPLE events written (with exact accounting, the `[unsampled]` ones too).
    pub samples: u64,
    /// Samples the kernel dropped because a ring buffer was full (PERF_RECORD_LOST).
    pub lost: u64,
    /// Times the kernel throttled sampling (PERF_RECORD_THROTTLE).
    pub throttled: u64,
    /// Samples `profile` could not process (e.g. malformed records), never silently.
    pub dropped: u64,
    /// CPU time the target used while sampled, from the events' own counts
    /// (nanoseconds). Samples x period falls short of it by the partial periods at
    /// the end of each (thread, CPU) counter.
    pub cpu_time_ns: u64,
    /// Exit status of the launched command, if it ended.
    pub exit_code: Option<i32>,
    /// Why recording stopped.
    pub stop_reason: StopReason,
    /// `--off-cpu` recordings: CLOCK_MONOTONIC nanoseconds when every event was
    /// attached, where each thread present then begins its accounted time. Absent
    /// (0) otherwise.
    #[serde(skip_serializing_if = "is_zero")]
    pub attached_ns: u64,
    /// How sample weights and thread totals were obtained: `exact` (each thread's
    /// samples and its `[unsampled]` remainder add up to its own CPU time, from the
    /// kernel's per-thread counts) or `estimated` (each sample weighs one period;
    /// older kernels, and recordings of format version 1, where it is absent).
    pub cpu_accounting: CpuAccounting,
    /// `--off-cpu` recordings: each thread's own CPU clock over the recording beside
    /// the time its stretches between switches give it, where the kernel gave the
    /// clock. Reports give running the clock and move the difference to or from
    /// runnable, as the kernel splits a thread's time between the two
    /// (docs/off-cpu.md). Other recordings with exact accounting: the threads whose
    /// samples weigh more than their own clock, with what they weigh as `ran_ns`;
    /// reports scale their samples to the clock (docs/accounting.md). Absent (empty)
    /// otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub thread_clocks: Vec<ThreadClock>,
    /// With exact accounting: what each CPU sample weighs. Absent in recordings made
    /// before it was written (their samples weigh counts, or with `--off-cpu` the
    /// time from SWITCH records).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample_weights: Option<SampleWeights>,
    /// What the recorder said of the naming and the runtimes, for every report to
    /// say again (code no perf map named, budgets that held a runtime reader,
    /// runtimes it could not read). Absent (empty) when there was nothing to say.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One thread's own CPU clock over a recording beside what the recording measured of
/// it, nanoseconds: its stretches on a CPU (`--off-cpu`), or what its samples weigh.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadClock {
    /// The thread's process.
    pub pid: u32,
    /// The thread.
    pub tid: u32,
    /// Its `sum_exec_runtime` over the recording.
    pub clock_ns: u64,
    /// `--off-cpu`: its stretches on a CPU within the recording, from the scheduler's
    /// switches. Otherwise: what its samples weigh, more than its clock.
    pub ran_ns: u64,
}

impl Summary {
    /// Whether per-thread totals are the kernel's own account of each thread's CPU.
    pub fn exact(&self) -> bool {
        self.cpu_accounting == CpuAccounting::Exact
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// One mapping of a file (or anonymous executable memory) in a process.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Mapping {
    /// The process it is mapped in.
    pub pid: u32,
    /// First address of the mapping.
    pub start: u64,
    /// Address just past the mapping.
    pub end: u64,
    /// File offset mapped at `start`.
    pub file_offset: u64,
    /// Path as the target sees it, `[vdso]`, `//anon`, or empty for anonymous memory.
    pub path: String,
    /// GNU build id of the file, when it has one.
    pub build_id: Option<Vec<u8>>,
    /// CLOCK_MONOTONIC time the mapping was seen (0: present at attach).
    pub time: u64,
}

/// What a frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FrameKind {
    /// An exact user-space instruction address: where the sampled thread was
    /// executing (the leaf), or a frame a signal interrupted.
    User = 0,
    /// A kernel address from the kernel callchain.
    Kernel = 1,
    /// Not an address but a marker: the user stack was cut here, or the CPU time no
    /// sample stands for; `addr` holds a [`Truncation`] code.
    Truncated = 2,
    /// A user-space return address (a caller frame): the call is at `addr - 1`.
    Return = 3,
    /// A frame of an interpreted language read from outside the process (a Python
    /// function, a method the JVM interprets): not a machine address but an id the
    /// recorder gave the (function, line) it stands for, unique within `pid`, and named
    /// in the recording's symbols like any other frame.
    Interpreted = 4,
}

impl FrameKind {
    /// A user-space frame of either kind.
    pub fn is_user(self) -> bool {
        matches!(self, FrameKind::User | FrameKind::Return)
    }

    /// The address to look names up at: the call instruction for return addresses.
    pub fn lookup_address(self, addr: u64) -> u64 {
        if self == FrameKind::Return {
            addr.saturating_sub(1)
        } else {
            addr
        }
    }
}

/// What a marker frame ([`FrameKind::Truncated`]) stands for, stored in its `addr`:
/// why a stack was cut, or [`Truncation::Unsampled`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Truncation {
    /// The copy of the user stack ended before the stack did (`--stack-size`).
    StackCopyExhausted = 1,
    /// A frame had neither CFI nor a usable frame pointer.
    NoUnwindInfo = 2,
    /// The CFI of a module could not be evaluated.
    BadUnwindInfo = 3,
    /// More frames than the unwinder follows.
    TooDeep = 4,
    /// The user stack was not available for this sample. Reserved: readers name it,
    /// but profile does not write it (such a sample keeps only its kernel frames).
    NoUserStack = 5,
    /// Not a cut stack: the thread's CPU time that no sample stands for (a thread
    /// that ended before its first sample period, the tail after its last sample),
    /// the whole stack of one sample per thread (format version 2).
    Unsampled = 6,
    /// A frame-pointer walk (`--call-graph fp`) reached a return address in no mapped
    /// code: the frame-pointer chain was broken by code built without frame pointers,
    /// and what the kernel walked from there is garbage, left out.
    NoFramePointer = 7,
    /// A Go function switched stacks (`runtime.systemstack`, `mcall`, `morestack`
    /// onto the thread's own, `asmcgocall` for a cgo call, a signal trampoline onto
    /// the signal stack): its callers are on another stack, not in the copy.
    GoStackSwitch = 8,
}

impl Truncation {
    /// The reason stored as `code`, if known.
    pub fn from_code(code: u64) -> Option<Truncation> {
        Some(match code {
            1 => Truncation::StackCopyExhausted,
            2 => Truncation::NoUnwindInfo,
            3 => Truncation::BadUnwindInfo,
            4 => Truncation::TooDeep,
            5 => Truncation::NoUserStack,
            6 => Truncation::Unsampled,
            7 => Truncation::NoFramePointer,
            8 => Truncation::GoStackSwitch,
            _ => return None,
        })
    }

    /// The frame name shown in reports.
    pub fn label(self) -> &'static str {
        match self {
            Truncation::StackCopyExhausted => "[truncated: stack copy too small]",
            Truncation::NoUnwindInfo => "[truncated: no unwind info]",
            Truncation::BadUnwindInfo => "[truncated: bad unwind info]",
            Truncation::TooDeep => "[truncated: too deep]",
            Truncation::NoUserStack => "[truncated: no user stack]",
            Truncation::Unsampled => "[unsampled]",
            Truncation::NoFramePointer => "[truncated: no frame pointer]",
            Truncation::GoStackSwitch => "[truncated: Go stack switch]",
        }
    }
}

/// One unique frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Frame {
    /// What the address is.
    pub kind: FrameKind,
    /// Address space the address belongs to (0 for kernel and marker frames).
    pub pid: u32,
    /// The address (a [`Truncation`] code for a truncation marker).
    pub addr: u64,
    /// The mapping that held `addr` when it was sampled.
    pub mapping: Option<MappingId>,
}

impl Frame {
    /// The marker frame that stands for `reason` (a stack cut short, or CPU time no
    /// sample stands for): no process, no mapping, the reason's code as its address.
    pub fn marker(reason: Truncation) -> Frame {
        Frame {
            kind: FrameKind::Truncated,
            pid: 0,
            addr: reason as u64,
            mapping: None,
        }
    }
}

/// A node of the stack tree: `frame` called from the stack `parent` (None: a root).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StackNode {
    /// The stack this frame was called from; None for an outermost frame.
    pub parent: Option<StackId>,
    /// The frame.
    pub frame: FrameId,
}

/// One sample: `weight` nanoseconds of `tid`'s CPU time, spent in `stack`. With exact
/// accounting the weight is the thread's CPU time since its previous sample on the same
/// CPU; otherwise one sample period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// CLOCK_MONOTONIC nanoseconds.
    pub time: u64,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The CPU it was taken on.
    pub cpu: u32,
    /// CPU nanoseconds the sample stands for.
    pub weight: u64,
    /// Leaf node of the stack; None when no frame could be taken.
    pub stack: Option<StackId>,
}

/// One interval a thread spent off the CPU (`record --off-cpu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffCpu {
    /// When the thread left the CPU.
    pub time: u64,
    /// The thread's process.
    pub pid: u32,
    /// The thread.
    pub tid: u32,
    /// The CPU it left.
    pub cpu: u32,
    /// Nanoseconds until it ran again (or the recording or the thread ended).
    pub duration: u64,
    /// Why it was off the CPU; never [`ThreadState::Running`].
    pub state: ThreadState,
    /// Nanoseconds of off-CPU time this interval's stack stands for in time-weighted
    /// outputs: its own duration when every interval has a stack, an estimate scaled
    /// for the intervals without one when stacks were taken at a bounded rate, 0 for
    /// an interval whose time another one's stack stands for.
    pub weight: u64,
    /// Leaf node of the stack where it left the CPU; None when no stack was taken.
    pub stack: Option<StackId>,
}

/// Things that happen to threads and processes while recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ThreadEvent {
    /// A thread was seen for the first time or renamed (`name` is its comm).
    Name {
        /// CLOCK_MONOTONIC nanoseconds.
        time: u64,
        /// Process id.
        pid: u32,
        /// Thread id.
        tid: u32,
        /// The thread's comm.
        name: String,
    },
    /// A new thread or process was created (`ppid` is the parent's process).
    Start {
        /// CLOCK_MONOTONIC nanoseconds.
        time: u64,
        /// Process id.
        pid: u32,
        /// The parent's process id.
        ppid: u32,
        /// Thread id.
        tid: u32,
    },
    /// A thread exited.
    Exit {
        /// CLOCK_MONOTONIC nanoseconds.
        time: u64,
        /// Process id.
        pid: u32,
        /// Thread id.
        tid: u32,
    },
    /// The process replaced its image (execve).
    Exec {
        /// CLOCK_MONOTONIC nanoseconds.
        time: u64,
        /// Process id.
        pid: u32,
    },
}

/// A process's workload as read from /proc when the recorder first saw the process
/// and again at each exec (WORKLOADS chunks): what [`crate::workload`] derives the
/// systemd unit, container, pod and service from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WorkloadEvent {
    /// CLOCK_MONOTONIC nanoseconds when it was read (or inherited at a fork).
    pub time: u64,
    /// The process.
    pub pid: u32,
    /// Its cgroup path (see [`crate::workload::cgroup_path`]); `/` for the root.
    pub cgroup: String,
    /// Its executable's path; empty when unknown.
    pub exe: String,
    /// A kernel thread.
    pub kernel: bool,
    /// Where root stops vouching for the cgroup path's names; None when root vouches
    /// for all of them (and in recordings made before this was read).
    pub delegated: Option<Delegation>,
}

/// The part of a cgroup path that is a user's: the names below a directory the user
/// owns (a delegated subtree, `user@UID.service`) are hers to choose, so no unit,
/// container or pod is read from them ([`crate::workload`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delegation {
    /// The leading path components root chose the names of (every directory above
    /// them is root's): the unit, container and pod come from these only.
    pub depth: u32,
    /// The user the rest belongs to; None when its directories could not be read
    /// (the cgroup went away, or the path is not under `/sys/fs/cgroup`).
    pub uid: Option<u32>,
}

/// A name stored for a frame: one function (possibly inlined) at a source position.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SymbolLine {
    /// The function's (demangled) name.
    pub function: String,
    /// Source file, when known.
    pub file: Option<String>,
    /// Source line, when known.
    pub line: Option<u32>,
    /// Inlined into the next line of the same frame.
    pub inlined: bool,
}

/// Names for one frame, innermost first; the last entry is the real function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameSymbols {
    /// The frame named.
    pub frame: FrameId,
    /// What kind of code the frame is, by where its name came from.
    pub source: SymbolSource,
    /// The names, innermost first.
    pub lines: Vec<SymbolLine>,
}

/// Where a frame's name came from; reports colour frames by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SymbolSource {
    /// A mapped file's DWARF or ELF symbol table.
    Native = 0,
    /// kallsyms (read by the recorder during its setup).
    Kernel = 1,
    /// A perf map file written by a JIT or an interpreter.
    Jit = 2,
    /// A Python function, read from the interpreter's own structures.
    Python = 3,
    /// A Java method the JVM was interpreting, read from its interpreter frame.
    JavaInterpreted = 4,
}

#[cfg(test)]
mod tests;
