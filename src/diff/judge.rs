//! The comparison's verdicts: the rows big enough to test, tested with a weighted
//! Holm correction over three families (the whole run, the large functions' self
//! rows, the rest), each tested row's interval, detectable rise and verdict; and the
//! rows' order.

use super::row::{Metric, Row, Unit, Verdict};
use super::stats;

/// Self rows at least this share of CPU on either side form the second family of the
/// weighted correction: the functions whose own time is where a regression shows.
pub const LARGE_SHARE: f64 = 0.05;

/// The weights of the correction's three families: the whole run, the large
/// functions' self rows, every other tested row (each family's weight split equally
/// among its rows; an empty family's goes to the others).
pub const FAMILY_WEIGHTS: [f64; 3] = [0.5, 0.35, 0.15];

/// What judging the rows needs of the comparison's options.
pub(super) struct Judging {
    /// Family-wise error rate over all tests.
    pub(super) alpha: f64,
    /// Rows below this share on both sides are not tested.
    pub(super) min_share: f64,
    /// The power below which an untested rise of the threshold is inconclusive.
    pub(super) power: f64,
    /// The gate's threshold, if any.
    pub(super) threshold: Option<f64>,
    /// Kernel functions may fail the gate.
    pub(super) gate_kernel: bool,
    /// The whole run's row may fail the gate.
    pub(super) whole_gates: bool,
}

/// The correction family of a tested row: the whole run, the large self rows, the
/// rest.
fn family(r: &Row) -> usize {
    if r.whole_run {
        0
    } else if r.metric == Metric::SelfTime && r.base_share.max(r.new_share) >= LARGE_SHARE {
        1
    } else {
        2
    }
}

/// Tests the rows that are big enough (the whole run with two runs a side), with the
/// weighted correction, and gives every tested row its interval, level, detectable
/// rise and verdict; untested rows lose their p-value. Returns the number of tests.
pub(super) fn judge(rows: &mut [Row], opts: &Judging) -> usize {
    let tested: Vec<usize> = (0..rows.len())
        .filter(|&i| {
            let r = &rows[i];
            if r.whole_run {
                r.ratio.se.is_finite()
            } else {
                r.base_share.max(r.new_share) >= opts.min_share
            }
        })
        .collect();
    let mut sizes = [0usize; 3];
    for &i in &tested {
        sizes[family(&rows[i])] += 1;
    }
    let weights: Vec<f64> = tested
        .iter()
        .map(|&i| {
            let f = family(&rows[i]);
            FAMILY_WEIGHTS[f] / sizes[f] as f64
        })
        .collect();
    let p: Vec<f64> = tested
        .iter()
        .map(|&i| rows[i].p_value.unwrap_or(1.0))
        .collect();
    let judged = stats::weighted_holm(&p, &weights, opts.alpha);
    for (&i, &(rejected, level)) in tested.iter().zip(&judged) {
        verdict(&mut rows[i], rejected, level, opts);
    }
    for (i, r) in rows.iter_mut().enumerate() {
        if !tested.contains(&i) {
            r.p_value = None;
        }
    }
    tested.len()
}

/// One tested row's interval, level, detectable rise and verdict, given whether its
/// test rejected "no rise" at `level`.
fn verdict(r: &mut Row, rejected: bool, level: f64, opts: &Judging) {
    let (lo, hi) = r.ratio.interval(level);
    r.interval = Some((lo, hi));
    r.level = Some(level);
    // The whole run gates when its times are comparable; kernel functions when
    // asked.
    let gated = if r.whole_run {
        opts.whole_gates
    } else {
        opts.gate_kernel || !r.kernel
    };
    let detectable = r.ratio.detectable_rise(level, opts.power);
    r.detectable = Some(detectable);
    r.verdict = if rejected && (!gated || opts.threshold.is_none_or(|t| r.change < t)) {
        Verdict::Slower
    } else if rejected {
        Verdict::Regression
    } else if hi < 0.0 {
        Verdict::Faster
    } else if gated && opts.threshold.is_some_and(|t| t > 0.0 && detectable > t) {
        Verdict::Inconclusive
    } else {
        Verdict::Unchanged
    };
}

/// The whole run first, then regressions by their relative rise (so the function
/// that rose most, usually the culprit rather than its callers, comes first), then
/// tested rows and then untested ones by how much CPU moved.
pub(super) fn sort_rows(rows: &mut [Row], unit: Unit) {
    let moved = |r: &Row| match unit {
        Unit::Share => (r.new_share - r.base_share).abs(),
        _ => (r.new - r.base).abs(),
    };
    let rank = |r: &Row| match r.verdict {
        _ if r.whole_run => 0,
        Verdict::Regression => 1,
        Verdict::Small => 3,
        _ => 2,
    };
    let key = |r: &Row| {
        if r.verdict == Verdict::Regression {
            r.change
        } else {
            moved(r)
        }
    };
    rows.sort_by(|a, b| {
        rank(a)
            .cmp(&rank(b))
            .then(key(b).total_cmp(&key(a)))
            .then(a.function.cmp(&b.function))
            .then(a.metric.cmp(&b.metric))
    });
}
