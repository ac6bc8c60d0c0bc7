//! Each exiting thread's own CPU time, from the kernel's taskstats exit messages
//! (docs/accounting.md, "What is left").
//!
//! Task-clock counts a thread's time from the end of the context switch that brings it
//! in to the start of the one that takes it out; the thread's own clock
//! (`sum_exec_runtime`, what CLOCK_THREAD_CPUTIME_ID reads) also has the switches
//! themselves, a few microseconds each. A thread that switches thousands of times is
//! off by milliseconds. While a thread lives its clock is in /proc; when it exits, the
//! kernel's taskstats interface sends its final account (`cpu_run_virtual_total` is
//! `sum_exec_runtime`) to every netlink socket registered for the CPU it exits on. The
//! recorder registers for every CPU before it attaches, and takes each thread's total
//! from that message when one comes.
//!
//! Registering needs CAP_NET_ADMIN and the initial network namespace; without them
//! (or on a kernel without CONFIG_TASKSTATS) [`ExitListener::open`] says why and the
//! totals come from the events' counts as before. Building and reading the messages is
//! pure, tested on fixtures; the socket is in `sys::netlink`.

use std::time::Duration;

use super::sys::{NetlinkSocket, Received};

/// One thread's final account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ThreadExit {
    pub tid: u32,
    /// Its process, when the kernel says (taskstats version 12, Linux 5.17, and later).
    pub tgid: Option<u32>,
    /// Its `sum_exec_runtime` at exit, nanoseconds: 0 for a thread that started and
    /// ended between two updates of its clock (a scheduler tick or a switch), which
    /// come after the exit report (or a kernel that leaves the field out).
    pub cpu_ns: u64,
    /// Its run-queue delay at exit (`sched_info.run_delay`, schedstat's second
    /// field), nanoseconds: `record --off-cpu` checks its runnable time against it.
    pub run_delay_ns: u64,
}

// Netlink and generic netlink constants (linux/netlink.h, linux/genetlink.h,
// linux/taskstats.h).
const NLMSG_HDRLEN: usize = 16;
const GENL_HDRLEN: usize = 4;
const NLA_HDRLEN: usize = 4;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const GENL_ID_CTRL: u16 = 16;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const TASKSTATS_CMD_GET: u8 = 1;
const TASKSTATS_CMD_ATTR_REGISTER_CPUMASK: u16 = 3;
const TASKSTATS_CMD_ATTR_DEREGISTER_CPUMASK: u16 = 4;
const TASKSTATS_TYPE_PID: u16 = 1;
const TASKSTATS_TYPE_STATS: u16 = 3;
const TASKSTATS_TYPE_AGGR_PID: u16 = 4;
/// The attribute type bits (the top two are flags).
const NLA_TYPE_MASK: u16 = 0x3fff;

// Offsets in `struct taskstats` (stable: fields are only ever appended).
const TS_VERSION: usize = 0;
const TS_CPU_DELAY_TOTAL: usize = 24;
const TS_CPU_RUN_VIRTUAL_TOTAL: usize = 72;
const TS_AC_PID: usize = 128;
const TS_AC_TGID: usize = 368;
/// The version that added `ac_tgid`.
const TS_VERSION_TGID: u16 = 12;

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// One netlink attribute: header, payload, padding.
fn attribute(kind: u16, payload: &[u8], out: &mut Vec<u8>) {
    let len = NLA_HDRLEN + payload.len();
    out.extend_from_slice(&(len as u16).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(payload);
    out.resize(out.len() + align4(len) - len, 0);
}

/// A generic netlink request: `cmd` to `family` with `attrs` (already encoded).
fn request(family: u16, cmd: u8, seq: u32, flags: u16, attrs: &[u8]) -> Vec<u8> {
    let len = NLMSG_HDRLEN + GENL_HDRLEN + attrs.len();
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&family.to_ne_bytes());
    m.extend_from_slice(&(NLM_F_REQUEST | flags).to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills ours in
    m.extend_from_slice(&[cmd, 1, 0, 0]); // genl header: command, version 1
    m.extend_from_slice(attrs);
    m
}

/// Asks the controller for the taskstats family's id.
pub(super) fn family_request(seq: u32) -> Vec<u8> {
    let mut attrs = Vec::new();
    attribute(CTRL_ATTR_FAMILY_NAME, b"TASKSTATS\0", &mut attrs);
    request(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, seq, 0, &attrs)
}

/// Registers (or deregisters) for the exits on the CPUs of `cpumask` (the kernel's
/// list format, "0-3,8").
pub(super) fn cpumask_request(family: u16, seq: u32, cpumask: &str, register: bool) -> Vec<u8> {
    let mut mask = cpumask.trim().as_bytes().to_vec();
    mask.push(0);
    let kind = if register {
        TASKSTATS_CMD_ATTR_REGISTER_CPUMASK
    } else {
        TASKSTATS_CMD_ATTR_DEREGISTER_CPUMASK
    };
    let mut attrs = Vec::new();
    attribute(kind, &mask, &mut attrs);
    request(family, TASKSTATS_CMD_GET, seq, NLM_F_ACK, &attrs)
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The messages of one datagram: (type, payload after the netlink header).
fn messages(datagram: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let len = u32_at(datagram, at)? as usize;
        let kind = u16_at(datagram, at + 4)?;
        if len < NLMSG_HDRLEN || at + len > datagram.len() {
            return None;
        }
        let payload = &datagram[at + NLMSG_HDRLEN..at + len];
        at += align4(len);
        Some((kind, payload))
    })
}

/// The attributes in `b`: (type, payload).
fn attributes(b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let len = u16_at(b, at)? as usize;
        let kind = u16_at(b, at + 2)? & NLA_TYPE_MASK;
        if len < NLA_HDRLEN || at + len > b.len() {
            return None;
        }
        let payload = &b[at + NLA_HDRLEN..at + len];
        at += align4(len);
        Some((kind, payload))
    })
}

/// What the kernel answered to a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reply {
    /// The id of the family asked for.
    Family(u16),
    /// Done.
    Ack,
    /// Refused with this errno.
    Refused(i32),
}

/// The answer to a request in `datagram`, if it holds one (exit messages can come
/// before the acknowledgement of a registration).
pub(super) fn parse_reply(datagram: &[u8]) -> Option<Reply> {
    for (kind, payload) in messages(datagram) {
        if kind == NLMSG_ERROR {
            let errno = u32_at(payload, 0).map_or(libc::EPROTO, |e| (e as i32).wrapping_neg());
            return Some(if errno == 0 {
                Reply::Ack
            } else {
                Reply::Refused(errno)
            });
        }
        if kind == GENL_ID_CTRL {
            let attrs = payload.get(GENL_HDRLEN..).unwrap_or_default();
            if let Some(id) = attributes(attrs)
                .find(|&(k, _)| k == CTRL_ATTR_FAMILY_ID)
                .and_then(|(_, v)| u16_at(v, 0))
            {
                return Some(Reply::Family(id));
            }
        }
    }
    None
}

/// The per-thread exits in a datagram of `family` (the per-process aggregates that
/// come with a process's last thread are not per-thread, and are skipped).
pub(super) fn parse_exits(family: u16, datagram: &[u8]) -> Vec<ThreadExit> {
    let mut out = Vec::new();
    for (kind, payload) in messages(datagram) {
        if kind != family {
            continue;
        }
        let attrs = payload.get(GENL_HDRLEN..).unwrap_or_default();
        for (k, aggregate) in attributes(attrs) {
            if k != TASKSTATS_TYPE_AGGR_PID {
                continue;
            }
            let mut tid = None;
            let mut stats = None;
            for (k, v) in attributes(aggregate) {
                match k {
                    TASKSTATS_TYPE_PID => tid = u32_at(v, 0),
                    TASKSTATS_TYPE_STATS => stats = Some(v),
                    _ => {}
                }
            }
            if let (Some(tid), Some(s)) = (tid, stats)
                && let Some(exit) = thread_exit(tid, s)
            {
                out.push(exit);
            }
        }
    }
    out
}

fn thread_exit(tid: u32, stats: &[u8]) -> Option<ThreadExit> {
    let version = u16_at(stats, TS_VERSION)?;
    let cpu_ns = u64_at(stats, TS_CPU_RUN_VIRTUAL_TOTAL)?;
    if u32_at(stats, TS_AC_PID)? != tid {
        // Not the thread the message names.
        return None;
    }
    let tgid = if version >= TS_VERSION_TGID {
        u32_at(stats, TS_AC_TGID)
    } else {
        None
    };
    // Filled with the clock (`__delayacct_add_tsk`), delay accounting on or off.
    let run_delay_ns = u64_at(stats, TS_CPU_DELAY_TOTAL)?;
    Some(ThreadExit {
        tid,
        tgid,
        cpu_ns,
        run_delay_ns,
    })
}

/// A registration for every exit on the machine's CPUs, given back on drop.
pub(super) struct ExitListener {
    sock: NetlinkSocket,
    family: u16,
    cpumask: String,
    buf: Vec<u8>,
    /// Times the kernel dropped messages because we read too late.
    pub overruns: u64,
}

/// Why the exits cannot be listened for.
#[derive(Debug, thiserror::Error)]
pub(super) enum ExitsError {
    #[error("cannot read the possible CPUs: {0}")]
    Cpus(std::io::Error),
    #[error("netlink: {0}")]
    Netlink(std::io::Error),
    /// The kernel refused a request, with this error.
    #[error("{0}")]
    Refused(std::io::Error),
    #[error("the kernel did not answer")]
    NoAnswer,
    #[error("no taskstats family (CONFIG_TASKSTATS)")]
    NoFamily,
}

impl ExitListener {
    /// Registers for the exits on every possible CPU, or says why it cannot.
    pub(super) fn open() -> Result<ExitListener, ExitsError> {
        let cpumask = std::fs::read_to_string("/sys/devices/system/cpu/possible")
            .map_err(ExitsError::Cpus)?;
        let sock = NetlinkSocket::open_generic().map_err(ExitsError::Netlink)?;
        let mut buf = vec![0u8; 64 << 10];
        let ask = |msg: Vec<u8>, buf: &mut Vec<u8>| -> Result<Reply, ExitsError> {
            sock.send(&msg).map_err(ExitsError::Netlink)?;
            let until = std::time::Instant::now() + Duration::from_secs(1);
            loop {
                let left = until.saturating_duration_since(std::time::Instant::now());
                match sock.recv_wait(buf, left) {
                    Ok(Received::Bytes(n)) => match parse_reply(&buf[..n]) {
                        Some(Reply::Refused(errno)) => {
                            return Err(ExitsError::Refused(std::io::Error::from_raw_os_error(
                                errno,
                            )));
                        }
                        Some(reply) => return Ok(reply),
                        None => {}
                    },
                    Ok(Received::Overrun) => {}
                    Ok(Received::Empty) => return Err(ExitsError::NoAnswer),
                    Err(e) => return Err(ExitsError::Netlink(e)),
                }
            }
        };
        let Reply::Family(family) = ask(family_request(1), &mut buf)? else {
            return Err(ExitsError::NoFamily);
        };
        ask(cpumask_request(family, 2, &cpumask, true), &mut buf)?;
        Ok(ExitListener {
            sock,
            family,
            cpumask,
            buf,
            overruns: 0,
        })
    }

    /// Every exit the kernel has queued so far.
    pub(super) fn drain(&mut self, mut each: impl FnMut(ThreadExit)) {
        // A bounded number of reads per call, so that a machine where processes exit
        // faster than we read cannot keep the recorder here.
        for _ in 0..10_000 {
            match self.sock.recv(&mut self.buf) {
                Ok(Received::Bytes(n)) => {
                    parse_exits(self.family, &self.buf[..n])
                        .into_iter()
                        .for_each(&mut each);
                }
                Ok(Received::Overrun) => self.overruns += 1,
                Ok(Received::Empty) | Err(_) => return,
            }
        }
    }
}

impl Drop for ExitListener {
    fn drop(&mut self) {
        // Closing the socket also ends the registration (the kernel drops a listener
        // whose socket is gone at its next send); saying so stops the sends at once.
        let _ = self
            .sock
            .send(&cpumask_request(self.family, 3, &self.cpumask, false));
    }
}

#[cfg(test)]
mod tests;
