//! The one namer of a recording's frames, for every road: the recorder (at the end,
//! or window by window for a live consumer), `dump`, and a recording or perf.data
//! file named after the fact ([`super::late`]). Each unique frame is named once:
//! ELF and DWARF names (inlined frames included) for frames in a mapped file, bound
//! to it by [`crate::replay::bind`]; perf maps for JIT and interpreter code of a live
//! process; kallsyms for the kernel. The names go into the recording, so reports
//! never need the target's binaries.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use super::perfmap::{MAX_MAP_WEIGHT, PerfMap, PerfMapSkip, TargetUser, open_perf_map};
use super::{ModuleSource, Symbolizer, SymbolizerOptions};
use crate::format::{Frame, FrameId, FrameKind, FrameSymbols, Mapping, SymbolLine, SymbolSource};
use crate::replay::bind::LoadedModule;

/// What symbolization found, for the summary.
#[derive(Debug, Clone, Default)]
pub struct SymbolStats {
    /// Unique frames that got a name.
    pub named: usize,
    /// Unique frames left without one.
    pub unnamed: usize,
    /// Time naming took.
    pub time: std::time::Duration,
    /// Why kernel frames have no names, if they don't.
    pub kernel_note: Option<String>,
    /// Tables of names that were there but not used, and why: perf maps (another
    /// user's file, a symlink, a FIFO, too large) and Go modules' own tables.
    pub perf_map_notes: Vec<String>,
    /// What debuginfod could not provide (`DEBUGINFOD_URLS`), one note each.
    pub debuginfod_notes: Vec<String>,
    /// Debug files downloaded from debuginfod servers.
    pub debuginfod_fetched: usize,
    /// Runtime frames (Python, Java): the share that could not be validated, per
    /// process, why a process gave none, and the budgets that held a reader.
    pub runtime_notes: Vec<String>,
}

/// What a recording's frames are named against: its mappings, each bound to its
/// module (or not: `None`), and where the rest may be named from.
pub(crate) struct Bound<'a> {
    /// The recording's mappings, by id.
    pub mappings: &'a [Mapping],
    /// By mapping id: the module and the mapping's bias ([`crate::replay::bind`]).
    pub modules: &'a [Option<(Arc<LoadedModule>, u64)>],
    /// The processes are alive (or were until just now): their files' debug links
    /// are followed inside `/proc/PID/root`, and frames outside any module are named
    /// by perf maps. None: named after the fact, those frames stay unnamed.
    pub live: Option<Live<'a>>,
    /// Why kernel frames cannot be named here (another machine, another boot).
    pub kernel: Result<(), ForeignKernel>,
}

/// Why a recording's kernel addresses do not mean what this machine's kallsyms says:
/// its kernel frames stay unnamed, and the note says why.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ForeignKernel {
    #[error("recorded on {0}, not this machine")]
    OtherHost(String),
    #[error("recorded before this machine's last boot")]
    BeforeBoot,
    #[error(
        "recorded on another kernel (build-id {}, running {})",
        crate::elf::build_id_hex(recorded),
        crate::elf::build_id_hex(running)
    )]
    OtherBuild { recorded: Vec<u8>, running: Vec<u8> },
    #[error("the perf.data file does not say where the kernel was loaded")]
    NoText,
    #[error("this machine's kernel addresses are hidden (kptr_restrict; run as root)")]
    Hidden,
    #[error("recorded before this machine's last boot, or on another machine")]
    Moved,
}

/// The perf maps of live processes.
pub(crate) struct Live<'a> {
    /// Whose each process is, to check its perf map as perf checks it.
    pub uids: &'a HashMap<u32, TargetUser>,
    /// Perf maps merged while recording (a JVM's), by pid; the others are read now.
    pub jit_maps: &'a HashMap<u32, PerfMap>,
    /// Modules (by the address of their [`LoadedModule`]) named from their symbol
    /// tables alone for now, their DWARF deferred (a host agent's new programs).
    pub defer_dwarf: Option<&'a HashSet<usize>>,
}

/// Names for `frames` (indexed by frame id), all of them at once.
pub(crate) fn symbolize(
    frames: &[Frame],
    bound: &Bound<'_>,
    debug_dirs: &[PathBuf],
    kallsyms: Option<super::kernel::KernelSymbols>,
) -> (Vec<FrameSymbols>, SymbolStats) {
    let started = std::time::Instant::now();
    let mut namer = Namer::new(debug_dirs, kallsyms);
    let ids = 0..frames.len() as FrameId;
    let (out, mut stats) = namer.name(frames, ids, bound);
    stats.time = started.elapsed();
    (out, stats)
}

/// Names frames as they come (a live recording names each window's new frames): one
/// symbolizer, kernel symbols read once, for the life of the recording.
pub(crate) struct Namer {
    sym: Symbolizer,
}

impl Namer {
    /// A namer reading debug files also from `debug_dirs`, with the kernel's symbols
    /// when read already (else from `/proc/kallsyms` when needed).
    pub(crate) fn new(
        debug_dirs: &[PathBuf],
        kallsyms: Option<super::kernel::KernelSymbols>,
    ) -> Namer {
        let mut sym = Symbolizer::new(SymbolizerOptions {
            debug_dirs: debug_dirs.to_vec(),
        });
        if let Some(k) = kallsyms {
            sym.set_kernel_symbols(k);
        }
        Namer { sym }
    }

    /// Keeps modules' parsed names from one window to the next (see
    /// [`super::kept`]), up to `budget` bytes, each until unused for `max_age` windows.
    pub(crate) fn keep_parsed(&mut self, budget: usize, max_age: u64) {
        self.sym.keep_parsed(budget, max_age);
    }

    /// Ends a window: kept modules no longer loaded, or unused for long, go.
    pub(crate) fn end_window(&mut self) {
        self.sym.end_window();
    }

    /// Modules whose parsed names are kept, and about their bytes.
    pub(crate) fn kept_usage(&self) -> (usize, usize) {
        self.sym.kept_usage()
    }

    /// Moves whenever naming let go of memory (a module's DWARF read, kept names
    /// dropped): the allocator has free memory to give back only then.
    pub(crate) fn freed(&self) -> u64 {
        self.sym.freed()
    }

    /// Names the frames `ids` of `frames`; the result is sorted by frame id and holds
    /// only the frames that got a name.
    pub(crate) fn name(
        &mut self,
        frames: &[Frame],
        ids: impl IntoIterator<Item = FrameId>,
        bound: &Bound<'_>,
    ) -> (Vec<FrameSymbols>, SymbolStats) {
        name_frames(&mut self.sym, frames, ids, bound)
    }
}

/// A pass's frames by how they are named. User frames are grouped by loaded module
/// (a file mapped by any number of processes is named once) or, without one, by
/// process (JIT code named by its perf map). Each frame keeps its own mapping's bias
/// to become an address in the file.
#[derive(Default)]
struct Groups {
    by_module: BTreeMap<*const LoadedModule, Vec<(FrameId, u64)>>,
    jit: BTreeMap<u32, Vec<FrameId>>,
    kernel: Vec<FrameId>,
}

impl Groups {
    fn new(
        frames: &[Frame],
        ids: impl IntoIterator<Item = FrameId>,
        modules: &[Option<(Arc<LoadedModule>, u64)>],
    ) -> Groups {
        let mut g = Groups::default();
        for id in ids {
            let Some(f) = frames.get(id as usize) else {
                continue;
            };
            match f.kind {
                FrameKind::Kernel => g.kernel.push(id),
                k if k.is_user() => {
                    match f.mapping.and_then(|m| modules.get(m as usize)?.as_ref()) {
                        Some((module, bias)) => g
                            .by_module
                            .entry(Arc::as_ptr(module))
                            .or_default()
                            .push((id, f.kind.lookup_address(f.addr).wrapping_sub(*bias))),
                        None => g.jit.entry(f.pid).or_default().push(id),
                    }
                }
                _ => {}
            }
        }
        g
    }
}

/// One naming pass: what it reads, and the names and counts it makes.
struct Pass<'a, 'b> {
    sym: &'a mut Symbolizer,
    frames: &'a [Frame],
    bound: &'a Bound<'b>,
    out: Vec<FrameSymbols>,
    stats: SymbolStats,
}

fn name_frames(
    sym: &mut Symbolizer,
    frames: &[Frame],
    ids: impl IntoIterator<Item = FrameId>,
    bound: &Bound<'_>,
) -> (Vec<FrameSymbols>, SymbolStats) {
    let groups = Groups::new(frames, ids, bound.modules);
    let mut pass = Pass {
        sym,
        frames,
        bound,
        out: Vec::new(),
        stats: SymbolStats::default(),
    };
    for entries in groups.by_module.into_values() {
        pass.module(&entries);
    }
    match &bound.live {
        Some(live) => {
            for (pid, ids) in groups.jit {
                pass.jit(live, pid, &ids);
            }
        }
        None => pass.stats.unnamed += groups.jit.values().map(Vec::len).sum::<usize>(),
    }
    let Pass {
        sym, out, stats, ..
    } = pass;
    name_kernel(sym, frames, &groups.kernel, &bound.kernel, out, stats)
}

impl Pass<'_, '_> {
    /// Names one module's frames (`entries`: each frame with its address in the
    /// file).
    fn module(&mut self, entries: &[(FrameId, u64)]) {
        let (mappings, modules) = (self.bound.mappings, self.bound.modules);
        // Any of the module's frames says which mapping (path, process) it came from.
        let first = &self.frames[entries[0].0 as usize];
        let Some(mapping) = first.mapping else {
            return;
        };
        let Some((module, _)) = modules[mapping as usize].as_ref() else {
            return;
        };
        let m = &mappings[mapping as usize];
        let live = self.bound.live.as_ref();
        let source = ModuleSource {
            image: Arc::clone(&module.image),
            path: m.path.clone(),
            root: live.map(|_| PathBuf::from(format!("/proc/{}/root", m.pid))),
        };
        let svmas: Vec<u64> = entries.iter().map(|&(_, svma)| svma).collect();
        let defer = live
            .and_then(|l| l.defer_dwarf)
            .is_some_and(|d| d.contains(&(Arc::as_ptr(module) as usize)));
        let names = self.sym.symbolize_module_deferring(&source, &svmas, defer);
        for (&(id, _), names) in entries.iter().zip(names) {
            push(
                &mut self.out,
                &mut self.stats,
                id,
                SymbolSource::Native,
                names,
            );
        }
    }

    /// Names process `pid`'s frames outside any module (`ids`) by its perf map.
    fn jit(&mut self, live: &Live<'_>, pid: u32, ids: &[FrameId]) {
        // A JVM's maps as merged while recording (each request rewrites its file).
        let parsed;
        let map = match live.jit_maps.get(&pid) {
            Some(map) => map,
            None => match self.perf_map(live, pid, ids) {
                Some(map) => {
                    parsed = map;
                    &parsed
                }
                None => {
                    self.stats.unnamed += ids.len();
                    return;
                }
            },
        };
        let addrs: Vec<u64> = ids
            .iter()
            .map(|&id| {
                let f = &self.frames[id as usize];
                f.kind.lookup_address(f.addr)
            })
            .collect();
        for (id, name) in ids.iter().zip(self.sym.symbolize_perf_map(map, &addrs)) {
            let lines = name.into_iter().collect();
            push(
                &mut self.out,
                &mut self.stats,
                *id,
                SymbolSource::Jit,
                lines,
            );
        }
    }

    /// Process `pid`'s perf map as the target sees its /tmp, else ours (after the
    /// target exited its root is gone); checked as perf checks it (see
    /// `symbolize::perfmap`). None, with a note when it says something, when there
    /// is none to use.
    fn perf_map(&mut self, live: &Live<'_>, pid: u32, ids: &[FrameId]) -> Option<PerfMap> {
        let unknown = TargetUser::default();
        let user = live.uids.get(&pid).unwrap_or(&unknown);
        let notes = &mut self.stats.perf_map_notes;
        let file = match open_perf_map(pid, user) {
            Ok(file) => file,
            Err(PerfMapSkip::Missing(_)) => {
                let mappings = self.bound.mappings;
                let anonymous = ids
                    .iter()
                    .filter(|&&id| {
                        self.frames[id as usize]
                            .mapping
                            .and_then(|m| mappings.get(m as usize))
                            .is_some_and(|m| m.path.is_empty() || m.path.starts_with("//anon"))
                    })
                    .count();
                if anonymous > 0
                    && let Some(hint) = runtime_hint(pid, anonymous, mappings)
                {
                    notes.push(hint);
                }
                return None;
            }
            Err(why) => {
                notes.push(format!("perf map of process {pid} not used: {why}"));
                return None;
            }
        };
        let path = file.path.clone();
        match file.parse(MAX_MAP_WEIGHT) {
            Ok((map, merged)) => {
                if merged.cut {
                    notes.push(format!(
                        "perf map of process {pid} cut: it names more code than the {} MiB \
                         kept",
                        MAX_MAP_WEIGHT >> 20
                    ));
                }
                Some(map)
            }
            Err(e) => {
                notes.push(format!(
                    "perf map of process {pid} not used: cannot read {}: {e}",
                    path.display()
                ));
                None
            }
        }
    }
}

/// Names the kernel frames `ids` (when `ok`) and finishes the names: sorted by frame.
fn name_kernel(
    sym: &mut Symbolizer,
    frames: &[Frame],
    ids: &[FrameId],
    ok: &Result<(), ForeignKernel>,
    mut out: Vec<FrameSymbols>,
    mut stats: SymbolStats,
) -> (Vec<FrameSymbols>, SymbolStats) {
    if !ids.is_empty() {
        let addrs: Vec<u64> = ids.iter().map(|&id| frames[id as usize].addr).collect();
        let named = match ok {
            Ok(()) => sym.symbolize_kernel(&addrs).map_err(|e| e.to_string()),
            Err(foreign) => Err(foreign.to_string()),
        };
        match named {
            Ok(names) => {
                for (id, name) in ids.iter().zip(names) {
                    push(
                        &mut out,
                        &mut stats,
                        *id,
                        SymbolSource::Kernel,
                        name.into_iter().collect(),
                    );
                }
            }
            Err(why) => {
                stats.unnamed += ids.len();
                stats.kernel_note = Some(why);
            }
        }
    }
    out.sort_by_key(|s| s.frame);
    stats.debuginfod_notes = sym.stats().debuginfod_notes.clone();
    stats
        .perf_map_notes
        .extend(sym.stats().go_notes.iter().cloned());
    stats.debuginfod_fetched = sym.stats().debuginfod_fetched;
    (out, stats)
}

/// For `count` addresses in anonymous executable memory of a process with no perf map
/// that nothing else named: which runtime it looks like (by what it maps) and what
/// would name them.
fn runtime_hint(pid: u32, count: usize, mappings: &[Mapping]) -> Option<String> {
    let paths = || {
        mappings
            .iter()
            .filter(|m| m.pid == pid)
            .map(|m| m.path.as_str())
    };
    let file = |p: &str| p.rsplit('/').next().unwrap_or_default().to_owned();
    let what = if paths().any(|p| p.ends_with("/libjvm.so")) {
        "a HotSpot JVM: profile names its JIT code from its code heaps, and these \
         addresses were not in code it read there (code freed before it was read, or \
         heaps it cannot read: see the notes above); --jvm-perfmap also asks the JVM for \
         its perf map, as does `jcmd PID Compiler.perfmap` before the recording ends"
    } else if paths().any(|p| {
        let f = file(p);
        f == "node" || f.starts_with("libnode.so")
    }) {
        "Node: start it with --perf-basic-prof"
    } else if paths().any(|p| {
        let f = file(p);
        f.starts_with("python3") || f.starts_with("libpython3")
    }) {
        "CPython: start Python 3.12+ with -X perf (or PYTHONPERFSUPPORT=1)"
    } else {
        return Some(format!(
            "{count} {} of process {pid} {} in anonymous executable memory (JIT code?) \
             and it wrote no perf map (/tmp/perf-{pid}.map): they stay unnamed",
            addresses(count),
            are(count)
        ));
    };
    Some(format!(
        "{count} {} of process {pid} {} in JIT code and it wrote no perf map \
         (/tmp/perf-{pid}.map): it looks like {what}",
        addresses(count),
        are(count)
    ))
}

fn addresses(count: usize) -> &'static str {
    if count == 1 {
        "frame address"
    } else {
        "frame addresses"
    }
}

fn are(count: usize) -> &'static str {
    if count == 1 { "is" } else { "are" }
}

fn push(
    out: &mut Vec<FrameSymbols>,
    stats: &mut SymbolStats,
    frame: FrameId,
    source: SymbolSource,
    lines: Vec<SymbolLine>,
) {
    if lines.is_empty() {
        stats.unnamed += 1;
        return;
    }
    stats.named += 1;
    out.push(FrameSymbols {
        frame,
        source,
        lines,
    });
}
