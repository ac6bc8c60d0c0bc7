//! Outputs: small adapters over one [`Profile`]. Each turns
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

/// Frames put under every stack of a thread: optionally its service (`service NAME`,
/// when the recording knows it), optionally its process (name, then `pid N`), then optionally the thread (a runtime's own thread under its group, `[JVM]`
/// then `[GC]`; its name, then `tid N`).
pub(crate) fn root_names(
    profile: &Profile,
    thread: ThreadIndex,
    per_service: bool,
    per_process: bool,
    per_thread: bool,
) -> Vec<String> {
    let t = profile.thread(thread);
    let mut v = Vec::new();
    if per_service && let Some(s) = &t.service {
        v.push(format!("service {s}"));
    }
    if per_process {
        v.push(t.process.clone());
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
