//! Faults (issue 14): the recorder killed or stopped by a signal, a full disk, targets
//! that exit mid-attach or whose main thread is gone, files changed or corrupted under
//! the recorder, hostile perf maps. The promises checked (docs/reliability.md): the
//! target is never stopped, slowed or left with perf events; what was written stays
//! readable and named; hostile input degrades names, never kills or hangs `profile`.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use profile::elf::ElfInfo;

use crate::common::*;

fn faults_bin() -> PathBuf {
    build_c("faults.c", &["-O2", "-g", "-fno-omit-frame-pointer"])
}

fn faultlib() -> PathBuf {
    build_c("faultlib.c", &["-O2", "-g3", "-shared", "-fPIC"])
}

/// Starts `profile ARGS` in the background.
fn spawn_profile(args: &[&str]) -> Child {
    Command::new(profile_bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start profile")
}

/// Waits for `child` at most `limit`; kills it and fails the test on a hang.
fn wait_at_most(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: profile still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn child_stderr(child: &mut Child) -> String {
    use std::io::Read;
    let mut s = String::new();
    if let Some(e) = child.stderr.as_mut() {
        let _ = e.read_to_string(&mut s);
    }
    s
}

/// Waits until `profile` has attached and flushed a first chunk of events (the
/// mappings it found) to `out`: load on the machine can make setup take seconds.
fn wait_for_attach(out: &Path, child: &mut Child) {
    let t = Instant::now();
    loop {
        if let Ok(r) = profile::format::Recording::read_file(out)
            && !r.mappings.is_empty()
        {
            return;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "profile ended before attaching: {status:?}\n{}",
                child_stderr(child)
            );
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "no attach after 30 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) has no memory effects.
    assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0);
}

/// The scheduler state letter of a process (`R`, `S`, `T` stopped, `t` traced, `Z`).
fn state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    after.chars().next().unwrap()
}

/// Perf event descriptors a process holds.
fn perf_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|l| l.to_string_lossy().contains("perf_event"))
                .count()
        })
        .unwrap_or(0)
}

fn report_folded(rec: &Path) -> (String, String) {
    let o = run_profile(&["report", "-i", rec.to_str().unwrap(), "--folded", "-"]);
    ok(&o);
    (stdout(&o), stderr(&o))
}

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
    // the target's CPU rate is compared with the control's over the same window.
    let control = Target::start(&faults_bin(), &["spin"]);
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

/// Mounts a tmpfs of `kib` KiB at `dir`; unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, kib: u32) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(dir)
            .status()
            .unwrap();
        assert!(status.success(), "mount tmpfs (the tests run as root)");
        Tmpfs(dir.to_owned())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// A full disk: `profile` stops with a clear error, the target is untouched, and the
/// chunks that fitted are readable and named.
#[test]
fn a_full_disk_stops_the_recording_with_a_clear_error() {
    let dir = scratch();
    // Room for the first chunks (metadata, mappings, a first batch of samples) and
    // not much more.
    let fs = Tmpfs::mount(&dir.path().join("small"), 48);
    let out = fs.0.join("x.prof");
    // Deep, varied stacks fill the disk fast.
    let target = Target::start(
        &build_c("chains.c", &["-O2", "-g"]),
        &["deep", "worker", "qsort"],
    );
    let mut rec = spawn_profile(&[
        "record",
        "-p",
        &target.pid().to_string(),
        "-F",
        "4999",
        "-d",
        "30",
        "-q",
        "-o",
        out.to_str().unwrap(),
    ]);
    let status = wait_at_most(&mut rec, Duration::from_secs(60), "full disk");
    let err = child_stderr(&mut rec);
    assert!(!status.success(), "profile must fail on a full disk");
    assert!(err.contains("No space left on device"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(matches!(state(target.pid()), 'R' | 'S'));
    assert_eq!(perf_fds(target.pid()), 0);
    let r = read(&out);
    assert!(!r.samples.is_empty());
    assert!(r.damage.is_some());
    let (folded, _) = report_folded(&out);
    assert!(folded.contains("level_c"), "{folded}");
}

/// Processes that exit while `profile` attaches to them: a clear outcome each time
/// (a recording, or an error saying the process is gone), never a hang or a panic.
#[test]
fn targets_exiting_mid_attach_never_hang_profile() {
    let dir = scratch();
    let out = dir.path().join("x.prof");
    for i in 0..15u64 {
        let mut target = Command::new("sleep")
            .arg(format!("0.{:03}", 5 + i * 7))
            .spawn()
            .unwrap();
        let mut rec = spawn_profile(&[
            "record",
            "-p",
            &target.id().to_string(),
            "-q",
            "-o",
            out.to_str().unwrap(),
        ]);
        let status = wait_at_most(&mut rec, Duration::from_secs(20), "mid-attach exit");
        let err = child_stderr(&mut rec);
        target.wait().unwrap();
        assert!(!err.contains("panicked"), "{err}");
        if !status.success() {
            assert!(
                err.contains("no process") || err.contains("exited") || err.contains("gone"),
                "round {i}: {err}"
            );
        }
    }
}

/// A process whose main thread has exited (pthread_exit in main, a zombie leader)
/// with a live thread: attaching hung forever (issue 14, item 5).
#[test]
fn a_zombie_leader_is_recorded_not_waited_for() {
    let dir = scratch();
    let out = dir.path().join("x.prof");
    let target = Target::start(&faults_bin(), &["zombie"]);
    // "ready" comes just before the main thread's pthread_exit.
    let t = Instant::now();
    while state(target.pid()) != 'Z' {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the leader never exited"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut rec = spawn_profile(&[
        "record",
        "-p",
        &target.pid().to_string(),
        "-d",
        "2",
        "-F",
        "499",
        "-q",
        "-o",
        out.to_str().unwrap(),
    ]);
    let status = wait_at_most(&mut rec, Duration::from_secs(30), "zombie leader");
    assert!(status.success(), "{}", child_stderr(&mut rec));
    let samples = samples_by_thread(&model(&out));
    assert!(
        samples.get("burner").copied().unwrap_or(0) > 50,
        "{samples:?}"
    );
    let stacks = stacks(&out);
    assert!(
        stacks
            .iter()
            .any(|(f, _)| f.iter().any(|x| x == "burn_zombie")),
        "{stacks:?}"
    );
}

/// The end of the last loadable segment: cutting the file there leaves the code the
/// target runs and removes the symbol tables and DWARF after it.
fn end_of_code(lib: &Path) -> u64 {
    let info = ElfInfo::parse(&std::fs::read(lib).unwrap()).unwrap();
    info.segments
        .iter()
        .map(|s| s.file_offset + s.file_size)
        .max()
        .unwrap()
}

/// A library truncated on disk while mapped: `profile` read it through a mapping and
/// died of SIGBUS while naming (issue 14, item 6). Now it keeps the names it read.
#[test]
fn a_library_truncated_while_mapped_does_not_kill_profile() {
    let dir = scratch();
    let lib = dir.path().join("libcut.so");
    std::fs::copy(faultlib(), &lib).unwrap();
    let target = Target::start(&faults_bin(), &["dlopen", lib.to_str().unwrap()]);
    let out = dir.path().join("x.prof");
    let mut rec = spawn_profile(&[
        "record",
        "-p",
        &target.pid().to_string(),
        "-d",
        "2",
        "-q",
        "-o",
        out.to_str().unwrap(),
    ]);
    wait_for_attach(&out, &mut rec);
    let cut = end_of_code(&lib);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&lib)
        .unwrap()
        .set_len(cut)
        .unwrap();
    let status = wait_at_most(&mut rec, Duration::from_secs(30), "truncated library");
    assert!(status.success(), "{status:?}\n{}", child_stderr(&mut rec));
    let stacks = stacks(&out);
    assert!(
        stacks.iter().any(|(f, _)| f.iter().any(|x| x == "lib_hot")),
        "{stacks:?}"
    );
}

/// A corrupt ELF file in the target: everything after the code of a library the target
/// loaded (section headers, symbol tables, DWARF) overwritten with noise. The recording
/// completes and the library's exported function is still named from `.dynsym`.
#[test]
fn a_corrupt_elf_in_the_target_degrades_names_only() {
    let dir = scratch();
    let lib = dir.path().join("libnoise.so");
    let mut bytes = std::fs::read(faultlib()).unwrap();
    let cut = end_of_code(&faultlib()) as usize;
    let mut x: u64 = 0x9e3779b97f4a7c15;
    for b in &mut bytes[cut..] {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    std::fs::write(&lib, &bytes).unwrap();
    let target = Target::start(&faults_bin(), &["dlopen", lib.to_str().unwrap()]);
    let out = dir.path().join("x.prof");
    let o = run_profile(&[
        "record",
        "-p",
        &target.pid().to_string(),
        "-d",
        "1.5",
        "-q",
        "-o",
        out.to_str().unwrap(),
    ]);
    ok(&o);
    assert!(!stderr(&o).contains("panicked"));
    let r = read(&out);
    assert!(!r.samples.is_empty());
    // The section headers are noise: no symbol table is found, the frames keep their
    // module and offset.
    let (folded, _) = report_folded(&out);
    assert!(folded.contains("libnoise.so+0x"), "{folded}");
}

/// Plants `/tmp/perf-PID.map` variants for a target running code in anonymous memory
/// (no perf map of its own): only a regular file owned by root or the target's user
/// names the frames; the others are refused with the reason in the summary, and none
/// hangs the recorder or copies a file it points to (issue 14, item 1).
#[test]
fn hostile_perf_maps_are_refused_with_a_reason() {
    use std::os::unix::fs::symlink;
    let dir = scratch();
    let target = Target::start(&faults_bin(), &["jit"]);
    let pid = target.pid();
    let map = PathBuf::from(format!("/tmp/perf-{pid}.map"));
    let _cleanup = RemoveOnDrop(map.clone());
    let code = jit_code_address(pid);
    let line = format!("{code:x} 40 planted_name\n");
    let secret = dir.path().join("secret");
    std::fs::write(&secret, format!("{code:x} 40 secret_contents\n")).unwrap();

    let record = |tag: &str| -> (String, String) {
        let out = dir.path().join(format!("{tag}.prof"));
        let mut rec = spawn_profile(&[
            "record",
            "-p",
            &pid.to_string(),
            "-d",
            "1",
            "-o",
            out.to_str().unwrap(),
        ]);
        let status = wait_at_most(&mut rec, Duration::from_secs(30), tag);
        let err = child_stderr(&mut rec);
        assert!(status.success(), "{tag}: {err}");
        (report_folded(&out).0, err)
    };

    // Root's own map is used.
    std::fs::write(&map, &line).unwrap();
    let (folded, _) = record("root");
    assert!(folded.contains("planted_name"), "{folded}");

    // Another user's map is not.
    std::os::unix::fs::chown(&map, Some(4242), None).unwrap();
    let (folded, err) = record("other-user");
    assert!(!folded.contains("planted_name"), "{folded}");
    assert!(err.contains("owned by uid 4242"), "{err}");

    // A symlink is not followed.
    std::fs::remove_file(&map).unwrap();
    symlink(&secret, &map).unwrap();
    let (folded, err) = record("symlink");
    assert!(!folded.contains("secret_contents"), "{folded}");
    assert!(err.contains("symbolic link"), "{err}");

    // A FIFO does not block.
    std::fs::remove_file(&map).unwrap();
    assert!(Command::new("mkfifo").arg(&map).status().unwrap().success());
    let (_, err) = record("fifo");
    assert!(err.contains("not a regular file"), "{err}");

    // A huge file is not read.
    std::fs::remove_file(&map).unwrap();
    std::fs::File::create(&map)
        .unwrap()
        .set_len(1 << 40)
        .unwrap();
    let (_, err) = record("huge");
    assert!(err.contains("more than the"), "{err}");
}

struct RemoveOnDrop(PathBuf);
impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Start of the target's anonymous executable mapping.
fn jit_code_address(pid: u32) -> u64 {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    maps.lines()
        .find(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f[1] == "rwxp" && f.len() == 5
        })
        .map(|l| u64::from_str_radix(l.split('-').next().unwrap(), 16).unwrap())
        .expect("an anonymous rwx mapping")
}

/// Issue 14, item 2: a start that fails (here: no such process) truncated an existing
/// output file before checking the target. Now nothing reaches the final path before
/// recording has begun, and no temporary file is left behind.
#[test]
fn a_failed_start_leaves_an_existing_recording_whole() {
    let dir = scratch();
    let keep = dir.path().join("keep.prof");
    std::fs::write(&keep, b"last week's recording").unwrap();
    let o = run_profile(&["record", "--pid", "999999", "-o", keep.to_str().unwrap()]);
    assert!(!o.status.success());
    assert_eq!(std::fs::read(&keep).unwrap(), b"last week's recording");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "{left:?}");
}

/// Issue 14, items 2 and 3: as root, a symlink planted at the output path made
/// `profile` write through it (emptying the file it points to), and recordings were
/// world-readable (0644) though they hold command lines, paths and names.
#[test]
fn recordings_are_private_and_never_written_through_a_symlink() {
    use std::os::unix::fs::{PermissionsExt, symlink};
    let dir = scratch();
    let victim = dir.path().join("shadow");
    std::fs::write(&victim, b"root:*:19000:0:99999:7:::\n").unwrap();
    let out = dir.path().join("out.prof");
    symlink(&victim, &out).unwrap();
    let target = Target::start(&faults_bin(), &["spin"]);
    record_pid(target.pid(), "0.5", "99", &out, &[]);
    assert_eq!(
        std::fs::read(&victim).unwrap(),
        b"root:*:19000:0:99999:7:::\n"
    );
    let meta = std::fs::symlink_metadata(&out).unwrap();
    assert!(meta.is_file(), "the link was replaced by the recording");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert!(!read(&out).samples.is_empty());
}

/// Issue 14, item 8: `--pid 2` (a kernel thread) recorded 0 samples with no word why.
#[test]
fn a_kernel_thread_is_explained() {
    let dir = scratch();
    let out = dir.path().join("k.prof");
    let o = run_profile(&[
        "record",
        "-p",
        "2",
        "-d",
        "0.3",
        "-o",
        out.to_str().unwrap(),
    ]);
    ok(&o);
    let err = stderr(&o);
    assert!(
        err.contains("process 2 (kthreadd) is a kernel thread"),
        "{err}"
    );
}

/// Issue 14, item 4: `sudo profile record -- cmd` ran the command as root. With
/// `--user` it runs as the sudo caller (SUDO_UID/SUDO_GID) while profile records as
/// root, and the recording is theirs; without it, profile says the command runs as
/// root. (sudo's variables are set by hand here: the tests already run as root.)
#[test]
fn user_runs_the_command_as_the_sudo_caller() {
    use std::os::unix::fs::MetadataExt;
    let dir = scratch();
    let out = dir.path().join("u.prof");
    let sudo = |args: &[&str]| {
        Command::new(profile_bin())
            .args(args)
            .env("SUDO_UID", "65534")
            .env("SUDO_GID", "65534")
            .env("SUDO_USER", "nobody")
            .output()
            .unwrap()
    };
    let o = sudo(&[
        "record",
        "--user",
        "-q",
        "-o",
        out.to_str().unwrap(),
        "--",
        "id",
        "-u",
    ]);
    ok(&o);
    assert_eq!(stdout(&o).trim(), "65534");
    let meta = std::fs::metadata(&out).unwrap();
    assert_eq!(
        (meta.uid(), meta.gid(), meta.mode() & 0o777),
        (65534, 65534, 0o600)
    );

    let o = sudo(&["record", "-o", out.to_str().unwrap(), "--", "id", "-u"]);
    ok(&o);
    assert_eq!(stdout(&o).trim(), "0");
    assert!(
        stderr(&o).contains("the command runs as root; add --user to run it as nobody"),
        "{}",
        stderr(&o)
    );

    // Not under sudo: --user is an error that says why.
    let o = Command::new(profile_bin())
        .args([
            "record",
            "--user",
            "-o",
            out.to_str().unwrap(),
            "--",
            "true",
        ])
        .env_remove("SUDO_UID")
        .env_remove("SUDO_GID")
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(stderr(&o).contains("SUDO_UID"), "{}", stderr(&o));
}

/// The recording's bytes up to (not including) its SYMBOLS chunk: what a recorder
/// killed while naming leaves.
fn cut_before_names(bytes: &[u8]) -> &[u8] {
    let mut pos = 16;
    while pos + 12 <= bytes.len() {
        let kind = u32::from_le_bytes(bytes[pos..pos + 4].try_into().unwrap());
        let len = u32::from_le_bytes(bytes[pos + 4..pos + 8].try_into().unwrap()) as usize;
        if kind == 3 {
            return &bytes[..pos];
        }
        pos += 12 + len;
    }
    panic!("no SYMBOLS chunk");
}

/// Issue 14, item 7: a recording cut before its names (here exactly at a chunk
/// boundary, which read as whole, with no warning) made `diff` against a whole
/// recording of the same program report false regressions on `module+0x...` frames.
/// Now the cut is reported and the names come from the binaries.
#[test]
fn diff_of_a_cut_recording_names_it_from_the_binaries() {
    let dir = scratch();
    let whole = dir.path().join("whole.prof");
    let cut = dir.path().join("cut.prof");
    let target = Target::start(&build_c("chains.c", &["-O2", "-g"]), &["worker", "main"]);
    record_pid(target.pid(), "1.5", "299", &whole, &[]);
    let bytes = std::fs::read(&whole).unwrap();
    std::fs::write(&cut, cut_before_names(&bytes)).unwrap();
    let o = run_profile(&[
        "diff",
        whole.to_str().unwrap(),
        cut.to_str().unwrap(),
        "--verbose",
    ]);
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(err.contains("no closing chunk"), "{err}");
    assert!(
        err.contains("names resolved from the binaries on this machine"),
        "{err}"
    );
    assert!(!out.contains("chains-O2g+0x"), "{out}");
}
