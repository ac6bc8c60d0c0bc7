//! Files reached one path component at a time from a directory descriptor, never
//! through a symbolic link (`openat` with `O_NOFOLLOW`, `mkdirat`, `renameat`,
//! `unlinkat`): for a directory that root uses but that another user may have chosen
//! (debuginfod's cache under a `HOME` that `sudo -E` kept).

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};

fn c_name(name: &str) -> io::Result<CString> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{name}` is not one path component"),
        ));
    }
    CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in a name"))
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Opens the root directory, the start of a walk.
pub(crate) fn open_root() -> io::Result<File> {
    let path = c"/";
    // SAFETY: a valid NUL-terminated path; the returned descriptor is owned by File.
    let fd = check(unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: fd was just opened and is owned by nobody else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Opens `name` in `dir` with `flags` (plus `O_NOFOLLOW | O_CLOEXEC`) and `mode` for a
/// file it creates. A link as `name` fails with `ELOOP` (or `ENOTDIR` with
/// `O_DIRECTORY`).
pub(crate) fn open_at(dir: &File, name: &str, flags: libc::c_int, mode: u32) -> io::Result<File> {
    let name = c_name(name)?;
    // SAFETY: dir is an open descriptor, name a valid C string; the returned
    // descriptor is owned by File.
    let fd = check(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    })?;
    // SAFETY: fd was just opened and is owned by nobody else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Opens the directory `name` in `dir`, not through a link.
pub(crate) fn open_dir_at(dir: &File, name: &str) -> io::Result<File> {
    open_at(dir, name, libc::O_RDONLY | libc::O_DIRECTORY, 0)
}

/// Creates the directory `name` in `dir` with `mode`.
pub(crate) fn mkdir_at(dir: &File, name: &str, mode: u32) -> io::Result<()> {
    let name = c_name(name)?;
    // SAFETY: dir is an open descriptor, name a valid C string.
    check(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode as libc::mode_t) })?;
    Ok(())
}

/// Renames `from` to `to`, both in `dir` (an existing `to`, link or not, is replaced,
/// never followed).
pub(crate) fn rename_at(dir: &File, from: &str, to: &str) -> io::Result<()> {
    let (from, to) = (c_name(from)?, c_name(to)?);
    // SAFETY: dir is an open descriptor, both names valid C strings.
    check(unsafe { libc::renameat(dir.as_raw_fd(), from.as_ptr(), dir.as_raw_fd(), to.as_ptr()) })?;
    Ok(())
}

/// Removes the file `name` from `dir` (a link itself, never what it points to).
pub(crate) fn unlink_at(dir: &File, name: &str) -> io::Result<()> {
    let name = c_name(name)?;
    // SAFETY: dir is an open descriptor, name a valid C string.
    check(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) })?;
    Ok(())
}

/// Removes the empty directory `name` in `dir`.
pub(crate) fn rmdir_at(dir: &File, name: &str) -> io::Result<()> {
    let name = c_name(name)?;
    // SAFETY: dir is an open descriptor, name a valid C string.
    check(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), libc::AT_REMOVEDIR) })?;
    Ok(())
}

/// The type (`f_type`, a magic number of `linux/magic.h`) of the file system `dir`
/// is on.
pub(crate) fn fs_type(dir: &File) -> io::Result<i64> {
    // SAFETY: statfs is plain data; all-zero is a valid value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: dir is an open descriptor and st a writable statfs.
    check(unsafe { libc::fstatfs(dir.as_raw_fd(), &mut st) })?;
    Ok(st.f_type as i64)
}

/// The effective user id.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}
