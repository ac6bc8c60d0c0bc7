//! `record --off-cpu` on real processes: every thread's time by state against the
//! states its code was built to be in (tests/data/offcpu.c), the stacks where each
//! thread blocked, the time base (each thread's states add up to its wall time), and
//! the report outputs (folded `[off-cpu: STATE]` frames, `--state`, JSON states, the
//! timeline).

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use profile::profile::{Profile, ThreadState};

use crate::common::*;

fn offcpu_bin() -> std::path::PathBuf {
    build_c("offcpu.c", &["-O2", "-g", "-fno-omit-frame-pointer"])
}

/// Each thread's nanoseconds per state (indexed by the state's code), by name.
fn states_by_name(p: &Profile) -> HashMap<String, [u64; ThreadState::COUNT]> {
    let mut m: HashMap<String, [u64; ThreadState::COUNT]> = HashMap::new();
    for (t, s) in p.threads.iter().zip(p.thread_states()) {
        let e = m.entry(t.name.clone()).or_default();
        for i in 0..ThreadState::COUNT {
            e[i] += s[i];
        }
    }
    m
}

fn share(s: &[u64; ThreadState::COUNT], state: ThreadState) -> f64 {
    s[state as usize] as f64 / s.iter().sum::<u64>().max(1) as f64
}

/// One attached recording of the fixture (3 s), shared by the tests below, and each
/// thread's share of a CPU over it by the kernel's schedstat (parts per million).
fn attached() -> &'static (tempfile::TempDir, std::path::PathBuf, HashMap<String, u64>) {
    use std::sync::OnceLock;
    static REC: OnceLock<(tempfile::TempDir, std::path::PathBuf, HashMap<String, u64>)> =
        OnceLock::new();
    REC.get_or_init(|| {
        let dir = scratch();
        let out = dir.path().join("offcpu.prof");
        let target = Target::start(&offcpu_bin(), &[]);
        std::thread::sleep(Duration::from_millis(100));
        let pid = target.pid();
        let tids = tids_by_name(pid);
        let before: HashMap<String, u64> = tids
            .iter()
            .map(|(n, &t)| (n.clone(), schedstat_ns(pid, t).unwrap()))
            .collect();
        let t0 = std::time::Instant::now();
        let sysctls = crate::common::sysctl_lock().read();
        // 199 Hz: the states need no CPU samples (running is the threads' clocks,
        // switch-out stacks have a rate of their own), and at 999 Hz the two spinners'
        // 32 KiB stack copies fill a CPU's ring in a quarter of a second: a recorder
        // starved at load 10 lost records in one run of six, and waits whose
        // switch-out sample was lost have no state (`other`, counted in the summary).
        record_pid(pid, "3", "199", &out, &["--off-cpu"]);
        drop(sysctls);
        // Each thread's share of a CPU over the time `record` ran (its setup and
        // naming too: the spinners keep their pace throughout).
        let window = t0.elapsed().as_nanos() as f64;
        let cpu = tids
            .iter()
            .map(|(n, &t)| {
                let ran = schedstat_ns(pid, t).unwrap() - before[n];
                (n.clone(), (ran as f64 / window * 1e6) as u64)
            })
            .collect();
        drop(target);
        (dir, out, cpu)
    })
}

fn recording() -> &'static Path {
    &attached().1
}

#[test]
fn every_threads_time_is_in_the_state_it_was_built_for() {
    let p = model(recording());
    assert!(p.is_wall_time());
    let states = states_by_name(&p);
    // The main thread sleeps 100 ms at a time. Each wake-up may then wait for a CPU
    // on a loaded machine: that part is runnable (issue 28), so the built-for state
    // and runnable together hold the thread's time.
    let waiting = |s: &[u64; ThreadState::COUNT], state: ThreadState| {
        share(s, state) + share(s, ThreadState::Runnable)
    };
    let main = p.threads.iter().find(|t| t.tid == t.pid).unwrap();
    assert!(
        waiting(&states[&main.name], ThreadState::Sleep) >= 0.95,
        "{:?}",
        states[&main.name]
    );
    let want = [
        ("sleeper", ThreadState::Sleep, 0.95),
        ("holder", ThreadState::Sleep, 0.95),
        ("waiter", ThreadState::Lock, 0.90),
        ("piper", ThreadState::Io, 0.95),
        ("socker", ThreadState::Io, 0.95),
        ("feeder", ThreadState::Sleep, 0.95),
        ("idler", ThreadState::Wait, 0.99),
    ];
    for (name, state, at_least) in want {
        let s = &states[name];
        assert!(
            waiting(s, state) >= at_least && share(s, state) >= 0.5,
            "{name}: {:.3} {} (want >= {at_least} with runnable): {s:?}",
            share(s, state),
            state.name()
        );
    }
    // Two spinners on one CPU: each runs for its share of that CPU (about half, less
    // when other work shares the machine) and waits for it (preempted: runnable) the
    // rest of the time. Running time agrees with the kernel's own account.
    for name in ["spin-a", "spin-b"] {
        let s = &states[name];
        let (run, wait) = (
            share(s, ThreadState::Running),
            share(s, ThreadState::Runnable),
        );
        assert!(run + wait >= 0.97, "{name}: {s:?}");
        assert!(
            wait >= 0.2 && run <= 0.75,
            "{name}: running {run:.3}, runnable {wait:.3}"
        );
        // The schedstat window is `record`'s whole run (its setup and naming too),
        // a little longer than the recording: on a loaded machine the spinners'
        // share of their CPU drifts between the two by a few points.
        let truth = attached().2[name] as f64 / 1e6;
        assert!(
            (run - truth).abs() <= 0.08,
            "{name}: running {run:.3} of its time, schedstat says {truth:.3}"
        );
    }
}

#[test]
fn every_threads_states_add_up_to_the_recording() {
    let rec = read(recording());
    let summary = rec.summary.as_ref().unwrap();
    let wall = summary.end_time_ns - summary.attached_ns;
    let p = model(recording());
    for (name, s) in states_by_name(&p) {
        let total: u64 = s.iter().sum();
        let err = (total as f64 - wall as f64).abs() / wall as f64;
        // Running is the thread's clock, runnable takes what the clock and the
        // switches disagree on (profile::split): both shown when this fails.
        let tid = p.threads.iter().find(|t| t.name == name).map(|t| t.tid);
        let clock = summary.thread_clocks.iter().find(|c| Some(c.tid) == tid);
        assert!(
            err <= 0.01,
            "{name}: {total} ns in all states vs {wall} ns recorded ({:.2}% off): {s:?}; \
             clock {clock:?}, {} records lost",
            err * 100.0,
            summary.lost
        );
    }
}

/// The off-CPU lines of one thread in per-thread folded output, as frame lists.
fn off_cpu_stacks(thread: &str, state: &str) -> Vec<(Vec<String>, u64)> {
    let marker = format!("[off-cpu: {state}]");
    let o = run_profile(&[
        "report",
        "-i",
        recording().to_str().unwrap(),
        "--per-thread",
        "--folded",
        "-",
    ]);
    ok(&o);
    stdout(&o)
        .lines()
        .filter_map(|l| {
            let (s, n) = l.rsplit_once(' ')?;
            let frames: Vec<String> = s.split(';').map(str::to_owned).collect();
            (frames[0] == thread && frames.last() == Some(&marker))
                .then(|| (frames, n.parse().unwrap()))
        })
        .collect()
}

/// The frames of a stack from `from` to the end.
fn from<'a>(frames: &'a [String], name: &str) -> &'a [String] {
    let i = frames
        .iter()
        .position(|f| f == name)
        .unwrap_or_else(|| panic!("{name} not in {frames:?}"));
    &frames[i..]
}

#[test]
fn off_cpu_stacks_end_where_each_thread_blocked() {
    // The heaviest stack of each blocked thread: its own function, the libc wrapper,
    // the kernel path to schedule, then the state frame.
    let heaviest = |thread: &str, state: &str| {
        let mut v = off_cpu_stacks(thread, state);
        v.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        assert!(!v.is_empty(), "{thread} has no {state} stack");
        v.swap_remove(0).0
    };
    let sleeper = heaviest("sleeper", "sleep");
    let tail = from(&sleeper, "sleep_here");
    assert!(
        tail.iter()
            .any(|f| f.contains("nanosleep") && !f.ends_with("_[k]"))
    );
    assert!(tail.iter().any(|f| f == "do_nanosleep_[k]"), "{tail:?}");
    assert_eq!(tail[tail.len() - 2], "schedule_[k]");

    let waiter = heaviest("waiter", "lock");
    let tail = from(&waiter, "wait_for_lock");
    assert!(
        tail.iter().any(|f| f.contains("pthread_mutex_lock")),
        "{tail:?}"
    );
    assert!(
        tail.iter()
            .any(|f| f.starts_with("futex_") && f.ends_with("_[k]"))
    );

    let piper = heaviest("piper", "io");
    let tail = from(&piper, "read_pipe");
    assert!(tail.iter().any(|f| f.contains("pipe_read_[k]")), "{tail:?}");

    let socker = heaviest("socker", "io");
    let tail = from(&socker, "recv_socket");
    assert!(tail.iter().any(|f| f.contains("recv")), "{tail:?}");
    assert!(
        tail.iter().any(|f| f.starts_with("unix_stream_")),
        "{tail:?}"
    );

    // Blocked since before the attach and never switched while recorded: its stack
    // is read from /proc (rip and rsp only), whole down to the thread's start although
    // idle_here's CFI needs rbp (from the frame-pointer chain on the stack).
    let idler = heaviest("idler", "wait");
    let user: Vec<&str> = idler
        .iter()
        .filter(|f| !f.ends_with("_[k]"))
        .map(String::as_str)
        .collect();
    let at = user.iter().position(|f| *f == "idle_here");
    assert!(
        at.is_some_and(|i| i >= 4 && user[i - 1] == "idler" && user[2] == "clone3"),
        "{idler:?}"
    );
    assert!(
        user[at.unwrap()..].iter().any(|f| f.contains("epoll_wait")),
        "{idler:?}"
    );

    // Every blocked stack of a spinner is a preemption in spin_here.
    for (frames, _) in off_cpu_stacks("spin-a", "runnable") {
        let user: Vec<&String> = frames.iter().filter(|f| !f.ends_with("_[k]")).collect();
        assert_eq!(user[user.len() - 2], "spin_here", "{frames:?}");
    }
}

#[test]
fn state_filter_json_states_and_timeline_on_a_real_recording() {
    let input = recording().to_str().unwrap();
    // --state lock keeps lock waits only.
    let o = run_profile(&["report", "-i", input, "--state", "lock", "--folded", "-"]);
    ok(&o);
    let text = stdout(&o);
    assert!(!text.is_empty());
    assert!(
        text.lines()
            .all(|l| l.rsplit_once(' ').unwrap().0.ends_with("[off-cpu: lock]")),
        "{text}"
    );
    // JSON states per thread, in nanoseconds, agreeing with the model.
    let o = run_profile(&["report", "-i", input, "--json"]);
    ok(&o);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let p = model(recording());
    let want = states_by_name(&p);
    for t in v["threads"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        let states = &t["states"];
        for s in ThreadState::ALL {
            assert!(states[s.name()].is_u64(), "{name}: {states}");
        }
        if name == "waiter" {
            assert_eq!(
                states["lock"].as_u64().unwrap(),
                want["waiter"][ThreadState::Lock as usize]
            );
        }
    }
    // The timeline: a row per thread, a legend entry per state, hover titles.
    let dir = scratch();
    let svg_path = dir.path().join("t.svg");
    ok(&run_profile(&[
        "report",
        "-i",
        input,
        "--timeline",
        svg_path.to_str().unwrap(),
    ]));
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert_eq!(svg.matches(r#"<g class="row""#).count(), p.threads.len());
    for name in ["spin-a", "sleeper", "waiter", "piper", "socker"] {
        let tid = p.threads.iter().find(|t| t.name == name).unwrap().tid;
        assert!(svg.contains(&format!(">{name} {tid}</text>")), "{name}");
    }
    for s in ThreadState::ALL {
        assert!(svg.contains(&format!(">{}</text>", s.name())));
    }
    // Hover titles: the state, then where the thread blocked and its callers.
    let titles: Vec<&str> = svg
        .split("<title>")
        .skip(1)
        .filter_map(|t| t.split("</title>").next())
        .collect();
    let has = |state: &str, func: &str| {
        titles
            .iter()
            .any(|t| t.starts_with(state) && t.contains(func))
    };
    assert!(has("lock: ", " ← wait_for_lock"), "{titles:?}");
    assert!(has("io: ", "read ← read_pipe"), "{titles:?}");
    assert!(has("runnable: ", "in spin_here"), "{titles:?}");
}

#[test]
fn launched_commands_are_recorded_off_cpu_from_their_first_instruction() {
    let dir = scratch();
    let out = dir.path().join("launch.prof");
    let bin = offcpu_bin();
    let _sysctls = crate::common::sysctl_lock().read();
    let o = run_profile(&[
        "record",
        "--off-cpu",
        "-q",
        "-o",
        out.to_str().unwrap(),
        "--",
        bin.to_str().unwrap(),
        "1",
    ]);
    ok(&o);
    let p = model(&out);
    let states = states_by_name(&p);
    assert!(
        share(&states["waiter"], ThreadState::Lock) > 0.8,
        "{states:?}"
    );
    assert!(share(&states["piper"], ThreadState::Io) > 0.9, "{states:?}");
}

#[test]
fn threads_switching_thousands_of_times_a_second_keep_their_states() {
    // The stack event samples at most 1,000 switch-outs a second per thread and CPU;
    // ping and pong block some 5,000 to 10,000 times a second each (10,000 times in
    // all), in read() on a pipe (io). The switch-outs it leaves out carry no kernel
    // frames: their state is the one last named at the same blocking site.
    let dir = scratch();
    let out = dir.path().join("pingpong.prof");
    let bin = build_c("pingpong.c", &["-O2", "-g", "-pthread"]);
    // Rings that hold seconds of it: a test build's recorder on a loaded machine
    // falls behind (a shallow program: small stack copies).
    let o = run_profile(&[
        "record",
        "--off-cpu",
        "--mmap-pages",
        "8192",
        "--stack-size",
        "8192",
        "-o",
        out.to_str().unwrap(),
        "--",
        bin.to_str().unwrap(),
        "10000",
        "50",
    ]);
    ok(&o);
    let err = stderr(&o);
    let by_site: u64 = err
        .split(" waits named by the state last sampled at their blocking site")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{err}"));
    let p = model(&out);
    let states = states_by_name(&p);
    let mut blocked_total = 0;
    for name in ["ping", "pong"] {
        let s = &states[name];
        let blocked: u64 = ThreadState::ALL
            .iter()
            .filter(|&&st| st != ThreadState::Running && st != ThreadState::Runnable)
            .map(|&st| s[st as usize])
            .sum();
        blocked_total += blocked;
        assert!(
            s[ThreadState::Io as usize] as f64 >= 0.97 * blocked as f64,
            "{name}: {s:?}\n{err}"
        );
    }
    assert!(blocked_total > 0, "{states:?}");
    // Some 20,000 blocked reads in all in 1 to 2 s, at most 4,000 sampled with kernel
    // frames (1,000 a second for each thread on each CPU).
    assert!(by_site >= 8_000, "{err}");
    assert!(!err.contains("dropped"), "{err}");
}

#[test]
fn the_timeline_axis_follows_the_time_window() {
    // A one-second window starting half a second after the attach (`--time` counts
    // from the start of the recording, which is before the attach).
    let p = model(recording());
    let attach = p
        .summary
        .as_ref()
        .map(|s| s.attached_ns.saturating_sub(p.meta.start_time_ns))
        .unwrap() as f64
        / 1e9;
    let (from, to) = (attach + 0.5, attach + 1.5);
    let dir = scratch();
    let svg_path = dir.path().join("w.svg");
    ok(&run_profile(&[
        "report",
        "-i",
        recording().to_str().unwrap(),
        "--time",
        &format!("{from:.3}..{to:.3}"),
        "--timeline",
        svg_path.to_str().unwrap(),
    ]));
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    let axis = svg.split("<g class=\"axis\"").nth(1).unwrap();
    let ticks: Vec<f64> = axis
        .split("</g>")
        .next()
        .unwrap()
        .split("text-anchor=\"middle\">")
        .skip(1)
        .filter_map(|t| t.split(" s<").next()?.parse().ok())
        .collect();
    // Ticks every 100 ms across the window, none outside it.
    assert!(ticks.len() >= 10, "{ticks:?}");
    assert!(
        ticks[0] >= from - 0.001 && ticks[0] < from + 0.1,
        "{ticks:?}"
    );
    let last = ticks[ticks.len() - 1];
    assert!(last <= to + 0.001 && last > to - 0.1, "{ticks:?}");
    assert!(
        svg.contains(&format!("1.00 s ({from:.3} s to {to:.3} s)")),
        "subtitle"
    );
    // Each row holds the window's second: the spinner's runnable and running time.
    let tid = p.threads.iter().find(|t| t.name == "spin-a").unwrap().tid;
    let row = svg
        .split(&format!("<g class=\"row\" data-tid=\"{tid}\""))
        .nth(1)
        .unwrap();
    let title = row.split("</title>").next().unwrap();
    // `STATE: 512.3 ms (51.2%)` for each state the thread was in, in ms, µs or s.
    let ms = |state: ThreadState| -> Option<f64> {
        let at = title.find(&format!("{}: ", state.name()))?;
        let mut w = title[at..].split(": ").nth(1)?.split(' ');
        let v: f64 = w.next()?.parse().ok()?;
        Some(match w.next()? {
            "s" => v * 1e3,
            "ms" => v,
            _ => v / 1e3,
        })
    };
    let total: f64 = ThreadState::ALL.into_iter().filter_map(ms).sum();
    assert!((total - 1000.0).abs() < 5.0, "{title}");
}

/// A RAII change of a kernel sysctl, restored when dropped.
struct Sysctl {
    path: String,
    old: String,
}

impl Sysctl {
    fn set(name: &str, value: &str) -> std::io::Result<Sysctl> {
        let path = format!("/proc/sys/kernel/{name}");
        let old = std::fs::read_to_string(&path)?.trim().to_owned();
        std::fs::write(&path, value)?;
        Ok(Sysctl { path, old })
    }
}

impl Drop for Sysctl {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.path, &self.old);
    }
}

/// `--off-cpu` where the kernel refuses context-switch sampling gets an error saying
/// what is missing. The refusal is real: with kernel.perf_event_max_sample_rate below
/// the switch-out stack rate (the kernel lowers it by itself when sampling interrupts
/// take too long), perf_event_open refuses the stack event (EINVAL). The sysctl is
/// changed for the few milliseconds `record` takes to fail.
#[test]
fn off_cpu_refused_by_the_kernel_says_what_is_missing() {
    let dir = scratch();
    let out = dir.path().join("refused.prof");
    let _only_me = crate::common::sysctl_lock().write();
    let o = {
        let _rate = match Sysctl::set("perf_event_max_sample_rate", "999") {
            Ok(s) => s,
            Err(e) => {
                eprintln!("skipped: cannot lower kernel.perf_event_max_sample_rate: {e}");
                return;
            }
        };
        run_profile(&[
            "record",
            "--off-cpu",
            "-o",
            out.to_str().unwrap(),
            "--",
            "/bin/true",
        ])
    };
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("--off-cpu: the kernel refused the switch-out stack event"),
        "{err}"
    );
    assert!(
        err.contains(
            "it allows 999 samples a second per event (kernel.perf_event_max_sample_rate)"
        ),
        "{err}"
    );
    assert!(
        err.contains("sysctl -w kernel.perf_event_max_sample_rate=1000"),
        "{err}"
    );
    assert!(!out.exists(), "no recording is left behind");
    // CPU-only recording is not affected.
    ok(&run_profile(&[
        "record",
        "-q",
        "-o",
        out.to_str().unwrap(),
        "--",
        "/bin/true",
    ]));
}
