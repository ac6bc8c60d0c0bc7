//! The off-CPU recording through each output: folded stacks, JSON, the top table,
//! pprof, the flame graph and the diff, each showing the states beside the CPU.

use super::*;

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
fn json_gives_every_threads_states() {
    let p = model(true);
    let mut out = Vec::new();
    crate::output::json::write(&p, "", None, &mut out).unwrap();
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
    crate::output::json::write(&model(false), "", None, &mut out).unwrap();
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
    crate::output::top::write(&p, 20, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let header = text.lines().next().unwrap();
    for s in ["running", "runnable", "sleep", "lock", "io", "other"] {
        assert!(header.contains(s), "{header}");
    }
    let lock_row = text.lines().find(|l| l.ends_with("take_lock")).unwrap();
    assert!(lock_row.contains("600.0 ms"), "{lock_row}");
    // Each value under its own state's name (cells are right-aligned, counted in
    // characters: `µs` is two bytes): the lock time in the lock column, nothing
    // under wait (placed before lock).
    let names: Vec<char> = header.chars().collect();
    let column_end = |name: &str| {
        let header: String = names.iter().collect();
        let at = header.find(&format!(" {name} ")).unwrap();
        header[..at].chars().count() + 1 + name.len()
    };
    let cell_ends = |row: &str, name: &str| row.chars().take(column_end(name)).collect::<String>();
    assert!(
        cell_ends(lock_row, "lock").ends_with("600.0 ms"),
        "{header}\n{lock_row}"
    );
    assert!(
        cell_ends(lock_row, "wait").ends_with(" -"),
        "{header}\n{lock_row}"
    );
    let nap_row = text.lines().find(|l| l.ends_with(" nap")).unwrap();
    assert!(
        cell_ends(nap_row, "sleep").ends_with("800.0 ms"),
        "{header}\n{nap_row}"
    );
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
    let bytes = crate::output::pprof::encode(&p);
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains("wall") && text.contains("cpu") && text.contains("state"));
    let cpu_only = crate::output::pprof::encode(&model(false));
    assert!(!String::from_utf8_lossy(&cpu_only).contains("wall"));
}

#[test]
fn flame_graph_colours_off_cpu_frames_blue_and_says_so() {
    let p = model(true);
    let mut out = Vec::new();
    let opts = crate::output::flamegraph::FlameGraphOptions::default();
    crate::output::flamegraph::write(&p, &opts, &mut out).unwrap();
    let svg = String::from_utf8(out).unwrap();
    assert!(svg.contains("[off-cpu: lock]") && svg.contains("[off-cpu: sleep]"));
    let (r, g, b) = crate::output::state_colour(ThreadState::Wait);
    assert!(
        svg.contains(&format!(r#"<tspan fill="rgb({r},{g},{b})">■</tspan> wait"#)),
        "subtitle legend"
    );
    // The legend does not widen the drawing past its default width.
    assert!(svg.contains(r#"<svg version="1.1" width="1200""#), "{svg}");
    assert!(svg.contains("of wall time"));
    let (r, g, b) = crate::output::state_colour(ThreadState::Lock);
    assert!(
        svg.contains(&format!("rgb({r},{g},{b})")),
        "lock frame in its blue"
    );
    for s in ThreadState::ALL.into_iter().filter(|s| s.is_off_cpu()) {
        let (r, g, b) = crate::output::state_colour(s);
        assert!(b > r && b > g, "{s:?} is blue");
    }
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
