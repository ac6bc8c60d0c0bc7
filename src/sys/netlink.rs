//! A generic netlink socket to the kernel: what the taskstats exit listener
//! (`record::taskstats`) sends and receives through. Messages are built and read by
//! safe code there; this file only moves bytes.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// How much the kernel may queue for us between two reads. Exits of every process on
/// the machine arrive here (some 600 bytes each); the recorder reads every 100 ms.
const RECEIVE_BUFFER: libc::c_int = 8 << 20;

/// A non-blocking `NETLINK_GENERIC` socket, closed on drop.
#[derive(Debug)]
pub(crate) struct NetlinkSocket(OwnedFd);

/// What one non-blocking read got.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Received {
    /// A datagram of this many bytes.
    Bytes(usize),
    /// Nothing queued.
    Empty,
    /// The kernel dropped messages because the receive buffer was full.
    Overrun,
}

impl NetlinkSocket {
    /// Opens and binds a generic netlink socket with a large receive buffer.
    pub(crate) fn open_generic() -> io::Result<NetlinkSocket> {
        // SAFETY: socket has no memory preconditions.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                libc::NETLINK_GENERIC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor owned by nobody else.
        let sock = NetlinkSocket(unsafe { OwnedFd::from_raw_fd(fd) });
        // SAFETY: an all-zero sockaddr_nl is valid; the kernel assigns the port id.
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: addr is a sockaddr_nl of the size passed.
        let rc = unsafe {
            libc::bind(
                sock.0.as_raw_fd(),
                (&addr as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // As root the buffer can exceed rmem_max; otherwise take what is allowed.
        if sock.set_int(libc::SO_RCVBUFFORCE, RECEIVE_BUFFER).is_err() {
            let _ = sock.set_int(libc::SO_RCVBUF, RECEIVE_BUFFER);
        }
        Ok(sock)
    }

    fn set_int(&self, option: libc::c_int, value: libc::c_int) -> io::Result<()> {
        // SAFETY: value is a c_int of the size passed.
        let rc = unsafe {
            libc::setsockopt(
                self.0.as_raw_fd(),
                libc::SOL_SOCKET,
                option,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Sends one message to the kernel.
    pub(crate) fn send(&self, msg: &[u8]) -> io::Result<()> {
        // SAFETY: msg is a valid buffer of its length.
        let rc = unsafe { libc::send(self.0.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Reads one datagram into `buf` without waiting.
    pub(crate) fn recv(&self, buf: &mut [u8]) -> io::Result<Received> {
        loop {
            // SAFETY: buf is a valid, writable buffer of its length.
            let rc = unsafe {
                libc::recv(
                    self.0.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if rc >= 0 {
                return Ok(Received::Bytes(rc as usize));
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => return Ok(Received::Empty),
                Some(libc::ENOBUFS) => return Ok(Received::Overrun),
                _ => return Err(e),
            }
        }
    }

    /// Reads one datagram into `buf`, waiting at most `timeout` for it (for the
    /// kernel's replies to requests, which come at once).
    pub(crate) fn recv_wait(&self, buf: &mut [u8], timeout: Duration) -> io::Result<Received> {
        let until = Instant::now() + timeout;
        loop {
            match self.recv(buf)? {
                Received::Empty => {}
                other => return Ok(other),
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Received::Empty);
            }
            let mut ready = Vec::new();
            super::poll_readable(
                &[self.0.as_raw_fd()],
                left.as_millis() as i32 + 1,
                &mut ready,
            )?;
        }
    }
}
