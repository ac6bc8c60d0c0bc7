//! `profile top` on real targets: the plain tables a pipe gets, and the full-screen view
//! driven through a real pseudo-terminal (tmux): the hot function on screen, the keys,
//! and the terminal given back however `top` ends.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::*;

/// The function rows of each plain table in `out`: (self%, function) in order, the
/// share of the sampled CPU time (a window's `[unsampled]` CPU time, which no sample
/// stands for, is in the header, not a row: the shares are scaled to the rest).
pub(crate) fn tables(out: &str) -> Vec<Vec<(f64, String)>> {
    let mut tables: Vec<Vec<(f64, String)>> = Vec::new();
    let mut unsampled: Vec<f64> = Vec::new();
    let mut in_rows = false;
    let mut skip = false;
    for l in out.lines() {
        if l.starts_with("profile top:") {
            tables.push(Vec::new());
            unsampled.push(0.0);
            // A window in which no thread ran (a starved target) has only remainders.
            in_rows = false;
            if l.contains("  0 threads") {
                skip = true;
                continue;
            }
            skip = false;
        } else if let Some(rest) = l.strip_prefix("uncovered CPU ") {
            let pct = rest.split('%').next().and_then(|p| p.trim().parse().ok());
            *unsampled.last_mut().unwrap() = pct.expect("a share of uncovered CPU");
        } else if l.contains("FUNCTION") {
            in_rows = true;
        } else if l.is_empty() {
            in_rows = false;
        } else if in_rows
            && !skip
            && let Some(rows) = tables.last_mut()
            && let Some(pct) = l.split('%').next().and_then(|p| p.trim().parse().ok())
        {
            let name = l.rsplit("  ").next().unwrap_or("").trim().to_owned();
            rows.push((pct, name));
        }
    }
    for (rows, u) in tables.iter_mut().zip(unsampled) {
        if u > 0.0 && u < 100.0 {
            for r in rows.iter_mut() {
                r.0 = r.0 * 100.0 / (100.0 - u);
            }
        }
    }
    tables
}

#[test]
fn without_a_terminal_top_prints_one_table_per_interval_with_the_hot_function_first() {
    let bin = build_c("chains.c", &["-O2", "-g"]);
    let t = Target::start(&bin, &["worker"]);
    let pid = t.pid().to_string();
    let out = run_profile(&["top", "--pid", &pid, "-d", "4", "--rows", "5"]);
    ok(&out);
    let text = stdout(&out);
    let tables = tables(&text);
    // One per second (fewer when naming the first window's frames takes long on a
    // loaded machine), and the last partial one.
    assert!(
        (2..=5).contains(&tables.len()),
        "{} tables:\n{text}",
        tables.len()
    );
    // A window in which the target got no CPU (a loaded machine) has an empty table.
    assert!(tables.iter().any(|t| !t.is_empty()), "{text}");
    for (i, rows) in tables.iter().enumerate().filter(|(_, t)| !t.is_empty()) {
        assert!(rows.len() <= 5, "--rows 5: {rows:?}");
        // The worker spins in level_c: the hot function from the first table on.
        assert_eq!(rows[0].1, "level_c", "table {i}:\n{text}");
        assert!(rows[0].0 > 80.0, "table {i}:\n{text}");
    }
    assert!(
        text.contains(&format!("pid {pid} (chains")),
        "header names the target:\n{text}"
    );
    assert!(
        stderr(&out).contains("duration reached"),
        "{}",
        stderr(&out)
    );
}

/// Threads that each end before their first sample period: all their CPU time is
/// `[unsampled]`, shown in the header as uncovered CPU and never ranked as a function
/// (it was the first row at 100%).
#[test]
fn threads_running_in_slivers_are_uncovered_cpu_not_a_function() {
    let bin = build_c("accounting.c", &["-O2", "-g"]);
    let out = run_profile(&[
        "top",
        "--plain",
        "-F",
        "49",
        "--interval",
        "0.5",
        "--",
        bin.to_str().unwrap(),
        "short:600:2",
    ]);
    ok(&out);
    let text = stdout(&out);
    assert!(!text.contains("[unsampled]\n"), "{text}");
    for rows in tables(&text) {
        assert!(rows.iter().all(|(_, f)| f != "[unsampled]"), "{text}");
    }
    let uncovered: Vec<f64> = text
        .lines()
        .filter_map(|l| l.strip_prefix("uncovered CPU "))
        .filter_map(|r| r.split('%').next()?.trim().parse().ok())
        .collect();
    assert!(uncovered.iter().any(|&u| u > 50.0), "{text}");
}

#[test]
fn top_follows_a_launched_command_and_ends_with_it() {
    let bin = build_c("accounting.c", &["-O2", "-g"]);
    let out = run_profile(&[
        "top",
        "--interval",
        "0.5",
        "--",
        bin.to_str().unwrap(),
        "main:1500",
    ]);
    ok(&out);
    let text = stdout(&out);
    assert!(
        stderr(&out).contains("target exited"),
        "{}\n{text}",
        stderr(&out)
    );
    let tables = tables(&text);
    assert!(!tables.is_empty(), "{text}");
    assert!(
        tables.iter().flatten().any(|(_, f)| f == "spin_leaf"),
        "the spinning function appears:\n{text}"
    );
}

/// A tmux session running `profile top` in a 100x30 pseudo-terminal; killed when
/// dropped. After `top` exits the shell prints EXIT=status and the terminal's mode.
struct Tmux {
    name: String,
}

impl Tmux {
    fn start(name: &str, top_args: &str, width: u32) -> Option<Tmux> {
        if Command::new("tmux").arg("-V").output().is_err() {
            assert!(
                std::env::var_os("PROFILE_REQUIRE_CONSUMERS").is_none(),
                "tmux is missing (.ci/run installs it)"
            );
            eprintln!("skipped: tmux is not installed");
            return None;
        }
        let name = format!("profile-it-{name}-{}", std::process::id());
        let script = format!(
            "{} top {top_args}; echo EXIT=$?; echo MODES $(stty -a | tr -s ' ;' '\\n\\n' | grep -E '^-?(icanon|echo)$') END; sleep 60",
            profile_bin()
        );
        let status = Command::new("tmux")
            .args(["-L", &name, "new-session", "-d", "-s", "t", "-x"])
            .arg(width.to_string())
            .args(["-y", "30", &script])
            .status()
            .unwrap();
        assert!(status.success());
        Some(Tmux { name })
    }

    fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.name, "capture-pane", "-p", "-t", "t"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &str) {
        Command::new("tmux")
            .args(["-L", &self.name, "send-keys", "-t", "t", keys])
            .status()
            .unwrap();
    }

    /// Waits until the screen satisfies `f`; returns the screen.
    fn wait_for(&self, what: &str, f: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let s = self.screen();
            if f(&s) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "waiting for {what}; screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.name, "kill-server"])
            .status();
    }
}

/// The first function row on screen.
fn first_row(screen: &str) -> Option<String> {
    let mut lines = screen.lines().skip_while(|l| !l.contains("FUNCTION"));
    lines.next()?;
    Some(lines.next()?.rsplit("  ").next()?.trim().to_owned())
}

#[test]
fn on_a_terminal_top_draws_the_hot_function_answers_keys_and_gives_the_terminal_back() {
    let bin = build_c("chains.c", &["-O2", "-g"]);
    let t = Target::start(&bin, &["worker", "qsort"]);
    let pid = t.pid();
    let Some(tmux) = Tmux::start("keys", &format!("--pid {pid}"), 100) else {
        return;
    };
    let started = Instant::now();
    let s = tmux.wait_for("the hot function", |s| {
        first_row(s).is_some_and(|f| f == "level_c" || f == "cmp_ints")
    });
    eprintln!("hot function on screen after {:?}", started.elapsed());
    assert!(s.contains("q quit"), "key help:\n{s}");
    assert!(s.contains("SELF%*"), "sorted by self:\n{s}");
    tmux.keys("t");
    let s = tmux.wait_for("the threads view", |s| s.contains("HOTTEST FUNCTION"));
    let worker = s
        .lines()
        .find(|l| l.contains("worker"))
        .unwrap_or_else(|| panic!("the worker thread:\n{s}"));
    assert!(worker.trim_end().ends_with("level_c"), "{worker}");
    let sorter = s
        .lines()
        .find(|l| l.contains("sorter"))
        .unwrap_or_else(|| panic!("the sorter thread:\n{s}"));
    assert!(sorter.trim_end().ends_with("cmp_ints"), "{sorter}");
    // t again: the processes view, the target by the name it runs under.
    tmux.keys("t");
    let s = tmux.wait_for("the processes view", |s| s.contains("PROCESS "));
    let row = s
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{pid} ")))
        .unwrap_or_else(|| panic!("the target's row:\n{s}"));
    assert!(row.contains("chains-O2g"), "{row}");
    assert!(
        row.trim_end().ends_with("level_c") || row.trim_end().ends_with("cmp_ints"),
        "{row}"
    );
    // And back to the functions, sorted by total.
    tmux.keys("t");
    tmux.keys("s");
    tmux.wait_for("sorted by total", |s| s.contains("TOTAL%*"));
    tmux.keys("p");
    tmux.wait_for("paused", |s| s.contains("[paused]"));
    tmux.keys("q");
    let s = tmux.wait_for("top to exit", |s| s.contains(" END"));
    assert!(s.contains("EXIT=0"), "{s}");
    // Raw mode is off again: canonical input and echo are back.
    assert!(
        s.contains("MODES icanon echo END"),
        "terminal modes after top:\n{s}"
    );
    // The last table stays on the (normal) screen, and the target runs on.
    assert!(s.contains("stopped on request"), "{s}");
    assert!(Path::new(&format!("/proc/{pid}")).exists());
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    assert!(!state.contains(") T "), "target left stopped: {state}");
}

#[test]
fn sigterm_and_a_narrow_terminal_leave_the_terminal_as_it_was() {
    let bin = build_c("chains.c", &["-O2", "-g"]);
    let t = Target::start(&bin, &["worker"]);
    let Some(tmux) = Tmux::start("term", &format!("--pid {}", t.pid()), 30) else {
        return;
    };
    let s = tmux.wait_for("the table", |s| s.contains("FUNCTION"));
    for l in s.lines() {
        assert!(
            l.chars().count() <= 30,
            "no line wider than the terminal: {l:?}"
        );
    }
    // Kill the top process (not tmux's shell) with SIGTERM.
    let deadline = Instant::now() + Duration::from_secs(10);
    let top_pid = loop {
        let out = Command::new("pgrep")
            .args(["-f", &format!("^{} top --pid {}", profile_bin(), t.pid())])
            .output()
            .unwrap();
        if let Some(p) = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .next()
        {
            break p.to_owned();
        }
        assert!(Instant::now() < deadline, "top's pid");
    };
    Command::new("kill")
        .args(["-TERM", &top_pid])
        .status()
        .unwrap();
    let s = tmux.wait_for("top to exit", |s| s.contains(" END"));
    assert!(s.contains("EXIT=0"), "{s}");
    assert!(
        s.contains("MODES icanon echo END"),
        "terminal modes after SIGTERM:\n{s}"
    );
}

#[test]
fn with_off_cpu_top_shows_time_by_state_and_the_waits_by_function() {
    let bin = build_c("offcpu.c", &["-O2", "-g"]);
    let t = Target::start(&bin, &[]);
    let pid = t.pid().to_string();
    let out = run_profile(&["top", "--off-cpu", "--pid", &pid, "-d", "3", "--rows", "40"]);
    ok(&out);
    let text = stdout(&out);
    let states = text
        .lines()
        .rfind(|l| l.starts_with("time by state:"))
        .unwrap_or_else(|| panic!("a time-by-state line:\n{text}"));
    // Built to sleep, wait on a lock, block on a pipe and a socket, and be preempted.
    for state in ["runnable", "sleep", "lock", "io"] {
        assert!(states.contains(&format!("{state} ")), "{state}: {states}");
    }
    // Each wait is a frame of its own, under the function where the thread waits.
    let last = tables(&text).pop().unwrap();
    for f in [
        "[off-cpu: sleep]",
        "[off-cpu: lock]",
        "[off-cpu: io]",
        "[off-cpu: runnable]",
    ] {
        assert!(
            last.iter().any(|(_, name)| name == f),
            "{f} in the last table:\n{text}"
        );
    }
    // Stacks of waits are taken at a bounded rate, so a few seconds may not hold
    // every thread's; the frequent ones are there.
    assert!(
        ["nap_ms", "read_pipe", "recv_socket", "wait_for_lock"]
            .iter()
            .any(|f| last.iter().any(|(_, name)| name == f)),
        "a waiting function in the last table:\n{text}"
    );
}

#[test]
fn top_a_watches_every_process_and_names_the_busiest() {
    let bin = build_c("chains.c", &["-O2", "-g"]);
    let _t = Target::start(&bin, &["worker", "qsort"]);
    let out = run_profile(&["top", "-a", "-d", "3", "--rows", "400", "--no-jvm-perfmap"]);
    ok(&out);
    let text = stdout(&out);
    assert!(text.contains("profile top: all CPUs"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains(" processes; busiest: ") && l.contains("(pid ")),
        "{text}"
    );
    let last = tables(&text).pop().unwrap();
    for f in ["level_c", "cmp_ints"] {
        assert!(last.iter().any(|(_, name)| name == f), "{f}:\n{text}");
    }
}

#[test]
fn a_terminal_that_hangs_up_ends_top() {
    let bin = build_c("chains.c", &["-O2", "-g"]);
    let t = Target::start(&bin, &["worker"]);
    let Some(tmux) = Tmux::start("hangup", &format!("--pid {}", t.pid()), 80) else {
        return;
    };
    tmux.wait_for("the table", |s| s.contains("FUNCTION"));
    // The terminal goes away (as when ssh drops): top must not stay behind.
    drop(tmux);
    let pattern = format!("^{} top --pid {}", profile_bin(), t.pid());
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let out = Command::new("pgrep")
            .args(["-f", &pattern])
            .output()
            .unwrap();
        if out.stdout.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "top still running after its terminal hung up: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let state = std::fs::read_to_string(format!("/proc/{}/stat", t.pid())).unwrap();
    assert!(!state.contains(") T "), "target left stopped: {state}");
}
