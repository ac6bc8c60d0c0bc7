//! Separate debug info from debuginfod servers, as perf, gdb and samply fetch it: only
//! when `DEBUGINFOD_URLS` names servers (space-separated), only for a module with a
//! build-id and no DWARF of its own or on the machine, and cached by build-id in the
//! layout elfutils' client uses, so every debuginfod client on the machine shares it:
//! `$DEBUGINFOD_CACHE_PATH`, else `$XDG_CACHE_HOME/debuginfod_client`, else
//! `~/.cache/debuginfod_client`, holding `BUILDID/debuginfo`.
//!
//! Time is bounded: each request gets `DEBUGINFOD_TIMEOUT` seconds (default 10; the
//! whole request, not only the connection), and all requests of one naming pass
//! together at most three times that; once spent, no more are made. A failure is a
//! note for the summary, never an error: the frames keep their symbol-table names.
//! The protocol is `GET URL/buildid/HEX/debuginfo`; servers are tried in order and the
//! first 200 wins. The HTTP client is ureq (with rustls, since public servers are
//! https), the one the push exporter uses, so the project has one HTTP stack; https
//! servers are verified the same way too, against the machine's trust store
//! (`crate::tls`: `$SSL_CERT_FILE` or the distribution's CA bundle).
//!
//! The cache is reached without following links and refused, with a note, when a
//! user other than the effective one could have placed or changed it
//! ([`crate::cache_dir`]): root may be run with another user's `HOME`.

use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::cache_dir::{CacheDir, CacheError};
use crate::elf::build_id_hex;

/// Seconds per request when `DEBUGINFOD_TIMEOUT` is unset.
pub const DEFAULT_TIMEOUT_SECS: u64 = 10;
/// The most bytes one debug file may have (a huge response is refused, not stored).
const MAX_DEBUG_FILE: u64 = 4 << 30;

/// A debuginfod client for one naming pass.
#[derive(Debug)]
pub struct Debuginfod {
    urls: Vec<String>,
    cache: PathBuf,
    /// The cache, opened at the first request; an error (noted once) when refused.
    dir: Option<Result<CacheDir, ()>>,
    per_request: Duration,
    overall: Duration,
    spent: Duration,
    /// Notes on what failed, for the summary.
    pub notes: Vec<String>,
    /// Debug files fetched from a server (not from the cache) this pass.
    pub fetched: usize,
}

impl Debuginfod {
    /// The client the environment asks for; None when `DEBUGINFOD_URLS` is unset or
    /// names no server.
    pub fn from_env() -> Option<Debuginfod> {
        let urls = std::env::var("DEBUGINFOD_URLS").ok()?;
        let cache = match std::env::var_os("DEBUGINFOD_CACHE_PATH").filter(|p| !p.is_empty()) {
            Some(p) => PathBuf::from(p),
            None => match std::env::var_os("XDG_CACHE_HOME").filter(|p| !p.is_empty()) {
                Some(x) => PathBuf::from(x).join("debuginfod_client"),
                None => PathBuf::from(std::env::var_os("HOME")?).join(".cache/debuginfod_client"),
            },
        };
        let secs = std::env::var("DEBUGINFOD_TIMEOUT")
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
            .filter(|&t| t > 0)
            .unwrap_or(DEFAULT_TIMEOUT_SECS);
        Debuginfod::new(&urls, cache, Duration::from_secs(secs))
    }

    /// A client of the servers in `urls` (space-separated) caching in `cache`, each
    /// request limited to `per_request` and all of them to three times that.
    pub fn new(urls: &str, cache: PathBuf, per_request: Duration) -> Option<Debuginfod> {
        let urls: Vec<String> = urls
            .split_whitespace()
            .map(|u| u.trim_end_matches('/').to_owned())
            .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
            .collect();
        (!urls.is_empty()).then(|| Debuginfod {
            urls,
            cache,
            dir: None,
            per_request,
            overall: per_request * 3,
            spent: Duration::ZERO,
            notes: Vec::new(),
            fetched: 0,
        })
    }

    /// Where the cache keeps the debug file of `build_id`.
    pub fn cache_path(&self, build_id: &[u8]) -> PathBuf {
        self.cache.join(build_id_hex(build_id)).join("debuginfo")
    }

    /// The cache directory, opened once; None (and a note, once) when it is refused.
    fn dir(&mut self) -> Option<&CacheDir> {
        if self.dir.is_none() {
            let opened = CacheDir::open(&self.cache).map_err(|why| {
                self.notes.push(format!(
                    "debuginfod: cache not used, nothing downloaded: {why}"
                ));
            });
            self.dir = Some(opened);
        }
        self.dir.as_ref()?.as_ref().ok()
    }

    /// The debug file of `build_id`, open, with its path: from the cache, else
    /// fetched into it. `what` names the module in notes. None when no server has it
    /// in time, or the cache or its entry may not be used (a note says why).
    pub fn debuginfo(&mut self, build_id: &[u8], what: &str) -> Option<(PathBuf, File)> {
        if build_id.is_empty() {
            return None;
        }
        let hex = build_id_hex(build_id);
        let dir = self.dir()?;
        let path = dir.path_of(&hex);
        match dir.cached(&hex) {
            Ok(Some(file)) => return Some((path, file)),
            Ok(None) => {}
            Err(why) => {
                self.notes.push(format!("debuginfod: {why}"));
                return None;
            }
        }
        let mut why = Vec::new();
        for url in self.urls.clone() {
            let left = self.overall.saturating_sub(self.spent);
            if left.is_zero() {
                why.push(format!(
                    "the time limit for all requests ({} s) was spent",
                    self.overall.as_secs()
                ));
                break;
            }
            let limit = left.min(self.per_request);
            let started = Instant::now();
            let dir = self.dir()?;
            let got = fetch(&format!("{url}/buildid/{hex}/debuginfo"), limit, dir, &hex)
                .and_then(|()| Ok(dir.cached(&hex)?));
            self.spent += started.elapsed();
            match got {
                Ok(Some(file)) => {
                    self.fetched += 1;
                    return Some((path, file));
                }
                Ok(None) => why.push(format!("{url}: the stored file is gone")),
                // A server's words (a status, a certificate's names): escaped, cut.
                Err(e) => why.push(format!(
                    "{url}: {}",
                    crate::text::terminal_line(&e.to_string())
                )),
            }
        }
        self.notes.push(format!(
            "debuginfod: no debug info for {} (build-id {hex}): {}",
            crate::text::terminal_line(what),
            why.join("; ")
        ));
        None
    }

    /// A fetched file that turned out not to be the module's: removed from the cache.
    pub fn reject(&mut self, build_id: &[u8], what: &str) {
        if let Some(dir) = self.dir() {
            dir.remove(&build_id_hex(build_id));
        }
        self.notes.push(format!(
            "debuginfod: the debug info served for {} (build-id {}) has another build-id or no DWARF; not used",
            crate::text::terminal_line(what),
            build_id_hex(build_id)
        ));
    }
}

/// GETs `url` within `limit` into the cache entry `hex` (through a new file beside
/// it, so a cut download never looks cached).
fn fetch(url: &str, limit: Duration, cache: &CacheDir, hex: &str) -> Result<(), FetchError> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .tls_config(crate::tls::Trust::system().config())
        .timeout_global(Some(limit))
        .http_status_as_error(false)
        .user_agent(concat!("profile/", env!("CARGO_PKG_VERSION")))
        .build()
        .into();
    let response = agent.get(url).call().map_err(|e| match e {
        ureq::Error::Timeout(_) => FetchError::TimedOut(limit),
        e => {
            FetchError::Request(crate::tls::failure(&e).map_or_else(|| e.to_string(), |t| t.detail))
        }
    })?;
    let status = response.status();
    if status != 200 {
        return Err(FetchError::Status(status.as_u16()));
    }
    let mut body = response
        .into_body()
        .into_with_config()
        .limit(MAX_DEBUG_FILE)
        .reader();
    let stored = cache.store(hex, |file| io::copy(&mut body, file).map(drop));
    stored.map_err(|e| match e {
        CacheError::Write(e)
            if e.to_string().contains("imeout") || e.kind() == io::ErrorKind::TimedOut =>
        {
            FetchError::TimedOut(limit)
        }
        CacheError::Write(e) => FetchError::Download(e),
        e => FetchError::Cache(e),
    })
}

/// Why a server's copy of a debug file was not fetched into the cache.
#[derive(Debug, thiserror::Error)]
enum FetchError {
    /// The request or the download took longer than its share of the time limit.
    #[error("timed out after {} s", .0.as_secs_f64())]
    TimedOut(Duration),
    /// The request failed: the client's words, or a certificate's.
    #[error("{0}")]
    Request(String),
    /// The server answered with another status than 200.
    #[error("HTTP {0}")]
    Status(u16),
    /// The download broke off.
    #[error("download failed: {0}")]
    Download(io::Error),
    /// The cache refused the entry, or could not read it back.
    #[error(transparent)]
    Cache(#[from] CacheError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_space_separated_and_only_http() {
        let d = Debuginfod::new(
            " https://a.example/  http://b.example:8002 file:///x ",
            PathBuf::from("/c"),
            Duration::from_secs(2),
        )
        .unwrap();
        assert_eq!(d.urls, ["https://a.example", "http://b.example:8002"]);
        assert_eq!(d.overall, Duration::from_secs(6));
        assert_eq!(
            d.cache_path(&[0xab, 0x01]),
            PathBuf::from("/c/ab01/debuginfo")
        );
        assert!(Debuginfod::new("  ", PathBuf::from("/c"), Duration::from_secs(1)).is_none());
    }
}
