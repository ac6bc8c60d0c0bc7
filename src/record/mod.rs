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
mod attach;
mod cpus;
mod events;
mod jit;
mod jvm;
mod launch;
pub mod live;
pub(crate) mod offcpu;
mod output;
pub(crate) mod python;
mod reorder;
mod rings;
mod session;
mod status;
mod summary;
/// The system calls, one floor down (`crate::sys`); named here as the recorder's own.
pub(crate) use crate::sys;
/// The parser of a JVM's attach reply, for the fuzzers.
pub use jvm::parse_reply as parse_jvm_reply;
mod taskstats;
mod wakeups;

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

pub use crate::symbolize::frames::SymbolStats;
pub use jvm::{JVM_FLAGS, jvm_tool_options};
pub use live::{LiveSink, Window};
pub use summary::{OffCpuSummary, RecordSummary, RunnableCheck, StopReason};

/// What to profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Attach to every thread of one or more running processes (`-p A,B`).
    Pids(Vec<u32>),
    /// Attach to these threads only (`-t TID,...`, of one or more processes): the
    /// samples kept are theirs alone, not those of threads they start.
    Threads(Vec<u32>),
    /// Launch a command and profile it (and its children) from its first instruction.
    Command(Vec<String>),
    /// Every process on the machine (`-a`, perf's spelling): each CPU sampled by its
    /// own time (`cpu-clock`), whoever runs on it, processes started during the
    /// recording included. Needs root or CAP_PERFMON, or perf_event_paranoid <= 0.
    AllCpus,
}

/// How user stacks are taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CallGraph {
    /// Copy the user stack and unwind it with the modules' CFI while recording.
    #[default]
    Dwarf,
    /// Follow frame pointers in the kernel (cheap; stops early in code without them).
    Fp,
}

/// When HotSpot JVMs are asked for their perf maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JvmPerfMap {
    /// Only a JVM whose JIT code cannot be found in its own code heaps (a JDK whose
    /// tables `profile` cannot read, or frame-pointer stacks, where no stack copy is
    /// read as it is drained): the others are asked nothing, and write nothing.
    #[default]
    Fallback,
    /// Every JVM, at attach, every few seconds and at the end (`--jvm-perfmap`).
    Always,
    /// None (`--no-jvm-perfmap`).
    Never,
}

impl Target {
    /// Whether this attaches to running processes or threads (not a launch, not `-a`).
    pub fn is_attach(&self) -> bool {
        matches!(self, Target::Pids(_) | Target::Threads(_))
    }
}

impl CallGraph {
    /// The name the command line and the recording use: `dwarf` or `fp`.
    pub fn name(self) -> &'static str {
        match self {
            CallGraph::Dwarf => "dwarf",
            CallGraph::Fp => "fp",
        }
    }

    /// What the recording's header says of it.
    pub fn stored(self) -> crate::format::CallGraph {
        match self {
            CallGraph::Dwarf => crate::format::CallGraph::Dwarf,
            CallGraph::Fp => crate::format::CallGraph::Fp,
        }
    }
}

/// Options of [`record`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RecordOptions {
    /// The process to profile. No default: given to [`RecordOptions::new`].
    pub target: Target,
    /// Stop after this long. Default is none: until Ctrl-C, SIGTERM or the target exits.
    pub duration: Option<Duration>,
    /// Samples per second of each thread's CPU time. Default is 99.
    pub frequency: u64,
    /// A sample every this many nanoseconds of each thread's CPU time, instead of
    /// [`RecordOptions::frequency`] (`-c`, perf's spelling). Default is none.
    pub period_ns: Option<u64>,
    /// Where to write the recording (None: no file, for a live consumer only).
    pub output: Option<PathBuf>,
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
    /// With [`Target::Pids`], keep the samples of processes the target starts after
    /// attach (the events are inherited, so they are sampled either way). Default is
    /// false: only the attached process's own samples are kept, the others counted in
    /// [`RecordSummary::other_process_samples`]. A launched command is always followed
    /// into every process it starts.
    pub children: bool,
    /// With [`Target::Pids`] and `children`, also attach to the processes descended
    /// from the targets that are running at attach (`--children=all`), as if they were
    /// given with `-p`. Default is false: they are not recorded (the events reach only
    /// processes started after attach), and [`RecordSummary::existing_descendants`]
    /// names them.
    pub existing_children: bool,
    /// Also record every interval each thread spends off the CPU, with the stack it
    /// left with and its state (runnable, sleep, lock, io, other): the recording then
    /// accounts for every thread's wall time. Default is false.
    pub off_cpu: bool,
    /// Weigh each sample by its own thread's count since its previous sample
    /// (PERF_SAMPLE_READ with `inherit`, Linux 6.12+), and give threads created during
    /// the recording sampling events of their own whose period varies. Every context
    /// switch of the target then takes the kernel's slow path (docs/accounting.md,
    /// "What a context switch costs"). Default is false: each sample weighs its
    /// period (readers scale a thread whose samples pass its own clock down to it); each thread's
    /// total is its own clock either way.
    pub exact_weights: bool,
    /// With [`Target::Command`], run the command as this user instead of as the user
    /// running `profile` (which keeps its own privileges to record), and give them the
    /// recording. Default is none.
    pub run_as: Option<RunAs>,
    /// When HotSpot JVMs among the recorded processes are asked to write their perf
    /// map (the attach handshake of `jcmd PID Compiler.perfmap`, JDK 17+). Default is
    /// [`JvmPerfMap::Fallback`].
    pub jvm_perfmap: JvmPerfMap,
    /// With [`Target::Command`], environment variables set in the command's environment
    /// on top of `profile`'s own (see [`jvm_tool_options`] for `--jvm-flags`). Default
    /// is none.
    pub launch_env: Vec<(OsString, OsString)>,
    /// SIGHUP ends the recording, as Ctrl-C and SIGTERM do. Default is true; false
    /// when the caller gives SIGHUP another meaning (`record -a --push-rules`
    /// reloads its rule file on it).
    pub hangup_stops: bool,
    /// What the runtime readers (Python, Java) may take of the recorder for each
    /// process they read. Default is [`crate::interp::Budgets::default`].
    pub runtime_budgets: crate::interp::Budgets,
    /// Under `-a` with windows (the host agent): the bytes its programs' symbol and
    /// unwind tables and their parsed names may take, half each; past it the least
    /// recently used file's go (read again when a sample needs them): see
    /// docs/continuous.md. Default is [`DEFAULT_TABLES_MEMORY`] (256 MiB).
    pub tables_memory: usize,
}

/// The default of [`RecordOptions::tables_memory`]: 256 MiB.
pub const DEFAULT_TABLES_MEMORY: usize = 256 << 20;

/// A user to run a launched command as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAs {
    /// The user's name, to look up their supplementary groups.
    pub name: String,
    /// The user id the command runs with.
    pub uid: u32,
    /// Its primary group id.
    pub gid: u32,
}

impl RunAs {
    /// The user who ran `sudo profile ...`, from `SUDO_UID`, `SUDO_GID` and `SUDO_USER`.
    pub fn sudo_caller() -> Option<RunAs> {
        let var = |k| std::env::var(k).ok();
        Some(RunAs {
            uid: var("SUDO_UID")?.parse().ok()?,
            gid: var("SUDO_GID")?.parse().ok()?,
            name: var("SUDO_USER").unwrap_or_default(),
        })
    }
}

impl RecordOptions {
    /// Default of [`RecordOptions::frequency`].
    pub const DEFAULT_FREQUENCY: u64 = 99;
    /// Samples per second of each CPU's time for a host agent (`record -a --push`
    /// without `-F`): Parca's rate, a fifth of [`Self::DEFAULT_FREQUENCY`] (an
    /// agent runs on every host all the time; the fleet adds up its samples).
    pub const FLEET_FREQUENCY: u64 = 19;
    /// Default of [`RecordOptions::output`].
    pub const DEFAULT_OUTPUT: &str = "profile.prof";
    /// Default of [`RecordOptions::stack_size`].
    pub const DEFAULT_STACK_SIZE: u32 = 32768;

    /// Options to profile `target`, everything else at its default. These defaults are
    /// the only ones: the command line takes its defaults from here.
    pub fn new(target: Target) -> Self {
        RecordOptions {
            target,
            duration: None,
            frequency: Self::DEFAULT_FREQUENCY,
            period_ns: None,
            output: Some(PathBuf::from(Self::DEFAULT_OUTPUT)),
            call_graph: CallGraph::default(),
            stack_size: Self::DEFAULT_STACK_SIZE,
            progress: true,
            ring_pages: None,
            debug_dirs: Vec::new(),
            children: false,
            existing_children: false,
            off_cpu: false,
            exact_weights: false,
            run_as: None,
            jvm_perfmap: JvmPerfMap::Fallback,
            launch_env: Vec::new(),
            hangup_stops: true,
            runtime_budgets: crate::interp::Budgets::default(),
            tables_memory: DEFAULT_TABLES_MEMORY,
        }
    }
}

/// Why recording failed. Messages say what to do.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The pid (or tid) names no process.
    #[error("no process with pid {0}")]
    NoSuchProcess(u32),
    /// A `-t` tid names no thread.
    #[error("no thread with tid {0}")]
    NoSuchThread(u32),
    #[error(
        "not permitted to profile {what} ({cause})\n\
         hint: run as root, or give profile CAP_PERFMON (and CAP_SYS_PTRACE for other users' \
         processes), or lower /proc/sys/kernel/perf_event_paranoid (now {paranoid}) to 1 or less"
    )]
    /// The kernel refused a perf event for lack of privilege.
    Permission {
        /// What was to be profiled (a thread, this process).
        what: String,
        /// /proc/sys/kernel/perf_event_paranoid now.
        paranoid: String,
        /// The kernel's refusal.
        cause: std::io::Error,
    },
    #[error(
        "not permitted to profile every process (-a): {cause}\n\
         hint: -a needs root or CAP_PERFMON (sudo setcap cap_perfmon+ep profile), or \
         /proc/sys/kernel/perf_event_paranoid at 0 or less (now {paranoid}); without them, \
         profile your own processes with --pid"
    )]
    /// The kernel refused a CPU-wide event (`-a`) for lack of privilege.
    AllCpusPermission {
        /// /proc/sys/kernel/perf_event_paranoid now.
        paranoid: String,
        /// The kernel's refusal.
        cause: std::io::Error,
    },
    /// Every thread of the process ended before one event could be opened.
    #[error("process {0} exited while profile was attaching")]
    ExitedDuringAttach(u32),
    #[error(
        "too many open files: {needed} perf events needed ({threads} threads x {cpus} CPUs) but RLIMIT_NOFILE is {limit}\n\
         hint: raise it with `ulimit -n {needed_plus}` (or the hard limit in /etc/security/limits.conf)"
    )]
    /// One event per (thread, CPU) needs more descriptors than RLIMIT_NOFILE allows.
    TooManyFiles {
        /// Descriptors needed.
        needed: u64,
        /// A limit to suggest: `needed` rounded up to a power of two.
        needed_plus: u64,
        /// Threads of the target.
        threads: usize,
        /// Online CPUs.
        cpus: usize,
        /// The soft limit, after raising it to the hard limit.
        limit: u64,
    },
    #[error(
        "cannot map a {kib} KiB ring buffer per CPU ({cause})\n\
         hint: locked memory for perf is limited by /proc/sys/kernel/perf_event_mlock_kb ({mlock_kb} KiB per CPU); \
         run as root, raise that limit, or pass a smaller --mmap-pages"
    )]
    /// A ring buffer could not be mapped (usually the locked-memory limit).
    RingBuffer {
        /// Size asked for, per CPU.
        kib: usize,
        /// /proc/sys/kernel/perf_event_mlock_kb now.
        mlock_kb: String,
        /// The kernel's refusal.
        cause: std::io::Error,
    },
    /// The command could not be started.
    #[error(transparent)]
    Launch(#[from] launch::LaunchError),
    #[error("cannot write the recording to {path}")]
    /// Creating or writing the recording failed.
    Output {
        /// The recording's path.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    #[error("{context}")]
    /// Another refusal of the kernel.
    Kernel {
        /// What was being done.
        context: String,
        /// The kernel's error.
        #[source]
        source: std::io::Error,
    },
    /// An option has a value that cannot work.
    #[error("invalid option: {0}")]
    Invalid(String),
}

/// The effective user id of this process.
pub fn effective_uid() -> u32 {
    sys::dirfd::euid()
}

/// The parent of process `pid` as `/proc` shows it now (None: gone or unreadable).
pub fn process_parent(pid: u32) -> Option<u32> {
    crate::process::parent(pid)
}

/// The processes descended from `roots` running now, `roots` left out, with their
/// names, in pid order.
pub fn process_descendants(roots: &[u32]) -> Vec<(u32, String)> {
    crate::process::descendants(roots)
}

/// Records a profile as `opts` says; returns what was recorded.
pub fn record(opts: &RecordOptions) -> Result<RecordSummary, RecordError> {
    session::run(opts)
}

/// Records as `opts` says and hands `sink` every window of the recording as it goes
/// (`profile top`, `record --push`); see [`live`].
pub fn record_live(
    opts: &RecordOptions,
    sink: &mut (dyn LiveSink + Send),
) -> Result<RecordSummary, RecordError> {
    session::run_live(opts, sink)
}

/// A kernel refusal as the error a user can act on: permission advice for EACCES and
/// EPERM, else the context.
fn kernel_error(e: std::io::Error, context: &str, what: &str) -> RecordError {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => RecordError::Permission {
            what: what.to_owned(),
            paranoid: read_sysctl("perf_event_paranoid"),
            cause: e,
        },
        _ => RecordError::Kernel {
            context: format!("cannot {context}"),
            source: e,
        },
    }
}

fn read_sysctl(name: &str) -> String {
    std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".to_owned())
}

impl From<crate::sys::RecordFields> for crate::replay::decode::Layout {
    /// The decoder's layout of the records of events opened with these fields.
    fn from(f: crate::sys::RecordFields) -> Self {
        crate::replay::decode::Layout {
            sample_type: f.sample_type,
            read_format: f.read_format,
            sample_id_all: f.sample_id_all,
            sample_regs_user: f.sample_regs_user,
            branch_sample_type: f.branch_sample_type,
        }
    }
}
