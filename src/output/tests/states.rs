//! What the model makes of threads' states: each thread's states add up to its life,
//! the state filter, intervals with and without a stack, and the coverage line that
//! counts CPU samples only.

use super::*;

#[test]
fn every_threads_states_add_up_to_its_life() {
    let p = model(true);
    let states = p.thread_states();
    let by_name = |n: &str| p.threads.iter().position(|t| t.name == n).unwrap();
    let main = states[by_name("main")];
    let worker = states[by_name("worker")];
    assert_eq!(main[ThreadState::Running as usize], 400 * MS);
    assert_eq!(main[ThreadState::Lock as usize], 600 * MS);
    assert_eq!(worker[ThreadState::Running as usize], 100 * MS);
    assert_eq!(worker[ThreadState::Sleep as usize], 800 * MS);
    // Each thread's states sum to its life in the recording.
    assert_eq!(p.spans[by_name("main")], (0, 1000 * MS));
    assert_eq!(p.spans[by_name("worker")], (100 * MS, 1000 * MS));
    assert_eq!(main.iter().sum::<u64>(), 1000 * MS);
    assert_eq!(worker.iter().sum::<u64>(), 900 * MS);
}

#[test]
fn state_filter_keeps_only_those_states() {
    let p = model(true);
    let mut f = Filter {
        states: vec![ThreadState::Lock],
        ..Filter::default()
    };
    let locks = p.filter(&f).unwrap();
    assert_eq!(
        folded(&locks, false),
        [(
            "main;take_lock;futex_wait_[k];[off-cpu: lock]".to_owned(),
            600 * MS
        )]
    );
    assert_eq!(f.describe(), "state lock");
    f.states = vec![ThreadState::Running, ThreadState::Sleep];
    let kept = p.filter(&f).unwrap();
    assert_eq!(kept.total_weight(), 500 * MS + 800 * MS);
    // The timeline's intervals follow the filter too.
    assert!(kept.intervals.iter().all(|i| i.state == ThreadState::Sleep));
    assert_eq!(kept.intervals.len(), 2);
}

/// A recording of one thread's off-CPU intervals only (no CPU samples).
fn intervals_only(intervals: &[(u64, ThreadState, Option<u64>)]) -> Profile {
    let meta = Meta {
        start_time_ns: START,
        off_cpu: true,
        ..Meta::default()
    };
    let mut w = RecordingWriter::new(Vec::new(), &meta).unwrap();
    let stack = w.intern_stack(&[
        frame(FrameKind::User, 0x5000),
        frame(FrameKind::Return, 0x1000),
    ]);
    let mut t = START;
    for &(duration, state, period) in intervals {
        w.off_cpu(&OffCpu {
            time: t,
            pid: 1,
            tid: 1,
            cpu: 0,
            duration,
            state,
            weight: period.map_or(0, |p| p * duration),
            stack: period.and(stack),
        });
        t += duration + 1000;
    }
    let wrapper = w.frames().iter().position(|f| f.addr == 0x5000).unwrap() as u32;
    w.symbols(&[FrameSymbols {
        frame: wrapper,
        source: SymbolSource::Native,
        lines: vec![SymbolLine {
            function: "__GI___nanosleep".into(),
            file: None,
            line: None,
            inlined: false,
        }],
    }])
    .unwrap();
    let bytes = w.finish(&Summary::default()).unwrap();
    let rec = Recording::from_bytes(&bytes, "t").unwrap();
    Profile::from_recording(&rec, ProfileOptions::default())
}

#[test]
fn stacked_intervals_stand_for_their_states_whole_time() {
    use ThreadState::*;
    // Lock 100 ns with a stack; sleep 300 ns with a stack and 400 ns without one:
    // the sleep stack stands for all 700 ns. Runnable 50 ns without any stack in the
    // state: counted as is, under the state frame alone.
    let p = intervals_only(&[
        (100, Lock, Some(1)),
        (300, Sleep, Some(1)),
        (400, Sleep, None),
        (50, Runnable, None),
    ]);
    let s = p.thread_states()[0];
    assert_eq!(
        (s[Lock as usize], s[Sleep as usize], s[Runnable as usize]),
        (100, 700, 50)
    );
    // Raw weights other than the duration are scaled to the state's total.
    let p = intervals_only(&[(100, Io, Some(3)), (500, Io, None)]);
    assert_eq!(p.thread_states()[0][Io as usize], 600);
    assert_eq!(p.intervals.len(), 2, "every interval stays on the timeline");
}

#[test]
fn user_only_recordings_are_classified_by_their_syscall_wrapper() {
    let p = intervals_only(&[(1000, ThreadState::Other, Some(1))]);
    assert_eq!(p.thread_states()[0][ThreadState::Sleep as usize], 1000);
    assert_eq!(p.intervals[0].state, ThreadState::Sleep);
}

/// The coverage line is about CPU time: off-CPU intervals count in neither its stacks
/// nor its `[unsampled]` part (an off-CPU recording said "CPU time: 4.4 s" for 0.43 s).
#[test]
fn coverage_counts_cpu_samples_only() {
    let (with, without) = (model(true), model(false));
    let cpu: u64 = without.samples.iter().map(|s| s.weight).sum();
    assert!(with.samples.iter().any(|s| s.state != ThreadState::Running));
    let c = with.coverage();
    assert_eq!(c.sampled_ns + c.unsampled_ns, cpu);
    assert_eq!(without.coverage(), c);
}
