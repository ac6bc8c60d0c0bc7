//! The seam every runtime's frames are named through. A runtime stage (CPython's
//! [`super::python::PythonFrames`], HotSpot's [`JavaFrames`], V8's [`V8Frames`], CRuby's) puts frames of kind
//! [`FrameKind::Interpreted`] into a recording's stacks, each frame's address an id the
//! stage gave; [`names_from`] asks every stage for the names of the frames it gave, and
//! [`notes`] for what the summary must say of each (processes it could not read,
//! budgets that held it). The recorder's end, its live windows (`top`, `--push`),
//! perf.data and `dump` all name runtime frames here, so a runtime added is one more
//! implementation of [`RuntimeFrames`], not one more loop in each of them.

use crate::format::{Frame, FrameId, FrameKind, FrameSymbols, SymbolLine, SymbolSource};
use crate::interp::Memory;
use crate::interp::jvm::JavaFrames;
use crate::interp::jvm::frames::UNKNOWN_NAME;
use crate::interp::v8::V8Frames;

/// A runtime stage, as the namers see it.
pub(crate) trait RuntimeFrames {
    /// The names of the frames this stage gave among `frames` (the recording's, by
    /// frame id) from id `first` on.
    fn names_from(&self, frames: &[Frame], first: usize) -> Vec<FrameSymbols>;

    /// What the summary says of this stage's processes.
    fn runtime_notes(&self) -> Vec<String>;
}

/// The names every stage of `runtimes` gives the frames among `frames` from id
/// `first` on, sorted by frame id.
pub(crate) fn names_from(
    runtimes: &[&dyn RuntimeFrames],
    frames: &[Frame],
    first: usize,
) -> Vec<FrameSymbols> {
    let mut out: Vec<FrameSymbols> = runtimes
        .iter()
        .flat_map(|r| r.names_from(frames, first))
        .collect();
    out.sort_by_key(|s| s.frame);
    out
}

/// What every stage of `runtimes` says for the summary.
pub(crate) fn notes(runtimes: &[&dyn RuntimeFrames]) -> Vec<String> {
    runtimes.iter().flat_map(|r| r.runtime_notes()).collect()
}

impl<M: Memory> RuntimeFrames for super::python::PythonFrames<M> {
    fn names_from(&self, frames: &[Frame], first: usize) -> Vec<FrameSymbols> {
        self.symbols_from(frames, first)
    }

    fn runtime_notes(&self) -> Vec<String> {
        self.notes()
    }
}

impl RuntimeFrames for JavaFrames {
    fn names_from(&self, frames: &[Frame], first: usize) -> Vec<FrameSymbols> {
        let named = frames.iter().enumerate().skip(first).filter_map(|(i, f)| {
            let (source, lines) =
                (f.kind == FrameKind::Interpreted).then(|| self.names(f.pid, f.addr))??;
            (!lines.is_empty()).then_some(FrameSymbols {
                frame: i as FrameId,
                source,
                lines,
            })
        });
        named.collect()
    }

    fn runtime_notes(&self) -> Vec<String> {
        let mut out = self.notes();
        let s = self.stats;
        if s.unknown > 0 {
            let all = s.named + s.unknown;
            out.push(format!(
                "{} of {all} interpreted Java frames ({:.1}%) are {UNKNOWN_NAME}: their \
                 method could not be read and checked (the JVM had exited, classes were \
                 unloaded since, or the frame was being set up)",
                s.unknown,
                s.unknown as f64 * 100.0 / all as f64,
            ));
        }
        out
    }
}

impl RuntimeFrames for V8Frames {
    fn names_from(&self, frames: &[Frame], first: usize) -> Vec<FrameSymbols> {
        by_id(frames, first, |pid, id| self.names(pid, id))
    }

    fn runtime_notes(&self) -> Vec<String> {
        self.notes()
    }
}

impl RuntimeFrames for crate::interp::ruby::RubyFrames {
    fn names_from(&self, frames: &[Frame], first: usize) -> Vec<FrameSymbols> {
        by_id(frames, first, |pid, id| self.names(pid, id))
    }

    fn runtime_notes(&self) -> Vec<String> {
        self.notes()
    }
}

/// The names `names` gives the interpreted frames among `frames` from id `first` on,
/// each frame's address the id a stage gave it (V8's and Ruby's stages).
fn by_id(
    frames: &[Frame],
    first: usize,
    names: impl Fn(u32, u64) -> Option<(SymbolSource, Vec<SymbolLine>)>,
) -> Vec<FrameSymbols> {
    let named = frames.iter().enumerate().skip(first).filter_map(|(i, f)| {
        let (source, lines) =
            (f.kind == FrameKind::Interpreted).then(|| names(f.pid, f.addr))??;
        Some(FrameSymbols {
            frame: i as FrameId,
            source,
            lines,
        })
    });
    named.collect()
}
