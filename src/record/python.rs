//! Python frames in the recorder: the shared stage ([`crate::replay::python`]) reads a
//! sample's Python frames when the sample is handled, from the process as it is then;
//! the recorder's part is to handle samples soon after they were taken. The stage
//! reads through an opener its front end gives it: the one here opens a process as it
//! is now (the live recorder's and `dump`'s; perf.data checks first that the pid is
//! still the process recorded), so that the pure replay layer opens nothing itself.

use crate::interp::python;
use crate::process;
use crate::replay::python::CapturedChain;
use crate::running::python::exe_version;
use crate::sys;
use std::time::{Duration, Instant};

/// How long the recorder's loop sleeps at most while a Python process's samples are
/// read late ([`Pace`]): a sample's Python frames are read ahead as soon as it is
/// drained (see [`PythonFrames::read_ahead`](crate::replay::python::PythonFrames::read_ahead)), and the longer after the sample, the
/// more often the thread has left them (a recursion unwound). At 10 ms, 20% of the
/// samples of a 3.11 recursion 40 deep lost their callers on a loaded machine; at
/// 3 ms, 4% (docs/measurements/python.md). A CPython process's events also wake the
/// loop at each sample ([`runs_cpython`]): most samples are then read within 0.1 ms,
/// and this poll catches those whose wake-up came late (a loaded machine: with it,
/// 0.3% of frames marked where the wake-ups alone left 2 to 4%). Not under `-a`:
/// there the loop's 333 rounds a second were two thirds of a host agent's CPU (3.3%
/// of a core against 1.1%, beside a Python process at 19 Hz), and a sample waits for
/// the next round as any other (up to 100 ms, or the window's end).
pub(super) const POLL_MS: i32 = 3;

/// A Python sample read ahead this long after it was taken was read late: later
/// than the poll would have read it. The kernel delivers about 1.5% of the wake-ups
/// a tick late (up to 4 ms at 250 Hz, measured on a quiet machine): those the poll
/// cannot bring forward by much, so they do not count as late.
const LATE_NS: u64 = 5_000_000;

/// Samples looked at before the pace changes (about a second of one thread at 99 Hz).
const PACE_SAMPLES: u32 = 100;

/// Whether the loop polls every [`POLL_MS`] for the Python processes' samples: while
/// their wake-ups come late. On a quiet machine each sample's wake-up has it read
/// within 0.1 ms, and the poll's 333 rounds a second were a fifth of the recorder's
/// CPU for nothing. So the loop starts polling; after [`PACE_SAMPLES`] samples of
/// which at most 1% were read more than [`LATE_NS`] late, it stops; it polls again
/// as soon as 3 samples of the next [`PACE_SAMPLES`] are late, then for 5 s at least,
/// twice as long each time after (up to a minute), so that a busy machine does not
/// have it switch back and forth. Samples whose frames are read only when they are
/// handled (3.8 to 3.10: nothing is read ahead) keep it polling.
#[derive(Debug)]
pub(crate) struct Pace {
    polling: bool,
    samples: u32,
    late: u32,
    /// How long polling lasts at least, the next time it starts again.
    hold: Duration,
    /// Polling lasts at least until then.
    until: Option<Instant>,
}

impl Default for Pace {
    fn default() -> Self {
        Pace {
            polling: true,
            samples: 0,
            late: 0,
            hold: Duration::from_secs(5),
            until: None,
        }
    }
}

impl Pace {
    /// A Python sample taken at `time` was read ahead at `now` (the recording's clock).
    pub(crate) fn drained(&mut self, time: u64, now: u64) {
        self.samples += 1;
        if now.saturating_sub(time) > LATE_NS {
            self.late += 1;
        }
        if self.polling {
            if self.samples >= PACE_SAMPLES {
                let on_time = self.late * 100 <= self.samples;
                if on_time && self.until.is_none_or(|u| Instant::now() >= u) {
                    self.polling = false;
                }
                (self.samples, self.late) = (0, 0);
            }
        } else if self.late >= 3 {
            self.polling = true;
            self.until = Some(Instant::now() + self.hold);
            self.hold = (self.hold * 2).min(Duration::from_secs(60));
            (self.samples, self.late) = (0, 0);
        } else if self.samples >= PACE_SAMPLES {
            (self.samples, self.late) = (0, 0);
        }
    }

    /// A Python sample came with its chain copied at the sample instant: nothing of
    /// it is read late, so the loop stops polling at once rather than after
    /// [`PACE_SAMPLES`] (its first second polled 333 rounds for nothing, 2.5% of the
    /// recorder's CPU over ten seconds), unless samples read late hold it.
    pub(crate) fn captured(&mut self) {
        if self.polling && self.until.is_none_or(|u| Instant::now() >= u) {
            self.polling = false;
            (self.samples, self.late) = (0, 0);
        }
    }

    /// A Python sample was drained whose frames are read only when it is handled, a
    /// round later (3.8 to 3.10, or one whose chain moved during the read ahead): the
    /// round must come soon, so the loop polls, for 5 s at least.
    pub(crate) fn read_when_handled(&mut self) {
        if !self.polling {
            (self.samples, self.late) = (0, 0);
        }
        self.polling = true;
        self.until = Some(Instant::now() + Duration::from_secs(5));
    }

    /// The loop's longest sleep for the Python samples' sake, if any.
    pub(crate) fn poll_ms(&self) -> Option<i32> {
        self.polling.then_some(POLL_MS)
    }
}

/// Whether process `pid` runs CPython, by the names of its executable and mappings
/// (`python3.12`, `libpython3.11.so.1.0`): its sampling events then wake the recorder
/// at each sample, so that its Python frames are read within microseconds rather than
/// at the next round of the loop. A process that lies gets woken-for samples, no more.
pub(super) fn runs_cpython(pid: u32) -> bool {
    exe_version(pid).is_some()
        || process::read_maps(pid).is_ok_and(|maps| {
            maps.iter().any(|m| {
                m.path.contains("libpython") && python::module::version_from_name(&m.path).is_some()
            })
        })
}

/// Whether the command `program` (as given to `record --`, looked up in PATH when it
/// has no slash) is a CPython executable, by its name once links are resolved
/// (`python3` is a link to `python3.12`).
pub(super) fn command_runs_cpython(program: &str) -> bool {
    resolved(program)
        .and_then(|p| p.to_str().and_then(python::module::version_from_name))
        .is_some()
}

/// The file the command `program` runs: looked up in PATH when it has no slash, its
/// links resolved.
fn resolved(program: &str) -> Option<std::path::PathBuf> {
    let path = if program.contains('/') {
        Some(std::path::PathBuf::from(program))
    } else {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(program))
                .find(|p| p.is_file())
        })
    };
    path.and_then(|p| std::fs::canonicalize(p).ok())
}

/// Whether process `pid` runs CRuby (it maps a `libruby`): its Ruby frames are read
/// as its samples are drained (`RubyFrames::read_ahead`), so its sampling events wake
/// the recorder at each sample, BPF capture or not.
pub(super) fn runs_ruby(pid: u32) -> bool {
    process::read_maps(pid).is_ok_and(|maps| {
        (maps.iter()).any(|m| m.path.contains("libruby") && crate::interp::ruby::is_ruby(&m.path))
    })
}

/// Whether the command `program` (as given to `record --`) is a `ruby` executable by
/// its name once links are resolved (`ruby` is a link to `ruby3.1`).
pub(super) fn command_runs_ruby(program: &str) -> bool {
    let real = resolved(program);
    let file = real.as_ref().and_then(|p| p.file_name()?.to_str());
    file.is_some_and(|f| !f.contains(".so") && crate::interp::ruby::is_ruby(f))
}

/// The bytes copied of a frame: the BPF program's bound is the reader's.
const _: () = assert!(sys::COPY == python::COPIED);

/// Where the BPF program starts copying a thread's chain, as the reader says.
pub(crate) fn chain_entry(s: &python::ChainStart) -> sys::ChainEntry {
    sys::ChainEntry {
        tstate: s.tstate,
        first: s.first,
        second: s.second,
        previous: s.previous,
        skip: s.skip,
        len: s.len,
    }
}

/// A chain the BPF program copied, for the Python stage.
pub(crate) fn captured_chain(c: sys::CopiedChain) -> CapturedChain {
    CapturedChain {
        tid: c.tid,
        tstate: c.tstate,
        first: c.first,
        second: c.second,
        frames: c.frames,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_is_cpython_by_its_resolved_name() {
        let dir = std::env::temp_dir().join(format!("profile-cpython-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let real = dir.join("python3.12");
        std::fs::write(&real, b"").unwrap();
        let link = dir.join("python3");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let other = dir.join("python-tool");
        std::fs::write(&other, b"").unwrap();
        assert!(command_runs_cpython(link.to_str().unwrap()));
        assert!(command_runs_cpython(real.to_str().unwrap()));
        assert!(!command_runs_cpython(other.to_str().unwrap()));
        assert!(!command_runs_cpython(
            dir.join("python3.11").to_str().unwrap()
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_loop_polls_while_samples_are_read_late() {
        let mut p = Pace::default();
        assert_eq!(p.poll_ms(), Some(POLL_MS));
        // Read within 0.1 ms, but one in a hundred: polling stops.
        for i in 0..100u64 {
            let late = if i == 50 { 6_000_000 } else { 50_000 };
            p.drained(1_000_000_000, 1_000_000_000 + late);
        }
        assert_eq!(p.poll_ms(), None);
        // Two late samples are not enough; a third is.
        p.drained(0, 6_000_000);
        p.drained(0, 6_000_000);
        assert_eq!(p.poll_ms(), None);
        p.drained(0, 6_000_000);
        assert_eq!(p.poll_ms(), Some(POLL_MS));
        // On time again, but polling holds 5 s at least.
        for _ in 0..300 {
            p.drained(0, 0);
        }
        assert_eq!(p.poll_ms(), Some(POLL_MS));
        assert_eq!(p.hold, Duration::from_secs(10));
    }

    #[test]
    fn a_wake_up_a_tick_late_is_not_late() {
        let mut p = Pace::default();
        for i in 0..100u64 {
            let late = if i % 10 == 0 { 4_000_000 } else { 50_000 };
            p.drained(0, late);
        }
        assert_eq!(
            p.poll_ms(),
            None,
            "4 ms: a 250 Hz tick, not brought forward by polling"
        );
    }

    #[test]
    fn samples_read_when_handled_keep_the_poll() {
        let mut p = Pace::default();
        for _ in 0..100 {
            p.drained(0, 0);
        }
        assert_eq!(p.poll_ms(), None);
        p.read_when_handled();
        for _ in 0..300 {
            p.drained(0, 0);
        }
        assert_eq!(p.poll_ms(), Some(POLL_MS), "for 5 s at least");
    }

    #[test]
    fn a_sample_copied_at_its_instant_stops_the_poll_unless_held() {
        let mut p = Pace::default();
        p.captured();
        assert_eq!(p.poll_ms(), None);
        p.read_when_handled();
        p.captured();
        assert_eq!(p.poll_ms(), Some(POLL_MS), "held 5 s");
    }

    #[test]
    fn a_loaded_machine_keeps_the_poll() {
        let mut p = Pace::default();
        for i in 0..1000u64 {
            let late = if i % 20 == 0 { 6_000_000 } else { 0 };
            p.drained(0, late);
        }
        assert_eq!(p.poll_ms(), Some(POLL_MS));
    }

    #[test]
    fn this_test_is_no_cpython_process() {
        assert!(!runs_cpython(std::process::id()));
        assert!(!runs_cpython(u32::MAX));
    }
}
