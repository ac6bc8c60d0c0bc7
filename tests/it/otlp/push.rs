//! `record --push URL --push-format otlp` against receivers the test runs
//! (tests/fixture/ingest.rs): one that restarts mid-recording (every window still
//! arrives, each decoding with the official protos), one that fails in every way an
//! OTLP receiver can (503 with Retry-After, partial success, 400 with a
//! `google.rpc.Status`, an oversized reply), and one that never answers.

use std::time::Duration;

use super::*;
use crate::fixture::ingest::{IngestServer, Reply, Request};

/// `record -p PID -F 99 -o OUT -d SECS --push URL --push-format otlp --push-interval 1`.
fn push(pid: u32, secs: &str, url: &str, out: &Path, extra: &[&str]) -> Recorder {
    let mut args = vec![
        "-d",
        secs,
        "--push",
        url,
        "--push-format",
        "otlp",
        "--push-interval",
        "1",
    ];
    args.extend_from_slice(extra);
    Recorder::attach(pid, "99", out, &args)
}

/// The request bodies, written to files for the decoder.
fn bodies(dir: &Path, requests: &[Request]) -> Vec<PathBuf> {
    requests
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let p = dir.join(format!("{i:03}.otlp.pb.gz"));
            std::fs::write(&p, &r.body).unwrap();
            p
        })
        .collect()
}

/// The number before `what` in the summary.
fn number_before(err: &str, what: &str) -> u64 {
    err.split(what)
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number before {what:?} in:\n{err}"))
}

#[test]
fn otlp_push_delivers_every_window_across_a_receiver_restart() {
    let protos = protos();
    let dir = scratch();
    let target = chains();
    let first = IngestServer::start(|_| Reply::Status(200));
    let port = first.port;
    let url = first.url();
    let rec = push(target.pid(), "7", &url, &dir.path().join("local.prof"), &[]);
    // Two windows in, the receiver goes away for two seconds (connections refused),
    // then comes back on the same port.
    assert!(first.wait_for(2, Duration::from_secs(30)) >= 2);
    let before = first.requests();
    drop(first);
    std::thread::sleep(Duration::from_secs(2));
    let second = IngestServer::start_on(port, |_| Reply::Status(200));
    let o = rec.wait();
    drop(target);
    ok(&o);
    let err = stderr(&o);
    let mut got = before;
    got.extend(second.requests());
    let windows = number_before(&err, " windows (1 s each)");
    assert!(windows >= 5, "{err}");
    assert!(
        err.contains(&format!(
            "push: {windows} of {windows} windows (1 s each) sent to {url}"
        )),
        "{err}"
    );
    assert!(
        err.contains(" 0 dropped (queue full), 0 refused, 0 unsent"),
        "{err}"
    );
    assert!(
        number_before(&err, " retried") >= 1,
        "the restart was noticed: {err}"
    );
    for r in &got {
        assert_eq!(r.method, "POST");
        assert_eq!(r.path, "/v1development/profiles");
        assert!(r.query.is_empty());
        assert_eq!(r.headers["content-type"], "application/x-protobuf");
        assert_eq!(r.headers["content-encoding"], "gzip");
    }
    // Every window arrived once (a request the old receiver read but did not answer
    // is sent again: at most one duplicate, the same window).
    let Some(protos) = protos else { return };
    let decoded = decode(&protos, &bodies(dir.path(), &got));
    let mut starts: Vec<u64> = decoded
        .iter()
        .map(|d| num(&profile_of(&d["resources"][0], "cpu")["time_unix_nano"]))
        .collect();
    starts.sort();
    starts.dedup();
    assert_eq!(starts.len() as u64, windows, "{starts:?}");
    // The service is --app's default: the target's process name.
    let (exe, comm) = chains_names();
    let pid = u64::from(target_pid(&dir.path().join("local.prof")));
    for d in &decoded {
        let a = &d["resources"][0]["attributes"];
        assert_eq!(a["service.name"], comm.as_str(), "{a}");
        assert_eq!(a["process.executable.name"], exe.as_str(), "{a}");
        assert_eq!(num(&a["process.pid"]), pid, "{a}");
    }
    let level_c: u64 = decoded
        .iter()
        .map(|d| num(&profile_of(&d["resources"][0], "samples")["by_function"]["level_c"]))
        .sum();
    assert!(level_c > 0, "level_c is in the pushed windows");
}

/// The OTLP `ExportProfilesServiceResponse` with a partial success, and a
/// `google.rpc.Status`, written by hand (a message with one message field, and
/// with a varint and a string).
fn partial_success(rejected: u8, message: &str) -> Vec<u8> {
    let mut inner = vec![0x08, rejected, 0x12, message.len() as u8];
    inner.extend_from_slice(message.as_bytes());
    let mut out = vec![0x0a, inner.len() as u8];
    out.extend(inner);
    out
}

fn status(code: u8, message: &str) -> Vec<u8> {
    let mut out = vec![0x08, code, 0x12, message.len() as u8];
    out.extend_from_slice(message.as_bytes());
    out
}

#[test]
fn otlp_push_honours_retry_after_partial_success_and_refusals() {
    let proto = || {
        vec![(
            "Content-Type".to_owned(),
            "application/x-protobuf".to_owned(),
        )]
    };
    let server = IngestServer::start(move |n| match n {
        0 => Reply::Raw(503, vec![("Retry-After".into(), "2".into())], Vec::new()),
        1 => Reply::Raw(
            200,
            proto(),
            partial_success(1, "one profile had no samples"),
        ),
        2 => Reply::Raw(400, proto(), status(3, "bad sample in profile 0")),
        3 => Reply::Raw(200, proto(), vec![b'x'; 100_000]),
        _ => Reply::Status(200),
    });
    let dir = scratch();
    let target = chains();
    let out = dir.path().join("local.prof");
    let o = push(
        target.pid(),
        "5",
        &server.url(),
        &out,
        &["--push-header", "Authorization: Bearer sekrit-otlp-token"],
    )
    .wait();
    drop(target);
    ok(&o);
    let err = stderr(&o);
    let got = server.requests();
    assert!(got.len() >= 5, "{err}");
    // The 503 asked for 2 s; backoff alone would have waited 0.5 s.
    let waited = got[1].at - got[0].at;
    assert!(waited >= Duration::from_millis(1900), "{waited:?}\n{err}");
    assert!(
        err.contains("took a window but rejected 1 profile of it: one profile had no samples"),
        "{err}"
    );
    assert!(
        err.contains("rejected 1 profile of them (partial success)"),
        "{err}"
    );
    assert_eq!(
        err.matches("refused a profile: HTTP 400 Bad Request: bad sample in profile 0")
            .count(),
        1,
        "{err}"
    );
    let windows = number_before(&err, " windows (1 s each)");
    // Every window but the refused one is taken (the oversized reply too).
    assert!(
        err.contains(&format!("{} of {windows} windows", windows - 1))
            && err.contains("1 retried, 0 dropped (queue full), 1 refused, 0 unsent"),
        "{err}"
    );
    assert!(!err.contains("sekrit"), "{err}");
    assert_eq!(got[0].headers["authorization"], "Bearer sekrit-otlp-token");
}

#[test]
fn otlp_push_to_a_receiver_that_never_answers_keeps_recording() {
    let dir = scratch();
    let server = IngestServer::start(|_| Reply::Hang);
    let target = chains();
    let out = dir.path().join("local.prof");
    let o = push(
        target.pid(),
        "4",
        &server.url(),
        &out,
        &["--push-buffer", "1"],
    )
    .wait();
    drop(target);
    ok(&o);
    let err = stderr(&o);
    assert_eq!(number_before(&err, " of "), 0, "{err}");
    let windows = number_before(&err, " windows (1 s each)");
    assert!(windows >= 2, "{err}");
    assert_eq!(
        number_before(&err, " dropped (queue full)"),
        windows - 1,
        "{err}"
    );
    assert!(err.contains("the last failure: timed out"), "{err}");
    let rec = read(&out);
    assert!(rec.damage.is_none() && rec.summary.is_some());
}

#[test]
fn otlp_push_to_a_closed_port_or_another_server_says_what_failed() {
    // A port nothing listens on: refused at once, retried until the end.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = scratch();
    let target = chains();
    let out = dir.path().join("local.prof");
    let url = format!("http://127.0.0.1:{port}");
    let o = push(target.pid(), "2", &url, &out, &["--push-buffer", "3"]).wait();
    drop(target);
    ok(&o);
    let err = stderr(&o);
    assert!(
        err.contains("connection refused") || err.contains("connection failed"),
        "{err}"
    );
    assert_eq!(number_before(&err, " of "), 0, "{err}");
    let rec = read(&out);
    assert!(rec.damage.is_none() && rec.summary.is_some());
    // A 404 from something that is not an OTLP receiver says what to check.
    let server = IngestServer::start(|_| Reply::Status(404));
    let target = chains();
    let o = push(
        target.pid(),
        "1",
        &server.url(),
        &dir.path().join("b.prof"),
        &[],
    )
    .wait();
    drop(target);
    ok(&o);
    let err = stderr(&o);
    assert!(err.contains("It has no /v1development/profiles"), "{err}");
}
