//! The comparison itself: per function and per run its self and total (inclusive)
//! samples, turned into CPU time per run (several recordings a side, all made on the
//! same kind of machine) or shares of each run's CPU (otherwise), one test per
//! function and quantity of "did it rise from BASE to NEW", plus the whole run's CPU
//! time as a row of its own; a weighted Holm correction over all of them that spends
//! the error rate where it matters (the whole run, then the largest functions' self
//! time, then the rest); and a verdict per row with the interval behind it.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::input::{InputKind, Run};
pub use super::interrupts::Interrupts;
pub use super::judge::{FAMILY_WEIGHTS, LARGE_SHARE};
use super::judge::{Judging, judge, sort_rows};
pub use super::row::{Metric, Row, Unit, Verdict, WHOLE_RUN};
use super::stats::{self, LogRatio, Side, Spread};
use super::whole::whole_run_row;
pub use super::whole::{Machine, machine};
use crate::profile::FrameClass;

/// The level of the test of "the runs vary more than sampling explains" that decides
/// between pooling runs and measuring each function's run-to-run variation.
const RUNS_VARY_LEVEL: f64 = 0.05;

/// The level of the test of one function's own runs, when the test over all of them
/// says they agree. A function wrongly found to wander loses power; one that truly
/// does and is treated as agreeing is a false alarm. On the pool of
/// docs/measurements/diff-power.md (3+3 runs, 2026-11-27), f2 +30% was found in
/// 96.8% of diffs without this test, 94.0% at 1% and 84.0% at 5%, false alarms 5.2%
/// throughout; an A/A pair of SQLite runs beside the test suite (one function's runs
/// at 27, 54 and 66 ms against 23 to 36) was a false REGRESSION at `--alpha 0.005`
/// without it and at 0.1%, and passes at 1%.
const ROW_VARIES_LEVEL: f64 = 0.01;

/// What each function's rows compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Basis {
    /// CPU time per run when every input is a recording, each side has two runs or
    /// more (so the runs' spread measures the machine's own variation) and all were
    /// made on the same kind of machine (CPU model, or host when a recording predates
    /// the model); shares of each run's CPU otherwise. Default.
    #[default]
    Auto,
    /// Shares of each run's CPU samples, whatever the inputs.
    Share,
    /// CPU time per run (sample counts for folded files), whatever the machines.
    Time,
}

/// How to compare.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct CompareOptions {
    /// What function rows compare. Default is [`Basis::Auto`].
    pub basis: Basis,
    /// The gate: a rise of at least this fraction of the BASE value (0.1: new/base − 1
    /// ≥ 10%) that is also significant is a regression. Default is none: no gate,
    /// significant rises are only reported as slower.
    pub threshold: Option<f64>,
    /// Family-wise error rate over all tests of one comparison (weighted Holm).
    /// Default is 0.05.
    pub alpha: f64,
    /// Functions whose share of CPU is below this fraction on both sides are shown
    /// but not tested and never fail. Default is 0.01 (1%).
    pub min_share: f64,
    /// Let kernel functions (`_[k]`) fail the gate. Default is false: they are tested
    /// and can be reported slower, but never a regression, because a process's kernel
    /// time follows the machine (interrupts, scheduling, an overloaded runner) as much
    /// as the program, and a program's own extra system calls still show in the total
    /// of the user function that makes them.
    pub gate_kernel: bool,
    /// Compare time under an interrupt entry (see [`super::interrupts`]) as the
    /// functions it passes through, as any other kernel time. Default is false: it
    /// is set apart, in no function's row and out of both sides' share denominators,
    /// and shown on a line of its own, so that a load change on the machine does not
    /// move every function's share.
    pub compare_interrupts: bool,
    /// With a gate, a tested function that was not found to rise is **inconclusive**
    /// when the data would have detected a rise of the threshold with less than this
    /// probability. Default is 0.8.
    pub power: f64,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            basis: Basis::Auto,
            threshold: None,
            alpha: 0.05,
            min_share: 0.01,
            gate_kernel: false,
            compare_interrupts: false,
            power: 0.8,
        }
    }
}

/// A whole comparison.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// The options it was made with.
    pub options: CompareOptions,
    /// The unit of every row's values.
    pub unit: Unit,
    /// Rows: regressions by relative rise, then tested rows, then untested ones, both
    /// by how much CPU moved.
    pub rows: Vec<Row>,
    /// Number of tests in the corrected family.
    pub tests: usize,
    /// Whether the runs' CPU times are comparable.
    pub machine: Machine,
    /// Runs per side.
    pub runs: (usize, usize),
    /// The interrupt time set apart from the rows, on both sides; `None` when it was
    /// compared as functions ([`CompareOptions::compare_interrupts`]).
    pub interrupts: Option<Interrupts>,
}

impl Comparison {
    /// The rows that fail the gate.
    pub fn regressions(&self) -> impl Iterator<Item = &Row> {
        self.rows
            .iter()
            .filter(|r| r.verdict == Verdict::Regression)
    }

    /// The rows whose data could not have shown a rise of the threshold.
    pub fn inconclusive(&self) -> impl Iterator<Item = &Row> {
        self.rows
            .iter()
            .filter(|r| r.verdict == Verdict::Inconclusive)
    }

    /// How many rows have `verdict`.
    pub fn count(&self, verdict: Verdict) -> usize {
        self.rows.iter().filter(|r| r.verdict == verdict).count()
    }
}

/// Why runs cannot be compared.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("nothing to compare: give at least one BASE and one NEW input")]
    /// A side has no runs.
    NoRuns,
    #[error(
        "--absolute cannot compare {recording} (CPU time) with {folded} (sample counts only); compare shares instead (without --absolute), or give folded files on both sides"
    )]
    /// `--absolute` with a recording and a folded file.
    MixedAbsolute {
        /// A recording among the inputs.
        recording: String,
        /// A folded file among the inputs.
        folded: String,
    },
}

/// Per function in one run: self and total samples and CPU ns.
#[derive(Debug, Clone, Copy, Default)]
struct FnTotals {
    self_samples: u64,
    self_ns: u64,
    total_samples: u64,
    total_ns: u64,
}

fn per_function(run: &Run) -> HashMap<&str, FnTotals> {
    let mut totals = vec![FnTotals::default(); run.frames.len()];
    // The last stack (+1) each frame was counted in: a recursive function counts once
    // per stack in its total, found in time linear in the depth.
    let mut seen = vec![0usize; run.frames.len()];
    for (i, (stack, w)) in run.stacks.iter().enumerate() {
        if let Some(&leaf) = stack.last() {
            let e = &mut totals[leaf as usize];
            e.self_samples += w.samples;
            e.self_ns = e.self_ns.saturating_add(w.cpu_ns);
        }
        for &f in stack {
            if seen[f as usize] != i + 1 {
                seen[f as usize] = i + 1;
                let e = &mut totals[f as usize];
                e.total_samples += w.samples;
                e.total_ns = e.total_ns.saturating_add(w.cpu_ns);
            }
        }
    }
    run.frames
        .iter()
        .zip(totals)
        .map(|(f, t)| (f.text.as_str(), t))
        .collect()
}

/// Compares BASE runs with NEW runs.
pub fn compare(
    base: &[Run],
    new: &[Run],
    opts: CompareOptions,
) -> Result<Comparison, CompareError> {
    if base.is_empty() || new.is_empty() {
        return Err(CompareError::NoRuns);
    }
    let machine = machine(base, new);
    let runs = (base.len(), new.len());
    let unit = unit_of(base, new, opts.basis, &machine)?;
    // Interrupt time out of the functions' rows and shares (not out of the whole
    // run's CPU time: the whole run's row reads the runs as given).
    let (base_kept, new_kept, interrupts);
    let (fn_base, fn_new) = if opts.compare_interrupts {
        interrupts = None;
        (base, new)
    } else {
        let i;
        (base_kept, new_kept, i) = super::interrupts::set_apart(base, new);
        interrupts = Some(i);
        (&base_kept[..], &new_kept[..])
    };
    let mut rows = function_rows(fn_base, fn_new, unit);
    add_run_variation(&mut rows, runs, opts.min_share);
    // The whole run: each run's CPU time, exact in a recording.
    let whole = base
        .iter()
        .chain(new)
        .all(|r| r.kind == InputKind::Recording && r.cpu_ns > 0);
    if whole {
        rows.push(whole_run_row(base, new));
    }
    let judging = Judging {
        alpha: opts.alpha,
        min_share: opts.min_share,
        power: opts.power,
        threshold: opts.threshold,
        gate_kernel: opts.gate_kernel,
        // The whole run gates when its times are comparable, or time was asked for.
        whole_gates: matches!(machine, Machine::Same(_)) || opts.basis == Basis::Time,
    };
    let tests = judge(&mut rows, &judging);
    sort_rows(&mut rows, unit);
    Ok(Comparison {
        options: opts,
        unit,
        rows,
        tests,
        machine,
        runs,
        interrupts,
    })
}

/// The unit of every row: time when the basis asks for it (or, automatically, when
/// both sides have two runs or more made on the same kind of machine), shares
/// otherwise; time is CPU ns for recordings and samples for folded files, never both.
fn unit_of(
    base: &[Run],
    new: &[Run],
    basis: Basis,
    machine: &Machine,
) -> Result<Unit, CompareError> {
    let time = match basis {
        Basis::Share => false,
        Basis::Time => true,
        Basis::Auto => matches!(machine, Machine::Same(_)) && base.len() >= 2 && new.len() >= 2,
    };
    if !time {
        return Ok(Unit::Share);
    }
    let all = || base.iter().chain(new);
    let rec = all().find(|r| r.kind == InputKind::Recording);
    let folded = all().find(|r| r.kind == InputKind::Folded);
    match (rec, folded) {
        (Some(r), Some(f)) => Err(CompareError::MixedAbsolute {
            recording: r.source.clone(),
            folded: f.source.clone(),
        }),
        (Some(_), None) => Ok(Unit::Ns),
        _ => Ok(Unit::Samples),
    }
}

/// A self and a total row per function seen on either side (the total left out when
/// it equals the self time everywhere, a metric left out when it is zero
/// everywhere), kernel functions marked, in name order.
fn function_rows(base: &[Run], new: &[Run], unit: Unit) -> Vec<Row> {
    let base_fns: Vec<_> = base.iter().map(per_function).collect();
    let new_fns: Vec<_> = new.iter().map(per_function).collect();
    let mut names: BTreeMap<&str, ()> = BTreeMap::new();
    for m in base_fns.iter().chain(&new_fns) {
        names.extend(m.keys().map(|k| (*k, ())));
    }
    // Kernel code by the kind its frames carry (a folded file's `_[k]` suffix).
    let kernel: HashSet<&str> = base
        .iter()
        .chain(new)
        .flat_map(|r| &r.frames)
        .filter(|f| f.class == FrameClass::Kernel)
        .map(|f| f.text.as_str())
        .collect();
    let mut rows = Vec::new();
    for name in names.keys() {
        let get = |fns: &[HashMap<&str, FnTotals>]| -> Vec<FnTotals> {
            fns.iter()
                .map(|m| m.get(name).copied().unwrap_or_default())
                .collect()
        };
        let (b, n) = (get(&base_fns), get(&new_fns));
        let same_total = b
            .iter()
            .chain(&n)
            .all(|t| t.self_samples == t.total_samples && t.self_ns == t.total_ns);
        for metric in [Metric::SelfTime, Metric::Total] {
            let zero = |t: &FnTotals| match metric {
                Metric::SelfTime => t.self_samples == 0,
                Metric::Total => t.total_samples == 0,
            };
            if (metric == Metric::Total && same_total) || b.iter().chain(&n).all(zero) {
                continue;
            }
            let mut r = row(name, metric, same_total, (base, &b), (new, &n), unit);
            r.kernel = kernel.contains(name);
            rows.push(r);
        }
    }
    rows
}

/// Do the runs vary more than sampling explains? One chi-square over every
/// well-sampled function, and one over each function's own runs: when neither says
/// so, a function's runs are pooled as one run of all their samples (adding runs
/// never costs power); when either does, its own spread sets its run-to-run
/// variation. Sets each row's `tau`, `ratio` and untested `p_value`.
fn add_run_variation(rows: &mut [Row], runs: (usize, usize), min_share: f64) {
    let spreads: Vec<Spread> = rows
        .iter()
        .filter(|r| r.base_share.min(r.new_share) >= min_share)
        .map(|r| r.spread)
        .collect();
    let varies = stats::runs_vary(&spreads, RUNS_VARY_LEVEL);
    for r in rows {
        // One function can wander while the rest agree: its own spread, tested alone,
        // gives it its run-to-run term even when the test over all of them (where its
        // few degrees of freedom are lost among the others') says the runs agree.
        let own = stats::runs_vary(std::slice::from_ref(&r.spread), ROW_VARIES_LEVEL);
        let (tau2, tau2_var) = if varies || own {
            (r.spread.tau2().max(0.0), r.spread.tau2_var())
        } else {
            (0.0, 0.0)
        };
        r.tau = tau2.sqrt();
        r.ratio = LogRatio::new(&r.sides.0, &r.sides.1, runs, tau2, tau2_var);
        r.p_value = Some(r.ratio.p_rise());
    }
}

/// One side of one function's metric: its value pooled over the runs, with its
/// sampling variance, and the spread of the runs around it.
fn side(runs: &[Run], totals: &[FnTotals], metric: Metric, unit: Unit) -> (Side, Spread) {
    let count = |t: &FnTotals| match metric {
        Metric::SelfTime => (t.self_samples as f64, t.self_ns as f64),
        Metric::Total => (t.total_samples as f64, t.total_ns as f64),
    };
    let k = runs.len().max(1) as f64;
    let xs: Vec<f64> = totals.iter().map(|t| count(t).0).collect();
    let ns: Vec<f64> = runs.iter().map(|r| r.samples as f64).collect();
    let x: f64 = xs.iter().sum();
    let n: f64 = ns.iter().sum::<f64>().max(1.0);
    match unit {
        // The runs' samples pooled: binomial, half a sample keeping an absent
        // function's logarithm and variance finite.
        Unit::Share => {
            let p = (x + 0.5) / (n + 1.0);
            let side = Side {
                mean: (x + 0.5) / n,
                sampling_var: p * (1.0 - p) / n,
            };
            (side, Spread::of_runs(&xs, &ns, true))
        }
        // Mean CPU time per run: a Poisson count of sample periods (each run's own).
        Unit::Ns => {
            let mut value = 0.0;
            let mut var = 0.0;
            for (run, t) in runs.iter().zip(totals) {
                let period = run.cpu_ns as f64 / run.samples.max(1) as f64;
                let (s, t_ns) = count(t);
                value += t_ns;
                var += (s + 0.5 / k) * period * period;
            }
            let period = runs.iter().map(|r| r.cpu_ns as f64).sum::<f64>() / n;
            let side = Side {
                mean: (value + 0.5 * period) / k,
                sampling_var: var / (k * k),
            };
            let times: Vec<f64> = totals.iter().map(|t| count(t).1).collect();
            (side, Spread::of_times(&times, &xs))
        }
        Unit::Samples => {
            let side = Side {
                mean: (x + 0.5) / k,
                sampling_var: (x + 0.5) / (k * k),
            };
            (side, Spread::of_runs(&xs, &ns, false))
        }
    }
}

/// Mean share of the runs' samples, pooled.
fn pooled_share(runs: &[Run], totals: &[FnTotals], metric: Metric) -> f64 {
    let x: u64 = totals
        .iter()
        .map(|t| match metric {
            Metric::SelfTime => t.self_samples,
            Metric::Total => t.total_samples,
        })
        .sum();
    let n: u64 = runs.iter().map(|r| r.samples).sum();
    x as f64 / n.max(1) as f64
}

/// Mean per run of the metric in the comparison's unit (no offset).
fn mean_value(runs: &[Run], totals: &[FnTotals], metric: Metric, unit: Unit) -> f64 {
    let k = runs.len().max(1) as f64;
    match unit {
        Unit::Share => pooled_share(runs, totals, metric),
        Unit::Ns => {
            totals
                .iter()
                .map(|t| match metric {
                    Metric::SelfTime => t.self_ns,
                    Metric::Total => t.total_ns,
                } as f64)
                .sum::<f64>()
                / k
        }
        Unit::Samples => {
            totals
                .iter()
                .map(|t| match metric {
                    Metric::SelfTime => t.self_samples,
                    Metric::Total => t.total_samples,
                } as f64)
                .sum::<f64>()
                / k
        }
    }
}

/// One function's row of `metric`, from each side's runs and the function's totals
/// in them.
fn row(
    name: &str,
    metric: Metric,
    same_total: bool,
    (base, b): (&[Run], &[FnTotals]),
    (new, n): (&[Run], &[FnTotals]),
    unit: Unit,
) -> Row {
    let (bs, b_spread) = side(base, b, metric, unit);
    let (ns, n_spread) = side(new, n, metric, unit);
    let spread = b_spread.plus(n_spread);
    let ratio = LogRatio::new(&bs, &ns, (base.len(), new.len()), 0.0, 0.0);
    let (bm, nm) = (
        mean_value(base, b, metric, unit),
        mean_value(new, n, metric, unit),
    );
    let change = if bm > 0.0 {
        nm / bm - 1.0
    } else if nm > 0.0 {
        f64::INFINITY
    } else {
        0.0
    };
    Row {
        function: name.to_owned(),
        whole_run: false,
        metric,
        same_total,
        kernel: false,
        base: bm,
        new: nm,
        base_share: pooled_share(base, b, metric),
        new_share: pooled_share(new, n, metric),
        change,
        interval: None,
        level: None,
        p_value: None,
        dispersion: (b_spread.dispersion(), n_spread.dispersion()),
        tau: 0.0,
        spread,
        sides: (bs, ns),
        ratio,
        detectable: None,
        verdict: Verdict::Small,
    }
}
