//! The comparison on synthetic profiles drawn from known distributions: a real change
//! is found and named, noise alone is not flagged (the false-alarm rate over many
//! simulated pairs stays below the nominal 5%), Holm's correction is what keeps it
//! there, several runs per side account for run-to-run variance that a single pooled
//! run would mistake for a change, and tiny functions never gate.

use super::input::{InputKind, Run, StackWeight};
use super::*;
use crate::output::folded::Label;
use crate::profile::FrameClass;

mod hostile;
mod interrupts;
mod several_runs;

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
        hostname: String::new(),
        cpu_model: String::new(),
        warning: None,
        note: None,
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
        basis: Basis::Time,
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
        c.rows
            .iter()
            .all(|r| r.verdict == Verdict::Unchanged || r.whole_run),
        "{:?}",
        c.rows
    );
    // One run a side: the whole run is shown, untested.
    let whole = c.rows.iter().find(|r| r.whole_run).unwrap();
    assert_eq!(whole.verdict, Verdict::Small);
    assert_eq!(table::headline(&c), "no regression");
}

/// Runs of the 30-function mix on `host`, each run's speed off by a few percent (the
/// machine's own variation) and `slow` times the work everywhere.
fn machine_runs(rng: &mut Rng, host: &str, model: &str, slow: f64, k: usize) -> Vec<Run> {
    (0..k)
        .map(|_| {
            let speed = 1.0 + 0.02 * rng.normal();
            let n = (3000.0 * slow * speed) as u64;
            let mut r = draw(rng, &shares(), n);
            r.hostname = host.into();
            r.cpu_model = model.into();
            r
        })
        .collect()
}

/// A uniform 20% slowdown leaves every share as it was: on one kind of machine the
/// whole run's CPU time fails the gate (and every function's time rises), on two
/// different machines it is only "slower", with the caveat said, and functions
/// compare by share.
#[test]
fn a_uniform_slowdown_fails_on_one_machine_only() {
    let mut rng = Rng(32);
    let base = machine_runs(&mut rng, "ci-1", "Xeon 8375C", 1.0, 3);
    let new = machine_runs(&mut rng, "ci-2", "Xeon 8375C", 1.2, 3);
    let c = compare(&base, &new, gate(0.10)).unwrap();
    assert_eq!(c.unit, Unit::Ns);
    assert_eq!(c.machine, Machine::Same("Xeon 8375C".into()));
    let whole = &c.rows[0];
    assert!(
        whole.whole_run && whole.verdict == Verdict::Regression,
        "{whole:?}"
    );
    assert!(table::headline(&c).starts_with("REGRESSION: the whole run (CPU time +"));
    let mut out = Vec::new();
    let sides = table::Sides {
        base: &base,
        new: &new,
    };
    table::write_table(&c, sides, 20, false, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.lines().count() < 15, "{text}");
    assert!(text.contains("full table: --verbose"), "{text}");

    let other = machine_runs(&mut rng, "laptop", "Core i7-1185G7", 1.2, 3);
    let c = compare(&base, &other, gate(0.10)).unwrap();
    assert_eq!(c.unit, Unit::Share);
    assert!(matches!(c.machine, Machine::Different(..)));
    let whole = c.rows.iter().find(|r| r.whole_run).unwrap();
    assert_eq!(whole.verdict, Verdict::Slower, "{whole:?}");
    assert_eq!(c.count(Verdict::Regression), 0);
    assert!(
        summary::machine_note(&c)
            .unwrap()
            .contains("different machines")
    );
    // Older recordings name no model: the host decides.
    let old: Vec<Run> = machine_runs(&mut rng, "ci-1", "", 1.2, 3);
    let base_old: Vec<Run> = machine_runs(&mut rng, "ci-1", "", 1.0, 3);
    let c = compare(&base_old, &old, gate(0.10)).unwrap();
    assert_eq!(c.machine, Machine::Same("ci-1".into()));
}

/// The same workload on one machine, 3+3 runs, compared by time: the false-alarm rate
/// over many simulated pairs stays at or below alpha.
#[test]
fn time_on_one_machine_keeps_the_false_alarm_rate() {
    let mut rng = Rng(33);
    let sims = 300;
    let mut alarms = 0;
    for _ in 0..sims {
        let base = machine_runs(&mut rng, "h", "m", 1.0, 3);
        let new = machine_runs(&mut rng, "h", "m", 1.0, 3);
        let c = compare(&base, &new, gate(0.0)).unwrap();
        assert_eq!(c.unit, Unit::Ns);
        alarms += usize::from(c.regressions().next().is_some());
    }
    eprintln!("false alarms: {alarms} of {sims}");
    assert!(alarms <= sims * 7 / 100, "{alarms} of {sims}");
}

#[test]
fn absolute_refuses_to_mix_recordings_and_folded_files() {
    let rec = run(&[10]);
    let folded = Run::from_folded("main;f0 10\n", "x.folded".into()).unwrap();
    let opts = CompareOptions {
        basis: Basis::Time,
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

/// The power table of docs/ci.md: `cargo test --release --lib power_table -- --ignored
/// --nocapture`. For each number of runs per side and run-to-run variation, the share
/// of comparisons that flag a slowdown of one function (gate 5%), and the false-alarm
/// rate of the same setting with no change.
#[test]
#[ignore]
fn power_table() {
    let sims = 400;
    let samples = 1000;
    println!(
        "| runs per side | run-to-run CV | false alarms | 10% at 5% | 30% at 5% | 2x at 5% | 10% at 20% | 30% at 20% | 2x at 20% | 10% at 45% | 30% at 45% | 2x at 45% |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for cv in [0.0, 0.1] {
        for k in [1usize, 3, 5] {
            let mut cells = Vec::new();
            let mut rng = Rng(100 + k as u64);
            // Function 0 at the given share, the rest split over 9 others.
            let weights = |share: f64| -> Vec<f64> {
                let mut w = vec![share];
                w.extend(std::iter::repeat_n((1.0 - share) / 9.0, 9));
                w
            };
            let draw_runs = |rng: &mut Rng, w: &[f64]| -> Vec<Run> {
                (0..k)
                    .map(|_| {
                        let v: Vec<f64> = w.iter().map(|x| x * (cv * rng.normal()).exp()).collect();
                        draw(rng, &v, samples)
                    })
                    .collect()
            };
            let mut alarms = 0;
            for _ in 0..sims {
                let w = weights(0.2);
                let c = compare(
                    &draw_runs(&mut rng, &w),
                    &draw_runs(&mut rng, &w),
                    gate(0.05),
                )
                .unwrap();
                alarms += usize::from(c.regressions().next().is_some());
            }
            cells.push(format!("{:.1}%", 100.0 * alarms as f64 / sims as f64));
            for share in [0.05, 0.2, 0.45] {
                for slow in [1.1, 1.3, 2.0] {
                    let mut found = 0;
                    for _ in 0..sims {
                        let w = weights(share);
                        let mut s = w.clone();
                        s[0] *= slow;
                        let c = compare(
                            &draw_runs(&mut rng, &w),
                            &draw_runs(&mut rng, &s),
                            gate(0.05),
                        )
                        .unwrap();
                        found += usize::from(named(&c).contains(&"f0".to_owned()));
                    }
                    cells.push(format!("{:.0}%", 100.0 * found as f64 / sims as f64));
                }
            }
            println!("| {k} + {k} | {:.0}% | {} |", cv * 100.0, cells.join(" | "));
        }
    }
}

/// One function wanders between runs while the other 29 agree as sampling predicts:
/// the test over every function's runs does not see it (its few degrees of freedom
/// are lost among theirs), its own test does. Without that, 3+3 runs of the same
/// program raised a false alarm in 17 of these 200 comparisons (8.5%, over the
/// nominal 5%); with it, 5.
#[test]
fn one_wandering_function_is_not_a_false_alarm() {
    let mut rng = Rng(7);
    let p = shares();
    let sims = 200;
    let mut alarms = 0;
    let one = |rng: &mut Rng| {
        let mut w = p.clone();
        w[0] *= (0.10 * rng.normal()).exp();
        draw(rng, &w, 5000)
    };
    for _ in 0..sims {
        let base: Vec<Run> = (0..3).map(|_| one(&mut rng)).collect();
        let new: Vec<Run> = (0..3).map(|_| one(&mut rng)).collect();
        let c = compare(&base, &new, gate(0.0)).unwrap();
        alarms += usize::from(c.regressions().next().is_some());
    }
    eprintln!("false alarms: {alarms}/{sims}");
    assert!(alarms <= sims * 6 / 100, "{alarms} false alarms in {sims}");
}
