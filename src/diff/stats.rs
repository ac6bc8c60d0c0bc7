//! The statistics behind `profile diff`: how uncertain one side's value of a function
//! is, the test of "did it rise" on the log of the ratio NEW/BASE (Welch's t for a
//! run's exact whole CPU time), Holm's step-down correction and its weighted form for
//! testing many rows at once, and the normal and Student t distributions they need
//! (no statistics crate for a handful of functions).
//!
//! The model, per function: each side's value pools its runs (all their samples), so
//! the sampling noise of a side is that of one run of all its samples (binomial for a
//! share, a Poisson count of sample periods for CPU time). On top of it, runs vary
//! from one to the next: a function's true share wanders by some relative amount, a
//! coefficient of variation `tau` (a random effect on the log scale). Each side then
//! has `Var ln(value) = sampling + tau² / runs`. Whether runs vary at all is one
//! chi-square test over every well-sampled function ([`runs_vary`]): when they do
//! not, `tau = 0` and several runs are exactly as sharp as one run of all their
//! samples, so adding runs never costs power; when they do, each function's `tau²` is
//! estimated from the spread of its runs beyond what sampling explains, on both
//! sides at once, and widens its interval, as it must. The degrees of freedom come from how well `tau²`
//! is known (Satterthwaite: the runs' spread is a chi-square, its sampling part
//! included): many when the runs agree as sampling predicts, about the runs' own
//! (runs − 1 per side) when run-to-run variation dominates. Borrowing `tau²` across
//! functions (empirical Bayes, as limma does for genes) was tried and measured: on
//! synthetic runs it raised the false-alarm rate to about 7% from its nominal 5%,
//! since functions do not wander alike (docs/ci.md). With one run per side there is
//! no spread to measure: docs/ci.md says why several runs are better.

/// The spread of one quantity's runs beyond sampling noise, on the relative scale.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Spread {
    /// Sum over sides of (runs − 1) × (the runs' relative variance − the part
    /// sampling explains): an estimate of `tau²` times `df`, negative when the runs
    /// agree better than sampling predicts.
    pub excess: f64,
    /// Sum over sides of runs − 1.
    pub df: f64,
    /// Sum over sides of (runs − 1) × the runs' relative variance.
    pub observed: f64,
    /// Sum over sides of (runs − 1) × the relative variance sampling explains.
    pub sampling: f64,
}

impl Spread {
    /// The spread of one side's runs: `counts[j]` of `totals[j]` samples in run `j`,
    /// binomial counts (shares) when `binomial`, else Poisson counts of runs meant to
    /// be alike (time per run).
    pub fn of_runs(counts: &[f64], totals: &[f64], binomial: bool) -> Spread {
        let k = counts.len();
        if k < 2 {
            return Spread::default();
        }
        let (x, n): (f64, f64) = (counts.iter().sum(), totals.iter().sum());
        // Relative values (1 + deviation from the pooled value) and the relative
        // variance sampling gives each; half a sample keeps an absent function finite.
        let (rel, var): (Vec<f64>, Vec<f64>) = if binomial {
            let p = (x + 0.5) / (n + 1.0);
            counts
                .iter()
                .zip(totals)
                .map(|(&c, &t)| {
                    let t = t.max(1.0);
                    (c / t / p, (1.0 - p) / (p * t))
                })
                .unzip()
        } else {
            let mean = (x + 0.5) / k as f64;
            counts.iter().map(|&c| (c / mean, 1.0 / mean)).unzip()
        };
        Spread::of_relative(&rel, &var)
    }

    /// The spread of one side's runs of CPU time: `times[j]` nanoseconds from
    /// `counts[j]` samples in run `j` (a Poisson count of sample periods, each run's
    /// own period). The spread is that of the times themselves, not of the sample
    /// counts: a recorder varies its period, and a run whose samples were fewer but
    /// heavier took the same time.
    pub fn of_times(times: &[f64], counts: &[f64]) -> Spread {
        let k = times.len();
        if k < 2 {
            return Spread::default();
        }
        let total: f64 = times.iter().sum();
        let samples: f64 = counts.iter().sum();
        // Half a sample's time keeps an absent function finite.
        let mean = (total + 0.5 * total / samples.max(1.0)) / k as f64;
        let (rel, var): (Vec<f64>, Vec<f64>) = times
            .iter()
            .zip(counts)
            .map(|(&t, &c)| {
                let r = t / mean;
                (r, r.max(0.5 / k as f64).powi(2) / c.max(0.5))
            })
            .unzip();
        Spread::of_relative(&rel, &var)
    }

    /// The spread of `k` runs' relative values (1 + deviation from the pooled value)
    /// beyond what sampling alone would give them (`var`, each one's relative variance).
    fn of_relative(rel: &[f64], var: &[f64]) -> Spread {
        let k = rel.len();
        let df = (k - 1) as f64;
        let m = rel.iter().sum::<f64>() / k as f64;
        let observed = rel.iter().map(|r| (r - m).powi(2)).sum::<f64>();
        let sampling = df * var.iter().sum::<f64>() / k as f64;
        Spread {
            excess: observed - sampling,
            df,
            observed,
            sampling,
        }
    }

    /// The two sides together.
    pub fn plus(self, other: Spread) -> Spread {
        Spread {
            excess: self.excess + other.excess,
            df: self.df + other.df,
            observed: self.observed + other.observed,
            sampling: self.sampling + other.sampling,
        }
    }

    /// The runs' variance over what sampling explains (1: runs agree as sampling
    /// predicts; 1 when there is a single run).
    pub fn dispersion(&self) -> f64 {
        if self.df > 0.0 && self.sampling > 0.0 {
            self.observed / self.sampling
        } else {
            1.0
        }
    }

    /// The variance of [`Spread::tau2`] as an estimate: the runs' relative variance
    /// is a chi-square with `df` degrees of freedom (its sampling part too), so
    /// `2 s⁴ / df`.
    pub fn tau2_var(&self) -> f64 {
        if self.df > 0.0 {
            let s2 = self.observed / self.df;
            2.0 * s2 * s2 / self.df
        } else {
            0.0
        }
    }

    /// This quantity's own estimate of `tau²` (may be negative).
    pub fn tau2(&self) -> f64 {
        if self.df > 0.0 {
            self.excess / self.df
        } else {
            0.0
        }
    }
}

/// Whether the runs, over all these quantities together, vary more than sampling
/// explains: a chi-square test of homogeneity at `level` (Wilson–Hilferty's normal
/// approximation of the chi-square distribution).
pub fn runs_vary(spreads: &[Spread], level: f64) -> bool {
    let (mut x, mut df) = (0.0, 0.0);
    for s in spreads.iter().filter(|s| s.df > 0.0 && s.sampling > 0.0) {
        x += s.observed * s.df / s.sampling;
        df += s.df;
    }
    if df == 0.0 {
        return false;
    }
    let v = 2.0 / (9.0 * df);
    let z = ((x / df).cbrt() - (1.0 - v)) / v.sqrt();
    1.0 - cdf(z, f64::INFINITY) < level
}

/// One side (BASE or NEW) of one quantity, its runs pooled.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Side {
    /// The side's value (pooled share, or mean per run), offset by half a sample so
    /// that its logarithm is finite when the function has no samples.
    pub mean: f64,
    /// The variance of `mean` from sampling alone.
    pub sampling_var: f64,
}

/// The comparison of one quantity: NEW/BASE on the log scale.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogRatio {
    /// ln(NEW / BASE), means offset as [`Side`] says.
    pub estimate: f64,
    /// Its standard error (delta method: Var ln X ≈ Var X / X²), dispersion included.
    pub se: f64,
    /// Degrees of freedom (infinite: the normal distribution).
    pub df: f64,
    /// The part of the variance sampling alone explains (a fraction of se²).
    pub sampling_part: f64,
}

impl LogRatio {
    /// The log ratio of two sides: each side's sampling variance, plus `tau2 / runs`
    /// of run-to-run variation, `tau2` an estimate with variance `tau2_var`.
    pub fn new(
        base: &Side,
        new: &Side,
        runs: (usize, usize),
        tau2: f64,
        tau2_var: f64,
    ) -> LogRatio {
        let cb = base.sampling_var / (base.mean * base.mean);
        let cn = new.sampling_var / (new.mean * new.mean);
        let sampling = cb + cn;
        let per_tau2 = 1.0 / runs.0.max(1) as f64 + 1.0 / runs.1.max(1) as f64;
        let var = sampling + tau2.max(0.0) * per_tau2;
        // Satterthwaite: the sampling part is known, the run-to-run part estimated.
        let noise = tau2_var * per_tau2 * per_tau2;
        let df = if noise > 0.0 {
            (2.0 * var * var / noise).max(1.0)
        } else {
            f64::INFINITY
        };
        LogRatio {
            estimate: (new.mean / base.mean).ln(),
            se: var.sqrt(),
            df,
            sampling_part: if var > 0.0 { sampling / var } else { 1.0 },
        }
    }

    /// One-sided p-value of "NEW is not above BASE".
    pub fn p_rise(&self) -> f64 {
        if self.se.is_finite() && self.se > 0.0 {
            1.0 - cdf(self.estimate / self.se, self.df)
        } else if self.se == 0.0 && self.estimate > 0.0 {
            0.0
        } else {
            1.0
        }
    }

    /// The interval of the relative change NEW/BASE − 1 whose lower end is the
    /// one-sided `1 − a` lower confidence bound (a two-sided `1 − 2a` interval).
    pub fn interval(&self, a: f64) -> (f64, f64) {
        let q = quantile(1.0 - a, self.df);
        let lo = (self.estimate - q * self.se).exp() - 1.0;
        let hi = (self.estimate + q * self.se).exp() - 1.0;
        (lo, hi)
    }

    /// The smallest relative rise a one-sided test at level `a` detects with
    /// probability `power`, given this standard error and degrees of freedom.
    pub fn detectable_rise(&self, a: f64, power: f64) -> f64 {
        let q = quantile(1.0 - a, self.df) + quantile(power, self.df);
        (q * self.se).exp() - 1.0
    }
}

/// Holm's step-down procedure at family-wise error rate `alpha`: for each p-value,
/// whether it is rejected and the level it was judged at. Sorted ascending, the i-th
/// (from 0) of m is rejected when it and all before it are below alpha / (m − i).
/// Every p-value not rejected gets the level of the step where the procedure
/// stopped, so an interval at that level agrees with its verdict.
pub fn holm(p: &[f64], alpha: f64) -> Vec<(bool, f64)> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut out = vec![(false, alpha); m];
    let mut stopped_at = None;
    for (i, &k) in order.iter().enumerate() {
        let level = alpha / (m - i) as f64;
        match stopped_at {
            None if p[k] < level => out[k] = (true, level),
            None => {
                stopped_at = Some(level);
                out[k] = (false, level);
            }
            Some(l) => out[k] = (false, l),
        }
    }
    out
}

/// Holm's step-down procedure with weights (Holm 1979): each p-value `p[i]` has a
/// weight `w[i] > 0`; at each step the hypothesis with the smallest `p / w` among
/// those left is rejected when `p <= alpha * w / (the weights left)`, and the
/// procedure stops at the first that is not. The family-wise error rate is at most
/// `alpha` whatever the weights; a weight spends more of it on a hypothesis that
/// matters, and a rejected hypothesis hands its share to those left (so a family of
/// a few heavy rows keeps its power however many light rows follow). Returns, per
/// p-value, whether it was rejected and the level it was judged at (for the rows not
/// rejected, their level at the step where the procedure stopped).
pub fn weighted_holm(p: &[f64], w: &[f64], alpha: f64) -> Vec<(bool, f64)> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| (p[a] / w[a]).total_cmp(&(p[b] / w[b])).then(a.cmp(&b)));
    let mut left: f64 = w.iter().sum();
    let mut out = vec![(false, alpha); m];
    let mut stopped = false;
    for &k in &order {
        let level = alpha * w[k] / left;
        if !stopped && p[k] <= level {
            out[k] = (true, level);
            left -= w[k];
        } else {
            stopped = true;
            out[k] = (false, level);
        }
    }
    out
}

/// The log ratio of two sides measured exactly in each run (no sampling noise, such
/// as a run's whole CPU time): Welch's t on the logarithms of the runs' values. Each
/// side needs two runs or more; the standard error is infinite otherwise.
pub fn welch_log(base: &[f64], new: &[f64]) -> LogRatio {
    let moments = |x: &[f64]| {
        let k = x.len() as f64;
        let l: Vec<f64> = x.iter().map(|v| v.max(1.0).ln()).collect();
        let m = l.iter().sum::<f64>() / k;
        let v = l.iter().map(|y| (y - m).powi(2)).sum::<f64>() / (k - 1.0);
        (m, v / k, k - 1.0)
    };
    if base.len() < 2 || new.len() < 2 {
        return LogRatio {
            estimate: 0.0,
            se: f64::INFINITY,
            df: f64::INFINITY,
            sampling_part: 0.0,
        };
    }
    let ((mb, vb, db), (mn, vn, dn)) = (moments(base), moments(new));
    let var = vb + vn;
    // Two runs can agree to the nanosecond only in a synthetic test; a floor of a
    // part in a million keeps the test finite.
    let var = var.max(1e-12);
    let df = var * var / (vb * vb / db + vn * vn / dn).max(1e-300);
    LogRatio {
        estimate: mn - mb,
        se: var.sqrt(),
        df: df.clamp(1.0, db + dn),
        sampling_part: 0.0,
    }
}

/// Distribution function of Student's t with `df` degrees of freedom (the standard
/// normal when `df` is infinite).
pub fn cdf(t: f64, df: f64) -> f64 {
    if !df.is_finite() {
        return 0.5 * erfc(-t / std::f64::consts::SQRT_2);
    }
    let x = df / (df + t * t);
    let tail = 0.5 * inc_beta(df / 2.0, 0.5, x);
    if t > 0.0 { 1.0 - tail } else { tail }
}

/// The `q` quantile of Student's t (normal for infinite `df`), by bisection.
pub fn quantile(q: f64, df: f64) -> f64 {
    if q <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if q >= 1.0 {
        return f64::INFINITY;
    }
    let (mut lo, mut hi) = (-1e9, 1e9);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if cdf(mid, df) < q {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-10 * (1.0 + mid.abs()) {
            break;
        }
    }
    0.5 * (lo + hi)
}

/// Complementary error function (Numerical Recipes' Chebyshev fit, relative error
/// below 1.2e-7 everywhere).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7).
fn ln_gamma(x: f64) -> f64 {
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + 7.5;
    for (i, &c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The regularized incomplete beta function I_x(a, b).
fn inc_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_cf(a, b, x) / a
    } else {
        1.0 - front * beta_cf(b, a, 1.0 - x) / b
    }
}

/// The continued fraction of the incomplete beta function (modified Lentz).
fn beta_cf(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..500 {
        let m = m as f64;
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-14 {
            break;
        }
    }
    h
}

#[cfg(test)]
#[path = "stats_tests.rs"]
mod tests;
