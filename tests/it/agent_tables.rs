//! The host agent's tables budget (issue 46): a local user runs large binaries of
//! her own (generated here: 30,000 functions with long names each, 4 MiB of symbol
//! and unwind tables and an 18 MiB file, each its own build-id) beside the agent
//! (`record -a --push-dry-run`, `--tables-memory 12`: 6 MiB of tables, 6 MiB of
//! parsed names, so that the budget trips: two binaries' tables do not fit). The
//! agent's peak memory grows by at most the budget plus a stated slack, every
//! window is handed on within one window length of its end, and a normal process
//! beside them is still named.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::*;
use crate::fixture::ingest::read_pprof;

/// Functions in each generated binary.
const FUNCTIONS: usize = 30_000;
/// `--tables-memory`, MiB.
const BUDGET_MIB: u64 = 12;
/// What the agent may take beyond the budget: one file's tables read while others
/// are still held (at most the budget's tables half, 6 MiB), one symbol table
/// parsed and not kept (about 4 MiB here), the windows being named and pushed,
/// and the allocator's slack (a naming thread's arena, pages not given back).
const SLACK_MIB: u64 = 40;
/// `--push-interval`, seconds.
const WINDOW_S: u64 = 2;

/// Generates the C of `FUNCTIONS` functions and a table of them, shared by every
/// binary, and compiles it once.
fn functions_object(dir: &Path) -> PathBuf {
    let mut c = String::from("typedef unsigned long (*fn_t)(unsigned long);\n");
    let name = |i: usize| format!("agent_tables_generated_function_with_a_long_name_{i:06}");
    for i in 0..FUNCTIONS {
        c.push_str(&format!(
            "unsigned long {}(unsigned long x) {{ return x * {}UL + {i}UL; }}\n",
            name(i),
            2 * i + 3
        ));
    }
    c.push_str(&format!(
        "const fn_t agent_tables_table[{FUNCTIONS}] = {{\n"
    ));
    for i in 0..FUNCTIONS {
        c.push_str(&name(i));
        c.push_str(",\n");
    }
    c.push_str("};\n");
    let src = dir.join("functions.c");
    std::fs::write(&src, c).unwrap();
    let obj = dir.join("functions.o");
    let ok = Command::new("gcc")
        .args(["-O0", "-c"])
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .status()
        .unwrap();
    assert!(ok.success(), "gcc functions.c");
    obj
}

/// A binary calling every function in turn, with a 12 MiB blob (file size, no
/// tables) and `seed` in it, so each is a program of its own (its own build-id).
fn big_binary(dir: &Path, obj: &Path, seed: u32) -> PathBuf {
    let src = dir.join(format!("big{seed}.c"));
    std::fs::write(
        &src,
        format!(
            r#"#include <stdio.h>
typedef unsigned long (*fn_t)(unsigned long);
extern const fn_t agent_tables_table[];
__attribute__((used)) static const char blob[12 << 20] = {{{seed}}};
int main(void) {{
    printf("ready\n");
    fflush(stdout);
    unsigned long s = {seed};
    for (;;)
        for (int i = 0; i < {FUNCTIONS}; i++)
            s = agent_tables_table[i](s);
}}
"#
        ),
    )
    .unwrap();
    let out = dir.join(format!("big{seed}"));
    let ok = Command::new("gcc")
        .args(["-O0"])
        .arg(&src)
        .arg(obj)
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap();
    assert!(ok.success(), "gcc big{seed}.c");
    out
}

/// A normal program whose function the windows must name.
fn normal_binary(dir: &Path) -> PathBuf {
    let src = dir.join("normal.c");
    std::fs::write(
        &src,
        r#"#include <stdio.h>
__attribute__((noinline)) unsigned long agent_tables_normal_spin(unsigned long s) {
    for (int i = 0; i < 1000000; i++) s = s * 6364136223846793005UL + 1;
    return s;
}
int main(void) {
    printf("ready\n");
    fflush(stdout);
    volatile unsigned long s = 1;
    for (;;) s = agent_tables_normal_spin(s);
}
"#,
    )
    .unwrap();
    let out = dir.join("normal");
    let ok = Command::new("gcc")
        .args(["-O1", "-fno-omit-frame-pointer"])
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap();
    assert!(ok.success(), "gcc normal.c");
    out
}

/// `VmHWM` (peak resident memory) of a process, in KiB.
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

/// Each dry-run request's window end (`until`, Unix ns) and when it was written.
fn requests(dir: &Path) -> Vec<(PathBuf, u64, u64)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let path = e.path();
        if path.extension().is_none_or(|x| x != "query") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        // A request the agent is still writing is read at the next look.
        let Some(until) = text
            .split(['?', '&', '\n'])
            .find_map(|kv| kv.strip_prefix("until="))
            .and_then(|v| v.parse().ok())
        else {
            continue;
        };
        let written = e
            .metadata()
            .unwrap()
            .modified()
            .unwrap()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        out.push((path, until, written));
    }
    out
}

/// The function names in a dry-run request's profile.
fn functions(query: &Path) -> Vec<String> {
    let body = std::fs::read(query.with_extension("pprof")).unwrap_or_default();
    if body.is_empty() {
        return Vec::new();
    }
    let mut raw = Vec::new();
    use std::io::Read;
    flate2::read::GzDecoder::new(&body[..])
        .read_to_end(&mut raw)
        .unwrap();
    read_pprof(&raw).functions
}

/// Starts `bin` as `nobody` and waits for its "ready".
fn as_nobody(bin: &Path) -> Target {
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .arg(bin);
    Target::spawn(cmd)
}

#[test]
fn large_binaries_of_a_user_keep_the_agent_within_its_tables_budget() {
    // Binaries in a directory `nobody` can read.
    let dir = tempfile::Builder::new()
        .prefix("profile-it-tables-")
        .tempdir_in("/tmp")
        .unwrap();
    let bins = dir.path().join("bins");
    std::fs::create_dir(&bins).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&bins, std::fs::Permissions::from_mode(0o755)).unwrap();
    let obj = functions_object(&bins);
    let big: Vec<PathBuf> = (1..=3).map(|s| big_binary(&bins, &obj, s)).collect();
    let normal = normal_binary(&bins);
    let sent = dir.path().join("sent");
    std::fs::create_dir(&sent).unwrap();

    let normal = as_nobody(&normal);
    let mut agent = Command::new(profile_bin())
        .args(["record", "-a", "-d", "600", "-q", "--no-jvm-perfmap"])
        .args(["--push-interval", &WINDOW_S.to_string()])
        .args(["--tables-memory", &BUDGET_MIB.to_string()])
        .args(["--push", "http://127.0.0.1:9", "--push-dry-run"])
        .arg(&sent)
        .env("PROFILE_DEBUG_TABLES", "2")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let reader = stderr_in_background(&mut agent);
    let _kill = KillOnPanic(agent.id());
    let windows = |n: usize| {
        let t0 = Instant::now();
        loop {
            let mut ends: Vec<u64> = requests(&sent).iter().map(|r| r.1).collect();
            ends.sort_unstable();
            ends.dedup();
            if ends.len() >= n {
                return;
            }
            assert!(t0.elapsed() < Duration::from_secs(120), "no windows pushed");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    // Settled: the host's programs sampled so far are read.
    windows(3);
    let before = peak_kib(agent.id());
    let started = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let bigs: Vec<Target> = big.iter().map(|b| as_nobody(b)).collect();
    // Eight windows with them: each binary's tables read, evicted, read again.
    windows(3 + 8);
    let after = peak_kib(agent.id());
    drop(bigs);
    assert!(
        Command::new("kill")
            .args(["-TERM", &agent.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    assert!(agent.wait().unwrap().success());
    drop(normal);
    let stderr = reader.join().unwrap();
    let tables: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("profile: tables:"))
        .collect();
    let report = format!(
        "peak before {before} KiB, after {after} KiB\nlast tables: {:?}",
        tables.last()
    );
    eprintln!("{report}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    // Memory: the growth of the peak stays within the budget and the slack.
    let grew_mib = after.saturating_sub(before) >> 10;
    assert!(
        grew_mib <= BUDGET_MIB + SLACK_MIB,
        "peak grew by {grew_mib} MiB\n{report}"
    );

    // Time: every window but the last (named whole at the end) is written within
    // one window length of its end.
    let all = requests(&sent);
    let last = all.iter().map(|r| r.1).max().unwrap();
    let late: Vec<String> = all
        .iter()
        .filter(|r| r.1 != last)
        .filter(|r| r.2.saturating_sub(r.1) > WINDOW_S * 1_000_000_000)
        .map(|r| format!("{} {} ms late", r.0.display(), (r.2 - r.1) / 1_000_000))
        .collect();
    let worst = all
        .iter()
        .filter(|r| r.1 != last)
        .map(|r| r.2.saturating_sub(r.1) / 1_000_000)
        .max()
        .unwrap_or(0);
    eprintln!("latest window written {worst} ms after its end");
    assert!(late.is_empty(), "windows late: {late:?}\n{report}");

    // Names: the normal process's function is named in the windows beside them.
    let with_bigs: Vec<&(PathBuf, u64, u64)> = all.iter().filter(|r| r.1 > started).collect();
    let named = with_bigs
        .iter()
        .filter(|r| {
            functions(&r.0)
                .iter()
                .any(|f| f == "agent_tables_normal_spin")
        })
        .count();
    let generated = with_bigs
        .iter()
        .filter(|r| {
            functions(&r.0)
                .iter()
                .any(|f| f.starts_with("agent_tables_generated_function"))
        })
        .count();
    eprintln!(
        "{} requests beside the binaries, {named} naming the normal process, {generated} \
         naming generated functions",
        with_bigs.len()
    );
    assert!(
        named >= 3,
        "normal process named in {named} requests\n{report}"
    );
}
