//! Continuous profiling into a Pyroscope-compatible server (`record --push URL`).
//!
//! The recorder hands over one window of samples per interval; a [`Pusher`] thread
//! encodes each as a self-contained pprof profile and sends it to the server's
//! HTTP ingest endpoint, as Grafana Pyroscope (`pkg/ingester/pyroscope/ingest_handler.go`)
//! and Grafana Alloy's `pyroscope.receive_http` (which forwards the same request) read
//! it: `POST BASE/ingest?name=APP{LABELS}&from=NS&until=NS&format=pprof&sampleRate=HZ&spyName=profile`
//! with the gzipped pprof as the raw body. With `format=pprof` the server takes the
//! body as the profile itself (a multipart form is read only without `format`), the
//! profile types from the pprof's sample types (`cpu` gives `process_cpu`, `wall`
//! gives `wall`), and the service name from `name` verbatim: so `name` carries no
//! `.cpu` suffix, which the older folded formats used to say the type. `from` and
//! `until` are Unix nanoseconds (19 digits, which the server's time parser reads as
//! such), so consecutive windows meet exactly.
//!
//! This module owns what is pure: the endpoint (URL, credentials, headers), the label
//! set and the ingest query; [`queue`] the bounded queue and the retry schedule;
//! [`pusher`] the thread and the HTTP client; [`crate::tls`] the certificates trusted for
//! `https://` (the machine's, or `--push-ca`); [`series`] the cut of a `record -a`
//! window into one profile per service, named by [`rules`] (`--push-rules`).

mod protocol;
mod pusher;
mod queue;
pub mod rules;
pub mod series;

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

pub use protocol::PushFormat;
pub use pusher::{PushStats, PushWindow, Pusher};

/// Options of [`Pusher::start`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PushOptions {
    /// The server's base URL (`http://host:4040`, or with a path prefix); the
    /// format's path ([`PushFormat::path`]) is appended. User and password in it
    /// become basic authentication. No default.
    pub url: String,
    /// The protocol: Pyroscope's ingest or OTLP/HTTP. Default is Pyroscope.
    pub format: PushFormat,
    /// Length of one window. Default is 10 s, the interval Pyroscope's own agents use.
    pub interval: Duration,
    /// The application (service) name. No default: the caller names the target.
    pub app: String,
    /// Labels added to every profile; they replace the automatic `hostname` and `pid`
    /// of the same name. Default is none.
    pub tags: Vec<(String, String)>,
    /// HTTP headers sent with every request (`Authorization`, `X-Scope-OrgID`).
    /// Their values are never printed. Default is none.
    pub headers: Vec<(String, String)>,
    /// Windows kept while the server cannot be reached; past it the oldest are
    /// dropped and counted. Default is 60 (ten minutes at the default interval).
    pub buffer: usize,
    /// Longest wait for one request. Default is 10 s.
    pub timeout: Duration,
    /// A PEM file of the CA certificates to trust for an `https://` URL instead of
    /// the machine's (`--push-ca`). Default is none: the machine's trust store.
    pub ca: Option<PathBuf>,
    /// Print warnings (server unreachable, recovered). Errors are always printed.
    /// Default is true.
    pub verbose: bool,
    /// One profile per service per window (`record -a`): each window is cut into
    /// series by [`series::split`], with no `pid` label; [`PushOptions::app`], when
    /// not empty, names the processes no rule or service unit names. Default is
    /// false: one series named `app`.
    pub per_service: bool,
    /// The rule file naming services (`--push-rules`), read at start and again
    /// whenever [`PushOptions::reload`] is set. Default is none.
    pub rules: Option<PathBuf>,
    /// Set (by SIGHUP) to have the rule file read again before the next window; a
    /// file that does not parse keeps the rules in use, with a message. Default is
    /// none.
    pub reload: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Write each request into this directory instead of sending it
    /// (`--push-dry-run`): one `.pprof` file per series per window (gzipped, as it
    /// would be sent) and a `.query` file with its query and labels. Default is
    /// none.
    pub dry_run: Option<PathBuf>,
}

impl PushOptions {
    /// Default of [`PushOptions::interval`].
    pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);
    /// Default of [`PushOptions::buffer`].
    pub const DEFAULT_BUFFER: usize = 60;
    /// Default of [`PushOptions::timeout`].
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

    /// Options to push to `url` as `app`, everything else at its default.
    pub fn new(url: &str, app: &str) -> Self {
        PushOptions {
            url: url.to_owned(),
            format: PushFormat::default(),
            interval: Self::DEFAULT_INTERVAL,
            app: app.to_owned(),
            tags: Vec::new(),
            headers: Vec::new(),
            buffer: Self::DEFAULT_BUFFER,
            timeout: Self::DEFAULT_TIMEOUT,
            ca: None,
            verbose: true,
            per_service: false,
            rules: None,
            reload: None,
            dry_run: None,
        }
    }
}

/// Why pushing cannot start. Messages never hold credentials.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PushError {
    /// The URL cannot be used.
    #[error("--push {shown}: {why}")]
    Url {
        /// The URL without its credentials.
        shown: String,
        /// What is wrong.
        why: String,
    },
    /// A label or the application name cannot be sent.
    #[error("{0}")]
    Label(String),
    /// A header cannot be sent.
    #[error("--push-header: {0}")]
    Header(String),
    /// The `--push-ca` file cannot be used.
    #[error("--push-ca {0}")]
    Ca(String),
    /// The rule file or the dry-run directory cannot be used.
    #[error("{0}")]
    Setup(String),
}

/// Where profiles go: the ingest URL without credentials, and the headers to send.
/// [`Endpoint::parse`] gives Pyroscope's `/ingest`; [`Endpoint::with_format`] another
/// protocol's path.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `http(s)://host:port/prefix/ingest`.
    ingest: String,
    /// The base URL as shown to the user: no user or password.
    shown: String,
    /// Headers, `Authorization` from the URL's user and password first.
    headers: Vec<(String, String)>,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Header values are credentials: only their names are shown.
        let names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("Endpoint")
            .field("ingest", &self.ingest)
            .field("headers", &names)
            .finish()
    }
}

impl Endpoint {
    /// Parses `--push URL` and the `--push-header` values.
    pub fn parse(url: &str, headers: &[(String, String)]) -> Result<Endpoint, PushError> {
        let (scheme, rest) = url.split_once("://").ok_or_else(|| PushError::Url {
            shown: redact_url(url),
            why: "not a URL: give http://HOST:PORT (Pyroscope listens on 4040) or https://HOST"
                .into(),
        })?;
        let bad = |why: &str| PushError::Url {
            shown: redact_url(url),
            why: why.to_owned(),
        };
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(bad("the scheme must be http or https"));
        }
        if rest.contains(['?', '#']) {
            return Err(bad(
                "give the server's base URL without a query or fragment (profile adds /ingest?...)",
            ));
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let (userinfo, host) = match authority.rfind('@') {
            Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
            None => (None, authority),
        };
        if host.is_empty() || host.starts_with(':') {
            return Err(bad("no host"));
        }
        if host.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("the host has spaces or control characters"));
        }
        if let Some(port) = host.rsplit_once(':').map(|(_, p)| p)
            && !host.ends_with(']')
            && port.parse::<u16>().is_err()
        {
            return Err(bad("the port is not a number in 1..=65535"));
        }
        if path.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("the path has spaces or control characters"));
        }
        let base = format!("{scheme}://{host}{}", path.trim_end_matches('/'));
        let mut all = Vec::new();
        if let Some(ui) = userinfo {
            let (user, pass) = ui.split_once(':').unwrap_or((ui, ""));
            let creds = format!("{}:{}", percent_decode(user), percent_decode(pass));
            all.push((
                "Authorization".to_owned(),
                format!("Basic {}", base64(creds.as_bytes())),
            ));
        }
        for (k, v) in headers {
            check_header(k, v)?;
            if userinfo.is_some() && k.eq_ignore_ascii_case("authorization") {
                return Err(PushError::Header(
                    "an Authorization header and a user in the URL: give one".into(),
                ));
            }
            all.push((k.clone(), v.clone()));
        }
        Ok(Endpoint {
            ingest: format!("{base}/ingest"),
            shown: base,
            headers: all,
        })
    }

    /// The same server, for the protocol `format`.
    pub fn with_format(mut self, format: PushFormat) -> Endpoint {
        self.ingest = format!("{}{}", self.shown, format.path());
        self
    }

    /// The base URL as it may be printed: no user, no password.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Whether requests go over TLS.
    pub fn is_https(&self) -> bool {
        self.ingest.starts_with("https://")
    }

    /// The values that must never be printed: header values and their parts.
    fn secrets(&self) -> Vec<String> {
        let mut s = Vec::new();
        for (_, v) in &self.headers {
            s.push(v.clone());
            // `Bearer TOKEN`, `Basic B64`: the token alone too.
            if let Some((_, tok)) = v.split_once(' ') {
                s.push(tok.trim().to_owned());
            }
        }
        s.retain(|x| x.len() >= 4);
        s
    }
}

/// Why a `--push-header` was refused.
#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    /// It has no `:`.
    #[error("give a header as 'Name: value' (e.g. 'Authorization: Bearer TOKEN')")]
    NoColon,
    /// Its name or value cannot be sent.
    #[error(transparent)]
    Invalid(PushError),
}

/// `--push-header 'Name: value'` split into name and value.
pub fn parse_header(s: &str) -> Result<(String, String), HeaderError> {
    let (k, v) = s.split_once(':').ok_or(HeaderError::NoColon)?;
    let (k, v) = (k.trim().to_owned(), v.trim().to_owned());
    check_header(&k, &v).map_err(HeaderError::Invalid)?;
    Ok((k, v))
}

fn check_header(k: &str, v: &str) -> Result<(), PushError> {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if k.is_empty() || !k.chars().all(token) {
        return Err(PushError::Header(format!(
            "`{k}` is not a header name (letters, digits and -)"
        )));
    }
    if v.chars().any(|c| c.is_control() && c != '\t') {
        // The value is a credential: never echo it.
        return Err(PushError::Header(format!(
            "the value of {k} has a line break or control character"
        )));
    }
    for (name, why) in [
        (
            "content-type",
            "profile sets it: application/octet-stream (pprof) or application/x-protobuf (OTLP)",
        ),
        ("content-encoding", "profile sets it (gzip for OTLP)"),
        ("content-length", "profile sets it"),
        ("host", "it comes from the URL"),
    ] {
        if k.eq_ignore_ascii_case(name) {
            return Err(PushError::Header(format!("{k} cannot be set: {why}")));
        }
    }
    Ok(())
}

/// A URL with its user and password replaced by `***`.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

/// Replaces every secret in a message by `***`.
pub(crate) fn redact(msg: &str, secrets: &[String]) -> String {
    let mut m = msg.to_owned();
    for s in secrets {
        if !s.is_empty() {
            m = m.replace(s.as_str(), "***");
        }
    }
    m
}

/// Why a tag or an application name cannot label a series.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelError {
    /// A tag without `=`.
    #[error("`{0}`: give a tag as KEY=VALUE (e.g. env=prod)")]
    NotKeyValue(String),
    /// A tag name of other characters than a label name's.
    #[error("tag name `{0}`: Pyroscope label names are letters, digits, `_` and `.`")]
    TagName(String),
    /// A tag name the series' name takes.
    #[error("tag name `{0}` is reserved: the application name is --app")]
    Reserved(String),
    /// A tag with an empty value.
    #[error("tag `{0}` has an empty value")]
    EmptyValue(String),
    /// A tag value holding a character that ends a label.
    #[error(
        "tag `{key}`: the value may not hold {c:?} (it would end the label in the ingest name)"
    )]
    ValueChar {
        /// The tag's name.
        key: String,
        /// The character.
        c: char,
    },
    /// An empty application name.
    #[error("the application name is empty")]
    EmptyApp,
    /// An application name with a character service names do not take.
    #[error(
        "application name `{name}`: {c:?} is not allowed (Pyroscope service names are \
         letters, digits and _ . - /)"
    )]
    AppChar {
        /// The name.
        name: String,
        /// The character.
        c: char,
    },
}

/// Checks `--tag KEY=VALUE` as the server's label parser reads it: a key of letters,
/// digits, `_` and `.`; a value without `,`, `{`, `}` (they end a label) or control
/// characters.
pub fn parse_tag(s: &str) -> Result<(String, String), LabelError> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| LabelError::NotKeyValue(s.to_owned()))?;
    let (k, v) = (k.trim(), v.trim());
    if k.is_empty() || !k.chars().all(label_name_char) {
        return Err(LabelError::TagName(k.to_owned()));
    }
    if k == "__name__" || k == "service_name" {
        return Err(LabelError::Reserved(k.to_owned()));
    }
    if v.is_empty() {
        return Err(LabelError::EmptyValue(k.to_owned()));
    }
    if let Some(c) = v.chars().find(|&c| ",{}".contains(c) || c.is_control()) {
        return Err(LabelError::ValueChar {
            key: k.to_owned(),
            c,
        });
    }
    Ok((k.to_owned(), v.to_owned()))
}

fn label_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.'
}

/// Checks `--app NAME`: Pyroscope service names are letters, digits and `_ . - /`.
pub fn check_app(name: &str) -> Result<(), LabelError> {
    if name.is_empty() {
        return Err(LabelError::EmptyApp);
    }
    match name.chars().find(|&c| !crate::workload::service_char(c)) {
        Some(c) => Err(LabelError::AppChar {
            name: name.to_owned(),
            c,
        }),
        None => Ok(()),
    }
}

/// A process name as a valid application name: other characters become `_`.
pub use crate::workload::service_name as app_from_process_name;

/// The `name` parameter: `APP{hostname=...,pid=...,KEY=VALUE}`, labels sorted by name,
/// the given tags replacing automatic ones of the same name.
pub fn ingest_name(app: &str, hostname: &str, pids: &[u32], tags: &[(String, String)]) -> String {
    let mut labels: std::collections::BTreeMap<String, String> = Default::default();
    let host = app_from_process_name(hostname);
    if !hostname.trim().is_empty() {
        labels.insert("hostname".into(), host);
    }
    if !pids.is_empty() {
        let p: Vec<String> = pids.iter().map(u32::to_string).collect();
        labels.insert("pid".into(), p.join("+"));
    }
    for (k, v) in tags {
        labels.insert(k.clone(), v.clone());
    }
    let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{app}{{{}}}", inner.join(","))
}

/// The query string of one window's request.
pub fn ingest_query(name: &str, from_unix_ns: u64, until_unix_ns: u64, rate_hz: u64) -> String {
    format!(
        "name={}&from={from_unix_ns}&until={until_unix_ns}&format=pprof&sampleRate={rate_hz}&spyName=profile",
        percent_encode(name)
    )
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        if b[i] == b'%'
            && let Some(Ok(v)) = hex.map(|h| u8::from_str_radix(h, 16))
        {
            out.push(v);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Standard base64 with padding (RFC 4648), for basic authentication.
fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
