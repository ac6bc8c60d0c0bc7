//! Outputs: small adapters over one [`Profile`]. Each turns
//! the model into one format; none re-reads the recording or aggregates on its own
//! beyond what its format needs. Filters were applied to the model before.

pub mod flamegraph;
pub mod folded;
pub mod json;
pub mod otlp;
pub mod pprof;
pub(crate) mod protobuf;
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
        ThreadState::Wait => (190, 215, 230),
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
        (ThreadState::Wait, "pale blue"),
        (ThreadState::Lock, "royal blue"),
        (ThreadState::Io, "teal"),
        (ThreadState::Other, "slate"),
    ]
    .iter()
    .map(|(s, c)| format!("{} {c}", s.name()))
    .collect::<Vec<_>>()
    .join(", ")
}

/// The notes the recorder wrote for every report to say again (code no perf map
/// named, budgets that held a runtime reader, runtimes it could not read): the
/// summary's, none for a recording cut short.
pub fn notes(profile: &Profile) -> &[String] {
    profile.summary.as_ref().map_or(&[], |s| &s.notes[..])
}

/// The notes for a one-line place (the SVG's subtitle): `1 note: TEXT`, or `3 notes:
/// TEXT; TEXT; …`, each note cut at 150 characters, two at most; None without notes.
pub fn notes_line(profile: &Profile) -> Option<String> {
    let notes = notes(profile);
    if notes.is_empty() {
        return None;
    }
    let cut = |n: &str| {
        if n.chars().count() > 150 {
            let short: String = n.chars().take(149).collect();
            format!("{short}…")
        } else {
            n.to_owned()
        }
    };
    let mut shown: Vec<String> = notes.iter().take(2).map(|n| cut(n)).collect();
    if notes.len() > 2 {
        shown.push("…".to_owned());
    }
    Some(format!(
        "{}: {}",
        plural(notes.len(), "note", "notes"),
        shown.join("; ")
    ))
}

pub use crate::text::plural;

/// What was recorded, in words, for titles, subtitles and footers: `pid 42` for one
/// target process (`pid 42 and 2 processes it started: worker ×2` when its children
/// have samples), `4 processes of postgres (pids 10, 11, 12, 13)` for several attached
/// processes of one program, `5 processes: postgres ×4, bash` for several programs
/// (`-a`). The target pids come from the recording, whatever filters kept; the names
/// from the samples. None when there is nothing to say.
pub fn recorded_processes(profile: &Profile, with_pids: bool) -> Option<String> {
    let groups = profile.processes();
    let name = |g: &crate::profile::ProcessGroup| crate::text::terminal_line(&g.name).into_owned();
    // `postgres ×4, bash`: the programs with the most processes first.
    let names = |gs: &[crate::profile::ProcessGroup]| {
        const SHOWN: usize = 3;
        let mut v: Vec<String> = gs
            .iter()
            .take(SHOWN)
            .map(|g| match g.pids.len() {
                1 => name(g),
                k => format!("{} ×{k}", name(g)),
            })
            .collect();
        if gs.len() > SHOWN {
            let more = gs.len() - SHOWN;
            let noun = if more == 1 { "program" } else { "programs" };
            v.push(format!("{more} more {noun}"));
        }
        v.join(", ")
    };
    let pid_list = |pids: &[u32]| {
        const SHOWN: usize = 8;
        let mut v: Vec<String> = pids.iter().take(SHOWN).map(u32::to_string).collect();
        if pids.len() > SHOWN {
            v.push(format!("{} more", pids.len() - SHOWN));
        }
        v.join(", ")
    };
    let m = &profile.meta;
    if m.pids.len() > 1 {
        // Several attached processes: counted from the recording, named by samples.
        let processes = plural(m.pids.len(), "process", "processes");
        let mut s = match groups.as_slice() {
            [g] => format!("{processes} of {}", name(g)),
            [] => processes,
            gs => format!("{processes}: {}", names(gs)),
        };
        if with_pids {
            s.push_str(&format!(" (pids {})", pid_list(&m.pids)));
        }
        return Some(s);
    }
    if m.all_cpus() {
        let n: usize = groups.iter().map(|g| g.pids.len()).sum();
        return Some(format!(
            "{}: {}",
            plural(n, "process", "processes"),
            names(&groups)
        ));
    }
    let pid = m.pid.or(groups.first().map(|g| g.pids[0]))?;
    let others: Vec<crate::profile::ProcessGroup> = groups
        .into_iter()
        .filter_map(|mut g| {
            g.pids.retain(|&p| p != pid);
            (!g.pids.is_empty()).then_some(g)
        })
        .collect();
    let n: usize = others.iter().map(|g| g.pids.len()).sum();
    Some(if n == 0 {
        format!("pid {pid}")
    } else {
        format!(
            "pid {pid} and {} it started: {}",
            plural(n, "process", "processes"),
            names(&others)
        )
    })
}

/// How stacks are rooted at their processes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ProcessRoots {
    /// Not at all: every process's stacks merge.
    #[default]
    None,
    /// At the process's program ([`crate::profile::Thread::program`], its
    /// executable's path when recorded, else its name): processes of one program
    /// (PostgreSQL's backends, a pre-fork server's workers) merge into one tower, and
    /// a process that renames its threads `postgres` does not join them.
    ByName,
    /// At the process's name, then `pid N`: one tower per process.
    ByPid,
}

/// Frames put under every stack of a thread: optionally its service (`service NAME`,
/// when the recording knows it), optionally its process (its program, or its name
/// then `pid N` when rooted by pid), then optionally the thread (a runtime's own thread
/// under its group, `[JVM]` then `[GC]`; its name, then `tid N`).
pub(crate) fn root_names(
    profile: &Profile,
    thread: ThreadIndex,
    per_service: bool,
    processes: ProcessRoots,
    per_thread: bool,
) -> Vec<String> {
    let t = profile.thread(thread);
    let mut v = Vec::new();
    if per_service && let Some(s) = &t.service {
        v.push(format!("service {s}"));
    }
    match processes {
        ProcessRoots::None => {}
        // The program, not the name a thread can set: a thread renamed `postgres`
        // does not merge into postgres's tower.
        ProcessRoots::ByName => v.push(t.program.clone()),
        ProcessRoots::ByPid => v.push(t.process.clone()),
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
        FrameClass::Python => "[python]",
        FrameClass::Interpreted => "[interpreted]",
    }
}

/// The kind as a word, for JSON.
pub fn kind_word(class: FrameClass) -> &'static str {
    match class {
        FrameClass::Native => "native",
        FrameClass::Inlined => "inlined",
        FrameClass::Kernel => "kernel",
        FrameClass::Jit => "jit",
        FrameClass::Python => "python",
        FrameClass::Interpreted => "interpreted",
        FrameClass::Marker => "marker",
        FrameClass::OffCpu(_) => "off-cpu",
    }
}

#[cfg(test)]
mod tests;
