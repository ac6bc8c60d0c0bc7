//! The timeline on hand-made profiles: the axis, and states in proportion.

use super::*;
use crate::profile::{Function, Interval, ProfileSample, Thread};

/// One thread, one function, a sample at 1 ms and `samples`/`intervals` more.
fn profile(wall: bool, samples: &[(u64, u64)], intervals: &[(u64, u64)]) -> Profile {
    let mut p = Profile {
        functions: vec![Function {
            name: "f".into(),
            class: FrameClass::Native,
            file: None,
            line: None,
        }],
        stacks: vec![vec![FunctionIndex(0)]],
        threads: vec![Thread {
            pid: 1,
            tid: 1,
            name: "t".into(),
            process: "t".into(),
            group: None,
            service: None,
            container: None,
            exe: None,
            program: "t".into(),
        }],
        ..Profile::default()
    };
    p.meta.off_cpu = wall;
    for &(time, weight) in [(1_000_000, 1_000_000)].iter().chain(samples) {
        p.samples.push(ProfileSample {
            time,
            thread: ThreadIndex(0),
            weight,
            stack: StackIndex(0),
            state: ThreadState::Running,
        });
    }
    for &(time, duration) in intervals {
        p.intervals.push(Interval {
            thread: ThreadIndex(0),
            time,
            duration,
            state: ThreadState::Sleep,
            stack: None,
        });
    }
    p
}

fn draw(p: &Profile) -> String {
    let mut out = Vec::new();
    write(p, &TimelineOptions::default(), &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// Fuzzing (issue 14): a sample time near u64::MAX, one changed byte in a
/// recording, made the axis loop step past u64::MAX and wrap, writing ticks until
/// a wrap happened to land past the end: 361 MB of SVG from a 2.4 KB file in
/// release builds, an overflow panic in debug ones. The axis has about ten ticks
/// whatever the times.
#[test]
fn times_near_u64_max_give_a_ten_tick_axis() {
    for p in [
        profile(false, &[(u64::MAX - 5, 3_344_481), (u64::MAX, 0)], &[]),
        profile(true, &[], &[(u64::MAX - 10, 1_000), (5, u64::MAX)]),
        profile(false, &[(18_446_737_943_050_000_000, 3_344_481)], &[]),
    ] {
        let svg = draw(&p);
        let ticks = svg.matches("<line ").count();
        assert!((1..=12).contains(&ticks), "{ticks} ticks");
        assert!(svg.len() < 16_384, "{} bytes", svg.len());
    }
}

/// An ordinary recording keeps its round-second ticks: 0 s to 2 s.
#[test]
fn a_two_second_recording_has_ticks_every_200_ms() {
    let svg = draw(&profile(false, &[(2_000_000_000, 1_000_000)], &[]));
    assert_eq!(svg.matches("<line ").count(), 11);
    assert!(svg.contains(">0.0 s</text>"), "{svg}");
    assert!(svg.contains(">0.2 s</text>"), "{svg}");
    assert!(svg.contains(">2.0 s</text>"), "{svg}");
}

/// Issue 28: a thread that runs 30 µs out of every 600 µs is asleep in every
/// pixel's majority; each pixel still shows its running share, at any width, and
/// the row says its totals.
#[test]
fn every_pixel_shows_its_states_in_proportion() {
    let intervals: Vec<(u64, u64)> = (0..3_333u64).map(|i| (i * 600_000, 570_000)).collect();
    let p = profile(true, &[], &intervals);
    for width in [1200, 300] {
        let mut out = Vec::new();
        let opts = TimelineOptions {
            width,
            ..TimelineOptions::default()
        };
        write(&p, &opts, &mut out).unwrap();
        let svg = String::from_utf8(out).unwrap();
        // Running strips span (nearly) the whole axis, each a twentieth of the row.
        let running: Vec<(f64, f64)> = svg
            .lines()
            .filter(|l| l.starts_with(r#"<rect class="s0""#) && l.contains("<title>"))
            .map(|l| {
                let attr = |name: &str| -> f64 {
                    let at = l.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
                    l[at..].split('"').next().unwrap().parse().unwrap()
                };
                (attr("width"), attr("height"))
            })
            .collect();
        let covered: f64 = running.iter().map(|r| r.0).sum();
        assert!(covered > 0.95 * f64::from(width), "{width}: {covered}");
        for (_, h) in &running {
            assert!((0.25..=1.5).contains(h), "{width}: height {h}");
        }
        assert!(svg.contains(">sleep 95% · running 5%</text>"), "{svg}");
    }
}
