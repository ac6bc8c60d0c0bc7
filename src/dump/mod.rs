//! `profile dump`: every thread's stack now, once, without stopping the process.
//!
//! A thread off the CPU is read from `/proc`: its user stack pointer and instruction
//! pointer from `/proc/PID/task/TID/syscall`, its stack bytes from `/proc/PID/mem`,
//! its kernel stack (root) from `.../stack`, and its state from those kernel frames
//! ([`crate::profile::classify`], as `record --off-cpu` classifies them). The `syscall`
//! line is read again after the stack: a thread that woke meanwhile is read again
//! (its stack bytes would not match its registers). A thread on a CPU is caught by a
//! one-shot perf sample ([`sample`]), which carries its registers and top of stack.
//! No thread is stopped, ever: nothing here uses ptrace.
//!
//! /proc gives only rip and rsp, not rbp. The unwinder starts without rbp: the CFI of
//! system-call wrappers and of code built without frame pointers needs only rsp, and a
//! frame that saved rbp gives it back to its callers. Where a frame's CFI needs rbp
//! before any frame restored it (code built with frame pointers blocked right under
//! a wrapper that left rbp alone), rbp is the lowest link of the frame-pointer chain
//! found on the stack (a slot holding a higher slot of the stack, followed by an
//! address in code), the value such a frame set. Stacks are then unwound and named with
//! the recorder's own stack builder ([`crate::replay::stack`]) and namer
//! ([`crate::symbolize::frames`]); [`thread`] reads one thread off the CPU.

mod errors;
mod java;
mod merged;
mod reader;
mod render;
mod sample;
mod thread;

use crate::replay::runtimes::{self, RuntimeFrames};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use errors::DumpError;
use errors::{gone, is_gone, read_error, reader_tid};
use reader::Reader;
pub use render::{write_json, write_text};

use crate::format::{Frame, FrameSymbols, Mapping, SymbolSource};
use crate::process;
use crate::profile::classify;
use crate::replay::bind;
use crate::replay::bind::LoadedModule;
use crate::running::modules::ModuleCache;
use crate::running::python::LivePython as PythonFrames;
use crate::symbolize::frames as naming;
use crate::unwind::FrameAddress;
use crate::unwind::addrspace::Space;

pub use crate::format::ThreadState;

/// Options of [`dump`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DumpOptions {
    /// The process to dump. No default: given to [`DumpOptions::new`].
    pub pid: u32,
    /// The most bytes of a blocked thread's stack read (from its stack pointer up to
    /// the end of its stack mapping). Default is 1 MiB.
    pub max_stack: u64,
    /// How long to wait for a running thread to run 10 us for its one sample. Default
    /// is 200 ms.
    pub sample_timeout: Duration,
    /// More directories to search for separate debug info. Default is none.
    pub debug_dirs: Vec<PathBuf>,
}

impl DumpOptions {
    /// Options to dump `pid`, everything else at its default.
    pub fn new(pid: u32) -> DumpOptions {
        DumpOptions {
            pid,
            max_stack: 1 << 20,
            sample_timeout: Duration::from_millis(200),
            debug_dirs: Vec::new(),
        }
    }
}

/// How a thread's stack was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capture {
    /// Off the CPU: registers from /proc, stack from its memory.
    Proc,
    /// On a CPU: a one-shot perf sample.
    Sample,
    /// Not read (the reason is in [`ThreadDump::note`]).
    None,
}

impl Capture {
    /// Its name in `--json`.
    pub fn name(self) -> &'static str {
        match self {
            Capture::Proc => "proc",
            Capture::Sample => "sample",
            Capture::None => "none",
        }
    }
}

/// One named frame of a dumped stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpFrame {
    /// The address (the instruction pointer, or a return address).
    pub addr: u64,
    /// The function's name, None when unnamed.
    pub function: Option<String>,
    /// `file:line` in that function, when known.
    pub location: Option<String>,
    /// The mapped file, when the address is in one.
    pub module: Option<String>,
    /// Functions inlined into `function` at this address, innermost first.
    pub inlined: Vec<Inlined>,
}

/// A function inlined at a frame's address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inlined {
    /// Its name.
    pub function: String,
    /// `file:line` in it, when known.
    pub location: Option<String>,
}

/// One thread's stack and state.
#[derive(Debug, Clone)]
pub struct ThreadDump {
    /// Thread id.
    pub tid: u32,
    /// Thread name.
    pub name: String,
    /// The /proc state letter (`R`, `S`, `D`, `T`, ...).
    pub letter: char,
    /// What it is doing: running, or why it is off the CPU.
    pub state: ThreadState,
    /// The system call it is blocked in, by name (or number).
    pub syscall: Option<String>,
    /// The kernel function it waits in.
    pub blocked_in: Option<String>,
    /// Its kernel stack, leaf first (root only).
    pub kernel_stack: Vec<String>,
    /// User frames, leaf first.
    pub frames: Vec<DumpFrame>,
    /// Why the stack ends early or is missing.
    pub note: Option<String>,
    /// How the stack was read.
    pub capture: Capture,
}

/// A whole process's dump.
#[derive(Debug, Clone)]
pub struct ProcessDump {
    /// Process id.
    pub pid: u32,
    /// Its command line.
    pub command: Vec<String>,
    /// Its threads, by tid.
    pub threads: Vec<ThreadDump>,
    /// How long the dump took.
    pub elapsed: Duration,
    /// Threads stopped to read them: always 0 (nothing here stops a thread).
    pub stopped_threads: usize,
}

/// The stack copy a thread's user frames were unwound from, kept until its Python
/// frames are read.
#[derive(Debug, Default)]
struct StackRead {
    /// The stack pointer: the address of `bytes[0]`.
    sp: u64,
    bytes: Vec<u8>,
    /// rbx, rbp, r12 to r15 when a sample gave them (zero from /proc).
    regs: [u64; 6],
    /// Read off the CPU from /proc: where its `syscall` line said it was blocked.
    blocked: Option<crate::process::task::SyscallLine>,
}

/// The address space and memory of `pid`, read through a live thread; another one
/// when that thread exits meanwhile. Returns the thread read through.
fn open_process(pid: u32) -> Result<(u32, Image, std::fs::File), DumpError> {
    let mut last = None;
    for _ in 0..4 {
        let Some(via) = reader_tid(pid) else { break };
        let opened = Image::load(pid, via).and_then(|image| {
            let mem = std::fs::File::open(format!("/proc/{pid}/task/{via}/mem"))?;
            Ok((via, image, mem))
        });
        match opened {
            Ok(o) => return Ok(o),
            Err(e) if is_gone(&e) => last = Some(e),
            Err(e) => return Err(read_error(pid, e)),
        }
    }
    Err(gone(pid).unwrap_or_else(|| DumpError::Read {
        pid,
        cause: last.unwrap_or_else(|| std::io::Error::other("its threads kept exiting")),
    }))
}

/// The process's executable mappings as the unwinder and the symbolizer need them.
struct Image {
    space: Space,
    mappings: Vec<Mapping>,
    modules: Vec<Option<(Arc<LoadedModule>, u64)>>,
    /// Each thread stack's end, by start (to bound the stack read): every mapping.
    all: Vec<process::MapsEntry>,
}

impl Image {
    /// The address space of `pid` read through its live thread `via`.
    fn load(pid: u32, via: u32) -> std::io::Result<Image> {
        let all = process::read_maps_at(pid, via)?;
        let mut cache = ModuleCache::new();
        let mut image = Image {
            space: Space::default(),
            mappings: Vec::new(),
            modules: Vec::new(),
            all: Vec::new(),
        };
        for m in all.iter().filter(|m| m.executable) {
            // `/proc/TID/` of any thread names its process's root and mapped files.
            let module = cache.get(via, m.start, m.end, &m.path, None);
            let mapping = Mapping {
                pid,
                start: m.start,
                end: m.end,
                file_offset: m.offset,
                path: m.path.clone(),
                build_id: None,
                time: 0,
            };
            let bound = bind::bind(mapping, module);
            let id = image.mappings.len() as u32;
            image.space.insert(m.start, bound.mapped(id));
            image.mappings.push(bound.mapping);
            image.modules.push(bound.module);
        }
        image.all = all;
        Ok(image)
    }

    /// The end of the mapping holding `sp` (its stack's top).
    fn stack_end(&self, sp: u64) -> Option<u64> {
        self.all
            .iter()
            .find(|m| m.start <= sp && sp < m.end)
            .map(|m| m.end)
    }

    /// Whether `addr` is in a module with unwind tables.
    fn in_code(&self, addr: u64) -> bool {
        self.space
            .find(addr)
            .is_some_and(|(_, m)| m.module.is_some())
    }
}

/// A thread's user stack as unwound: its frames' addresses, leaf first, and the Java
/// frame id each stands for, if any (see [`java`]).
#[derive(Debug, Default)]
pub(super) struct Stack {
    addrs: Vec<FrameAddress>,
    java: Vec<Option<u64>>,
}

/// Dumps every thread of `opts.pid`.
pub fn dump(opts: &DumpOptions) -> Result<ProcessDump, DumpError> {
    let started = Instant::now();
    let pid = process::tgid_of(opts.pid).map_err(|_| DumpError::NoSuchProcess(opts.pid))?;
    if process::is_kernel_thread(pid) {
        return Err(DumpError::KernelThread(pid));
    }
    let tids = process::list_tids(pid).map_err(|_| DumpError::Exited(pid))?;
    let (via, image, mem) = open_process(pid)?;
    let mut r = Reader::new(pid, opts, image, mem);
    let (mut stacks, running) = r.read_all(tids)?;
    r.sample_running(&mut stacks, running)?;
    r.resample_changed(&mut stacks)?;
    let threads = name_frames(stacks, &r.image, &r.java, &opts.debug_dirs, &r.python);
    Ok(ProcessDump {
        pid,
        // An exited leader's `cmdline` reads empty; a live thread's is the process's.
        command: process::cmdline(via),
        threads,
        elapsed: started.elapsed(),
        stopped_threads: 0,
    })
}

/// Names every frame of every thread with the recorder's symbolizer, and the Python
/// frames from what `python` read.
fn name_frames(
    stacks: Vec<(ThreadDump, Vec<Frame>, Vec<u64>)>,
    image: &Image,
    jvm: &crate::interp::jvm::JavaFrames,
    debug_dirs: &[PathBuf],
    python: &PythonFrames,
) -> Vec<ThreadDump> {
    let mut frames: Vec<Frame> = Vec::new();
    let mut index: HashMap<Frame, u32> = HashMap::new();
    let ids: Vec<Vec<u32>> = stacks
        .iter()
        .map(|(_, thread, _)| {
            thread
                .iter()
                .map(|f| {
                    *index.entry(*f).or_insert_with(|| {
                        frames.push(*f);
                        frames.len() as u32 - 1
                    })
                })
                .collect()
        })
        .collect();
    let pid = image.mappings.first().map_or(0, |m| m.pid);
    let uids = HashMap::from([(pid, crate::symbolize::perfmap::TargetUser::of(pid))]);
    let jit_maps = HashMap::new();
    let bound = naming::Bound {
        mappings: &image.mappings,
        modules: &image.modules,
        live: Some(naming::Live {
            uids: &uids,
            jit_maps: &jit_maps,
            defer_dwarf: None,
        }),
        kernel: Ok(()),
    };
    let (mut symbols, _stats) = naming::symbolize(&frames, &bound, debug_dirs, None);
    let stages: [&dyn RuntimeFrames; 2] = [python, jvm];
    symbols.extend(runtimes::names_from(&stages, &frames, 0));
    let names: HashMap<u32, &FrameSymbols> = symbols.iter().map(|s| (s.frame, s)).collect();
    stacks
        .into_iter()
        .zip(ids)
        .map(|((mut t, _, shown), ids)| {
            t.frames = ids
                .into_iter()
                .zip(shown.iter().copied())
                .map(|(id, addr)| dump_frame(&frames[id as usize], addr, names.get(&id), image))
                .collect();
            // A futex wait: its user functions tell an idle wait from contention.
            let names = t.frames.iter().flat_map(|f| {
                f.inlined
                    .iter()
                    .map(|i| i.function.as_str())
                    .chain(f.function.as_deref())
            });
            t.state = classify::refine(t.state, names);
            t
        })
        .collect()
}

/// One frame as the dump shows it: its function and location, its module (a JIT
/// frame's `[jit]`) and the functions inlined into it.
fn dump_frame(f: &Frame, addr: u64, named: Option<&&FrameSymbols>, image: &Image) -> DumpFrame {
    let module = f
        .mapping
        .map(|m| image.mappings[m as usize].path.clone())
        .filter(|p| !p.is_empty())
        .or_else(|| named.and_then(|s| java::module(f, s.source)));
    let lines = named.map_or(&[][..], |s| s.lines.as_slice());
    let real = lines.last();
    let loc = |l: &crate::format::SymbolLine| Some(format!("{}:{}", l.file.as_deref()?, l.line?));
    DumpFrame {
        addr,
        function: real.map(|l| l.function.clone()),
        location: real.and_then(loc),
        module: module.or_else(|| {
            named
                .filter(|s| s.source == SymbolSource::Jit)
                .map(|_| "[jit]".to_owned())
        }),
        inlined: lines
            .iter()
            .take(lines.len().saturating_sub(1))
            .map(|l| Inlined {
                function: l.function.clone(),
                location: loc(l),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests;
