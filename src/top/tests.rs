use super::*;

fn window(ms: u64, fns: &[(&str, u64, u64)], threads: &[(u32, &str, u64, &str)]) -> WindowStats {
    let mut w = WindowStats {
        duration_ns: ms * 1_000_000,
        ..WindowStats::default()
    };
    for &(name, self_ms, total_ms) in fns {
        w.functions.insert(
            name.to_owned(),
            FunctionStats {
                self_ns: self_ms * 1_000_000,
                total_ns: total_ms * 1_000_000,
            },
        );
    }
    for &(tid, name, cpu_ms, leaf) in threads {
        let mut t = ThreadStats {
            pid: 1,
            name: name.to_owned(),
            ..ThreadStats::default()
        };
        t.states[0] = cpu_ms * 1_000_000;
        t.leaves.insert(leaf.to_owned(), cpu_ms * 1_000_000);
        w.states[0] += cpu_ms * 1_000_000;
        w.threads.insert(tid, t);
    }
    w
}

fn header() -> Header {
    Header {
        target: "pid 1 (app)".into(),
        ..Header::default()
    }
}

#[test]
fn functions_sort_by_self_or_total_and_percentages_are_of_cpu_time() {
    let mut top = Top::new(5);
    top.push(window(
        1000,
        &[("main", 0, 1000), ("spin", 750, 750), ("hash", 250, 250)],
        &[(10, "app", 1000, "spin")],
    ));
    let lines = render(&top, &header(), View::Functions, Sort::SelfTime, 200, 50);
    assert!(lines[0].contains("CPU 100%"), "{}", lines[0]);
    assert!(lines[0].contains("1 thread "), "{}", lines[0]);
    let body: Vec<&String> = lines.iter().skip(3).collect();
    assert!(
        body[0].ends_with("spin") && body[0].contains(" 75.0%"),
        "{body:?}"
    );
    assert!(body[1].ends_with("hash"), "{body:?}");
    assert!(
        body[2].ends_with("main") && body[2].contains("100.0%"),
        "{body:?}"
    );
    let lines = render(&top, &header(), View::Functions, Sort::Total, 200, 50);
    assert!(lines[3].ends_with("main"), "{lines:?}");
}

#[test]
fn the_sliding_window_forgets_old_windows() {
    let mut top = Top::new(2);
    top.push(window(1000, &[("old", 1000, 1000)], &[]));
    top.push(window(1000, &[("new", 500, 500)], &[]));
    top.push(window(1000, &[("new", 500, 500)], &[]));
    let m = top.merged();
    assert!(!m.functions.contains_key("old"));
    assert_eq!(m.functions["new"].self_ns, 1_000_000_000);
    assert_eq!(m.duration_ns, 2_000_000_000);
    assert_eq!(top.windows_seen, 3);
}

#[test]
fn threads_view_sorts_by_cpu_with_the_hottest_function() {
    let mut top = Top::new(5);
    top.push(window(
        1000,
        &[],
        &[(10, "idle", 10, "poll"), (11, "worker", 900, "crunch")],
    ));
    let lines = render(&top, &header(), View::Threads, Sort::SelfTime, 200, 50);
    assert!(lines[2].contains("TID"), "{lines:?}");
    assert!(
        lines[3].contains("worker") && lines[3].ends_with("crunch"),
        "{lines:?}"
    );
    assert!(lines[3].contains("90.0%"), "{lines:?}");
    assert!(lines[4].contains("idle"), "{lines:?}");
}

#[test]
fn a_narrow_short_terminal_gets_cut_lines_never_more() {
    let mut top = Top::new(5);
    let long = "a_very_long_function_name_that_would_wrap_in_a_narrow_terminal";
    top.push(window(
        1000,
        &[(long, 10, 10), ("b", 5, 5), ("c", 1, 1)],
        &[],
    ));
    let h = Header {
        keys: true,
        ..header()
    };
    let lines = render(&top, &h, View::Functions, Sort::SelfTime, 40, 6);
    assert_eq!(lines.len(), 6);
    for l in &lines {
        assert!(l.chars().count() <= 40, "{l:?}");
    }
    assert!(lines[3].ends_with('…'), "{lines:?}");
    assert!(lines[5].starts_with("q quit"), "{lines:?}");
    // A terminal too small for anything still gets no panic and no wider line.
    assert!(render(&top, &h, View::Threads, Sort::Total, 1, 1).len() <= 1);
    assert!(render(&top, &h, View::Functions, Sort::Total, 0, 0).is_empty());
}

#[test]
fn off_cpu_shows_time_by_state() {
    let mut w = window(1000, &[("main", 0, 1000)], &[(10, "app", 250, "spin")]);
    w.states[ThreadState::Lock as usize] = 750_000_000;
    let mut top = Top::new(1);
    top.push(w);
    let h = Header {
        off_cpu: true,
        ..header()
    };
    let lines = render(&top, &h, View::Functions, Sort::SelfTime, 200, 50);
    assert_eq!(lines[1], "time by state: running 25%  lock 75%");
}

#[test]
fn truncate_counts_characters_not_bytes() {
    assert_eq!(truncate("ééééé", 3), "éé…");
    assert_eq!(truncate("abc", 3), "abc");
    assert_eq!(truncate("abc", 0), "");
}

#[test]
fn several_processes_name_the_busiest() {
    let mut w = window(1000, &[("crunch", 900, 900)], &[(10, "app", 100, "poll")]);
    let mut busy = ThreadStats {
        pid: 2,
        name: "worker".into(),
        process: "batch".into(),
        ..ThreadStats::default()
    };
    busy.states[0] = 900_000_000;
    busy.leaves.insert("crunch".into(), 900_000_000);
    w.threads.insert(20, busy);
    w.threads.get_mut(&10).unwrap().process = "app".into();
    let mut top = Top::new(1);
    top.push(w);
    let lines = render(&top, &header(), View::Threads, Sort::SelfTime, 200, 50);
    assert_eq!(lines[1], "2 processes; busiest: batch (pid 2) CPU 90%");
    let worker = lines.iter().find(|l| l.contains("batch/worker")).unwrap();
    assert!(worker.ends_with("crunch"), "{worker}");
}

/// Issue 26: a thread or function name with escape sequences (set the window title,
/// clear the screen, a one-character C1 CSI) reaches the terminal escaped.
#[test]
fn hostile_names_are_escaped_in_every_view() {
    let mut top = Top::new(5);
    let evil = "\u{1b}]0;pwn\u{7}\u{1b}[2J\u{9b}31m";
    top.push(window(1000, &[(evil, 500, 500)], &[(10, evil, 500, evil)]));
    let h = Header {
        target: format!("pid 1 ({evil})"),
        ..Header::default()
    };
    for view in [View::Functions, View::Threads, View::Processes] {
        let lines = render(&top, &h, view, Sort::SelfTime, 200, 50);
        let all = lines.join("\n");
        assert!(!all.chars().any(|c| c.is_control() && c != '\n'), "{all:?}");
        assert!(all.contains("\\e]0;pwn\\x07"), "{all}");
    }
}

/// A thread of process `pid` named `process` that ran `cpu_ms` in `leaf`.
fn in_process(pid: u32, process: &str, cpu_ms: u64, leaf: &str) -> ThreadStats {
    let mut t = ThreadStats {
        pid,
        name: process.into(),
        process: process.into(),
        ..ThreadStats::default()
    };
    t.states[0] = cpu_ms * 1_000_000;
    if cpu_ms > 0 {
        t.leaves.insert(leaf.into(), cpu_ms * 1_000_000);
    }
    t
}

/// The processes view's rows: (pid, indentation, name, hottest function).
fn process_rows(lines: &[String]) -> Vec<(u32, usize, String, String)> {
    let at = lines.iter().position(|l| l.contains("PROCESS")).unwrap();
    lines[at + 1..]
        .iter()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let pid = l[..8].trim().parse().unwrap();
            let label = &l[9..33];
            let indent = label.len() - label.trim_start().len();
            let hottest = l[33..].split("  ").last().unwrap_or("").trim().to_owned();
            (pid, indent, label.trim().to_owned(), hottest)
        })
        .collect()
}

#[test]
fn workers_are_drawn_under_their_idle_master() {
    // The master (attached, idle: no sample) forked 11 before attach and 12 in the
    // window; the shell that started the master (1) is no process of the recording.
    let mut top = Top::new(3);
    top.attach(10, "gunicorn");
    let mut w = window(1000, &[], &[]);
    w.threads
        .insert(11, in_process(11, "gunicorn", 300, "render"));
    w.threads
        .insert(12, in_process(12, "gunicorn", 600, "handle"));
    w.threads.insert(30, in_process(30, "cron", 50, "sleep"));
    w.starts.push((12, 10));
    top.push(w);
    assert_eq!(top.unknown_parents(), vec![11, 30]);
    // Asked once only.
    assert!(top.unknown_parents().is_empty());
    top.set_parent(11, Some(10));
    top.set_parent(30, Some(1));
    top.set_parent(10, Some(1));
    let lines = render(&top, &header(), View::Processes, Sort::SelfTime, 200, 50);
    let rows = process_rows(&lines);
    assert_eq!(
        rows,
        vec![
            (10, 0, "gunicorn".into(), "(no sample)".into()),
            (12, 2, "gunicorn".into(), "handle".into()),
            (11, 2, "gunicorn".into(), "render".into()),
            (30, 0, "cron".into(), "sleep".into()),
        ],
        "{lines:#?}"
    );
}

#[test]
fn a_loop_of_parents_from_reused_pids_is_drawn_once() {
    let mut top = Top::new(1);
    let mut w = window(1000, &[], &[]);
    w.threads.insert(5, in_process(5, "a", 100, "x"));
    w.threads.insert(6, in_process(6, "b", 200, "y"));
    w.starts.extend([(5, 6), (6, 5)]);
    top.push(w);
    let lines = render(&top, &header(), View::Processes, Sort::SelfTime, 200, 50);
    let mut pids: Vec<u32> = process_rows(&lines).iter().map(|r| r.0).collect();
    pids.sort_unstable();
    assert_eq!(pids, vec![5, 6], "{lines:#?}");
}

#[test]
fn the_tree_keeps_only_the_lineage_of_the_window() {
    // Workers come and go; those out of the window are forgotten, their master kept.
    let mut top = Top::new(2);
    top.attach(10, "master");
    for pid in 100..2100u32 {
        let mut w = window(1000, &[], &[]);
        w.threads
            .insert(pid, in_process(pid, "worker", 100, "work"));
        w.starts.push((pid, 10));
        top.push(w);
    }
    let lines = render(&top, &header(), View::Processes, Sort::SelfTime, 200, 50);
    let rows = process_rows(&lines);
    assert_eq!(rows.len(), 3, "{lines:#?}");
    assert_eq!((rows[0].0, rows[0].1), (10, 0));
    assert!(
        rows[1..].iter().all(|r| r.1 == 2 && r.0 >= 2098),
        "{rows:?}"
    );
    assert!(top.lineage_len() <= 3);
}

#[test]
fn an_idle_target_names_the_processes_it_started_before_attach() {
    let mut top = Top::new(1);
    top.attach(10, "gunicorn");
    top.push(window(1000, &[], &[]));
    let h = Header {
        unwatched: vec![(11, "gunicorn".into()), (12, "gunicorn".into())],
        ..header()
    };
    let lines = render(&top, &h, View::Functions, Sort::SelfTime, 200, 50);
    assert!(
        lines.iter().any(|l| l
            == "note: the target is idle; 2 processes it started before attach (gunicorn ×2) not watched: pass --children=all"),
        "{lines:#?}"
    );
    // A busy target: no note.
    let mut top = Top::new(1);
    top.attach(10, "gunicorn");
    let mut w = window(1000, &[], &[]);
    w.threads
        .insert(10, in_process(10, "gunicorn", 500, "serve"));
    top.push(w);
    let lines = render(&top, &h, View::Functions, Sort::SelfTime, 200, 50);
    assert!(!lines.iter().any(|l| l.starts_with("note:")), "{lines:#?}");
}

#[test]
fn a_process_whose_window_has_no_name_keeps_the_name_it_was_attached_by() {
    // The main thread only waits: the window names the process by a stand-in.
    let mut top = Top::new(3);
    top.attach(10, "chains");
    let mut w = window(1000, &[], &[]);
    let mut t = in_process(10, "[tid 10]", 500, "level_c");
    t.name = "worker".into();
    w.threads.insert(11, t);
    top.push(w);
    let lines = render(&top, &header(), View::Processes, Sort::SelfTime, 200, 50);
    let rows = process_rows(&lines);
    assert_eq!(rows, vec![(10, 0, "chains".into(), "level_c".into())]);
}
