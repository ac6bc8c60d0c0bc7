//! The short account of a comparison, for a CI log or a pull-request comment: the
//! rows that decide the verdict, one line counting the rest and saying where the
//! full table is, a note when the machines differ, and every inconclusive row in one
//! line. [`super::table`] lays them out as text or markdown.

use super::compare::{Comparison, Machine, Row, Unit, Verdict};
use crate::text::terminal_line;

/// Rows the short output shows besides the whole run.
pub const SHORT_ROWS: usize = 6;

/// The rows of the short output: the whole run, then the rows that decide the
/// verdict (regressions; without any, the rows found slower), at most [`SHORT_ROWS`].
pub(super) fn deciding(c: &Comparison) -> Vec<&Row> {
    let mut rows: Vec<&Row> = c.rows.iter().filter(|r| r.whole_run).collect();
    let pick = if c.regressions().next().is_some() {
        Verdict::Regression
    } else {
        Verdict::Slower
    };
    rows.extend(
        c.rows
            .iter()
            .filter(|r| !r.whole_run && r.verdict == pick)
            .take(SHORT_ROWS),
    );
    rows
}

/// The machine note: what the times of the runs can be compared with, when it
/// matters.
pub fn machine_note(c: &Comparison) -> Option<String> {
    match &c.machine {
        Machine::Different(a, b) => Some(format!(
            "note: the runs were recorded on different machines ({} and {}): CPU times are not comparable, so functions compare by share and the whole run does not gate (--absolute to compare times anyway).",
            terminal_line(a),
            terminal_line(b)
        )),
        Machine::Same(_) if c.runs.0 < 2 || c.runs.1 < 2 => Some(
            "note: one run a side cannot tell a slower program from a slower machine: functions compare by share and the whole run is untested; record 3 runs a side, interleaved (docs/ci.md)."
                .to_owned(),
        ),
        _ => None,
    }
}

/// The inconclusive rows in one line: how many, how large, and what would judge them.
pub fn inconclusive_summary(c: &Comparison) -> Option<String> {
    let t = c.options.threshold?;
    let rows: Vec<&Row> = c.inconclusive().collect();
    if rows.is_empty() {
        return None;
    }
    let largest = rows
        .iter()
        .filter(|r| !r.whole_run)
        .map(|r| r.base_share.max(r.new_share))
        .fold(0.0, f64::max);
    // The median row by how much its variance must shrink to see the threshold, and
    // whether more samples could do it (sampling noise dominates) or only more runs.
    let mut need: Vec<(f64, f64)> = rows
        .iter()
        .filter_map(|r| {
            let d = r.detectable?;
            Some((
                ((1.0 + d).ln() / (1.0 + t).ln()).powi(2),
                r.ratio.sampling_part,
            ))
        })
        .collect();
    need.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (factor, sampling) = need.get(need.len() / 2).copied().unwrap_or((1.0, 1.0));
    let more = if sampling * factor > factor - 1.0 {
        format!(
            "about {}x the samples per side (a higher -F, longer runs) or the runs",
            round_up(factor)
        )
    } else {
        format!("about {}x the runs", round_up(factor))
    };
    let judged = c
        .rows
        .iter()
        .filter(|r| !r.whole_run && matches!(r.verdict, Verdict::Unchanged))
        .map(|r| r.base_share.max(r.new_share))
        .fold(f64::INFINITY, f64::min);
    let seen = if judged.is_finite() {
        format!(
            "; these runs rule it out for functions from {:.1}% of CPU",
            judged * 100.0
        )
    } else {
        String::new()
    };
    Some(format!(
        "inconclusive: {} row{} (up to {:.1}% of CPU) could not rule out a {} rise{seen}; the median one needs {more} ({}+{} runs now).",
        rows.len(),
        if rows.len() == 1 { "" } else { "s" },
        largest * 100.0,
        pct(t),
        c.runs.0,
        c.runs.1,
    ))
}

/// The short account of what was compared: runs, basis, gate, error rate.
pub fn short_compared(c: &Comparison) -> String {
    let basis = match (&c.machine, c.unit) {
        (Machine::Same(m), Unit::Ns) => format!(
            "CPU time per run (one kind of machine: {})",
            terminal_line(m)
        ),
        (_, Unit::Ns) => "CPU time per run".to_owned(),
        (_, Unit::Share) => "share of each run's CPU".to_owned(),
        (_, Unit::Samples) => "samples per run".to_owned(),
    };
    let gate = match c.options.threshold {
        Some(t) => format!("gate {}", pct(t)),
        None => "no gate".to_owned(),
    };
    format!(
        "NEW {} vs BASE {} runs; functions by {basis}; {gate}, {:.0}% false-alarm rate (the Gate paragraph of `profile diff --help`).",
        c.runs.1,
        c.runs.0,
        c.options.alpha * 100.0
    )
}

/// The counts line: how the other rows came out and where the full table is.
pub(super) fn others(c: &Comparison, full: &str) -> String {
    let shown = deciding(c);
    let mut parts = Vec::new();
    for (v, word) in [
        (Verdict::Regression, "more regressions"),
        (Verdict::Slower, "slower"),
        (Verdict::Faster, "faster"),
        (Verdict::Unchanged, "unchanged"),
        (Verdict::Inconclusive, "inconclusive"),
    ] {
        let n = c
            .rows
            .iter()
            .filter(|r| r.verdict == v && !shown.iter().any(|s| std::ptr::eq(*s, *r)))
            .count();
        if n > 0 {
            parts.push(format!("{n} {word}"));
        }
    }
    let small = c.count(Verdict::Small);
    if small > 0 {
        parts.push(format!(
            "{small} untested (under {:.1}% of CPU)",
            c.options.min_share * 100.0
        ));
    }
    format!("Other rows: {}; full table: {full}.", parts.join(", "))
}

/// A relative change as `+18.2%`; `new` for a function absent from BASE.
pub(super) fn pct(x: f64) -> String {
    if x.is_infinite() {
        "new".to_owned()
    } else if x >= 9.995 {
        // Past +999%, a factor reads better than a percentage.
        format!("x{:.0}", x + 1.0)
    } else {
        format!("{:+.1}%", x * 100.0)
    }
}

/// `x` rounded up, to one decimal below 10.
pub(super) fn round_up(x: f64) -> String {
    if x < 10.0 {
        format!("{:.1}", (x * 10.0).ceil() / 10.0)
    } else {
        format!("{:.0}", x.ceil())
    }
}
