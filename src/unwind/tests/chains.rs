//! End-to-end unwinds of real stacks: the C fixture captures its own registers and
//! stack, and each test asserts the exact caller chain down to the thread's root,
//! through glibc's own CFI (`start_thread`, `clone3`, `qsort_r`, `__restore_rt`).

use super::fixture::{Modules, assert_chain, build, capture, unwind};
use crate::unwind::{FrameAddress, TruncateReason, UnwindEnd};

const MAIN_ROOT: [&str; 4] = [
    "main",
    "__libc_start_call_main",
    "__libc_start_main",
    "_start",
];
const OMIT_FP: &[&str] = &["-O2", "-fomit-frame-pointer"];
const WITH_FP: &[&str] = &["-O2", "-fno-omit-frame-pointer"];

fn chain(flags: &[&str], mode: &str) -> (Vec<Vec<String>>, UnwindEnd) {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), flags);
    let dump = capture(&exe, mode, dir.path());
    let modules = Modules::from_maps(&dump.maps);
    let (frames, end) = unwind(&dump, &modules);
    (modules.symbolize(&frames), end)
}

fn main_chain<'a>(head: &[&'a str]) -> Vec<&'a str> {
    let mut v = head.to_vec();
    v.extend(MAIN_ROOT);
    v
}

#[test]
fn main_thread_omit_frame_pointer() {
    let (names, end) = chain(OMIT_FP, "main");
    assert_chain(&names, &main_chain(&["c", "b", "a"]));
    assert_eq!(end, UnwindEnd::Complete);
}

#[test]
fn main_thread_with_frame_pointer() {
    let (names, end) = chain(WITH_FP, "main");
    assert_chain(&names, &main_chain(&["c", "b", "a"]));
    assert_eq!(end, UnwindEnd::Complete);
}

#[test]
fn pthread_worker_omit_frame_pointer() {
    let (names, end) = chain(OMIT_FP, "thread");
    assert_chain(
        &names,
        &["c", "b", "a", "worker_fn", "start_thread", "clone3"],
    );
    assert_eq!(end, UnwindEnd::Complete);
}

#[test]
fn pthread_worker_with_frame_pointer() {
    let (names, end) = chain(WITH_FP, "thread");
    assert_chain(
        &names,
        &["c", "b", "a", "worker_fn", "start_thread", "clone3"],
    );
    assert_eq!(end, UnwindEnd::Complete);
}

#[test]
fn qsort_callback_crosses_libc() {
    // glibc 2.36's qsort is a tail jump to qsort_r, so qsort itself has no frame.
    let (names, end) = chain(OMIT_FP, "qsort");
    assert_chain(
        &names,
        &main_chain(&["cmp", "msort_with_tmp.part.0+", "qsort_r"]),
    );
    assert_eq!(end, UnwindEnd::Complete);
}

#[test]
fn signal_handler_unwinds_through_restore_rt() {
    let (names, end) = chain(OMIT_FP, "signal");
    assert_chain(&names, &main_chain(&["on_segv", "__restore_rt", "victim"]));
    assert_eq!(end, UnwindEnd::Complete);
}

#[test]
fn deep_recursion_truncates_at_end_of_copy() {
    let (names, end) = chain(OMIT_FP, "deep");
    assert_eq!(
        end,
        UnwindEnd::Truncated(TruncateReason::StackCopyExhausted)
    );
    // Every frame found is a real recursion level; a 64 KiB copy of ~250-byte frames
    // holds a couple of hundred.
    assert!(names.len() > 100, "only {} frames", names.len());
    assert_chain(&names, &["recurse+"]);
}

#[test]
fn frame_pointers_used_where_module_has_no_tables() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), WITH_FP);
    for mode in ["main", "thread"] {
        let dump = capture(&exe, mode, dir.path());
        let expected: Vec<&str> = match mode {
            "main" => main_chain(&["c", "b", "a"]),
            _ => vec!["c", "b", "a", "worker_fn", "start_thread", "clone3"],
        };
        // Module present without tables, then module not found at all (JIT-like).
        for present in [true, false] {
            let mut modules = Modules::from_maps(&dump.maps);
            let path = modules.mapping_of(&exe).path.clone();
            modules.hide = Some((path, present));
            let (frames, end) = unwind(&dump, &modules);
            assert_chain(&modules.symbolize(&frames), &expected);
            assert_eq!(
                end,
                UnwindEnd::Complete,
                "{mode}, module present: {present}"
            );
        }
    }
}

#[test]
fn hidden_cfi_without_frame_pointers_truncates() {
    // The omit-frame-pointer build has no rbp chain: hiding its CFI must not invent
    // frames that are not there (rbp is not a frame pointer here).
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), OMIT_FP);
    let dump = capture(&exe, "thread", dir.path());
    let mut modules = Modules::from_maps(&dump.maps);
    let path = modules.mapping_of(&exe).path.clone();
    modules.hide = Some((path, true));
    let (frames, end) = unwind(&dump, &modules);
    assert_eq!(frames[0], FrameAddress::InstructionPointer(dump.regs.ip));
    assert!(matches!(end, UnwindEnd::Truncated(_)), "{end:?}");
    if dump.regs.bp == 0 {
        // As on Debian 12's glibc: nothing up the thread's stack set rbp.
        assert_eq!(frames, [FrameAddress::InstructionPointer(dump.regs.ip)]);
        assert_eq!(end, UnwindEnd::Truncated(TruncateReason::NoUnwindInfo));
    }
}

#[test]
fn debug_frame_used_where_eh_frame_has_no_fde() {
    // Without asynchronous unwind tables gcc puts the fixture's own CFI in
    // .debug_frame; .eh_frame keeps only the C runtime's FDEs.
    let flags = &[
        "-O2",
        "-fomit-frame-pointer",
        "-fno-asynchronous-unwind-tables",
        "-g",
    ];
    let (names, end) = chain(flags, "thread");
    assert_chain(
        &names,
        &["c", "b", "a", "worker_fn", "start_thread", "clone3"],
    );
    assert_eq!(end, UnwindEnd::Complete);
    let (names, end) = chain(flags, "main");
    assert_chain(&names, &main_chain(&["c", "b", "a"]));
    assert_eq!(end, UnwindEnd::Complete);
}
