//! PostgreSQL under pgbench with `record --off-cpu` (issue 28): each backend's
//! runnable time against perf's record of the same scheduler tracepoints and its
//! running time against its CPU clock, by benches/offcpu/pgbench_runnable.py (a
//! throwaway cluster in a temporary directory, `pgbench -c 4 -j 2` on this machine's
//! CPUs, the backends attached for 3 s, `perf record -e sched:sched_switch -e
//! sched:sched_wakeup` beside, schedstat read every 5 ms and interpolated at the
//! recording's ends). `.ci/run` installs postgresql and perf; the script installs
//! postgresql too when missing.

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
/// and pgbench now outlives the recording. The last misses, one backend's runnable
/// off the kernel's run-queue delay (+19% in session 13, -5.3% in 1 of 26 runs in
/// session 14), were the kernel's: it stamps both sides of a switch with its run-queue
/// clock, which it leaves un-updated after a wake-up preemption
/// (`rq_clock_skip_update`), and so moves time between a thread's CPU clock and its
/// delay (up to 25 ms a second per backend here). perf's record of the same
/// tracepoints agreed with the recording within 2.4% in all 26 runs, the misses too
/// (docs/measurements/pgbench.md, benches/offcpu/rq_clock_skip.py). So runnable is
/// judged against perf's, the kernel's delay shown beside. The same shift put one
/// backend's running 4.4 and 5.3% over its clock in 2 of 10 runs: its samples weigh
/// its stretches between SWITCH records, which the kernel had partly counted as delay
/// (perf's running 15% over the clock); running is judged between the clock and
/// perf's running.
#[test]
fn pgbench_backends_runnable_agrees_with_perf_and_running_with_the_clock() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/offcpu/pgbench_runnable.py");
    let bin = format!("--profile={}", profile_bin());
    let mut last = String::new();
    // A run whose recorder lost records (starved of CPU on a loaded machine: the
    // figures cannot be exact then, and the summary says so) is run again, once.
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
            Some(2) => continue,
            _ => break,
        }
    }
    panic!("{last}");
}
