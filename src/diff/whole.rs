//! The whole run: whether the runs' CPU times are comparable at all (were they
//! recorded on one kind of machine, by the CPU model each recording names, or its
//! host for recordings older than that field), and the row that compares each run's
//! exact total CPU time, BASE against NEW, by Welch's t on the logarithms.

use super::input::{InputKind, Run};
use super::row::{Metric, Row, Verdict, WHOLE_RUN};
use super::stats::{self, Side, Spread};

/// Whether the runs' CPU times are comparable: were all made on one kind of machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Machine {
    /// Every input is a recording made on a machine with this CPU model (or, for
    /// recordings older than the model field, on this host).
    Same(String),
    /// The recordings name different machines: BASE's first, then NEW's first that
    /// differs.
    Different(String, String),
    /// Some input is a folded file, or a recording names no machine.
    Unknown,
}

/// Which machine the runs were recorded on, if one kind for all.
pub fn machine(base: &[Run], new: &[Run]) -> Machine {
    let all: Vec<&Run> = base.iter().chain(new).collect();
    if all.iter().any(|r| r.kind != InputKind::Recording) {
        return Machine::Unknown;
    }
    let by_model = all.iter().all(|r| !r.cpu_model.is_empty());
    let key = |r: &Run| {
        if by_model {
            r.cpu_model.clone()
        } else {
            r.hostname.clone()
        }
    };
    let first = key(all[0]);
    if first.is_empty() || all.iter().any(|r| key(r).is_empty()) {
        return Machine::Unknown;
    }
    match all.iter().map(|r| key(r)).find(|k| *k != first) {
        None => Machine::Same(first),
        Some(other) => Machine::Different(first, other),
    }
}

/// The row of the whole run: each run's CPU time (exact in a recording: every
/// thread's own CPU clock), compared by Welch's t on the logarithms.
pub(super) fn whole_run_row(base: &[Run], new: &[Run]) -> Row {
    let ns = |runs: &[Run]| runs.iter().map(|r| r.cpu_ns as f64).collect::<Vec<f64>>();
    let (b, n) = (ns(base), ns(new));
    let mean = |x: &[f64]| x.iter().sum::<f64>() / x.len() as f64;
    let (bm, nm) = (mean(&b), mean(&n));
    let ratio = stats::welch_log(&b, &n);
    let side = |m: f64| Side {
        mean: m,
        sampling_var: 0.0,
    };
    Row {
        function: WHOLE_RUN.to_owned(),
        whole_run: true,
        kernel: false,
        metric: Metric::Total,
        same_total: false,
        base: bm,
        new: nm,
        base_share: 1.0,
        new_share: 1.0,
        change: nm / bm - 1.0,
        interval: None,
        level: None,
        p_value: Some(ratio.p_rise()),
        dispersion: (1.0, 1.0),
        tau: 0.0,
        spread: Spread::default(),
        sides: (side(bm), side(nm)),
        ratio,
        detectable: None,
        verdict: Verdict::Small,
    }
}
