//! `record --push`: a real target recorded by the real binary, its windows received by
//! an ingest server the test runs on 127.0.0.1 (tests/fixture/ingest.rs): windows
//! back to back, each a pprof that names the hot function, adding up to the local
//! recording; a server that fails first, one that never answers, one that refuses.

use std::io::Read;
use std::process::Command;

use crate::common::*;
use crate::fixture::ingest::{IngestServer, Reply, Request, read_pprof};

mod failures;
mod https;
mod windows;

fn gunzip(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(b)
        .read_to_end(&mut out)
        .expect("a gzipped pprof body");
    out
}

fn chains() -> Target {
    Target::start(
        &build_c("chains.c", &["-O2", "-g", "-fomit-frame-pointer"]),
        &["worker"],
    )
}

/// `profile record -p PID -d SECS -F 499 --push URL --push-interval 1 EXTRA...`.
fn push(pid: u32, secs: &str, url: &str, extra: &[&str]) -> std::process::Output {
    let pid = pid.to_string();
    let mut args = vec![
        "record",
        "-p",
        &pid,
        "-d",
        secs,
        "-F",
        "499",
        "--push",
        url,
        "--push-interval",
        "1",
    ];
    args.extend_from_slice(extra);
    run_profile(&args)
}

/// The local recording beside the pushes is whole (no damage, ended normally) and has
/// the worker's stacks.
fn local_recording_is_whole(out: &std::path::Path) {
    let rec = read(out);
    assert!(rec.damage.is_none() && rec.summary.is_some());
    assert!(
        stacks(out)
            .iter()
            .any(|(s, _)| s.iter().any(|f| f == "level_c")),
        "{} samples, no level_c",
        rec.samples.len()
    );
}

fn q(r: &Request, k: &str) -> u64 {
    r.query[k].parse().unwrap()
}
