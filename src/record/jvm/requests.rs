//! Perf-map requests to JVMs, each made on a thread of its own with a time limit, so
//! that the recording never waits for a JVM; replies are collected as they come, and
//! one for a JVM that is gone (its pid since reused) is dropped.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::{Duration, Instant};

use super::leftover::CausedMap;
use super::{JvmError, JvmId, request_perf_map};
use crate::symbolize::perfmap::{PerfMapFile, PerfMapSkip, TargetUser, open_perf_map};

/// Why a JVM gave no perf map. `Display` is the sentence for the summary.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MapError {
    /// The request to write it failed.
    #[error(transparent)]
    Request(#[from] JvmError),
    /// There is no map where the JVM writes it.
    #[error("the JVM wrote no perf map at {}", .0.display())]
    NotWritten(PathBuf),
    /// The map is there but was refused by the checks of [`open_perf_map`].
    #[error(transparent)]
    Open(PerfMapSkip),
}

impl MapError {
    /// The JVM will not write a map when asked: it refused the command, or opened no
    /// listener when signalled (it printed a thread dump instead). It is not asked
    /// again.
    pub(crate) fn refused(&self) -> bool {
        matches!(
            self,
            MapError::Request(
                JvmError::Refused(_) | JvmError::NoListener(_) | JvmError::AttachDisabled
            )
        )
    }

    /// No whole reply came within the time limit.
    pub(crate) fn abandoned(&self) -> bool {
        matches!(self, MapError::Request(JvmError::Abandoned(_)))
    }

    /// The JVM exited, or its pid names another process now.
    pub(crate) fn gone(&self) -> bool {
        matches!(self, MapError::Request(JvmError::Gone))
    }
}

/// What a request brought back: the perf map as the JVM wrote it, or why not.
pub(crate) type Reply = (u32, Result<PerfMapFile, MapError>);

/// A reply as the request thread sends it: with the start time of the JVM it asked.
type Sent = (u32, u64, Result<PerfMapFile, MapError>);

/// Perf-map requests to JVMs, each made on a thread of its own so that the recording
/// never waits for a JVM; replies are collected with [`PerfMapRequests::replies`].
/// The maps they made JVMs write are removed when the requests are dropped (see
/// [`super::leftover`]).
pub(crate) struct PerfMapRequests {
    tx: Sender<Sent>,
    rx: Receiver<Sent>,
    /// Per pid: when its last request was sent, whether one is in flight, and the start
    /// time of the JVM asked (a reply for another process of that pid is dropped).
    state: HashMap<u32, (Instant, bool, u64)>,
    /// The time limit of one request.
    pub limit: Duration,
    /// Per pid: the perf map the requests made its JVM write (and the start time of
    /// that JVM), removed once the JVM is forgotten or the requests are dropped.
    caused: HashMap<u32, (u64, CausedMap)>,
    /// Maps of JVMs forgotten: removed at the next [`PerfMapRequests::replies`], after
    /// the read the JVM's exit is handled with.
    forgotten: Vec<CausedMap>,
}

impl Default for PerfMapRequests {
    fn default() -> Self {
        let (tx, rx) = channel();
        PerfMapRequests {
            tx,
            rx,
            state: HashMap::new(),
            limit: Duration::from_secs(3),
            caused: HashMap::new(),
            forgotten: Vec::new(),
        }
    }
}

impl PerfMapRequests {
    /// Asks JVM `pid` for its perf map unless a request is in flight or one was sent
    /// less than `min_gap` ago; returns whether it asked.
    pub(crate) fn request(
        &mut self,
        id: &std::sync::Arc<JvmId>,
        user: &TargetUser,
        min_gap: Duration,
    ) -> bool {
        let pid = id.pid;
        let now = Instant::now();
        if let Some(&(at, busy, _)) = self.state.get(&pid)
            && (busy || now.duration_since(at) < min_gap)
        {
            return false;
        }
        let start = id.start;
        if self.caused.get(&pid).is_none_or(|c| c.0 != start) {
            self.caused.remove(&pid);
            if let Some(c) = CausedMap::before_first_request(pid, crate::sys::started_at(pid)) {
                self.caused.insert(pid, (start, c));
            }
        }
        self.state.insert(pid, (now, true, start));
        let tx = self.tx.clone();
        let limit = self.limit;
        let (id, user) = (std::sync::Arc::clone(id), user.clone());
        let spawned = std::thread::Builder::new()
            .name("jvm-perfmap".into())
            .spawn(move || {
                let reply = request_perf_map(&id, &user.uids, limit)
                    .map_err(MapError::Request)
                    .and_then(|()| read_map(pid, &user));
                let _ = tx.send((pid, start, reply));
            });
        if spawned.is_err() {
            self.state.insert(pid, (now, false, start));
        }
        spawned.is_ok()
    }

    /// How long until a request to `pid` may be sent with `min_gap` (zero when it may
    /// be now, or when one is in flight: its reply is what a caller waits for).
    pub(crate) fn due_in(&self, pid: u32, min_gap: Duration) -> Duration {
        match self.state.get(&pid) {
            Some(&(at, false, _)) => min_gap.saturating_sub(at.elapsed()),
            _ => Duration::ZERO,
        }
    }

    /// Whether a request to `pid` is in flight.
    pub(crate) fn busy(&self, pid: u32) -> bool {
        self.state.get(&pid).is_some_and(|s| s.1)
    }

    /// Forgets `pid` (its JVM exited); a reply still in flight is dropped when it comes.
    pub(crate) fn forget(&mut self, pid: u32) {
        self.state.remove(&pid);
        if let Some((_, c)) = self.caused.remove(&pid) {
            self.forgotten.push(c);
        }
    }

    /// The replies that arrived; waits up to `wait` for the first one if none has.
    pub(crate) fn replies(&mut self, wait: Duration) -> Vec<Reply> {
        self.forgotten.clear();
        let mut sent: Vec<Sent> = Vec::new();
        if !wait.is_zero()
            && let Ok(r) = self.rx.recv_timeout(wait)
        {
            sent.push(r);
        }
        sent.extend(self.rx.try_iter());
        let mut out = Vec::with_capacity(sent.len());
        for (pid, start, reply) in sent {
            // A reply for a JVM forgotten since (it exited; its pid may name another
            // JVM now) is dropped.
            if let Some(s) = self.state.get_mut(&pid)
                && s.2 == start
            {
                s.1 = false;
                out.push((pid, reply));
            }
        }
        out
    }
}

/// The JVM's perf map, opened as its user with the checks of [`open_perf_map`].
pub(crate) fn read_map(pid: u32, user: &TargetUser) -> Result<PerfMapFile, MapError> {
    open_perf_map(pid, user).map_err(|e| match e {
        PerfMapSkip::Missing(p) => MapError::NotWritten(p),
        other => MapError::Open(other),
    })
}
