//! Complete stacks through DWARF unwinding of real targets built without frame
//! pointers: exact caller chains down to the thread root, across libc, in Rust, and a
//! visible marker where a stack is cut.

use std::time::Duration;

use crate::common::*;

/// Among samples whose user leaf is `leaf` in `thread`, the share whose user stack is
/// exactly `chain` (root first).
fn exact_share(
    stacks: &[(Vec<String>, u64)],
    thread: &str,
    leaf: &str,
    chain: &[&str],
) -> (f64, u64) {
    let (mut hit, mut all) = (0, 0);
    for (frames, n) in stacks {
        if frames[0] != thread {
            continue;
        }
        let user = user_part(frames);
        if user.last() != Some(&leaf) {
            continue;
        }
        all += n;
        if user == chain {
            hit += n;
        } else {
            eprintln!("{thread}: unexpected chain {user:?}");
        }
    }
    (hit as f64 / all.max(1) as f64, all)
}

fn check_c_chains(flags: &[&str]) {
    let bin = build_c("chains.c", flags);
    let dir = scratch();
    let out = dir.path().join("x.prof");
    let target = Target::start(&bin, &["worker", "main"]);
    let main_thread = bin.file_name().unwrap().to_str().unwrap()[..15].to_owned();
    // Some 400 samples of each thread at 999 Hz, however loaded the machine is.
    let rec = Recorder::attach(target.pid(), "999", &out, &[]);
    wait_thread_cpu(target.pid(), "worker", Duration::from_millis(400));
    wait_thread_cpu(target.pid(), &main_thread, Duration::from_millis(400));
    rec.stop();
    let stacks = stacks(&out);
    let (share, n) = exact_share(
        &stacks,
        "worker",
        "level_c",
        &[
            "clone3",
            "start_thread",
            "worker_main",
            "level_a",
            "level_b",
            "level_c",
        ],
    );
    assert!(n > 100, "{n} worker samples in level_c");
    assert!(
        share >= 0.99,
        "worker: {:.2}% of {n} samples have the exact chain",
        share * 100.0
    );
    let (share, n) = exact_share(
        &stacks,
        &main_thread,
        "level_c",
        &[
            "_start",
            "__libc_start_main_impl",
            "__libc_start_call_main",
            "main",
            "level_a",
            "level_b",
            "level_c",
        ],
    );
    assert!(n > 100, "{n} main-thread samples in level_c");
    assert!(
        share >= 0.99,
        "main: {:.2}% of {n} samples have the exact chain",
        share * 100.0
    );
}

#[test]
fn c_without_frame_pointers_unwinds_to_the_thread_root() {
    check_c_chains(&["-O2", "-g", "-fomit-frame-pointer"]);
}

#[test]
fn c_with_frame_pointers_unwinds_to_the_thread_root() {
    check_c_chains(&["-O2", "-g", "-fno-omit-frame-pointer"]);
}

/// Records `mode` of chains.c (no frame pointers) until its thread `thread` ran
/// `cpu`, and counts the samples of that thread whose user leaf is `leaf` (with more
/// than one user frame): those whose user stack `whole` accepts, and all.
fn leaf_chains(
    mode: &str,
    thread: &str,
    cpu: Duration,
    leaf: &str,
    whole: impl Fn(&[&str]) -> bool,
) -> (u64, u64) {
    leaf_chains_with(&[], mode, thread, cpu, leaf, whole)
}

/// [`leaf_chains`] recorded with `extra` arguments.
fn leaf_chains_with(
    extra: &[&str],
    mode: &str,
    thread: &str,
    cpu: Duration,
    leaf: &str,
    whole: impl Fn(&[&str]) -> bool,
) -> (u64, u64) {
    let bin = build_c("chains.c", &["-O2", "-g", "-fomit-frame-pointer"]);
    let dir = scratch();
    let out = dir.path().join("x.prof");
    let target = Target::start(&bin, &[mode]);
    record_pid_cpu(target.pid(), thread, cpu, "999", &out, extra);
    let (mut good, mut all) = (0, 0);
    for (frames, n) in stacks(&out) {
        let user = user_part(&frames);
        if frames[0] != thread || user.last() != Some(&leaf) || user.len() < 2 {
            continue;
        }
        all += n;
        if whole(&user) {
            good += n;
        } else {
            eprintln!("unexpected chain {user:?}");
        }
    }
    (good, all)
}

/// A stack that crosses libc: the comparison callback called by qsort.
#[test]
fn callbacks_from_libc_unwind_through_it() {
    let (good, all) = leaf_chains(
        "qsort",
        "sorter",
        Duration::from_millis(600),
        "cmp_ints",
        |user| {
            let middle = &user[4.min(user.len())..user.len() - 1];
            user.starts_with(&["clone3", "start_thread", "sorter_main", "__GI___qsort_r"])
                && !middle.is_empty()
                && middle.iter().all(|f| f.starts_with("msort_with_tmp"))
        },
    );
    assert!(all > 100, "{all} samples in cmp_ints");
    assert!(
        good * 100 >= all * 99,
        "{good} of {all} callback samples unwind through qsort"
    );
}

/// A thread that creates threads spends its time in clone3's system call, where glibc
/// has ended the function's CFI (so that the new thread's unwind stops there): its
/// samples there still unwind to the thread's root, through pthread_create.
#[test]
fn samples_in_clone3_unwind_to_the_thread_creating_it() {
    // Some 400 samples of the spawner at 999 Hz, half of them in clone3. Its own root
    // is clone3 too (the start of every thread): a stack of it alone is not counted.
    // With counts in samples: by default the kernel's cheap context switch hands the
    // spawner's running period to the thread it starts and then waits for, which
    // ends with it, so the spawner is rarely sampled at all (docs/accounting.md).
    let (good, all) = leaf_chains_with(
        &["--exact-weights"],
        "spawn",
        "spawner",
        Duration::from_millis(400),
        "clone3",
        |user| {
            user.starts_with(&["clone3", "start_thread", "spawner_main", "spawn_one"])
                && !user.iter().any(|f| f.starts_with('['))
        },
    );
    assert!(all > 50, "{all} samples in clone3");
    assert!(
        good * 100 >= all * 99,
        "{good} of {all} samples in clone3 unwind to the spawner's root"
    );
}

/// A recursion deeper than the stack copy keeps the frames it has, under a marker.
#[test]
fn stacks_deeper_than_the_copy_are_marked_truncated() {
    let bin = build_c("chains.c", &["-O2", "-g", "-fomit-frame-pointer"]);
    let dir = scratch();
    let out = dir.path().join("x.prof");
    let target = Target::start(&bin, &["deep"]);
    let extra = ["--stack-size", "8192"];
    record_pid_cpu(
        target.pid(),
        "deep",
        Duration::from_millis(300),
        "999",
        &out,
        &extra,
    );
    let (mut truncated, mut bottom) = (0, 0);
    for (frames, n) in stacks(&out) {
        let user = user_part(&frames);
        if frames[0] != "deep" || user.last() != Some(&"bottom") {
            continue;
        }
        bottom += n;
        assert_eq!(user[0], "[truncated: stack copy too small]", "{user:?}");
        assert!(
            user[1..user.len() - 1].iter().all(|f| *f == "recurse"),
            "{user:?}"
        );
        // 8 KiB of 200-byte frames: about 35 of them fit.
        assert!(user.len() > 25, "{user:?}");
        truncated += n;
    }
    assert!(bottom > 20, "{bottom} samples in bottom()");
    assert_eq!(truncated, bottom);
}

/// Rust release code has no frame pointers; generic and closure frames unwind.
#[test]
fn rust_release_binaries_unwind_through_generics_and_closures() {
    let bin = build_rust("chains.rs");
    let dir = scratch();
    let out = dir.path().join("x.prof");
    let target = Target::start(&bin, &[]);
    record_pid_cpu(
        target.pid(),
        "rusty",
        Duration::from_millis(400),
        "999",
        &out,
        &[],
    );
    let (mut good, mut all) = (0, 0);
    for (frames, n) in stacks(&out) {
        let user = user_part(&frames);
        if frames[0] != "rusty" || user.last() != Some(&"chains::hot::<u32>") {
            continue;
        }
        all += n;
        let pos = |name: &str| user.iter().position(|f| f.starts_with(name));
        let order = [
            pos("clone3"),
            pos("start_thread"),
            pos("chains::main::{{closure}}"),
            pos("chains::apply::<"),
            pos("chains::hot::<u32>"),
        ];
        if order[0] == Some(0)
            && order
                .windows(2)
                .all(|w| matches!((w[0], w[1]), (Some(a), Some(b)) if a < b))
        {
            good += n;
        } else {
            eprintln!("unexpected chain {user:?}");
        }
    }
    assert!(all > 100, "{all} samples in hot");
    assert!(
        good * 100 >= all * 99,
        "{good} of {all} samples have the full chain"
    );
}

/// A sample taken in a system call shows the user frames, then the kernel's.
#[test]
fn kernel_frames_sit_on_top_of_the_user_stack() {
    let bin = build_c("chains.c", &["-O2", "-g", "-fomit-frame-pointer"]);
    let dir = scratch();
    let out = dir.path().join("x.prof");
    let target = Target::start(&bin, &["syscalls"]);
    record_pid_cpu(
        target.pid(),
        "sys",
        Duration::from_millis(300),
        "999",
        &out,
        &[],
    );
    let mut in_write = 0;
    for (frames, n) in stacks(&out) {
        if frames[0] != "sys" {
            continue;
        }
        let f: Vec<&str> = frames.iter().map(String::as_str).collect();
        let Some(k) = f.iter().position(|x| x.ends_with("_[k]")) else {
            continue;
        };
        if f.iter().any(|x| x.starts_with("ksys_write")) {
            assert_eq!(
                &f[2..6],
                ["clone3", "start_thread", "sys_main", "sys_loop"],
                "{f:?}"
            );
            assert!(
                f[k..].iter().all(|x| x.ends_with("_[k]")),
                "user frames above kernel ones: {f:?}"
            );
            in_write += n;
        }
    }
    assert!(
        in_write > 20,
        "{in_write} samples in ksys_write under sys_loop"
    );
}
