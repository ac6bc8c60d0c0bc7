//! Outputs: small adapters over one [`Profile`](crate::profile::Profile). Each turns
//! the model into one format; none re-reads the recording or aggregates on its own
//! beyond what its format needs. Filters were applied to the model before.

pub mod flamegraph;
pub mod folded;
pub mod json;
pub mod pprof;
pub mod speedscope;
pub mod timeline;
pub mod top;

use std::borrow::Cow;

use crate::profile::{FrameClass, FunctionIndex, Profile, ThreadIndex, ThreadState};

/// A state's colour in flame graphs and the timeline: running red like on-CPU code,
/// the off-CPU states each a shade of blue.
pub fn state_colour(state: ThreadState) -> (u8, u8, u8) {
    match state {
        ThreadState::Running => (226, 88, 62),
        ThreadState::Runnable => (160, 170, 250),
        ThreadState::Sleep => (125, 200, 240),
        ThreadState::Lock => (40, 70, 200),
        ThreadState::Io => (0, 150, 185),
        ThreadState::Other => (110, 125, 160),
    }
}

/// The off-CPU colours in words, for subtitles.
pub fn state_legend() -> String {
    [
        (ThreadState::Runnable, "lavender"),
        (ThreadState::Sleep, "sky blue"),
        (ThreadState::Lock, "royal blue"),
        (ThreadState::Io, "teal"),
        (ThreadState::Other, "slate"),
    ]
    .iter()
    .map(|(s, c)| format!("{} {c}", s.name()))
    .collect::<Vec<_>>()
    .join(", ")
}

/// `1 thread`, `2 threads`: a count with the noun in the form it takes.
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// What was recorded, in words, for titles, subtitles and footers: `pid 42` for one
/// process, `4 processes of postgres (pids 10, 11, 12, 13)` for several of one
/// program, `5 processes: postgres ×4, bash` for several programs. None when no
/// process had a sample and no pid is known.
pub fn recorded_processes(profile: &Profile, with_pids: bool) -> Option<String> {
    let groups = profile.processes();
    let n: usize = groups.iter().map(|g| g.pids.len()).sum();
    if n <= 1 && !profile.meta.all_cpus() {
        return profile
            .meta
            .pid
            .or(groups.first().map(|g| g.pids[0]))
            .map(|p| format!("pid {p}"));
    }
    let processes = plural(n, "process", "processes");
    let name = |g: &crate::profile::ProcessGroup| crate::text::terminal_line(&g.name).into_owned();
    Some(match groups.as_slice() {
        [] => processes,
        [g] if with_pids => {
            const SHOWN: usize = 8;
            let mut pids: Vec<String> = g.pids.iter().take(SHOWN).map(u32::to_string).collect();
            if g.pids.len() > SHOWN {
                pids.push(format!("{} more", g.pids.len() - SHOWN));
            }
            format!("{processes} of {} (pids {})", name(g), pids.join(", "))
        }
        [g] => format!("{processes} of {}", name(g)),
        gs => {
            const SHOWN: usize = 3;
            let mut names: Vec<String> = gs
                .iter()
                .take(SHOWN)
                .map(|g| match g.pids.len() {
                    1 => name(g),
                    k => format!("{} ×{k}", name(g)),
                })
                .collect();
            if gs.len() > SHOWN {
                names.push(format!(
                    "{} more",
                    plural(gs.len() - SHOWN, "program", "programs")
                ));
            }
            format!("{processes}: {}", names.join(", "))
        }
    })
}

/// How stacks are rooted at their processes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ProcessRoots {
    /// Not at all: every process's stacks merge.
    #[default]
    None,
    /// At the process's name: processes of one program (PostgreSQL's backends, a
    /// pre-fork server's workers) merge into one tower, as perf's pipeline
    /// (`stackcollapse-perf.pl`, `perf report --sort comm`) shows them.
    ByName,
    /// At the process's name, then `pid N`: one tower per process.
    ByPid,
}

/// Frames put under every stack of a thread: optionally its process (name, then
/// `pid N` when rooted by pid), then optionally the thread (a runtime's own thread
/// under its group, `[JVM]` then `[GC]`; its name, then `tid N`).
pub(crate) fn root_names(
    profile: &Profile,
    thread: ThreadIndex,
    processes: ProcessRoots,
    per_thread: bool,
) -> Vec<String> {
    let t = profile.thread(thread);
    let mut v = Vec::new();
    if processes != ProcessRoots::None {
        v.push(t.process.clone());
    }
    if processes == ProcessRoots::ByPid {
        v.push(format!("pid {}", t.pid));
    }
    if per_thread {
        if let Some(g) = t.group {
            v.extend(g.root_frames());
        }
        v.push(t.name.clone());
        v.push(format!("tid {}", t.tid));
    }
    v
}

/// A function's name with inferno's colour suffix (`_[k]`, `_[j]`, `_[i]`).
pub(crate) fn suffixed_name(profile: &Profile, function: FunctionIndex) -> Cow<'_, str> {
    let func = profile.function(function);
    let suffix = func.class.folded_suffix();
    if suffix.is_empty() {
        Cow::Borrowed(func.name.as_str())
    } else {
        Cow::Owned(format!("{}{suffix}", func.name))
    }
}

/// A readable tag for a function's kind in tables (empty for native code).
pub fn kind_tag(class: FrameClass) -> &'static str {
    match class {
        FrameClass::Native | FrameClass::Marker => "",
        FrameClass::OffCpu(_) => "[off-cpu]",
        FrameClass::Inlined => "[inlined]",
        FrameClass::Kernel => "[kernel]",
        FrameClass::Jit => "[jit]",
    }
}

/// The kind as a word, for JSON.
pub fn kind_word(class: FrameClass) -> &'static str {
    match class {
        FrameClass::Native => "native",
        FrameClass::Inlined => "inlined",
        FrameClass::Kernel => "kernel",
        FrameClass::Jit => "jit",
        FrameClass::Marker => "marker",
        FrameClass::OffCpu(_) => "off-cpu",
    }
}

#[cfg(test)]
mod offcpu_tests;
