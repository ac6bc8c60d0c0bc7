//! Where a thread's stretch on the CPU begins with `--off-cpu`, on hand-made record
//! sequences: where the kernel picked it, as its clock does.

use super::*;

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

/// Issue 28: with `--off-cpu`, stacks covered 82 to 88% of pgbench backends' CPU
/// against 91 to 96% before the stretches ended at their switch-out samples: a
/// stretch began at its SWITCH-in record, which comes after the previous thread's
/// switch-out samples (a callchain, perhaps a stack copy), the context switch and the
/// scheduling-in of the thread's events, some microseconds after the kernel picked the
/// thread and started its clock; thousands of times a second, that time was
/// `[unsampled]`. A stretch now begins where the kernel picked the thread.
#[test]
fn a_stretch_begins_where_the_kernel_picked_the_thread() {
    let mut a = Accounting::from_switches(MS);
    // Picked at 10 ms, its SWITCH-in record 6 µs later; runs to 12 ms.
    a.switch_from(100, 100, 10 * MS + 6 * US, 0, false, 10 * MS);
    // Its CPU sample at 11 ms weighs the whole millisecond since the pick.
    assert_eq!(a.sample(100, 100, 10, None, None, MS, 11 * MS, 0), Some(MS));
    a.leaving(100, 12 * MS, 0);
    a.switch(100, 100, 12 * MS + 5 * US, 0, true);
    // A pick said to be before its last stretch ended counts from that end: a thread
    // is never on the CPU twice.
    a.switch_from(100, 100, 20 * MS, 1, false, 11 * MS);
    a.leaving(100, 21 * MS, 1);
    a.switch(100, 100, 21 * MS + 5 * US, 1, true);
    // And never after its record.
    a.switch_from(100, 100, 30 * MS, 0, false, 31 * MS);
    a.leaving(100, 32 * MS, 0);
    a.switch(100, 100, 32 * MS + 5 * US, 0, true);
    assert_eq!(
        a.totals(&EndCounts::default(), 40 * MS)[&100],
        2 * MS + (9 * MS - 5 * US) + 2 * MS
    );
}
