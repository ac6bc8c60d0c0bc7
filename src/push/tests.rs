use std::io::Read;
use std::time::{Duration, Instant};

use super::*;
use crate::format::Recording;
use crate::test_fixture::ingest::{IngestServer, Reply, read_pprof};

fn gunzip(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(b)
        .read_to_end(&mut out)
        .expect("a gzipped body");
    out
}

fn threads_prof() -> Recording {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/report/threads.prof");
    Recording::read_file(&p).unwrap()
}

#[test]
fn the_ingest_query_is_what_pyroscope_parses() {
    let name = ingest_name(
        "shop-api",
        "web-3",
        &[4242],
        &[
            ("env".into(), "prod".into()),
            ("region".into(), "eu.1".into()),
        ],
    );
    assert_eq!(
        name,
        "shop-api{env=prod,hostname=web-3,pid=4242,region=eu.1}"
    );
    assert_eq!(
        ingest_query(
            &name,
            1_700_000_000_000_000_000,
            1_700_000_010_000_000_000,
            99
        ),
        "name=shop-api%7Benv%3Dprod%2Chostname%3Dweb-3%2Cpid%3D4242%2Cregion%3Deu.1%7D\
         &from=1700000000000000000&until=1700000010000000000&format=pprof&sampleRate=99&spyName=profile"
    );
    // A tag replaces the automatic label of the same name; several pids are one label.
    assert_eq!(
        ingest_name(
            "a",
            "box",
            &[1, 2],
            &[("hostname".into(), "fleet-7".into())]
        ),
        "a{hostname=fleet-7,pid=1+2}"
    );
    assert_eq!(ingest_name("a", "", &[], &[]), "a{}");
}

#[test]
fn tags_and_app_names_are_checked_as_the_server_reads_them() {
    assert_eq!(
        parse_tag("env=prod").unwrap(),
        ("env".into(), "prod".into())
    );
    assert_eq!(
        parse_tag("k8s.ns = a=b").unwrap(),
        ("k8s.ns".into(), "a=b".into())
    );
    for bad in [
        "env",
        "=x",
        "a-b=1",
        "__name__=x",
        "service_name=x",
        "e=",
        "e=a,b",
        "e=a}",
    ] {
        assert!(parse_tag(bad).is_err(), "{bad}");
    }
    assert!(check_app("shop-api/v2.1_x").is_ok());
    assert!(check_app("my app").unwrap_err().to_string().contains("' '"));
    assert!(check_app("").is_err());
    assert_eq!(app_from_process_name("my app:1"), "my_app_1");
    assert_eq!(app_from_process_name(" "), "profile");
}

#[test]
fn credentials_in_the_url_become_basic_auth_and_are_never_shown() {
    let e = Endpoint::parse("http://alice:s%40cret@127.0.0.1:4040/pyro/", &[]).unwrap();
    assert_eq!(e.ingest, "http://127.0.0.1:4040/pyro/ingest");
    assert_eq!(e.shown(), "http://127.0.0.1:4040/pyro");
    // base64("alice:s@cret")
    assert_eq!(
        e.headers,
        [(
            "Authorization".to_owned(),
            "Basic YWxpY2U6c0BjcmV0".to_owned()
        )]
    );
    assert!(!format!("{e:?}").contains("YWxp"));
    assert_eq!(
        redact_url("http://alice:pw@h:1/x?y"),
        "http://***@h:1/x?y".to_owned()
    );
    let bearer = vec![("Authorization".to_owned(), "Bearer tok-123456".to_owned())];
    let e = Endpoint::parse("http://h:4040", &bearer).unwrap();
    assert_eq!(
        redact("echo: Bearer tok-123456 / tok-123456", &e.secrets()),
        "echo: *** / ***"
    );
    assert_eq!(base64(b""), "");
    assert_eq!(base64(b"f"), "Zg==");
    assert_eq!(base64(b"fo"), "Zm8=");
    assert_eq!(base64(b"foobar"), "Zm9vYmFy");
}

#[test]
fn https_urls_keep_their_scheme_and_default_port_and_lose_their_credentials() {
    // Grafana Cloud: the stack's user id and a token as basic authentication.
    let e = Endpoint::parse(
        "HTTPS://123456:glc_tok%2Fen@profiles-prod-001.grafana.net/",
        &[],
    )
    .unwrap();
    assert!(e.is_https());
    assert_eq!(e.ingest, "https://profiles-prod-001.grafana.net/ingest");
    assert_eq!(e.shown(), "https://profiles-prod-001.grafana.net");
    // base64("123456:glc_tok/en")
    assert_eq!(e.headers[0].1, "Basic MTIzNDU2OmdsY190b2svZW4=");
    assert!(!format!("{e:?}").contains("glc_tok"));
    assert_eq!(
        redact_url("https://123456:glc_tok@h/x"),
        "https://***@h/x".to_owned()
    );
    let e = Endpoint::parse("https://[::1]:8443/pyro", &[]).unwrap();
    assert_eq!(e.ingest, "https://[::1]:8443/pyro/ingest");
    assert!(!Endpoint::parse("http://h:4040", &[]).unwrap().is_https());
}

#[test]
fn bad_urls_and_headers_say_what_is_wrong_without_the_password() {
    let err = |u: &str| Endpoint::parse(u, &[]).unwrap_err().to_string();
    assert!(err("127.0.0.1:4040").contains("not a URL"));
    let e = err("ftp://bob:hunter2@cloud.example");
    assert!(e.contains("http or https"), "{e}");
    assert!(!e.contains("hunter2"), "{e}");
    let e = err("https://bob:hunter2@cloud.example:4o4o");
    assert!(e.contains("port") && !e.contains("hunter2"), "{e}");
    assert!(err("http://h:4040/?x=1").contains("without a query"));
    assert!(err("http://h:99999").contains("port"));
    assert!(err("http:///x").contains("no host"));
    assert!(Endpoint::parse("http://[::1]:4040", &[]).is_ok());
    assert_eq!(
        parse_header("X-Scope-OrgID: team-a").unwrap(),
        ("X-Scope-OrgID".into(), "team-a".into())
    );
    assert!(parse_header("no colon").is_err());
    assert!(parse_header("Bad Name: x").is_err());
    assert!(parse_header("Content-Type: text/plain").is_err());
    let e = parse_header("Authorization: Bearer a\u{1}b")
        .unwrap_err()
        .to_string();
    assert!(!e.contains("Bearer"), "{e}");
    let both = [("authorization".to_owned(), "Bearer x".to_owned())];
    assert!(Endpoint::parse("http://u:p@h:1", &both).is_err());
}

fn window(rec: &Recording, n: u64) -> PushWindow {
    PushWindow {
        from_unix_ns: 1_700_000_000_000_000_000 + n * 10_000_000_000,
        until_unix_ns: 1_700_000_010_000_000_000 + n * 10_000_000_000,
        recording: rec.clone(),
    }
}

#[test]
fn windows_arrive_as_gzipped_pprof_with_the_names_and_the_headers() {
    let server = IngestServer::start(|_| Reply::Status(200));
    let mut o = PushOptions::new(&server.url(), "threads");
    o.tags = vec![("env".into(), "test".into())];
    o.headers = vec![("X-Scope-OrgID".into(), "team-a".into())];
    let p = Pusher::start(&o).unwrap();
    let rec = threads_prof();
    for n in 0..3 {
        p.send(window(&rec, n));
    }
    let stats = p.finish();
    let got = server.requests();
    assert_eq!(got.len(), 3, "{stats:?}");
    assert_eq!(stats.sent, 3);
    assert_eq!(stats.samples, 3 * rec.samples.len() as u64);
    for (n, r) in got.iter().enumerate() {
        assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/ingest"));
        assert_eq!(r.query["format"], "pprof");
        assert_eq!(r.query["spyName"], "profile");
        assert_eq!(r.query["sampleRate"], rec.meta.frequency_hz.to_string());
        let from: u64 = r.query["from"].parse().unwrap();
        assert_eq!(from, 1_700_000_000_000_000_000 + n as u64 * 10_000_000_000);
        let name = &r.query["name"];
        assert!(name.starts_with("threads{env=test,hostname="), "{name}");
        assert_eq!(r.headers["content-type"], "application/octet-stream");
        assert_eq!(r.headers["x-scope-orgid"], "team-a");
        let pp = read_pprof(&gunzip(&r.body));
        assert_eq!(pp.total("samples"), rec.samples.len() as u64);
        let weight: u64 = rec.samples.iter().map(|s| s.weight).sum();
        assert_eq!(pp.total("cpu"), weight);
        assert!(
            pp.functions.iter().any(|f| f == "burn_leaf"),
            "{:?}",
            pp.functions
        );
    }
}

#[test]
fn a_server_that_fails_first_gets_the_queued_windows_in_order() {
    // Two 503s and a dropped connection, then success.
    let server = IngestServer::start(|n| match n {
        0 | 1 => Reply::Status(503),
        2 => Reply::Close,
        _ => Reply::Status(200),
    });
    let mut o = PushOptions::new(&server.url(), "threads");
    o.verbose = false;
    let p = Pusher::start(&o).unwrap();
    let rec = threads_prof();
    for n in 0..4 {
        p.send(window(&rec, n));
    }
    // Backoff 0.5 s + 1 s + 2 s before the fourth attempt.
    assert!(server.wait_for(7, Duration::from_secs(20)) >= 7);
    let stats = p.finish();
    assert_eq!(
        (stats.sent, stats.retries, stats.dropped),
        (4, 3, 0),
        "{stats:?}"
    );
    let froms: Vec<String> = server
        .accepted()
        .iter()
        .map(|r| r.query["from"].clone())
        .collect();
    let want: Vec<String> = (0..4)
        .map(|n| (1_700_000_000_000_000_000u64 + n * 10_000_000_000).to_string())
        .collect();
    assert_eq!(froms, want);
}

#[test]
fn a_full_queue_drops_the_oldest_and_a_bad_request_is_not_retried() {
    // Never answers: the pusher keeps trying the first window while more queue.
    let server = IngestServer::start(|_| Reply::Hang);
    let mut o = PushOptions::new(&server.url(), "threads");
    o.verbose = false;
    o.buffer = 2;
    o.timeout = Duration::from_millis(300);
    let p = Pusher::start(&o).unwrap();
    let rec = threads_prof();
    let t = Instant::now();
    for n in 0..5 {
        p.send(window(&rec, n));
    }
    let stats = p.finish();
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
    assert_eq!(stats.sent, 0);
    assert_eq!(stats.dropped, 3, "{stats:?}");
    assert_eq!(stats.unsent, 2, "{stats:?}");
    assert_eq!(stats.last_error.as_deref(), Some("timed out"));

    let server = IngestServer::start(|_| Reply::Status(400));
    let mut o = PushOptions::new(&server.url(), "threads");
    o.verbose = false;
    let p = Pusher::start(&o).unwrap();
    for n in 0..3 {
        p.send(window(&rec, n));
    }
    let stats = p.finish();
    assert_eq!(server.requests().len(), 3);
    assert_eq!((stats.rejected, stats.retries), (3, 0), "{stats:?}");
    assert_eq!(
        stats.last_error.as_deref(),
        Some("HTTP 400 Bad Request: status 400")
    );
}

/// Issue 26: a server's error body reached root's terminal raw (escape sequences set
/// the window title, clear the screen).
#[test]
fn a_hostile_error_body_is_escaped_and_cut() {
    let body = format!(
        "\u{1b}]0;owned\u{7}\u{1b}[2J\u{9b}31mno{}\n",
        "x".repeat(3000)
    );
    let server = IngestServer::start(move |_| Reply::Body(400, body.clone()));
    let mut o = PushOptions::new(&server.url(), "threads");
    o.verbose = false;
    let p = Pusher::start(&o).unwrap();
    p.send(window(&threads_prof(), 0));
    let stats = p.finish();
    let err = stats.last_error.expect("the refusal is kept");
    assert!(
        err.starts_with("HTTP 400 Bad Request: \\e]0;owned\\x07\\e[2J\\x9b31mno"),
        "{err}"
    );
    assert!(!err.chars().any(char::is_control), "{err}");
    assert!(err.chars().count() < 420, "{}", err.chars().count());
}

#[test]
fn an_off_cpu_window_goes_as_a_cpu_profile_and_a_wall_profile() {
    let server = IngestServer::start(|_| Reply::Status(200));
    let mut o = PushOptions::new(&server.url(), "threads");
    o.verbose = false;
    let p = Pusher::start(&o).unwrap();
    let mut rec = threads_prof();
    rec.meta.off_cpu = true;
    let s = rec.samples[0];
    rec.off_cpu.push(crate::format::OffCpu {
        time: s.time,
        pid: s.pid,
        tid: s.tid,
        cpu: 0,
        duration: 5_000_000,
        state: crate::format::ThreadState::Sleep,
        weight: 5_000_000,
        stack: s.stack,
    });
    p.send(window(&rec, 0));
    let stats = p.finish();
    assert_eq!((stats.windows, stats.sent), (1, 1), "{stats:?}");
    let got = server.requests();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].query, got[1].query, "the same name and window");
    let cpu = read_pprof(&gunzip(&got[0].body));
    let wall = read_pprof(&gunzip(&got[1].body));
    assert_eq!(cpu.sample_types, ["samples/count", "cpu/nanoseconds"]);
    assert_eq!(
        wall.sample_types,
        ["samples/count", "cpu/nanoseconds", "wall/nanoseconds"]
    );
    let weight: u64 = rec.samples.iter().map(|s| s.weight).sum();
    assert_eq!(cpu.total("cpu"), weight);
    assert_eq!(wall.total("cpu"), weight);
    assert_eq!(wall.total("wall"), weight + 5_000_000);
    assert_eq!(stats.bytes, (got[0].body.len() + got[1].body.len()) as u64);
}
