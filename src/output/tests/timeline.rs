//! The timeline SVG of an off-CPU recording: a row per thread coloured by state, an
//! axis that follows the time window, and a size that stays small for many threads.

use super::*;

#[test]
fn timeline_has_a_row_per_thread_coloured_by_state() {
    let p = model(true);
    let mut out = Vec::new();
    crate::output::timeline::write(
        &p,
        &crate::output::timeline::TimelineOptions::default(),
        &mut out,
    )
    .unwrap();
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
    let opts = crate::output::timeline::TimelineOptions {
        time,
        ..Default::default()
    };
    let mut out = Vec::new();
    crate::output::timeline::write(&p, &opts, &mut out).unwrap();
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
    crate::output::timeline::write(
        &p,
        &crate::output::timeline::TimelineOptions::default(),
        &mut out,
    )
    .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out)
            .matches(r#"<g class="row""#)
            .count(),
        1000
    );
    assert!(out.len() < 8 << 20, "{} bytes", out.len());
}
