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
fn a_single_run_per_side_has_no_spread_to_measure() {
    let one = Spread::of_runs(&[40.0], &[200.0], true);
    assert_eq!(one, Spread::default());
    assert_eq!(one.dispersion(), 1.0);
    assert_eq!((one.tau2(), one.tau2_var()), (0.0, 0.0));
}

#[test]
fn spread_measures_runs_against_sampling_noise() {
    // Three runs of 1,000 samples at 18%, 20%, 22%: binomial relative sd is 6.3%, the
    // runs are 10% apart: dispersion about 2.5, tau² about 0.01 - 0.004.
    let s = Spread::of_runs(&[180.0, 200.0, 220.0], &[1000.0; 3], true);
    assert_eq!(s.df, 2.0);
    assert!((2.0..3.0).contains(&s.dispersion()), "{}", s.dispersion());
    assert!(close(s.tau2(), 0.01 - 0.8 / 200.0, 5e-4), "{}", s.tau2());
    // Runs that agree exactly: negative excess, no run-to-run variation.
    let s = Spread::of_runs(&[200.0; 3], &[1000.0; 3], true);
    assert!(s.dispersion() < 0.01 && s.tau2() < 0.0);
    // Poisson counts of runs meant to be alike.
    let s = Spread::of_runs(&[100.0, 100.0, 100.0, 100.0], &[1e4; 4], false);
    assert!(s.dispersion() < 0.01);
    let s = Spread::of_runs(&[50.0, 150.0], &[1e4; 2], false);
    assert!(s.dispersion() > 40.0);
    assert!(close(s.tau2(), 0.5 - 0.01, 0.01), "{}", s.tau2());
}

fn side(share: f64, n: f64) -> Side {
    Side {
        mean: share,
        sampling_var: share * (1.0 - share) / n,
    }
}

#[test]
fn no_run_to_run_variation_means_a_normal_test_and_pooling_costs_no_power() {
    // tau = 0 and known (the runs agree as sampling predicts): the normal
    // distribution, and the same standard error as one run of all the samples.
    let (b, n) = (side(0.30, 6000.0), side(0.36, 6000.0));
    let lr = LogRatio::new(&b, &n, (3, 3), 0.0, 0.0);
    assert_eq!(lr.df, f64::INFINITY);
    assert_eq!(lr.sampling_part, 1.0);
    let single = LogRatio::new(&b, &n, (1, 1), 0.0, 0.0);
    assert!(close(lr.se, single.se, 1e-15));
    // Run-to-run variation adds tau²/runs per side; its uncertainty sets the degrees
    // of freedom (Satterthwaite): 2 var² / Var(tau² part).
    let sampling = lr.se * lr.se;
    let tau2 = 3.0 * sampling;
    let tau2_var = 2.0 * (tau2 * tau2) / 4.0;
    let wide = LogRatio::new(&b, &n, (3, 3), tau2, tau2_var);
    let excess = tau2 * (2.0 / 3.0);
    assert!(close(wide.se * wide.se, sampling + excess, 1e-12));
    let var = sampling + excess;
    let want_df = 2.0 * var * var / (tau2_var * (2.0f64 / 3.0).powi(2));
    assert!(close(wide.df, want_df, 1e-9), "{} {want_df}", wide.df);
    assert!(wide.df > 4.0, "{}", wide.df);
    assert!(close(wide.sampling_part, sampling / var, 1e-12));
}

#[test]
fn detectable_rise_is_what_the_test_would_catch() {
    let lr = LogRatio::new(&side(0.45, 150.0), &side(0.45, 150.0), (1, 1), 0.0, 0.0);
    // se = sqrt(2 * 0.55 / (0.45 * 150)) = 0.1277; z(0.99) + z(0.8) = 2.326 + 0.842.
    let d = lr.detectable_rise(0.01, 0.8);
    assert!(close(d, (3.1685 * 0.12766_f64).exp() - 1.0, 2e-3), "{d}");
    // Four times the samples halve the error.
    let lr4 = LogRatio::new(&side(0.45, 600.0), &side(0.45, 600.0), (1, 1), 0.0, 0.0);
    let d4 = lr4.detectable_rise(0.01, 0.8);
    assert!(close((1.0 + d4).ln() * 2.0, (1.0 + d).ln(), 1e-9));
}

#[test]
fn interval_lower_end_agrees_with_the_p_value() {
    let lr = LogRatio::new(&side(0.30, 2000.0), &side(0.36, 2000.0), (1, 1), 0.0, 0.0);
    let p = lr.p_rise();
    assert!(p < 1e-4, "{p}");
    // At a level just above p the lower end is above 0; just below, under it.
    assert!(lr.interval(p * 1.01).0 > 0.0);
    assert!(lr.interval(p * 0.99).0 < 0.0);
    let (lo, hi) = lr.interval(0.025);
    assert!(lo < 0.2 && 0.2 < hi, "{lo} {hi}");
}

#[test]
fn weighted_holm_spends_alpha_by_weight_and_recycles_it() {
    // Equal weights: Holm's own levels.
    let p = [0.01, 0.04, 0.03, 0.005];
    assert_eq!(weighted_holm(&p, &[1.0; 4], 0.05), holm(&p, 0.05));
    // A heavy row is judged at most of alpha; once rejected, the rest share it all.
    let r = weighted_holm(&[0.02, 0.02, 0.5], &[8.0, 1.0, 1.0], 0.05);
    assert!(r[0].0 && close(r[0].1, 0.04, 1e-12), "{r:?}");
    assert!(r[1].0 && close(r[1].1, 0.025, 1e-12), "{r:?}");
    assert!(!r[2].0 && close(r[2].1, 0.05, 1e-12), "{r:?}");
    // A light row with the same p-value is not reached.
    let r = weighted_holm(&[0.5, 0.02], &[8.0, 1.0], 0.05);
    assert!(!r[0].0 && !r[1].0, "{r:?}");
}

#[test]
fn welch_on_exact_run_totals() {
    let r = welch_log(&[100.0, 102.0, 98.0], &[120.0, 123.0, 118.0]);
    assert!(close(r.estimate, (120.3f64 / 100.0).ln(), 0.01), "{r:?}");
    assert!(r.df > 3.0 && r.df <= 4.0, "{r:?}");
    assert!(r.p_rise() < 0.001, "{r:?}");
    let same = welch_log(&[100.0, 102.0, 98.0], &[99.0, 103.0, 100.0]);
    assert!(same.p_rise() > 0.3, "{same:?}");
    assert!(welch_log(&[100.0], &[200.0, 201.0]).p_rise() == 1.0);
}

#[test]
fn the_spread_of_times_follows_the_times_not_the_sample_counts() {
    // The same 1 s three times, from 1000, 800 and 1200 samples (a varied period):
    // no spread beyond sampling.
    let s = Spread::of_times(&[1e9; 3], &[1000.0, 800.0, 1200.0]);
    assert!(s.tau2() <= 0.0, "{s:?}");
    // 0.9, 1.0 and 1.1 s from 1000 samples each: 10% beyond sampling's 3%.
    let s = Spread::of_times(&[0.9e9, 1e9, 1.1e9], &[1000.0; 3]);
    assert!(close(s.tau2().sqrt(), 0.1, 0.01), "{s:?}");
}
