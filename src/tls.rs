//! TLS for `record --push https://...` and for debuginfod downloads: which
//! certificates are trusted, and what a failed verification says.
//!
//! Trust comes from the machine, as curl's does: the PEM bundle the distribution keeps
//! up to date (`$SSL_CERT_FILE` if set, else the first of the standard Debian, Fedora/
//! RHEL, openSUSE and Alpine paths that holds certificates), read once per process.
//! An administrator who adds a company CA with `update-ca-certificates` or
//! `update-ca-trust` is trusted by `profile` too, and a CA the distribution removes is no
//! longer trusted. Only a machine with no bundle at all (a minimal container image)
//! falls back to the Mozilla roots compiled into the binary (`webpki-roots`, which ureq's
//! `rustls` feature brings anyway), and `record` says so. `--push-ca FILE` replaces the
//! machine's roots with the certificates in FILE (as curl's `--cacert`), for a private
//! CA. There is no switch that turns verification off.
//!
//! A certificate that fails verification is described in words (expired on a date,
//! unknown issuer, issued for other names) from rustls' own error, so the pusher can
//! report it once and stop retrying the same handshake.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig};

/// Standard bundles, in the order tried: Debian, Ubuntu, Arch, Gentoo (and Alpine's
/// ca-certificates package); Fedora, RHEL, CentOS; RHEL's extracted trust; openSUSE;
/// Alpine and the BSDs.
pub const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// The certificates a client trusts, and where they came from.
#[derive(Clone)]
pub struct Trust {
    roots: RootCerts,
    /// Where the roots came from, for messages: a path, or the compiled-in set.
    pub source: TrustSource,
}

/// Where trusted certificates came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustSource {
    /// The machine's bundle.
    System {
        /// Its path.
        path: PathBuf,
        /// Certificates in it.
        count: usize,
    },
    /// The file given with `--push-ca`.
    File {
        /// Its path.
        path: PathBuf,
        /// Certificates in it.
        count: usize,
    },
    /// No bundle on the machine: the Mozilla roots built into the binary.
    Bundled,
}

impl std::fmt::Debug for Trust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trust")
            .field("source", &self.source)
            .finish()
    }
}

impl Trust {
    /// The machine's trust store (read once per process).
    pub fn system() -> Trust {
        static SYSTEM: OnceLock<Trust> = OnceLock::new();
        SYSTEM
            .get_or_init(|| {
                let env = std::env::var_os("SSL_CERT_FILE").filter(|p| !p.is_empty());
                let candidates: Vec<PathBuf> = match env {
                    Some(p) => vec![PathBuf::from(p)],
                    None => SYSTEM_BUNDLES.iter().map(PathBuf::from).collect(),
                };
                for path in candidates {
                    if let Ok(certs) = read_bundle(&path) {
                        let count = certs.len();
                        return Trust {
                            roots: RootCerts::Specific(Arc::new(certs)),
                            source: TrustSource::System { path, count },
                        };
                    }
                }
                Trust {
                    roots: RootCerts::WebPki,
                    source: TrustSource::Bundled,
                }
            })
            .clone()
    }

    /// Only the certificates in the PEM file `path` (`--push-ca`).
    pub fn file(path: &Path) -> Result<Trust, BundleError> {
        let certs = read_bundle(path)?;
        Ok(Trust {
            source: TrustSource::File {
                path: path.to_owned(),
                count: certs.len(),
            },
            roots: RootCerts::Specific(Arc::new(certs)),
        })
    }

    /// The TLS settings of an HTTP client that verifies servers against these roots.
    pub fn config(&self) -> TlsConfig {
        TlsConfig::builder().root_certs(self.roots.clone()).build()
    }

    /// A few words on where trust comes from, for notes.
    pub fn describe(&self) -> String {
        match &self.source {
            TrustSource::System { path, count } => {
                format!("{count} CA certificates from {}", path.display())
            }
            TrustSource::File { path, count } => {
                format!("{count} CA certificates from --push-ca {}", path.display())
            }
            TrustSource::Bundled => format!(
                "no CA bundle on this machine ({} or $SSL_CERT_FILE): the Mozilla roots built into profile",
                SYSTEM_BUNDLES[0]
            ),
        }
    }
}

/// Why a PEM bundle gave no certificates.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The text is not PEM.
    #[error("not a PEM file ({0})")]
    NotPem(String),
    /// It holds no certificate.
    #[error("no certificate in it (PEM, -----BEGIN CERTIFICATE-----)")]
    NoCertificate,
    /// The file's text did not give certificates.
    #[error("{}: {source}", path.display())]
    InFile {
        /// The file.
        path: PathBuf,
        /// What its text lacks.
        source: Box<BundleError>,
    },
}

/// The certificates of a PEM file; an error when it cannot be read or holds none.
pub fn read_bundle(path: &Path) -> Result<Vec<Certificate<'static>>, BundleError> {
    let bytes = std::fs::read(path).map_err(|source| BundleError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse_bundle(&bytes).map_err(|why| BundleError::InFile {
        path: path.to_owned(),
        source: Box::new(why),
    })
}

/// The certificates of a PEM text (other items, such as keys, are skipped).
pub fn parse_bundle(pem: &[u8]) -> Result<Vec<Certificate<'static>>, BundleError> {
    let mut certs = Vec::new();
    for item in ureq::tls::parse_pem(pem) {
        match item {
            Ok(PemItem::Certificate(c)) => certs.push(c),
            Ok(_) => {}
            Err(e) => return Err(BundleError::NotPem(e.to_string())),
        }
    }
    if certs.is_empty() {
        return Err(BundleError::NoCertificate);
    }
    Ok(certs)
}

/// Why a request failed at the TLS layer, if it did: `certificate` is true when the
/// server's certificate failed verification (retrying the same server cannot help).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFailure {
    /// The server's certificate failed verification.
    pub certificate: bool,
    /// What failed, in words.
    pub detail: String,
}

/// The TLS failure in `e`, in words, if it is one.
pub fn failure(e: &ureq::Error) -> Option<TlsFailure> {
    let r = match e {
        ureq::Error::Rustls(r) => r,
        ureq::Error::Io(io) => io.get_ref()?.downcast_ref::<rustls::Error>()?,
        ureq::Error::Tls(s) => {
            return Some(TlsFailure {
                certificate: false,
                detail: format!("TLS: {s}"),
            });
        }
        _ => return None,
    };
    Some(describe_rustls(r))
}

fn describe_rustls(e: &rustls::Error) -> TlsFailure {
    use rustls::CertificateError as C;
    let rustls::Error::InvalidCertificate(c) = e else {
        let detail = match e {
            rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => {
                format!("TLS handshake failed ({e}): is the server speaking https on that port?")
            }
            _ => format!("TLS handshake failed: {e}"),
        };
        return TlsFailure {
            certificate: false,
            detail,
        };
    };
    let why = match c {
        C::Expired => "has expired".to_owned(),
        C::ExpiredContext { not_after, .. } => {
            format!("expired on {}", date(not_after.as_secs()))
        }
        C::NotValidYet => "is not valid yet (check this machine's clock)".to_owned(),
        C::NotValidYetContext { not_before, .. } => format!(
            "is not valid before {} (check this machine's clock)",
            date(not_before.as_secs())
        ),
        C::UnknownIssuer => "is signed by an unknown issuer (not a CA this machine trusts; \
             for a private CA give its certificate with --push-ca FILE)"
            .to_owned(),
        C::NotValidForName => "is not issued for this host name".to_owned(),
        C::NotValidForNameContext {
            expected,
            presented,
        } => format!(
            "is issued for {} and not for {}",
            if presented.is_empty() {
                "no name".to_owned()
            } else {
                // rustls gives them as `DnsName("host")`: the name alone.
                let bare = |p: &String| match (p.find('"'), p.rfind('"')) {
                    (Some(a), Some(b)) if b > a => p[a + 1..b].to_owned(),
                    _ => p.clone(),
                };
                presented.iter().map(bare).collect::<Vec<_>>().join(", ")
            },
            expected.to_str()
        ),
        C::Revoked => "has been revoked".to_owned(),
        C::BadSignature => "has a bad signature".to_owned(),
        C::InvalidPurpose | C::InvalidPurposeContext { .. } => {
            "is not for TLS servers (extended key usage)".to_owned()
        }
        C::Other(o) if format!("{o:?}").contains("CaUsedAsEndEntity") => {
            "is a CA certificate, not a server's (a self-signed one made with `openssl req \
             -x509` is: add -addext basicConstraints=critical,CA:FALSE, or have that CA \
             sign the server's certificate)"
                .to_owned()
        }
        C::Other(o) => format!("is invalid ({o})"),
        other => format!("is invalid ({other:?})"),
    };
    TlsFailure {
        certificate: true,
        detail: format!("the server's certificate {why}"),
    }
}

/// `YYYY-MM-DD` (UTC) of Unix seconds.
fn date(secs: u64) -> String {
    // Days to civil date (Howard Hinnant's algorithm, proleptic Gregorian).
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_civil_utc() {
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(951_782_400), "2000-02-29");
        assert_eq!(date(1_795_392_000), "2026-11-23");
    }

    #[test]
    fn a_bundle_needs_certificates() {
        let e = parse_bundle(b"").unwrap_err().to_string();
        assert!(e.contains("no certificate"), "{e}");
        assert!(
            parse_bundle(b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
                .is_err()
        );
        let e = read_bundle(Path::new("/nonexistent/ca.pem"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("cannot read /nonexistent/ca.pem"), "{e}");
    }

    #[test]
    fn certificate_failures_say_why_and_are_final() {
        use rustls::CertificateError as C;
        use rustls::pki_types::{ServerName, UnixTime};
        let f = |c: C| describe_rustls(&rustls::Error::InvalidCertificate(c));
        let expired = f(C::ExpiredContext {
            time: UnixTime::since_unix_epoch(std::time::Duration::from_secs(1_795_392_000)),
            not_after: UnixTime::since_unix_epoch(std::time::Duration::from_secs(951_782_400)),
        });
        assert!(expired.certificate);
        assert_eq!(
            expired.detail,
            "the server's certificate expired on 2000-02-29"
        );
        let name = f(C::NotValidForNameContext {
            expected: ServerName::try_from("pyroscope.example")
                .unwrap()
                .to_owned(),
            presented: vec!["DnsName(\"other.example\")".into()],
        });
        assert_eq!(
            name.detail,
            "the server's certificate is issued for other.example and not for pyroscope.example"
        );
        let issuer = f(C::UnknownIssuer);
        assert!(issuer.detail.contains("unknown issuer") && issuer.detail.contains("--push-ca"));
        let other = describe_rustls(&rustls::Error::InvalidMessage(
            rustls::InvalidMessage::InvalidContentType,
        ));
        assert!(!other.certificate);
        assert!(other.detail.contains("speaking https"), "{other:?}");
    }

    #[test]
    fn the_machine_store_is_found() {
        let t = Trust::system();
        if std::path::Path::new(SYSTEM_BUNDLES[0]).exists()
            && std::env::var_os("SSL_CERT_FILE").is_none()
        {
            match &t.source {
                TrustSource::System { path, count } => {
                    assert_eq!(path, Path::new(SYSTEM_BUNDLES[0]));
                    assert!(*count > 10, "{count}");
                }
                s => panic!("{s:?}"),
            }
        }
    }
}
