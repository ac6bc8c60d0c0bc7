//! One row of a comparison: a function (or the whole run) and one of its quantities,
//! BASE against NEW, with the test's verdict and the interval it rests on. The types
//! every stage of `diff` shares: the comparison makes rows, the whole-run test makes
//! one, the outputs print them.

use super::stats::{LogRatio, Side, Spread};

/// Which quantity of a function a row compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// CPU spent in the function itself.
    #[serde(rename = "self")]
    SelfTime,
    /// CPU spent in the function and everything it called.
    Total,
}

/// The unit of a row's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    /// A fraction of each run's samples.
    Share,
    /// CPU nanoseconds per run.
    Ns,
    /// Samples per run (folded inputs with `absolute`).
    Samples,
}

/// What a row's test found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Rose by at least the threshold, and significantly: fails the gate.
    Regression,
    /// Rose significantly (below the threshold, no gate given, or a kernel function).
    Slower,
    /// Fell significantly (the interval's upper end is below 0).
    Faster,
    /// Not found to rise, but a rise of the gate's threshold could have gone unnoticed
    /// (too few samples or runs): no clean bill of health.
    Inconclusive,
    /// No significant change, and a rise of the threshold would have been seen.
    Unchanged,
    /// Below the minimum share on both sides: not tested.
    Small,
}

/// One function and quantity, compared.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The function's folded text (with inferno's `_[k]`-style suffix), or
    /// [`WHOLE_RUN`].
    pub function: String,
    /// The whole run's CPU time, not a function (its values are always ns).
    pub whole_run: bool,
    /// Kernel code: tested, never a regression unless
    /// [`CompareOptions::gate_kernel`](super::CompareOptions::gate_kernel).
    pub kernel: bool,
    /// The quantity compared.
    pub metric: Metric,
    /// A self row that stands for the total too (the two are equal in every run).
    pub same_total: bool,
    /// Mean per run, in the comparison's unit.
    pub base: f64,
    /// Mean per run of NEW, in the comparison's unit (`base` is BASE's).
    pub new: f64,
    /// Mean share of the run's samples, for the minimum-share filter.
    pub base_share: f64,
    /// Mean share of NEW's samples (`base_share` is BASE's).
    pub new_share: f64,
    /// NEW/BASE − 1 (infinite when BASE is 0).
    pub change: f64,
    /// The interval of `change` at the level of this row's test, when tested.
    pub interval: Option<(f64, f64)>,
    /// One-sided level the row was judged at (the Holm step); the interval is two-sided
    /// at 1 − 2·level, so its lower end is the one-sided bound.
    pub level: Option<f64>,
    /// One-sided p-value of "no rise".
    pub p_value: Option<f64>,
    /// Spread of the runs over the sampling noise, BASE and NEW sides alone (1: no
    /// more than sampling explains, or a single run).
    pub dispersion: (f64, f64),
    /// The run-to-run variation the test used: a coefficient of variation per run,
    /// from both sides' spread.
    pub tau: f64,
    /// Both sides' spread, before moderation.
    pub spread: Spread,
    /// BASE and NEW values with their sampling variances, as the test sees them.
    pub sides: (Side, Side),
    /// The test's estimate of ln(NEW/BASE), its standard error and degrees of freedom.
    pub ratio: LogRatio,
    /// The smallest rise the test would have detected with the comparison's power,
    /// at the level the row was judged at; when tested.
    pub detectable: Option<f64>,
    /// What the test found.
    pub verdict: Verdict,
}

/// The name of the row of the whole run's CPU time.
pub const WHOLE_RUN: &str = "[whole run]";
