//! The top-functions table: per function, self and total CPU time, share and sample
//! count, aligned for a terminal (like `perf report --no-children`, but with both).
//! [`rows`] is the aggregation the JSON output shares.
//!
//! Functions are told apart by name, as pprof and perf do: a function inlined in some
//! places and called in others is one row, marked inlined only when it always was.

use std::collections::HashMap;
use std::io::{self, Write};

use crate::profile::{FrameClass, FunctionIndex, Profile, StackIndex};

/// One row of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The function the row stands for, with every function of the same name.
    pub function: FunctionIndex,
    /// Samples with the function running.
    pub self_samples: u64,
    /// CPU nanoseconds with the function running.
    pub self_weight: u64,
    /// Samples with the function on the stack (once per stack when recursive).
    pub total_samples: u64,
    /// CPU nanoseconds with the function on the stack.
    pub total_weight: u64,
}

/// Per-function totals, sorted by self weight (then total, then name).
pub fn rows(profile: &Profile) -> Vec<Row> {
    let mut per_stack: HashMap<StackIndex, (u64, u64)> = HashMap::new();
    for s in &profile.samples {
        let e = per_stack.entry(s.stack).or_default();
        e.0 += 1;
        e.1 = e.1.saturating_add(s.weight);
    }
    let key = by_name(profile);
    let mut by_fn: HashMap<FunctionIndex, Row> = HashMap::new();
    // The last stack (+1) each function was counted in: a recursive function counts
    // once per stack in its total, found in time linear in the depth.
    let mut seen = vec![0usize; profile.functions.len()];
    for (i, (&stack, &(n, w))) in per_stack.iter().enumerate() {
        let frames = profile.stack(stack);
        if let Some(&leaf) = frames.last() {
            let leaf = key[leaf.index()];
            let r = by_fn.entry(leaf).or_insert_with(|| empty(leaf));
            r.self_samples += n;
            r.self_weight = r.self_weight.saturating_add(w);
        }
        for &f in frames {
            let f = key[f.index()];
            if seen[f.index()] != i + 1 {
                seen[f.index()] = i + 1;
                let r = by_fn.entry(f).or_insert_with(|| empty(f));
                r.total_samples += n;
                r.total_weight = r.total_weight.saturating_add(w);
            }
        }
    }
    let mut rows: Vec<Row> = by_fn.into_values().collect();
    rows.sort_by(|a, b| {
        b.self_weight
            .cmp(&a.self_weight)
            .then(b.total_weight.cmp(&a.total_weight))
            .then_with(|| {
                profile
                    .function(a.function)
                    .name
                    .cmp(&profile.function(b.function).name)
            })
    });
    rows
}

/// For each function, the one that stands for its name: one not inlined if there is.
fn by_name(profile: &Profile) -> Vec<FunctionIndex> {
    let rank = |c: FrameClass| u8::from(c == FrameClass::Inlined);
    let mut reps: HashMap<&str, FunctionIndex> = HashMap::new();
    for (i, f) in profile.functions.iter().enumerate() {
        let i = FunctionIndex::next(i);
        let rep = reps.entry(f.name.as_str()).or_insert(i);
        if rank(f.class) < rank(profile.function(*rep).class) {
            *rep = i;
        }
    }
    profile
        .functions
        .iter()
        .map(|f| reps[f.name.as_str()])
        .collect()
}

fn empty(function: FunctionIndex) -> Row {
    Row {
        function,
        self_samples: 0,
        self_weight: 0,
        total_samples: 0,
        total_weight: 0,
    }
}

/// Formats nanoseconds for humans: `812 µs`, `12.3 ms`, `4.56 s`.
pub fn human_time(ns: u64) -> String {
    let ns = ns as f64;
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.1} ms", ns / 1e6)
    } else {
        format!("{:.0} µs", ns / 1e3)
    }
}

/// Prints the `n` heaviest functions by self time.
pub fn write(profile: &Profile, n: usize, out: &mut dyn Write) -> io::Result<()> {
    let total = profile.total_weight().max(1) as f64;
    let rows = rows(profile);
    writeln!(
        out,
        "{:>10} {:>6} {:>10} {:>6} {:>8} {:>8}  Function",
        "Self", "Self%", "Total", "Total%", "Samples", "Total n"
    )?;
    for r in rows.iter().take(n) {
        let f = profile.function(r.function);
        let tag = super::kind_tag(f.class);
        writeln!(
            out,
            "{:>10} {:>5.1}% {:>10} {:>5.1}% {:>8} {:>8}  {}{}{}",
            human_time(r.self_weight),
            r.self_weight as f64 * 100.0 / total,
            human_time(r.total_weight),
            r.total_weight as f64 * 100.0 / total,
            r.self_samples,
            r.total_samples,
            f.name,
            if tag.is_empty() { "" } else { "  " },
            tag,
        )?;
    }
    if rows.len() > n {
        writeln!(out, "... {} more functions", rows.len() - n)?;
    }
    Ok(())
}
