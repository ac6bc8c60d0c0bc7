//! Folded stacks, one line per unique stack: `root;caller;leaf COUNT`, the input of
//! inferno, flamegraph.pl and speedscope. Frames carry inferno's colour suffixes
//! (`_[k]` kernel, `_[j]` JIT, `_[i]` inlined); a `;` inside a name becomes `:`.
//! An off-CPU stack ends in one `[off-cpu: STATE]` frame, under the frame where the
//! thread blocked.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};

use super::{root_names, suffixed_name};
use crate::profile::Profile;

/// How to fold.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct FoldedOptions {
    /// Root each stack at its thread name, then `tid N`. Default is false.
    pub per_thread: bool,
    /// Root each stack at its process name, then `pid N` (before the thread when both
    /// are set). Default is false.
    pub per_process: bool,
    /// Leaf first: stacks merge by the function that was running, its callers above
    /// it. Thread and process roots stay at the root. Default is false.
    pub reverse: bool,
}

impl FoldedOptions {
    pub fn per_thread(per_thread: bool) -> Self {
        FoldedOptions {
            per_thread,
            ..Default::default()
        }
    }
}

/// Samples and CPU time of one folded line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub samples: u64,
    /// Nanoseconds of CPU time.
    pub weight: u64,
}

/// Unique stacks with their sample counts, sorted by stack.
pub fn fold(profile: &Profile, opts: FoldedOptions) -> Vec<(String, u64)> {
    fold_counts(profile, opts)
        .into_iter()
        .map(|(s, c)| (s, c.samples))
        .collect()
}

/// Unique stacks with their sample counts and CPU time, sorted by stack.
pub fn fold_counts(profile: &Profile, opts: FoldedOptions) -> Vec<(String, Counts)> {
    // Count per (thread?, stack) first, then render each distinct key once.
    let rooted = opts.per_thread || opts.per_process;
    let mut counts: HashMap<(Option<u32>, u32), Counts> = HashMap::new();
    for s in &profile.samples {
        let thread = rooted.then_some(s.thread);
        let c = counts.entry((thread, s.stack)).or_default();
        c.samples += 1;
        c.weight += s.weight;
    }
    // Every function's folded name (suffixed, `;` made `:`), rendered once.
    let rendered: Vec<String> = (0..profile.functions.len() as u32)
        .map(|f| suffixed_name(profile, f).replace(';', ":"))
        .collect();
    let mut lines: BTreeMap<String, Counts> = BTreeMap::new();
    for ((thread, stack), n) in counts {
        let roots: Vec<String> = thread
            .map(|t| root_names(profile, t, opts.per_process, opts.per_thread))
            .unwrap_or_default()
            .into_iter()
            .map(|n| n.replace(';', ":"))
            .collect();
        let mut parts: Vec<&str> = roots.iter().map(String::as_str).collect();
        let first = parts.len();
        let funcs = &profile.stacks[stack as usize];
        parts.extend(funcs.iter().map(|&f| rendered[f as usize].as_str()));
        if parts.len() == first {
            parts.push("[no stack]");
        }
        if opts.reverse {
            parts[first..].reverse();
        }
        let c = lines.entry(parts.join(";")).or_default();
        c.samples += n.samples;
        c.weight += n.weight;
    }
    lines.into_iter().collect()
}

/// Writes one line per stack: COUNT is samples, or in an off-CPU recording (wall
/// time) nanoseconds, so off-CPU stacks weigh what they waited.
pub fn write(profile: &Profile, opts: FoldedOptions, out: &mut dyn Write) -> io::Result<()> {
    let mut out = io::BufWriter::new(out);
    let wall = profile.is_wall_time();
    for (stack, c) in fold_counts(profile, opts) {
        let n = if wall { c.weight } else { c.samples };
        writeln!(out, "{stack} {n}")?;
    }
    out.flush()
}
