//! perf's own recordings (issue 15): `profile report` and `profile diff` read the
//! perf.data files `perf record` writes (task-clock, cpu-clock; `--call-graph dwarf`
//! stacks unwound by profile's unwinder, `fp` and kernel callchains as they are),
//! checked against perf's own reading of the same file (`perf script`). Cut and
//! lying files get a clear error.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

fn threads_bin() -> PathBuf {
    build_c("threads.c", &["-O2", "-g", "-fno-omit-frame-pointer"])
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Whether perf is installed (required when PROFILE_REQUIRE_CONSUMERS is set).
fn have_perf() -> bool {
    let found = Command::new("perf").arg("--version").output().is_ok();
    if !found {
        assert!(
            std::env::var_os("PROFILE_REQUIRE_CONSUMERS").is_none(),
            "perf is missing"
        );
        eprintln!("skipped: perf is not installed");
    }
    found
}

/// `perf record ARGS -o OUT -- threads --exit-after 1.2 alpha:50:0 beta:50:0`: two named
/// threads burning CPU in burn_top -> burn_middle -> burn_leaf.
///
/// Debian's perf 6.1 sometimes aborts at the end (`assertion failed at
/// util/build-id.c:1010`, then `stack smashing detected`: once in a full suite run on
/// the loaded machine, then three times in a row in one test, while other tests' perf
/// runs wrote the same build-id cache). No test needs that cache (the binaries are
/// where they were built, and the build ids go into the file's header anyway), so
/// perf runs without it (`-N`); perf is the reference here, not what is tested, so a
/// crash of its own is still tried again, twice at most.
fn perf_record(out: &Path, args: &[&str]) {
    let mut tries = 0;
    loop {
        let o = Command::new("perf")
            .args(["record", "-q", "-N"])
            .args(args)
            .arg("-o")
            .arg(out)
            .arg("--")
            .arg(threads_bin())
            .args(["--exit-after", "1.2", "alpha:50:0", "beta:50:0"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        tries += 1;
        if !o.status.success() && err.contains("assertion failed at util/") && tries < 3 {
            eprintln!("perf record crashed, again: {err}");
            continue;
        }
        assert!(o.status.success(), "perf record: {err}");
        return;
    }
}

/// perf's own count of samples per thread (`tid N`): one `perf script -F tid` line each.
fn perf_samples_per_thread(data: &Path) -> BTreeMap<String, u64> {
    let script = Command::new("perf")
        .args(["script", "-F", "tid", "-i"])
        .arg(data)
        .output()
        .unwrap();
    assert!(script.status.success());
    let mut out = BTreeMap::new();
    for line in String::from_utf8_lossy(&script.stdout).lines() {
        *out.entry(format!("tid {}", line.trim())).or_default() += 1;
    }
    out
}

/// perf's own reading of the file, one stack per sample: `perf script -F
/// tid,ip,sym,dso` blocks (the thread, then frames leaf first), folded root first
/// (`tid N`) with `_[k]` on kernel frames.
fn perf_folded(data: &Path) -> Vec<(Vec<String>, u64)> {
    let script = Command::new("perf")
        .args(["script", "-F", "tid,ip,sym,dso", "-i"])
        .arg(data)
        .output()
        .unwrap();
    assert!(script.status.success());
    let text = String::from_utf8_lossy(&script.stdout);
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let mut lines = block.lines().filter(|l| !l.trim().is_empty());
        let Some(tid) = lines.next() else { continue };
        let mut frames: Vec<String> = lines
            .map(|l| {
                // "    ADDR SYMBOL+0xOFF (DSO)"
                let rest = l.trim().split_once(' ').map_or("", |(_, r)| r);
                let (sym, dso) = rest.rsplit_once(" (").unwrap_or((rest, ""));
                let sym = sym.split("+0x").next().unwrap_or(sym).to_owned();
                if dso.starts_with("[kernel.kallsyms]") {
                    format!("{sym}_[k]")
                } else {
                    sym
                }
            })
            .collect();
        frames.push(format!("tid {}", tid.trim()));
        frames.reverse();
        out.push((frames, 1));
    }
    out
}

fn parse_folded(text: &str) -> Vec<(Vec<String>, u64)> {
    text.lines()
        .filter_map(|l| {
            let (stack, n) = l.rsplit_once(' ')?;
            Some((
                stack.split(';').map(str::to_owned).collect(),
                n.parse().ok()?,
            ))
        })
        .collect()
}

/// `profile report -i DATA --per-thread --folded -` as (stack rooted at `tid N`, count),
/// and each tid's thread name (the root above it). Threads are compared by tid: a
/// thread renamed while sampled has one name in profile's reports (its own), while
/// perf shows the name it had at each sample.
/// Folded stacks (frames root first, count) and thread names by tid.
type Folded = (Vec<(Vec<String>, u64)>, BTreeMap<String, String>);

fn profile_folded(data: &Path) -> Folded {
    let o = run_profile(&["report", "-i", s(data), "--per-thread", "--folded", "-"]);
    ok(&o);
    let mut names = BTreeMap::new();
    let stacks = parse_folded(&stdout(&o))
        .into_iter()
        .map(|(mut f, n)| {
            assert!(f[1].starts_with("tid "), "{f:?}");
            names.insert(f[1].clone(), f.remove(0));
            (f, n)
        })
        .collect();
    (stacks, names)
}

/// The `tid N` of the thread profile names `name`.
fn tid_of(names: &BTreeMap<String, String>, name: &str) -> String {
    names
        .iter()
        .find(|(_, n)| *n == name)
        .map(|(t, _)| t.clone())
        .unwrap_or_else(|| panic!("no thread {name}: {names:?}"))
}

/// Samples per (thread, the three innermost user functions) for the stacks in the
/// burn_* functions, and samples per thread. Inlined functions, which profile names
/// from DWARF and `perf script` leaves out by default, are left out.
type Tally = (BTreeMap<(String, String), u64>, BTreeMap<String, u64>);

fn tally(stacks: &[(Vec<String>, u64)]) -> Tally {
    let mut chains = BTreeMap::new();
    let mut threads = BTreeMap::new();
    for (f, n) in stacks {
        *threads.entry(f[0].clone()).or_default() += n;
        let user: Vec<&str> = f[1..]
            .iter()
            .map(String::as_str)
            .filter(|x| !x.ends_with("_[k]") && !x.ends_with("_[i]"))
            .collect();
        if user.last().is_some_and(|l| l.starts_with("burn_")) {
            let tail = user[user.len().saturating_sub(3)..].join(";");
            *chains.entry((f[0].clone(), tail)).or_default() += n;
        }
    }
    (chains, threads)
}

/// Samples of `thread` whose stack ends (kernel frames aside) with `suffix`.
fn samples_ending(stacks: &[(Vec<String>, u64)], thread: &str, suffix: &[&str]) -> u64 {
    stacks
        .iter()
        .filter(|(f, _)| f[0] == thread)
        .filter(|(f, _)| {
            let user: Vec<&str> = f[1..]
                .iter()
                .map(String::as_str)
                .filter(|x| !x.ends_with("_[k]"))
                .collect();
            user.ends_with(suffix)
        })
        .map(|(_, n)| n)
        .sum()
}

/// `perf record -e task-clock --call-graph dwarf`: the copied stacks are unwound with
/// profile's unwinder into whole caller chains, under each thread's name from the
/// COMM records; the sample count per thread is perf's own.
#[test]
fn perfdata_dwarf_task_clock_stacks_and_thread_names() {
    if !have_perf() {
        return;
    }
    let dir = scratch();
    let data = dir.path().join("dwarf.data");
    perf_record(&data, &["-e", "task-clock", "--call-graph", "dwarf"]);
    let (ours, names) = profile_folded(&data);
    let (_, our_threads) = tally(&ours);
    assert_eq!(
        our_threads,
        perf_samples_per_thread(&data),
        "samples per thread"
    );
    let chain = [
        "start_thread",
        "worker",
        "burn_top",
        "burn_middle",
        "burn_leaf",
    ];
    for thread in ["alpha", "beta"] {
        let tid = tid_of(&names, thread);
        let total = our_threads[&tid];
        let whole = samples_ending(&ours, &tid, &chain);
        assert!(total > 50, "{thread}: {total} samples");
        // burn_middle also calls clock_gettime (the vdso): most samples are in burn_leaf.
        assert!(
            whole * 10 > total * 6,
            "{thread}: {whole} of {total} samples in the whole chain {chain:?}:\n{ours:#?}"
        );
    }
    // The recording is reported like any other: the top table names the leaf.
    let o = run_profile(&["report", "-i", s(&data), "--top", "5"]);
    ok(&o);
    assert!(stdout(&o).contains("burn_leaf"), "{}", stdout(&o));
    assert!(stdout(&o).contains("dwarf stacks"), "{}", stdout(&o));
}

/// `perf record -e cpu-clock --call-graph fp` (and task-clock with `-g`): the kernel's
/// frame-pointer callchains are taken as they are, so profile's stacks are perf's own,
/// sample for sample.
#[test]
fn perfdata_fp_callchains_match_perf_script() {
    if !have_perf() {
        return;
    }
    let dir = scratch();
    for (name, args) in [
        (
            "fp.data",
            &["-e", "cpu-clock", "-c", "250000", "--call-graph", "fp"][..],
        ),
        ("g.data", &["-e", "task-clock", "-c", "250000", "-g"][..]),
    ] {
        let data = dir.path().join(name);
        perf_record(&data, args);
        let (ours, names) = profile_folded(&data);
        let perfs = perf_folded(&data);
        let (our_chains, our_threads) = tally(&ours);
        let (perf_chains, perf_threads) = tally(&perfs);
        assert_eq!(our_threads, perf_threads, "{name}: samples per thread");
        assert_eq!(our_threads, perf_samples_per_thread(&data), "{name}");
        assert_eq!(our_chains, perf_chains, "{name}: innermost frames");
        // burn_leaf keeps no frame (gcc omits it in leaf functions), so a frame-pointer
        // walk from it skips its caller burn_middle: in perf's stacks as in ours.
        let chain = ["start_thread", "worker", "burn_top", "burn_leaf"];
        let alpha = tid_of(&names, "alpha");
        let (whole, total) = (samples_ending(&ours, &alpha, &chain), our_threads[&alpha]);
        assert!(
            whole * 10 > total * 6,
            "{name}: {whole} of {total}: {ours:#?}"
        );
    }
}

/// `profile diff` reads perf.data files, alone or against a profile recording, and
/// finds the same build the same.
#[test]
fn perfdata_diff_against_perfdata_and_a_profile_recording() {
    if !have_perf() {
        return;
    }
    let dir = scratch();
    let a = dir.path().join("a.data");
    let b = dir.path().join("b.data");
    perf_record(&a, &["-e", "task-clock", "-c", "1000000", "-g"]);
    perf_record(&b, &["-e", "task-clock", "-c", "1000000", "-g"]);
    let o = run_profile(&[
        "diff",
        s(&a),
        s(&b),
        "--fail-on-regression",
        "50",
        "--verbose",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}\n{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("burn_leaf"), "{}", stdout(&o));

    let prof = dir.path().join("c.prof");
    ok(&run_profile(&[
        "record",
        "-q",
        "-o",
        s(&prof),
        "--",
        s(&threads_bin()),
        "--exit-after",
        "1.2",
        "alpha:50:0",
        "beta:50:0",
    ]));
    // Like with like: profile's default dwarf stacks against perf's.
    let d = dir.path().join("d.data");
    perf_record(
        &d,
        &["-e", "task-clock", "-c", "1000000", "--call-graph", "dwarf"],
    );
    // profile's recording also holds `[unsampled]` (CPU time no sample stands for),
    // which perf's has not: the diff leaves it out of the rows and the shares, and the
    // functions both recorded compare unchanged.
    let o = run_profile(&[
        "diff",
        s(&d),
        s(&prof),
        "--fail-on-regression",
        "50",
        "--verbose",
    ]);
    assert!(matches!(o.status.code(), Some(0 | 3)), "{}", stderr(&o));
    let out = stdout(&o);
    let rows: Vec<&str> = out.lines().filter(|l| l.contains("burn_")).collect();
    assert!(rows.iter().any(|l| l.ends_with("burn_leaf")), "{out}");
    assert!(rows.iter().all(|l| !l.contains("REGRESSION")), "{out}");
}

/// A perf.data file of another event, or from a big-endian machine, is refused with
/// what to do instead; every cut of a real file and lying sizes in its header give an
/// error or a shorter report, never a panic or a hang.
#[test]
fn perfdata_refusals_and_cut_files() {
    if !have_perf() {
        return;
    }
    let dir = scratch();
    let faults = dir.path().join("faults.data");
    perf_record(&faults, &["-e", "page-faults", "-g"]);
    let o = run_profile(&["report", "-i", s(&faults)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o)
            .contains("profile reads CPU-time samples: record with `perf record -e task-clock`"),
        "{}",
        stderr(&o)
    );

    let data = dir.path().join("fp.data");
    perf_record(&data, &["-e", "task-clock", "--call-graph", "fp"]);
    let bytes = std::fs::read(&data).unwrap();
    let mut big = bytes.clone();
    big[..8].copy_from_slice(b"2ELIFREP");
    let path = dir.path().join("big.data");
    std::fs::write(&path, &big).unwrap();
    let o = run_profile(&["report", "-i", s(&path)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("big-endian"), "{}", stderr(&o));

    let full = profile::input::open(&data).unwrap();
    let cut = dir.path().join("cut.data");
    let step = (bytes.len() / 300).max(1);
    for len in (0..bytes.len()).step_by(step).chain([8, 16, 103, 104, 105]) {
        std::fs::write(&cut, &bytes[..len]).unwrap();
        match profile::input::open(&cut) {
            Ok(rec) => assert!(rec.samples.len() <= full.samples.len()),
            Err(e) => {
                let text = e.to_string();
                assert!(text.contains("cut.data"), "{text}");
            }
        }
    }
    // Lying header fields: sizes and offsets far past the file, a zero attribute size.
    for (at, value) in [
        (16usize, 0u64),
        (16, u64::MAX),
        (24, u64::MAX - 8),
        (32, u64::MAX),
        (40, 1 << 40),
        (48, u64::MAX),
    ] {
        let mut lying = bytes.clone();
        lying[at..at + 8].copy_from_slice(&value.to_le_bytes());
        std::fs::write(&cut, &lying).unwrap();
        let e = profile::input::open(&cut).expect_err("a lying header");
        assert!(
            e.to_string().contains("cut short or damaged"),
            "{at} {value}: {e}"
        );
    }
}
