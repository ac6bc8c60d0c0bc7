//! The Python stage's opener of a running process: its memory as it is now, and the
//! CPython version its executable's name says. The stage ([`crate::replay::python`])
//! reads through an opener its front end gives it, so that the pure replay layer opens
//! nothing itself; this one is the live recorder's and `dump`'s (perf.data checks
//! first that the pid is still the process recorded, then opens it here).

use crate::format::Mapping;
use crate::interp::python;
use crate::replay::python::{PythonFrames, Refused};
use crate::sys::ProcessMemory;

/// The CPython version the name of process `pid`'s executable says (`python3.12`).
pub(crate) fn exe_version(pid: u32) -> Option<(u8, u8)> {
    let exe = crate::process::exe_path(pid)?;
    python::module::version_from_name(exe.to_str()?)
}

/// The Python stage reading each process as it is now.
pub(crate) type LivePython = PythonFrames<ProcessMemory>;

/// Opens `pid` as it is now: the opener of the live recorder and of `dump`.
pub(crate) fn open_live(
    pid: u32,
    _time: u64,
    _module: &Mapping,
) -> Result<(ProcessMemory, Option<(u8, u8)>), Refused> {
    let Some(mem) = ProcessMemory::open(pid) else {
        return Err(Refused::Failed("the process is gone".into()));
    };
    Ok((mem, exe_version(pid)))
}

impl Default for PythonFrames<ProcessMemory> {
    /// Reading each process as it is now ([`open_live`]).
    fn default() -> Self {
        PythonFrames::new(Box::new(open_live))
    }
}
