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
//! `SigCgt`): a JVM started with `-Xrs`, or one still starting, would die of it; and
//! only once its Signal Dispatcher thread runs and while no Attach Listener does
//! (else it could print a thread dump instead of listening). Every
//! wait has a time limit; the recorder calls this from a thread of its own
//! ([`PerfMapRequests`]), so a JVM that never answers costs the recording nothing.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::sys::ThreadAsUser;

/// Why the JVM did not write its perf map. `Display` is the sentence for the summary.
#[derive(Debug, thiserror::Error)]
pub enum JvmError {
    /// Sending SIGQUIT would kill it.
    #[error("it does not handle SIGQUIT (started with -Xrs, or still starting)")]
    NoSigquitHandler,
    /// Its Signal Dispatcher thread has not started: a SIGQUIT would wait for it, and
    /// if it came after the trigger file was gone the JVM would print a thread dump.
    /// Asked again later.
    #[error("it is still starting (no Signal Dispatcher thread yet); asked again later")]
    Starting,
    /// Its Attach Listener thread runs but its socket was not found: a SIGQUIT would
    /// print a thread dump (the listener starts only once). Asked again later.
    #[error(
        "its attach listener runs but its socket is not at /tmp/.java_pid<PID> (removed by \
         a /tmp cleaner?): not signalled, a SIGQUIT would print a thread dump"
    )]
    ListenerWithoutSocket,
    /// Its command line or environment turns the attach mechanism off: SIGQUIT would
    /// only print a thread dump. Not asked again ([`requests::MapError::refused`]).
    #[error(
        "its attach listener did not start: it was started with -XX:+DisableAttachMechanism \
         (launch it under profile with --jvm-flags to have it write its map at exit)"
    )]
    AttachDisabled,
    /// The socket did not appear in time. Not asked again ([`requests::MapError::refused`]).
    #[error(
        "its attach listener did not start within {0:?} (-XX:+DisableAttachMechanism?); it \
         is not signalled again (a JVM that does not listen prints a thread dump at each \
         SIGQUIT)"
    )]
    NoListener(Duration),
    /// The socket is not a socket, or belongs to someone else.
    #[error("{0} is not the JVM's attach socket (wrong type or owner)")]
    BadSocket(PathBuf),
    /// The process exited, or is no longer the JVM that was seen (its pid was reused,
    /// or it ran another program): it is never signalled or asked again.
    #[error("it exited (or its pid now names another process)")]
    Gone,
    /// The socket is served by a process other than the JVM.
    #[error("{path} is served by process {peer_pid} (uid {peer_uid}), not by the JVM: refused")]
    NotTheJvm {
        /// The socket.
        path: PathBuf,
        /// Who listens on it.
        peer_pid: u32,
        /// Its uid.
        peer_uid: u32,
    },
    /// The whole request (connect, send, reply) did not end within the limit
    /// (counted: [`requests::MapError::abandoned`]).
    #[error("its request was abandoned: no whole reply within {0:?}")]
    Abandoned(Duration),
    /// Connecting, sending or reading failed.
    #[error("attach socket {path}: {source}")]
    Io {
        /// The socket.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The JVM refused the command (JDK 16 and older do not have it). Not asked again
    /// ([`requests::MapError::refused`]).
    #[error("`jcmd Compiler.perfmap` failed (JDK 17 or later is needed): {0}")]
    Refused(String),
}

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

pub(super) use crate::profile::vm_threads::is_libjvm;

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

/// Whether a SIGQUIT would start the JVM's attach listener now, from the names of
/// its threads (HotSpot names each thread it starts, 15 characters kept): its Signal
/// Dispatcher must run (a SIGQUIT before it would be handled only once it starts,
/// perhaps after the trigger file was removed: a thread dump on the target's output),
/// and no Attach Listener yet (once started, every SIGQUIT prints a thread dump).
fn sigquit_starts_listener(pid: u32) -> Result<(), JvmError> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Err(JvmError::Gone);
    };
    let mut dispatcher = false;
    for task in tasks.flatten() {
        let comm = std::fs::read(task.path().join("comm")).unwrap_or_default();
        match comm.strip_suffix(b"\n").unwrap_or(&comm) {
            b"Signal Dispatch" => dispatcher = true,
            b"Attach Listener" => return Err(JvmError::ListenerWithoutSocket),
            _ => {}
        }
    }
    if dispatcher {
        Ok(())
    } else {
        Err(JvmError::Starting)
    }
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

/// Removes the trigger file however the handshake ends: from the directory held open
/// (its path goes through that descriptor, on the thread that made it).
struct TriggerFile(Option<(std::os::fd::OwnedFd, PathBuf)>);

impl Drop for TriggerFile {
    fn drop(&mut self) {
        if let Some((_dir, path)) = self.0.take() {
            let _ = std::fs::remove_file(path);
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

pub(super) use crate::sys::start_time;

/// Whether process `pid` maps a file named `libjvm.so` now.
fn maps_libjvm(pid: u32) -> bool {
    crate::process::read_maps(pid)
        .is_ok_and(|maps| maps.iter().any(|m| m.path.ends_with("/libjvm.so")))
}

/// A JVM as it was seen mapping `libjvm.so`: a pidfd taken then, and its start time.
/// It is handshaken or signalled only while it provably is still that process: the
/// pidfd names it and no later holder of its pid, the start time tells a reused pid,
/// the maps are read again to tell an `exec` into something else.
pub(super) struct JvmId {
    pub pid: u32,
    pidfd: super::sys::PidFd,
    /// Its start time (see [`start_time`]).
    pub start: u64,
}

impl JvmId {
    /// Process `pid`, if it maps `libjvm.so` now (checked after its pidfd was taken, so
    /// the pidfd names the process that was checked).
    pub(super) fn seen(pid: u32) -> Option<JvmId> {
        let pidfd = super::sys::PidFd::open(pid as i32).ok()?;
        let id = JvmId {
            pid,
            pidfd,
            start: start_time(pid)?,
        };
        id.is_jvm().then_some(id)
    }

    /// Whether it has exited (then it is never asked again).
    pub(super) fn exited(&self) -> bool {
        self.pidfd.exited()
    }

    /// Whether it still runs, with its pid, its start time and `libjvm.so` mapped.
    pub(super) fn is_jvm(&self) -> bool {
        !self.pidfd.exited()
            && start_time(self.pid) == Some(self.start)
            && maps_libjvm(self.pid)
            // It did not exit (and give its pid away) while this was read.
            && !self.pidfd.exited()
    }

    /// Sends `signal` through its pidfd, right after checking it is still the JVM.
    fn signal(&self, signal: i32) -> Result<(), JvmError> {
        if !self.is_jvm() {
            return Err(JvmError::Gone);
        }
        self.pidfd.send_signal(signal).map_err(|_| JvmError::Gone)
    }
}

/// Connects to the JVM's attach socket: the inode checked (opened `O_PATH`, never
/// through a link: a socket of the target's user) is the one connected, and the process
/// listening on it must be the JVM itself, as `SO_PEERCRED` says. A socket swapped in
/// by a rename, or served by another process, is refused before a byte is sent.
fn connect(
    id: &JvmId,
    socket: &Path,
    owners: &[u32],
    deadline: Instant,
) -> Result<UnixStream, JvmError> {
    let io = |source| JvmError::Io {
        path: socket.to_owned(),
        source,
    };
    let fd: std::os::fd::OwnedFd = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(socket)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                JvmError::BadSocket(socket.to_owned())
            } else {
                io(e)
            }
        })?
        .into();
    let meta = std::fs::File::from(fd.try_clone().map_err(io)?)
        .metadata()
        .map_err(io)?;
    if !meta.file_type().is_socket() || !owners.contains(&meta.uid()) {
        return Err(JvmError::BadSocket(socket.to_owned()));
    }
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(JvmError::Abandoned(Duration::ZERO));
    }
    let stream = super::sys::connect_unix_fd(&fd, left).map_err(io)?;
    let (peer_pid, peer_uid) = super::sys::peer_cred(&stream).map_err(io)?;
    if peer_pid != id.pid || !owners.contains(&peer_uid) {
        return Err(JvmError::NotTheJvm {
            path: socket.to_owned(),
            peer_pid,
            peer_uid,
        });
    }
    // While its pidfd is open and it runs, no other process can have its pid: the
    // listener is the JVM.
    if id.exited() {
        return Err(JvmError::Gone);
    }
    Ok(stream)
}

/// Whether connecting failed because no listener is there: no socket, or a stale one
/// a JVM of the same pid left.
fn no_listener(e: &JvmError) -> bool {
    matches!(e, JvmError::Io { source, .. }
        if matches!(source.kind(), ErrorKind::NotFound | ErrorKind::ConnectionRefused))
}

/// The largest reply read.
const MAX_REPLY: usize = 1 << 16;

/// What the JVM's reply to `jcmd Compiler.perfmap` says: `0` on its first line and no
/// "Unknown diagnostic command" is success; anything else is a refusal, shown (its first
/// line, made safe for a terminal) in the summary.
pub fn parse_reply(reply: &[u8]) -> Result<(), JvmError> {
    let reply = String::from_utf8_lossy(&reply[..reply.len().min(MAX_REPLY)]);
    let (code, text) = reply.split_once('\n').unwrap_or((&reply, ""));
    if code.trim() != "0" || text.contains("Unknown diagnostic command") {
        let text = text.trim();
        let shown = if text.is_empty() {
            format!("reply {:?}", code.trim())
        } else {
            text.lines().next().unwrap_or_default().to_owned()
        };
        return Err(JvmError::Refused(
            crate::text::terminal_line(&shown).into_owned(),
        ));
    }
    Ok(())
}

/// Has JVM `id` write its perf map now; everything (connect, signal, wait, send and
/// the whole reply) within `limit`. `owners` are the target's uids (its socket must be
/// theirs).
///
/// Run as root, the calling thread takes the target's effective uid and gid for the
/// handshake (as `jcmd` run by that user would): the trigger file is theirs, and a link
/// planted in directories they control leads nowhere they could not go themselves.
pub(super) fn request_perf_map(
    id: &JvmId,
    owners: &[u32],
    limit: Duration,
) -> Result<(), JvmError> {
    let started = Instant::now();
    let deadline = started + limit;
    let pid = id.pid;
    if !id.is_jvm() {
        return Err(JvmError::Gone);
    }
    let _as_target = effective_ids(pid).and_then(|(uid, gid)| ThreadAsUser::enter(uid, gid));
    let ns = crate::symbolize::perfmap::ns_pid(pid).unwrap_or(pid);
    let socket = PathBuf::from(format!("/proc/{pid}/root/tmp/.java_pid{ns}"));
    let stream = match connect(id, &socket, owners, deadline) {
        Ok(stream) => stream,
        Err(e) if !no_listener(&e) => return Err(e),
        Err(_) => start_listener(id, (&socket, ns), owners, (deadline, limit))?,
    };
    let reply = jcmd_perfmap(stream, &socket, (deadline, limit))?;
    parse_reply(&reply)
}

/// No listener yet: has the JVM start one (SIGQUIT with the trigger file made in
/// its working directory or /tmp), then connects to it, by the deadline.
fn start_listener(
    id: &JvmId,
    (socket, ns): (&Path, u32),
    owners: &[u32],
    (deadline, limit): (Instant, Duration),
) -> Result<UnixStream, JvmError> {
    let pid = id.pid;
    if !catches_sigquit(pid) {
        return Err(JvmError::NoSigquitHandler);
    }
    if attach_disabled(pid) {
        return Err(JvmError::AttachDisabled);
    }
    // A JVM just launched gets its dispatcher within a moment: wait for it
    // (within the request's time limit) rather than ask again a gap later.
    loop {
        match sigquit_starts_listener(pid) {
            Err(JvmError::Starting) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            ready => break ready?,
        }
    }
    // The JVM's working directory and its /tmp (only if no link), held open
    // and checked to be the JVM's after they were opened: the trigger file
    // is made, and removed, in those directories whatever happens to the pid.
    let dirs: Vec<std::os::fd::OwnedFd> = [
        (format!("/proc/{pid}/cwd"), 0),
        (format!("/proc/{pid}/root/tmp"), libc::O_NOFOLLOW),
    ]
    .into_iter()
    .filter_map(|(path, flags)| {
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC | flags)
            .open(path)
            .ok()
            .map(Into::into)
    })
    .collect();
    if !id.is_jvm() {
        return Err(JvmError::Gone);
    }
    // A new file, never through a link: O_EXCL and O_NOFOLLOW.
    let name = format!(".attach_pid{ns}");
    let _trigger = TriggerFile(dirs.into_iter().find_map(|dir| {
        let path = PathBuf::from(format!(
            "/proc/thread-self/fd/{}/{name}",
            std::os::fd::AsRawFd::as_raw_fd(&dir)
        ));
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .ok()
            .map(|_| (dir, path))
    }));
    id.signal(libc::SIGQUIT)?;
    // The JVM replaces a stale socket with its listener's.
    loop {
        std::thread::sleep(Duration::from_millis(5));
        match connect(id, socket, owners, deadline) {
            Ok(stream) => return Ok(stream),
            Err(e) if !no_listener(&e) => return Err(e),
            Err(_) if Instant::now() >= deadline => {
                return Err(JvmError::NoListener(limit));
            }
            Err(_) => {}
        }
    }
}

/// Sends `Compiler.perfmap` on `stream` and reads the whole reply, by the deadline.
fn jcmd_perfmap(
    mut stream: UnixStream,
    socket: &Path,
    (deadline, limit): (Instant, Duration),
) -> Result<Vec<u8>, JvmError> {
    let io = |source| JvmError::Io {
        path: socket.to_owned(),
        source,
    };
    let abandoned = |e: &std::io::Error| {
        matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
            || Instant::now() >= deadline
    };
    let left = || deadline.saturating_duration_since(Instant::now());
    if left().is_zero() {
        return Err(JvmError::Abandoned(limit));
    }
    stream.set_write_timeout(Some(left())).map_err(io)?;
    // Protocol version 1: the version, the command and three arguments, each ended by NUL.
    stream
        .write_all(b"1\0jcmd\0Compiler.perfmap\0\0\0")
        .map_err(|e| {
            if abandoned(&e) {
                JvmError::Abandoned(limit)
            } else {
                io(e)
            }
        })?;
    // One deadline for the whole reply: a JVM that drips it is left at the limit.
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    while reply.len() < MAX_REPLY {
        let l = left();
        if l.is_zero() {
            return Err(JvmError::Abandoned(limit));
        }
        stream.set_read_timeout(Some(l)).map_err(io)?;
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => reply.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if abandoned(&e) => return Err(JvmError::Abandoned(limit)),
            Err(e) => return Err(io(e)),
        }
    }
    Ok(reply)
}

mod leftover;
mod requests;

pub(crate) use requests::{PerfMapRequests, read_map};

#[cfg(test)]
#[path = "jvm_tests.rs"]
mod tests;
