//! The comparison on synthetic profiles drawn from known distributions: a real change
//! is found and named, noise alone is not flagged (the false-alarm rate over many
//! simulated pairs stays below the nominal 5%), Holm's correction is what keeps it
//! there, several runs per side account for run-to-run variance that a single pooled
//! run would mistake for a change, and tiny functions never gate.

use super::input::{InputKind, Run, StackWeight};
use super::*;
use crate::output::folded::Label;
use crate::profile::FrameClass;

/// splitmix64: a small deterministic generator, so the tests are reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f64 {
        let u = self.uniform().max(1e-300);
        let v = self.uniform();
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// 30 functions under `main` with shares 0.8^k (the largest about 20%, 14 of them
/// above the 1% minimum).
fn shares() -> Vec<f64> {
    let w: Vec<f64> = (0..30).map(|k| 0.8f64.powi(k)).collect();
    let t: f64 = w.iter().sum();
    w.iter().map(|x| x / t).collect()
}

/// Draws `n` samples over `weights` (any scale) into a recording-like run, 1 ms each.
fn draw(rng: &mut Rng, weights: &[f64], n: u64) -> Run {
    let total: f64 = weights.iter().sum();
    let mut cum = Vec::with_capacity(weights.len());
    let mut acc = 0.0;
    for w in weights {
        acc += w / total;
        cum.push(acc);
    }
    let mut counts = vec![0u64; weights.len()];
    for _ in 0..n {
        let u = rng.uniform();
        let k = cum.partition_point(|&c| c < u).min(weights.len() - 1);
        counts[k] += 1;
    }
    run(&counts)
}

fn run(counts: &[u64]) -> Run {
    let mut frames = vec![Label {
        text: "main".into(),
        class: FrameClass::Native,
    }];
    let mut stacks = Vec::new();
    for (k, &c) in counts.iter().enumerate() {
        frames.push(Label {
            text: format!("f{k}"),
            class: FrameClass::Native,
        });
        if c > 0 {
            stacks.push((
                vec![0, k as u32 + 1],
                StackWeight {
                    samples: c,
                    cpu_ns: c * 1_000_000,
                },
            ));
        }
    }
    let samples = counts.iter().sum();
    Run {
        source: "sim".into(),
        kind: InputKind::Recording,
        frames,
        stacks,
        samples,
        cpu_ns: samples * 1_000_000,
        warning: None,
    }
}

fn gate(threshold: f64) -> CompareOptions {
    CompareOptions {
        threshold: Some(threshold),
        ..CompareOptions::default()
    }
}

fn named(c: &Comparison) -> Vec<String> {
    c.regressions().map(|r| r.function.clone()).collect()
}

/// Two runs of the same distribution, many times over, with the strictest gate (any
/// significant rise fails): at most the nominal 5% of comparisons raise an alarm.
/// Without the correction (each function tested at 5% on its own) most would.
#[test]
fn noise_alone_is_not_flagged_and_the_correction_is_why() {
    let mut rng = Rng(1);
    let p = shares();
    let sims = 400;
    let (mut alarms, mut uncorrected) = (0, 0);
    for _ in 0..sims {
        let base = [draw(&mut rng, &p, 2000)];
        let new = [draw(&mut rng, &p, 2000)];
        let c = compare(&base, &new, gate(0.0)).unwrap();
        assert!(c.tests >= 10, "{}", c.tests);
        alarms += usize::from(c.regressions().next().is_some());
        uncorrected += usize::from(c.rows.iter().any(|r| r.p_value.is_some_and(|p| p < 0.05)));
    }
    eprintln!("false alarms: {alarms}/{sims} with Holm, {uncorrected}/{sims} without");
    assert!(alarms <= sims * 5 / 100, "{alarms} false alarms in {sims}");
    assert!(
        uncorrected >= sims * 30 / 100,
        "{uncorrected}: expected many alarms without a correction"
    );
}

/// Runs whose shares wander from run to run (20% log-normal per function, far more
/// than sampling noise at 5000 samples): five runs per side keep the false-alarm
/// rate under 5%, while the same samples pooled into one run per side look like
/// changes almost every time.
#[test]
fn several_runs_account_for_run_to_run_variance() {
    let mut rng = Rng(2);
    let p = shares();
    let sims = 150;
    let (mut alarms, mut pooled_alarms) = (0, 0);
    let wandering = |rng: &mut Rng| {
        let w: Vec<f64> = p.iter().map(|x| x * (0.2 * rng.normal()).exp()).collect();
        draw(rng, &w, 5000)
    };
    for _ in 0..sims {
        let base: Vec<Run> = (0..5).map(|_| wandering(&mut rng)).collect();
        let new: Vec<Run> = (0..5).map(|_| wandering(&mut rng)).collect();
        let c = compare(&base, &new, gate(0.0)).unwrap();
        alarms += usize::from(c.regressions().next().is_some());
        let pooled = compare(&[pool(&base)], &[pool(&new)], gate(0.0)).unwrap();
        pooled_alarms += usize::from(pooled.regressions().next().is_some());
    }
    eprintln!("false alarms: {alarms}/{sims} with 5 runs a side, {pooled_alarms}/{sims} pooled");
    assert!(alarms <= sims * 5 / 100, "{alarms} false alarms in {sims}");
    assert!(pooled_alarms >= sims / 2, "{pooled_alarms}");
    // The dispersion says how much more the runs vary than sampling explains.
    let base: Vec<Run> = (0..5).map(|_| wandering(&mut rng)).collect();
    let c = compare(&base, &base, CompareOptions::default()).unwrap();
    let f0 = c.rows.iter().find(|r| r.function == "f0").unwrap();
    assert!(f0.dispersion.0 > 5.0, "{:?}", f0.dispersion);
}

fn pool(runs: &[Run]) -> Run {
    let mut counts = vec![0u64; 30];
    for r in runs {
        for (k, c) in counts.iter_mut().enumerate() {
            let line = format!("main;f{k}");
            *c += r
                .stacks
                .iter()
                .filter(|(s, _)| r.line(s) == line)
                .map(|(_, w)| w.samples)
                .sum::<u64>();
        }
    }
    run(&counts)
}

/// f3 (about 10% of CPU) does 30% more work: its share rises by about 26% and the
/// gate at 10% names it, and only it, nearly every time.
#[test]
fn a_real_change_is_found_and_named() {
    let mut rng = Rng(3);
    let p = shares();
    let mut slow = p.clone();
    slow[3] *= 1.3;
    let sims = 100;
    let mut found = 0;
    for _ in 0..sims {
        let base = [draw(&mut rng, &p, 5000)];
        let new = [draw(&mut rng, &slow, 5000)];
        let c = compare(&base, &new, gate(0.10)).unwrap();
        let n = named(&c);
        assert!(n.iter().all(|f| f == "f3"), "{n:?}");
        found += usize::from(n == ["f3"]);
        if let Some(r) = c.regressions().next() {
            let (lo, hi) = r.interval.unwrap();
            assert!(lo > 0.0 && r.change >= 0.10 && lo <= r.change && r.change <= hi);
            assert!(r.same_total);
        }
    }
    eprintln!("found the regression in {found}/{sims}");
    assert!(found >= sims * 90 / 100, "{found}");
}

/// With --absolute a fixed-work benchmark compares CPU time: f3's time rises 30%,
/// the others' stay; main's total rises 3%, under the 10% gate.
#[test]
fn absolute_mode_compares_cpu_time() {
    let mut rng = Rng(5);
    let p = shares();
    let mut slow = p.clone();
    slow[3] *= 1.3;
    let extra = slow.iter().sum::<f64>();
    let opts = CompareOptions {
        absolute: true,
        ..gate(0.10)
    };
    let base = [draw(&mut rng, &p, 5000)];
    let new = [draw(&mut rng, &slow, (5000.0 * extra).round() as u64)];
    let c = compare(&base, &new, opts).unwrap();
    assert_eq!(c.unit, Unit::Ns);
    assert_eq!(named(&c), ["f3"]);
    let f3 = c.rows.iter().find(|r| r.function == "f3").unwrap();
    let (lo, hi) = f3.interval.unwrap();
    assert!(lo < 0.3 && 0.3 < hi, "{f3:?}");
    let main = c.rows.iter().find(|r| r.function == "main").unwrap();
    assert_eq!(main.metric, Metric::Total);
    assert!(main.change < 0.1 && main.verdict != Verdict::Regression);
}

/// A function under the minimum share may triple without failing the gate; one that
/// is new in NEW and large does fail.
#[test]
fn tiny_functions_never_gate_new_large_ones_do() {
    let base = run(&[5000, 5000, 20, 0]);
    let new = run(&[5000, 5000, 60, 600]);
    let c = compare(&[base], &[new], gate(0.10)).unwrap();
    let f2 = c.rows.iter().find(|r| r.function == "f2").unwrap();
    assert_eq!(f2.verdict, Verdict::Small);
    assert!(f2.interval.is_none());
    assert_eq!(named(&c), ["f3"]);
    let f3 = c.regressions().next().unwrap();
    assert!(f3.change.is_infinite());
}

#[test]
fn identical_inputs_compare_as_unchanged() {
    let r = run(&[100, 200, 300]);
    let c = compare(
        std::slice::from_ref(&r),
        std::slice::from_ref(&r),
        gate(0.0),
    )
    .unwrap();
    assert!(
        c.rows.iter().all(|r| r.verdict == Verdict::Unchanged),
        "{:?}",
        c.rows
    );
    assert_eq!(table::headline(&c), "no regression");
}

#[test]
fn absolute_refuses_to_mix_recordings_and_folded_files() {
    let rec = run(&[10]);
    let folded = Run::from_folded("main;f0 10\n", "x.folded".into()).unwrap();
    let opts = CompareOptions {
        absolute: true,
        ..CompareOptions::default()
    };
    let e = compare(
        std::slice::from_ref(&rec),
        std::slice::from_ref(&folded),
        opts,
    )
    .unwrap_err();
    assert!(e.to_string().contains("x.folded"), "{e}");
    // Shares mix fine, and folded files alone compare in samples.
    assert!(
        compare(
            &[rec],
            std::slice::from_ref(&folded),
            CompareOptions::default()
        )
        .is_ok()
    );
    let c = compare(
        std::slice::from_ref(&folded),
        std::slice::from_ref(&folded),
        opts,
    )
    .unwrap();
    assert_eq!(c.unit, Unit::Samples);
}

/// A kernel function whose time grows with the machine's load (interrupts on a busy
/// runner) is reported slower but fails the gate only with `gate_kernel`.
#[test]
fn kernel_functions_gate_only_when_asked() {
    let folded = |irq: u64| {
        Run::from_folded(
            &format!("main;f0 1000\nmain;f1 1000\nmain;f1;irq_exit_[k] {irq}\n"),
            "x".into(),
        )
        .unwrap()
    };
    let (base, new) = ([folded(5)], [folded(60)]);
    let c = compare(&base, &new, gate(0.10)).unwrap();
    let irq = c
        .rows
        .iter()
        .find(|r| r.function == "irq_exit_[k]")
        .unwrap();
    assert_eq!(irq.verdict, Verdict::Slower);
    assert!(named(&c).is_empty());
    let opts = CompareOptions {
        gate_kernel: true,
        ..gate(0.10)
    };
    assert_eq!(
        named(&compare(&base, &new, opts).unwrap()),
        ["irq_exit_[k]"]
    );
}
