//! What a runtime reader may take of the recorder, whatever the process it reads does.
//! The target may be another user's, and hostile: its code objects can carry line
//! tables of a megabyte, its thread list can loop, its names can be as long as it
//! likes. Every reader of target memory works within the [`Budgets`] set here:
//!
//! - **bytes kept** of what was read (code objects, line tables, methods, names), per
//!   process and across every process (`record -a`, the agent), each process's share
//!   metered by a [`Meter`] drawing on one [`Pool`] and its caches [`Lru`]s that give
//!   back their least recently used entries when the meter is over;
//! - **nodes walked** in one walk of a list in target memory ([`Walk`]: a bound and
//!   cycle detection);
//! - **reads and CPU time per sample** ([`SampleBudget`], read through by [`Metered`]
//!   memories: past either, every read of that sample fails, so the reader gives up on
//!   it and its frames are marked).
//!
//! What trips is counted in [`Trips`], and the summary names the process and the
//! budget once. docs/security.md lists each budget, its default and what a user sees.

use std::time::Duration;

mod bytes;
mod sample;
mod trips;
mod walk;

pub use bytes::{Lru, Meter, Pool};
pub(crate) use sample::monotonic_ns;
pub use sample::{Metered, SampleBudget, Spent};
pub use trips::Trips;
pub use walk::Walk;

/// The budgets of every runtime reader. Default is [`Budgets::default`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Budgets {
    /// Bytes kept of what is read from one process. Default is 32 MiB.
    pub process_bytes: usize,
    /// Bytes kept across every process read. Default is 128 MiB.
    pub total_bytes: usize,
    /// Nodes followed in one walk of a list in target memory (interpreters and their
    /// threads). Default is 4,096.
    pub walk_nodes: usize,
    /// Reads of target memory for one sample. Default is 65,536.
    pub sample_reads: u32,
    /// The recorder's CPU time for reading one sample's runtime frames. Default is
    /// 25 ms: a sample takes 0.05 to 0.1 ms in a release build, a chain of 2,000 frames
    /// read without the kernel copy a few ms, and a debug build ten times that.
    pub sample_cpu: Duration,
}

impl Default for Budgets {
    fn default() -> Budgets {
        Budgets {
            process_bytes: 32 << 20,
            total_bytes: 128 << 20,
            walk_nodes: 4096,
            sample_reads: 65_536,
            sample_cpu: Duration::from_millis(25),
        }
    }
}

impl Budgets {
    /// These budgets with `bytes` kept per process, and four times that (at least the
    /// default) across processes.
    pub fn with_process_bytes(mut self, bytes: usize) -> Budgets {
        self.process_bytes = bytes;
        self.total_bytes = bytes.saturating_mul(4).max(Budgets::default().total_bytes);
        self
    }
}

#[cfg(test)]
mod tests;
