//! What a finished recording reports: the summary the CLI prints, and why recording
//! stopped.

mod lines;

use std::path::PathBuf;
use std::time::Duration;

/// What a finished recording holds; the CLI prints it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RecordSummary {
    /// Where the recording was written (None: no file, a live consumer only).
    pub output: Option<PathBuf>,
    /// Samples written.
    pub samples: u64,
    /// Samples the kernel dropped because a ring buffer was full.
    pub lost: u64,
    /// Times the kernel throttled sampling.
    pub throttled: u64,
    /// Kernel records profile could not decode (counted, never silently dropped).
    pub dropped: u64,
    /// Threads that had at least one sample.
    pub threads: usize,
    /// Processes that had at least one sample.
    pub processes: usize,
    /// How long sampling ran.
    pub duration: Duration,
    /// Size of the recording file.
    pub bytes: u64,
    /// Why recording stopped.
    pub stop_reason: StopReason,
    /// The launched command's exit code (128 + signal if killed by one).
    pub exit_code: Option<i32>,
    /// Perf event file descriptors opened.
    pub event_fds: usize,
    /// Bytes of ring buffer mapped.
    pub ring_bytes: usize,
    /// Ring buffers (one per CPU).
    pub rings: usize,
    /// CPU time the target used while sampled (from the events' counts), nanoseconds.
    pub cpu_time_ns: u64,
    /// CPU nanoseconds one sample stands for (nominal: each event's period is drawn
    /// within 25% of it).
    pub period_ns: u64,
    /// Whether each thread's samples and `[unsampled]` remainder add up to its own CPU
    /// time (false on kernels before 6.12: samples weigh one period each).
    pub exact: bool,
    /// With exact accounting: what each sample weighs.
    pub sample_weights: Option<crate::format::SampleWeights>,
    /// What the samples of threads whose samples weighed more than their own clock
    /// weighed beyond it: readers scale those threads' samples to their clocks
    /// (nanoseconds, already out of `sampled_ns`).
    pub scaled_ns: u64,
    /// Whether exiting threads' totals are their own clocks (the kernel's taskstats
    /// exit messages: root, or CAP_NET_ADMIN) rather than their events' counts, which
    /// miss the context switches (some microseconds each).
    pub thread_clocks: bool,
    /// CPU time the samples' stacks stand for, nanoseconds.
    pub sampled_ns: u64,
    /// CPU time no sample stands for (the `[unsampled]` remainders), nanoseconds.
    pub unsampled_ns: u64,
    /// Samples whose user stack was cut (marked in the recording).
    pub truncated_stacks: u64,
    /// Samples of other processes than the attached ones, left out (attach mode
    /// without `children`).
    pub other_process_samples: u64,
    /// Processes descended from the attached ones that were already running at attach
    /// and were not recorded (attach without `--children=all`), with their names.
    pub existing_descendants: Vec<(u32, String)>,
    /// Samples of threads the chosen ones started, left out (`-t`).
    pub other_thread_samples: u64,
    /// Samples left out because their count was another thread's: their threads'
    /// time is `[unsampled]` instead.
    pub foreign_counts: u64,
    /// Threads without a sample that each used less CPU than one sample period in
    /// the recording, and their CPU time, ns (short-lived threads).
    pub short_threads: (u64, u64),
    /// Threads of ten sample periods of CPU time or more whose stacks stand for less
    /// than half of it, and their `[unsampled]` time, ns.
    pub undersampled_threads: (u64, u64),
    /// Threads that ended between two updates of their clock (the kernel's exit
    /// report says 0) and have no count of their own: their CPU time, less than a
    /// tick each, is in no thread's total.
    pub unclocked_threads: u64,
    /// Threads created during the recording that the kernel-side thread filter had
    /// no room for (it holds 16,384 threads at once): they were sampled through the
    /// events they inherited, at the period drawn when they were created.
    pub filter_full: u64,
    /// Set when kernel frames could not be recorded (not permitted).
    pub kernel_note: Option<String>,
    /// Something about the target that explains the result, e.g. that it is a kernel
    /// thread (no user stacks; samples only while it runs).
    pub target_note: Option<String>,
    /// Unique frames named and left unnamed, and the time naming them took.
    pub symbols: super::SymbolStats,
    /// With `--off-cpu`: intervals recorded, how many of them have a stack, and
    /// SWITCH-outs left unpaired because their SWITCH-in was lost.
    pub off_cpu: Option<OffCpuSummary>,
}

/// What `--off-cpu` recorded.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct OffCpuSummary {
    /// Off-CPU intervals recorded.
    pub intervals: u64,
    /// Intervals with their own stack copy.
    pub stacked: u64,
    /// Intervals with the stack their blocking site last had.
    pub borrowed: u64,
    /// SWITCH-outs left out because the SWITCH-in after them was lost.
    pub unmatched: u64,
    /// Blocked intervals whose switch-out samples were lost: state unknown, `other`.
    pub unnamed: u64,
    /// Blocked intervals whose switch-out was sampled without kernel frames (dwarf
    /// mode, the stack event did not sample it), named by the state last named at
    /// their blocking site.
    pub named_by_site: u64,
    /// Blocked intervals sampled without kernel frames at a site that had no state
    /// named yet: `other`.
    pub site_unnamed: u64,
    /// Blocked states could not be classified (no kernel sampling permitted).
    pub unclassified: bool,
    /// Blocked intervals split at their wake-up (runnable from there).
    pub woken: u64,
    /// Nanoseconds off the CPU in the intervals.
    pub off_cpu_ns: u64,
    /// Nanoseconds of those with a stack (their own, their blocking site's, or one
    /// read from /proc while they lasted).
    pub stacked_ns: u64,
    /// Intervals whose stack was read from /proc while they lasted.
    pub read_from_proc: u64,
    /// Why there were no wake-up events (runnable only after preemptions), if so.
    pub no_wakeups: Option<String>,
    /// Times the wake-up events were reopened with a fresh filter.
    pub refiltered: u64,
    /// Runnable time against the kernel's run-queue delay, at each thread's exit and
    /// at the end.
    pub runnable_check: Option<RunnableCheck>,
}

/// Runnable time against the kernel's run-queue delay (schedstat) over the recording.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct RunnableCheck {
    /// Threads checked at the end (alive then).
    pub threads: usize,
    /// Threads checked at their exit (the kernel's figure from taskstats).
    pub at_exit: usize,
    /// Threads off by more than 5% of their life in the recording, or 30 ms.
    pub off: usize,
    /// Every one within 5% of its life or 30 ms of the kernel's.
    pub within: bool,
    /// The thread farthest off.
    pub tid: u32,
    /// Its runnable time in the recording.
    pub ours_ns: u64,
    /// The kernel's run-queue delay over the same time.
    pub kernel_ns: u64,
}

pub use crate::format::StopReason;
