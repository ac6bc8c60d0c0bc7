//! Having a HotSpot JVM write its perf map, with no flag given to it: the attach
//! handshake `jcmd` uses, done here. If the JVM's attach socket `/tmp/.java_pid<PID>`
//! does not exist yet, create the file `.attach_pid<PID>` in its working directory (or
//! its /tmp), send it SIGQUIT, and wait for the socket; then connect and send the
//! protocol-1 request `jcmd Compiler.perfmap` (JDK 17+), which makes the JVM write
//! `/tmp/perf-<PID>.map` listing all its compiled code.
//!
//! Run as root, the handshake runs as the target's user (its effective uid and gid, for
//! the requesting thread only), as that user's own `jcmd` would: `profile` may run as
//! root while the target's user controls those directories. On top of that the trigger
//! file is created new (O_EXCL), never through a symlink, and the socket must be a
//! socket (not a link) of the target's user or root. A stale socket (a JVM of the same
//! pid left it) is treated as none. A JVM started with `-XX:+DisableAttachMechanism`, or
//! that opened no listener when signalled, is never signalled (again): it would print a
//! thread dump each time.
//!
//! Everything goes through `/proc/PID/root` and `/proc/PID/cwd`, with the pid the JVM
//! knows itself by (the last `NSpid` of /proc/PID/status), so a JVM in a container is
//! reached from the host. SIGQUIT is sent only to a process that catches it (its
//! `SigCgt`): a JVM started with `-Xrs`, or one still starting, would die of it. Every
//! wait has a time limit; the recorder calls this from a thread of its own
//! ([`PerfMapRequests`]), so a JVM that never answers costs the recording nothing.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::{Duration, Instant};

use super::sys::ThreadAsUser;
use crate::symbolize::perfmap::{PerfMapFile, PerfMapSkip, open_perf_map};

/// Why the JVM did not write its perf map. `Display` is the sentence for the summary.
#[derive(Debug, thiserror::Error)]
pub enum JvmError {
    /// Sending SIGQUIT would kill it.
    #[error("it does not handle SIGQUIT (started with -Xrs, or still starting)")]
    NoSigquitHandler,
    /// Its command line or environment turns the attach mechanism off: SIGQUIT would
    /// only print a thread dump. The message starts with [`NO_LISTENER`].
    #[error(
        "its attach listener did not start: it was started with -XX:+DisableAttachMechanism \
         (launch it under profile with --jvm-flags to have it write its map at exit)"
    )]
    AttachDisabled,
    /// The socket did not appear in time. The message starts with [`NO_LISTENER`].
    #[error(
        "its attach listener did not start within {0:?} (-XX:+DisableAttachMechanism?); it \
         is not signalled again (a JVM that does not listen prints a thread dump at each \
         SIGQUIT)"
    )]
    NoListener(Duration),
    /// The socket is not a socket, or belongs to someone else.
    #[error("{0} is not the JVM's attach socket (wrong type or owner)")]
    BadSocket(PathBuf),
    /// Connecting, sending or reading failed (or timed out).
    #[error("attach socket {path}: {source}")]
    Io {
        /// The socket.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The JVM refused the command (JDK 16 and older do not have it). The message
    /// starts with [`REFUSED`].
    #[error("`jcmd Compiler.perfmap` failed (JDK 17 or later is needed): {0}")]
    Refused(String),
}

/// How the message of [`JvmError::NoListener`] starts.
pub const NO_LISTENER: &str = "its attach listener did not start";

/// How the message of [`JvmError::Refused`] starts.
pub const REFUSED: &str = "`jcmd Compiler.perfmap` failed";

/// The HotSpot options `--jvm-flags` adds: the JVM writes its whole perf map when it
/// exits, so a JVM that ends before the recording does still names the code it
/// compiled after `profile`'s last request.
pub const JVM_FLAGS: &str = "-XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit";

/// `JAVA_TOOL_OPTIONS` with [`JVM_FLAGS`] added to what it held (`existing`), each
/// option only if it is not there yet. Every JVM the command starts reads it (and says
/// so on its stderr: `Picked up JAVA_TOOL_OPTIONS: ...`).
pub fn jvm_tool_options(existing: Option<&std::ffi::OsStr>) -> std::ffi::OsString {
    let mut out = existing.map(|e| e.to_owned()).unwrap_or_default();
    let has =
        |o: &std::ffi::OsStr, flag: &str| o.to_string_lossy().split_whitespace().any(|w| w == flag);
    for flag in JVM_FLAGS.split(' ') {
        if !has(&out, flag) {
            if !out.is_empty() {
                out.push(" ");
            }
            out.push(flag);
        }
    }
    out
}

pub use crate::profile::vm_threads::is_libjvm;

/// Whether process `pid` has a handler for SIGQUIT (bit 3 of `SigCgt`).
fn catches_sigquit(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            let hex = s.lines().find_map(|l| l.strip_prefix("SigCgt:"))?.trim();
            u64::from_str_radix(hex, 16).ok()
        })
        .is_some_and(|mask| mask & (1 << (libc::SIGQUIT - 1)) != 0)
}

/// Whether process `pid` was started with `-XX:+DisableAttachMechanism`, as its command
/// line or the variables the JVM reads options from say (a flag in an options file is
/// not seen: then the first SIGQUIT prints a thread dump, and no other is sent).
fn attach_disabled(pid: u32) -> bool {
    const FLAG: &[u8] = b"-XX:+DisableAttachMechanism";
    let has = |b: &[u8]| b.windows(FLAG.len()).any(|w| w == FLAG);
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    has(&cmdline)
        || environ.split(|&c| c == 0).any(|v| {
            ["JAVA_TOOL_OPTIONS=", "JDK_JAVA_OPTIONS=", "_JAVA_OPTIONS="]
                .iter()
                .any(|k| v.starts_with(k.as_bytes()))
                && has(v)
        })
}

/// Removes the trigger file however the handshake ends.
struct TriggerFile(Option<PathBuf>);

impl Drop for TriggerFile {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The effective uid and gid of process `pid` (from /proc/PID/status).
fn effective_ids(pid: u32) -> Option<(u32, u32)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |key: &str| -> Option<u32> {
        let line = status.lines().find_map(|l| l.strip_prefix(key))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    Some((field("Uid:")?, field("Gid:")?))
}

/// Connects to the JVM's attach socket: the socket itself (not what a link there
/// points to), of the target's user or root.
fn connect(socket: &Path, owners: &[u32]) -> Result<UnixStream, JvmError> {
    let io = |source| JvmError::Io {
        path: socket.to_owned(),
        source,
    };
    let meta = std::fs::symlink_metadata(socket).map_err(io)?;
    if !meta.file_type().is_socket() || (meta.uid() != 0 && !owners.contains(&meta.uid())) {
        return Err(JvmError::BadSocket(socket.to_owned()));
    }
    UnixStream::connect(socket).map_err(io)
}

/// Whether connecting failed because no listener is there: no socket, or a stale one
/// a JVM of the same pid left.
fn no_listener(e: &JvmError) -> bool {
    matches!(e, JvmError::Io { source, .. }
        if matches!(source.kind(), ErrorKind::NotFound | ErrorKind::ConnectionRefused))
}

/// Has JVM `pid` write its perf map now; waits at most `limit` in all. `owners` are the
/// target's uids (its socket must be theirs or root's).
///
/// Run as root, the calling thread takes the target's effective uid and gid for the
/// handshake (as `jcmd` run by that user would): the trigger file is theirs, and a link
/// planted in directories they control leads nowhere they could not go themselves.
pub fn request_perf_map(pid: u32, owners: &[u32], limit: Duration) -> Result<(), JvmError> {
    let started = Instant::now();
    let _as_target = effective_ids(pid).and_then(|(uid, gid)| ThreadAsUser::enter(uid, gid));
    let ns = crate::symbolize::perfmap::ns_pid(pid).unwrap_or(pid);
    let socket = PathBuf::from(format!("/proc/{pid}/root/tmp/.java_pid{ns}"));
    let mut stream = match connect(&socket, owners) {
        Ok(stream) => stream,
        Err(e) if !no_listener(&e) => return Err(e),
        Err(_) => {
            if !catches_sigquit(pid) {
                return Err(JvmError::NoSigquitHandler);
            }
            if attach_disabled(pid) {
                return Err(JvmError::AttachDisabled);
            }
            let name = format!(".attach_pid{ns}");
            let candidates = [
                PathBuf::from(format!("/proc/{pid}/cwd/{name}")),
                PathBuf::from(format!("/proc/{pid}/root/tmp/{name}")),
            ];
            // A new file, never through a link: O_EXCL and O_NOFOLLOW, and the target's
            // /tmp only if it is no link.
            let tmp_is_dir = std::fs::symlink_metadata(format!("/proc/{pid}/root/tmp"))
                .is_ok_and(|m| m.file_type().is_dir());
            let _trigger = TriggerFile(
                candidates
                    .into_iter()
                    .enumerate()
                    .filter(|&(i, _)| i == 0 || tmp_is_dir)
                    .map(|(_, p)| p)
                    .find(|p| {
                        std::fs::OpenOptions::new()
                            .write(true)
                            .create_new(true)
                            .mode(0o600)
                            .custom_flags(libc::O_NOFOLLOW)
                            .open(p)
                            .is_ok()
                    }),
            );
            super::sys::kill(pid, libc::SIGQUIT);
            // The JVM replaces a stale socket with its listener's.
            loop {
                std::thread::sleep(Duration::from_millis(5));
                match connect(&socket, owners) {
                    Ok(stream) => break stream,
                    Err(e) if !no_listener(&e) => return Err(e),
                    Err(_) if started.elapsed() >= limit => {
                        return Err(JvmError::NoListener(limit));
                    }
                    Err(_) => {}
                }
            }
        }
    };
    let io = |source| JvmError::Io {
        path: socket.clone(),
        source,
    };
    let left = limit
        .saturating_sub(started.elapsed())
        .max(Duration::from_millis(100));
    stream.set_read_timeout(Some(left)).map_err(io)?;
    stream.set_write_timeout(Some(left)).map_err(io)?;
    // Protocol version 1: the version, the command and three arguments, each ended by NUL.
    stream
        .write_all(b"1\0jcmd\0Compiler.perfmap\0\0\0")
        .map_err(io)?;
    let mut reply = Vec::new();
    stream.take(1 << 16).read_to_end(&mut reply).map_err(io)?;
    let reply = String::from_utf8_lossy(&reply);
    let (code, text) = reply.split_once('\n').unwrap_or((&reply, ""));
    if code.trim() != "0" || text.contains("Unknown diagnostic command") {
        let text = text.trim();
        return Err(JvmError::Refused(if text.is_empty() {
            format!("reply {:?}", code.trim())
        } else {
            text.lines().next().unwrap_or_default().to_owned()
        }));
    }
    Ok(())
}

/// What a request brought back: the perf map as the JVM wrote it, or why not.
pub type Reply = (u32, Result<PerfMapFile, String>);

/// Perf-map requests to JVMs, each made on a thread of its own so that the recording
/// never waits for a JVM; replies are collected with [`PerfMapRequests::replies`].
pub struct PerfMapRequests {
    tx: Sender<Reply>,
    rx: Receiver<Reply>,
    /// Per pid: when its last request was sent, and whether one is in flight.
    state: HashMap<u32, (Instant, bool)>,
    /// The time limit of one request.
    pub limit: Duration,
}

impl Default for PerfMapRequests {
    fn default() -> Self {
        let (tx, rx) = channel();
        PerfMapRequests {
            tx,
            rx,
            state: HashMap::new(),
            limit: Duration::from_secs(3),
        }
    }
}

impl PerfMapRequests {
    /// Asks JVM `pid` for its perf map unless a request is in flight or one was sent
    /// less than `min_gap` ago; returns whether it asked.
    pub fn request(&mut self, pid: u32, owners: Vec<u32>, min_gap: Duration) -> bool {
        let now = Instant::now();
        if let Some(&(at, busy)) = self.state.get(&pid)
            && (busy || now.duration_since(at) < min_gap)
        {
            return false;
        }
        self.state.insert(pid, (now, true));
        let tx = self.tx.clone();
        let limit = self.limit;
        let spawned = std::thread::Builder::new()
            .name("jvm-perfmap".into())
            .spawn(move || {
                let reply = request_perf_map(pid, &owners, limit)
                    .map_err(|e| e.to_string())
                    .and_then(|()| read_map(pid, &owners));
                let _ = tx.send((pid, reply));
            });
        if spawned.is_err() {
            self.state.insert(pid, (now, false));
        }
        spawned.is_ok()
    }

    /// How long until a request to `pid` may be sent with `min_gap` (zero when it may
    /// be now, or when one is in flight: its reply is what a caller waits for).
    pub fn due_in(&self, pid: u32, min_gap: Duration) -> Duration {
        match self.state.get(&pid) {
            Some(&(at, false)) => min_gap.saturating_sub(at.elapsed()),
            _ => Duration::ZERO,
        }
    }

    /// Whether a request to `pid` is in flight.
    pub fn busy(&self, pid: u32) -> bool {
        self.state.get(&pid).is_some_and(|s| s.1)
    }

    /// The replies that arrived; waits up to `wait` for the first one if none has.
    pub fn replies(&mut self, wait: Duration) -> Vec<Reply> {
        let mut out: Vec<Reply> = Vec::new();
        if !wait.is_zero()
            && let Ok(r) = self.rx.recv_timeout(wait)
        {
            out.push(r);
        }
        out.extend(self.rx.try_iter());
        for (pid, _) in &out {
            if let Some(s) = self.state.get_mut(pid) {
                s.1 = false;
            }
        }
        out
    }
}

/// The JVM's perf map, read with the checks of [`open_perf_map`].
fn read_map(pid: u32, owners: &[u32]) -> Result<PerfMapFile, String> {
    open_perf_map(pid, owners).map_err(|e| match e {
        PerfMapSkip::Missing(p) => format!("the JVM wrote no perf map at {}", p.display()),
        other => other.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_options_keep_what_was_there() {
        use std::ffi::OsStr;
        assert_eq!(jvm_tool_options(None), JVM_FLAGS);
        assert_eq!(
            jvm_tool_options(Some(OsStr::new("-Xmx1g"))),
            OsStr::new(&format!("-Xmx1g {JVM_FLAGS}"))
        );
        // Nothing twice, order kept.
        assert_eq!(
            jvm_tool_options(Some(OsStr::new("-XX:+UnlockDiagnosticVMOptions -Xss1m"))),
            "-XX:+UnlockDiagnosticVMOptions -Xss1m -XX:+DumpPerfMapAtExit"
        );
        assert_eq!(jvm_tool_options(Some(OsStr::new(JVM_FLAGS))), JVM_FLAGS);
    }

    #[test]
    fn own_process_facts() {
        let me = std::process::id();
        assert_eq!(crate::symbolize::perfmap::ns_pid(me), Some(me));
        // The test harness does not catch SIGQUIT: no request may signal it.
        assert!(!catches_sigquit(me));
        let e = request_perf_map(me, &[], Duration::from_millis(50)).unwrap_err();
        assert!(matches!(e, JvmError::NoSigquitHandler), "{e}");
        // The messages the tracker tells failures apart by.
        for e in [
            JvmError::NoListener(Duration::from_secs(3)),
            JvmError::AttachDisabled,
        ] {
            let no = e.to_string();
            assert!(no.starts_with(NO_LISTENER), "{no}");
        }
        assert!(!attach_disabled(me));
        let refused = JvmError::Refused("no".into()).to_string();
        assert!(refused.starts_with(REFUSED), "{refused}");
    }
}
