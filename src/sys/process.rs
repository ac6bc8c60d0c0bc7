//! Process-level system calls: launching a command held before `execvp`, waiting for
//! and signalling it, pidfds, poll, the open-file limit, the monotonic clock.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Bytes in a memory page.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as usize } else { 4096 }
}

/// Whether this process runs with effective uid 0.
pub(crate) fn is_root() -> bool {
    euid() == 0
}

/// This process's effective uid.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// A pipe whose both ends are closed on exec: (read end, write end).
pub(crate) fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds is a two-element array as pipe2 requires.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors are fresh and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Who a launched command runs as, when not as `profile` itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Credentials {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
}

/// The groups of user `name` whose primary group is `gid` (from the group database),
/// or just `gid` when the user is unknown there.
pub(crate) fn user_groups(name: &str, gid: u32) -> Vec<u32> {
    let Ok(cname) = CString::new(name) else {
        return vec![gid];
    };
    let mut n: libc::c_int = 64;
    loop {
        let mut groups: Vec<libc::gid_t> = vec![0; n as usize];
        let asked = n;
        // SAFETY: `groups` holds `n` entries; getgrouplist writes at most that many
        // and sets `n` to the number it needs.
        let rc = unsafe { libc::getgrouplist(cname.as_ptr(), gid, groups.as_mut_ptr(), &mut n) };
        if rc >= 0 {
            groups.truncate(n.max(0) as usize);
            return groups;
        }
        if n <= asked || n > 65536 {
            return vec![gid];
        }
    }
}

/// Forks a child that blocks reading one byte from `go`, then executes `argv` (looked
/// up in PATH). If the read gets no byte (the parent gave up) the child exits 127
/// without running anything; if exec fails, the child writes its errno (4 bytes,
/// native endian) to `exec_error` and exits 127. Returns the child's pid. Both
/// descriptors should be close-on-exec so that a successful exec closes them.
///
/// With `creds`, the child takes those groups, gid and uid (in that order) after the go
/// byte and before exec; a failure is reported like an exec failure. With `env`
/// (`NAME=VALUE` strings), the command gets that environment instead of ours.
pub(crate) fn fork_held_exec(
    argv: &[CString],
    go: &OwnedFd,
    exec_error: &OwnedFd,
    creds: Option<&Credentials>,
    env: Option<&[CString]>,
) -> io::Result<u32> {
    if argv.is_empty() {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    let envp: Option<Vec<*const libc::c_char>> = env.map(|e| {
        e.iter()
            .map(|c| c.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect()
    });
    let groups: Vec<libc::gid_t> = creds.map(|c| c.groups.clone()).unwrap_or_default();
    let ids = creds.map(|c| (c.uid, c.gid));
    // Everything the child touches is prepared before the fork.
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|c| c.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    let (go, exec_error) = (go.as_raw_fd(), exec_error.as_raw_fd());
    // SAFETY: after fork the child only calls async-signal-safe functions (read,
    // setgroups, setgid, setuid, execvp or execvpe, write, _exit) on memory prepared before the
    // fork, and never returns.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: see above; the child leaves through execvp or _exit.
        unsafe {
            let mut byte = 0u8;
            if libc::read(go, (&mut byte as *mut u8).cast(), 1) != 1 {
                libc::_exit(127);
            }
            if let Some((uid, gid)) = ids
                && (libc::setgroups(groups.len(), groups.as_ptr()) != 0
                    || libc::setgid(gid) != 0
                    || libc::setuid(uid) != 0)
            {
                let errno = *libc::__errno_location();
                libc::write(exec_error, (&errno as *const i32).cast(), 4);
                libc::_exit(127);
            }
            match &envp {
                Some(envp) => libc::execvpe(ptrs[0], ptrs.as_ptr(), envp.as_ptr()),
                None => libc::execvp(ptrs[0], ptrs.as_ptr()),
            };
            let errno = *libc::__errno_location();
            libc::write(exec_error, (&errno as *const i32).cast(), 4);
            libc::_exit(127);
        }
    }
    Ok(pid as u32)
}

/// Waits for our child `pid` (without blocking unless `block`); returns its raw wait
/// status, or None if it has not changed state or is not our child.
pub(crate) fn waitpid(pid: u32, block: bool) -> Option<i32> {
    let mut status = 0;
    let flags = if block { 0 } else { libc::WNOHANG };
    // SAFETY: waitpid with a valid status pointer.
    let rc = unsafe { libc::waitpid(pid as i32, &mut status, flags) };
    (rc == pid as i32).then_some(status)
}

/// Sends `signal` to process `pid`; errors (it is already gone) are ignored.
pub(crate) fn kill(pid: u32, signal: i32) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe {
        libc::kill(pid as i32, signal);
    }
}

/// A pidfd: becomes readable when the process exits. Works for non-children too.
pub(crate) struct PidFd(OwnedFd);

impl PidFd {
    pub(crate) fn open(pid: i32) -> io::Result<PidFd> {
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor owned by no one else.
        Ok(PidFd(unsafe { OwnedFd::from_raw_fd(fd as RawFd) }))
    }

    pub(crate) fn raw(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// Waits until one of `fds` is readable or `timeout_ms` passes; returns which are ready.
/// An interrupting signal returns early with none ready.
pub(crate) fn poll_readable(
    fds: &[RawFd],
    timeout_ms: i32,
    ready: &mut Vec<bool>,
) -> io::Result<()> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: pfds is a valid array of pollfd for its length.
    let rc = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, timeout_ms) };
    ready.clear();
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            ready.resize(fds.len(), false);
            return Ok(());
        }
        return Err(e);
    }
    ready.extend(
        pfds.iter()
            .map(|p| p.revents & (libc::POLLIN | libc::POLLHUP) != 0),
    );
    Ok(())
}

/// Raises the soft open-file limit to the hard limit; returns the new soft limit.
pub(crate) fn raise_fd_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: lim is a valid rlimit to fill and then to set.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        if lim.rlim_cur < lim.rlim_max {
            let want = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                lim = want;
            }
        }
    }
    lim.rlim_cur
}

/// Hands the allocator's free memory back to the system (after a long recording
/// dropped large buffers, which glibc would otherwise keep for later).
pub(crate) fn release_free_memory() {
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Serves every allocation of 1 MiB or more with a mapping of its own, given back
/// when freed. Without it glibc raises its threshold to the largest block freed so
/// far (up to 32 MiB), and a module image (the file's length of zeroed memory, of
/// which only the tables are read: see `elf::read_module`) then comes from the heap,
/// where zeroing it touches every page: a host agent reading 18 MB files held 18 MB
/// for each instead of the 4 MB of tables read.
pub(crate) fn map_large_allocations() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets the allocator's parameters.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

/// `clock` now, in nanoseconds.
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC now, in nanoseconds: the clock sample times use.
pub(crate) fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// The calling thread's CPU time, in nanoseconds (CLOCK_THREAD_CPUTIME_ID): what the
/// runtime readers' per-sample CPU budget is measured in.
pub(crate) fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// This thread running as another user: its effective uid and gid, and its supplementary
/// groups, switched by raw system calls, which change the calling thread's credentials
/// only (glibc's wrappers would switch every thread of the process). The real and saved
/// ids stay root's, so dropping the guard switches back.
pub(crate) struct ThreadAsUser {
    gid: libc::gid_t,
    groups: Vec<libc::gid_t>,
}

impl ThreadAsUser {
    /// Switches to `uid`/`gid` if this thread runs as root and `uid` is another user;
    /// None when it does not or cannot (then nothing changed).
    pub(crate) fn enter(uid: u32, gid: u32) -> Option<ThreadAsUser> {
        // SAFETY: geteuid and getegid have no preconditions.
        let (euid, egid) = unsafe { (libc::geteuid(), libc::getegid()) };
        if euid != 0 || uid == 0 {
            return None;
        }
        let mut groups: Vec<libc::gid_t> = vec![0; 65536];
        // SAFETY: `groups` holds as many entries as the size passed.
        let n = unsafe { libc::getgroups(groups.len() as i32, groups.as_mut_ptr()) };
        if n < 0 {
            return None;
        }
        groups.truncate(n as usize);
        let keep = -1 as libc::c_long;
        let gids = [gid];
        // SAFETY: raw setgroups/setresgid/setresuid with valid arguments; they change
        // only this thread's credentials, which `Drop` restores.
        unsafe {
            if libc::syscall(libc::SYS_setgroups, 1 as libc::c_long, gids.as_ptr()) != 0 {
                return None;
            }
            let guard = ThreadAsUser { gid: egid, groups };
            if libc::syscall(libc::SYS_setresgid, keep, gid as libc::c_long, keep) != 0
                || libc::syscall(libc::SYS_setresuid, keep, uid as libc::c_long, keep) != 0
            {
                // Dropping the guard puts back what changed.
                return None;
            }
            Some(guard)
        }
    }
}

impl Drop for ThreadAsUser {
    fn drop(&mut self) {
        let keep = -1 as libc::c_long;
        // SAFETY: as in `enter`; root's uid first, since only root may set the groups.
        unsafe {
            libc::syscall(libc::SYS_setresuid, keep, 0 as libc::c_long, keep);
            libc::syscall(libc::SYS_setresgid, keep, self.gid as libc::c_long, keep);
            libc::syscall(
                libc::SYS_setgroups,
                self.groups.len() as libc::c_long,
                self.groups.as_ptr(),
            );
        }
    }
}

/// What descriptor `fd` (a terminal) holds now, without waiting (at most 4 KiB); None
/// when it hung up: a read returned end of file, or failed with EIO, or poll said
/// POLLHUP with nothing to read.
pub(crate) fn read_available(fd: RawFd) -> io::Result<Option<Vec<u8>>> {
    let mut out = Vec::new();
    while out.len() < 4096 {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, 0) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if rc == 0 {
            break;
        }
        if pfd.revents & libc::POLLIN == 0 {
            // POLLHUP, POLLERR or POLLNVAL, and nothing to read.
            return Ok(None);
        }
        let mut buf = [0u8; 512];
        // SAFETY: buf is valid for its length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n == 0 {
            return Ok(None);
        }
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => break,
                Some(libc::EIO) => return Ok(None),
                _ => return Err(e),
            }
        }
        out.extend_from_slice(&buf[..n as usize]);
    }
    Ok(Some(out))
}

/// Mounts tracefs at `dir` (as perf does where nothing is mounted there).
pub(crate) fn mount_tracefs(dir: &str) -> io::Result<()> {
    let dir = std::ffi::CString::new(dir).map_err(|_| io::Error::from_raw_os_error(22))?;
    // SAFETY: NUL-terminated strings and no data; mount(2) only reads them.
    let rc = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            dir.as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A terminal's bytes as they come, then None once it hangs up (a read on it then
    /// returns EIO or nothing, forever).
    #[test]
    fn a_terminal_read_until_it_hangs_up() {
        let (mut master, mut slave) = (0, 0);
        // SAFETY: openpty with valid out-pointers and no name, termios or size.
        let rc = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        assert_eq!(rc, 0, "{}", io::Error::last_os_error());
        // Other tests start processes meanwhile: a child forked before these are
        // close-on-exec holds the master open until it execs, and the hang-up comes
        // only then.
        for fd in [master, slave] {
            // SAFETY: our own descriptors.
            unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        }
        assert_eq!(read_available(slave).unwrap(), Some(Vec::new()));
        // SAFETY: writing 2 bytes from a valid buffer.
        unsafe {
            assert_eq!(libc::write(master, b"q\n".as_ptr().cast(), 2), 2);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        let got = read_available(slave).unwrap().unwrap();
        assert!(got.starts_with(b"q"), "{got:?}");
        // SAFETY: our own descriptor, closed once.
        unsafe {
            libc::close(master);
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            match read_available(slave).unwrap() {
                None => break,
                Some(more) => assert!(more.is_empty(), "{more:?}"),
            }
            assert!(std::time::Instant::now() < deadline, "no hang-up");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        // SAFETY: as above.
        unsafe {
            libc::close(slave);
        }
    }

    /// Only the calling thread changes user, and it comes back.
    #[test]
    fn a_thread_runs_as_another_user_and_back() {
        // SAFETY: geteuid has no preconditions.
        let euid = || unsafe { libc::geteuid() };
        if euid() != 0 {
            assert!(ThreadAsUser::enter(65534, 65534).is_none());
            return;
        }
        std::thread::scope(|s| {
            let (tx, rx) = std::sync::mpsc::channel();
            let (back_tx, back_rx) = std::sync::mpsc::channel::<()>();
            let t = s.spawn(move || {
                let guard = ThreadAsUser::enter(65534, 65534).expect("switch");
                // SAFETY: getegid has no preconditions.
                tx.send((euid(), unsafe { libc::getegid() })).unwrap();
                back_rx.recv().unwrap();
                drop(guard);
                euid()
            });
            assert_eq!(rx.recv().unwrap(), (65534, 65534));
            // The other threads are still root meanwhile.
            assert_eq!(euid(), 0);
            back_tx.send(()).unwrap();
            assert_eq!(t.join().unwrap(), 0);
        });
        assert!(ThreadAsUser::enter(0, 0).is_none());
    }
}
