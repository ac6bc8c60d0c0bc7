//! Ruby frames in a sample's stack. Each native frame of `rb_vm_exec` runs one
//! stretch of the thread's control frames: the frames from the one `vm_exec` began
//! with (flagged `FINISH`) to the next such. [`RubyFrames::expand`] puts each stretch
//! in place of its `rb_vm_exec` frame (and of the VM loop it called, whose name the
//! stripped library does not give), so that a stack reads native → Ruby → C function
//! → native → Ruby as it ran: `<main>`, `alpha`, `Array#each`, `rb_ary_each`,
//! `rb_yield`, `block in alpha`.
//!
//! The control frames live in the VM stack on the heap, not in the sample's stack
//! copy: they are read as soon as the sample is drained ([`RubyFrames::read_ahead`]),
//! or when it is handled: from the control frame the sample's registers point at
//! (the VM loop keeps it in `r15`, its pc in `r14`) when that frame runs the
//! sample's pc (the VM stack keeps a frame's words after it returns, until a call
//! reuses them), else from the thread's current frame. A read whose stretches still
//! do not match the native frames (the thread moved on) names the outer stretches
//! and marks the inner ones `[ruby: moved on]`, never names them from another
//! moment.

use std::collections::HashMap;
use std::sync::Arc;

use super::classes::IvarIds;
use super::layout::{Layout, RubyError, Symbols};
use super::walk::{self, IseqInfo, Raw, RawFrame, WalkError};
use crate::format::{Frame, FrameKind, SymbolLine, SymbolSource};
use crate::interp::budget::{Lru, Meter, Metered, Pool, SampleBudget, Trips};
use crate::interp::{Budgets, Memory};

/// The id of the `[ruby: unreadable]` frame of every Ruby process.
pub const UNREADABLE_ID: u64 = 0;
/// Its name.
pub const UNREADABLE_NAME: &str = "[ruby: unreadable]";
/// The id of a frame named when the names budget was spent.
pub const OVER_BUDGET_ID: u64 = 1;
/// Its name.
pub const OVER_BUDGET_NAME: &str = "[ruby: names budget spent]";
/// The id of the frame of a stretch the thread had left when it was read.
pub const MOVED_ID: u64 = 2;
/// Its name.
pub const MOVED_NAME: &str = "[ruby: moved on]";
/// Samples read ahead and not handled yet, at most.
const MAX_AHEAD: usize = 8192;
/// Bytes a cache entry and a name weigh besides their text.
const ENTRY_BYTES: usize = 96;
/// Instruction sequences whose code is kept by address, at most (then forgotten).
const MAX_BY_CODE: usize = 65_536;
/// Samples between two reads of the core classes' addresses, when a C method's owner
/// was not among them.
const CLASSES_EVERY: u64 = 1000;

/// Counts for the summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RubyStats {
    /// Ruby frames named.
    pub named: u64,
    /// Stretches marked unreadable.
    pub unreadable: u64,
    /// Samples whose thread had moved on when its frames were read.
    pub moved: u64,
    /// Samples whose frames were read from where the sample's registers pointed.
    pub at_sample: u64,
    /// Frames marked because the names budget was spent.
    pub over_budget: u64,
}

/// What a sample says of where the VM loop was: its `r14` (the pc), its `r15` (the
/// control frame) and the top of its stack copy (where a C function the loop called
/// saves them).
#[derive(Debug, Clone, Copy)]
pub struct Sampled<'a> {
    /// `r14`.
    pub pc: u64,
    /// `r15`.
    pub cfp: u64,
    /// The stack copy, from the sample's stack pointer.
    pub stack: &'a [u8],
}

/// Bytes at the top of a sample's stack searched for the VM loop's saved pc.
const SAVED_BYTES: usize = 256;
/// Bytes at the top of a sample's stack searched for the current control frame.
const PLACED_BYTES: usize = 16 * 1024;

/// A thread's frames as read: (frame id, FINISH), innermost first, and whether the
/// sample placed them (else its innermost stretch may be from a later moment).
type ReadFrames = Result<(Vec<(u64, bool)>, bool), WalkError>;

/// A frame's name: label, file, line.
type Name = (String, Option<String>, Option<u32>);

/// What a process's library says, once its data can be read (at its first sample).
struct Ready {
    layout: Layout,
    version: String,
    /// `ruby_current_vm_ptr`, in the process.
    vm_ptr: u64,
    /// `ruby_global_symbols`, in the process, if found and checked.
    table: Option<u64>,
    /// Core classes by their VALUE.
    classes: HashMap<u64, String>,
    /// The sample count when `classes` was last read.
    classes_at: u64,
    /// The IDs of the instance variables that name a class, once learned.
    ivar_ids: IvarIds,
}

/// One Ruby process.
struct Ruby {
    mem: Arc<dyn Memory + Send>,
    path: String,
    syms: Arc<Symbols>,
    bias: u64,
    /// Where the library's code is mapped.
    text: (u64, u64),
    ready: Option<Result<Ready, RubyError>>,
    /// (iseq, body) → what it says.
    iseqs: Lru<(u64, u64), Arc<IseqInfo>>,
    /// Method entry → frame id.
    methods: Lru<u64, u64>,
    /// A method's instruction sequence → the class that owns it.
    homes: Lru<u64, u64>,
    /// A class → what goes before its methods' names (`Greeter#`).
    owners: Lru<u64, String>,
    /// Where the instructions of each sequence read are: start → (end, iseq).
    by_code: std::collections::BTreeMap<u64, (u64, u64)>,
    /// What called each sequence at each place in the VM stack, as read where a
    /// sample's registers pointed: (control frame, iseq) → the caller's iseq or
    /// method entry.
    callers: HashMap<(u64, u64), u64>,
    meter: Meter,
    trips: Trips,
    ids: HashMap<Name, u64>,
    names: HashMap<u64, Name>,
    next_id: u64,
    samples: u64,
    stats: RubyStats,
}

/// The Ruby frames of every Ruby process recorded.
#[derive(Default)]
pub struct RubyFrames {
    procs: HashMap<u32, Ruby>,
    refused: HashMap<u32, (String, RubyError)>,
    /// Each library's symbols, by path and size.
    libs: HashMap<(String, usize), Result<Arc<Symbols>, RubyError>>,
    /// Frames read as samples were drained, by (tid, time): (frame id, FINISH).
    ahead: HashMap<(u32, u64), ReadFrames>,
    budgets: Budgets,
    pool: Pool,
    scratch: Vec<RawFrame>,
    /// What was done, in all.
    pub stats: RubyStats,
}

impl std::fmt::Debug for RubyFrames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RubyFrames")
            .field("procs", &self.procs.len())
            .field("stats", &self.stats)
            .finish()
    }
}

impl RubyFrames {
    /// Every process met from now on is read within `budgets`.
    pub fn set_budgets(&mut self, budgets: Budgets) {
        self.budgets = budgets;
    }

    /// Process `pid` mapped `path` (a `libruby` or a static `ruby`: its ELF `image`)
    /// at load bias `bias`, its code over `text`; `mem` reads the process.
    pub fn ruby_mapped(
        &mut self,
        pid: u32,
        (path, image): (&str, &[u8]),
        (bias, text): (u64, (u64, u64)),
        mem: impl FnOnce() -> Option<Box<dyn Memory + Send>>,
    ) {
        let syms = self
            .libs
            .entry((path.to_owned(), image.len()))
            .or_insert_with(|| Symbols::from_elf(image).map(Arc::new))
            .clone();
        // A `ruby` executable linked to libruby has none of these: not refused.
        if matches!(syms, Err(RubyError::Missing(_))) && !path.contains("libruby") {
            return;
        }
        self.ruby_found(pid, path, syms, (bias, text), mem);
    }

    /// As [`RubyFrames::ruby_mapped`], with the library's symbols read already (or
    /// why they could not be).
    pub fn ruby_found(
        &mut self,
        pid: u32,
        path: &str,
        syms: Result<Arc<Symbols>, RubyError>,
        (bias, text): (u64, (u64, u64)),
        mem: impl FnOnce() -> Option<Box<dyn Memory + Send>>,
    ) {
        let syms = match syms {
            Ok(s) => s,
            Err(why) => {
                self.refused.insert(pid, (path.to_owned(), why));
                return;
            }
        };
        let Some(mem) = mem() else { return };
        self.refused.remove(&pid);
        self.procs.insert(
            pid,
            Ruby {
                mem: Arc::from(mem),
                path: path.to_owned(),
                syms,
                bias,
                text,
                ready: None,
                iseqs: Lru::default(),
                methods: Lru::default(),
                homes: Lru::default(),
                owners: Lru::default(),
                by_code: Default::default(),
                callers: HashMap::new(),
                meter: Meter::new(self.pool.clone(), self.budgets),
                trips: Trips::default(),
                ids: HashMap::new(),
                names: HashMap::new(),
                next_id: MOVED_ID + 1,
                samples: 0,
                stats: RubyStats::default(),
            },
        );
    }

    /// Process `pid` was forked by `ppid`: a Ruby process's child (a pre-fork
    /// server's worker) runs the same library at the same place, read through `mem`.
    pub fn forked(
        &mut self,
        ppid: u32,
        pid: u32,
        mem: impl FnOnce() -> Option<Box<dyn Memory + Send>>,
    ) {
        let Some(parent) = self.procs.get(&ppid) else {
            return;
        };
        let (path, syms, at) = (
            parent.path.clone(),
            parent.syms.clone(),
            (parent.bias, parent.text),
        );
        self.ruby_found(pid, &path, Ok(syms), at, mem);
    }

    /// Whether `pid` is a Ruby process whose frames are read.
    pub fn wants(&self, pid: u32) -> bool {
        self.procs.contains_key(&pid)
    }

    /// Whether any process is.
    pub fn any(&self) -> bool {
        !self.procs.is_empty()
    }

    /// The bytes every process's reader keeps now.
    pub fn kept_bytes(&self) -> usize {
        self.pool.kept()
    }

    /// The sample of `pid`/`tid` taken at `time` was just drained: its Ruby frames
    /// are read now. `at` is the sample's pc and control frame registers (`r14`,
    /// `r15`: where the VM loop keeps them), if it has them.
    pub fn read_ahead(&mut self, pid: u32, tid: u32, time: u64, at: Option<Sampled<'_>>) {
        if !self.procs.contains_key(&pid) {
            return;
        }
        if self.ahead.len() >= MAX_AHEAD {
            self.ahead.clear();
        }
        let read = self.read(pid, tid, at);
        self.ahead.insert((tid, time), read);
    }

    /// Reads thread `tid`'s frames, as (frame id, FINISH), innermost first: those of
    /// the sample when its registers `at` (pc, control frame) point at a frame whose
    /// instructions hold that pc and whose blocks' methods are all among its callers
    /// (the VM stack keeps a frame's words after it returns, until a call reuses
    /// them); else those the thread runs now.
    fn read(&mut self, pid: u32, tid: u32, at: Option<Sampled<'_>>) -> ReadFrames {
        let budgets = self.budgets;
        let Some(p) = self.procs.get_mut(&pid) else {
            return Err(WalkError::NoThread);
        };
        p.samples += 1;
        let budget = SampleBudget::new(&budgets);
        let whole = p.mem.clone();
        let mem = Metered::new(&*whole, &budget);
        let ready = p.ready(&mem)?;
        let (l, vm_ptr) = (ready.layout, ready.vm_ptr);
        let out = walk::thread_ec(&mem, &l, vm_ptr, (tid, tid == pid), budgets.walk_nodes)
            .and_then(|ec| {
                let scratch = &mut self.scratch;
                let now = mem.u64_at(ec + l.ec_cfp).ok_or(WalkError::Read)?;
                let sampled = at.and_then(|Sampled { pc, cfp, stack }| {
                    walk::control_frames(&mem, &l, ec, Some(cfp), scratch).ok()?;
                    p.at_sample(&mem, scratch, (pc, now), stack)
                });
                // The current frames stand for the sample's only where the sample
                // knew the current frame: in its control frame register, or saved
                // in its stack copy (by a C function the VM loop called).
                let placed = sampled.is_some()
                    || at.is_none_or(|a| {
                        let top = &a.stack[..a.stack.len().min(PLACED_BYTES)];
                        a.cfp == now
                            || (top.chunks_exact(8)).any(|w| {
                                u64::from_le_bytes(w.try_into().unwrap_or_default()) == now
                            })
                    });
                if sampled.is_some() {
                    p.stats.at_sample += 1;
                } else {
                    walk::control_frames(&mem, &l, ec, None, scratch)?;
                }
                let mut ids = Vec::with_capacity(scratch.len());
                for (i, f) in scratch.iter().enumerate() {
                    let id = match f.raw {
                        Raw::Other => None,
                        Raw::Iseq { iseq, pc, ep } => {
                            // The leaf's line at the sample's own pc.
                            let pc = sampled.filter(|_| i == 0).unwrap_or(pc);
                            Some(p.iseq_id(&mem, (iseq, pc, ep)))
                        }
                        Raw::Cfunc { me } => Some(p.cfunc_id(&mem, me)),
                    };
                    // A frame shown or not, its FINISH ends a stretch.
                    match id {
                        Some(id) => ids.push((id, f.finish)),
                        None if f.finish => ids.push((u64::MAX, true)),
                        None => {}
                    }
                }
                Ok((ids, placed))
            });
        p.trips.spent(budget.spent());
        out
    }

    /// Puts thread `tid`'s Ruby frames (read ahead for its sample at `time`, or now
    /// with the sample's registers `at`: see [`RubyFrames::read_ahead`]) in place of
    /// the `rb_vm_exec` frames among `frames` (a sample of `pid`, leaf first).
    pub fn expand(
        &mut self,
        pid: u32,
        (tid, time, regs): (u32, u64, Option<Sampled<'_>>),
        frames: &mut Vec<Frame>,
    ) {
        let read = self.ahead.remove(&(tid, time));
        let Some(p) = self.procs.get(&pid) else {
            return;
        };
        let (lo, hi) = p.syms.vm_exec;
        let (lo, hi) = (lo.wrapping_add(p.bias), hi.wrapping_add(p.bias));
        let text = p.text;
        let at = |f: &Frame| f.kind.lookup_address(f.addr);
        let execs: Vec<usize> = (frames.iter().enumerate())
            .filter(|(_, f)| f.kind.is_user() && (lo..hi).contains(&at(f)))
            .map(|(i, _)| i)
            .collect();
        if execs.is_empty() {
            return;
        }
        let read = match read {
            Some(r) => r,
            None => self.read(pid, tid, regs),
        };
        let Some(p) = self.procs.get_mut(&pid) else {
            return;
        };
        // The stretches, innermost first.
        let placed = read.as_ref().is_ok_and(|r| r.1);
        let stretches: Option<Vec<Vec<u64>>> = read.ok().map(|(ids, _)| {
            let mut out = vec![Vec::new()];
            for (id, finish) in ids {
                if let Some(last) = out.last_mut()
                    && id != u64::MAX
                {
                    last.push(id);
                }
                if finish {
                    out.push(Vec::new());
                }
            }
            if out.last().is_some_and(Vec::is_empty) {
                out.pop();
            }
            out
        });
        let stretches: Vec<Vec<u64>> = match stretches {
            Some(s) if s.len() == execs.len() && placed => s,
            // The thread moved on between the sample and a read its registers could
            // not place: the outer stretches (all but the innermost of either count,
            // matched from the root) are the ones it had not left; each inner
            // `rb_vm_exec` is marked, never named from another moment.
            Some(s) if !s.is_empty() => {
                let (ne, ns) = (execs.len(), s.len());
                let kept = ne.min(ns) - 1;
                p.stats.moved += 1;
                (0..ne)
                    .map(|j| match j >= ne - kept {
                        true => s[j + ns - ne].clone(),
                        false => vec![MOVED_ID],
                    })
                    .collect()
            }
            _ => {
                p.stats.unreadable += execs.len() as u64;
                vec![vec![UNREADABLE_ID]; execs.len()]
            }
        };
        let frame = |id| Frame {
            kind: FrameKind::Interpreted,
            pid,
            addr: id,
            mapping: None,
        };
        let in_text = |f: &Frame| f.kind.is_user() && (text.0..text.1).contains(&at(f));
        let mut out =
            Vec::with_capacity(frames.len() + stretches.iter().map(Vec::len).sum::<usize>());
        let mut next = execs.iter().copied().zip(&stretches).peekable();
        for (i, f) in frames.iter().enumerate() {
            // The VM loop `rb_vm_exec` called: its stretch stands for it.
            if next.peek().is_some_and(|(e, _)| *e == i + 1) && in_text(f) && !execs.contains(&i) {
                continue;
            }
            match next.peek() {
                Some((e, ids)) if *e == i => {
                    out.extend(ids.iter().map(|&id| frame(id)));
                    p.stats.named += ids.iter().filter(|&&id| id > MOVED_ID).count() as u64;
                    next.next();
                }
                _ => out.push(*f),
            }
        }
        *frames = out;
        self.stats = self
            .procs
            .values()
            .fold(RubyStats::default(), |a, p| RubyStats {
                named: a.named + p.stats.named,
                unreadable: a.unreadable + p.stats.unreadable,
                moved: a.moved + p.stats.moved,
                over_budget: a.over_budget + p.stats.over_budget,
                at_sample: a.at_sample + p.stats.at_sample,
            });
    }

    /// Every sample up to `time` was handled: what was read ahead for them goes.
    pub fn handled_upto(&mut self, time: u64) {
        if !self.ahead.is_empty() {
            self.ahead.retain(|&(_, t), _| t > time);
        }
    }

    /// The names of frame `id` of `pid`.
    pub fn names(&self, pid: u32, id: u64) -> Option<(SymbolSource, Vec<SymbolLine>)> {
        let p = self.procs.get(&pid)?;
        let (function, file, line) = match id {
            UNREADABLE_ID => (UNREADABLE_NAME.to_owned(), None, None),
            OVER_BUDGET_ID => (OVER_BUDGET_NAME.to_owned(), None, None),
            MOVED_ID => (MOVED_NAME.to_owned(), None, None),
            _ => p.names.get(&id)?.clone(),
        };
        let line = SymbolLine {
            function,
            file,
            line,
            inlined: false,
        };
        Some((SymbolSource::Jit, vec![line]))
    }
}

mod names;
mod notes;
mod owners;
