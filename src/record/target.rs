//! The process being profiled: launching a command suspended until its events are
//! open, finding an attached process's threads, and reading what `/proc` says about
//! them (maps, names, CPUs). Parsers are pure functions so they are tested on text.

use std::ffi::{CString, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStringExt;
use std::time::{Duration, Instant};

use super::sys;

/// One line of `/proc/PID/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MapsEntry {
    pub start: u64,
    pub end: u64,
    pub executable: bool,
    pub offset: u64,
    /// Path, `[vdso]`-style pseudo name, or empty for anonymous memory.
    pub path: String,
}

/// Parses the text of `/proc/PID/maps`; malformed lines are skipped.
pub(crate) fn parse_maps(text: &str) -> Vec<MapsEntry> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.splitn(6, ' ');
            let (range, perms, offset) = (f.next()?, f.next()?, f.next()?);
            let (_dev, _inode) = (f.next()?, f.next()?);
            let path = f.next().unwrap_or("").trim_start().to_owned();
            let (a, b) = range.split_once('-')?;
            Some(MapsEntry {
                start: u64::from_str_radix(a, 16).ok()?,
                end: u64::from_str_radix(b, 16).ok()?,
                executable: perms.as_bytes().get(2) == Some(&b'x'),
                offset: u64::from_str_radix(offset, 16).ok()?,
                path,
            })
        })
        .collect()
}

/// Parses a CPU list such as `0-3,5,7-8` (sysfs `online`).
pub(crate) fn parse_cpu_list(text: &str) -> Vec<u32> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    cpus.extend(a..=b);
                }
            }
            None => cpus.extend(part.parse::<u32>().ok()),
        }
    }
    cpus
}

/// The CPUs that are online now.
pub(crate) fn online_cpus() -> Vec<u32> {
    let cpus = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .map(|t| parse_cpu_list(&t))
        .unwrap_or_default();
    if cpus.is_empty() {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        (0..n).collect()
    } else {
        cpus
    }
}

/// The thread ids of a process, from `/proc/PID/task`.
pub(crate) fn list_tids(pid: u32) -> io::Result<Vec<u32>> {
    let mut tids: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    Ok(tids)
}

/// Every process on the machine now (the numeric entries of /proc), in order.
pub(crate) fn all_pids() -> Vec<u32> {
    let mut pids: Vec<u32> = std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    pids.sort_unstable();
    pids
}

/// A `/proc` text file read whole, bytes that are not UTF-8 replaced: thread names
/// (in `comm` and `stat`) are any bytes their process chose, and a name cut at 15
/// bytes may end inside a character.
pub(crate) fn read_proc_text(path: impl AsRef<std::path::Path>) -> io::Result<String> {
    std::fs::read(path).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// The processes descended from `roots` (children, theirs, ...), running now, in pid
/// order, `roots` left out; with each one's name. Read from every process's
/// `/proc/PID/stat` (parent pid), which needs no kernel option.
pub(crate) fn descendants(roots: &[u32]) -> Vec<(u32, String)> {
    let mut children: std::collections::HashMap<u32, Vec<u32>> = Default::default();
    for pid in all_pids() {
        if let Some(ppid) = parent(pid) {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut found = Vec::new();
    let mut todo: Vec<u32> = roots.to_vec();
    let mut seen: std::collections::HashSet<u32> = roots.iter().copied().collect();
    while let Some(p) = todo.pop() {
        for &c in children.get(&p).map(Vec::as_slice).unwrap_or_default() {
            if seen.insert(c) {
                found.push(c);
                todo.push(c);
            }
        }
    }
    found.sort_unstable();
    found
        .into_iter()
        .map(|p| (p, thread_name(p, p).unwrap_or_default()))
        .collect()
}

/// The parent of process `pid`, from its `/proc/PID/stat`, if it still exists.
pub(crate) fn parent(pid: u32) -> Option<u32> {
    let stat = read_proc_text(format!("/proc/{pid}/stat")).ok()?;
    // `PID (comm) S PPID ...`: the name may hold spaces and parentheses.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The scheduler state letter of a thread (`R`, `S`, `Z`, ...), if it exists.
fn state(pid: u32, tid: u32) -> Option<char> {
    let stat = read_proc_text(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    stat.get(stat.rfind(')')? + 2..)?.chars().next()
}

/// The pid under which `/proc` shows the process `pid`'s memory and root: `pid`
/// itself, or a live thread when the main thread has exited (a zombie leader, whose
/// own `/proc/PID/maps` is empty and `/proc/PID/root` unreadable).
pub(crate) fn live_proc(pid: u32) -> u32 {
    if state(pid, pid) != Some('Z') {
        return pid;
    }
    list_tids(pid)
        .unwrap_or_default()
        .into_iter()
        .find(|&t| t != pid && state(pid, t).is_some_and(|s| s != 'Z'))
        .unwrap_or(pid)
}

/// Whether `pid` is a kernel thread (no user space: only kernel stacks, and only while
/// it runs). From the `PF_KTHREAD` flag of /proc/PID/stat.
pub(crate) fn is_kernel_thread(pid: u32) -> bool {
    const PF_KTHREAD: u64 = 0x0020_0000;
    let Ok(stat) = read_proc_text(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let Some(after) = stat.rfind(')').and_then(|i| stat.get(i + 2..)) else {
        return false;
    };
    // Fields after the name: state ppid pgrp session tty_nr tpgid flags.
    after
        .split_whitespace()
        .nth(6)
        .and_then(|f| f.parse::<u64>().ok())
        .is_some_and(|flags| flags & PF_KTHREAD != 0)
}

/// The name (comm) of a thread, if it still exists.
pub(crate) fn thread_name(pid: u32, tid: u32) -> Option<String> {
    let s = read_proc_text(format!("/proc/{pid}/task/{tid}/comm")).ok()?;
    Some(s.trim_end_matches('\n').to_owned())
}

/// The process (thread group) a pid or tid belongs to.
pub(crate) fn tgid_of(pid: u32) -> io::Result<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| io::Error::other(format!("/proc/{pid}/status has no Tgid line")))
}

/// The processes that `ids` (pids or tids) belong to, each once, in the order given;
/// `missing` makes the error for an id that names nothing.
pub(crate) fn tgids<E>(ids: &[u32], missing: impl Fn(u32) -> E) -> Result<Vec<u32>, E> {
    let mut pids = Vec::new();
    for &id in ids {
        let tgid = tgid_of(id).map_err(|_| missing(id))?;
        if !pids.contains(&tgid) {
            pids.push(tgid);
        }
    }
    Ok(pids)
}

/// The command line of a process, as its argv.
pub(crate) fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines() {
        let text = "\
55d0c7a00000-55d0c7a01000 r--p 00000000 fe:01 1234                       /usr/bin/my prog
55d0c7a01000-55d0c7a02000 r-xp 00001000 fe:01 1234                       /usr/bin/my prog
7ffd1a3fe000-7ffd1a400000 r-xp 00000000 00:00 0                          [vdso]
7f0000000000-7f0000001000 rwxp 00000000 00:00 0 
garbage line
";
        let m = parse_maps(text);
        assert_eq!(m.len(), 4);
        assert_eq!(m[1].path, "/usr/bin/my prog");
        assert!(m[1].executable && !m[0].executable);
        assert_eq!(m[1].offset, 0x1000);
        assert_eq!(m[2].path, "[vdso]");
        assert_eq!(m[3].path, "");
        assert!(m[3].executable);
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,5,7-8\n"), [0, 1, 2, 3, 5, 7, 8]);
        assert_eq!(parse_cpu_list("0"), [0]);
        assert!(parse_cpu_list("").is_empty());
    }

    #[test]
    fn own_threads_and_name() {
        let me = std::process::id();
        assert_eq!(tgid_of(me).unwrap(), me);
        assert_eq!(tgids(&[me, me], |_| ()), Ok(vec![me]));
        assert_eq!(tgids(&[me, u32::MAX], |id| id), Err(u32::MAX));
        assert!(list_tids(me).unwrap().contains(&me));
        assert!(thread_name(me, me).is_some());
    }
}
