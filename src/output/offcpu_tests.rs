//! Off-CPU (wall-time) profiles through the model and every output, on a recording
//! built with the writer: two threads whose time per state is known by construction.

use crate::format::{
    Frame, FrameKind, FrameSymbols, Meta, OffCpu, Recording, RecordingWriter, Sample, Summary,
    SymbolLine, SymbolSource, ThreadEvent, ThreadState,
};
use crate::profile::filter::Filter;
use crate::profile::{Profile, ProfileOptions};

const START: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;

fn frame(kind: FrameKind, addr: u64) -> Frame {
    Frame {
        kind,
        pid: if kind == FrameKind::Kernel { 0 } else { 10 },
        addr,
        mapping: None,
    }
}

/// Thread `main` (tid 10): 400 ms running in `compute`, 600 ms waiting on a lock in
/// `take_lock` (kernel `futex_wait`). Thread `worker` (tid 11, born at 100 ms):
/// 100 ms running in `compute`, then 800 ms asleep in `nap`. One second in all.
pub(crate) fn recording(off_cpu: bool) -> Recording {
    let meta = Meta {
        tool_version: "test".into(),
        command: vec!["app".into()],
        event: "task-clock".into(),
        sample_period_ns: 10 * MS,
        frequency_hz: 100,
        call_graph: crate::format::CallGraph::Dwarf,
        start_time_ns: START,
        off_cpu,
        ..Meta::default()
    };
    let mut w = RecordingWriter::new(Vec::new(), &meta).unwrap();
    for (tid, name) in [(10, "main"), (11, "worker")] {
        w.thread_event(&ThreadEvent::Name {
            time: START,
            pid: 10,
            tid,
            name: name.into(),
        });
    }
    w.thread_event(&ThreadEvent::Start {
        time: START + 100 * MS,
        pid: 10,
        ppid: 10,
        tid: 11,
    });
    let (main_f, compute, take_lock, nap) = (0x1000, 0x2000, 0x3000, 0x4000);
    let (futex_wait, hrtimer_sleep) = (0xffff_0000, 0xffff_1000);
    let cpu_stack = w.intern_stack(&[
        frame(FrameKind::User, compute),
        frame(FrameKind::Return, main_f),
    ]);
    let lock_stack = w.intern_stack(&[
        frame(FrameKind::Kernel, futex_wait),
        frame(FrameKind::User, take_lock),
        frame(FrameKind::Return, main_f),
    ]);
    let sleep_stack = w.intern_stack(&[
        frame(FrameKind::Kernel, hrtimer_sleep),
        frame(FrameKind::User, nap),
        frame(FrameKind::Return, main_f),
    ]);
    // main: runs 0-400 ms (40 samples), blocked 400-1000 ms.
    for i in 0..40 {
        w.sample(&Sample {
            time: START + (i + 1) * 10 * MS,
            pid: 10,
            tid: 10,
            cpu: 0,
            weight: 10 * MS,
            stack: cpu_stack,
        });
    }
    // worker: runs 100-200 ms (10 samples), sleeps 200-1000 ms.
    for i in 0..10 {
        w.sample(&Sample {
            time: START + 100 * MS + (i + 1) * 10 * MS,
            pid: 10,
            tid: 11,
            cpu: 1,
            weight: 10 * MS,
            stack: cpu_stack,
        });
    }
    if off_cpu {
        w.off_cpu(&OffCpu {
            time: START + 400 * MS,
            pid: 10,
            tid: 10,
            cpu: 0,
            duration: 600 * MS,
            state: ThreadState::Lock,
            weight: 600 * MS,
            stack: lock_stack,
        });
        // Worker sleeps in two stretches, one of them without a stack whose time the
        // other's stack carries (bounded-rate recording).
        w.off_cpu(&OffCpu {
            time: START + 200 * MS,
            pid: 10,
            tid: 11,
            cpu: 1,
            duration: 400 * MS,
            state: ThreadState::Sleep,
            weight: 800 * MS,
            stack: sleep_stack,
        });
        w.off_cpu(&OffCpu {
            time: START + 600 * MS,
            pid: 10,
            tid: 11,
            cpu: 1,
            duration: 400 * MS,
            state: ThreadState::Sleep,
            weight: 0,
            stack: None,
        });
    }
    let line = |f: &str| SymbolLine {
        function: f.into(),
        file: None,
        line: None,
        inlined: false,
    };
    let names = [
        (compute, "compute", SymbolSource::Native),
        (main_f - 1, "main", SymbolSource::Native),
        (take_lock, "take_lock", SymbolSource::Native),
        (nap, "nap", SymbolSource::Native),
        (futex_wait, "futex_wait", SymbolSource::Kernel),
        (hrtimer_sleep, "hrtimer_sleep", SymbolSource::Kernel),
    ];
    let symbols: Vec<FrameSymbols> = w
        .frames()
        .iter()
        .enumerate()
        .filter_map(|(i, f)| {
            let at = f.kind.lookup_address(f.addr);
            names
                .iter()
                .find(|(a, _, _)| *a == at)
                .map(|&(_, n, source)| FrameSymbols {
                    frame: i as u32,
                    source,
                    lines: vec![line(n)],
                })
        })
        .collect();
    w.symbols(&symbols).unwrap();
    let bytes = w
        .finish(&Summary {
            end_time_ns: START + 1000 * MS,
            samples: 50,
            stop_reason: crate::format::StopReason::Duration,
            ..Summary::default()
        })
        .unwrap();
    Recording::from_bytes(&bytes, "t").unwrap()
}

fn model(off_cpu: bool) -> Profile {
    Profile::from_recording(&recording(off_cpu), ProfileOptions::default())
}

fn folded(p: &Profile, per_thread: bool) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let opts = super::folded::FoldedOptions::per_thread(per_thread);
    super::folded::write(p, opts, &mut out).unwrap();
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| {
            let (s, n) = l.rsplit_once(' ').unwrap();
            (s.to_owned(), n.parse().unwrap())
        })
        .collect()
}

#[test]
fn folded_off_cpu_stacks_end_in_their_state_frame_weighted_by_time() {
    let p = model(true);
    let lines = folded(&p, true);
    assert_eq!(
        lines,
        [
            (
                "main;tid 10;main;take_lock;futex_wait_[k];[off-cpu: lock]".to_owned(),
                600 * MS
            ),
            ("main;tid 10;main;compute".to_owned(), 400 * MS),
            (
                "worker;tid 11;main;nap;hrtimer_sleep_[k];[off-cpu: sleep]".to_owned(),
                800 * MS
            ),
            ("worker;tid 11;main;compute".to_owned(), 100 * MS),
        ]
        .into_iter()
        .collect::<std::collections::BTreeMap<_, _>>()
        .into_iter()
        .collect::<Vec<_>>()
    );
}

#[test]
fn cpu_only_folded_output_is_unchanged() {
    let p = model(false);
    assert!(!p.is_wall_time());
    assert_eq!(folded(&p, false), [("main;compute".to_owned(), 50)]);
    assert!(p.intervals.is_empty());
}

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

#[test]
fn json_gives_every_threads_states() {
    let p = model(true);
    let mut out = Vec::new();
    super::json::write(&p, "", None, &mut out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let threads = v["threads"].as_array().unwrap();
    let main = threads.iter().find(|t| t["name"] == "main").unwrap();
    let expect = serde_json::json!({
        "running": 400 * MS, "runnable": 0, "sleep": 0, "wait": 0, "lock": 600 * MS, "io": 0,
        "other": 0
    });
    assert_eq!(main["states"], expect);
    assert_eq!(main["cpu_ns"], 400 * MS);
    assert_eq!(main["wall_ns"], 1000 * MS);
    assert_eq!(v["totals"]["wall_ns"], 1900 * MS);
    assert_eq!(v["totals"]["cpu_ns"], 500 * MS);
    let take_lock = v["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "take_lock")
        .unwrap();
    assert_eq!(take_lock["states"]["lock"], 600 * MS);
    // CPU-only JSON has no state fields at all.
    let mut out = Vec::new();
    super::json::write(&model(false), "", None, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(
        !text.contains("states") && !text.contains("wall_ns"),
        "{text}"
    );
}

#[test]
fn top_table_has_a_column_per_state() {
    let p = model(true);
    let mut out = Vec::new();
    super::top::write(&p, 20, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let header = text.lines().next().unwrap();
    for s in ["running", "runnable", "sleep", "lock", "io", "other"] {
        assert!(header.contains(s), "{header}");
    }
    let lock_row = text.lines().find(|l| l.ends_with("take_lock")).unwrap();
    assert!(lock_row.contains("600.0 ms"), "{lock_row}");
    let main_row = text.lines().find(|l| l.ends_with(" main")).unwrap();
    // main's total: 500 ms running, 600 ms lock, 800 ms sleep.
    let cells: Vec<&str> = main_row.split_whitespace().collect();
    assert!(main_row.contains("1.90 s"), "{main_row}");
    assert!(
        cells.contains(&"500.0") && cells.contains(&"800.0"),
        "{cells:?}"
    );
}

#[test]
fn pprof_has_a_wall_sample_type_beside_cpu() {
    let p = model(true);
    let bytes = super::pprof::encode(&p);
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains("wall") && text.contains("cpu") && text.contains("state"));
    let cpu_only = super::pprof::encode(&model(false));
    assert!(!String::from_utf8_lossy(&cpu_only).contains("wall"));
}

#[test]
fn flame_graph_colours_off_cpu_frames_blue_and_says_so() {
    let p = model(true);
    let mut out = Vec::new();
    let opts = super::flamegraph::FlameGraphOptions::default();
    super::flamegraph::write(&p, &opts, &mut out).unwrap();
    let svg = String::from_utf8(out).unwrap();
    assert!(svg.contains("[off-cpu: lock]") && svg.contains("[off-cpu: sleep]"));
    let (r, g, b) = super::state_colour(ThreadState::Wait);
    assert!(
        svg.contains(&format!(r#"<tspan fill="rgb({r},{g},{b})">■</tspan> wait"#)),
        "subtitle legend"
    );
    // The legend does not widen the drawing past its default width.
    assert!(svg.contains(r#"<svg version="1.1" width="1200""#), "{svg}");
    assert!(svg.contains("of wall time"));
    let (r, g, b) = super::state_colour(ThreadState::Lock);
    assert!(
        svg.contains(&format!("rgb({r},{g},{b})")),
        "lock frame in its blue"
    );
    for s in ThreadState::ALL.into_iter().filter(|s| s.is_off_cpu()) {
        let (r, g, b) = super::state_colour(s);
        assert!(b > r && b > g, "{s:?} is blue");
    }
}

#[test]
fn timeline_has_a_row_per_thread_coloured_by_state() {
    let p = model(true);
    let mut out = Vec::new();
    super::timeline::write(&p, &super::timeline::TimelineOptions::default(), &mut out).unwrap();
    let svg = String::from_utf8(out).unwrap();
    assert_eq!(svg.matches(r#"<g class="row""#).count(), 2);
    assert!(svg.contains(">main 10</text>") && svg.contains(">worker 11</text>"));
    // Legend: one entry per state.
    for s in ThreadState::ALL {
        assert!(svg.contains(&format!(">{}</text>", s.name())), "{s:?}");
    }
    // main: running then lock; worker: running then sleep (one merged run).
    assert!(
        svg.contains("<title>lock: 600.0 ms in take_lock ← main</title>"),
        "{svg}"
    );
    assert!(svg.contains("<title>running: 400.0 ms in compute ← main</title>"));
    assert!(svg.contains("<title>sleep: 800.0 ms in nap ← main</title>"));
    assert_eq!(
        svg.matches("<rect class=\"s").count(),
        ThreadState::COUNT + 4
    );
    // Worker's row starts where it was born: a tenth of the way across.
    let x = svg
        .split("<g class=\"row\" data-tid=\"11\"")
        .nth(1)
        .and_then(|r| r.split("<rect class=\"s0\" x=\"").nth(1))
        .and_then(|r| r.split('"').next())
        .unwrap()
        .parse::<f64>()
        .unwrap();
    assert!((x - (260.0 + 120.0)).abs() < 1.0, "{x}");
}

#[test]
fn timeline_axis_follows_the_time_window() {
    // `report --time 0.3..0.7 --timeline`: the model filtered, the axis cut to the window.
    let time: crate::profile::filter::TimeRange = "0.3..0.7".parse().unwrap();
    let f = Filter {
        time,
        ..Filter::default()
    };
    let p = model(true).filter(&f).unwrap();
    let opts = super::timeline::TimelineOptions {
        time,
        ..Default::default()
    };
    let mut out = Vec::new();
    super::timeline::write(&p, &opts, &mut out).unwrap();
    let svg = String::from_utf8(out).unwrap();
    assert!(svg.contains("0.40 s (0.300 s to 0.700 s)"), "{svg}");
    // Ticks every 50 ms from the window's start to its end, none outside.
    let axis = svg.split("<g class=\"axis\"").nth(1).unwrap();
    let axis = axis.split("</g>").next().unwrap();
    let ticks: Vec<&str> = axis
        .split("text-anchor=\"middle\">")
        .skip(1)
        .map(|t| t.split('<').next().unwrap())
        .collect();
    assert_eq!(ticks.first(), Some(&"0.30 s"), "{ticks:?}");
    assert_eq!(ticks.last(), Some(&"0.70 s"), "{ticks:?}");
    assert_eq!(ticks.len(), 9, "{ticks:?}");
    // main runs 300-400 ms, then waits on the lock to 700 ms: its row holds only the
    // window's time, the lock stretch starting a quarter of the way across.
    let main = svg
        .split("<g class=\"row\" data-tid=\"10\"")
        .nth(1)
        .unwrap();
    let main = main.split("</g>").next().unwrap();
    assert!(main.contains("running: 100.0 ms (25.0%)"), "{main}");
    assert!(main.contains("lock: 300.0 ms (75.0%)"), "{main}");
    let lock_x = main
        .split("<rect class=\"s3\" x=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap()
        .parse::<f64>()
        .unwrap();
    assert!((lock_x - (260.0 + 300.0)).abs() < 1.0, "{lock_x}");
    // worker sleeps through the whole window.
    let worker = svg
        .split("<g class=\"row\" data-tid=\"11\"")
        .nth(1)
        .unwrap();
    let worker = worker.split("</g>").next().unwrap();
    assert!(worker.contains("sleep: 400.0 ms (100.0%)"), "{worker}");
}

#[test]
fn timeline_stays_small_for_many_busy_threads() {
    // 1,000 threads changing state every 150 ms for 60 s (800 runs a row at full
    // width): the budget widens the columns, so the file stays a few MB.
    let meta = Meta {
        start_time_ns: START,
        off_cpu: true,
        ..Meta::default()
    };
    let mut w = RecordingWriter::new(Vec::new(), &meta).unwrap();
    for tid in 0..1000u32 {
        let mut t = START;
        while t < START + 60_000 * MS {
            w.off_cpu(&OffCpu {
                time: t + MS,
                pid: 1,
                tid,
                cpu: 0,
                duration: MS,
                state: if tid % 2 == 0 {
                    ThreadState::Io
                } else {
                    ThreadState::Runnable
                },
                weight: MS,
                stack: None,
            });
            t += 150 * MS + u64::from(tid) * 10_000;
        }
        if tid % 100 == 99 {
            w.flush_chunk().unwrap();
        }
    }
    let bytes = w
        .finish(&Summary {
            end_time_ns: START + 60_000 * MS,
            ..Summary::default()
        })
        .unwrap();
    let rec = Recording::from_bytes(&bytes, "t").unwrap();
    let p = Profile::from_recording(&rec, ProfileOptions::default());
    let mut out = Vec::new();
    super::timeline::write(&p, &super::timeline::TimelineOptions::default(), &mut out).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out)
            .matches(r#"<g class="row""#)
            .count(),
        1000
    );
    assert!(out.len() < 8 << 20, "{} bytes", out.len());
}

#[test]
fn diff_counts_off_cpu_time_in_sample_periods() {
    let p = model(true);
    let run = crate::diff::input::Run::from_profile(&p, "t".into());
    // 50 CPU samples of 10 ms, 600 ms + 800 ms off CPU = 140 periods.
    assert_eq!(run.samples, 50 + 140);
    let line = |stack: &[u32]| {
        let names: Vec<&str> = stack
            .iter()
            .map(|&l| run.frames[l as usize].text.as_str())
            .collect();
        names.join(";")
    };
    let lock = run
        .stacks
        .iter()
        .find(|(s, _)| line(s) == "main;take_lock;futex_wait_[k];[off-cpu: lock]")
        .unwrap();
    assert_eq!(lock.1.samples, 60);
    assert_eq!(run.cpu_ns, 1900 * MS);
    // A CPU-only recording counts samples as before.
    let cpu = crate::diff::input::Run::from_profile(&model(false), "t".into());
    assert_eq!(cpu.samples, 50);
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
