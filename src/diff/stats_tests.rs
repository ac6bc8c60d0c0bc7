//! The distributions against published table values, Holm's procedure on small
//! examples, and the per-side variance model.

use super::*;

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

#[test]
fn normal_and_t_match_tables() {
    let inf = f64::INFINITY;
    assert!(close(cdf(1.959_964, inf), 0.975, 1e-6));
    assert!(close(cdf(-2.326_348, inf), 0.01, 1e-6));
    assert!(close(quantile(0.975, inf), 1.959_964, 1e-5));
    assert!(close(quantile(0.999, inf), 3.090_232, 1e-5));
    // Student t table values.
    for (q, df, t) in [
        (0.975, 1.0, 12.706_2),
        (0.975, 10.0, 2.228_14),
        (0.995, 2.0, 9.924_84),
        (0.95, 4.0, 2.131_85),
        (0.999, 30.0, 3.385_18),
    ] {
        let got = quantile(q, df);
        assert!(close(got, t, 1e-3 * t), "t({q}, {df}) = {got}, want {t}");
        assert!(close(cdf(t, df), q, 1e-5), "cdf({t}, {df})");
        assert!(close(cdf(-t, df), 1.0 - q, 1e-5));
    }
    // Large df approaches the normal.
    assert!(close(quantile(0.975, 1e6), 1.959_964, 1e-4));
}

#[test]
fn holm_steps_down_and_stops() {
    // m = 4: levels 0.0125, 0.0167, 0.025, 0.05.
    let r = holm(&[0.01, 0.04, 0.015, 0.03], 0.05);
    assert_eq!(r[0], (true, 0.05 / 4.0));
    assert_eq!(r[2], (true, 0.05 / 3.0));
    // 0.03 >= 0.025 stops the procedure: it and everything after are kept, judged
    // at the level where it stopped.
    assert_eq!(r[3], (false, 0.025));
    assert_eq!(r[1], (false, 0.025));
    // Holm rejects what Bonferroni rejects, and more.
    let r = holm(&[0.001, 0.02, 0.5], 0.05);
    assert!(r[0].0 && r[1].0 && !r[2].0);
    assert!(holm(&[], 0.05).is_empty());
}

#[test]
fn a_single_run_knows_only_sampling_noise() {
    let s = Side::new(
        &[RunValue {
            value: 0.2,
            sampling_var: 1e-4,
        }],
        0.0,
    );
    assert_eq!(s.df, f64::INFINITY);
    assert!(close(s.var_of_mean, 1e-4, 1e-15));
}

#[test]
fn several_runs_use_their_spread_but_never_less_than_sampling() {
    let v = |value| RunValue {
        value,
        sampling_var: 1e-6,
    };
    // Runs that differ far more than sampling explains.
    let s = Side::new(&[v(0.18), v(0.20), v(0.22)], 0.0);
    assert!(close(s.var_of_mean, 0.0004 / 3.0, 1e-12));
    assert_eq!(s.df, 2.0);
    assert!(s.dispersion > 100.0);
    // Identical runs: the sampling variance is the floor.
    let s = Side::new(&[v(0.2), v(0.2), v(0.2)], 0.0);
    assert!(close(s.var_of_mean, 1e-6 / 3.0, 1e-15));
    assert_eq!(s.dispersion, 1.0);
}

#[test]
fn interval_lower_end_agrees_with_the_p_value() {
    let base = Side::new(
        &[RunValue {
            value: 0.30,
            sampling_var: 0.3 * 0.7 / 2000.0,
        }],
        0.0,
    );
    let new = Side::new(
        &[RunValue {
            value: 0.36,
            sampling_var: 0.36 * 0.64 / 2000.0,
        }],
        0.0,
    );
    let lr = LogRatio::new(&base, &new);
    let p = lr.p_rise();
    assert!(p < 1e-4, "{p}");
    // At a level just above p the lower end is above 0; just below, under it.
    assert!(lr.interval(p * 1.01).0 > 0.0);
    assert!(lr.interval(p * 0.99).0 < 0.0);
    let (lo, hi) = lr.interval(0.025);
    assert!(lo < 0.2 && 0.2 < hi, "{lo} {hi}");
}
