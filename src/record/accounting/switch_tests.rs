//! A thread's stretches on the CPU from its SWITCH records when some are lost or
//! late (issue 28), on hand-made record sequences: never more than its clock.

use super::*;

const MS: u64 = 1_000_000;

/// Issue 28: a pgbench backend's running came out up to twice its clock when its ring
/// overflowed. A lost SWITCH-out left the stretch running across the time the thread
/// was off the CPU, up to its next switch-out, and its samples weighed that time too:
/// their sum, above the clock, became the thread's total. Now a stretch whose
/// switch-out was lost ends where the thread was last seen running, a sample after a
/// lost switch-in starts one, and the clock gives the total.
#[test]
fn lost_switch_records_never_give_a_thread_more_than_its_clock() {
    let mut a = Accounting::from_switches(MS);
    // Runs 2-4 ms (sampled at 3), off 4-50 ms: its SWITCH-out at 4 ms was lost.
    a.switch(100, 100, 2 * MS, 0, false);
    assert_eq!(a.sample(100, 100, 10, None, None, MS, 3 * MS, 0), Some(MS));
    a.switch(100, 100, 50 * MS, 0, false);
    // Runs 50-52 ms: the sample weighs what it ran since the previous one, not the
    // 46 ms off the CPU.
    assert_eq!(a.sample(100, 100, 10, None, None, MS, 51 * MS, 0), Some(MS));
    a.switch(100, 100, 52 * MS, 0, true);
    // Runs 60-64 ms (sampled at 62): its SWITCH-in at 60 ms was lost.
    assert_eq!(a.sample(100, 100, 10, None, None, MS, 62 * MS, 0), Some(MS));
    assert_eq!(a.sample(100, 100, 10, None, None, MS, 63 * MS, 0), Some(MS));
    a.switch(100, 100, 64 * MS, 0, true);
    // Runs 70-72 ms, off 72-90 ms, runs 90-94 ms: the SWITCH-out at 72 and the
    // SWITCH-in at 90 were both lost (the kernel says so before the next record of
    // that ring).
    a.switch(100, 100, 70 * MS, 0, false);
    a.lost();
    // The first sample weighs the end of the 60-64 ms stretch, not the 18 ms off.
    assert_eq!(a.sample(100, 100, 10, None, None, MS, 92 * MS, 0), Some(MS));
    assert_eq!(a.sample(100, 100, 10, None, None, MS, 93 * MS, 0), Some(MS));
    a.switch(100, 100, 94 * MS, 0, true);
    // Off until the end; its clock says 2 + 2 + 4 + 2 + 4 ms.
    let end = EndCounts {
        alive: [(100, 14 * MS)].into_iter().collect(),
        ..Default::default()
    };
    let totals = a.totals(&end, 100 * MS);
    assert_eq!(totals[&100], 14 * MS);
    // Samples 6 ms (of the stretches seen), the rest [unsampled].
    let rem = a.remainders(&end, 100 * MS, |_, _| true);
    assert_eq!(rem.iter().map(|r| r.ns).sum::<u64>(), 8 * MS);
}

/// Issue 28: a thread runs on one CPU from its SWITCH-in to its SWITCH-out (the
/// kernel moves no task while it runs). A stretch that a later record puts on another
/// CPU lost its SWITCH-out and the SWITCH-in after it (no LOST record said so): it
/// ends where the thread was last seen on its own CPU, never across the wait between,
/// which the kernel counts as run-queue delay (one pgbench backend's running came out
/// up to 15.7% above its clock, its runnable short by as much).
#[test]
fn a_stretch_ends_on_the_cpu_it_began_on() {
    let mut a = Accounting::from_switches(MS);
    // Runs on CPU 0 from 10 ms (sampled at 11), off 12-20 ms, runs on CPU 1 from
    // 20 ms: the SWITCH-out at 12 and the SWITCH-in at 20 are missing.
    a.switch(100, 100, 10 * MS, 0, false);
    assert_eq!(a.sample(100, 100, 10, None, None, MS, 11 * MS, 0), Some(MS));
    // The sample on CPU 1 weighs nothing of the 8 ms off the CPU nor of 20-21 ms,
    // which it cannot tell from them.
    assert_eq!(a.sample(100, 100, 10, None, None, MS, 21 * MS, 1), Some(0));
    a.switch(100, 100, 22 * MS, 1, true);
    // Runs on CPU 1 from 30 ms, off 31-32 ms, runs on CPU 0 32-33 ms: the
    // SWITCH-out at 33 ms on CPU 0 ends the stretch seen on CPU 1 where it began.
    a.switch(100, 100, 30 * MS, 1, false);
    a.switch(100, 100, 33 * MS, 0, true);
    // Runs 40-43 ms on CPU 0, all seen, sampled at 42.
    a.switch(100, 100, 40 * MS, 0, false);
    assert_eq!(
        a.sample(100, 100, 10, None, None, MS, 42 * MS, 0),
        Some(3 * MS)
    );
    a.switch(100, 100, 43 * MS, 0, true);
    // Its clock: 2 + 2 + 1 + 1 + 3 ms. The stretches seen give no more than that.
    let end = EndCounts {
        alive: [(100, 9 * MS)].into_iter().collect(),
        ..Default::default()
    };
    assert_eq!(a.totals(&end, 50 * MS)[&100], 9 * MS);
    let rem = a.remainders(&end, 50 * MS, |_, _| true);
    assert_eq!(rem.iter().map(|r| r.ns).sum::<u64>(), 5 * MS);
}

/// Issue 28: the kernel stops a thread's clock when it picks the next task; the
/// switch-out samples (callchain, stack copy) come after, and the SWITCH-out record
/// after them, some 5 µs later, which the kernel counts as the thread's run-queue
/// delay (preempted) or its wait. Ended at the record, pgbench backends' stretches
/// ran 50 to 70 ms a second of switching over their clocks: running up to 15.7%
/// above the kernel's, runnable short by as much. A stretch ends at its switch-out
/// sample.
#[test]
fn a_stretch_ends_where_its_switch_out_was_sampled() {
    let us = MS / 1000;
    let mut a = Accounting::from_switches(MS);
    // Runs 10-12 ms on CPU 0: sampled leaving at 12 ms, the record 6 µs later.
    a.switch(100, 100, 10 * MS, 0, false);
    a.leaving(100, 12 * MS, 0);
    a.switch(100, 100, 12 * MS + 6 * us, 0, true);
    // Runs 20-23 ms on CPU 1; its first CPU sample, at 22 ms, weighs the 2 ms of
    // each stretch, none of the 6 µs.
    a.switch(100, 100, 20 * MS, 1, false);
    assert_eq!(
        a.sample(100, 100, 10, None, None, MS, 22 * MS, 1),
        Some(4 * MS)
    );
    a.leaving(100, 23 * MS, 1);
    a.switch(100, 100, 23 * MS + 5 * us, 1, true);
    // A switch-out sampled on another CPU, or long before, is not this one's.
    a.switch(100, 100, 30 * MS, 0, false);
    a.leaving(100, 31 * MS, 1);
    a.switch(100, 100, 32 * MS, 0, true);
    a.switch(100, 100, 40 * MS, 0, false);
    a.leaving(100, 41 * MS, 0);
    a.switch(100, 100, 60 * MS, 0, true);
    assert_eq!(
        a.totals(&EndCounts::default(), 70 * MS)[&100],
        2 * MS + 3 * MS + 2 * MS + 20 * MS
    );
}

/// Issue 28: attached in DWARF mode to busy pgbench backends, the recorder takes a
/// while between opening a thread's events and starting (unwind information), and
/// nobody drains the rings meanwhile: they overflow, and the SWITCH records that
/// would have taken that time off the thread's clock (read when its events were
/// opened) are lost: running up to 6% above the kernel's. A clock read as recording
/// begins has none of that time in it, lost or not.
#[test]
fn a_clock_read_at_the_start_needs_no_record_from_before_it() {
    let mut a = Accounting::from_switches(10 * MS);
    // Events opened at 1 ms; ran 2-4 ms (records lost), and 8-12 ms, 20-25 ms.
    a.started_at_begin(100, Some(100 * MS));
    a.switch(100, 100, 8 * MS, 0, false);
    a.switch(100, 100, 12 * MS, 0, true);
    a.switch(100, 100, 20 * MS, 0, false);
    a.switch(100, 100, 25 * MS, 0, true);
    // The clock at 10 ms had 8-10; at the end 10-12 and 20-25 more.
    let end = EndCounts {
        alive: [(100, 107 * MS)].into_iter().collect(),
        ..Default::default()
    };
    assert_eq!(a.totals(&end, 30 * MS)[&100], 7 * MS);
    // Running again from 28 ms to the end at 30 ms, where its clock is read.
    a.switch(100, 100, 28 * MS, 0, false);
    let end = EndCounts {
        alive: [(100, 109 * MS)].into_iter().collect(),
        ..Default::default()
    };
    assert_eq!(a.totals(&end, 30 * MS)[&100], 9 * MS);
}
