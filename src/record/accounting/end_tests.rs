//! The clocks a recording's totals are taken from at its end, on hand-made record
//! sequences: a thread alive at the end against the exit the kernel reports after.

use super::*;

const MS: u64 = 1_000_000;

/// Issue 28: a debug recorder that fell behind took seconds to empty its rings after
/// the end (`-d 3` recorded 6.4 s); pgbench's clients ended meanwhile and the
/// backends exited. Their exits, reported then, replaced the clocks read at the end:
/// every backend's running came out 15 to 176% over the kernel's, its states summed
/// to more than the recording. A thread read alive at the end, with no EXIT record,
/// counts to the end.
#[test]
fn an_exit_reported_after_the_end_does_not_move_the_end() {
    // `--off-cpu`: attached at 10 ms, its clock 100 ms then; ran 12-20 ms.
    let mut a = Accounting::from_switches(10 * MS);
    a.started_at_begin(100, Some(100 * MS));
    a.switch(100, 100, 12 * MS, 0, false);
    a.switch(100, 100, 20 * MS, 0, true);
    a.set_end(30 * MS);
    // The end at 30 ms: its clock read then (8 ms of the recording, and 1 ms of the
    // switches' own time the stretches miss).
    let end = EndCounts {
        alive: [(100, 109 * MS)].into_iter().collect(),
        ..Default::default()
    };
    // It exits long after, while the last records are handled: 300 ms of CPU more.
    assert!(a.thread_exit(100, Some(100), 409 * MS));
    assert_eq!(a.totals(&end, 30 * MS)[&100], 9 * MS);
    let rem = a.remainders(&end, 30 * MS, |_, _| true);
    assert_eq!(rem.iter().map(|r| r.ns).sum::<u64>(), 9 * MS);

    // The same with counts (a CPU-only recording): attached with 1000 ms.
    let mut a = Accounting::new(true);
    a.opened(100, 100, 10);
    a.started(100, Some(1000 * MS));
    assert_eq!(
        a.sample(100, 100, 10, None, Some(4 * MS), MS, 2 * MS, 0),
        Some(4 * MS)
    );
    let end = EndCounts {
        opened: [(100, 5 * MS)].into(),
        alive: [(100, 1006 * MS)].into_iter().collect(),
    };
    assert!(a.thread_exit(100, Some(100), 1500 * MS));
    assert_eq!(a.totals(&end, 30 * MS)[&100], 6 * MS);
}

/// An exit within the recording (its EXIT record handled) takes the clock the kernel
/// gave at the exit, whether or not the thread could still be read at the end.
#[test]
fn an_exit_within_the_recording_takes_its_exit_clock() {
    let mut a = Accounting::from_switches(10 * MS);
    a.started_at_begin(100, Some(100 * MS));
    a.switch(100, 100, 12 * MS, 0, false);
    a.exit(100, 100, 15 * MS);
    assert!(a.thread_exit(100, Some(100), 103 * MS + MS / 2));
    // A zombie's clock is still there to read, and the same.
    let end = EndCounts {
        alive: [(100, 103 * MS + MS / 2)].into_iter().collect(),
        ..Default::default()
    };
    assert_eq!(a.totals(&end, 30 * MS)[&100], 3 * MS + MS / 2);
    assert_eq!(
        a.totals(&EndCounts::default(), 30 * MS)[&100],
        3 * MS + MS / 2
    );
}
