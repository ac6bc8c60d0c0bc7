//! Sample weights without counts: the period, under the thread's clock.

use super::*;

const MS: u64 = 1_000_000;

/// The clocks the stand-in `/proc` gives: thread 101 ran 25 ms, 102 ran 4 ms, 103
/// is gone.
fn clock(_pid: u32, tid: u32) -> Option<u64> {
    match tid {
        100 => Some(100 * MS),
        101 => Some(25 * MS),
        102 => Some(4 * MS),
        _ => None,
    }
}

fn periods() -> Accounting {
    let mut a = Accounting::new(true);
    a.read_clock = foreign::ClockReader(clock);
    a.opened(100, 100, 10);
    a.fork(100, 101, 100, 1);
    a.fork(100, 102, 100, 1);
    a.fork(100, 103, 100, 1);
    a
}

/// Periods moved between threads by the kernel's context swap give a thread more
/// samples than it ran: its weights stop at its clock, and its total is its clock.
#[test]
fn samples_without_counts_weigh_their_period_up_to_their_threads_clock() {
    let mut a = periods();
    assert_eq!(a.sample(100, 101, 10, None, 10 * MS, 2, 0), Some(10 * MS));
    assert_eq!(a.sample(100, 101, 10, None, 10 * MS, 3, 0), Some(10 * MS));
    assert_eq!(a.sample(100, 101, 10, None, 10 * MS, 4, 0), Some(5 * MS));
    assert_eq!(a.sample(100, 101, 10, None, 10 * MS, 5, 0), None);
    // A 4 ms thread a period landed in: 4 ms of it, not 10.
    assert_eq!(a.sample(100, 102, 10, None, 10 * MS, 2, 1), Some(4 * MS));
    assert_eq!(a.capped_ns(), 5 * MS + 10 * MS + 6 * MS);
    let end = EndCounts {
        opened: HashMap::new(),
        alive: [(100, 100 * MS), (101, 25 * MS), (102, 4 * MS)].into(),
    };
    let totals = a.totals(&end, 10);
    assert_eq!(totals[&101], 25 * MS);
    assert_eq!(totals[&102], 4 * MS);
}

/// A thread gone from `/proc` is weighed by the exit the kernel reported; without
/// one its sample is left out (its time stays `[unsampled]`).
#[test]
fn a_gone_thread_is_weighed_by_its_reported_exit_or_left_out() {
    let mut a = periods();
    assert_eq!(a.sample(100, 103, 10, None, 10 * MS, 2, 0), None);
    a.exit_reported(103, Some(100), 7 * MS);
    assert_eq!(a.sample(100, 103, 10, None, 10 * MS, 3, 0), Some(7 * MS));
    assert_eq!(a.sample(100, 103, 10, None, 10 * MS, 4, 0), None);
}

/// A thread found at attach counts from its clock then.
#[test]
fn an_attached_threads_cap_is_its_clock_since_attach() {
    let mut a = periods();
    a.started(101, Some(20 * MS));
    assert_eq!(a.sample(100, 101, 10, None, 10 * MS, 2, 0), Some(5 * MS));
}
