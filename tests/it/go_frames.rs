//! Go's own frame conventions, by construction (issue 53): stacks that cross from a
//! goroutine onto the thread's own stack (`runtime.morestack`, `systemstack`,
//! `mcall`), a cgo call spinning in C, and signal handlers on the signal stack,
//! each recorded from programs built with symbols and stripped. A Go function that
//! switches stacks has its callers on another stack, not in the sample's copy: the
//! stack ends there, marked `[truncated: Go stack switch]`, never with a caller
//! read from the wrong stack (as it did before: `runtime.rt0_go;runtime.mstart;
//! [unknown];runtime.newproc;runtime.mcall;runtime.goexit0`, or an unnamed address
//! above `runtime.sigtramp`). Every other stack reaches its root
//! (`runtime.goexit`, `runtime.mstart`) or is marked for another reason.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use crate::fixture::{go_build, go_toolchains, go_version};

const SWITCH: &str = "[truncated: Go stack switch]";

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/go")
        .join(name)
}

/// The user part of each sample of a recording of `bin args` (at least 2 s of it),
/// with its count.
fn chains(bin: &Path, args: &[&str], out: &Path) -> Vec<(Vec<String>, u64)> {
    let mut cmd = vec!["record", "-F", "999", "-q", "-o", out.to_str().unwrap()];
    cmd.extend(["--", bin.to_str().unwrap()]);
    cmd.extend_from_slice(args);
    ok(&run_profile(&cmd));
    weighted_stacks(out)
        .into_iter()
        .map(|(frames, n, _)| {
            let user = user_part(&frames).iter().map(|f| f.to_string()).collect();
            (user, n)
        })
        .collect()
}

/// Samples of Go code whose chain neither starts at a root or a marker nor names
/// every frame.
/// With `cgo`, the threads the C runtime starts have a C frame at their root, which
/// a stripped build leaves unnamed (`[unknown]` right under the marker).
fn astray(chains: &[(Vec<String>, u64)], cgo: bool) -> Vec<(String, u64)> {
    chains
        .iter()
        .filter(|(c, _)| {
            let Some(first) = c.first() else { return false };
            // The dynamic loader's start of a cgo program is no Go stack.
            if !c
                .iter()
                .any(|f| f.starts_with("runtime.") || f.starts_with("main."))
            {
                return false;
            }
            let rooted = ["runtime.goexit", "runtime.mstart", "runtime.rt0_go"]
                .contains(&first.as_str())
                || first.starts_with("[truncated")
                || first == "[unsampled]";
            let c_root = usize::from(cgo && rooted && first != "runtime.goexit");
            let named = c
                .iter()
                .enumerate()
                .all(|(i, f)| !f.contains("+0x") && (f != "[unknown]" || i == c_root && i > 0));
            !(rooted && named)
        })
        .map(|(c, n)| (c.join(";"), *n))
        .collect()
}

/// Samples through `function`, and those whose chain starts with the marker then one
/// of `switches`.
fn through(chains: &[(Vec<String>, u64)], switches: &[&str], function: &str) -> (u64, u64) {
    let mut all = (0, 0);
    for (c, n) in chains {
        if c.iter().any(|f| f == function) {
            all.0 += n;
            all.1 +=
                n * u64::from(c.len() >= 2 && c[0] == SWITCH && switches.contains(&c[1].as_str()));
        }
    }
    all
}

#[test]
fn go_stack_switches_end_marked_never_with_a_wrong_caller() {
    let toolchains = go_toolchains();
    if toolchains.is_empty() {
        eprintln!("SKIPPED: no `go` on PATH (apt-get install golang-go)");
        return;
    }
    let dir = scratch();
    let cgo = Command::new("gcc").arg("--version").output().is_ok();
    for go in toolchains {
        let version = go_version(&go);
        for strip in [false, true] {
            let what = format!("{version} stripped={strip}");
            let bin = dir.path().join(format!("frames-{version}-{strip}"));
            go_build(&go, &data("frames.go"), &bin, strip);
            let out = dir.path().join("frames.prof");
            // Goroutines growing their stacks: newstack runs on the thread's stack,
            // called by morestack.
            let c = chains(&bin, &["stack", "2"], &out);
            assert!(
                astray(&c, false).is_empty(),
                "{what}: {:?}",
                astray(&c, false)
            );
            let (all, marked) = through(&c, &["runtime.morestack"], "runtime.newstack");
            assert!(all > 50 && marked == all, "{what}: {marked} of {all}");
            // Large allocations: the heap grows on the system stack.
            let c = chains(&bin, &["system", "2"], &out);
            assert!(
                astray(&c, false).is_empty(),
                "{what}: {:?}",
                astray(&c, false)
            );
            let (all, marked) = through(&c, &["runtime.systemstack"], "runtime.systemstack");
            assert!(all > 5 && marked == all, "{what}: {marked} of {all}");
            // Signals handled on the signal stack: nothing read above the trampoline.
            let c = chains(&bin, &["signal", "2"], &out);
            assert!(
                astray(&c, false).is_empty(),
                "{what}: {:?}",
                astray(&c, false)
            );
            let trampolines = ["runtime.sigtramp", "runtime.cgoSigtramp"];
            let (all, marked) = through(&c, &trampolines, "runtime.sigtramp");
            let signal: Vec<_> = c
                .iter()
                .filter(|(c, _)| c.iter().any(|f| f == "runtime.sigtramp"))
                .collect();
            assert_eq!(marked, all, "{what}: {signal:?}");
            if !cgo {
                eprintln!("SKIPPED: the cgo program (no gcc)");
                continue;
            }
            // A cgo call spinning in C: the C frames under the call's switch, the
            // stack marked there. Go 1.27's stripped build keeps no name for C
            // functions (they show as `fn_ADDR@cgospin`), and its table names the
            // switch `runtime.cgocallback` (as `go tool addr2line` does); where the
            // names are kept, the chain is asmcgocall's, with both C functions.
            let bin = dir.path().join(format!("cgospin-{version}-{strip}"));
            go_build(&go, &data("cgospin.go"), &bin, strip);
            let c = chains(&bin, &["2"], &out);
            let samples: u64 = c.iter().map(|(_, n)| n).sum();
            let under_switch: u64 = c
                .iter()
                .filter(|(c, _)| c.len() >= 4 && c[0] == SWITCH && c[1].starts_with("runtime."))
                .map(|(_, n)| n)
                .sum();
            assert!(
                under_switch * 10 >= samples * 8,
                "{what}: {under_switch} of {samples}: {c:?}"
            );
            let (all, marked) = through(&c, &["runtime.asmcgocall"], "spin");
            assert_eq!(marked, all, "{what}");
            let in_c: Vec<_> = c
                .iter()
                .filter(|(c, _)| c.iter().any(|f| f == "spin"))
                .cloned()
                .collect();
            assert!(
                astray(&in_c, true).is_empty(),
                "{what}: {:?}",
                astray(&in_c, true)
            );
            let cfunc = in_c
                .iter()
                .all(|(c, _)| c[2].ends_with("_Cfunc_spin") && c[3] == "spin");
            assert!(cfunc, "{what}: {in_c:?}");
            // Built with symbols, the C functions are named: the spin is theirs.
            if !strip || all > 0 {
                assert!(
                    all * 10 >= samples * 8,
                    "{what}: {all} of {samples} in spin"
                );
            }
        }
    }
}
