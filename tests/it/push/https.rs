//! Pushing over HTTPS to a server whose certificate the test makes: windows sent
//! with `--push-ca`, and a certificate that cannot be verified refused once while
//! recording goes on.

use super::*;

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
    assert_eq!(samples, rec.cpu_samples(), "{err}");
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
    local_recording_is_whole(&out);

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
