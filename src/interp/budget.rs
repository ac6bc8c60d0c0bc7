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

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::Memory;

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
    /// 5 ms (about 50 times what a sample takes).
    pub sample_cpu: Duration,
}

impl Default for Budgets {
    fn default() -> Budgets {
        Budgets {
            process_bytes: 32 << 20,
            total_bytes: 128 << 20,
            walk_nodes: 4096,
            sample_reads: 65_536,
            sample_cpu: Duration::from_millis(5),
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

/// Bytes kept across every process: what each process's [`Meter`] draws on.
#[derive(Debug, Clone, Default)]
pub struct Pool(Arc<AtomicUsize>);

impl Pool {
    /// Bytes kept now, by every meter of the pool.
    pub fn kept(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

/// The bytes one process's readers keep, counted in its own total and in the pool's.
/// Dropped with the process's state: its bytes go back to the pool.
#[derive(Debug)]
pub struct Meter {
    pool: Pool,
    kept: usize,
    budgets: Budgets,
}

impl Meter {
    /// A meter of nothing kept yet, drawing on `pool`.
    pub fn new(pool: Pool, budgets: Budgets) -> Meter {
        Meter {
            pool,
            kept: 0,
            budgets,
        }
    }

    /// The budgets it meters against.
    pub fn budgets(&self) -> &Budgets {
        &self.budgets
    }

    /// Bytes kept by this process.
    pub fn kept(&self) -> usize {
        self.kept
    }

    /// `n` bytes more are kept.
    pub fn add(&mut self, n: usize) {
        self.kept += n;
        self.pool.0.fetch_add(n, Ordering::Relaxed);
    }

    /// `n` bytes kept are let go.
    pub fn sub(&mut self, n: usize) {
        let n = n.min(self.kept);
        self.kept -= n;
        self.pool.0.fetch_sub(n, Ordering::Relaxed);
    }

    /// How many bytes this process must give back to be within both budgets (0 when
    /// it is).
    pub fn excess(&self) -> usize {
        let own = self.kept.saturating_sub(self.budgets.process_bytes);
        let all = self.pool.kept().saturating_sub(self.budgets.total_bytes);
        own.max(all.min(self.kept))
    }

    /// Whether `n` more bytes fit in both budgets now.
    pub fn fits(&self, n: usize) -> bool {
        self.kept + n <= self.budgets.process_bytes
            && self.pool.kept() + n <= self.budgets.total_bytes
    }
}

impl Drop for Meter {
    fn drop(&mut self) {
        self.pool.0.fetch_sub(self.kept, Ordering::Relaxed);
    }
}

/// A cache whose entries each weigh some bytes on a [`Meter`], giving back its least
/// recently used entries when the meter is over budget.
#[derive(Debug)]
pub struct Lru<K, V> {
    map: HashMap<K, Slot<V>>,
    clock: u64,
}

#[derive(Debug)]
struct Slot<V> {
    value: V,
    bytes: usize,
    used: u64,
}

impl<K, V> Default for Lru<K, V> {
    fn default() -> Lru<K, V> {
        Lru {
            map: HashMap::new(),
            clock: 0,
        }
    }
}

impl<K: Hash + Eq + Clone, V> Lru<K, V> {
    /// The entry of `k`, now the most recently used.
    pub fn get(&mut self, k: &K) -> Option<&V> {
        self.clock += 1;
        let clock = self.clock;
        self.map.get_mut(k).map(|s| {
            s.used = clock;
            &s.value
        })
    }

    /// The entry of `k`, its use not counted.
    pub fn peek(&self, k: &K) -> Option<&V> {
        self.map.get(k).map(|s| &s.value)
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Keeps `value` for `k`, weighing `bytes` on `meter`; the entry it replaces goes.
    pub fn insert(&mut self, meter: &mut Meter, k: K, value: V, bytes: usize) {
        self.clock += 1;
        meter.add(bytes);
        let slot = Slot {
            value,
            bytes,
            used: self.clock,
        };
        if let Some(old) = self.map.insert(k, slot) {
            meter.sub(old.bytes);
        }
    }

    /// Lets the entry of `k` go.
    pub fn remove(&mut self, meter: &mut Meter, k: &K) -> Option<V> {
        let s = self.map.remove(k)?;
        meter.sub(s.bytes);
        Some(s.value)
    }

    /// Keeps only the entries `keep` says yes to.
    pub fn retain(&mut self, meter: &mut Meter, mut keep: impl FnMut(&K, &V) -> bool) {
        self.map.retain(|k, s| {
            let yes = keep(k, &s.value);
            if !yes {
                meter.sub(s.bytes);
            }
            yes
        });
    }

    /// Lets everything go.
    pub fn clear(&mut self, meter: &mut Meter) {
        for (_, s) in self.map.drain() {
            meter.sub(s.bytes);
        }
    }

    /// When `meter` is over budget, lets the least recently used entries go until it
    /// is under by a quarter of this cache's bytes (so that eviction is rare, not one
    /// entry per insert); calls `gone` with each key let go. Returns how many went.
    pub fn evict(&mut self, meter: &mut Meter, mut gone: impl FnMut(&K)) -> usize {
        let excess = meter.excess();
        if excess == 0 {
            return 0;
        }
        let mine: usize = self.map.values().map(|s| s.bytes).sum();
        let target = excess.saturating_add(mine / 4).min(mine);
        let mut order: Vec<(u64, K)> = self.map.iter().map(|(k, s)| (s.used, k.clone())).collect();
        order.sort_unstable_by_key(|(used, _)| *used);
        let mut freed = 0;
        let mut n = 0;
        for (_, k) in order {
            if freed >= target {
                break;
            }
            if let Some(s) = self.map.remove(&k) {
                freed += s.bytes;
                meter.sub(s.bytes);
                gone(&k);
                n += 1;
            }
        }
        n
    }
}

/// A walk of a linked structure in target memory: at most `max` nodes, each met
/// once (a node met again is a loop: the walk ends there).
#[derive(Debug)]
pub struct Walk {
    seen: HashSet<u64>,
    max: usize,
    /// The walk stopped at its bound.
    pub bounded: bool,
    /// The walk met a node twice.
    pub looped: bool,
}

impl Walk {
    /// A walk of at most `max` nodes.
    pub fn new(max: usize) -> Walk {
        Walk {
            seen: HashSet::new(),
            max,
            bounded: false,
            looped: false,
        }
    }

    /// Whether the walk may go on to `node` (not 0, not met before, within the bound).
    pub fn step(&mut self, node: u64) -> bool {
        if node == 0 {
            return false;
        }
        if self.seen.len() >= self.max {
            self.bounded = true;
            return false;
        }
        if !self.seen.insert(node) {
            self.looped = true;
            return false;
        }
        true
    }
}

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
const CPU_CHECK_EVERY: u32 = 64;

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

/// How often each budget tripped for one process, for the summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Trips {
    /// Cache entries let go to stay within the bytes budgets.
    pub evicted: u64,
    /// Tables refused outright: larger than their code could need.
    pub refused: u64,
    /// Names not kept: the names budget was spent.
    pub names: u64,
    /// Walks that met a loop.
    pub looped: u64,
    /// Walks cut at their node bound.
    pub bounded: u64,
    /// Samples given up for their reads budget.
    pub reads: u64,
    /// Samples given up for their CPU budget.
    pub cpu: u64,
}

impl Trips {
    /// Whether anything tripped.
    pub fn any(&self) -> bool {
        *self != Trips::default()
    }

    /// Counts a sample's [`Spent`].
    pub fn spent(&mut self, s: Option<Spent>) {
        match s {
            Some(Spent::Reads) => self.reads += 1,
            Some(Spent::Cpu) => self.cpu += 1,
            None => {}
        }
    }

    /// What tripped, in words (empty when nothing did).
    pub fn describe(&self, budgets: &Budgets) -> Vec<String> {
        let mib = |b: usize| b as f64 / (1 << 20) as f64;
        let mut out = Vec::new();
        if self.evicted > 0 {
            out.push(format!(
                "{} cached entries let go to keep within {:.0} MiB per process ({:.0} MiB \
                 in all)",
                self.evicted,
                mib(budgets.process_bytes),
                mib(budgets.total_bytes)
            ));
        }
        if self.refused > 0 {
            out.push(format!(
                "{} line tables refused, larger than their code could need (their frames \
                 keep their names, without a line)",
                self.refused
            ));
        }
        if self.names > 0 {
            out.push(format!(
                "{} frames not named: the names budget was spent",
                self.names
            ));
        }
        if self.looped > 0 {
            out.push(format!(
                "{} walks of its thread list met a loop",
                self.looped
            ));
        }
        if self.bounded > 0 {
            out.push(format!(
                "{} walks of its thread list cut at {} nodes",
                self.bounded, budgets.walk_nodes
            ));
        }
        if self.reads > 0 {
            out.push(format!(
                "{} samples given up after {} reads",
                self.reads, budgets.sample_reads
            ));
        }
        if self.cpu > 0 {
            out.push(format!(
                "{} samples given up after {} ms of CPU",
                self.cpu,
                budgets.sample_cpu.as_secs_f64() * 1e3
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::Snapshot;

    fn small() -> Budgets {
        Budgets {
            process_bytes: 1000,
            total_bytes: 1500,
            ..Budgets::default()
        }
    }

    #[test]
    fn the_least_recently_used_entries_go_first() {
        let pool = Pool::default();
        let mut m = Meter::new(pool.clone(), small());
        let mut lru = Lru::default();
        for k in 0..10u64 {
            lru.insert(&mut m, k, k, 100);
            if k == 5 {
                // 0 is used again: it stays.
                assert_eq!(lru.get(&0), Some(&0));
            }
        }
        assert_eq!(m.kept(), 1000);
        assert_eq!(lru.evict(&mut m, |_| {}), 0, "within budget");
        lru.insert(&mut m, 10, 10, 100);
        let mut gone = Vec::new();
        lru.evict(&mut m, |k| gone.push(*k));
        assert!(m.kept() <= 1000 - 1000 / 4, "{}", m.kept());
        assert!(!gone.contains(&0), "0 was used recently: {gone:?}");
        assert!(gone.contains(&1) && !gone.contains(&10), "{gone:?}");
        assert_eq!(pool.kept(), m.kept());
        drop(m);
        assert_eq!(pool.kept(), 0, "a dropped meter gives its bytes back");
    }

    #[test]
    fn processes_share_the_total() {
        let pool = Pool::default();
        let mut a = Meter::new(pool.clone(), small());
        let mut b = Meter::new(pool.clone(), small());
        a.add(900);
        assert_eq!(a.excess(), 0);
        b.add(900);
        // 1800 in all, 300 over the total: each is asked for at most what it keeps.
        assert_eq!(b.excess(), 300);
        assert!(!b.fits(1));
        b.sub(900);
        assert!(b.fits(100));
    }

    #[test]
    fn a_walk_stops_at_a_loop_and_at_its_bound() {
        let mut w = Walk::new(3);
        assert!(w.step(1) && w.step(2));
        assert!(!w.step(1) && w.looped);
        let mut w = Walk::new(2);
        assert!(w.step(1) && w.step(2) && !w.step(3) && w.bounded);
        assert!(!Walk::new(5).step(0));
    }

    #[test]
    fn a_sample_past_its_reads_reads_nothing() {
        let mut s = Snapshot::default();
        s.insert(0x1000, vec![7; 64]);
        let b = Budgets {
            sample_reads: 3,
            ..Budgets::default()
        };
        let budget = SampleBudget::new(&b);
        let m = Metered::new(&s, &budget);
        // Two memories of one sample share its budget.
        let other = Metered::new(&s, &budget);
        for _ in 0..2 {
            assert_eq!(m.u64_at(0x1000), Some(0x0707_0707_0707_0707));
        }
        assert!(other.u64_at(0x1000).is_some());
        assert_eq!(m.u64_at(0x1000), None);
        assert_eq!(other.u64_at(0x1000), None);
        assert_eq!(budget.spent(), Some(Spent::Reads));
    }

    #[test]
    fn a_sample_past_its_cpu_reads_nothing() {
        let mut s = Snapshot::default();
        s.insert(0x1000, vec![7; 64]);
        let b = Budgets {
            sample_cpu: Duration::ZERO,
            ..Budgets::default()
        };
        let budget = SampleBudget::new(&b);
        let m = Metered::new(&s, &budget);
        let mut n = 0;
        while m.u64_at(0x1000).is_some() {
            n += 1;
            // Some CPU for the clock to see.
            std::hint::black_box((0..1000).sum::<u64>());
            assert!(n < 10 * CPU_CHECK_EVERY, "never tripped");
        }
        assert_eq!(budget.spent(), Some(Spent::Cpu));
    }
}
