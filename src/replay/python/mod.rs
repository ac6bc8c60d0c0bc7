//! One Python stage for every road in: for a sample (or a dumped thread) whose native
//! stack runs CPython's eval loop, the Python functions each eval frame was running,
//! read from the process (its stack copy as it was at the sample instant, the rest of
//! its memory as it is now) and put in place of the eval frames, so a stack reads
//! native → Python → C extension → native. The recorder, the perf.data reader and
//! `dump` all call [`PythonFrames::merge`] after [`super::stack::StackBuilder`] has
//! built the native frames; only how a process is opened differs ([`Opener`]: the
//! live recorder and `dump` open the process they look at, the perf.data reader only
//! a process that is still the one recorded). Names are given once per distinct
//! (function, file, line) and written like any other frame's; [`PythonFrames::notes`]
//! says how many frames could not be validated, and why a Python process gave none.
//!
//! It lives here, not in [`crate::interp::python`], because it works in the
//! recording's terms (frames, mappings, modules bound to them) that the interpreter
//! readers know nothing of; those stay pure readers of a [`Memory`].

use std::collections::HashMap;
use std::sync::Arc;

use super::bind::LoadedModule;
use super::bound::Bound;
use super::decode;
use crate::format::{Frame, FrameKind, FrameSymbols, Mapping, SymbolLine, SymbolSource};
use crate::interp::budget::{Meter, Pool};
use crate::interp::python::{
    self, BUDGET, BUDGET_NAME, CHANGED, CHANGED_NAME, PythonModule, PythonProcess,
};
use crate::interp::{Budgets, Memory, PageMap, Pages};

/// Pages read ahead for samples not handled yet, at most (16 MiB): past it, a sample
/// is read when it is handled.
const MAX_AHEAD_PAGES: usize = 4096;

/// Threads whose last read pages are kept at most (then forgotten, all at once).
const MAX_AHEAD_THREADS: usize = 4096;

/// Why a process's Python frames are not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The process cannot be read (gone, no permission, unsupported): why.
    Failed(String),
    /// The pid no longer names the process recorded (it exited, or another process
    /// reused its pid): why, said once for all such processes.
    NotTheRecorded(String),
}

/// Opens the process of a pid for reading, with the CPython version its executable's
/// name gives (when the runtime does not say it). Given the pid, the time of the
/// sample that asks (the recording's clock) and the mapping of the CPython module it
/// runs.
pub(crate) type Opener<M> =
    Box<dyn FnMut(u32, u64, &Mapping) -> Result<(M, Option<(u8, u8)>), Refused> + Send>;

/// What [`PythonFrames::merge`] needs of the sample: its registers and stack copy.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Copied<'a> {
    /// The stack pointer: the address of `stack[0]`.
    pub sp: u64,
    /// The user stack copy (empty in frame-pointer mode).
    pub stack: &'a [u8],
    /// RBX, RBP, R12 to R15 (zero where not known).
    pub regs: [u64; 6],
    /// The thread has not run since its stack was copied (a thread `dump` read off
    /// the CPU): its Python frames as they are now are the copy's.
    pub steady: bool,
    /// The sample's time (the recording's clock; 0 when not known).
    pub time: u64,
}

impl<'a> Copied<'a> {
    /// What a decoded sample holds.
    pub(crate) fn of(s: &decode::Sample<'a>) -> Copied<'a> {
        let reg = |r| s.reg(r).unwrap_or(0);
        Copied {
            sp: s.regs.map_or(0, |r| r[1]),
            stack: s.stack,
            regs: [
                reg(decode::REG_BX),
                reg(decode::REG_BP),
                reg(decode::REG_R12),
                reg(decode::REG_R13),
                reg(decode::REG_R14),
                reg(decode::REG_R15),
            ],
            steady: false,
            time: s.time,
        }
    }
}

/// One process's Python state.
enum State<M> {
    /// Read: its memory (a page cache cleared at each sample, or each round: see
    /// `Captures::keep_pages`) and what was found.
    Ready(Box<(Pages<M>, PythonProcess)>),
    /// A CPython process whose frames cannot be read, and why.
    Failed(Refused),
}

/// Python frames of every process met.
pub(crate) struct PythonFrames<M: Memory> {
    open: Opener<M>,
    /// What each loaded module is, by its address (None: not CPython).
    modules: HashMap<*const LoadedModule, Option<Arc<PythonModule>>>,
    procs: HashMap<u32, State<M>>,
    /// Scratch kept between samples.
    scratch: read::Scratch,
    /// Samples in an eval loop that came without a stack copy (frame-pointer mode).
    without_stack: u64,
    /// What was read of a thread's Python state as its sample was drained, by (tid,
    /// sample time), until the sample is handled (see [`PythonFrames::read_ahead`]).
    ahead: HashMap<(u32, u64), PageMap>,
    /// The pages they hold.
    ahead_pages: usize,
    /// Samples read ahead by their delay after the sample (up to 0.1, 1, 3, 10 ms,
    /// more), then those whose chain was caught mid-call each time: measured for
    /// `PROFILE_DEBUG_PYTHON`.
    ahead_late: [u64; 6],
    /// The pages each thread's last read ahead read, by tid, and those its check
    /// read: each read first, in one system call, for its next sample (a thread's
    /// chain and code objects stay on the same few pages from one sample to the next).
    last_pages: HashMap<u32, (Vec<u64>, Vec<u64>)>,
    /// The chains copied at the sample instant (see [`capture`]).
    captures: capture::Captures,
    /// What every process's reader may take, and the bytes they keep in all.
    budgets: Budgets,
    pool: Pool,
}

/// How a drained sample's Python frames will be read ([`PythonFrames::read_ahead`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ahead {
    /// Its chain was copied at the sample instant.
    Captured,
    /// Its chain was read now, soon after the sample.
    Read,
    /// When it is handled (3.8 to 3.10, or a chain caught mid-call).
    Later,
}

impl<M: Memory> PythonFrames<M> {
    /// Python frames of the processes `open` opens.
    pub(crate) fn new(open: Opener<M>) -> PythonFrames<M> {
        PythonFrames {
            open,
            modules: HashMap::new(),
            procs: HashMap::new(),
            scratch: read::Scratch::default(),
            without_stack: 0,
            ahead: HashMap::new(),
            ahead_pages: 0,
            ahead_late: [0; 6],
            last_pages: HashMap::new(),
            captures: Default::default(),
            budgets: Budgets::default(),
            pool: Pool::default(),
        }
    }

    /// The same, reading every process within `budgets`.
    pub(crate) fn with_budgets(mut self, budgets: Budgets) -> PythonFrames<M> {
        self.budgets = budgets;
        self
    }

    /// The bytes every process's reader keeps now (what the bytes budgets count).
    pub(crate) fn kept_bytes(&self) -> usize {
        self.pool.kept()
    }

    /// Reads ahead, as soon as the sample of `pid`/`tid` taken at `time` is drained
    /// (before it waits its turn to be handled), what [`PythonFrames::merge`] will
    /// read of the process as it is then: the thread's chain of frames, which the
    /// thread leaves and overwrites as it runs on (3.11+; see
    /// [`PythonProcess::read_ahead`]). The pages read are kept for that sample. `now`:
    /// the time of the read (the recording's clock). None when `pid` is no Python
    /// process the stage reads, or `tid` has no thread state in it; else how its
    /// frames will be read. A chain copied at
    /// the sample instant ([`PythonFrames::captured`]) is taken instead of a read.
    pub(crate) fn read_ahead(&mut self, pid: u32, tid: u32, time: u64, now: u64) -> Option<Ahead> {
        let Some(State::Ready(ready)) = self.procs.get_mut(&pid) else {
            return None;
        };
        let (pages, process) = &mut **ready;
        if self.captures.take_for(tid, time) {
            return Some(Ahead::Captured);
        }
        self.captures.pages_used(pid);
        pages.clear();
        // A thread with no thread state (not a Python thread, or one the process keeps
        // out of its thread list) has nothing to read ahead, and does not set the pace.
        let start = process.chain_start(&*pages, tid)?;
        if self.captures.on() {
            // Not copied (the thread is not registered yet, or its id was reused):
            // register it, for its next samples.
            self.captures.register(tid, start);
        }
        if self.ahead_pages >= MAX_AHEAD_PAGES || !process.reads_ahead() {
            return Some(Ahead::Later);
        }
        let late = now.saturating_sub(time);
        let bucket = [100_000, 1_000_000, 3_000_000, 10_000_000]
            .iter()
            .take_while(|&&b| late > b)
            .count();
        self.ahead_late[bucket] += 1;
        // A chain caught mid-call is read again, twice at most; then it is read when
        // the sample is handled. The second read of each try goes through pages of its
        // own, each read after every page of the first: a page at a time, not a
        // system call per field (that was half the recorder's CPU on a Python target).
        // Each read starts with the pages the thread's last sample needed, fetched in
        // one system call.
        let (last, checked) = self.last_pages.remove(&tid).unwrap_or_default();
        let mut check = Vec::new();
        let whole = (0..3).any(|_| {
            pages.clear();
            pages.prefetch(&last);
            let again = Pages::new(pages.inner());
            let whole = process.read_ahead(&*pages, &again, tid, &checked);
            check = again.pages_read();
            whole
        });
        if self.last_pages.len() >= MAX_AHEAD_THREADS {
            self.last_pages.clear();
        }
        self.last_pages.insert(tid, (pages.pages_read(), check));
        let read = pages.take();
        if !whole {
            self.ahead_late[5] += 1;
            return Some(Ahead::Later);
        }
        self.ahead_pages += read.len();
        if let Some(old) = self.ahead.insert((tid, time), read) {
            self.ahead_pages -= old.len();
        }
        Some(Ahead::Read)
    }

    /// Every sample up to `time` is handled: what was read ahead for those that ran
    /// no eval loop goes.
    pub(crate) fn handled_upto(&mut self, time: u64) {
        self.captures.handled_upto(time);
        if self.ahead.is_empty() {
            return;
        }
        let mut freed = 0;
        self.ahead.retain(|&(_, t), p| {
            let keep = t > time;
            if !keep {
                freed += p.len();
            }
            keep
        });
        self.ahead_pages -= freed;
    }

    /// Whether a process with readable Python frames is recorded.
    pub(crate) fn any(&self) -> bool {
        self.procs.values().any(|s| matches!(s, State::Ready(_)))
    }

    /// Replaces each native eval-loop frame of `frames` (a sample of `pid`/`tid`,
    /// leaf first, with the registers and stack copy `copy`; `cut`: the native stack
    /// was cut) by the Python frames it was running. `bound`: the recording's modules
    /// and mappings.
    pub(crate) fn merge(
        &mut self,
        pid: u32,
        tid: u32,
        copy: Copied<'_>,
        cut: bool,
        frames: &mut Vec<Frame>,
        bound: Bound<'_>,
    ) {
        let python = self.eval_frames(frames, bound);
        let ahead = self.ahead.remove(&(tid, copy.time));
        if let Some(p) = &ahead {
            self.ahead_pages -= p.len();
        }
        let at_sample = self.captures.remove(tid, copy.time);
        let Some((module, bias, mapping)) = python else {
            return;
        };
        if copy.stack.is_empty() {
            // Frame-pointer mode: nothing of the sample could confirm a frame read.
            self.without_stack += 1;
            return;
        }
        let open = &mut self.open;
        let meter = || Meter::new(self.pool.clone(), self.budgets);
        let state = self.procs.entry(pid).or_insert_with(|| {
            let Some(mapping) = bound.mapping(mapping) else {
                return State::Failed(Refused::Failed("its CPython mapping is unknown".into()));
            };
            start(open(pid, copy.time, mapping), &module, bias, meter())
        });
        let State::Ready(ready) = state else {
            return;
        };
        let (pages, process) = &mut **ready;
        let stage = read::Stage {
            captures: &mut self.captures,
            budgets: &self.budgets,
            scratch: &mut self.scratch,
        };
        let sample = read::Sample {
            pid,
            tid,
            copy,
            cut,
            ahead,
            at_sample,
        };
        let Ok(segments) = read::read(process, pages, stage, frames, sample) else {
            return;
        };
        slots::splice(pid, frames, &self.scratch.evals, &segments);
    }

    /// Finds the eval frames of `frames` (into `scratch.evals`): the CPython module
    /// they run in, its bias and its mapping, when there are any.
    fn eval_frames(
        &mut self,
        frames: &[Frame],
        bound: Bound<'_>,
    ) -> Option<(Arc<PythonModule>, u64, u32)> {
        self.scratch.evals.clear();
        let mut python: Option<(Arc<PythonModule>, u64, u32)> = None;
        for (i, f) in frames.iter().enumerate() {
            if !f.kind.is_user() {
                continue;
            }
            let Some(m) = f.mapping else { continue };
            let Some((lm, bias)) = bound.module(m) else {
                continue;
            };
            let path = bound.mapping(m).map_or("", |m| m.path.as_str());
            if let Some(pm) = self.python_module(lm, path)
                && pm.in_eval(f.kind.lookup_address(f.addr).wrapping_sub(*bias))
            {
                self.scratch.evals.push(i);
                python.get_or_insert((pm, *bias, m));
            }
        }
        python
    }

    /// What loaded module `lm` (mapped from `path`) is, when CPython (read once per
    /// module).
    fn python_module(&mut self, lm: &Arc<LoadedModule>, path: &str) -> Option<Arc<PythonModule>> {
        let known = self.modules.entry(Arc::as_ptr(lm)).or_insert_with(|| {
            // Names left on disk: a Node binary (`process::locate`), not CPython.
            if lm.image.names_on_disk() {
                return None;
            }
            PythonModule::from_elf(lm.image.as_ref().as_ref(), path).map(Arc::new)
        });
        known.clone()
    }

    /// Process `pid` exited and its last window is cut: its reader (an open
    /// `/proc/PID/mem`) and what was read of it go.
    pub(crate) fn forget(&mut self, pid: u32) {
        self.procs.remove(&pid);
    }

    /// Names for the Python frames among `frames` from id `first` on.
    pub(crate) fn symbols_from(&self, frames: &[Frame], first: usize) -> Vec<FrameSymbols> {
        let mut out = Vec::new();
        for (id, f) in frames.iter().enumerate().skip(first) {
            if f.kind != FrameKind::Interpreted {
                continue;
            }
            let Some(State::Ready(ready)) = self.procs.get(&f.pid) else {
                continue;
            };
            let marked = |name: &str| SymbolLine {
                function: name.to_owned(),
                file: None,
                line: None,
                inlined: false,
            };
            let line = match f.addr {
                CHANGED => marked(CHANGED_NAME),
                BUDGET => marked(BUDGET_NAME),
                id => {
                    let Some(name) = ready.1.name(id) else {
                        continue;
                    };
                    SymbolLine {
                        function: name.function.to_string(),
                        file: Some(name.file.to_string()),
                        line: name.line,
                        inlined: false,
                    }
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
}

/// Whether `PROFILE_DEBUG_PYTHON` asks the summary for the marked frames' causes (read
/// once).
fn debug() -> bool {
    static DEBUG: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *DEBUG.get_or_init(|| std::env::var_os("PROFILE_DEBUG_PYTHON").is_some_and(|v| v != "0"))
}

/// The Python state of a process opened as `opened`, whose eval loop is in `module`
/// mapped with `bias`.
fn start<M: Memory>(
    opened: Result<(M, Option<(u8, u8)>), Refused>,
    module: &PythonModule,
    bias: u64,
    meter: Meter,
) -> State<M> {
    let (mem, exe_version) = match opened {
        Ok(o) => o,
        Err(why) => return State::Failed(why),
    };
    // A first read tells whether its memory can be read at all.
    match python::runtime(&mem, module, bias, exe_version) {
        Ok(rt) if mem.u64_at(rt.runtime).is_none() => State::Failed(Refused::Failed(format!(
            "its memory cannot be read ({})",
            std::io::Error::last_os_error()
        ))),
        Ok(rt) => State::Ready(Box::new((
            Pages::new(mem),
            PythonProcess::with_meter(rt, meter),
        ))),
        Err(e) => State::Failed(Refused::Failed(e.to_string())),
    }
}

mod capture;
pub(crate) use capture::CapturedChain;
mod notes;
mod read;
mod slots;
#[cfg(test)]
mod tests;
