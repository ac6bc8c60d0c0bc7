//! The off-CPU tracker on hand-made sequences of samples, switch records and
//! wake-ups: intervals, their states and stacks, splits and clipping.

use super::*;
use crate::format::OffCpu;
use crate::process::state::{state_now, syscall_state};

const SITE: (u64, u64) = (0x7f00_1234, 0x7ffd_0000);

#[test]
fn samples_and_switch_records_make_one_interval() {
    let mut t = Tracker::default();
    t.state_sample(7, 1_000, Some(ThreadState::Lock), SITE, None);
    t.stack_sample(7, 1_001, Some(3), ThreadState::Io, SITE);
    t.switch_out(1, 7, 0, 1_010, false);
    let o = t.switch_in(7, 1, 51_010).pop().unwrap();
    // From the first switch-out sample: the SWITCH-out record comes after them.
    assert_eq!(
        o,
        OffCpu {
            time: 1_000,
            pid: 1,
            tid: 7,
            cpu: 0,
            duration: 50_010,
            state: ThreadState::Lock,
            weight: 50_010,
            stack: Some(3),
        }
    );
    assert_eq!(
        t.switch_in(7, 1, 60_000),
        vec![],
        "a switch-in alone opens nothing"
    );
}

/// The kernel ends a thread's wait where it picks it (`sched:sched_switch`), before
/// the context switch and the SWITCH-in record: the interval ends there, and a woken
/// interval's runnable part too. A switch-in tracepoint too far back, or of another
/// thread, changes nothing.
#[test]
fn intervals_end_where_the_kernel_switches_the_thread_in() {
    let mut t = Tracker::default();
    t.new_thread(1, 7, 0);
    t.switch_in(7, 1, 10);
    t.state_sample(7, 1_000, Some(ThreadState::Io), SITE, Some(2));
    t.switch_out(1, 7, 0, 1_005, false);
    assert!(t.wakeup(7, 20_000));
    assert!(t.switching_in(7, 30_000));
    assert!(!t.switching_in(8, 30_500), "not a thread of the recording");
    let got = t.switch_in(7, 1, 30_900);
    let pieces: Vec<(u64, u64, ThreadState)> =
        got.iter().map(|o| (o.time, o.duration, o.state)).collect();
    assert_eq!(
        pieces,
        vec![
            (1_000, 19_000, ThreadState::Io),
            (20_000, 10_000, ThreadState::Runnable)
        ]
    );
    // And the 10 ns from its creation to its first run.
    assert_eq!(t.runnable[&7], 10_010);
    // A stale one (more than the pairing window before the record) is ignored.
    t.state_sample(7, 40_000, Some(ThreadState::Io), SITE, Some(2));
    t.switch_out(1, 7, 0, 40_000, true);
    assert!(t.switching_in(7, 41_000));
    let got = t.switch_in(7, 1, 41_000 + PAIRING_WINDOW_NS + 1);
    assert_eq!(got[0].duration, 1_000 + PAIRING_WINDOW_NS + 1);
}

#[test]
fn the_preempt_flag_makes_it_runnable_whatever_the_frames() {
    let mut t = Tracker::default();
    t.state_sample(7, 100, Some(ThreadState::Io), SITE, Some(1));
    t.switch_out(1, 7, 0, 100, true);
    assert_eq!(
        t.switch_in(7, 1, 300).pop().unwrap().state,
        ThreadState::Runnable
    );
    // Not preempted, but the kernel frames look like a preemption: other.
    t.state_sample(7, 400, Some(ThreadState::Runnable), SITE, Some(1));
    t.switch_out(1, 7, 0, 400, false);
    assert_eq!(
        t.switch_in(7, 1, 500).pop().unwrap().state,
        ThreadState::Other
    );
}

#[test]
fn blocks_without_a_stack_copy_borrow_their_sites_last_stack() {
    let mut t = Tracker::default();
    // The kernel delivers the stack sample only: it names the state too.
    t.stack_sample(7, 100, Some(1), ThreadState::Sleep, SITE);
    t.switch_out(1, 7, 0, 100, false);
    assert_eq!(t.switch_in(7, 1, 1_100).pop().unwrap().weight, 1_000);
    // Same site, no stack copy: the site's stack, weighing its own duration.
    t.state_sample(7, 2_000, Some(ThreadState::Sleep), SITE, None);
    t.switch_out(1, 7, 0, 2_000, false);
    let second = t.switch_in(7, 1, 2_500).pop().unwrap();
    assert_eq!(
        (second.state, second.weight, second.stack),
        (ThreadState::Sleep, 500, Some(1))
    );
    // Another site: no stack, no weight (reports spread its time).
    t.state_sample(7, 3_000, Some(ThreadState::Sleep), (1, 2), None);
    t.switch_out(1, 7, 0, 3_000, false);
    let third = t.switch_in(7, 1, 3_400).pop().unwrap();
    assert_eq!((third.stack, third.weight, third.duration), (None, 0, 400));
    assert_eq!(
        (t.counts.intervals, t.counts.stacked, t.counts.borrowed),
        (3, 1, 1)
    );
}

#[test]
fn a_stale_sample_is_not_paired_and_a_lost_switch_in_is_counted() {
    let mut t = Tracker::default();
    t.state_sample(7, 100, Some(ThreadState::Lock), SITE, Some(1));
    t.switch_out(1, 7, 0, 100 + PAIRING_WINDOW_NS + 1, false);
    t.switch_out(1, 7, 0, 200 + PAIRING_WINDOW_NS, false);
    assert_eq!(t.counts.unmatched, 1);
    let o = t.switch_in(7, 1, 300 + PAIRING_WINDOW_NS).pop().unwrap();
    assert_eq!((o.stack, o.state), (None, ThreadState::Other));
    // Neither switch-out had its sample: both states unknown, and counted.
    assert_eq!(t.counts.unnamed, 2);
    // A preemption needs none (the record's flag says runnable).
    t.switch_out(1, 7, 0, 500 + PAIRING_WINDOW_NS, true);
    assert_eq!(t.counts.unnamed, 2);
}

#[test]
fn threads_blocked_at_attach_count_from_the_start() {
    let mut t = Tracker::default();
    t.blocked_at_start(1, 7, 100, ThreadState::Io, Some(5));
    t.blocked_at_start(1, 8, 100, ThreadState::Lock, None);
    t.blocked_at_start(1, 9, 100, ThreadState::Sleep, None);
    // 7 wakes at 500; 8 was running after all (its first record is a switch-out);
    // 9 stays blocked to the end.
    let o = t.switch_in(7, 1, 500).pop().unwrap();
    assert_eq!(
        (o.time, o.duration, o.state, o.stack, o.weight),
        (100, 400, ThreadState::Io, Some(5), 400)
    );
    t.switch_out(1, 8, 0, 600, false);
    assert_eq!(t.counts.unmatched, 0);
    let rest = t.finish(1_000);
    assert_eq!(rest.len(), 2);
    assert_eq!((rest[0].tid, rest[0].duration), (9, 900));
    assert_eq!((rest[1].tid, rest[1].time, rest[1].duration), (8, 600, 400));
    t.switch_out(1, 10, 0, 100, false);
    t.thread_exit(10);
    assert!(t.finish(2_000).is_empty());
}

/// Threads in `R` at the attach: running, or waiting for a CPU. On a loaded machine
/// (load 10, two spinners pinned to one CPU) the waiting one's first record came 1.2 s
/// after the attach, and that time was in no state.
#[test]
fn threads_runnable_at_attach_wait_from_the_start_unless_they_ran() {
    let mut t = Tracker::default();
    t.blocked_at_start(1, 7, 100, ThreadState::Runnable, None);
    t.blocked_at_start(1, 8, 100, ThreadState::Runnable, None);
    t.blocked_at_start(1, 9, 100, ThreadState::Runnable, None);
    // 7 waited for a CPU until 1_300; 8 was running (a switch-out first), then
    // preempted; 9 ran throughout (no record at all).
    let o = t.switch_in(7, 1, 1_300).pop().unwrap();
    assert_eq!(
        (o.time, o.duration, o.state, o.stack),
        (100, 1_200, ThreadState::Runnable, None)
    );
    assert_eq!(t.runnable[&7], 1_200);
    t.switch_out(1, 8, 0, 400, true);
    let o = t.switch_in(8, 0, 450).pop().unwrap();
    assert_eq!(
        (o.time, o.duration, o.state),
        (400, 50, ThreadState::Runnable)
    );
    assert!(t.finish(2_000).is_empty(), "9 ran: no interval");
}

#[test]
fn a_wakeup_splits_a_blocked_interval_into_its_wait_and_runnable() {
    let mut t = Tracker::default();
    t.state_sample(7, 1_000, Some(ThreadState::Io), SITE, Some(4));
    t.switch_out(1, 7, 0, 1_000, false);
    // A wake-up of another thread, then two of this one (per-CPU events overlap
    // while their filter is renewed): the first counts.
    assert!(!t.wakeup(8, 1_500));
    assert!(t.wakeup(7, 3_000));
    assert!(t.wakeup(7, 3_500));
    let parts = t.switch_in(7, 1, 10_000);
    let got: Vec<_> = parts
        .iter()
        .map(|o| (o.time, o.duration, o.state, o.weight, o.stack))
        .collect();
    assert_eq!(
        got,
        [
            (1_000, 2_000, ThreadState::Io, 2_000, Some(4)),
            (3_000, 7_000, ThreadState::Runnable, 7_000, Some(4)),
        ]
    );
    assert_eq!((t.counts.intervals, t.counts.woken), (2, 1));
    // Preempted: runnable already, a wake-up changes nothing.
    t.switch_out(1, 7, 0, 20_000, true);
    t.wakeup(7, 20_500);
    let parts = t.switch_in(7, 1, 21_000);
    assert_eq!(parts.len(), 1);
    assert_eq!(parts[0].state, ThreadState::Runnable);
    // Woken and still waiting at the end of the recording.
    t.switch_out(1, 7, 0, 30_000, false);
    t.wakeup(7, 31_000);
    let rest = t.finish(35_000);
    assert_eq!(
        rest.iter()
            .map(|o| (o.state, o.duration))
            .collect::<Vec<_>>(),
        [(ThreadState::Other, 1_000), (ThreadState::Runnable, 4_000)]
    );
}

#[test]
fn intervals_are_clipped_to_the_recording() {
    let mut t = Tracker {
        window: Some((1_000, 9_000)),
        ..Tracker::default()
    };
    // Began before the start, woken after it.
    t.switch_out(1, 7, 0, 500, false);
    t.wakeup(7, 2_000);
    let parts = t.switch_in(7, 1, 3_000);
    assert_eq!(
        parts
            .iter()
            .map(|o| (o.time, o.duration))
            .collect::<Vec<_>>(),
        [(1_000, 1_000), (2_000, 1_000)]
    );
    // Wholly before the start: nothing.
    t.switch_out(1, 8, 0, 100, false);
    assert!(t.switch_in(8, 1, 900).is_empty());
    // Ended after the end: cut there.
    t.switch_out(1, 7, 0, 8_000, false);
    let o = t.switch_in(7, 1, 9_500).pop().unwrap();
    assert_eq!((o.time, o.duration), (8_000, 1_000));
}

#[test]
fn a_new_thread_is_runnable_until_it_first_runs() {
    let mut t = Tracker::default();
    t.new_thread(1, 9, 100);
    let o = t.switch_in(9, 1, 400).pop().unwrap();
    assert_eq!(
        (o.time, o.duration, o.state),
        (100, 300, ThreadState::Runnable)
    );
    assert!(t.wakeup(9, 500));
}

#[test]
fn system_calls_name_the_state_of_a_thread_blocked_at_attach() {
    assert_eq!(syscall_state(202), ThreadState::Lock);
    assert_eq!(syscall_state(230), ThreadState::Sleep);
    assert_eq!(syscall_state(0), ThreadState::Io);
    assert_eq!(syscall_state(232), ThreadState::Wait);
    assert_eq!(syscall_state(7), ThreadState::Io);
    assert_eq!(syscall_state(61), ThreadState::Other);
    // This very thread is running: no off-CPU state.
    let me = std::process::id();
    let tid = std::fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|p| p.file_name()?.to_str()?.parse().ok())
        .unwrap_or(me);
    assert_eq!(state_now(me, tid), None);
}

/// A long wait whose switch-out had no stack (no stack copy, a site never seen) is
/// offered once for a stack from /proc; the stack read is the interval's and its
/// site's. Preempted, woken, site-less and recent intervals are not offered.
#[test]
fn long_waits_without_a_stack_are_offered_once_for_their_stack() {
    let mut t = Tracker::default();
    t.state_sample(7, 1_000, Some(ThreadState::Wait), SITE, None);
    t.switch_out(1, 7, 0, 1_000, false);
    t.state_sample(8, 1_000, Some(ThreadState::Io), (0, 0), None);
    t.switch_out(1, 8, 0, 1_000, false);
    t.state_sample(9, 1_000, Some(ThreadState::Io), SITE, None);
    t.switch_out(1, 9, 0, 1_000, true);
    t.state_sample(10, 50_000, Some(ThreadState::Io), SITE, None);
    t.switch_out(1, 10, 0, 50_000, false);
    assert_eq!(t.unstacked_waits(20_000, 8), vec![(1, 7, SITE)]);
    t.blocked_stack(7, Some(4));
    assert_eq!(t.unstacked_waits(20_000, 8), vec![], "once");
    assert_eq!(t.counts.read_from_proc, 1);
    let o = t.switch_in(7, 1, 100_000).pop().unwrap();
    assert_eq!((o.stack, o.weight), (Some(4), 99_000));
    // The next wait at the same site borrows it.
    t.state_sample(7, 200_000, Some(ThreadState::Wait), SITE, None);
    t.switch_out(1, 7, 0, 200_000, false);
    assert_eq!(t.switch_in(7, 1, 300_000).pop().unwrap().stack, Some(4));
}

/// A thread switched in straight after another thread of the recording left the same
/// CPU (no `sched_switch` sample: its filter leaves those switch-outs out) was picked
/// where that thread left: its switch-out sample. Not after a gap longer than a
/// context switch, not another CPU's, not its own, and a `sched_switch` sample (a
/// stranger ran in between) wins.
#[test]
fn a_wait_ends_where_the_thread_before_it_left_the_cpu() {
    let mut t = Tracker::default();
    t.state_sample(7, 1_000, Some(ThreadState::Io), SITE, None);
    t.switch_out(1, 7, 1, 1_010, false);
    assert!(t.wakeup(7, 5_000));
    // Thread 8 leaves CPU 1 (sampled at 9_000, its record at 9_400); 7 comes in.
    t.state_sample(8, 9_000, Some(ThreadState::Io), SITE, None);
    t.switch_out(1, 8, 1, 9_400, false);
    let got = t.switch_in(7, 1, 12_000);
    let pieces: Vec<(u64, u64, ThreadState)> =
        got.iter().map(|o| (o.time, o.duration, o.state)).collect();
    assert_eq!(
        pieces,
        vec![
            (1_000, 4_000, ThreadState::Io),
            (5_000, 4_000, ThreadState::Runnable)
        ]
    );
    // 8 comes back on CPU 0 after 7 left CPU 1: not its successor.
    t.switch_out(1, 7, 1, 20_000, true);
    assert_eq!(t.switch_in(8, 0, 20_500).pop().unwrap().duration, 11_500);
    // Too long after the switch-out: the CPU ran something else in between.
    t.switch_out(1, 8, 0, 30_000, true);
    assert_eq!(
        t.switch_in(7, 0, 30_000 + HANDOFF_WINDOW_NS + 1)
            .pop()
            .unwrap()
            .duration,
        HANDOFF_WINDOW_NS + 1 + 10_000,
        "7 waited from 20_000 to its SWITCH-in"
    );
    // A stranger ran in between: its switch to 7 was sampled, and that decides.
    t.switch_out(1, 7, 0, 200_000, true);
    t.switch_in(8, 0, 200_100);
    t.switch_out(1, 8, 0, 300_000, true);
    assert!(t.switching_in(7, 300_500));
    assert_eq!(t.switch_in(7, 0, 301_000).pop().unwrap().duration, 100_500);
    // Its own switch-out is no handoff.
    t.switch_out(1, 7, 0, 400_000, true);
    assert_eq!(t.switch_in(7, 0, 400_300).pop().unwrap().duration, 300);
}

/// Coverage by stacks with `--off-cpu` (issue 28): a thread's stretch on the CPU
/// begins where its wait ended, where the kernel picked it and started its clock, not
/// at its SWITCH-in record. `switched_in` says where: the `sched_switch` sample, the
/// switch-out of the thread it followed, else nothing (the record's own time).
#[test]
fn a_switch_in_says_where_the_kernel_picked_the_thread() {
    let mut t = Tracker::default();
    t.new_thread(1, 7, 0);
    t.new_thread(1, 8, 0);
    // Picked at 900 (its `sched_switch` sample), switched in at 1_000.
    assert!(t.switching_in(7, 900));
    let (pieces, picked) = t.switched_in(7, 0, 1_000);
    assert_eq!((pieces[0].duration, picked), (900, Some(900)));
    // 7 leaves CPU 0 (sampled at 5_000, its record at 5_006); 8 follows it there.
    t.state_sample(7, 5_000, Some(ThreadState::Io), SITE, None);
    t.switch_out(1, 7, 0, 5_006, false);
    let (pieces, picked) = t.switched_in(8, 0, 5_010);
    assert_eq!((pieces[0].duration, picked), (5_000, Some(5_000)));
    // Neither: 7 comes back on CPU 1 with nothing before its record.
    assert_eq!(t.switched_in(7, 1, 9_000).1, Some(9_000));
    // A switch-in with no wait open (its first, say) still says where it was picked.
    let mut t = Tracker::default();
    t.seen.insert(9);
    assert!(t.switching_in(9, 300));
    assert_eq!(t.switched_in(9, 0, 400), (vec![], Some(300)));
    assert_eq!(t.switched_in(9, 0, 500), (vec![], None));
}

#[test]
fn switch_outs_sampled_without_kernel_frames_take_their_sites_state() {
    let mut t = Tracker::default();
    // A site whose state no kernel frames named yet: `other`, counted.
    t.state_sample(7, 500, None, SITE, None);
    t.switch_out(1, 7, 0, 510, false);
    let o = t.switch_in(7, 0, 900).pop().unwrap();
    assert_eq!(o.state, ThreadState::Other);
    assert_eq!((t.counts.site_unnamed, t.counts.named_by_site), (1, 0));
    // The stack event's sample names it (its kernel frames) ...
    t.stack_sample(7, 1_000, Some(3), ThreadState::Lock, SITE);
    t.switch_out(1, 7, 0, 1_010, false);
    t.switch_in(7, 0, 2_000);
    // ... and a later switch-out there without them takes it, with its stack.
    t.state_sample(7, 3_000, None, SITE, None);
    t.switch_out(1, 7, 0, 3_010, false);
    let o = t.switch_in(7, 0, 4_000).pop().unwrap();
    assert_eq!((o.state, o.stack), (ThreadState::Lock, Some(3)));
    assert_eq!(t.counts.named_by_site, 1);
    // Preempted there: runnable, and what a preemption's frames name is not learnt.
    t.stack_sample(7, 5_000, Some(4), ThreadState::Runnable, SITE);
    t.switch_out(1, 7, 0, 5_010, true);
    let o = t.switch_in(7, 0, 6_000).pop().unwrap();
    assert_eq!(o.state, ThreadState::Runnable);
    t.state_sample(7, 7_000, None, SITE, None);
    t.switch_out(1, 7, 0, 7_010, false);
    assert_eq!(
        t.switch_in(7, 0, 8_000).pop().unwrap().state,
        ThreadState::Lock
    );
    // Another site of the same thread, and the same site of another thread: unknown.
    t.state_sample(7, 9_000, None, (1, 2), None);
    t.switch_out(1, 7, 0, 9_010, false);
    assert_eq!(
        t.switch_in(7, 0, 9_500).pop().unwrap().state,
        ThreadState::Other
    );
    t.state_sample(8, 9_000, None, SITE, None);
    t.switch_out(1, 8, 1, 9_010, false);
    assert_eq!(
        t.switch_in(8, 1, 9_500).pop().unwrap().state,
        ThreadState::Other
    );
    assert_eq!(
        (
            t.counts.site_unnamed,
            t.counts.named_by_site,
            t.counts.unnamed
        ),
        (3, 2, 0)
    );
    // A thread's sites go with it.
    t.thread_exit(7);
    assert!(t.site_states.is_empty());
}
