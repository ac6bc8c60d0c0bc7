//! The statistics behind `profile diff`: how uncertain one side's value of a function
//! is (sampling noise within a run, run-to-run variance across runs), the test of
//! "did it rise" on the log of the ratio NEW/BASE (Welch–Satterthwaite degrees of
//! freedom), Holm's step-down correction for testing many functions at once, and the
//! normal and Student t distributions they need (no statistics crate for four
//! functions).
//!
//! The model, per function and per run: a run's share of samples in the function is
//! binomial given its true share (time sampling at a fixed CPU period is if anything
//! less noisy than that, so this is conservative), and its CPU time is a Poisson
//! count of sample periods. With one run on a side that sampling variance is all
//! that side can know. With several runs the spread of the per-run values is
//! measured directly (it includes run-to-run variance, which usually dominates), and
//! never taken below the sampling variance; the side's degrees of freedom are then
//! runs − 1, so few runs give wide intervals rather than false confidence.

/// One run's value of one quantity, with its sampling variance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunValue {
    /// The run's value of the quantity.
    pub value: f64,
    /// Variance of `value` from sampling alone.
    pub sampling_var: f64,
}

/// One side (BASE or NEW) of one quantity, summarized over its runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Side {
    /// Mean over runs.
    pub mean: f64,
    /// Variance of that mean.
    pub var_of_mean: f64,
    /// Degrees of freedom of `var_of_mean`: runs − 1, or infinite when it is the
    /// (known) sampling variance of a single run.
    pub df: f64,
    /// Per-run spread over the sampling variance (1: runs differ no more than
    /// sampling explains); 1 for a single run.
    pub dispersion: f64,
}

impl Side {
    /// Summarizes the runs of one side. `offset` is added to the mean to keep its
    /// logarithm finite when the function has no samples (half a sample's worth).
    pub fn new(runs: &[RunValue], offset: f64) -> Side {
        let n = runs.len() as f64;
        if runs.is_empty() {
            return Side {
                mean: offset,
                var_of_mean: f64::INFINITY,
                df: 1.0,
                dispersion: 1.0,
            };
        }
        let mean = runs.iter().map(|r| r.value).sum::<f64>() / n + offset;
        let sampling = runs.iter().map(|r| r.sampling_var).sum::<f64>() / n;
        if runs.len() == 1 {
            return Side {
                mean,
                var_of_mean: sampling,
                df: f64::INFINITY,
                dispersion: 1.0,
            };
        }
        let m = mean - offset;
        let spread = runs.iter().map(|r| (r.value - m).powi(2)).sum::<f64>() / (n - 1.0);
        let var = spread.max(sampling);
        Side {
            mean,
            var_of_mean: var / n,
            df: n - 1.0,
            dispersion: if sampling > 0.0 { var / sampling } else { 1.0 },
        }
    }
}

/// The comparison of one quantity: NEW/BASE on the log scale.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogRatio {
    /// ln(NEW mean / BASE mean), means offset as [`Side::new`] says.
    pub estimate: f64,
    /// Its standard error (delta method: Var ln X ≈ Var X / X²).
    pub se: f64,
    /// Welch–Satterthwaite degrees of freedom (infinite: normal distribution).
    pub df: f64,
}

impl LogRatio {
    /// The ratio NEW/BASE of two sides' means, on the log scale.
    pub fn new(base: &Side, new: &Side) -> LogRatio {
        let cb = base.var_of_mean / (base.mean * base.mean);
        let cn = new.var_of_mean / (new.mean * new.mean);
        let var = cb + cn;
        let denom = term(cb, base.df) + term(cn, new.df);
        let df = if denom > 0.0 {
            (var * var / denom).max(1.0)
        } else {
            f64::INFINITY
        };
        LogRatio {
            estimate: (new.mean / base.mean).ln(),
            se: var.sqrt(),
            df,
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
}

fn term(c: f64, df: f64) -> f64 {
    if df.is_finite() { c * c / df } else { 0.0 }
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
