//! The `bpf(2)` commands the recorder uses, each with its part of `union bpf_attr`
//! as a struct of named fields: creating a map, updating and deleting one of its
//! elements, loading a perf-event program, and attaching a program to a perf event.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use perf_event_open_sys as sys;

use super::asm::Insn;
use crate::sys::perf::EventFd;

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_TYPE_PERF_EVENT: u32 = 7;

/// The kinds of map the programs use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MapKind {
    Hash = 1,
    PerfEventArray = 4,
    PercpuArray = 6,
}

/// `BPF_MAP_CREATE`'s fields.
#[repr(C)]
#[derive(Clone, Copy)]
struct MapCreate {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
}

/// `BPF_MAP_*_ELEM`'s fields (`flags` 0: BPF_ANY).
#[repr(C)]
#[derive(Clone, Copy)]
struct MapElem {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// `BPF_PROG_LOAD`'s fields, as far as the recorder sets them.
#[repr(C)]
#[derive(Clone, Copy)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
}

/// `union bpf_attr` at the size the recorder passes: the kernel requires the bytes it
/// does not know to be zero, which `zero` makes them (the structs have no padding of
/// their own, so writing one leaves no byte undefined).
#[repr(C, align(8))]
union Attr {
    map_create: MapCreate,
    map_elem: MapElem,
    prog_load: ProgLoad,
    zero: [u64; 16],
}

impl Attr {
    fn zeroed() -> Attr {
        Attr { zero: [0; 16] }
    }
}

fn bpf_call(cmd: libc::c_long, attr: &mut Attr) -> io::Result<libc::c_long> {
    // SAFETY: attr is a zero-padded `union bpf_attr` of the size passed, laid out for
    // `cmd`; every pointer in it points at memory that outlives the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut Attr,
            std::mem::size_of::<Attr>(),
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn owned(fd: libc::c_long) -> OwnedFd {
    // SAFETY: a descriptor the kernel just returned, owned by nothing else.
    unsafe { OwnedFd::from_raw_fd(fd as i32) }
}

/// Creates a map of `kind` with keys and values of the sizes given.
pub(crate) fn create_map(kind: MapKind, key: u32, value: u32, entries: u32) -> io::Result<OwnedFd> {
    let mut a = Attr::zeroed();
    a.map_create = MapCreate {
        map_type: kind as u32,
        key_size: key,
        value_size: value,
        max_entries: entries,
    };
    bpf_call(BPF_MAP_CREATE, &mut a).map(owned)
}

fn elem(cmd: libc::c_long, map: &OwnedFd, key: &[u8], value: Option<&[u8]>) -> io::Result<()> {
    let mut a = Attr::zeroed();
    a.map_elem = MapElem {
        map_fd: map.as_raw_fd() as u32,
        _pad: 0,
        key: key.as_ptr() as u64,
        value: value.map_or(0, |v| v.as_ptr() as u64),
        flags: 0,
    };
    bpf_call(cmd, &mut a).map(drop)
}

/// Sets the value of `key` in `map` (both as the map's sizes say).
pub(crate) fn update(map: &OwnedFd, key: &[u8], value: &[u8]) -> io::Result<()> {
    elem(BPF_MAP_UPDATE_ELEM, map, key, Some(value))
}

/// Deletes `key` from `map`.
pub(crate) fn delete(map: &OwnedFd, key: &[u8]) -> io::Result<()> {
    elem(BPF_MAP_DELETE_ELEM, map, key, None)
}

/// Loads a perf-event program; `gpl`: it calls the kernel's GPL-only helpers (reading
/// user memory, writing records), and that part is offered under the GPL too. A
/// refusal says the verifier's last lines.
pub(crate) fn load(insns: &[Insn], gpl: bool) -> io::Result<OwnedFd> {
    let license = if gpl {
        c"Dual MIT/GPL"
    } else {
        c"MIT OR Apache-2.0"
    };
    let attempt = |log: &mut [u8]| {
        let mut a = Attr::zeroed();
        a.prog_load = ProgLoad {
            prog_type: BPF_PROG_TYPE_PERF_EVENT,
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: license.as_ptr() as u64,
            log_level: u32::from(!log.is_empty()),
            log_size: log.len() as u32,
            log_buf: if log.is_empty() {
                0
            } else {
                log.as_mut_ptr() as u64
            },
        };
        bpf_call(BPF_PROG_LOAD, &mut a)
    };
    match attempt(&mut []) {
        Ok(fd) => Ok(owned(fd)),
        Err(e) if !gpl => Err(e),
        Err(e) => {
            let mut log = vec![0u8; 1 << 16];
            let _ = attempt(&mut log);
            let text = String::from_utf8_lossy(&log);
            let tail: Vec<&str> = text.trim_end_matches('\0').lines().rev().take(3).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            Err(io::Error::other(format!("{e} ({})", tail.join(" / "))))
        }
    }
}

/// Runs `prog` at every sample of `event` (and of the copies the kernel inherits from
/// it afterwards).
pub(crate) fn set_bpf(event: &EventFd, prog: &OwnedFd) -> io::Result<()> {
    // SAFETY: an open perf event descriptor and a BPF program descriptor (the ioctl
    // takes the descriptor as its value).
    let rc = unsafe {
        libc::ioctl(
            event.raw(),
            sys::bindings::SET_BPF as _,
            prog.as_raw_fd() as libc::c_ulong,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_attributes_lie_where_the_kernel_reads_them() {
        use std::mem::{offset_of, size_of};
        assert_eq!(size_of::<Attr>(), 128);
        assert_eq!(offset_of!(MapElem, key), 8);
        assert_eq!(offset_of!(MapElem, value), 16);
        assert_eq!(offset_of!(MapElem, flags), 24);
        assert_eq!(offset_of!(ProgLoad, insns), 8);
        assert_eq!(offset_of!(ProgLoad, license), 16);
        assert_eq!(offset_of!(ProgLoad, log_level), 24);
        assert_eq!(offset_of!(ProgLoad, log_buf), 32);
    }
}
