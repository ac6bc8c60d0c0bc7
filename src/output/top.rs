//! The top-functions table: per function, self and total CPU time, share and sample
//! count, aligned for a terminal (like `perf report --no-children`, but with both).
//! [`rows`] is the aggregation the JSON output shares.
//!
//! Functions are told apart by name, as pprof and perf do: a function inlined in some
//! places and called in others is one row, marked inlined only when it always was.

use std::collections::HashMap;
use std::io::{self, Write};

use crate::profile::{FrameClass, FunctionIndex, Profile, StackIndex, ThreadState};

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
    /// Total weight by [`ThreadState`] (indexed by its code): all running in CPU-only
    /// profiles.
    pub total_by_state: [u64; ThreadState::COUNT],
}

/// Per-function totals, sorted by self weight (then total, then name). The
/// `[unsampled]` remainder is CPU time no function stands for: it is no row (see
/// [`Profile::coverage`]).
pub fn rows(profile: &Profile) -> Vec<Row> {
    // Per (stack, state): an off-CPU recording may hold the same stack in several
    // states only through its marker frame, but keep them apart regardless.
    let mut per_stack: HashMap<(StackIndex, ThreadState), (u64, u64)> = HashMap::new();
    for s in profile
        .samples
        .iter()
        .filter(|s| !profile.is_unsampled(s.stack))
    {
        let e = per_stack.entry((s.stack, s.state)).or_default();
        e.0 += 1;
        e.1 = e.1.saturating_add(s.weight);
    }
    let key = by_name(profile);
    let mut by_fn: HashMap<FunctionIndex, Row> = HashMap::new();
    // The last stack (+1) each function was counted in: a recursive function counts
    // once per stack in its total, found in time linear in the depth.
    let mut seen = vec![0usize; profile.functions.len()];
    for (i, (&(stack, state), &(n, w))) in per_stack.iter().enumerate() {
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
                let e = &mut r.total_by_state[state as usize];
                *e = e.saturating_add(w);
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
        total_by_state: [0; ThreadState::COUNT],
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

/// Prints the `n` heaviest functions by self time. In an off-CPU profile (wall
/// time) each row also splits its total time by state, one column per state.
pub fn write(profile: &Profile, n: usize, out: &mut dyn Write) -> io::Result<()> {
    if profile.is_wall_time() {
        return write_states(profile, n, out);
    }
    let total = profile.total_weight().max(1) as f64;
    let rows = rows(profile);
    let unsampled = profile.coverage().unsampled_ns;
    if unsampled > 0 {
        writeln!(
            out,
            "Uncovered CPU: {} ({:.1}%) no sample stands for ([unsampled]: threads that ran less than a sample period at a time), not in the rows",
            human_time(unsampled),
            unsampled as f64 * 100.0 / total
        )?;
    }
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
            crate::text::terminal_symbol(&f.name),
            if tag.is_empty() { "" } else { "  " },
            tag,
        )?;
    }
    if rows.len() > n {
        writeln!(out, "... {} more functions", rows.len() - n)?;
    }
    Ok(())
}

/// The table of a wall-time profile: self and total time, then the total split by
/// state (`running` is on-CPU time; the `[off-cpu: STATE]` rows hold each state's
/// whole time as their self time).
fn write_states(profile: &Profile, n: usize, out: &mut dyn Write) -> io::Result<()> {
    let total = profile.total_weight().max(1) as f64;
    let rows = rows(profile);
    write!(
        out,
        "{:>10} {:>6} {:>10} {:>6}",
        "Self", "Self%", "Total", "Total%"
    )?;
    for s in ThreadState::ALL {
        write!(out, " {:>9}", s.name())?;
    }
    writeln!(out, "  Function")?;
    let cell = |ns: u64| {
        if ns == 0 {
            "-".to_owned()
        } else {
            human_time(ns)
        }
    };
    for r in rows.iter().take(n) {
        let f = profile.function(r.function);
        let tag = super::kind_tag(f.class);
        write!(
            out,
            "{:>10} {:>5.1}% {:>10} {:>5.1}%",
            human_time(r.self_weight),
            r.self_weight as f64 * 100.0 / total,
            human_time(r.total_weight),
            r.total_weight as f64 * 100.0 / total,
        )?;
        // In the header's order: the array is by state code.
        for s in ThreadState::ALL {
            write!(out, " {:>9}", cell(r.total_by_state[s as usize]))?;
        }
        writeln!(
            out,
            "  {}{}{}",
            crate::text::terminal_symbol(&f.name),
            if tag.is_empty() || matches!(f.class, FrameClass::OffCpu(_)) {
                ""
            } else {
                "  "
            },
            if matches!(f.class, FrameClass::OffCpu(_)) {
                ""
            } else {
                tag
            },
        )?;
    }
    if rows.len() > n {
        writeln!(out, "... {} more functions", rows.len() - n)?;
    }
    Ok(())
}
