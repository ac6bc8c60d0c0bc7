//! The differential flame graph: NEW's stacks, each frame coloured by how much more
//! (red) or less (blue) CPU it has than in BASE. inferno's `differential` module
//! joins the two folded profiles into its two-count format and its flame graph
//! colours by the difference; the direction is fixed (BASE first, NEW second, so red
//! is always more in NEW) and the title says so. Stacks found only in BASE have no
//! width in NEW's graph and do not show.

use std::collections::BTreeMap;
use std::io::{self, Write};

use super::input::Run;

/// Sums the runs of one side per stack: sample counts, or CPU microseconds.
/// Stacks are matched across runs by their text, made here for inferno's
/// differential folding, the last step.
fn sum(runs: &[Run], cpu_us: bool) -> BTreeMap<String, f64> {
    let mut m: BTreeMap<String, f64> = BTreeMap::new();
    for r in runs {
        for (stack, w) in &r.stacks {
            // Frames of a folded file are any text: XML-safe for the SVG.
            let line = crate::text::xml_chars(&r.line(stack)).into_owned();
            *m.entry(line).or_default() += if cpu_us {
                w.cpu_ns as f64 / 1e3
            } else {
                w.samples as f64
            };
        }
    }
    m
}

fn folded(m: &BTreeMap<String, f64>, scale: f64) -> String {
    let mut s = String::new();
    for (stack, v) in m {
        let v = (v * scale).round() as u64;
        if v > 0 {
            s.push_str(stack);
            s.push(' ');
            s.push_str(&v.to_string());
            s.push('\n');
        }
    }
    s
}

/// Writes the SVG. `absolute`: compare CPU time (per run, BASE scaled to NEW's
/// number of runs); otherwise shares (BASE scaled to NEW's total).
pub fn write(base: &[Run], new: &[Run], absolute: bool, out: &mut dyn Write) -> io::Result<()> {
    let cpu_us = absolute && base.iter().chain(new).all(|r| r.cpu_ns > 0);
    let (b, n) = (sum(base, cpu_us), sum(new, cpu_us));
    let scale = if absolute {
        new.len() as f64 / base.len() as f64
    } else {
        let (tb, tn): (f64, f64) = (b.values().sum(), n.values().sum());
        if tb > 0.0 { tn / tb } else { 1.0 }
    };
    let mut joined = Vec::new();
    let opts = inferno::differential::Options::default();
    inferno::differential::from_readers(
        opts,
        folded(&b, scale).as_bytes(),
        folded(&n, 1.0).as_bytes(),
        &mut joined,
    )?;
    let mut o = inferno::flamegraph::Options::default();
    o.title = "NEW vs BASE: red = more in NEW".to_owned();
    // Name the files when they fit on the line, else count them.
    let names = |runs: &[Run]| {
        let list: Vec<&str> = runs.iter().map(|r| r.source.as_str()).collect();
        let list = list.join(", ");
        if list.chars().count() <= 40 {
            list
        } else {
            format!("{} runs", runs.len())
        }
    };
    let subtitle = format!(
        "widths: NEW ({}) · colour: {} against BASE ({}) · blue = less in NEW",
        names(new),
        if absolute {
            "CPU time per run"
        } else {
            "share of CPU"
        },
        names(base)
    );
    o.subtitle = Some(crate::text::xml_chars(&subtitle).into_owned());
    o.count_name = if cpu_us { "µs of CPU" } else { "samples" }.to_owned();
    let text = String::from_utf8_lossy(&joined);
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    inferno::flamegraph::from_lines(&mut o, lines.iter().copied(), out)
}
