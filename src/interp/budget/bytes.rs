//! The bytes budgets: what one process's readers keep, metered against its own budget
//! and against the pool every process draws on, and the caches that give back their
//! least recently used entries when a meter is over.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::Budgets;

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
