//! The command the recorder launches: started suspended until its events are open,
//! waited for and ended. What `/proc` says about a process is `crate::process`'s.

use std::ffi::{CString, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStringExt;
use std::time::{Duration, Instant};

use super::sys;

/// A launched command held just before `execvp` until [`Launched::release`].
pub(crate) struct Launched {
    pub pid: u32,
    go: Option<File>,
    exec_error: File,
}

/// Why the command could not be started.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("empty command")]
    Empty,
    #[error("a command argument or environment variable contains a NUL byte")]
    Nul,
    #[error("cannot start a process: {0}")]
    Fork(io::Error),
    #[error("cannot run {command}")]
    Exec {
        command: String,
        #[source]
        source: io::Error,
    },
}

/// Forks a child that waits for [`Launched::release`] and then executes `argv`, with
/// our environment and the variables of `env` set on top of it.
pub(crate) fn launch_suspended(
    argv: &[String],
    run_as: Option<&super::RunAs>,
    env: &[(OsString, OsString)],
) -> Result<Launched, LaunchError> {
    if argv.is_empty() {
        return Err(LaunchError::Empty);
    }
    let cargs: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_bytes()).map_err(|_| LaunchError::Nul))
        .collect::<Result<_, _>>()?;
    let envp = if env.is_empty() {
        None
    } else {
        Some(environment(std::env::vars_os(), env)?)
    };
    let (go_r, go_w) = sys::pipe_cloexec().map_err(LaunchError::Fork)?;
    let (err_r, err_w) = sys::pipe_cloexec().map_err(LaunchError::Fork)?;
    let creds = run_as.map(|r| sys::Credentials {
        uid: r.uid,
        gid: r.gid,
        groups: sys::user_groups(&r.name, r.gid),
    });
    let pid = sys::fork_held_exec(&cargs, &go_r, &err_w, creds.as_ref(), envp.as_deref())
        .map_err(LaunchError::Fork)?;
    Ok(Launched {
        pid,
        go: Some(File::from(go_w)),
        exec_error: File::from(err_r),
    })
}

/// `NAME=VALUE` strings of `base` with the variables of `set` replacing or added to
/// them.
fn environment(
    base: impl Iterator<Item = (OsString, OsString)>,
    set: &[(OsString, OsString)],
) -> Result<Vec<CString>, LaunchError> {
    base.filter(|(k, _)| !set.iter().any(|(s, _)| s == k))
        .chain(set.iter().cloned())
        .map(|(k, v)| {
            let mut kv = k.into_vec();
            kv.push(b'=');
            kv.extend(v.into_vec());
            CString::new(kv).map_err(|_| LaunchError::Nul)
        })
        .collect()
}

impl Launched {
    /// Lets the child exec; returns the exec error if the command could not start.
    pub(crate) fn release(&mut self, command: &str) -> Result<(), LaunchError> {
        if let Some(mut go) = self.go.take() {
            // A failed write means the child is gone; the exec-error pipe says so below.
            let _ = go.write_all(&[1]);
        }
        // EOF means exec succeeded (the pipe is close-on-exec); 4 bytes are its errno.
        let mut errno = [0u8; 4];
        if self.exec_error.read_exact(&mut errno).is_ok() {
            return Err(LaunchError::Exec {
                command: command.to_owned(),
                source: io::Error::from_raw_os_error(i32::from_ne_bytes(errno)),
            });
        }
        Ok(())
    }
}

/// How a child ended, as a shell exit code (128 + signal for a signal).
pub(crate) fn wait_child(pid: u32, block: bool) -> Option<i32> {
    let status = sys::waitpid(pid, block)?;
    if libc::WIFEXITED(status) {
        Some(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        Some(128 + libc::WTERMSIG(status))
    } else {
        None
    }
}

pub(crate) use sys::kill;

/// Kills and reaps a launched child if setup fails before it was released.
pub(crate) struct KillOnError(pub Option<u32>);

impl Drop for KillOnError {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            kill(pid, libc::SIGKILL);
            wait_child(pid, true);
        }
    }
}

/// After recording stopped early, give a launched command a moment to finish on its
/// own (Ctrl-C reached it too), then ask it to terminate; returns its exit code.
pub(crate) fn finish_child(pid: u32) -> Option<i32> {
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        if let Some(code) = wait_child(pid, false) {
            return Some(code);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    kill(pid, libc::SIGTERM);
    wait_child(pid, true)
}
