//! Live capture: sample every thread of a target by its own CPU time and write a
//! recording file.
//!
//! One `task-clock` perf event per (thread, CPU) with a fixed period in nanoseconds of
//! that thread's CPU time, `inherit` set so that threads and processes the target
//! creates later are sampled from their first instruction by the kernel itself, and
//! every event of a CPU redirected into that CPU's one ring buffer. Why per-CPU rings
//! rather than one ring per thread: the kernel's locked-memory allowance
//! (perf_event_mlock_kb) is per CPU, so one ring per CPU fits it for unprivileged
//! users whatever the thread count, while per-thread rings exhaust it at a handful of
//! threads; `inherit` (which per-thread cpu=-1 rings forbid) is what catches new threads
//! with no race; and the reader polls a fixed number of rings, not one per thread. The
//! price is threads x CPUs file descriptors for threads that exist at attach (threads
//! created later cost none), which [`session`] reports and checks against
//! RLIMIT_NOFILE.

mod accounting;
mod addrspace;
mod events;
/// Public only for the ring-buffer parsing micro-benchmark (benches/parse.rs).
#[doc(hidden)]
pub mod parse;
mod session;
mod status;
mod symbols;
mod sys;
mod target;

use std::path::PathBuf;
use std::time::Duration;

pub use session::RecordSummary;
pub use symbols::SymbolStats;

/// What to profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Attach to every thread of a running process.
    Pid(u32),
    /// Launch a command and profile it (and its children) from its first instruction.
    Command(Vec<String>),
}

/// How user stacks are taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallGraph {
    /// Copy the user stack and unwind it with the modules' CFI while recording.
    Dwarf,
    /// Follow frame pointers in the kernel (cheap; stops early in code without them).
    Fp,
}

impl CallGraph {
    pub fn name(self) -> &'static str {
        match self {
            CallGraph::Dwarf => "dwarf",
            CallGraph::Fp => "fp",
        }
    }
}

/// Options of [`record`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RecordOptions {
    /// The process to profile. Default is attaching to pid 0, which always fails:
    /// set it.
    pub target: Target,
    /// Stop after this long. Default is none: until Ctrl-C, SIGTERM or the target exits.
    pub duration: Option<Duration>,
    /// Samples per second of each thread's CPU time. Default is 99.
    pub frequency: u64,
    /// Where to write the recording. Default is `profile.prof`.
    pub output: PathBuf,
    /// How user stacks are taken. Default is [`CallGraph::Dwarf`].
    pub call_graph: CallGraph,
    /// Bytes of user stack copied per sample in dwarf mode. Default is 32768: the
    /// measured point where C, Rust and Node stacks are no longer cut (see
    /// docs/benchmarks.md, stack-size sweep).
    pub stack_size: u32,
    /// Print a live status line (only when stderr is a terminal). Default is true.
    pub progress: bool,
    /// Data pages per CPU ring buffer (a power of two). Default is none: chosen from
    /// the mode and the locked-memory limit.
    pub ring_pages: Option<usize>,
    /// More directories to search for separate debug info. Default is none (the
    /// standard places are always searched).
    pub debug_dirs: Vec<PathBuf>,
    /// With [`Target::Pid`], keep the samples of processes the target starts after
    /// attach (the events are inherited, so they are sampled either way). Default is
    /// false: only the attached process's own samples are kept, the others counted in
    /// [`RecordSummary::other_process_samples`]. A launched command is always followed
    /// into every process it starts.
    pub children: bool,
}

impl Default for RecordOptions {
    fn default() -> Self {
        RecordOptions {
            target: Target::Pid(0),
            duration: None,
            frequency: 99,
            output: PathBuf::from("profile.prof"),
            call_graph: CallGraph::Dwarf,
            stack_size: 32768,
            progress: true,
            ring_pages: None,
            debug_dirs: Vec::new(),
            children: false,
        }
    }
}

/// Why recording failed. Messages say what to do.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("no process with pid {0}")]
    NoSuchProcess(u32),
    #[error(
        "not permitted to profile {what} ({cause})\n\
         hint: run as root, or give profile CAP_PERFMON (and CAP_SYS_PTRACE for other users' \
         processes), or lower /proc/sys/kernel/perf_event_paranoid (now {paranoid}) to 1 or less"
    )]
    Permission {
        what: String,
        paranoid: String,
        cause: std::io::Error,
    },
    #[error("process {0} exited while profile was attaching")]
    ExitedDuringAttach(u32),
    #[error(
        "too many open files: {needed} perf events needed ({threads} threads x {cpus} CPUs) but RLIMIT_NOFILE is {limit}\n\
         hint: raise it with `ulimit -n {needed_plus}` (or the hard limit in /etc/security/limits.conf)"
    )]
    TooManyFiles {
        needed: u64,
        needed_plus: u64,
        threads: usize,
        cpus: usize,
        limit: u64,
    },
    #[error(
        "cannot map a {kib} KiB ring buffer per CPU ({cause})\n\
         hint: locked memory for perf is limited by /proc/sys/kernel/perf_event_mlock_kb ({mlock_kb} KiB per CPU); \
         run as root, raise that limit, or pass a smaller --mmap-pages"
    )]
    RingBuffer {
        kib: usize,
        mlock_kb: String,
        cause: std::io::Error,
    },
    #[error(transparent)]
    Launch(#[from] target::LaunchError),
    #[error("cannot write the recording to {path}")]
    Output {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{context}")]
    Kernel {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid option: {0}")]
    Invalid(String),
}

/// Records a profile as `opts` says; returns what was recorded.
pub fn record(opts: &RecordOptions) -> Result<RecordSummary, RecordError> {
    session::run(opts)
}

fn read_sysctl(name: &str) -> String {
    std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".to_owned())
}
