//! The recorder killed or stopped by a signal: after SIGKILL (attached or in launch
//! mode) the target runs on free, with no event left, and the file written so far
//! reads and is named; SIGTERM, SIGINT and SIGHUP stop the recording cleanly.

use super::*;

/// SIGKILL of the recorder, attached: the target runs on at full speed with no event
/// left, and the file written so far reads, is reported as cut, and gets its names
/// from the binaries (issue 14, item 7: it had none at all).
#[test]
fn sigkill_leaves_the_target_whole_and_the_recording_named() {
    let dir = scratch();
    let out = dir.path().join("x.prof");
    let target = Target::start(&faults_bin(), &["spin"]);
    let pid = target.pid();
    // A second spinner, never profiled, is the yardstick: the machine is shared, so
    // the target's CPU rate is compared with the control's over the same window. Both
    // on one CPU, where the scheduler splits that CPU's time evenly between them: on
    // two CPUs, each loaded differently by other work, the target once got 0.47 of
    // the control's CPU at load 8 with no recorder left.
    let control = Target::start(&faults_bin(), &["spin"]);
    let cpu = one_cpu();
    pin(pid, cpu);
    pin(control.pid(), cpu);
    let mut rec = spawn_profile(&[
        "record",
        "-p",
        &pid.to_string(),
        "-F",
        "499",
        "-q",
        "-o",
        out.to_str().unwrap(),
    ]);
    wait_for_attach(&out, &mut rec);
    std::thread::sleep(Duration::from_millis(1000));
    signal(rec.id(), libc::SIGKILL);
    let status = rec.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL));

    assert!(matches!(state(pid), 'R' | 'S'), "target is {}", state(pid));
    assert_eq!(perf_fds(pid), 0);
    // CPU over three 1 s windows, target against control: the median, because on a
    // shared machine the scheduler splits two spinners unevenly over any one window.
    let mut ratios: Vec<f64> = (0..3)
        .map(|_| {
            let (t0, c0) = (
                schedstat_ns(pid, pid).unwrap(),
                schedstat_ns(control.pid(), control.pid()).unwrap(),
            );
            std::thread::sleep(Duration::from_millis(1000));
            let t = schedstat_ns(pid, pid).unwrap() - t0;
            let c = schedstat_ns(control.pid(), control.pid()).unwrap() - c0;
            t as f64 / c.max(1) as f64
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    eprintln!("after the kill, target/control CPU per window: {ratios:.2?}");
    assert!(
        ratios[1] > 0.7,
        "the target got {:.2} of the control's CPU after the kill",
        ratios[1]
    );

    let r = read(&out);
    assert!(!r.samples.is_empty(), "the chunks flushed before the kill");
    let damage = r.damage.clone().expect("a cut recording says so");
    assert!(
        damage.contains("cut") || damage.contains("ends inside"),
        "{damage}"
    );
    let (folded, err) = report_folded(&out);
    assert!(
        err.contains("names resolved from the binaries on this machine"),
        "{err}"
    );
    let spin: u64 = folded
        .lines()
        .filter(|l| l.contains("main;spin_main"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert!(
        spin * 10 >= r.samples.len() as u64 * 9,
        "{spin} of {} samples named main;spin_main:\n{folded}",
        r.samples.len()
    );
}

/// SIGKILL of the recorder in launch mode: the launched command is neither stopped nor
/// left holding an event.
#[test]
fn sigkill_in_launch_mode_leaves_the_command_running_free() {
    let dir = scratch();
    let out = dir.path().join("x.prof");
    let bin = faults_bin();
    let mut rec = spawn_profile(&[
        "record",
        "-q",
        "-o",
        out.to_str().unwrap(),
        "--",
        bin.to_str().unwrap(),
        "spin",
    ]);
    wait_for_attach(&out, &mut rec);
    let children =
        std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", rec.id())).unwrap();
    let child: u32 = children.split_whitespace().next().unwrap().parse().unwrap();
    signal(rec.id(), libc::SIGKILL);
    rec.wait().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let st = state(child);
    let fds = perf_fds(child);
    let (a, b) = (schedstat_ns(child, child), {
        std::thread::sleep(Duration::from_millis(500));
        schedstat_ns(child, child)
    });
    signal(child, libc::SIGKILL);
    assert!(matches!(st, 'R' | 'S'), "command is {st}");
    assert_eq!(fds, 0);
    assert!(b.unwrap() > a.unwrap(), "the command runs");
}

/// SIGTERM, SIGINT and SIGHUP stop the recording cleanly: whole file, names, summary.
#[test]
fn sigterm_sigint_and_sighup_flush_the_recording() {
    let dir = scratch();
    let target = Target::start(&faults_bin(), &["spin"]);
    for (sig, name) in [
        (libc::SIGTERM, "term"),
        (libc::SIGINT, "int"),
        (libc::SIGHUP, "hup"),
    ] {
        let out = dir.path().join(format!("{name}.prof"));
        let mut rec = spawn_profile(&[
            "record",
            "-p",
            &target.pid().to_string(),
            "-q",
            "-o",
            out.to_str().unwrap(),
        ]);
        wait_for_attach(&out, &mut rec);
        signal(rec.id(), sig);
        let status = wait_at_most(&mut rec, Duration::from_secs(30), name);
        assert!(
            status.success(),
            "{name}: {status:?}\n{}",
            child_stderr(&mut rec)
        );
        let r = read(&out);
        assert_eq!(r.damage, None, "{name}");
        assert_eq!(
            r.summary.as_ref().unwrap().stop_reason,
            profile::format::StopReason::Signal,
            "{name}"
        );
        assert!(!r.samples.is_empty(), "{name}");
        assert!(
            r.symbols
                .iter()
                .flatten()
                .any(|s| s.lines.iter().any(|l| l.function == "spin_main")),
            "{name}: names written"
        );
    }
    assert!(matches!(state(target.pid()), 'R' | 'S'));
}

/// The last CPU this test may run on.
fn one_cpu() -> usize {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    assert_eq!(unsafe { libc::sched_getaffinity(0, size, &mut set) }, 0);
    (0..libc::CPU_SETSIZE as usize)
        .rfind(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .expect("a CPU to run on")
}

/// Pins every thread of process `pid` to `cpu`.
fn pin(pid: u32, cpu: usize) {
    // SAFETY: as in `one_cpu`; CPU_SET writes inside the set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(cpu, &mut set) };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let tid: i32 = t.file_name().to_string_lossy().parse().unwrap();
        assert_eq!(unsafe { libc::sched_setaffinity(tid, size, &set) }, 0);
    }
}
