//! The window worker's naming: a window's frames named from the names found in
//! recent windows, kept by what names a frame (a module's code once for every
//! process that maps it, the kernel's once, JIT code per process) and dropped a
//! minute after their last use, so a host agent's names follow what runs now.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::super::modules::LoadedModule;
use super::{Job, Window};
use crate::format::{Frame, FrameId, FrameKind, FrameSymbols, Mapping};
use crate::symbolize::frames::{Bound, Live, Namer};

/// A frame's name as far as the live namer knows it.
#[derive(Debug, Clone)]
enum Name {
    Known(FrameSymbols),
    /// Tried, no name (for JIT frames: the size of the perf map then).
    Unnamed(Option<u64>),
}

/// The worker's side: the namer and the names found in recent windows, by what
/// names a frame (a module's code is named once for every process mapping it).
pub(super) struct Worker {
    namer: Namer,
    names: HashMap<NameKey, Cached>,
    /// Windows taken so far: a name unused for `keep` windows is dropped.
    generation: u64,
    /// Windows a name (and, for a host agent, a module) is kept after its last use:
    /// a minute's worth, at least 3.
    keep: u64,
    pub(super) uids: HashMap<u32, crate::symbolize::perfmap::TargetUser>,
    /// [`Namer::freed`] when free memory was last given back.
    trimmed: u64,
}

/// What names a frame: its kind and, in a loaded module, the module and the address
/// in its file; else its process and address (kernel frames: process 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct NameKey {
    kind: FrameKind,
    pid: u32,
    addr: u64,
    module: usize,
}

/// A name and the last window that used it; the module's allocation is held (weakly:
/// not its tables, which the tables budget may let go) so that its address (part of
/// the key) is not another module's while the name is kept.
struct Cached {
    name: Name,
    used: u64,
    _module: Option<Weak<LoadedModule>>,
}

/// How long a name, or a module no process maps, is kept after its last use: a
/// program that runs again within it is not read and named again.
const KEEP_FOR: Duration = Duration::from_secs(60);

/// [`KEEP_FOR`] in windows of `interval`, at least 3.
pub(super) fn keep_windows(interval: Duration) -> u64 {
    (KEEP_FOR.as_millis() / interval.as_millis().max(1)).max(3) as u64
}

impl Worker {
    /// A worker naming with `namer` windows of `interval`.
    pub(super) fn new(mut namer: Namer, interval: Duration, budget: usize) -> Worker {
        let keep = keep_windows(interval);
        // A module's symbols and DWARF, once parsed, name the next windows' new
        // frames too, for as long as names are kept, within `budget` bytes.
        namer.keep_parsed(budget, keep);
        Worker {
            namer,
            names: HashMap::new(),
            generation: 0,
            keep,
            uids: HashMap::new(),
            trimmed: 0,
        }
    }

    /// Names the window's frames and returns the window with its names.
    pub(super) fn take(&mut self, job: Job) -> Window {
        if let Some(uids) = job.uids {
            self.uids = uids;
        }
        let mut window = job.window;
        let r = &window.recording;
        let mut names = self.name_all(&r.frames, &r.mappings, &job.modules);
        for fs in job.interp_names {
            if let Some(n) = names.get_mut(fs.frame as usize) {
                *n = Some(fs);
            }
        }
        self.namer.end_window();
        if super::super::events::debug_tables() {
            let (kept, bytes) = self.namer.kept_usage();
            eprintln!(
                "profile: worker tables: names {}, parsed modules {kept} ({} MiB)",
                self.names.len(),
                bytes >> 20
            );
        }
        window.recording.symbols = names;
        // Naming read a module's DWARF (tens of MiB, dropped by now unless kept) or
        // dropped kept names: give the memory back. Not every window: trimming walks
        // the whole heap, and what it gives back is faulted in again on reuse.
        if self.namer.freed() != self.trimmed {
            self.trimmed = self.namer.freed();
            super::super::sys::release_free_memory();
        }
        // Names not used for a few windows go: the host's programs come and go.
        let (now, keep) = (self.generation, self.keep);
        self.names.retain(|_, c| now.saturating_sub(c.used) < keep);
        self.generation += 1;
        window
    }

    /// Names `frames` (with their `mappings` and those mappings' `modules`), from
    /// the names kept where it can (JIT frames without one are tried again when their
    /// process's perf map has grown); the result is indexed by frame id.
    pub(super) fn name_all(
        &mut self,
        frames: &[Frame],
        mappings: &[Mapping],
        modules: &[Option<(Arc<LoadedModule>, u64)>],
    ) -> Vec<Option<FrameSymbols>> {
        let mut out = vec![None; frames.len()];
        let mut map_sizes: HashMap<u32, Option<u64>> = HashMap::new();
        let mut wanted: Vec<FrameId> = Vec::new();
        let mut keys = Vec::with_capacity(frames.len());
        for (i, f) in frames.iter().enumerate() {
            let (key, module) = name_key(f, modules);
            keys.push((key, module));
            let Some(c) = self.names.get_mut(&key) else {
                wanted.push(i as FrameId);
                continue;
            };
            c.used = self.generation;
            match &c.name {
                Name::Known(fs) => {
                    out[i] = Some(FrameSymbols {
                        frame: i as FrameId,
                        ..fs.clone()
                    });
                }
                Name::Unnamed(Some(size)) => {
                    let now = *map_sizes
                        .entry(f.pid)
                        .or_insert_with(|| perf_map_size(f.pid));
                    if now.is_some_and(|n| n != *size) {
                        wanted.push(i as FrameId);
                    }
                }
                Name::Unnamed(None) => {}
            }
        }
        if wanted.is_empty() {
            return out;
        }
        let jit_maps = HashMap::new();
        let bound = Bound {
            mappings,
            modules,
            live: Some(Live {
                uids: &self.uids,
                jit_maps: &jit_maps,
            }),
            kernel: Ok(()),
        };
        let (named, _) = self.namer.name(frames, wanted.iter().copied(), &bound);
        let generation = self.generation;
        for &id in &wanted {
            let f = &frames[id as usize];
            let jit = is_jit(f, modules);
            let name = Name::Unnamed(jit.then(|| {
                map_sizes
                    .entry(f.pid)
                    .or_insert_with(|| perf_map_size(f.pid))
                    .unwrap_or(0)
            }));
            let (key, module) = keys[id as usize].clone();
            self.names.insert(
                key,
                Cached {
                    name,
                    used: generation,
                    _module: module.as_ref().map(Arc::downgrade),
                },
            );
        }
        for fs in named {
            let id = fs.frame as usize;
            if let Some(c) = keys.get(id).and_then(|(k, _)| self.names.get_mut(k)) {
                c.name = Name::Known(fs.clone());
            }
            if let Some(slot) = out.get_mut(id) {
                *slot = Some(fs);
            }
        }
        out
    }
}

/// What names `f` (see [`NameKey`]), and the module it is in.
fn name_key(
    f: &Frame,
    modules: &[Option<(Arc<LoadedModule>, u64)>],
) -> (NameKey, Option<Arc<LoadedModule>>) {
    let loaded = f
        .mapping
        .filter(|_| f.kind.is_user())
        .and_then(|m| modules.get(m as usize)?.as_ref());
    match loaded {
        Some((module, bias)) => (
            NameKey {
                kind: f.kind,
                pid: 0,
                addr: f.kind.lookup_address(f.addr).wrapping_sub(*bias),
                module: Arc::as_ptr(module) as usize,
            },
            Some(Arc::clone(module)),
        ),
        None => (
            NameKey {
                kind: f.kind,
                pid: f.pid,
                addr: f.addr,
                module: 0,
            },
            None,
        ),
    }
}

fn is_jit(f: &Frame, modules: &[Option<(Arc<LoadedModule>, u64)>]) -> bool {
    f.kind.is_user()
        && f.kind != FrameKind::Truncated
        && f.mapping
            .and_then(|m| modules.get(m as usize)?.as_ref())
            .is_none()
}

/// The size of a process's perf map, as the target sees its /tmp.
fn perf_map_size(pid: u32) -> Option<u64> {
    std::fs::metadata(format!("/proc/{pid}/root/tmp/perf-{pid}.map"))
        .or_else(|_| std::fs::metadata(format!("/tmp/perf-{pid}.map")))
        .ok()
        .map(|m| m.len())
}
