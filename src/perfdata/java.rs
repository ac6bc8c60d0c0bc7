//! Java frames of a perf.data file, named from the JVM that was recorded while it still
//! runs: the same Java stage as the recorder's and `dump`'s ([`crate::replay::java`]),
//! reading the JVM's tables and code heap from its memory now. Only the JVM that was
//! recorded is read: the process with its pid must have started before the recording
//! began (its start time, against the recording's first sample, placed on the wall
//! clock from the file's time and the samples' span) and map `libjvm.so` where the
//! recording says it did. Anything else (it exited, its pid was reused, no
//! permission to read it) is said once per process, and its frames stay native.
//!
//! What is read now stands for the time of the samples only where nothing the JVM
//! freed since could have been reused: a JVM that never unloaded a class has freed no
//! method, so its interpreted frames and its methods inlined are named; one that did
//! keeps them `[java: unknown method]` (interpreted) or native (compiled), never named
//! after what its memory holds now.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::SystemTime;

use crate::format::Recording;
use crate::interp::jvm::JavaFrames;
use crate::replay::bind::LoadedModule;
pub(super) use crate::replay::java::{HeapCode, NO_MAP};
use crate::replay::runtimes::{self, RuntimeFrames};

/// The JVMs of one perf.data file.
pub(super) struct PerfJava {
    pub frames: JavaFrames,
    /// When the recording's first sample was taken, on the wall clock (at the latest).
    began: Option<SystemTime>,
    /// The file's owner: only its processes are read (any, for root's).
    owner_uid: u32,
    /// Processes whose `libjvm.so` mapping was looked at.
    seen: HashSet<u32>,
    pub notes: Vec<String>,
}

/// The time Java frames of a perf.data sample are read at: before every read, so only
/// a JVM that never unloaded a class vouches for them (see the module docs).
pub(super) const SAMPLE_TIME: u64 = 0;

impl PerfJava {
    /// For a recording whose first sample was taken at `began` (None: read no JVM),
    /// in a file owned by `owner_uid`.
    pub(super) fn new(began: Option<SystemTime>, owner_uid: u32) -> PerfJava {
        PerfJava {
            frames: JavaFrames::new(clock),
            began,
            owner_uid,
            seen: HashSet::new(),
            notes: Vec::new(),
        }
    }

    /// Process `pid` of the recording mapped `libjvm.so` (bound to `module`) at
    /// `start`, file offset `pgoff`: its Java frames are read if the process with that
    /// pid now is the one recorded.
    pub(super) fn mapped(
        &mut self,
        pid: u32,
        (start, pgoff): (u64, u64),
        module: Option<&(Arc<LoadedModule>, u64)>,
    ) {
        #[cfg(not(target_os = "linux"))]
        let _ = (pid, start, pgoff, module);
        #[cfg(target_os = "linux")]
        self.read(pid, (start, pgoff), module);
    }

    #[cfg(target_os = "linux")]
    fn read(
        &mut self,
        pid: u32,
        (start, pgoff): (u64, u64),
        module: Option<&(Arc<LoadedModule>, u64)>,
    ) {
        let Some(began) = self.began else {
            return;
        };
        if !self.seen.insert(pid) {
            return;
        }
        let Some((lm, bias)) = module else {
            return;
        };
        let why = match crate::sys::started_at(pid) {
            None => Some("it has exited"),
            Some(t) if t > began => Some("its pid now names a process started after the recording"),
            Some(_) if !maps_libjvm_at(pid, start, pgoff) => {
                Some("the process with its pid now maps libjvm.so elsewhere")
            }
            Some(_) if !super::readable_for(pid, self.owner_uid) => Some(super::OTHER_USER),
            Some(_) => None,
        };
        if let Some(why) = why {
            self.notes.push(format!(
                "Java frames of process {pid} not named: {why} (perf.data's Java frames are read from the JVM recorded, while it runs)"
            ));
            return;
        }
        let mem = || crate::sys::ProcessMemory::open(pid).map(|m| Box::new(m) as _);
        self.frames
            .jvm_mapped(pid, (*lm.image).as_ref(), *bias, mem);
        if !self.frames.wants(pid) {
            self.notes.push(format!(
                "Java frames of process {pid} not named: its memory cannot be read"
            ));
        }
    }

    /// Names the Java frames of `rec` (after its native frames were named), and adds
    /// what could not be read to `notes`.
    pub(super) fn name(&self, rec: &mut Recording, notes: &mut Vec<String>) {
        let stage: [&dyn RuntimeFrames; 1] = [&self.frames];
        for named in runtimes::names_from(&stage, &rec.frames, 0) {
            if let Some(slot) = rec.symbols.get_mut(named.frame as usize) {
                *slot = Some(named);
            }
        }
        notes.extend(self.notes.iter().cloned());
        notes.extend(runtimes::notes(&stage));
    }
}

/// The clock the JVMs' counts of unloaded classes are read against.
fn clock() -> u64 {
    #[cfg(target_os = "linux")]
    return crate::sys::monotonic_ns();
    #[cfg(not(target_os = "linux"))]
    0
}

/// Whether process `pid` maps `libjvm.so` executable at `start`, file offset `pgoff`.
#[cfg(target_os = "linux")]
fn maps_libjvm_at(pid: u32, start: u64, pgoff: u64) -> bool {
    let Ok(maps) = crate::process::read_maps(pid) else {
        return false;
    };
    maps.iter().any(|m| {
        m.executable
            && m.start == start
            && m.offset == pgoff
            && crate::profile::vm_threads::is_libjvm(&m.path)
    })
}
