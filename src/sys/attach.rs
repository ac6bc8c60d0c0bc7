//! The system calls that make sure a JVM's handshake reaches that JVM and nothing
//! else: signalling through a pidfd (it names one process, never the next one to get
//! its pid), connecting a Unix socket through a descriptor of the inode that was
//! checked (`O_PATH`, never a path a link could be swapped into), with a time limit on
//! the connect itself, and reading who listens at the other end (`SO_PEERCRED`).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use super::PidFd;

impl PidFd {
    /// Sends `signal` to the process this pidfd names; fails with ESRCH once it has
    /// exited (even if its pid was given to another process since).
    pub(crate) fn send_signal(&self, signal: i32) -> io::Result<()> {
        // SAFETY: pidfd_send_signal with a valid pidfd, no siginfo and no flags.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.raw(),
                signal,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Whether the process has exited (its pidfd is readable), without waiting.
    pub(crate) fn exited(&self) -> bool {
        let mut pfd = libc::pollfd {
            fd: self.raw(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, no wait.
        let rc = unsafe { libc::poll(&mut pfd, 1, 0) };
        rc > 0 && pfd.revents != 0
    }
}

/// Connects a stream socket to the socket inode `path_fd` holds (a descriptor opened
/// with `O_PATH`), through `/proc/thread-self/fd/N`: what is connected is the checked
/// inode, whatever its path says now. `timeout` bounds the connect (a listener whose
/// queue is full would block it for ever) and then every send and receive.
pub(crate) fn connect_unix_fd(path_fd: &OwnedFd, timeout: Duration) -> io::Result<UnixStream> {
    let path = format!("/proc/thread-self/fd/{}", path_fd.as_raw_fd());
    // SAFETY: socket with constant arguments returns a new descriptor or -1.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor owned by nobody else.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let stream = UnixStream::from(sock);
    let timeout = timeout.max(Duration::from_millis(1));
    // SO_SNDTIMEO bounds connect() on a Unix socket too.
    stream.set_write_timeout(Some(timeout))?;
    stream.set_read_timeout(Some(timeout))?;
    // SAFETY: sockaddr_un is plain data; zeroed is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_bytes();
    if bytes.len() >= addr.sun_path.len() {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    for (d, &s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = s as libc::c_char;
    }
    let len = (std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1) as libc::socklen_t;
    // SAFETY: addr is a valid sockaddr_un of `len` bytes; the socket is ours.
    let rc = unsafe {
        libc::connect(
            stream.as_raw_fd(),
            (&addr as *const libc::sockaddr_un).cast(),
            len,
        )
    };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            // A timed-out connect says EAGAIN.
            Some(libc::EAGAIN) | Some(libc::EINPROGRESS) => {
                io::Error::from(io::ErrorKind::TimedOut)
            }
            _ => e,
        });
    }
    Ok(stream)
}

/// Who listens at the other end of a connected Unix socket: the pid (in our PID
/// namespace) and the uid of the process that called `listen`.
pub(crate) fn peer_cred(stream: &UnixStream) -> io::Result<(u32, u32)> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt with a ucred-sized buffer and its length.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((cred.pid.max(0) as u32, cred.uid))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::fs::OpenOptionsExt;

    /// The socket reached is the inode the descriptor holds, even after its path was
    /// renamed away; the peer is this process.
    #[test]
    fn connects_through_the_checked_inode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let fd: OwnedFd = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_NOFOLLOW)
            .open(&path)
            .unwrap()
            .into();
        std::fs::rename(&path, dir.path().join("moved")).unwrap();
        let mut client = connect_unix_fd(&fd, Duration::from_secs(2)).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        client.write_all(b"x").unwrap();
        let mut b = [0u8; 1];
        server.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"x");
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        assert_eq!(peer_cred(&client).unwrap(), (std::process::id(), uid));
    }

    /// A pidfd signals its own process only, and knows when it is gone.
    #[test]
    fn a_pidfd_signals_only_its_process() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let fd = PidFd::open(child.id() as i32).unwrap();
        assert!(!fd.exited());
        fd.send_signal(0).unwrap();
        fd.send_signal(libc::SIGKILL).unwrap();
        child.wait().unwrap();
        assert!(fd.exited());
        let e = fd.send_signal(libc::SIGQUIT).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ESRCH));
    }
}
