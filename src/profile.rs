//! The in-memory profile every output reads: samples with their thread, time, CPU
//! weight and a root-first stack of display frames. Built once from a
//! [`Recording`](crate::format::Recording): frames get their stored names (inlined
//! functions expanded into frames of their own), or `module+0xoffset` when no name is
//! known, and threads get the name they had when each sample was taken.

use std::collections::HashMap;

use crate::format::{
    FrameKind, FrameSymbols, Meta, Recording, StackId, Summary, SymbolSource, ThreadEvent,
    Truncation,
};

/// What kind of code a display frame is; outputs colour by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FrameClass {
    Native,
    /// Inlined into the frame below it (its caller).
    Inlined,
    Kernel,
    Jit,
    /// A stack marker such as the truncation frame, or a thread root.
    Marker,
}

impl FrameClass {
    /// The suffix inferno's flame graphs colour by (`_[k]` kernel, `_[j]` JIT,
    /// `_[i]` inlined).
    pub fn folded_suffix(self) -> &'static str {
        match self {
            FrameClass::Kernel => "_[k]",
            FrameClass::Jit => "_[j]",
            FrameClass::Inlined => "_[i]",
            FrameClass::Native | FrameClass::Marker => "",
        }
    }
}

/// One function as outputs show it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Function {
    pub name: String,
    pub class: FrameClass,
    pub file: Option<String>,
    pub line: Option<u32>,
}

/// A thread under one name (a renamed thread appears once per name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thread {
    pub pid: u32,
    pub tid: u32,
    pub name: String,
}

/// One sample in the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProfileSample {
    /// Nanoseconds since the start of the recording.
    pub time: u64,
    /// Index into [`Profile::threads`].
    pub thread: u32,
    /// CPU time the sample stands for, in nanoseconds.
    pub weight: u64,
    /// Index into [`Profile::stacks`].
    pub stack: u32,
}

/// How to build the model.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct ProfileOptions {
    /// Tell functions apart by source line (`name:line`). Default is false.
    pub lines: bool,
}

/// The profile every output reads.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    pub meta: Meta,
    pub summary: Option<Summary>,
    pub lost: u64,
    pub damage: Option<String>,
    pub threads: Vec<Thread>,
    pub functions: Vec<Function>,
    /// Stacks as function indices, root first.
    pub stacks: Vec<Vec<u32>>,
    pub samples: Vec<ProfileSample>,
}

impl Profile {
    /// Builds the model from a recording.
    pub fn from_recording(rec: &Recording, opts: ProfileOptions) -> Profile {
        let mut b = Builder {
            rec,
            opts,
            functions: Vec::new(),
            function_ids: HashMap::new(),
            stacks: Vec::new(),
            stack_ids: HashMap::new(),
            frame_cache: HashMap::new(),
        };
        let names = ThreadNames::new(&rec.thread_events);
        let mut threads = Vec::new();
        // A renamed thread is a thread per name: samples go under the name the
        // thread had when they were taken.
        let mut thread_ids: HashMap<(u32, u32, String), u32> = HashMap::new();
        let start = rec.meta.start_time_ns;
        let mut samples = Vec::with_capacity(rec.samples.len());
        for s in &rec.samples {
            let name = names.name_at(s.pid, s.tid, s.time);
            let thread = *thread_ids
                .entry((s.pid, s.tid, name))
                .or_insert_with_key(|k| {
                    threads.push(Thread {
                        pid: s.pid,
                        tid: s.tid,
                        name: k.2.clone(),
                    });
                    (threads.len() - 1) as u32
                });
            let stack = b.stack(s.stack);
            samples.push(ProfileSample {
                time: s.time.saturating_sub(start),
                thread,
                weight: s.weight,
                stack,
            });
        }
        Profile {
            meta: rec.meta.clone(),
            summary: rec.summary.clone(),
            lost: rec.lost,
            damage: rec.damage.clone(),
            threads,
            functions: b.functions,
            stacks: b.stacks,
            samples,
        }
    }

    /// Sum of all sample weights, nanoseconds.
    pub fn total_weight(&self) -> u64 {
        self.samples.iter().map(|s| s.weight).sum()
    }
}

struct Builder<'a> {
    rec: &'a Recording,
    opts: ProfileOptions,
    functions: Vec<Function>,
    function_ids: HashMap<Function, u32>,
    stacks: Vec<Vec<u32>>,
    stack_ids: HashMap<Vec<u32>, u32>,
    /// Display functions of each recording frame, root-most first.
    frame_cache: HashMap<u32, Vec<u32>>,
}

impl Builder<'_> {
    fn stack(&mut self, leaf: Option<StackId>) -> u32 {
        let frames: Vec<u32> = self.rec.stack_frames(leaf).collect();
        let mut out = Vec::with_capacity(frames.len() + 4);
        for &f in frames.iter().rev() {
            let funcs = self.frame(f);
            out.extend_from_slice(funcs);
        }
        let next = self.stacks.len() as u32;
        *self.stack_ids.entry(out.clone()).or_insert_with(|| {
            self.stacks.push(out);
            next
        })
    }

    fn function(&mut self, f: Function) -> u32 {
        let next = self.functions.len() as u32;
        *self.function_ids.entry(f.clone()).or_insert_with(|| {
            self.functions.push(f);
            next
        })
    }

    fn frame(&mut self, id: u32) -> &[u32] {
        if !self.frame_cache.contains_key(&id) {
            let funcs = self.describe(id);
            let ids = funcs.into_iter().map(|f| self.function(f)).collect();
            self.frame_cache.insert(id, ids);
        }
        &self.frame_cache[&id]
    }

    /// The display functions of one recording frame, outermost first.
    fn describe(&self, id: u32) -> Vec<Function> {
        let frame = self.rec.frames[id as usize];
        let plain = |name: String, class| Function {
            name,
            class,
            file: None,
            line: None,
        };
        if frame.kind == FrameKind::Truncated {
            let label = Truncation::from_code(frame.addr).map_or("[truncated]", Truncation::label);
            return vec![plain(label.to_owned(), FrameClass::Marker)];
        }
        if let Some(Some(FrameSymbols { source, lines, .. })) = self.rec.symbols.get(id as usize)
            && !lines.is_empty()
        {
            return lines
                .iter()
                .rev()
                .map(|l| {
                    let class = match source {
                        SymbolSource::Kernel => FrameClass::Kernel,
                        SymbolSource::Jit => FrameClass::Jit,
                        SymbolSource::Native if l.inlined => FrameClass::Inlined,
                        SymbolSource::Native => FrameClass::Native,
                    };
                    let (name, line) = match (self.opts.lines, l.line) {
                        (true, Some(n)) => (format!("{}:{n}", l.function), Some(n)),
                        _ => (l.function.clone(), None),
                    };
                    Function {
                        name,
                        class,
                        file: l.file.clone(),
                        line,
                    }
                })
                .collect();
        }
        if frame.kind == FrameKind::Kernel {
            return vec![plain(
                format!("[kernel]+0x{:x}", frame.addr),
                FrameClass::Kernel,
            )];
        }
        match frame
            .mapping
            .and_then(|m| self.rec.mappings.get(m as usize))
        {
            Some(m) => {
                let module = m
                    .path
                    .rsplit('/')
                    .next()
                    .filter(|s| !s.is_empty())
                    .unwrap_or("[anon]");
                let offset = frame.addr - m.start + m.file_offset;
                let class = if m.path.is_empty()
                    || m.path.starts_with("//anon")
                    || m.path.starts_with("[anon")
                {
                    FrameClass::Jit
                } else {
                    FrameClass::Native
                };
                vec![plain(format!("{module}+0x{offset:x}"), class)]
            }
            None => vec![plain("[unknown]".to_owned(), FrameClass::Native)],
        }
    }
}

/// Thread names over time, from the recording's thread events.
struct ThreadNames {
    /// (pid, tid) -> [(time, name)] in time order.
    names: HashMap<(u32, u32), Vec<(u64, String)>>,
}

impl ThreadNames {
    fn new(events: &[ThreadEvent]) -> ThreadNames {
        let mut names: HashMap<(u32, u32), Vec<(u64, String)>> = HashMap::new();
        for e in events {
            if let ThreadEvent::Name {
                time,
                pid,
                tid,
                name,
            } = e
            {
                names
                    .entry((*pid, *tid))
                    .or_default()
                    .push((*time, name.clone()));
            }
        }
        for v in names.values_mut() {
            v.sort_by_key(|(t, _)| *t);
        }
        ThreadNames { names }
    }

    /// The name a thread had at `time`: its latest name by then, else its first, else
    /// its process's main thread's name (a new thread starts with its creator's name).
    fn name_at(&self, pid: u32, tid: u32, time: u64) -> String {
        let pick = |v: &Vec<(u64, String)>| {
            v.iter()
                .take_while(|(t, _)| *t <= time)
                .last()
                .or(v.first())
                .map(|(_, n)| n.clone())
        };
        self.names
            .get(&(pid, tid))
            .and_then(pick)
            .or_else(|| self.names.get(&(pid, pid)).and_then(pick))
            .unwrap_or_else(|| format!("[tid {tid}]"))
    }
}
