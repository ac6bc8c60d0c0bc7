//! A server that does not take the windows: one that fails first (retried, the
//! queued windows sent), one that never answers (recording goes on, windows counted
//! as dropped), one that refuses (said once, the token never printed); and options
//! that cannot work, refused before recording.

use super::*;

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
    local_recording_is_whole(&out);
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
