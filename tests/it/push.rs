//! `record --push`: a real target recorded by the real binary, its windows received by
//! an ingest server the test runs on 127.0.0.1 (tests/fixture/ingest.rs): windows
//! back to back, each a pprof that names the hot function, adding up to the local
//! recording; a server that fails first, one that never answers, one that refuses.

use std::io::Read;
use std::process::Command;

use crate::common::*;
use crate::fixture::ingest::{IngestServer, Reply, Request, read_pprof};

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

fn q(r: &Request, k: &str) -> u64 {
    r.query[k].parse().unwrap()
}

#[test]
fn push_streams_back_to_back_windows_that_add_up_to_the_recording() {
    let dir = scratch();
    let server = IngestServer::start(|_| Reply::Status(200));
    let target = chains();
    let out = dir.path().join("local.prof");
    let o = push(
        target.pid(),
        "5",
        &server.url(),
        &[
            "--tag",
            "env=it",
            "--app",
            "chains-test",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    drop(target);
    ok(&o);
    let got = server.requests();
    // A window per second of a 5 s recording, the last one partial; a loaded machine
    // (the recorder names each window's new frames on its own thread) may cut fewer,
    // never less than one whole window and the last.
    assert!((2..=7).contains(&got.len()), "{} windows", got.len());
    let mut by_from = got.clone();
    by_from.sort_by_key(|r| q(r, "from"));
    let arrival: Vec<u64> = got.iter().map(|r| q(r, "from")).collect();
    let ordered: Vec<u64> = by_from.iter().map(|r| q(r, "from")).collect();
    assert_eq!(arrival, ordered, "windows arrive in order");
    for w in by_from.windows(2) {
        assert_eq!(q(&w[0], "until"), q(&w[1], "from"), "back to back");
    }
    let rec = read(&out);
    let (mut samples, mut cpu, mut hot) = (0, 0, 0);
    let pid = rec.meta.pid.unwrap();
    for r in &got {
        assert!(q(r, "until") > q(r, "from"));
        assert_eq!(r.query["format"], "pprof");
        assert_eq!(r.query["sampleRate"], "499");
        assert_eq!(
            r.query["name"],
            format!(
                "chains-test{{env=it,hostname={},pid={pid}}}",
                rec.meta.hostname
            )
        );
        let p = read_pprof(&gunzip(&r.body));
        assert_eq!(p.sample_types, ["samples/count", "cpu/nanoseconds"]);
        samples += p.total("samples");
        cpu += p.total("cpu");
        if p.functions.iter().any(|f| f == "level_c") {
            hot += 1;
        }
        for l in &p.labels {
            assert!(
                l.iter().any(|(k, v)| k == "thread" && !v.is_empty()),
                "{l:?}"
            );
        }
    }
    // Every sample of the local recording is in exactly one window.
    assert_eq!(samples, rec.samples.len() as u64);
    let weight: u64 = rec.samples.iter().map(|s| s.weight).sum();
    assert_eq!(cpu, weight);
    assert!(
        hot >= got.len() - 1,
        "level_c in {hot} of {} windows",
        got.len()
    );

    // go tool pprof reads a window and names the hot function.
    if Command::new("go").arg("version").output().is_err() {
        eprintln!("skipped: go tool pprof is not installed");
        return;
    }
    let biggest = got.iter().max_by_key(|r| r.body.len()).unwrap();
    let file = dir.path().join("w.pb.gz");
    std::fs::write(&file, &biggest.body).unwrap();
    let o = Command::new("go")
        .args(["tool", "pprof", "-top", "-sample_index=cpu"])
        .arg(&file)
        .env("PPROF_TMPDIR", dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "go tool pprof: {}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("Type: cpu"), "{text}");
    assert!(text.contains("level_c"), "{text}");
}

#[test]
fn push_retries_a_server_that_fails_first_and_sends_the_queued_windows() {
    // Three failures (two 503s, one connection closed unanswered), then success:
    // backoff waits 0.5 + 1 + 2 s while later windows queue.
    let server = IngestServer::start(|n| match n {
        0 | 1 => Reply::Status(503),
        2 => Reply::Close,
        _ => Reply::Status(200),
    });
    let target = chains();
    let o = push(target.pid(), "5", &server.url(), &["--app", "x"]);
    drop(target);
    ok(&o);
    let err = stderr(&o);
    let got = server.requests();
    let accepted = server.accepted();
    assert_eq!(got.len(), accepted.len() + 3, "{err}");
    let windows = accepted.len();
    assert!(windows >= 2, "{windows} windows\n{err}");
    assert!(
        err.contains(&format!(
            "push: {windows} of {windows} windows (1 s each) sent to {}",
            server.url()
        )) && err.contains("3 retried, 0 dropped (queue full), 0 refused, 0 unsent"),
        "{err}"
    );
    let mut froms: Vec<u64> = accepted.iter().map(|r| q(r, "from")).collect();
    let sorted = {
        let mut s = froms.clone();
        s.sort();
        s
    };
    assert_eq!(froms, sorted, "sent oldest first");
    froms.dedup();
    assert_eq!(froms.len(), windows, "no window sent twice");
}

#[test]
fn push_to_a_server_that_never_answers_keeps_recording_and_counts_dropped_windows() {
    let dir = scratch();
    let server = IngestServer::start(|_| Reply::Hang);
    let target = chains();
    let out = dir.path().join("local.prof");
    let o = push(
        target.pid(),
        "4",
        &server.url(),
        &["--push-buffer", "1", "-o", out.to_str().unwrap()],
    );
    drop(target);
    ok(&o);
    let err = stderr(&o);
    // Nothing accepted; with one window of buffer every window but the newest is
    // dropped while the first request waits for its answer.
    let number_before = |what: &str| -> u64 {
        err.split(what)
            .next()
            .and_then(|s| s.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no number before {what:?} in:\n{err}"))
    };
    assert_eq!(number_before(" of "), 0, "{err}");
    let windows = number_before(" windows (1 s each)");
    assert!(windows >= 2, "{err}");
    assert_eq!(number_before(" dropped (queue full)"), windows - 1, "{err}");
    assert!(err.contains("1 unsent at exit"), "{err}");
    assert!(err.contains("the last failure: timed out"), "{err}");
    // The local recording is whole, ended normally, with the worker's stacks.
    let rec = read(&out);
    assert!(rec.damage.is_none() && rec.summary.is_some());
    assert!(
        stacks(&out)
            .iter()
            .any(|(s, _)| s.iter().any(|f| f == "level_c")),
        "{} samples, no level_c",
        rec.samples.len()
    );
}

#[test]
fn push_reports_a_refused_request_once_and_never_prints_the_token() {
    let server = IngestServer::start(|_| Reply::Status(401));
    let target = chains();
    let url = server.url();
    let o = push(
        target.pid(),
        "3",
        &url,
        &["--push-header", "Authorization: Bearer sekrit-token-123"],
    );
    drop(target);
    ok(&o);
    let err = stderr(&o);
    assert_eq!(
        err.matches("refused a profile: HTTP 401").count(),
        1,
        "{err}"
    );
    assert!(err.contains("hint: check the credentials"), "{err}");
    assert!(!err.contains("sekrit"), "{err}");
    let got = server.requests();
    assert!(got.len() >= 2, "{err}");
    assert_eq!(
        got[0].headers["authorization"], "Bearer sekrit-token-123",
        "the header is sent"
    );
    assert!(
        err.contains(&format!("{} refused, 0 unsent", got.len())),
        "{err}"
    );

    // Basic auth from the URL, a tenant header from a file: sent, never shown.
    let dir = scratch();
    let headers = dir.path().join("headers");
    std::fs::write(&headers, "# tenant\n\nX-Scope-OrgID: team-7\n").unwrap();
    // Readable by every user: used, with a warning (issue 26).
    std::fs::set_permissions(
        &headers,
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    let from_file = format!("@{}", headers.display());
    let server = IngestServer::start(|_| Reply::Status(200));
    let target = chains();
    let url = format!("http://ops:pa55word@127.0.0.1:{}", server.port);
    let pid = target.pid().to_string();
    let o = run_profile(&[
        "record",
        "-p",
        &pid,
        "-d",
        "1",
        "--push",
        &url,
        "--push-interval",
        "1",
        "--push-header",
        &from_file,
    ]);
    drop(target);
    ok(&o);
    let err = stderr(&o);
    assert!(!err.contains("pa55word"), "{err}");
    assert!(err.contains(&format!("sent to {}", server.url())), "{err}");
    assert!(
        err.contains("is readable by every user (mode 644): the credentials in it are exposed"),
        "{err}"
    );
    // base64("ops:pa55word")
    let first = &server.requests()[0];
    assert_eq!(first.headers["authorization"], "Basic b3BzOnBhNTV3b3Jk");
    assert_eq!(first.headers["x-scope-orgid"], "team-7");
}

#[test]
fn push_options_that_cannot_work_are_refused_before_recording() {
    for (args, want) in [
        (
            &["--push-interval", "5"][..],
            "the following required arguments were not provided",
        ),
        (&["--push", "http://h:1", "--tag", "bad tag=1"], "tag name"),
        (
            &["--push", "http://h:1", "--push-interval", "0.5"],
            "at least 1 second",
        ),
        (
            &["--push", "http://h:1", "--app", "my app"],
            "is not allowed",
        ),
        (
            &["--push", "ftp://u:topsecret@h:1"],
            "the scheme must be http or https",
        ),
        (
            &[
                "--push",
                "https://u:topsecret@h:1",
                "--push-ca",
                "/nonexistent/ca.pem",
            ],
            "--push-ca cannot read /nonexistent/ca.pem",
        ),
        (
            &[
                "--push",
                "http://u:topsecret@h:1",
                "--push-ca",
                "/etc/hostname",
            ],
            "no certificate in it",
        ),
        (
            &[
                "--push",
                "http://h:1",
                "--push-header",
                "Authorization Bearer topsecret",
            ],
            "'Name: value'",
        ),
    ] {
        let mut a = vec!["record", "-p", "1", "-d", "0.1"];
        a.extend_from_slice(args);
        let o = run_profile(&a);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("topsecret"), "{args:?}: {err}");
    }
}

#[test]
fn push_sends_the_last_partial_window_on_sigterm() {
    let dir = scratch();
    let out = dir.path().join("local.prof");
    let server = IngestServer::start(|_| Reply::Status(200));
    let target = chains();
    let pid = target.pid().to_string();
    let url = server.url();
    let child = Command::new(profile_bin())
        .args(["record", "-p", &pid, "-F", "499", "--push", &url])
        .args(["--push-interval", "60", "-o"])
        .arg(&out)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once its perf events are open (the signal handlers are in place by then), and
    // three seconds more: no window is due for a minute, so what arrives is the partial one
    // SIGTERM flushes.
    let perf_fds = || {
        std::fs::read_dir(format!("/proc/{}/fd", child.id()))
            .map(|d| {
                d.flatten()
                    .filter(|e| {
                        std::fs::read_link(e.path())
                            .is_ok_and(|l| l.to_string_lossy().contains("perf_event"))
                    })
                    .count()
            })
            .unwrap_or(0)
    };
    let start = std::time::Instant::now();
    while perf_fds() == 0 && start.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(server.requests().len(), 0);
    // SAFETY: kill(2) on the child this test spawned and has not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let o = child.wait_with_output().unwrap();
    drop(target);
    ok(&o);
    let got = server.requests();
    assert_eq!(got.len(), 1, "{}", stderr(&o));
    let r = &got[0];
    let secs = (q(r, "until") - q(r, "from")) as f64 / 1e9;
    // From the start of sampling (attaching takes part of the 3 s) to the signal.
    assert!(secs > 0.0 && secs < 60.0, "{secs} s");
    // Every sample of the recording is in that one window (on a loaded machine the
    // worker may have had too little CPU for any: then both hold only [unsampled]).
    let p = read_pprof(&gunzip(&r.body));
    let rec = read(&out);
    assert_eq!(p.total("samples"), rec.samples.len() as u64);
    let weight: u64 = rec.samples.iter().map(|s| s.weight).sum();
    assert_eq!(p.total("cpu"), weight);
    if p.functions.len() > 1 {
        assert!(
            p.functions.iter().any(|f| f == "level_c"),
            "{:?}",
            p.functions
        );
    }
    assert!(
        stderr(&o).contains("push: 1 of 1 windows (60 s each)"),
        "{}",
        stderr(&o)
    );
}

/// A CA and a server certificate it signed, made for one test.
struct Certs {
    ca_pem: String,
    cert_pem: String,
    key_pem: String,
}

/// A CA, and a certificate for `names` (`127.0.0.1` becomes an IP address) valid
/// from `from` to `until` (years) signed by it.
fn certs(names: &[&str], from: i32, until: i32) -> Certs {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, date_time_ymd};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "profile test CA");
    let issuer = rcgen::CertifiedIssuer::self_signed(ca, ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let mut p = CertificateParams::new(names).unwrap();
    p.not_before = date_time_ymd(from, 1, 1);
    p.not_after = date_time_ymd(until, 1, 1);
    let cert = p.signed_by(&key, &issuer).unwrap();
    Certs {
        ca_pem: issuer.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    }
}

/// An ingest server on 127.0.0.1 that speaks TLS with `c`'s certificate.
fn tls_server(c: &Certs, plan: impl Fn(usize) -> Reply + Send + Sync + 'static) -> IngestServer {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use std::sync::Arc;
    let chain = vec![CertificateDer::from_pem_slice(c.cert_pem.as_bytes()).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(c.key_pem.as_bytes()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    let config = Arc::new(config);
    IngestServer::start_wrapped(
        "https",
        Box::new(move |tcp| {
            let conn = rustls::ServerConnection::new(config.clone()).ok()?;
            Some(Box::new(rustls::StreamOwned::new(conn, tcp)))
        }),
        plan,
    )
}

#[test]
fn push_over_https_with_push_ca_sends_windows_that_name_the_hot_function() {
    let dir = scratch();
    let c = certs(&["127.0.0.1", "localhost"], 2020, 2090);
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &c.ca_pem).unwrap();
    let server = tls_server(&c, |_| Reply::Status(200));
    let target = chains();
    let out = dir.path().join("local.prof");
    // Basic authentication as Grafana Cloud takes it: user and token in the URL.
    let url = format!("https://123456:glc_s3cret@127.0.0.1:{}", server.port);
    let o = push(
        target.pid(),
        "3",
        &url,
        &[
            "--push-ca",
            ca.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ],
    );
    drop(target);
    ok(&o);
    let err = stderr(&o);
    assert!(!err.contains("glc_s3cret"), "{err}");
    let got = server.requests();
    assert!(!got.is_empty(), "{err}");
    assert!(
        err.contains(&format!(
            "push: {n} of {n} windows (1 s each) sent to {}",
            server.url(),
            n = got.len()
        )),
        "{err}"
    );
    // base64("123456:glc_s3cret")
    assert_eq!(
        got[0].headers["authorization"],
        "Basic MTIzNDU2OmdsY19zM2NyZXQ="
    );
    let (mut samples, mut hot) = (0, false);
    for r in &got {
        assert_eq!(r.path, "/ingest");
        let p = read_pprof(&gunzip(&r.body));
        samples += p.total("samples");
        hot |= p.functions.iter().any(|f| f == "level_c");
    }
    let rec = read(&out);
    assert_eq!(samples, rec.samples.len() as u64, "{err}");
    assert!(
        hot || rec.samples.len() < 5,
        "no level_c in any window\n{err}"
    );

    // A CA for an http URL is a mistake: refused before recording.
    let ca = ca.to_str().unwrap();
    let o = run_profile(&[
        "record",
        "-p",
        "1",
        "-d",
        "0.1",
        "--push",
        "http://h:1",
        "--push-ca",
        ca,
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("is for https"), "{}", stderr(&o));
}

/// Pushes for 2 s to `server` with `extra` options and `-o`; returns stderr, the
/// local recording and its directory.
fn push_refused(
    server: &IngestServer,
    extra: &[&str],
) -> (String, std::path::PathBuf, tempfile::TempDir) {
    let dir = scratch();
    let out = dir.path().join("local.prof");
    let target = chains();
    let mut args = vec!["-o", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = push(target.pid(), "2", &server.url(), &args);
    drop(target);
    ok(&o);
    (stderr(&o), out, dir)
}

#[test]
fn push_over_https_refuses_a_certificate_it_cannot_verify_once_and_keeps_recording() {
    // A CA this machine does not trust: refused as an unknown issuer, reported once,
    // not retried; the local recording is whole.
    let c = certs(&["127.0.0.1"], 2020, 2090);
    let server = tls_server(&c, |_| Reply::Status(200));
    let (err, out, _dir) = push_refused(&server, &[]);
    // One error, with the reason (the summary repeats it as the last failure).
    assert_eq!(err.matches("push: error:").count(), 1, "{err}");
    assert!(
        err.contains(&format!(
            "push: error: {}: the server's certificate is signed by an unknown issuer",
            server.url()
        )),
        "{err}"
    );
    assert!(err.contains("--push-ca FILE"), "{err}");
    assert!(
        server.requests().is_empty(),
        "nothing sent over an unverified link"
    );
    assert!(
        err.contains(" 0 retried,") && err.contains("0 unsent at exit"),
        "{err}"
    );
    assert!(err.contains("push: 0 of "), "{err}");
    let rec = read(&out);
    assert!(rec.damage.is_none() && rec.summary.is_some());
    assert!(
        stacks(&out)
            .iter()
            .any(|(s, _)| s.iter().any(|f| f == "level_c")),
        "{} samples, no level_c",
        rec.samples.len()
    );

    // Trusted, but expired; trusted, but for another name.
    let dir = scratch();
    for (names, from, until, want) in [
        (
            &["127.0.0.1"][..],
            2000,
            2001,
            "certificate expired on 2001-01-01",
        ),
        (&["pyroscope.example"][..], 2020, 2090, "is issued for"),
    ] {
        let c = certs(names, from, until);
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, &c.ca_pem).unwrap();
        let server = tls_server(&c, |_| Reply::Status(200));
        let (err, _, _d) = push_refused(&server, &["--push-ca", ca.to_str().unwrap()]);
        assert_eq!(err.matches("push: error:").count(), 1, "{err}");
        let error = err.lines().find(|l| l.contains("push: error:")).unwrap();
        assert!(error.contains(want), "{err}");
        if want == "is issued for" {
            assert!(err.contains("not for 127.0.0.1"), "{err}");
        }
        assert!(server.requests().is_empty());
        assert!(err.contains(" 0 retried,"), "{err}");
    }
}

/// A thread's own clock (`sum_exec_runtime`) read again and again, each reading with
/// the Unix times (ns) just before and just after it.
type Readings = Vec<(u64, u64, u64)>;

fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// What a thread's clock advanced by between Unix times `from` and `until`, as far as
/// the readings bracket it: (at least, at most).
fn clock_delta(r: &Readings, from: u64, until: u64) -> (u64, u64) {
    // At a moment u the clock is at least any reading finished by u, and at most any
    // reading started after it.
    let lo = |u: u64| r.iter().filter(|x| x.1 <= u).map(|x| x.2).max();
    let hi = |u: u64| r.iter().filter(|x| x.0 >= u).map(|x| x.2).min();
    let (lf, hf) = (
        lo(from).expect("a reading before"),
        hi(from).expect("a reading after"),
    );
    let (lu, hu) = (
        lo(until).expect("a reading before"),
        hi(until).expect("a reading after"),
    );
    (lu.saturating_sub(hf), hu.saturating_sub(lf))
}

#[test]
fn push_windows_carry_each_threads_unsampled_cpu_as_it_accrues() {
    // Three busy threads on a shared 2-CPU machine, sampled at 2 Hz of each thread's
    // CPU: one sample per 500 ms of a thread's CPU, so most of a 1 s window's CPU is
    // no sample's. Each window must still hold each thread's CPU in it, samples plus
    // [unsampled], as the thread's own clock says.
    let dir = scratch();
    let server = IngestServer::start(|_| Reply::Status(200));
    let target = Target::start(
        &build_c("chains.c", &["-O2", "-g"]),
        &["worker", "worker", "main"],
    );
    let pid = target.pid();
    let tids: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    assert_eq!(tids.len(), 3, "{tids:?}");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (first, first_read) = std::sync::mpsc::channel();
    let poller = {
        let (stop, tids) = (stop.clone(), tids.clone());
        std::thread::spawn(move || {
            let mut r: std::collections::HashMap<u32, Readings> = Default::default();
            // A round before recording starts (the first window's start is after it),
            // and one after it ended (the last window's end is before it).
            loop {
                let last = stop.load(std::sync::atomic::Ordering::Relaxed);
                for &tid in &tids {
                    let t0 = unix_ns();
                    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat"));
                    let t1 = unix_ns();
                    if let Some(c) = text
                        .ok()
                        .and_then(|t| t.split_whitespace().next()?.parse().ok())
                    {
                        r.entry(tid).or_default().push((t0, t1, c));
                    }
                }
                let _ = first.send(());
                if last {
                    break r;
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        })
    };
    first_read.recv().unwrap();
    let out = dir.path().join("local.prof");
    let pid_s = pid.to_string();
    let o = run_profile(&[
        "record",
        "-p",
        &pid_s,
        "-d",
        "5",
        "-F",
        "2",
        "--push",
        &server.url(),
        "--push-interval",
        "1",
        "-o",
        out.to_str().unwrap(),
    ]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let readings = poller.join().unwrap();
    drop(target);
    ok(&o);
    let err = stderr(&o);
    let got = server.requests();
    assert!(got.len() >= 3, "{} windows\n{err}", got.len());

    // Per window and thread: samples' CPU, [unsampled] CPU.
    let mut by_tid_all: std::collections::HashMap<u32, u64> = Default::default();
    let (mut unsampled_windows, mut checked) = (0, 0);
    for r in &got {
        let p = read_pprof(&gunzip(&r.body));
        let cpu = p
            .sample_types
            .iter()
            .position(|t| t == "cpu/nanoseconds")
            .unwrap();
        let mut per: std::collections::HashMap<u32, u64> = Default::default();
        for (v, l) in p.values.iter().zip(&p.num_labels) {
            let tid = l.iter().find(|(k, _)| k == "tid").unwrap().1 as u32;
            *per.entry(tid).or_default() += v[cpu];
        }
        let has_unsampled = p.functions.iter().any(|f| f == "[unsampled]");
        let (from, until) = (q(r, "from"), q(r, "until"));
        if has_unsampled && until < got.iter().map(|r| q(r, "until")).max().unwrap() {
            unsampled_windows += 1;
        }
        for &tid in &tids {
            let have = per.get(&tid).copied().unwrap_or(0);
            *by_tid_all.entry(tid).or_default() += have;
            let (lo, hi) = clock_delta(&readings[&tid], from, until);
            // The recorder reads the clocks a few microseconds after the cut, and
            // maps its monotonic clock to Unix time once: 5 ms and 1% of slack (a
            // clean-clone CI run was 0.35 ms past 3 ms and 1%).
            let slack = 5_000_000 + hi / 100;
            assert!(
                have + slack >= lo && have <= hi + slack,
                "thread {tid}, window {from}..{until}: {:.1} ms in the profile, its clock \
                 advanced {:.1} to {:.1} ms\n{err}",
                have as f64 / 1e6,
                lo as f64 / 1e6,
                hi as f64 / 1e6
            );
            checked += 1;
        }
    }
    assert!(checked >= 9);
    // Not only at the end: windows before the last hold [unsampled] time.
    assert!(unsampled_windows >= 1, "{err}");
    // The windows add up to the local recording, thread by thread.
    let rec = read(&out);
    let mut file: std::collections::HashMap<u32, u64> = Default::default();
    for s in &rec.samples {
        *file.entry(s.tid).or_default() += s.weight;
    }
    for &tid in &tids {
        assert_eq!(
            by_tid_all[&tid],
            file.get(&tid).copied().unwrap_or(0),
            "thread {tid}"
        );
    }
}
