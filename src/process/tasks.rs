//! What `/proc` says about processes and their threads: which exist (`/proc`,
//! `/proc/PID/task`), their names, parents, states and flags (`stat`, `comm`), the
//! process a thread belongs to (`status`) and its command line. Names are any bytes
//! their process chose: they are read with non-UTF-8 bytes replaced.

use std::io;

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

/// The path of process `pid`'s executable, as its own mount namespace names it.
pub(crate) fn exe_path(pid: u32) -> Option<std::path::PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/exe")).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_threads_and_name() {
        let me = std::process::id();
        assert_eq!(tgid_of(me).unwrap(), me);
        assert_eq!(tgids(&[me, me], |_| ()), Ok(vec![me]));
        assert_eq!(tgids(&[me, u32::MAX], |id| id), Err(u32::MAX));
        assert!(list_tids(me).unwrap().contains(&me));
        assert!(thread_name(me, me).is_some());
        assert_eq!(live_proc(me), me);
        assert!(!is_kernel_thread(me));
        assert!(all_pids().contains(&me));
    }
}
