//! The words a recording stores for how it was made and how it ended: how sample
//! weights were obtained, how stacks were unwound, why recording stopped. Each is
//! written as the same word it always was, and a word a newer recorder writes reads
//! as the variant that claims least. Also the state code of each off-CPU interval
//! ([`ThreadState`]), of which an unknown one is no state at all.

use serde::{Deserialize, Serialize};

/// How a recording's sample weights and thread totals were obtained.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CpuAccounting {
    /// Each thread's samples and its `[unsampled]` remainder add up to its own CPU
    /// time, from the kernel's per-thread counts.
    Exact,
    /// Each sample weighs one period (older kernels, perf.data files, recordings of
    /// format version 1; and any value this build does not know, claiming less).
    #[default]
    #[serde(other)]
    Estimated,
}

impl CpuAccounting {
    /// `exact` when `exact`, else `estimated`.
    pub fn of(exact: bool) -> CpuAccounting {
        if exact {
            CpuAccounting::Exact
        } else {
            CpuAccounting::Estimated
        }
    }
}

/// What each CPU sample of a recording with exact accounting weighs (its thread's
/// total is its own clock either way): docs/accounting.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SampleWeights {
    /// Its thread's count since its previous sample (`record --exact-weights`).
    Counts,
    /// The period it reports; a thread whose samples weigh more than its own clock
    /// is named in the summary's `thread_clocks` and its samples scaled to it.
    Periods,
    /// The time its thread ran since its previous sample, from the SWITCH records
    /// (`record --off-cpu`).
    Switches,
    /// A word this build does not know (a newer recorder's).
    #[serde(other)]
    Unknown,
}

impl SampleWeights {
    /// What the word means, for `record`'s and `report`'s notes.
    pub fn describe(self) -> &'static str {
        match self {
            SampleWeights::Counts => "each sample weighs its thread's count since its previous one",
            SampleWeights::Periods => {
                "each sample weighs its period, scaled to its thread's clock where they pass it"
            }
            SampleWeights::Switches => {
                "each sample weighs the time its thread ran since its previous one"
            }
            SampleWeights::Unknown => "sample weights of an unknown kind",
        }
    }
}

/// How a recording's user stacks were unwound, as its header stores it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CallGraph {
    /// From a copy of the stack, by DWARF CFI (and frame pointers, scans, JIT rules).
    Dwarf,
    /// The kernel's frame-pointer walk.
    Fp,
    /// No stacks, the sampled address only (a perf.data file recorded without `-g`).
    #[serde(rename = "none")]
    NoStacks,
    /// A word this build does not know (a newer recorder's).
    #[default]
    #[serde(other)]
    Unknown,
}

impl std::fmt::Display for CallGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl CallGraph {
    /// The word the command line and the file use.
    pub fn name(self) -> &'static str {
        match self {
            CallGraph::Dwarf => "dwarf",
            CallGraph::Fp => "fp",
            CallGraph::NoStacks => "none",
            CallGraph::Unknown => "unknown",
        }
    }
}

/// Why a recording, or a window of one, stopped, as its summary stores it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    /// `--duration` was reached.
    Duration,
    /// SIGINT, SIGTERM or SIGHUP.
    Signal,
    /// The target process exited.
    TargetExited,
    /// Writing the recording failed.
    Error,
    /// The live consumer asked to stop (`q` in `profile top`).
    Requested,
    /// A live window ended and recording went on (`--push`, `top`).
    Window,
    /// The last live window.
    End,
    /// Converted from a perf.data file.
    #[serde(rename = "perf.data")]
    PerfData,
    /// A word this build does not know (a newer recorder's).
    #[default]
    #[serde(other)]
    Unknown,
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl StopReason {
    /// The word the file stores.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Duration => "duration",
            StopReason::Signal => "signal",
            StopReason::TargetExited => "target-exited",
            StopReason::Error => "error",
            StopReason::Requested => "requested",
            StopReason::Window => "window",
            StopReason::End => "end",
            StopReason::PerfData => "perf.data",
            StopReason::Unknown => "unknown",
        }
    }

    /// A few words for people.
    pub fn describe(self) -> &'static str {
        match self {
            StopReason::Duration => "duration reached",
            StopReason::Signal => "stopped by signal",
            StopReason::TargetExited => "target exited",
            StopReason::Error => "error",
            StopReason::Requested => "stopped on request",
            StopReason::Window => "window ended",
            StopReason::End => "last window ended",
            StopReason::PerfData => "converted from perf.data",
            StopReason::Unknown => "unknown",
        }
    }
}

/// What a thread was doing: running on a CPU, or the reason it was off it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ThreadState {
    /// On a CPU (CPU samples).
    Running = 0,
    /// Ready to run, waiting for a CPU: preempted, or woken and not yet running.
    Runnable = 1,
    /// A timed sleep (nanosleep, clock_nanosleep).
    Sleep = 2,
    /// Waiting on a contended lock: a mutex, rwlock, Java monitor enter, a kernel
    /// mutex or rwsem.
    Lock = 3,
    /// Waiting for a file, pipe, socket, disk or page fault.
    Io = 4,
    /// Off the CPU for any other reason.
    Other = 5,
    /// Idle: waiting for work or a signal (condition variables, semaphores, epoll,
    /// Java `Object.wait`/`LockSupport.park`). Recorded for epoll; reports tell the
    /// futex waits apart from `lock` by their user stack (`profile::classify`).
    /// Older recordings hold epoll as `io`.
    Wait = 6,
}

impl ThreadState {
    /// How many states there are (arrays indexed by code).
    pub const COUNT: usize = 7;

    /// Every state, in display order.
    pub const ALL: [ThreadState; ThreadState::COUNT] = [
        ThreadState::Running,
        ThreadState::Runnable,
        ThreadState::Sleep,
        ThreadState::Wait,
        ThreadState::Lock,
        ThreadState::Io,
        ThreadState::Other,
    ];

    /// The state stored as `code` in a recording (None: not a state).
    pub fn from_code(code: u8) -> Option<ThreadState> {
        ThreadState::ALL.into_iter().find(|s| *s as u8 == code)
    }

    /// The state's name in reports, `--state` and JSON.
    pub fn name(self) -> &'static str {
        match self {
            ThreadState::Running => "running",
            ThreadState::Runnable => "runnable",
            ThreadState::Sleep => "sleep",
            ThreadState::Wait => "wait",
            ThreadState::Lock => "lock",
            ThreadState::Io => "io",
            ThreadState::Other => "other",
        }
    }

    /// The state called `name` in reports (None: no such state).
    pub fn from_name(name: &str) -> Option<ThreadState> {
        ThreadState::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Off the CPU.
    pub fn is_off_cpu(self) -> bool {
        self != ThreadState::Running
    }
}
