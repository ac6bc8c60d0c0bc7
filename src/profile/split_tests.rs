//! Running and runnable re-split to the kernel's clock, on recordings built with the
//! writer: each thread's running is its clock and its states still add up to its life.

use crate::format::{
    Frame, FrameKind, Meta, OffCpu, Recording, RecordingWriter, Sample, Summary, ThreadClock,
    ThreadState,
};
use crate::profile::{Profile, ProfileOptions};

const START: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;

/// A recording's header: `app` sampled every 10 ms, with `--off-cpu` or not.
fn meta(off_cpu: bool) -> Meta {
    Meta {
        tool_version: "test".into(),
        command: vec!["app".into()],
        event: "task-clock".into(),
        sample_period_ns: 10 * MS,
        frequency_hz: 100,
        start_time_ns: START,
        off_cpu,
        ..Meta::default()
    }
}

/// Threads of pid 10, each running 500 ms in 50 samples then off the CPU for 500 ms:
/// `runnable` ms of it waiting for a CPU (none: no runnable interval), the rest asleep.
/// `clocks`: (tid, its clock, its stretches). `lost`: records the kernel dropped.
fn recording(threads: &[(u32, u64)], clocks: &[(u32, u64, u64)], lost: u64) -> Recording {
    let mut w = RecordingWriter::new(Vec::new(), &meta(true)).unwrap();
    let stack = w.intern_stack(&[Frame {
        kind: FrameKind::User,
        pid: 10,
        addr: 0x1000,
        mapping: None,
    }]);
    for &(tid, runnable) in threads {
        for i in 0..50 {
            w.sample(&Sample {
                time: START + (i + 1) * 10 * MS,
                pid: 10,
                tid,
                cpu: 0,
                weight: 10 * MS,
                stack,
            });
        }
        let interval = |time: u64, duration: u64, state| OffCpu {
            time: START + time,
            pid: 10,
            tid,
            cpu: 0,
            duration,
            state,
            weight: duration,
            stack,
        };
        w.off_cpu(&interval(500 * MS, 500 * MS - runnable, ThreadState::Sleep));
        if runnable > 0 {
            w.off_cpu(&interval(
                1000 * MS - runnable,
                runnable,
                ThreadState::Runnable,
            ));
        }
    }
    let bytes = w
        .finish(&Summary {
            end_time_ns: START + 1000 * MS,
            samples: 50 * threads.len() as u64,
            lost,
            thread_clocks: clocks
                .iter()
                .map(|&(tid, clock_ns, ran_ns)| ThreadClock {
                    pid: 10,
                    tid,
                    clock_ns,
                    ran_ns,
                })
                .collect(),
            ..Summary::default()
        })
        .unwrap();
    Recording::from_bytes(&bytes, "t").unwrap()
}

/// Each thread's (running, runnable, sleep) and its states' sum, by tid.
fn states(rec: &Recording) -> Vec<(u32, [u64; 3], u64)> {
    let p = Profile::from_recording(rec, ProfileOptions::default());
    let states = p.thread_states();
    let mut out: Vec<_> = p
        .threads
        .iter()
        .zip(&states)
        .map(|(t, s)| {
            let of = |st: ThreadState| s[st as usize];
            (
                t.tid,
                [
                    of(ThreadState::Running),
                    of(ThreadState::Runnable),
                    of(ThreadState::Sleep),
                ],
                s.iter().fold(0u64, |a, &b| a.saturating_add(b)),
            )
        })
        .collect();
    out.sort_unstable();
    out
}

/// The kernel counted 50 ms of thread 1's stretches as run-queue delay (its clock
/// 450 ms), and 30 ms of thread 2's wait as CPU time (530 ms): running is each clock,
/// runnable takes the difference, and the states still add up to the second.
#[test]
fn running_is_the_clock_and_runnable_takes_the_difference() {
    let rec = recording(
        &[(1, 100 * MS), (2, 100 * MS)],
        &[(1, 450 * MS, 500 * MS), (2, 530 * MS, 500 * MS)],
        0,
    );
    assert_eq!(
        states(&rec),
        [
            (1, [450 * MS, 150 * MS, 400 * MS], 1000 * MS),
            (2, [530 * MS, 70 * MS, 400 * MS], 1000 * MS),
        ]
    );
}

/// Runnable never goes below nothing: a thread whose clock exceeds its stretches by
/// more than it waited keeps the rest as running. A thread with no runnable interval
/// gets the kernel's runnable time under the state's frame alone.
#[test]
fn runnable_is_never_negative_and_needs_no_interval() {
    let rec = recording(
        &[(1, 20 * MS), (2, 0)],
        &[(1, 560 * MS, 500 * MS), (2, 480 * MS, 500 * MS)],
        0,
    );
    assert_eq!(
        states(&rec),
        [
            (1, [520 * MS, 0, 480 * MS], 1000 * MS),
            (2, [480 * MS, 20 * MS, 500 * MS], 1000 * MS),
        ]
    );
}

/// With records lost a wait may be unmeasured: running is still the clock, runnable
/// is what its intervals measured. A clock far from the stretches (another thread's
/// that reused the id) and a thread without a clock are left as recorded.
#[test]
fn lost_records_a_far_clock_or_none_leave_runnable_as_measured() {
    let rec = recording(&[(1, 100 * MS)], &[(1, 450 * MS, 500 * MS)], 3);
    assert_eq!(
        states(&rec),
        [(1, [450 * MS, 100 * MS, 400 * MS], 950 * MS)]
    );
    let rec = recording(
        &[(1, 100 * MS), (2, 100 * MS)],
        &[(1, 2000 * MS, 500 * MS)],
        0,
    );
    assert_eq!(
        states(&rec),
        [
            (1, [500 * MS, 100 * MS, 400 * MS], 1000 * MS),
            (2, [500 * MS, 100 * MS, 400 * MS], 1000 * MS),
        ]
    );
}

/// A recording passed around may say anything: clocks at the top of the range
/// saturate, they never wrap or panic.
#[test]
fn clocks_at_the_top_of_the_range_saturate() {
    let rec = recording(
        &[(1, 100 * MS), (2, 100 * MS)],
        &[(1, u64::MAX, u64::MAX), (2, u64::MAX / 2, u64::MAX / 2 + 1)],
        0,
    );
    let s = states(&rec);
    assert!(s.iter().all(|(_, st, _)| st[0] >= u64::MAX / 4), "{s:?}");
}

/// Without `--off-cpu` the summary names threads whose samples weigh more than their
/// clock: thread 1's 500 ms of samples are scaled to its 400 ms clock, each sample
/// alike; thread 2, named with a clock above what its samples weigh (a figure from
/// another reading), keeps them.
#[test]
fn cpu_recordings_scale_threads_past_their_clock_down_to_it() {
    let mut w = RecordingWriter::new(Vec::new(), &meta(false)).unwrap();
    let frame = |addr| Frame {
        kind: FrameKind::User,
        pid: 10,
        addr,
        mapping: None,
    };
    let (a, b) = (
        w.intern_stack(&[frame(0x1000)]),
        w.intern_stack(&[frame(0x2000)]),
    );
    for tid in [1, 2] {
        for i in 0..50 {
            w.sample(&Sample {
                time: START + (i + 1) * 10 * MS,
                pid: 10,
                tid,
                cpu: 0,
                weight: 10 * MS,
                stack: if i % 5 == 0 { b } else { a },
            });
        }
    }
    let clock = |tid, clock_ns| ThreadClock {
        pid: 10,
        tid,
        clock_ns,
        ran_ns: 500 * MS,
    };
    let bytes = w
        .finish(&Summary {
            end_time_ns: START + 1000 * MS,
            samples: 100,
            thread_clocks: vec![clock(1, 400 * MS), clock(2, 600 * MS)],
            ..Summary::default()
        })
        .unwrap();
    let rec = Recording::from_bytes(&bytes, "t").unwrap();
    let p = Profile::from_recording(&rec, ProfileOptions::default());
    let of = |tid: u32| -> Vec<u64> {
        p.samples
            .iter()
            .filter(|s| p.thread(s.thread).tid == tid)
            .map(|s| s.weight)
            .collect()
    };
    assert_eq!(of(1).iter().sum::<u64>(), 400 * MS);
    assert!(of(1).iter().all(|&w| w == 8 * MS));
    assert_eq!(of(2).iter().sum::<u64>(), 500 * MS);
}
