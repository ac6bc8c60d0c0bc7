//! A comparison as JSON for scripts: the inputs, the settings, the verdict and every
//! row with the numbers behind it. Percentages are in percent; a change of a function
//! absent from BASE is `null` (infinite).

use std::io::{self, Write};

use serde::Serialize;

use super::compare::{Comparison, Metric, Unit, Verdict};
use super::input::{InputKind, Run};
use super::table::Sides;

#[derive(Serialize)]
struct Report<'a> {
    regression: bool,
    /// Some function could have risen by the threshold unseen.
    inconclusive: bool,
    /// The verdicts counted, in words.
    tally: String,
    headline: String,
    unit: Unit,
    /// In percent of the BASE value; null without a gate.
    threshold_pct: Option<f64>,
    alpha: f64,
    correction: &'static str,
    min_share_pct: f64,
    /// Whether kernel functions can fail the gate.
    gate_kernel: bool,
    tests: usize,
    /// What each function's rows compare: CPU time (`ns`, `samples`) or `share`.
    /// The CPU model (or host) all the recordings share; null when they differ or
    /// some input is not a recording.
    machine: Option<String>,
    /// Time under an interrupt entry, set apart (the machine's, not compared); null
    /// when compared as functions (--compare-interrupts).
    interrupts: Option<JsonInterrupts>,
    base: Vec<Input<'a>>,
    new: Vec<Input<'a>>,
    rows: Vec<JsonRow<'a>>,
}

#[derive(Serialize)]
struct JsonInterrupts {
    base_samples: u64,
    new_samples: u64,
    /// Of each side's samples, interrupts included, pooled over its runs.
    base_share_pct: f64,
    new_share_pct: f64,
    /// Always `untested`: it is in no row and no share.
    verdict: &'static str,
}

#[derive(Serialize)]
struct Input<'a> {
    path: &'a str,
    kind: InputKind,
    samples: u64,
    /// Null for folded inputs.
    cpu_ns: Option<u64>,
}

#[derive(Serialize)]
struct JsonRow<'a> {
    /// The function, or `[whole run]` for the row of each run's whole CPU time.
    function: &'a str,
    /// The row of the whole run (values in ns whatever `unit` is).
    whole_run: bool,
    metric: Metric,
    /// The self row also stands for the total (equal in every run).
    same_total: bool,
    /// Means per run, in `unit` (shares as fractions).
    base: f64,
    new: f64,
    base_share_pct: f64,
    new_share_pct: f64,
    change_pct: Option<f64>,
    /// The interval of change_pct, at `confidence`; null when untested.
    interval_pct: Option<[f64; 2]>,
    confidence: Option<f64>,
    p_value: Option<f64>,
    log_ratio: f64,
    log_ratio_se: f64,
    /// Null: infinite (normal distribution).
    df: Option<f64>,
    dispersion: [f64; 2],
    /// The run-to-run coefficient of variation the test used (both sides).
    tau: f64,
    /// The smallest rise (in percent) the test would have detected with the
    /// comparison's power, at the row's level; null when untested.
    detectable_pct: Option<f64>,
    verdict: Verdict,
    /// For an inconclusive row: what it could not rule out and what would.
    remedy: Option<String>,
}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

fn input(r: &Run) -> Input<'_> {
    Input {
        path: &r.source,
        kind: r.kind,
        samples: r.samples,
        cpu_ns: (r.kind == InputKind::Recording).then_some(r.cpu_ns),
    }
}

/// Writes the comparison as one JSON object.
pub fn write(c: &Comparison, s: Sides, out: &mut dyn Write) -> io::Result<()> {
    let report = Report {
        regression: c.regressions().next().is_some(),
        inconclusive: c.inconclusive().next().is_some(),
        tally: super::table::tally(c),
        headline: super::table::headline(c),
        unit: c.unit,
        threshold_pct: c.options.threshold.map(|t| t * 100.0),
        alpha: c.options.alpha,
        correction: "weighted-holm",
        min_share_pct: c.options.min_share * 100.0,
        gate_kernel: c.options.gate_kernel,
        tests: c.tests,
        machine: match &c.machine {
            super::compare::Machine::Same(m) => Some(m.clone()),
            _ => None,
        },
        interrupts: c.interrupts.map(|i| JsonInterrupts {
            base_samples: i.base_samples,
            new_samples: i.new_samples,
            base_share_pct: i.base_share * 100.0,
            new_share_pct: i.new_share * 100.0,
            verdict: "untested",
        }),
        base: s.base.iter().map(input).collect(),
        new: s.new.iter().map(input).collect(),
        rows: c
            .rows
            .iter()
            .map(|r| JsonRow {
                function: &r.function,
                whole_run: r.whole_run,
                metric: r.metric,
                same_total: r.same_total,
                base: r.base,
                new: r.new,
                base_share_pct: r.base_share * 100.0,
                new_share_pct: r.new_share * 100.0,
                change_pct: finite(r.change * 100.0),
                interval_pct: r.interval.map(|(lo, hi)| [lo * 100.0, hi * 100.0]),
                confidence: r.level.map(|a| 1.0 - 2.0 * a),
                p_value: r.p_value,
                log_ratio: r.ratio.estimate,
                log_ratio_se: r.ratio.se,
                df: finite(r.ratio.df),
                dispersion: [r.dispersion.0, r.dispersion.1],
                tau: r.tau,
                detectable_pct: r.detectable.and_then(|d| finite(d * 100.0)),
                verdict: r.verdict,
                remedy: super::table::remedy(c, r),
            })
            .collect(),
    };
    serde_json::to_writer_pretty(&mut *out, &report)?;
    writeln!(out)
}
