//! Python frames in the recorder: for a sample whose native stack runs CPython's eval
//! loop, the Python functions each eval frame was running, read from the process right
//! after the sample (its stack copy as it was at the sample instant, the rest of its
//! memory as it is now) and put in place of the eval frames, so a stack reads native →
//! Python → C extension → native. Names are given once per distinct (function, file,
//! line) and written with the recording's symbols at the end; the summary says how
//! many frames could not be validated, and why a Python process gave none.

use std::collections::HashMap;
use std::sync::Arc;

use super::modules::LoadedModule;
use super::sys::ProcessMemory;
use crate::format::{Frame, FrameKind, FrameSymbols, Mapping, SymbolLine, SymbolSource};
use crate::interp::python::{self, CHANGED, CHANGED_NAME, PythonModule, PythonProcess};
use crate::interp::{Overlay, Pages};

/// How long the recorder's loop sleeps at most while a Python process is recorded:
/// a sample's Python frames are read when it is handled, and the longer after the
/// sample, the more often the thread has moved on (a loop round handles the records of
/// the round before).
pub(super) const POLL_MS: i32 = 10;

/// One process's Python state.
enum State {
    /// Read: its memory (a page cache cleared at each sample) and what was found.
    Ready(Box<(Pages<ProcessMemory>, PythonProcess)>),
    /// A CPython process whose frames cannot be read, and why.
    Failed(String),
}

/// Python frames of every recorded process.
#[derive(Default)]
pub(super) struct PythonFrames {
    /// What each loaded module is, by its address (None: not CPython).
    modules: HashMap<*const LoadedModule, Option<Arc<PythonModule>>>,
    procs: HashMap<u32, State>,
    /// Scratch: the index of each eval frame in a sample's frames.
    evals: Vec<usize>,
    /// Scratch: where each eval frame's C frame ends in the stack copy.
    ends: Vec<u64>,
    /// Samples in an eval loop that came without a stack copy (frame-pointer mode).
    without_stack: u64,
}

impl PythonFrames {
    /// Whether a process with readable Python frames is recorded.
    pub(super) fn any(&self) -> bool {
        self.procs.values().any(|s| matches!(s, State::Ready(_)))
    }

    /// Replaces each native eval-loop frame of `frames` (a sample of `pid`/`tid`,
    /// leaf first, with the stack copy `stack` taken at `sp` and the callee-saved
    /// registers `regs`; `cut`: the native stack was cut) by the Python frames
    /// it was running. `modules` and `mappings` are the recording's, by mapping id.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn merge(
        &mut self,
        pid: u32,
        tid: u32,
        sp: u64,
        stack: &[u8],
        regs: &[u64],
        cut: bool,
        frames: &mut Vec<Frame>,
        modules: &[Option<(Arc<LoadedModule>, u64)>],
        mappings: &[Mapping],
    ) {
        self.evals.clear();
        let mut python: Option<(Arc<PythonModule>, u64)> = None;
        for (i, f) in frames.iter().enumerate() {
            if !f.kind.is_user() {
                continue;
            }
            let Some(m) = f.mapping else { continue };
            let Some(Some((lm, bias))) = modules.get(m as usize) else {
                continue;
            };
            let known = self.modules.entry(Arc::as_ptr(lm)).or_insert_with(|| {
                let path = mappings.get(m as usize).map_or("", |m| m.path.as_str());
                PythonModule::from_elf(lm.image.as_ref().as_ref(), path).map(Arc::new)
            });
            if let Some(pm) = known
                && pm.in_eval(f.kind.lookup_address(f.addr).wrapping_sub(*bias))
            {
                self.evals.push(i);
                python.get_or_insert_with(|| (Arc::clone(pm), *bias));
            }
        }
        let Some((module, bias)) = python else {
            return;
        };
        if stack.is_empty() {
            // Frame-pointer mode: nothing of the sample could confirm a frame read.
            self.without_stack += 1;
            return;
        }
        let state = self
            .procs
            .entry(pid)
            .or_insert_with(|| open(pid, &module, bias));
        let State::Ready(ready) = state else {
            return;
        };
        let (pages, process) = &mut **ready;
        pages.clear();
        let mem = Overlay {
            sp,
            stack,
            rest: &*pages,
        };
        eval_frame_ends(sp, stack, frames, &self.evals, &mut self.ends);
        let at = python::SampleInstant {
            sp,
            stack,
            regs,
            ends: &self.ends,
            cut,
        };
        // `live`: the process as it is now, past the page cache this sample filled.
        let live = pages.inner();
        let Ok(segments) = process.frames(&mem, live, tid, &at, self.evals.len()) else {
            return;
        };
        // Rebuilt in place: each eval frame becomes its segment, leaf first.
        let mut out =
            Vec::with_capacity(frames.len() + segments.iter().map(Vec::len).sum::<usize>());
        let mut next = 0;
        for (seg, &at) in segments.iter().zip(&self.evals) {
            out.extend_from_slice(&frames[next..at]);
            out.extend(seg.iter().map(|&id| Frame {
                kind: FrameKind::Interpreted,
                pid,
                addr: id,
                mapping: None,
            }));
            next = at + 1;
        }
        out.extend_from_slice(&frames[next..]);
        *frames = out;
    }

    /// Process `pid` exited and its last window is cut: its reader (an open
    /// `/proc/PID/mem`) and what was read of it go.
    pub(super) fn forget(&mut self, pid: u32) {
        self.procs.remove(&pid);
    }

    /// Names for the Python frames among `frames` (the recording's, by frame id).
    pub(super) fn symbols(&self, frames: &[Frame]) -> Vec<FrameSymbols> {
        self.symbols_from(frames, 0)
    }

    /// Names for the Python frames among `frames` from id `first` on.
    pub(super) fn symbols_from(&self, frames: &[Frame], first: usize) -> Vec<FrameSymbols> {
        let mut out = Vec::new();
        for (id, f) in frames.iter().enumerate().skip(first) {
            if f.kind != FrameKind::Interpreted {
                continue;
            }
            let Some(State::Ready(ready)) = self.procs.get(&f.pid) else {
                continue;
            };
            let line = if f.addr == CHANGED {
                SymbolLine {
                    function: CHANGED_NAME.to_owned(),
                    file: None,
                    line: None,
                    inlined: false,
                }
            } else {
                let Some(name) = ready.1.name(f.addr) else {
                    continue;
                };
                SymbolLine {
                    function: name.function.clone(),
                    file: Some(name.file.clone()),
                    line: name.line,
                    inlined: false,
                }
            };
            out.push(FrameSymbols {
                frame: id as u32,
                source: SymbolSource::Python,
                lines: vec![line],
            });
        }
        out
    }

    /// For the summary: each Python process's share of frames that could not be
    /// validated, and why a CPython process gave no Python frame.
    pub(super) fn notes(&self) -> Vec<String> {
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
        for pid in pids {
            match &self.procs[pid] {
                State::Failed(why) => out.push(format!(
                    "process {pid} runs CPython but its Python frames could not be read: \
                     {why}; its samples show the interpreter's own functions (on Python \
                     3.12+, starting it with -X perf names them)"
                )),
                State::Ready(ready) => {
                    let c = ready.1.counts;
                    let all = c.named + c.changed;
                    if all == 0 {
                        out.push(format!(
                            "process {pid} runs CPython {}.{} but no Python frame of it \
                             could be read ({} samples in its eval loop on threads with \
                             no Python thread state)",
                            ready.1.runtime.layout.version.0,
                            ready.1.runtime.layout.version.1,
                            c.no_thread
                        ));
                    } else {
                        let pct = |n: u64, of: u64| n as f64 * 100.0 / of.max(1) as f64;
                        out.push(format!(
                            "Python frames of process {pid} (CPython {}.{}): {} read in {} \
                             samples; {} frames ({:.2}%) in {} samples ({:.2}%) could not be \
                             validated and show as {CHANGED_NAME} ({} running functions the \
                             sample did not confirm; {} running functions found from the \
                             sample itself though the thread had moved on)",
                            ready.1.runtime.layout.version.0,
                            ready.1.runtime.layout.version.1,
                            all,
                            c.samples,
                            c.changed,
                            pct(c.changed, all),
                            c.samples_changed,
                            pct(c.samples_changed, c.samples),
                            c.unconfirmed,
                            c.replaced
                        ));
                    }
                }
            }
        }
        out
    }
}

/// Where the C frame of each eval frame (`evals`: indices in `frames`, leaf first)
/// ends in the stack copy: the slot holding its return address (the next frame's
/// address), searched upwards from where the one inside it ended; u64::MAX when not
/// found (the copy ends first).
fn eval_frame_ends(sp: u64, stack: &[u8], frames: &[Frame], evals: &[usize], out: &mut Vec<u64>) {
    out.clear();
    let mut from = 0usize;
    for &i in evals {
        let ret = frames
            .get(i + 1)
            .filter(|f| f.kind == FrameKind::Return)
            .map(|f| f.addr);
        let slot = ret.and_then(|ret| {
            stack
                .get(from..)?
                .chunks_exact(8)
                .position(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()) == ret)
        });
        match slot {
            Some(n) => {
                from += 8 * n + 8;
                out.push(sp + from as u64 - 8);
            }
            None => {
                from = stack.len();
                out.push(u64::MAX);
            }
        }
    }
}

/// The Python state of `pid`, whose eval loop is in `module` mapped with `bias`.
fn open(pid: u32, module: &PythonModule, bias: u64) -> State {
    let Some(mem) = ProcessMemory::open(pid) else {
        return State::Failed("the process is gone".into());
    };
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    let exe_version = exe
        .as_deref()
        .and_then(|p| p.to_str())
        .and_then(python::module::version_from_name);
    // A first read tells whether its memory can be read at all.
    match python::runtime(&mem, module, bias, exe_version) {
        Ok(rt) if crate::interp::Memory::u64_at(&mem, rt.runtime).is_none() => {
            State::Failed(format!(
                "its memory cannot be read ({})",
                std::io::Error::last_os_error()
            ))
        }
        Ok(rt) => State::Ready(Box::new((Pages::new(mem), PythonProcess::new(rt)))),
        Err(e) => State::Failed(e.to_string()),
    }
}
