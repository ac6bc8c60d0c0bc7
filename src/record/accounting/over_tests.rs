//! Sample weights without counts: the period, and the threads whose samples weigh
//! more than their clock named for readers to scale.

use super::*;
use crate::format::ThreadClock;

const MS: u64 = 1_000_000;

fn periods() -> Accounting {
    let mut a = Accounting::new(true);
    a.opened(100, 100, 10);
    a.fork(100, 101, 100, 1);
    a.fork(100, 102, 100, 1);
    a
}

/// Periods moved between threads by the kernel's context swap give a thread more
/// samples than it ran: every sample is kept at its period, and the thread is named
/// with its clock and what its samples weigh; a thread under its clock is not.
#[test]
fn samples_weigh_their_period_and_threads_past_their_clock_are_named() {
    let mut a = periods();
    for time in 2..6 {
        assert_eq!(
            a.sample(100, 101, 10, None, None, 10 * MS, time, 0),
            Some(10 * MS)
        );
    }
    assert_eq!(
        a.sample(100, 102, 10, None, None, 10 * MS, 2, 1),
        Some(10 * MS)
    );
    let end = EndCounts {
        opened: HashMap::new(),
        alive: [(100, 100 * MS), (101, 25 * MS), (102, 40 * MS)].into(),
    };
    let over = a.summary_clocks(&end, 10, |_, _| true);
    assert_eq!(
        over,
        vec![ThreadClock {
            pid: 100,
            tid: 101,
            clock_ns: 25 * MS,
            ran_ns: 40 * MS,
        }]
    );
    // Nothing is left unsampled of the thread past its clock; the other keeps 30 ms.
    let rest = a.remainders(&end, 10, |_, _| true);
    assert!(rest.iter().all(|r| r.tid != 101), "{rest:?}");
    assert!(
        rest.iter().any(|r| r.tid == 102 && r.ns == 30 * MS),
        "{rest:?}"
    );
    // Threads left out are not named.
    assert!(a.summary_clocks(&end, 10, |_, tid| tid != 101).is_empty());
}

/// A thread found at attach counts from its clock then.
#[test]
fn an_attached_threads_clock_counts_from_attach() {
    let mut a = periods();
    a.started(101, Some(20 * MS));
    assert_eq!(
        a.sample(100, 101, 10, None, None, 10 * MS, 2, 0),
        Some(10 * MS)
    );
    let end = EndCounts {
        opened: HashMap::new(),
        alive: [(101, 25 * MS)].into(),
    };
    let over = a.summary_clocks(&end, 10, |_, _| true);
    assert_eq!(over.len(), 1);
    assert_eq!((over[0].clock_ns, over[0].ran_ns), (5 * MS, 10 * MS));
}

/// With `--off-cpu` the summary's clocks are every thread's, beside its stretches.
#[test]
fn off_cpu_recordings_name_every_thread_with_its_stretches() {
    let mut a = Accounting::from_switches(0);
    a.opened(100, 100, 10);
    let end = EndCounts {
        opened: HashMap::new(),
        alive: [(100, MS)].into(),
    };
    let clocks = a.summary_clocks(&end, 10, |_, _| true);
    assert_eq!(clocks.len(), 1);
    assert_eq!((clocks[0].clock_ns, clocks[0].ran_ns), (MS, 0));
}

/// The kernel reports the period an event was opened with, whatever the recorder
/// set since: a sample of a thread it opened events on weighs the period last set
/// before the sample; an inherited copy's keeps the period it reports (drawn once,
/// when its thread was created).
#[test]
fn samples_of_varied_events_weigh_the_period_set_before_them() {
    let mut a = periods();
    a.period_set(10, 5, 8 * MS);
    a.period_set(10, 9, 11 * MS);
    assert_eq!(
        a.sample(100, 100, 10, None, None, 10 * MS, 4, 0),
        Some(10 * MS)
    );
    assert_eq!(
        a.sample(100, 100, 10, None, None, 10 * MS, 6, 0),
        Some(8 * MS)
    );
    assert_eq!(
        a.sample(100, 101, 10, None, None, 12 * MS, 7, 0),
        Some(12 * MS)
    );
    assert_eq!(
        a.sample(100, 100, 10, None, None, 10 * MS, 9, 0),
        Some(11 * MS)
    );
    assert_eq!(
        a.sample(100, 100, 10, None, None, 10 * MS, 30, 0),
        Some(11 * MS)
    );
}

/// The kernel swaps the perf contexts of two threads at a switch between them: the
/// opened event (id 10) then samples the thread it was inherited by, and an inherited
/// copy (stream 77) the thread it was opened on. STREAM_ID tells which took a sample:
/// the opened event's samples weigh the period last set, whatever the thread, and
/// are the time run under it; a copy's weigh the period it reports.
#[test]
fn swapped_contexts_weigh_by_the_event_that_fired() {
    let mut a = periods();
    a.period_set(10, 5, 8 * MS);
    // Thread 100 under its inherited copy's period, 101 under the varied one.
    assert_eq!(
        a.sample(100, 100, 10, Some(77), None, 12 * MS, 6, 0),
        Some(12 * MS)
    );
    assert_eq!(
        a.sample(100, 101, 10, Some(10), None, 10 * MS, 7, 0),
        Some(8 * MS)
    );
    assert_eq!(
        a.sample(100, 100, 10, Some(10), None, 10 * MS, 8, 0),
        Some(8 * MS)
    );
    // Time run under event 10: its own two samples, not its copy's.
    assert_eq!(a.own_ran(10), 16 * MS);
    assert_eq!(a.own_ran(77), 0);
}

/// An exit the kernel reported with a clock of 0 (the thread ended between two
/// updates of it) gives no total: the thread is counted, unless it has counts.
#[test]
fn an_exit_with_a_clock_of_0_is_counted_not_taken() {
    let mut a = periods();
    assert!(a.thread_exit(101, Some(100), 0));
    assert!(a.thread_exit(102, Some(100), 3 * MS));
    assert_eq!(a.unclocked(|_, _| true), 1);
    assert_eq!(a.unclocked(|_, tid| tid != 101), 0);
    a.exit_count(100, 101, 10, 20_000, 5);
    assert_eq!(a.unclocked(|_, _| true), 0);
}
