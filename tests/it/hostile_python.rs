//! Issue 44: a Python process of another user's, built to make root's recorder
//! misbehave, costs it bounded memory and CPU, and its functions are still named.
//! The attacker runs as `nobody` (Debian's /usr/bin/python3.11, which `nobody` may run;
//! else an installed CPython as root) against `profile record --pid`:
//!
//! - code objects rebuilt every 0.3 s, each carrying a line table of a megabyte
//!   (`tests/data/python/hostile_lines.py`): the recorder's peak memory stays within
//!   256 MiB, and nearly every sample still names the function;
//! - its thread list made to loop with `ctypes`, leaving three spinning threads out of
//!   it (`tests/data/python/hostile_threads.py`): the recorder's CPU per sample is no
//!   more than twice what the same process costs with its list intact, and nothing is
//!   lost; under `record -a` beside a harmless Python process, nothing of the host is
//!   lost and the harmless process is named whole;
//! - functions named by strings of 64 KiB, a fresh one every 2 ms
//!   (`tests/data/python/hostile_names.py`): the recorder stays small, a function of an
//!   ordinary name keeps its name, the huge ones are named by their first 1,024
//!   characters until the names budget is spent and `[python: budget]` after, and the
//!   summary says so.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::*;

/// The attacker's uid and gid.
const NOBODY: u32 = 65534;

/// The interpreter the attacker runs, and whether it runs as `nobody`.
fn attacker_python() -> (PathBuf, bool) {
    let debian = PathBuf::from("/usr/bin/python3.11");
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if debian.exists() && root {
        return (debian, true);
    }
    let (_, python) = crate::python::pythons()
        .into_iter()
        .rfind(|(minor, _)| *minor >= 11)
        .expect("a CPython 3.11+ to attack with");
    (python, false)
}

/// A scratch directory anyone may read and write, holding `script` (from
/// tests/data/python).
fn attacker_dir(script: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = scratch();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/python")
        .join(script);
    let to = dir.path().join(script);
    std::fs::copy(from, &to).unwrap();
    std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o644)).unwrap();
    // Every folder above it must let `nobody` through.
    let mut up = dir.path().parent();
    while let Some(p) = up {
        let mode = std::fs::metadata(p).unwrap().permissions().mode();
        if mode & 0o001 == 0 {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode | 0o001)).unwrap();
        }
        up = p.parent();
    }
    (dir, to)
}

/// Starts `script ARGS... STOP` with the attacker's interpreter.
fn attacker(dir: &Path, script: &Path, args: &[&str]) -> Target {
    let (python, as_nobody) = attacker_python();
    let mut cmd = Command::new(python);
    cmd.arg(script)
        .args(args)
        .arg(dir.join("stop"))
        .current_dir(dir);
    if as_nobody {
        cmd.uid(NOBODY).gid(NOBODY);
    }
    Target::spawn(cmd)
}

/// The peak resident memory of process `pid` (VmHWM), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .expect("VmHWM");
    kb * 1024
}

/// The CPU time process `pid` has used (all its threads, those ended too), from
/// /proc/PID/stat.
fn process_cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<u64> = after
        .split(' ')
        .skip(11)
        .take(2)
        .map(|v| v.parse().unwrap())
        .collect();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_nanos((f[0] + f[1]) * 1_000_000_000 / hz)
}

/// Waits until process `pid` has used `cpu` of CPU time since now (at most 90 s).
fn wait_process_cpu(pid: u32, cpu: Duration) {
    let start = process_cpu(pid);
    let limit = std::time::Instant::now() + Duration::from_secs(90);
    while process_cpu(pid) - start < cpu {
        assert!(
            std::time::Instant::now() < limit,
            "process {pid} did not run {cpu:?} in 90 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The name of `pid`'s main thread.
fn main_thread(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap()
        .trim()
        .to_owned()
}

/// Samples of the thread named `thread` (not `[unsampled]`), and of those, the ones
/// whose stack holds the Python function `function`.
fn named_share(stacks: &[(Vec<String>, u64)], thread: &str, function: &str) -> (u64, u64) {
    let mine = stacks
        .iter()
        .filter(|(f, _)| f[0] == thread && !f.iter().any(|x| x == "[unsampled]"));
    let (mut all, mut named) = (0, 0);
    for (f, n) in mine {
        all += n;
        if f.iter().any(|x| x.strip_suffix("_[j]") == Some(function)) {
            named += n;
        }
    }
    (all, named)
}

#[test]
fn line_tables_of_a_megabyte_keep_the_recorder_within_its_memory() {
    let (dir, script) = attacker_dir("hostile_lines.py");
    let target = attacker(dir.path(), &script, &["near"]);
    let pid = target.pid();
    let thread = main_thread(pid);
    let out = dir.path().join("x.prof");
    let rec = Recorder::attach(pid, "999", &out, &[]);
    // About 50 new code objects a second, each met with a megabyte of line table:
    // over 300 MB read over the run.
    wait_thread_cpu(pid, &thread, Duration::from_secs(6));
    let peak = peak_rss(rec.pid());
    let o = rec.stop();
    std::fs::write(dir.path().join("stop"), "").unwrap();
    let err = stderr(&o);
    assert!(
        peak <= 256 << 20,
        "the recorder's peak memory: {} MiB\n{err}",
        peak >> 20
    );
    let (all, named) = named_share(&stacks(&out), &thread, "big");
    assert!(all >= 1000, "{all} samples of the attacker's thread\n{err}");
    assert!(
        named * 100 >= all * 90,
        "{named} of {all} samples name big()\n{err}"
    );
    assert!(
        err.contains("kept within its budgets") && err.contains("let go"),
        "the summary says the budget held: {err}"
    );
}

#[test]
fn line_tables_larger_than_their_code_could_need_are_refused_names_kept() {
    let (dir, script) = attacker_dir("hostile_lines.py");
    let target = attacker(dir.path(), &script, &["over"]);
    let pid = target.pid();
    let thread = main_thread(pid);
    let out = dir.path().join("x.prof");
    let rec = Recorder::attach(pid, "999", &out, &[]);
    wait_thread_cpu(pid, &thread, Duration::from_secs(3));
    let peak = peak_rss(rec.pid());
    let o = rec.stop();
    std::fs::write(dir.path().join("stop"), "").unwrap();
    let err = stderr(&o);
    assert!(peak <= 256 << 20, "peak memory: {} MiB", peak >> 20);
    let (all, named) = named_share(&stacks(&out), &thread, "big");
    assert!(all >= 300, "{all} samples of the attacker's thread\n{err}");
    assert!(
        named * 100 >= all * 90,
        "{named} of {all} samples name big()\n{err}"
    );
    assert!(
        err.contains("line tables refused"),
        "the summary says the tables were refused: {err}"
    );
}

/// One run of hostile_threads.py in `mode`: the recorder's CPU per sample of the
/// target while sampling, the samples, the records lost, and the summary.
fn thread_list_run(mode: &str) -> (f64, u64, u64, String) {
    let (dir, script) = attacker_dir("hostile_threads.py");
    let target = attacker(dir.path(), &script, &[mode]);
    let pid = target.pid();
    let out = dir.path().join("x.prof");
    let rec = Recorder::attach(pid, "499", &out, &[]);
    let start = process_cpu(rec.pid());
    wait_process_cpu(pid, Duration::from_secs(6));
    let cpu = process_cpu(rec.pid()) - start;
    let o = rec.stop();
    std::fs::write(dir.path().join("stop"), "").unwrap();
    let r = read(&out);
    let samples = r.samples.iter().filter(|s| s.pid == pid).count() as u64;
    assert!(samples >= 600, "{mode}: {samples} samples\n{}", stderr(&o));
    (
        cpu.as_secs_f64() / samples as f64,
        samples,
        r.lost,
        stderr(&o),
    )
}

#[test]
fn a_thread_list_made_to_loop_costs_what_a_plain_one_costs() {
    let (plain, plain_n, _, _) = thread_list_run("plain");
    let (cyclic, cyclic_n, lost, err) = thread_list_run("cyclic");
    // Ten microseconds a sample of slack: the CPU clock's ticks over ~1,000 samples.
    assert!(
        cyclic <= 2.0 * plain + 10e-6,
        "CPU per sample: {:.1} µs with the list looped ({cyclic_n} samples), {:.1} µs \
         with it intact ({plain_n} samples)\n{err}",
        cyclic * 1e6,
        plain * 1e6
    );
    assert_eq!(lost, 0, "records lost\n{err}");
    assert!(
        err.contains("met a loop"),
        "the summary says the list looped: {err}"
    );
}

#[test]
fn names_of_64_kib_rotated_keep_the_recorder_small_and_known_names_kept() {
    let (dir, script) = attacker_dir("hostile_names.py");
    let target = attacker(dir.path(), &script, &[]);
    let pid = target.pid();
    let thread = main_thread(pid);
    let out = dir.path().join("x.prof");
    // 2 MiB per process: names may take 1 MiB, some 900 of the names cut to 1,024
    // characters, met within about 4 s of the attacker's CPU; the rest of the run is
    // past the names budget. (12 s of CPU took over 60 s beside two more runs of this
    // test at once.)
    let rec = Recorder::attach(pid, "999", &out, &["--runtime-memory", "2"]);
    wait_thread_cpu(pid, &thread, Duration::from_secs(8));
    let peak = peak_rss(rec.pid());
    let o = rec.stop();
    std::fs::write(dir.path().join("stop"), "").unwrap();
    let err = stderr(&o);
    assert!(
        peak <= 128 << 20,
        "the recorder's peak memory: {} MiB\n{err}",
        peak >> 20
    );
    let stacks = stacks(&out);
    let (all, steady) = named_share(&stacks, &thread, "steady");
    let (_, budget) = named_share(&stacks, &thread, "[python: budget]");
    // A rotated function's name as read: its first 1,024 characters, then the mark.
    let long = |f: &str| {
        f.strip_suffix("_[j]")
            .is_some_and(|n| n.starts_with('f') && n.ends_with('…') && n.chars().count() == 1025)
    };
    let mine = stacks
        .iter()
        .filter(|(f, _)| f[0] == thread && f.iter().any(|x| long(x)));
    let cut: u64 = mine.map(|(_, n)| n).sum();
    let shares = format!("{all} samples: {steady} steady(), {cut} cut names, {budget} budget");
    assert!(all >= 2000, "{shares}\n{err}");
    // Half the time in steady(), named in every sample whatever the budget.
    assert!(steady * 100 >= all * 40, "{shares}\n{err}");
    assert!(cut * 100 >= all * 5, "{shares}\n{err}");
    assert!(budget * 100 >= all * 10, "{shares}\n{err}");
    assert!(
        err.contains("frames not named: the names budget was spent"),
        "the summary says the names budget tripped: {err}"
    );
}

#[test]
fn record_all_beside_a_looped_thread_list_loses_nothing_and_names_the_rest() {
    let (dir, script) = attacker_dir("hostile_threads.py");
    let attacker = attacker(dir.path(), &script, &["cyclic"]);
    let (python, _) = attacker_python();
    let harmless = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/python/harmless.py");
    let stop = dir.path().join("stop");
    let mut cmd = Command::new(python);
    cmd.arg(&harmless).arg(&stop);
    let target = Target::spawn(cmd);
    let out = dir.path().join("all.prof");
    // Rings of 32 MiB a CPU (40 s of samples at 99 Hz): the test build, niced with
    // the tests and the machine loaded, drains them late (57 records lost in a run
    // with rings of 8 MiB at 199 Hz), and a record lost so would not be the
    // attacker's doing. Before its walks were bounded, the attacker's samples cost
    // 16 to 19 ms each: the rings overflowed whatever their size.
    let rec = Command::new(profile_bin())
        .args([
            "record",
            "-a",
            "-F",
            "99",
            "--no-jvm-perfmap",
            "--mmap-pages=8192",
        ])
        .arg("-o")
        .arg(&out)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start profile");
    let rec = Recorder::adopt(rec, &out);
    wait_thread_cpu(target.pid(), "pyharmless", Duration::from_secs(5));
    wait_process_cpu(attacker.pid(), Duration::from_secs(3));
    let o = rec.stop();
    std::fs::write(&stop, "").unwrap();
    let err = stderr(&o);
    let r = read(&out);
    let of_attacker = r.samples.iter().filter(|s| s.pid == attacker.pid()).count();
    assert!(
        of_attacker >= 150,
        "{of_attacker} samples of the attacker\n{err}"
    );
    assert_eq!(r.lost, 0, "records lost\n{err}");
    let (all, named) = named_share(&stacks(&out), "pyharmless", "busy");
    assert!(all >= 300, "{all} samples of the harmless thread\n{err}");
    assert!(
        named * 100 >= all * 97,
        "{named} of {all} samples of the harmless thread name busy()\n{err}"
    );
    assert!(
        err.contains(&format!("process {}", attacker.pid())) && err.contains("met a loop"),
        "the summary says the attacker's list looped: {err}"
    );
}
