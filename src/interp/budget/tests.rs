//! The budgets' own tests: eviction order, the shared pool, walks, per-sample bounds.

use super::sample::CPU_CHECK_EVERY;
use super::*;
use crate::interp::{Memory, Snapshot};

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
