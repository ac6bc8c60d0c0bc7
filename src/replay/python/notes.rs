//! What the summary says of the Python stage: each process's share of frames that
//! could not be validated (and why, with `PROFILE_DEBUG_PYTHON`), the budgets that
//! held its reader, why a CPython process gave no Python frame, and the chains copied
//! at the sample instant.

use super::{PythonFrames, Refused, State, debug};
use crate::interp::Memory;
use crate::interp::python::{CHANGED_NAME, PythonProcess};

impl<M: Memory> PythonFrames<M> {
    /// For the summary: each Python process's share of frames that could not be
    /// validated, and why a CPython process gave no Python frame.
    pub(crate) fn notes(&self) -> Vec<String> {
        let mut pids: Vec<&u32> = self.procs.keys().collect();
        pids.sort();
        let mut out = Vec::new();
        if self.without_stack > 0 {
            out.push(format!(
                "{} samples ran CPython's eval loop but had no stack copy: Python frames \
                 are read only with --call-graph dwarf (the default)",
                self.without_stack
            ));
        }
        let samples = (self.procs.values())
            .map(|s| match s {
                State::Ready(r) => r.1.counts.samples,
                State::Failed(_) => 0,
            })
            .sum();
        out.extend(self.capture_note(samples));
        let l = self.ahead_late;
        if debug() && l.iter().any(|&n| n > 0) {
            out.push(format!(
                "Python samples read ahead (PROFILE_DEBUG_PYTHON): {} within 0.1 ms of \
                 the sample, {} within 1 ms, {} within 3 ms, {} within 10 ms, {} later; \
                 {} caught mid-call each time",
                l[0], l[1], l[2], l[3], l[4], l[5]
            ));
        }
        let mut not_recorded = Vec::new();
        for pid in pids {
            match &self.procs[pid] {
                State::Failed(Refused::NotTheRecorded(why)) => {
                    not_recorded.push(format!("{pid} ({why})"));
                }
                State::Failed(Refused::Failed(why)) => out.push(format!(
                    "process {pid} runs CPython but its Python frames could not be read: \
                     {why}; its samples show the interpreter's own functions (on Python \
                     3.12+, starting it with -X perf names them)"
                )),
                State::Ready(ready) => out.extend(process_notes(*pid, &ready.1)),
            }
        }
        if !not_recorded.is_empty() {
            out.push(format!(
                "Python frames are read from the processes recorded while they run; not \
                 read for {} of them, no longer the process recorded: {}",
                not_recorded.len(),
                not_recorded.join(", ")
            ));
        }
        out
    }
}

/// What the summary says of one Python process read: the budgets that held its
/// reader, and its share of frames that could not be validated (with
/// `PROFILE_DEBUG_PYTHON`, why), or why none could be read.
fn process_notes(pid: u32, p: &PythonProcess) -> Vec<String> {
    let mut out = Vec::new();
    let trips = p.trips.describe(p.budgets());
    if !trips.is_empty() {
        out.push(format!(
            "process {pid}'s Python reader kept within its budgets \
             (docs/security.md): {}",
            trips.join("; ")
        ));
    }
    let c = p.counts;
    let all = c.named + c.changed;
    let (major, minor) = p.runtime.layout.version;
    if all == 0 && c.no_thread == 0 {
        // No sample ran Python code (an idle pre-fork master): nothing to say.
        return out;
    }
    if all == 0 {
        out.push(format!(
            "process {pid} runs CPython {major}.{minor} but no Python frame of it \
             could be read ({} samples in its eval loop on threads with \
             no Python thread state)",
            c.no_thread
        ));
        return out;
    }
    if debug() {
        let m = c.marked;
        out.push(format!(
            "Marked Python frames of {pid} by cause (PROFILE_DEBUG_PYTHON): {} chains \
             not one segment per eval call, {} running functions not held \
             by the sample, {} held ambiguously, {} callers left since, {} \
             under a function found from the sample, {} other; {} confirmed beside \
             pointers into other code",
            m.chain, m.leaf_unheld, m.leaf_ambiguous, m.callers, m.after_other, m.other, m.mixed
        ));
    }
    let pct = |n: u64, of: u64| n as f64 * 100.0 / of.max(1) as f64;
    out.push(format!(
        "Python frames of process {pid} (CPython {major}.{minor}): {} read in {} \
         samples; {} frames ({:.2}%) in {} samples ({:.2}%) could not be \
         validated and show as {CHANGED_NAME} ({} running functions the \
         sample did not confirm; {} running functions found from the \
         sample itself though the thread had moved on)",
        all,
        c.samples,
        c.changed,
        pct(c.changed, all),
        c.samples_changed,
        pct(c.samples_changed, c.samples),
        c.unconfirmed,
        c.replaced
    ));
    out
}
