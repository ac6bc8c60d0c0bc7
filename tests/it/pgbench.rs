//! PostgreSQL under pgbench with `record --off-cpu` (issue 28): each backend's
//! runnable time against the kernel's run-queue delay, its running time against its
//! CPU clock and its states' sum against its life in the recording, by
//! benches/offcpu/pgbench_runnable.py (a throwaway cluster in a temporary directory,
//! `pgbench -c 4 -j 2` on this machine's CPUs, the backends attached for 3 s,
//! schedstat read every 5 ms and interpolated at the recording's ends, `perf record -e
//! sched:sched_switch -e sched:sched_wakeup` beside for the table). `.ci/run` installs
//! postgresql and perf; the script installs postgresql too when missing.

use std::path::Path;
use std::process::Command;

use crate::common::*;

/// Issue 28: in a clean-clone CI run (fp mode) a backend's running came out twice its
/// CPU clock: a full ring lost a SWITCH-out and the SWITCH-in after it, and the
/// thread's stretch on the CPU ran on across its wait (accounting.rs,
/// `lost_switch_records_never_give_a_thread_more_than_its_clock`). Later, in a debug
/// build with no record lost, one backend's running came out 3.5 to 15.7% over its
/// clock: its stretches ended at the SWITCH-out record, after the switch-out samples
/// (`a_stretch_ends_where_its_switch_out_was_sampled`). A debug recorder that fell
/// behind (`-d 3` recording 6.4 s) was still emptying its rings when pgbench's clients
/// ended: the backends' exits, reported then, replaced the clocks read at the end
/// (every backend 15 to 176% over; `an_exit_reported_after_the_end_does_not_move_the_end`),
/// and pgbench now outlives the recording. The kernel itself moves time between a
/// thread's CPU clock and its run-queue delay (up to 25 ms a second per backend here:
/// it leaves its run-queue clock un-updated after a wake-up preemption,
/// `rq_clock_skip_update`, docs/measurements/pgbench.md), which once put runnable 19%
/// off the delay and running 5% over the clock. A report now gives running the clock
/// and runnable the difference (`profile::split`), as the kernel splits them, so both
/// are judged against the kernel, and the states must add up to the recording. What
/// the kernel moved between the two in a run (perf's running against the clock) is
/// allowed on top of runnable's 5%: in a suite run a backend's runnable came out
/// 6.8% under its delay where perf's was 5 to 13% over it on every backend, the
/// kernel's clock 70 to 90 ms over its own switch tracepoints.
#[test]
fn pgbench_backends_runnable_running_and_life_agree_with_the_kernel() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/offcpu/pgbench_runnable.py");
    let bin = format!("--profile={}", profile_bin());
    let mut last = String::new();
    // A run whose recorder lost records (starved of CPU on a loaded machine: the
    // figures cannot be exact then, and the summary says so), or where the kernel's
    // run-queue delay disagreed with its own scheduler tracepoints (perf's record of
    // them agreeing with the recording: exit 3, once in 20 runs), is run again, once.
    for _ in 0..2 {
        let o = {
            let _sysctls = sysctl_lock().read();
            Command::new("python3")
                .arg(&script)
                // Rings of 8 MiB a CPU: the test build drains them slowly, and the
                // whole suite loads the machine.
                .args(["3", "4", &bin, "--fp", "--mmap-pages=2048"])
                .output()
                .expect("python3")
        };
        last = format!(
            "{}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        match o.status.code() {
            Some(0) => {
                assert!(last.contains(": met"), "{last}");
                return;
            }
            Some(2 | 3) => continue,
            _ => break,
        }
    }
    panic!("{last}");
}
