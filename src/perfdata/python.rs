//! Python frames in perf.data files recorded with `--call-graph dwarf`: each sample's
//! registers and stack copy go through the recorder's own Python stage
//! ([`crate::replay::python`]), which reads the rest from the process, so only a
//! process still running, and still the one recorded, is read. A pid names the
//! recorded process when (1) the process now under it started before the recording
//! saw it (its start on the wall clock, against the sample's time placed on the wall
//! clock by the file's modification time, which perf sets when the recording ends),
//! and (2) it maps the CPython module at the same address, offset and path as
//! recorded (address-space randomization puts it elsewhere in another process).
//! Any other process is not read, nor one of another user than the file's owner
//! (unless root owns it): its samples keep the interpreter's own frames, and the
//! report says so once for all such processes.

use crate::format::Mapping;
use crate::process;
use crate::replay::python::{PythonFrames, Refused};
use crate::running::python::open_live;
use crate::sys::ProcessMemory;

/// How much earlier than the recording a process must have started, at least, to be
/// the one recorded: the file's time places samples a little late (perf writes its
/// tables after the last sample), never early, and a process's start is known to a
/// clock tick.
const SLACK_NS: u64 = 1_000_000_000;

/// The Python stage of a recording written at `written_unix_ns` whose last record is
/// at `last_time` (perf's clock), by a file owned by `owner_uid`.
pub(super) fn stage(
    written_unix_ns: u64,
    last_time: u64,
    owner_uid: u32,
) -> PythonFrames<ProcessMemory> {
    PythonFrames::new(Box::new(move |pid, time, module| {
        recorded(pid, time, module, written_unix_ns, last_time)?;
        if !super::readable_for(pid, owner_uid) {
            return Err(Refused::Failed(super::OTHER_USER.into()));
        }
        open_live(pid, time, module).map_err(|e| match e {
            Refused::Failed(_) => Refused::NotTheRecorded("it has exited".into()),
            e => e,
        })
    }))
}

/// Ok when `pid` is still the process whose sample at `time` ran the CPython mapped
/// as `module`; else why not.
fn recorded(
    pid: u32,
    time: u64,
    module: &Mapping,
    written_unix_ns: u64,
    last_time: u64,
) -> Result<(), Refused> {
    let gone = |why: &str| Refused::NotTheRecorded(why.to_owned());
    let started = crate::sys::started_at(pid).ok_or_else(|| gone("it has exited"))?;
    let started_ns = started
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    let sampled_ns = written_unix_ns.saturating_sub(last_time.saturating_sub(time));
    if started_ns > sampled_ns.saturating_add(SLACK_NS) {
        return Err(gone(
            "its pid is now another process's, started after the recording",
        ));
    }
    let maps = process::read_maps(pid).map_err(|_| gone("it has exited"))?;
    let same = maps.iter().any(|m| {
        m.executable
            && m.start == module.start
            && m.offset == module.file_offset
            && m.path == module.path
    });
    if !same {
        return Err(gone(
            "its pid is now another process's, or it ran another program since (CPython is not mapped where it was)",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This test process's first executable mapping, as a recording would have it.
    fn own_mapping() -> Mapping {
        let pid = std::process::id();
        let m = (process::read_maps(pid).unwrap())
            .into_iter()
            .find(|m| m.executable && m.path.starts_with('/'))
            .unwrap();
        Mapping {
            pid,
            start: m.start,
            end: m.end,
            file_offset: m.offset,
            path: m.path,
            build_id: None,
            time: 0,
        }
    }

    fn now_ns() -> u64 {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        d.as_nanos() as u64
    }

    #[test]
    fn a_pid_is_the_recorded_process_only_with_its_mapping_and_start() {
        let pid = std::process::id();
        let m = own_mapping();
        // Sampled now (the last record), written now: this process.
        assert_eq!(recorded(pid, 100, &m, now_ns(), 100), Ok(()));
        // The mapping elsewhere: another process (or another program) at this pid.
        let moved = Mapping {
            start: m.start + 0x1000_0000,
            ..m.clone()
        };
        assert!(matches!(
            recorded(pid, 100, &moved, now_ns(), 100),
            Err(Refused::NotTheRecorded(_))
        ));
        // Sampled an hour before this process started: a process that reused its pid.
        let hour = 3_600_000_000_000;
        assert!(matches!(
            recorded(pid, 100, &m, now_ns() - hour, 100),
            Err(Refused::NotTheRecorded(why)) if why.contains("started after")
        ));
        // A sample a second before the last record of a file written now.
        assert_eq!(
            recorded(pid, 5_000_000_000, &m, now_ns(), 6_000_000_000),
            Ok(())
        );
    }
}
