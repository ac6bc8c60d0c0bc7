//! What the event handler counts (samples, losses, threads and processes seen) and
//! which samples it keeps (attach mode's processes, `-t`'s threads).

use std::collections::{HashMap, HashSet};

/// What the handler has counted so far.
#[derive(Debug, Default)]
pub(in crate::record) struct Counters {
    pub samples: u64,
    pub lost: u64,
    pub throttled: u64,
    /// Kernel records that could not be decoded.
    pub dropped: u64,
    /// Samples whose user stack was cut.
    pub truncated: u64,
    /// Samples per thread (by tid); under `-a`, of the threads still alive (see
    /// `retired_threads`).
    pub per_thread: HashMap<u32, u64>,
    /// Processes that had samples; under `-a`, those still alive or exited in the
    /// current window (see `retired_processes`).
    pub pids: HashSet<u32>,
    /// Under `-a`: threads that had samples and exited, no longer in `per_thread`.
    pub retired_threads: usize,
    /// Under `-a`: processes that had samples and exited, no longer in `pids`.
    pub retired_processes: usize,
    /// The uids of each process that had samples, read at its first sample (its perf
    /// map must belong to one of them or to root).
    pub uids: HashMap<u32, crate::symbolize::perfmap::TargetUser>,
    /// How many times `uids` changed (an entry added or forgotten).
    pub uids_changed: u64,
    /// Samples left out.
    pub left_out: LeftOut,
    /// Threads whose CPU time no sample stands for.
    pub remainders: Remainders,
}

/// Samples left out, by why.
#[derive(Debug, Default, Clone)]
pub(in crate::record) struct LeftOut {
    /// Samples of other processes than the attached ones, left out.
    pub other_process_samples: u64,
    /// Samples of threads other than the chosen ones (`-t`), left out.
    pub other_thread_samples: u64,
    /// Samples left out because their count was not their thread's
    /// (`Accounting::foreign`).
    pub foreign_counts: u64,
}

/// Threads whose CPU time no sample stands for, by why, and that time.
#[derive(Debug, Default, Clone)]
pub(in crate::record) struct Remainders {
    /// Threads no sample stands for, each of which used less CPU than one sample
    /// period in the recording (short-lived threads: a thread's first sample comes
    /// after a whole period of its own CPU time), and their CPU time.
    pub short_threads: u64,
    pub short_ns: u64,
    /// Threads of at least ten sample periods of CPU time whose samples stand for
    /// less than half of it, and their `[unsampled]` time: the kernel's cheap context
    /// switch handed their partial periods to threads they switched to.
    pub undersampled_threads: u64,
    pub undersampled_ns: u64,
    /// Threads whose exit the kernel reported with a clock of 0 (they ended between
    /// two updates of it) and no count of their own: their time is no thread's.
    pub unclocked_threads: u64,
}

/// Which samples are kept. Attach mode without `children` keeps only the attached
/// processes' samples (the events are inherited by the processes they start); `-t`
/// only the chosen threads' (not those of threads they start). Launch mode keeps all.
#[derive(Debug, Default, Clone)]
pub(in crate::record) struct Keep {
    /// Only these processes; None keeps every process.
    pub pids: Option<HashSet<u32>>,
    /// Only these threads; None keeps every thread of a kept process.
    pub tids: Option<HashSet<u32>>,
}

impl Keep {
    pub(super) fn process(&self, pid: u32) -> bool {
        self.pids.as_ref().is_none_or(|p| p.contains(&pid))
    }

    pub(super) fn thread(&self, pid: u32, tid: u32) -> bool {
        self.process(pid) && self.tids.as_ref().is_none_or(|t| t.contains(&tid))
    }
}
