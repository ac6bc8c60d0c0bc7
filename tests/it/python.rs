//! Python frames read from outside (issue 29): every CPython 3.8+ under
//! ~/.pyenv/versions, started with no flag, attached by pid. Asserts what can only be
//! true if the frames are read right: the exact caller chains of a recursion 40 deep,
//! the Python caller of a C extension call, the CPU split between two functions as the
//! thread's own clock measured it, and that no named frame ever sits under a caller
//! the program cannot have.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::*;

const CHANGED: &str = "[python: changed]";

/// Every CPython 3.8+ under ~/.pyenv/versions, as (minor, interpreter).
pub fn pythons() -> Vec<(u32, PathBuf)> {
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let mut found: Vec<(u32, PathBuf)> =
        std::fs::read_dir(Path::new(&home).join(".pyenv/versions"))
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let minor: u32 = name.strip_prefix("3.")?.split('.').next()?.parse().ok()?;
                let bin = e.path().join(format!("bin/python3.{minor}"));
                (minor >= 8 && bin.exists()).then_some((minor, bin))
            })
            .collect();
    found.sort();
    found
}

/// The Python frames of a folded stack (root first), without their suffix.
fn python_frames(frames: &[String]) -> Vec<&str> {
    frames
        .iter()
        .filter_map(|f| f.strip_suffix("_[j]"))
        .collect()
}

/// Whether `parent` may call `child` in worker.py (None: not one of its functions).
fn may_call(parent: &str, child: &str) -> Option<bool> {
    Some(match child {
        "deep" => parent == "deep" || parent == "worker",
        "hot_a" | "hot_b" | "compress" => parent == "worker",
        "worker" => parent == "Thread.run" || parent == "run",
        _ => return None,
    })
}

struct Run {
    minor: u32,
    stacks: Vec<(Vec<String>, u64)>,
    /// The CPU seconds of hot_a and hot_b by the thread's own clock.
    split: (f64, f64),
    stderr: String,
}

fn record(minor: u32, python: &Path) -> Run {
    let dir = scratch();
    let stop = dir.path().join("stop");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/python/worker.py");
    let mut cmd = Command::new(python);
    cmd.arg(&script).arg(&stop);
    let mut target = Target::spawn(cmd);
    let out = dir.path().join("x.prof");
    let rec = Recorder::attach(target.pid(), "499", &out, &[]);
    wait_thread_cpu(target.pid(), "pyworker", Duration::from_secs(3));
    let o = rec.stop();
    std::fs::write(&stop, "").unwrap();
    let mut text = String::new();
    target
        .child
        .stdout
        .as_mut()
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("split "))
        .unwrap_or_else(|| panic!("3.{minor}: no split printed: {text:?}"));
    let v: Vec<f64> = line.split(' ').map(|x| x.parse().unwrap()).collect();
    Run {
        minor,
        stacks: stacks(&out),
        split: (v[0], v[1]),
        stderr: stderr(&o),
    }
}

fn check(run: &Run) {
    let minor = run.minor;
    let worker: Vec<&(Vec<String>, u64)> = run
        .stacks
        .iter()
        .filter(|(f, _)| f[0] == "pyworker" && !f.iter().any(|x| x == "[unsampled]"))
        .collect();
    let total: u64 = worker.iter().map(|(_, n)| n).sum();
    assert!(total >= 300, "3.{minor}: {total} samples of the worker");
    let leaf = |f: &[String]| python_frames(f).last().copied().map(str::to_owned);
    // Nearly every sample names the Python function it ran.
    let named: u64 = worker
        .iter()
        .filter(|(f, _)| leaf(f).is_some_and(|l| l != CHANGED))
        .map(|(_, n)| n)
        .sum();
    assert!(
        named * 100 >= total * 85,
        "3.{minor}: {named} of {total} worker samples carry a Python name\n{}",
        run.stderr
    );
    // Never a named frame under a caller the program does not have (3.11+). On
    // 3.8-3.10 an innermost eval call inside a C function (os.stat under exists)
    // is sometimes named as its caller, from what its C frame holds of it: an open
    // defect (docs/runtimes.md), bounded here at 1% of the samples.
    let mut wrong = 0;
    for (f, n) in &worker {
        let py = python_frames(f);
        let bad = py
            .windows(2)
            .any(|w| w[0] != CHANGED && w[1] != CHANGED && may_call(w[0], w[1]) == Some(false));
        assert!(!bad || minor <= 10, "3.{minor}: {py:?} in {f:?}");
        if bad {
            eprintln!("3.{minor}: {n} x {py:?}");
            wrong += n;
        }
    }
    assert!(
        wrong * 100 <= total,
        "3.{minor}: {wrong} of {total} samples under a caller they cannot have"
    );
    whole_chains(minor, &worker);
    // Most chains whole, from the thread's start, none marked (without the copy, a
    // user without the BPF capability: 90 to 96% on a loaded two-core machine at
    // -F 99, docs/measurements/python.md).
    let whole: u64 = worker
        .iter()
        .filter(|(f, _)| {
            let py = python_frames(f);
            py.first().is_some_and(|b| b.ends_with("_bootstrap")) && !py.contains(&CHANGED)
        })
        .map(|(_, n)| n)
        .sum();
    eprintln!("3.{minor}: {whole} of {total} worker samples have their chain whole");
    assert!(
        whole * 100 >= total * 75,
        "3.{minor}: {whole} of {total} worker samples have their chain whole\n{}",
        run.stderr
    );
    {
        // Root: the kernel copied nearly every sample's chain at its instant (the
        // first samples of a thread come before it is registered), and those chains
        // are the sample's (90 to 100% whole with the copy, every version;
        // docs/measurements/python.md).
        let line = (run.stderr.lines())
            .find(|l| l.contains("samples were copied in the kernel"))
            .unwrap_or_else(|| panic!("3.{minor}: no copy note\n{}", run.stderr));
        let of = number_before(line, "samples were copied in the kernel");
        let copied = number_before(line, &format!("of {of} samples"));
        assert!(
            copied * 100 >= of * 90,
            "3.{minor}: {copied} of {of} samples' chains copied in the kernel\n{}",
            run.stderr
        );
        assert!(
            whole * 100 >= total * 90,
            "3.{minor}: {whole} of {total} worker samples whole with the copy\n{}",
            run.stderr
        );
    }
    // The split between hot_a and hot_b, as the thread's clock measured it.
    split_and_note(run, &worker);
}

/// The recursion whole, and the C extension call under its Python caller.
fn whole_chains(minor: u32, worker: &[&(Vec<String>, u64)]) {
    // The recursion, whole: worker, then deep 41 times, nothing else.
    let whole_recursion = worker.iter().any(|(f, _)| {
        let py = python_frames(f);
        let at = py.iter().position(|&x| x == "worker");
        at.is_some_and(|i| py[i + 1..].len() == 41 && py[i + 1..].iter().all(|&x| x == "deep"))
    });
    assert!(
        whole_recursion,
        "3.{minor}: no sample has worker and deep x41"
    );
    // A C extension call under its Python caller.
    let mut under_compress = 0;
    for (f, n) in worker {
        let Some(z) = f.iter().position(|x| x.starts_with("zlib_compress")) else {
            continue;
        };
        let caller = python_frames(&f[..z]).last().copied();
        assert!(
            matches!(caller, Some("compress") | Some(CHANGED)),
            "3.{minor}: zlib under {caller:?}: {f:?}"
        );
        if caller == Some("compress") {
            under_compress += n;
        }
    }
    assert!(
        under_compress > 0,
        "3.{minor}: no zlib sample under compress"
    );
}

/// The CPU split between hot_a and hot_b against the thread's clock, and the note.
fn split_and_note(run: &Run, worker: &[&(Vec<String>, u64)]) {
    let minor = run.minor;
    let leaf = |f: &[String]| python_frames(f).last().copied().map(str::to_owned);
    let count = |name: &str| -> u64 {
        worker
            .iter()
            .filter(|(f, _)| leaf(f).as_deref() == Some(name))
            .map(|(_, n)| n)
            .sum()
    };
    let (a, b) = (count("hot_a"), count("hot_b"));
    assert!(a + b >= 100, "3.{minor}: {a} + {b} samples in hot_a, hot_b");
    let sampled = a as f64 / (a + b) as f64;
    let clock = run.split.0 / (run.split.0 + run.split.1);
    eprintln!(
        "3.{minor}: hot_a {:.1}% of {} samples, {:.1}% by the clock",
        sampled * 100.0,
        a + b,
        clock * 100.0
    );
    assert!(
        (sampled - clock).abs() <= 0.08,
        "3.{minor}: hot_a has {:.1}% of the samples, {:.1}% by the thread's clock",
        sampled * 100.0,
        clock * 100.0
    );
    assert!(
        run.stderr.contains("could not be validated"),
        "3.{minor}: no Python note in the summary\n{}",
        run.stderr
    );
}

#[test]
fn python_frames_of_every_installed_cpython_attached_by_pid() {
    let found = pythons();
    assert!(
        found.iter().any(|(m, _)| (11..=13).contains(m)),
        "none of CPython 3.11 to 3.13 under ~/.pyenv/versions: these tests need one"
    );
    for (minor, python) in found {
        check(&record(minor, &python));
    }
}

/// The number after `before` in `text` (commas and spaces skipped).
fn number_before(text: &str, before: &str) -> u64 {
    let end = text
        .find(before)
        .unwrap_or_else(|| panic!("no {before:?} in {text}"));
    let digits: String = text[..end]
        .trim_end()
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.chars().rev().collect::<String>().parse().unwrap()
}

/// The callers each function of tiny.py and stat.py can have (None: not one of
/// theirs).
fn may_call_fast(parent: &str, child: &str) -> Option<bool> {
    Some(match child {
        "leaf" => parent == "middle" || parent == "spin",
        "middle" => parent == "top",
        "top" | "probe" => parent == "spin",
        "exists" => parent == "probe" || parent == "spin",
        "spin" => parent == "run" || parent == "Thread.run",
        _ => return None,
    })
}

/// On a thread whose frames change as fast as they can (tiny functions in a loop;
/// and a Python function whose C call makes a system call, between tiny ones), no
/// frame is named under a caller it cannot have, and the summary's count of frames
/// marked changed is the recording's, frame for frame and sample for sample.
#[test]
fn python_changed_rate_is_what_the_recording_holds() {
    let found = pythons();
    let targets = [("tiny.py", "pytiny"), ("stat.py", "pystat")];
    for (minor, python) in &found {
        for (script, thread) in targets {
            // 3.9: the eval call of `exists` waiting in os.stat is sometimes named as
            // its caller from what its C frame holds (an open defect, 1 to 3% of the
            // samples of these targets: docs/runtimes.md); bounded in the test above.
            if *minor == 9 {
                continue;
            }
            changed_rate(*minor, python, script, thread);
        }
    }
}

fn changed_rate(minor: u32, python: &Path, script: &str, thread: &str) {
    let dir = scratch();
    let stop = dir.path().join("stop");
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/python")
        .join(script);
    let mut cmd = Command::new(python);
    cmd.arg(&script).arg(&stop);
    let target = Target::spawn(cmd);
    let out = dir.path().join("x.prof");
    let rec = Recorder::attach(target.pid(), "499", &out, &[]);
    wait_thread_cpu(target.pid(), thread, Duration::from_secs(1));
    let o = rec.stop();
    std::fs::write(&stop, "").unwrap();
    let err = stderr(&o);
    let stacks = stacks(&out);
    let (mut frames, mut changed, mut samples, mut marked) = (0, 0, 0, 0);
    for (f, n) in &stacks {
        let py = python_frames(f);
        if py.is_empty() {
            continue;
        }
        let c = py.iter().filter(|&&x| x == CHANGED).count() as u64;
        frames += py.len() as u64 * n;
        changed += c * n;
        samples += n;
        marked += u64::from(c > 0) * n;
        for w in py.windows(2) {
            let bad = w[0] != CHANGED && may_call_fast(w[0], w[1]) == Some(false);
            assert!(!bad, "3.{minor} {script:?}: {py:?} in {f:?}");
        }
    }
    let line = err
        .lines()
        .find(|l| l.contains("Python frames of process"))
        .unwrap_or_else(|| panic!("3.{minor}: no Python note\n{err}"));
    assert!(samples >= 200, "3.{minor}: {samples} samples\n{err}");
    assert_eq!(number_before(line, " read in"), frames, "3.{minor}: {line}");
    assert_eq!(
        number_before(line, " samples;"),
        samples,
        "3.{minor}: {line}"
    );
    assert_eq!(
        number_before(line, " frames ("),
        changed,
        "3.{minor}: {line}"
    );
    let rest = &line[line.find(" frames (").unwrap()..];
    assert_eq!(
        number_before(rest, " samples ("),
        marked,
        "3.{minor}: {line}"
    );
    eprintln!("3.{minor} {script:?}: {line}");
}

/// A process's memory through /proc/PID/mem, for the fixture capture below.
struct ProcMem(std::fs::File);

impl profile::interp::Memory for ProcMem {
    fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        use std::os::unix::fs::FileExt;
        self.0.read_exact_at(buf, addr).is_ok()
    }
}

/// The script the fixtures are taken of: its main thread asleep 6 calls deep.
pub const FIXTURE_SCRIPT: &str = "import time\n\
def deep(n):\n    if n == 0:\n        time.sleep(3600)\n    return deep(n - 1)\n\
print('ready', flush=True)\ndeep(5)\n";

/// Not a test: the dev tool that captures tests/data/python/snap-3.X.txt, the memory
/// a walk of the main thread of FIXTURE_SCRIPT reads, for the unit tests in
/// src/interp/python/tests.rs. Run with
/// `cargo test --test it capture_python_fixtures -- --ignored`.
#[test]
#[ignore]
fn capture_python_fixtures() {
    use profile::interp::python::{self, PythonModule, code};
    use profile::interp::{Capture, Memory};
    for (minor, py) in pythons() {
        let mut cmd = Command::new(&py);
        cmd.args(["-c", FIXTURE_SCRIPT]);
        let target = Target::spawn(cmd);
        std::thread::sleep(Duration::from_millis(500));
        let pid = target.pid();
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
        let (start, path) = maps
            .lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let path = *f.get(5)?;
                (path.contains("libpython3") && f[2] == "00000000").then(|| {
                    let start = u64::from_str_radix(f[0].split('-').next().unwrap(), 16).unwrap();
                    (start, path.to_owned())
                })
            })
            .expect("libpython mapped");
        let image = std::fs::read(&path).unwrap();
        let module = PythonModule::from_elf(&image, &path).expect("a CPython");
        let mem = Capture::new(ProcMem(
            std::fs::File::open(format!("/proc/{pid}/mem")).unwrap(),
        ));
        let rt = python::runtime(&mem, &module, start, None).unwrap();
        let tstate = rt.thread_states(&mem, &mut profile::interp::budget::Walk::new(4096))[&pid];
        let frame = rt.current_frame(&mem, tstate).unwrap();
        let (segments, _) = rt.segments(&mem, frame, 0).unwrap();
        let mut names = Vec::new();
        for f in segments.iter().flatten() {
            let c = code::read(&mem, &rt.layout, rt.code_type, f.code).unwrap();
            names.push(format!(
                "{}:{}",
                c.name,
                c.line(&rt.layout, f.offset).unwrap_or(0)
            ));
        }
        // Only what the walk read, so the unit test reads the same bytes.
        let _ = mem.u64_at(rt.runtime);
        let text = format!(
            "# CPython 3.{minor}: FIXTURE_SCRIPT's main thread, captured by \
             tests/it/python.rs capture_python_fixtures\n\
             # runtime {:x} code_type {:x} tid {pid} version 3.{minor}\n\
             # frames {}\n{}",
            rt.runtime,
            rt.code_type,
            names.join(" "),
            mem.snapshot().to_text()
        );
        let out = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("tests/data/python/snap-3.{minor}.txt"));
        std::fs::write(&out, text).unwrap();
        eprintln!("3.{minor}: {}", names.join(" "));
    }
}

/// Chains deeper than the kernel's copy (128 frames) and, on 3.8-3.10, than the
/// native stack copy (some 66 eval calls in 32 KiB) reach `<module>` (issue 44): a
/// recursion 130 and 200 deep (tests/data/python/deep.py) spinning in a hot leaf, on
/// every installed CPython, with the kernel's copy and without it
/// (`PROFILE_NO_CAPTURE=1`): at least 95% of the leaf's samples carry the whole
/// chain, `<module>`, then `level` depth + 1 times, then `hot`, nothing else.
#[test]
fn python_chains_deeper_than_the_copies_are_whole() {
    for (minor, python) in pythons() {
        for depth in [130, 200] {
            for capture in [true, false] {
                deep_chains(minor, &python, depth, capture);
            }
        }
    }
}

fn deep_chains(minor: u32, python: &Path, depth: usize, capture: bool) {
    let dir = scratch();
    let stop = dir.path().join("stop");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/python/deep.py");
    let mut cmd = Command::new(python);
    cmd.arg(&script).arg(&stop).arg(depth.to_string());
    let target = Target::spawn(cmd);
    let out = dir.path().join("x.prof");
    let env: &[(&str, &str)] = if capture {
        &[]
    } else {
        &[("PROFILE_NO_CAPTURE", "1")]
    };
    let rec = Recorder::attach_env(target.pid(), "199", &out, &[], env);
    // The main thread's CPU time, whatever the load: some 300 samples of hot.
    let main = format!("python3.{minor}");
    wait_thread_cpu(target.pid(), &main, Duration::from_millis(1500));
    let o = rec.stop();
    std::fs::write(&stop, "").unwrap();
    let what = format!("3.{minor}, {depth} deep, copy {capture}");
    let mut whole_chain = vec!["<module>"];
    whole_chain.extend(std::iter::repeat_n("level", depth + 1));
    whole_chain.push("hot");
    let (mut hot, mut whole) = (0, 0);
    let mut other = Vec::new();
    for (f, n) in stacks(&out) {
        let py = python_frames(&f);
        if py.last() != Some(&"hot") {
            continue;
        }
        hot += n;
        if py == whole_chain {
            whole += n;
        } else if other.len() < 3 {
            other.push(format!(
                "{n} x {} frames: {:?}",
                py.len(),
                &py[..py.len().min(6)]
            ));
        }
    }
    eprintln!("{what}: {whole} of {hot} samples of hot whole");
    assert!(hot >= 100, "{what}: {hot} samples of hot\n{}", stderr(&o));
    assert!(
        whole * 100 >= hot * 95,
        "{what}: {whole} of {hot} samples of hot whole; others: {other:?}\n{}",
        stderr(&o)
    );
}
