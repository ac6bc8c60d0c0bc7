//! Folded stacks, one line per unique stack: `root;caller;leaf COUNT`, the input of
//! inferno, flamegraph.pl and speedscope. Frames carry inferno's colour suffixes
//! (`_[k]` kernel, `_[j]` JIT, `_[i]` inlined).

use std::collections::BTreeMap;
use std::io::{self, Write};

use super::stack_names;
use crate::profile::Profile;

/// How to fold.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct FoldedOptions {
    /// Root each stack at its thread name, then `tid N`. Default is false.
    pub per_thread: bool,
}

impl FoldedOptions {
    pub fn per_thread(per_thread: bool) -> Self {
        FoldedOptions { per_thread }
    }
}

/// Unique stacks with their sample counts, sorted by stack.
pub fn fold(profile: &Profile, opts: FoldedOptions) -> Vec<(String, u64)> {
    // Count per (thread?, stack) first, then render each distinct key once.
    let mut counts: BTreeMap<(Option<u32>, u32), u64> = BTreeMap::new();
    for s in &profile.samples {
        let thread = opts.per_thread.then_some(s.thread);
        *counts.entry((thread, s.stack)).or_default() += 1;
    }
    let mut lines: BTreeMap<String, u64> = BTreeMap::new();
    for ((thread, stack), n) in counts {
        let names: Vec<_> = stack_names(profile, stack, thread)
            .map(|n| n.replace(';', ":"))
            .collect();
        let key = if names.is_empty() {
            "[no stack]".to_owned()
        } else {
            names.join(";")
        };
        *lines.entry(key).or_default() += n;
    }
    lines.into_iter().collect()
}

pub fn write(profile: &Profile, opts: FoldedOptions, out: &mut dyn Write) -> io::Result<()> {
    let mut out = io::BufWriter::new(out);
    for (stack, n) in fold(profile, opts) {
        writeln!(out, "{stack} {n}")?;
    }
    out.flush()
}
