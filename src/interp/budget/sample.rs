//! The per-sample budgets: reads of target memory and the recorder's CPU time, for
//! one sample, shared by every memory it is read through.

use std::cell::Cell;
use std::time::Duration;

use super::Budgets;
use crate::interp::Memory;

/// The reading thread's CPU time now (elsewhere than on Linux, the time since the
/// first call).
fn thread_cpu() -> Duration {
    #[cfg(target_os = "linux")]
    return Duration::from_nanos(crate::sys::thread_cpu_ns());
    #[cfg(not(target_os = "linux"))]
    return Duration::from_nanos(monotonic_ns());
}

/// A monotonic clock, in nanoseconds: CLOCK_MONOTONIC on Linux (the clock samples are
/// stamped with), elsewhere the time since the first call.
pub(crate) fn monotonic_ns() -> u64 {
    #[cfg(target_os = "linux")]
    return crate::sys::monotonic_ns();
    #[cfg(not(target_os = "linux"))]
    {
        static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        START
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_nanos() as u64
    }
}

/// Which per-sample budget a [`Metered`] memory ran out of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spent {
    /// Its reads.
    Reads,
    /// Its CPU time.
    Cpu,
}

/// Reads checked every this many for the CPU time spent.
pub(super) const CPU_CHECK_EVERY: u32 = 64;

/// One sample's budgets of reads and CPU time, shared by every [`Metered`] memory it
/// reads through. The CPU clock is read first at the [`CPU_CHECK_EVERY`]th read (a
/// system call: most samples read far less, and never pay it).
#[derive(Debug)]
pub struct SampleBudget {
    reads: Cell<u32>,
    max_reads: u32,
    start: Cell<Option<Duration>>,
    max_cpu: Duration,
    spent: Cell<Option<Spent>>,
}

impl SampleBudget {
    /// One sample's budgets of `budgets`.
    pub fn new(budgets: &Budgets) -> SampleBudget {
        SampleBudget {
            reads: Cell::new(0),
            max_reads: budgets.sample_reads,
            start: Cell::new(None),
            max_cpu: budgets.sample_cpu,
            spent: Cell::new(None),
        }
    }

    /// What it ran out of, if it did.
    pub fn spent(&self) -> Option<Spent> {
        self.spent.get()
    }

    /// Whether one more read is allowed.
    fn allow(&self) -> bool {
        if self.spent.get().is_some() {
            return false;
        }
        let n = self.reads.get() + 1;
        self.reads.set(n);
        if n > self.max_reads {
            self.spent.set(Some(Spent::Reads));
            return false;
        }
        if n.is_multiple_of(CPU_CHECK_EVERY) {
            let now = thread_cpu();
            let start = *self.start.get().get_or_insert(now);
            self.start.set(Some(start));
            if now.saturating_sub(start) > self.max_cpu {
                self.spent.set(Some(Spent::Cpu));
                return false;
            }
        }
        true
    }
}

/// `inner`, read within one sample's [`SampleBudget`]: past its reads or its CPU
/// time, every read fails.
pub struct Metered<'b, M> {
    inner: M,
    budget: &'b SampleBudget,
}

impl<'b, M: Memory> Metered<'b, M> {
    /// `inner` within `budget`.
    pub fn new(inner: M, budget: &'b SampleBudget) -> Metered<'b, M> {
        Metered { inner, budget }
    }
}

impl<M: Memory> Memory for Metered<'_, M> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        self.budget.allow() && self.inner.read(addr, buf)
    }

    fn read_pages(&self, addrs: &[u64], size: usize) -> Vec<Option<Box<[u8]>>> {
        if self.budget.allow() {
            self.inner.read_pages(addrs, size)
        } else {
            vec![None; addrs.len()]
        }
    }

    fn pages_read(&self) -> Vec<u64> {
        self.inner.pages_read()
    }

    fn prefetch(&self, addrs: &[u64]) {
        if self.budget.allow() {
            self.inner.prefetch(addrs)
        }
    }
}
