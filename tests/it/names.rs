//! Names end to end: a real target recorded by pid, its recording reported after the
//! binary is gone. Inlined frames, separate debug info, deleted binaries, other mount
//! namespaces, and JIT frames from Node's and Python's perf maps.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

fn chains() -> PathBuf {
    build_c("chains.c", &["-O2", "-g", "-fomit-frame-pointer"])
}

/// True when some sample of `thread` has exactly `chain` as its user stack.
fn has_chain(stacks: &[(Vec<String>, u64)], thread: &str, chain: &[&str]) -> bool {
    stacks
        .iter()
        .any(|(f, _)| f[0] == thread && user_part(f) == chain)
}

#[test]
fn inlined_functions_are_frames_of_their_own_with_lines() {
    let dir = scratch();
    let out = dir.path().join("x.prof");
    let target = Target::start(&chains(), &["inline"]);
    record_pid(target.pid(), "1", "999", &out, &[]);
    let stacks = stacks(&out);
    assert!(
        has_chain(
            &stacks,
            "inl",
            &[
                "clone3",
                "start_thread",
                "inline_main",
                "outer_static",
                "helper_inlined_[i]"
            ]
        ),
        "{stacks:?}"
    );
    // The stored lines put helper_inlined inside its own body, called from outer_static.
    let rec = read(&out);
    let src =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/chains.c"))
            .unwrap();
    let line_of = |needle: &str| src.lines().position(|l| l.contains(needle)).unwrap() as u32 + 1;
    let sym = rec
        .symbols
        .iter()
        .flatten()
        .find(|s| s.lines.len() == 2 && s.lines[0].function == "helper_inlined")
        .expect("a frame with helper_inlined inlined into outer_static");
    assert!(sym.lines[0].inlined && !sym.lines[1].inlined);
    assert_eq!(sym.lines[1].function, "outer_static");
    assert!(sym.lines[0].file.as_deref().unwrap().ends_with("chains.c"));
    assert_eq!(
        sym.lines[0].line,
        Some(line_of(
            "for (unsigned long i = 0; i < n; i++) sink += i * i;"
        ))
    );
    assert_eq!(sym.lines[1].line, Some(line_of("helper_inlined(100000);")));
}

/// A stripped binary gets its names from a debug file found by build-id in --debug-dir.
#[test]
fn stripped_binaries_use_separate_debug_info() {
    let dir = scratch();
    let bin = dir.path().join("stripped");
    let debug = dir.path().join("full.debug");
    std::fs::copy(chains(), &bin).unwrap();
    let run = |args: &[&str]| {
        assert!(
            Command::new(args[0])
                .args(&args[1..])
                .status()
                .unwrap()
                .success(),
            "{args:?}"
        )
    };
    run(&[
        "objcopy",
        "--only-keep-debug",
        bin.to_str().unwrap(),
        debug.to_str().unwrap(),
    ]);
    run(&["strip", "--strip-all", bin.to_str().unwrap()]);
    let id = profile::elf::ElfInfo::parse(&std::fs::read(&bin).unwrap())
        .unwrap()
        .build_id
        .unwrap();
    let hex = profile::elf::build_id_hex(&id);
    let debug_dir = dir.path().join("debug");
    let id_dir = debug_dir.join(".build-id").join(&hex[..2]);
    std::fs::create_dir_all(&id_dir).unwrap();
    std::fs::rename(&debug, id_dir.join(format!("{}.debug", &hex[2..]))).unwrap();

    let target = Target::start(&bin, &["worker"]);
    let chain = [
        "clone3",
        "start_thread",
        "worker_main",
        "level_a",
        "level_b",
        "level_c",
    ];
    let without = dir.path().join("without.prof");
    record_pid(target.pid(), "1", "999", &without, &[]);
    assert!(
        !has_chain(&stacks(&without), "worker", &chain),
        "names without the debug file?"
    );
    let with = dir.path().join("with.prof");
    record_pid(
        target.pid(),
        "1",
        "999",
        &with,
        &["--debug-dir", debug_dir.to_str().unwrap()],
    );
    assert!(has_chain(&stacks(&with), "worker", &chain));
}

/// A binary deleted while it runs is read through /proc/PID/map_files, and the
/// recording reports with the binary gone.
#[test]
fn deleted_binaries_are_named_and_reports_need_no_binary() {
    let dir = scratch();
    let bin = dir.path().join("doomed");
    std::fs::copy(chains(), &bin).unwrap();
    let target = Target::start(&bin, &["worker"]);
    std::fs::remove_file(&bin).unwrap();
    let out = dir.path().join("x.prof");
    record_pid(target.pid(), "1", "999", &out, &[]);
    drop(target);
    let o = run_profile(&[
        "report",
        "-i",
        out.to_str().unwrap(),
        "--per-thread",
        "--folded",
        "-",
    ]);
    ok(&o);
    assert!(
        stdout(&o).lines().any(|l| l.starts_with("worker;")
            && l.contains(";clone3;start_thread;worker_main;level_a;level_b;level_c ")),
        "{}",
        stdout(&o)
    );
}

/// A target in its own mount namespace, whose binary's path does not exist in ours.
#[test]
fn binaries_are_opened_as_the_target_sees_them() {
    let dir = scratch();
    let private = dir.path().join("private");
    std::fs::create_dir(&private).unwrap();
    let script = format!(
        "mount -t tmpfs tmpfs {p} && cp {bin} {p}/hidden && exec {p}/hidden worker",
        p = private.display(),
        bin = chains().display()
    );
    let mut cmd = Command::new("unshare");
    cmd.args(["-m", "--propagation", "private", "sh", "-c", &script]);
    let target = Target::spawn(cmd);
    assert!(
        !private.join("hidden").exists(),
        "the binary must be invisible from here"
    );
    let out = dir.path().join("x.prof");
    record_pid(target.pid(), "1", "999", &out, &[]);
    assert!(has_chain(
        &stacks(&out),
        "worker",
        &[
            "clone3",
            "start_thread",
            "worker_main",
            "level_a",
            "level_b",
            "level_c"
        ]
    ));
}

/// Removes a runtime's perf map when the test ends.
struct PerfMap(u32);
impl Drop for PerfMap {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(format!("/tmp/perf-{}.map", self.0));
    }
}

fn jit_frames(out: &Path, needle: &str) -> u64 {
    stacks(out)
        .iter()
        .filter(|(f, _)| f.iter().any(|x| x.contains(needle) && x.ends_with("_[j]")))
        .map(|(_, n)| n)
        .sum()
}

#[test]
fn node_jit_frames_come_from_its_perf_map() {
    let dir = scratch();
    let js = "function hotLoop(n){let s=0;for(let i=0;i<n;i++){s+=i%7}return s}\
              console.log('ready');for(;;){hotLoop(1e6)}";
    let mut cmd = Command::new("node");
    // Node also writes an isolate-*-v8.log into its working directory.
    cmd.current_dir(dir.path())
        .args(["--perf-basic-prof", "-e", js]);
    let target = Target::spawn(cmd);
    let _map = PerfMap(target.pid());
    std::thread::sleep(std::time::Duration::from_millis(500)); // let the JIT compile hotLoop
    let out = dir.path().join("x.prof");
    record_pid(target.pid(), "2", "499", &out, &[]);
    let n = jit_frames(&out, "hotLoop");
    let total = read(&out).samples.len() as u64;
    assert!(n * 2 > total, "{n} of {total} samples in hotLoop");
    // V8 keeps frame pointers in JIT code: stacks go through it to the process root.
    let rooted: u64 = stacks(&out)
        .iter()
        .filter(|(f, _)| f[2] == "_start" && f.iter().any(|x| x.contains("hotLoop")))
        .map(|(_, n)| n)
        .sum();
    assert!(
        rooted * 100 >= n * 95,
        "{rooted} of {n} hotLoop samples reach _start"
    );
}

fn python312() -> PathBuf {
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let pyenv = Path::new(&home).join(".pyenv/versions");
    std::fs::read_dir(&pyenv)
        .ok()
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("bin/python3.12"))
        .find(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("python3.12"))
}

#[test]
fn python_frames_come_from_its_perf_map() {
    let dir = scratch();
    let py = "def hot_py(n):\n    s = 0\n    for i in range(n):\n        s += i % 7\n    return s\n\
              def outer():\n    return hot_py(100000)\n\
              print('ready', flush=True)\nwhile True:\n    outer()\n";
    let mut cmd = Command::new(python312());
    cmd.args(["-X", "perf", "-c", py]);
    let target = Target::spawn(cmd);
    let _map = PerfMap(target.pid());
    let out = dir.path().join("x.prof");
    record_pid(target.pid(), "2", "499", &out, &[]);
    let n = jit_frames(&out, "hot_py");
    let total = read(&out).samples.len() as u64;
    assert!(n * 2 > total, "{n} of {total} samples under hot_py");
    // Python 3.12's trampolines keep no frame pointer and have no CFI: the stack must
    // still go on through them, from the process root to outer and then hot_py.
    let whole: u64 = stacks(&out)
        .iter()
        .filter(|(f, _)| {
            let pos = |needle: &str| f.iter().position(|x| x.starts_with(needle));
            matches!((pos("_start"), pos("py::outer:"), pos("py::hot_py:")), (Some(2), Some(a), Some(b)) if a < b)
        })
        .map(|(_, n)| n)
        .sum();
    assert!(
        whole * 100 >= n * 95,
        "{whole} of {n} hot_py samples have the whole chain"
    );
}
