//! The pushing thread: it takes windows from the recorder over a channel (the
//! recorder never waits on it), encodes each in the protocol's format
//! ([`super::protocol`]: gzipped pprof, or an OTLP request), queues it, and sends
//! the queue oldest first, retrying with backoff while later windows queue behind.
//!
//! At the end, [`Pusher::finish`] gives the queue a bounded time to drain (the
//! request timeout, at least 5 s), so a server that is down delays the exit by that
//! and no more; what is left is counted as unsent.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::protocol::{self, PushFormat};
use super::queue::{Backoff, Body, Outcome, Queue};
use super::rules::Rules;
use super::{Endpoint, PushError, PushOptions, redact};
use crate::format::Recording;
use crate::tls::{Trust, TrustSource};

mod dry_run;

/// One window of samples to push.
#[derive(Debug)]
pub struct PushWindow {
    /// When the window began, Unix nanoseconds.
    pub from_unix_ns: u64,
    /// When it ended (the next one's beginning), Unix nanoseconds.
    pub until_unix_ns: u64,
    /// The window's samples, with their names.
    pub recording: Recording,
}

/// What the pusher did, for the summary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PushStats {
    /// The server's base URL, without credentials.
    pub url: String,
    /// Windows handed to the pusher.
    pub windows: u64,
    /// Windows the server accepted.
    pub sent: u64,
    /// Bytes of the accepted bodies (gzipped).
    pub bytes: u64,
    /// Samples in the accepted windows.
    pub samples: u64,
    /// Failed attempts that were retried (refused, timed out, 5xx).
    pub retries: u64,
    /// Windows dropped because the queue was full while the server was unreachable.
    pub dropped: u64,
    /// Windows the server refused as bad requests (4xx), not retried.
    pub rejected: u64,
    /// Windows still queued when recording ended and the server did not take them in
    /// time.
    pub unsent: u64,
    /// Profiles an OTLP receiver accepted the request of but rejected (partial
    /// success), by its own count.
    pub rejected_in_part: u64,
    /// The most recent failure, credentials removed.
    pub last_error: Option<String>,
}

/// What one request came to: the outcome, the reply in words, the server's
/// Retry-After, and the partial success of an OTLP reply.
type Attempt = (Outcome, String, Option<Duration>, Option<(u64, String)>);

enum Msg {
    Window(Box<PushWindow>),
    Finish(Instant),
}

/// A running pusher. Dropping it without [`Pusher::finish`] stops the thread after
/// one more attempt at most.
pub struct Pusher {
    tx: Sender<Msg>,
    thread: Option<JoinHandle<PushStats>>,
    timeout: Duration,
    interval: Duration,
}

impl Pusher {
    /// Checks the options and starts the pushing thread.
    pub fn start(opts: &PushOptions) -> Result<Pusher, PushError> {
        let endpoint = Endpoint::parse(&opts.url, &opts.headers)?.with_format(opts.format);
        if !(opts.per_service && opts.app.is_empty()) {
            super::check_app(&opts.app).map_err(|e| PushError::Label(e.to_string()))?;
        }
        let rules = match &opts.rules {
            Some(path) => Rules::read(path).map_err(|e| PushError::Setup(e.to_string()))?,
            None => Rules::default(),
        };
        if let Some(dir) = &opts.dry_run {
            std::fs::create_dir_all(dir)
                .map_err(|e| PushError::Setup(format!("--push-dry-run {}: {e}", dir.display())))?;
        }
        for (k, v) in &opts.tags {
            super::parse_tag(&format!("{k}={v}")).map_err(|e| PushError::Label(e.to_string()))?;
        }
        // The trust store is read now, so a bad --push-ca stops recording before it
        // starts; it is used only for https.
        let trust = match &opts.ca {
            Some(path) => Trust::file(path).map_err(|e| PushError::Ca(e.to_string()))?,
            None => Trust::system(),
        };
        if opts.ca.is_some() && !endpoint.is_https() {
            return Err(PushError::Ca(format!(
                "is for https, and {} is http",
                endpoint.shown()
            )));
        }
        if endpoint.is_https() && trust.source == TrustSource::Bundled && opts.verbose {
            eprintln!("profile: push: note: {}", trust.describe());
        }
        let (tx, rx) = mpsc::channel();
        let mut worker = Worker::new(opts, endpoint, &trust);
        worker.rules = rules;
        let thread = std::thread::Builder::new()
            .name("profile-push".into())
            .spawn(move || worker.run(rx))
            .map_err(|e| PushError::Label(format!("cannot start the push thread: {e}")))?;
        Ok(Pusher {
            tx,
            thread: Some(thread),
            timeout: opts.timeout,
            interval: opts.interval,
        })
    }

    /// The window length asked for.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Hands a window over; never blocks.
    pub fn send(&self, w: PushWindow) {
        let _ = self.tx.send(Msg::Window(Box::new(w)));
    }

    /// Sends what is queued, waiting at most the request timeout (at least 5 s), and
    /// returns what was done.
    pub fn finish(mut self) -> PushStats {
        let grace = self.timeout.max(Duration::from_secs(5));
        let _ = self.tx.send(Msg::Finish(Instant::now() + grace));
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Pusher {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            let _ = self.tx.send(Msg::Finish(Instant::now()));
            let _ = t.join();
        }
    }
}

struct Worker {
    endpoint: Endpoint,
    format: PushFormat,
    secrets: Vec<String>,
    agent: ureq::Agent,
    app: String,
    tags: Vec<(String, String)>,
    queue: Queue,
    backoff: Backoff,
    stats: PushStats,
    verbose: bool,
    /// Refusals already reported (each bad-request status and each certificate
    /// problem is reported once).
    reported: Vec<String>,
    /// Windows the queue holds.
    cap: usize,
    /// `record -a`: one profile per service per window.
    per_service: bool,
    /// The rules naming services, and where they are read from.
    rules: Rules,
    rules_path: Option<std::path::PathBuf>,
    reload: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// `--push-dry-run`: where requests are written instead, and how many so far.
    dry_run: Option<std::path::PathBuf>,
    written: u64,
}

impl Worker {
    fn new(opts: &PushOptions, endpoint: Endpoint, trust: &Trust) -> Worker {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .tls_config(trust.config())
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_global(Some(opts.timeout))
            .user_agent(format!("profile/{}", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Worker {
            secrets: endpoint.secrets(),
            stats: PushStats {
                url: endpoint.shown().to_owned(),
                ..Default::default()
            },
            endpoint,
            format: opts.format,
            agent,
            app: opts.app.clone(),
            tags: opts.tags.clone(),
            queue: Queue::new(opts.buffer),
            backoff: Backoff::default(),
            verbose: opts.verbose,
            reported: Vec::new(),
            cap: opts.buffer.max(1),
            per_service: opts.per_service,
            rules: Rules::default(),
            rules_path: opts.rules.clone(),
            reload: opts.reload.clone(),
            dry_run: opts.dry_run.clone(),
            written: 0,
        }
    }

    fn run(mut self, rx: Receiver<Msg>) -> PushStats {
        let mut retry_at: Option<Instant> = None;
        let mut deadline: Option<Instant> = None;
        loop {
            // Take every window waiting; block only when there is nothing to send.
            let wait = match (deadline, self.queue.is_empty(), retry_at) {
                (Some(_), _, _) => Some(Duration::ZERO),
                (None, true, _) => None,
                (None, false, Some(t)) => Some(t.saturating_duration_since(Instant::now())),
                (None, false, None) => Some(Duration::ZERO),
            };
            let first = match wait {
                None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                Some(d) => rx.recv_timeout(d),
            };
            let gone = matches!(first, Err(RecvTimeoutError::Disconnected));
            if gone && deadline.is_none() {
                deadline = Some(Instant::now());
            }
            let mut msg = first.ok();
            while let Some(m) = msg {
                match m {
                    Msg::Window(w) => self.enqueue(*w),
                    Msg::Finish(d) => deadline = Some(d),
                }
                msg = rx.try_recv().ok();
            }
            let now = Instant::now();
            if let Some(d) = deadline
                && (self.queue.is_empty() || now >= d || retry_at.is_some_and(|t| t >= d))
            {
                break;
            }
            if retry_at.is_some_and(|t| now < t) {
                if deadline.is_some() {
                    std::thread::sleep(retry_at.unwrap_or(now) - now);
                }
                continue;
            }
            retry_at = None;
            let timeout = deadline.map(|d| d.saturating_duration_since(now));
            let Some(body) = self.queue.front() else {
                continue;
            };
            let Some(part) = body.next_part() else {
                self.queue.pop();
                continue;
            };
            let (result, detail, wait, partial) = self.attempt(&body.query, part, timeout);
            let part_len = part.len() as u64;
            if let Some(p) = partial {
                self.partial_success(p);
            }
            match result {
                Outcome::Sent => self.sent(part_len),
                Outcome::Retry => retry_at = Some(self.retry(detail, wait)),
                Outcome::Reject => self.rejected(detail),
            }
        }
        self.stats.dropped = self.queue.dropped;
        self.stats.unsent = self.queue.len() as u64;
        self.stats
    }

    /// A part of the front window was sent: the window leaves the queue once its
    /// last part is; a failing endpoint is back.
    fn sent(&mut self, part_len: u64) {
        self.stats.bytes += part_len;
        let b = self.queue.front_mut().expect("the window being sent");
        b.sent_parts += 1;
        if b.next_part().is_none() {
            let b = self.queue.pop().expect("the window just sent");
            self.stats.sent += 1;
            self.stats.samples += b.samples;
        }
        if self.backoff.failing() && self.verbose {
            eprintln!(
                "profile: push: {} is back; sending the {} queued window{}",
                self.endpoint.shown(),
                self.queue.len(),
                if self.queue.len() == 1 { "" } else { "s" }
            );
        }
        self.backoff.reset();
    }

    /// A part failed and will be tried again: when (backoff, or the server's
    /// Retry-After when it asks for longer).
    fn retry(&mut self, detail: String, wait: Option<Duration>) -> Instant {
        self.stats.retries += 1;
        if !self.backoff.failing() && self.verbose {
            eprintln!(
                "profile: push: warning: {} failed ({detail}); retrying, later windows wait (up to {} window{})",
                self.endpoint.shown(),
                self.cap,
                if self.cap == 1 { "" } else { "s" }
            );
        }
        self.stats.last_error = Some(detail);
        // The server's Retry-After when it asks for longer than backoff.
        let after = self.backoff.next().max(wait.unwrap_or_default());
        Instant::now() + after
    }

    /// The server refused the front window: dropped, said once per kind of refusal.
    fn rejected(&mut self, detail: String) {
        self.queue.pop();
        self.stats.rejected += 1;
        let status: Option<u16> = detail
            .strip_prefix("HTTP ")
            .and_then(|s| s.split_whitespace().next())
            .and_then(|s| s.parse().ok());
        let key = status.map_or_else(|| detail.clone(), |s| s.to_string());
        if !self.reported.contains(&key) {
            self.reported.push(key);
            match status {
                Some(status) => eprintln!(
                    "profile: push: error: {} refused a profile: {detail}{}",
                    self.endpoint.shown(),
                    self.format.hint(status)
                ),
                // The handshake failed: every window meets the same
                // certificate until it changes.
                None => eprintln!(
                    "profile: push: error: {}: {detail}; windows are not sent \
                         while it does not verify (each is tried once)",
                    self.endpoint.shown(),
                ),
            }
        }
        self.stats.last_error = Some(detail);
        self.backoff.reset();
    }

    /// Encodes a window and queues it: one body, or with `per_service` one per
    /// series of the window.
    fn enqueue(&mut self, w: PushWindow) {
        if !self.per_service {
            let rec = &w.recording;
            let pids: Vec<u32> = if rec.meta.pids.is_empty() {
                rec.meta.pid.into_iter().collect()
            } else {
                rec.meta.pids.clone()
            };
            let name = super::ingest_name(&self.app, &rec.meta.hostname, &pids, &self.tags);
            let (app, tags) = (self.app.clone(), self.tags.clone());
            self.enqueue_one(&name, &app, &tags, &w, rec);
            return;
        }
        self.reload_rules();
        let app = (!self.app.is_empty()).then_some(self.app.as_str());
        let series = super::series::split(&w.recording, &self.rules, app);
        let mut w = w;
        let mut tables = super::series::Tables::take(&mut w.recording);
        for s in series {
            // The workload's labels, then --tag (which may replace them).
            let mut labels = s.labels;
            labels.retain(|(k, _)| !self.tags.iter().any(|(t, _)| t == k));
            labels.extend(self.tags.iter().cloned());
            let name = super::ingest_name(&s.app, &w.recording.meta.hostname, &[], &labels);
            let mut rec = s.recording;
            tables.lend(&mut rec);
            self.enqueue_one(&name, &s.app, &labels, &w, &rec);
            tables = super::series::Tables::take(&mut rec);
        }
    }

    /// Reads the rule file again when SIGHUP asked for it; a file that does not
    /// parse keeps the rules in use.
    fn reload_rules(&mut self) {
        let Some(flag) = &self.reload else { return };
        if !flag.swap(false, std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let Some(path) = &self.rules_path else { return };
        match Rules::read(path) {
            Ok(r) => {
                if self.verbose {
                    eprintln!(
                        "profile: push: read {} again ({} rule{})",
                        crate::text::terminal_line(&path.display().to_string()),
                        r.rules.len(),
                        if r.rules.len() == 1 { "" } else { "s" }
                    );
                }
                self.rules = r;
            }
            Err(e) => eprintln!(
                "profile: push: error: {}; the rules in use ({}) are kept",
                crate::text::terminal_line(&e.to_string()),
                self.rules.rules.len()
            ),
        }
    }

    /// Encodes one profile of a window and queues it (or, with `--push-dry-run`,
    /// writes it).
    fn enqueue_one(
        &mut self,
        name: &str,
        app: &str,
        labels: &[(String, String)],
        w: &PushWindow,
        rec: &Recording,
    ) {
        self.stats.windows += 1;
        let rate = if rec.meta.frequency_hz > 0 {
            rec.meta.frequency_hz
        } else {
            1_000_000_000 / rec.meta.sample_period_ns.max(1)
        };
        // OTLP says it all in the body.
        let query = match self.format {
            PushFormat::Pyroscope => {
                super::ingest_query(name, w.from_unix_ns, w.until_unix_ns, rate)
            }
            PushFormat::Otlp => String::new(),
        };
        // As every output counts them: not the `[unsampled]` remainders.
        let samples = rec.cpu_samples();
        let series = protocol::Series {
            service: app,
            labels,
        };
        let parts = protocol::bodies(self.format, rec, &series);
        if let Some(dir) = self.dry_run.clone() {
            self.write_dry_run(&dir, app, name, &query, &parts, samples);
            return;
        }
        self.queue.push(Body {
            query,
            parts,
            sent_parts: 0,
            samples,
        });
    }

    /// One request; `limit` shortens the timeout while finishing. Returns what to do,
    /// the reply in words, the server's Retry-After, and what an OTLP receiver that
    /// took the request rejected of it.
    fn attempt(&self, query: &str, body: &[u8], limit: Option<Duration>) -> Attempt {
        let url = if query.is_empty() {
            self.endpoint.ingest.clone()
        } else {
            format!("{}?{}", self.endpoint.ingest, query)
        };
        let mut req = self.agent.post(&url);
        for (k, v) in self.format.content_headers() {
            req = req.header(*k, *v);
        }
        for (k, v) in &self.endpoint.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        if let Some(l) = limit {
            req = req
                .config()
                .timeout_global(Some(l.max(Duration::from_millis(100))))
                .build();
        }
        let mut wait = None;
        let mut partial = None;
        let (outcome, detail) = match req.send(body) {
            Ok(mut resp) => {
                let status = resp.status().as_u16();
                wait = resp
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(protocol::retry_after);
                // At most 4 KiB of the reply: a larger one is not read (and says
                // nothing).
                let reply = resp
                    .body_mut()
                    .with_config()
                    .limit(4096)
                    .read_to_vec()
                    .unwrap_or_default();
                let outcome = self.format.outcome(status);
                if outcome == Outcome::Sent && self.format == PushFormat::Otlp {
                    partial = protocol::partial_success(&reply);
                }
                let text = match self.format {
                    PushFormat::Otlp => protocol::status_message(&reply),
                    PushFormat::Pyroscope => None,
                }
                .unwrap_or_else(|| String::from_utf8_lossy(&reply).into_owned());
                // The server's words, maybe hostile: secrets taken out before the
                // cut (a cut secret would show its start), then escaped and cut.
                let first = redact(text.lines().next().unwrap_or("").trim(), &self.secrets);
                let first = crate::text::terminal_line(&first);
                let reason = resp.status().canonical_reason().unwrap_or("");
                let mut d = format!("HTTP {status} {reason}");
                if !first.is_empty() {
                    d.push_str(&format!(": {first}"));
                }
                (outcome, d)
            }
            Err(e) => match crate::tls::failure(&e) {
                // Retrying cannot make a certificate verify.
                Some(t) if t.certificate => (Outcome::Reject, t.detail),
                Some(t) => (Outcome::Retry, t.detail),
                None => (Outcome::Retry, describe(&e)),
            },
        };
        let detail = redact(&detail, &self.secrets);
        (
            outcome,
            crate::text::terminal(&detail, 2 * crate::text::TERMINAL_MAX).into_owned(),
            wait,
            partial,
        )
    }

    /// An OTLP receiver took the request but may have rejected part of it: counted,
    /// and each message said once (the request is not sent again: the rest was
    /// taken).
    fn partial_success(&mut self, (rejected, message): (u64, String)) {
        self.stats.rejected_in_part += rejected;
        let message = redact(&message, &self.secrets);
        let message = crate::text::terminal_line(&message).into_owned();
        let key = format!("partial: {message}");
        if !self.reported.contains(&key) {
            eprintln!(
                "profile: push: warning: {} took a window but rejected {rejected} profile{} of it: {message}",
                self.endpoint.shown(),
                if rejected == 1 { "" } else { "s" }
            );
            self.reported.push(key);
        }
    }
}

/// A transport error in a few words (ureq's own text can name the URL).
fn describe(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Timeout(_) => "timed out".into(),
        ureq::Error::HostNotFound => "host not found".into(),
        ureq::Error::ConnectionFailed => "connection failed".into(),
        ureq::Error::Io(io) => match io.kind() {
            std::io::ErrorKind::ConnectionRefused => "connection refused".into(),
            std::io::ErrorKind::ConnectionReset => "connection reset".into(),
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => "timed out".into(),
            std::io::ErrorKind::UnexpectedEof => "the server closed the connection".into(),
            k => format!("I/O error: {k}"),
        },
        ureq::Error::Protocol(_) => "the server's answer is not HTTP/1.1".into(),
        _ => "request failed".into(),
    }
}

/// The recorder hands its windows straight over: never blocks, never stops it.
#[cfg(target_os = "linux")]
impl crate::record::LiveSink for Pusher {
    fn interval(&self) -> Duration {
        self.interval
    }

    fn window(&mut self, w: crate::record::Window) -> bool {
        self.send(PushWindow {
            from_unix_ns: w.start_unix_ns,
            until_unix_ns: w.end_unix_ns,
            recording: w.recording,
        });
        true
    }
}
