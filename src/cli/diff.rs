//! `profile diff`'s arguments: the runs, the gate, the statistics, the outputs.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

pub(crate) const DIFF_EXAMPLES: &str = "\
Examples:
  profile diff base.prof new.prof                        the largest changes, BASE -> NEW
  profile diff base.prof new.prof --fail-on-regression 10 --flamegraph diff.svg
  profile diff --base a1.prof --base a2.prof --base a3.prof \\
               --new b1.prof --new b2.prof --new b3.prof --fail-on-regression 5
  profile diff main.folded pr.folded --format markdown -o comment.md

Exit status: 0 no regression (or no gate), 3 regression, 4 inconclusive with \
--fail-if-inconclusive, 2 error. See docs/ci.md.";

pub(crate) const DIFF_LONG_ABOUT: &str = "\
Compare a BASE profile with a NEW one, function by function and as a whole, and fail \
when the program or a function got slower.

Each side is one or more recordings (.prof, or perf.data files from `perf record`) or \
folded files (`root;...;leaf COUNT` lines), given as BASE NEW or with --base/--new, \
repeated for several runs per side (3 a side, BASE and NEW interleaved, is the \
recommended CI setup: docs/ci.md). For every function the diff compares its self and \
its total (inclusive) CPU time per run when each side has two recordings or more, all \
made on the same kind of machine (the recordings name their CPU model); otherwise its \
share of each run's CPU samples (--shares and --absolute choose). Recordings also \
compare the whole run: each run's exact CPU time. Time under an interrupt entry (a \
timer, an IPI, a device, and the preemption on return from it) is the machine's, not \
the program's: it is in no function's row and no share, and is shown on a line of its \
own (--compare-interrupts to compare it); system calls and page faults are compared.

Gate: with --fail-on-regression PCT the exit status is 3 when the whole run's CPU time \
(same kind of machine, two runs a side or more), or some function's self or total time \
(or share), rose by at least PCT percent of its BASE value (NEW/BASE - 1 >= PCT/100) \
AND the rise is statistically significant. Significance: a one-sided test on \
ln(NEW/BASE), with sampling noise (binomial shares, Poisson times) and, with several \
runs, each row's own run-to-run spread (Student t on Satterthwaite degrees of freedom; \
the whole run by Welch's t). All tests of one diff are corrected together by a \
weighted Holm procedure, so the chance of any false alarm when nothing changed is at \
most --alpha (default 5%): half of it goes to the whole run, 35% to the self rows of \
functions at 5% of CPU or more, 15% to every other row, and a row found to rise hands \
its share on. Functions under --min-share of CPU on both sides are never tested, and \
kernel functions do not gate unless --gate-kernel is given. A row not found to rise \
is inconclusive when a rise of PCT would likely have gone unseen.

Output: the verdict, the rows that decide it, one line counting the rest and one for \
the inconclusive rows; --verbose prints the full table, each row's interval (two-sided, \
at the level the row was judged at: its lower end above 0 is a significant rise) and \
the advice for each inconclusive row.";

/// What folded inputs count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FoldedUnitArg {
    /// Sample counts.
    Samples,
    /// Nanoseconds of CPU time.
    Ns,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DiffFormat {
    /// An aligned table for a terminal.
    Table,
    /// Markdown for a pull-request comment.
    Markdown,
    /// JSON for scripts.
    Json,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The baseline: a recording (profile's, or perf's perf.data) or a folded file (or
    /// use --base).
    #[arg(value_name = "BASE")]
    pub base_file: Option<PathBuf>,

    /// The profile to judge: a recording (profile's, or perf's perf.data) or a folded
    /// file (or use --new).
    #[arg(value_name = "NEW")]
    pub new_file: Option<PathBuf>,

    /// A BASE run; repeat for several runs (their spread is then part of the test).
    #[arg(long, value_name = "FILE")]
    pub base: Vec<PathBuf>,

    /// A NEW run; repeat for several runs.
    #[arg(long, value_name = "FILE")]
    pub new: Vec<PathBuf>,

    /// Compare each function's CPU time per run, whatever the machines (the default
    /// already does with two recordings or more a side from one kind of machine).
    /// Folded files carry sample counts only: they compare in samples, which assumes
    /// the same sampling rate on both sides, and cannot be mixed with recordings.
    #[arg(long, conflicts_with = "shares")]
    pub absolute: bool,

    /// Compare each function's share of its run's CPU, even when CPU times are
    /// comparable (work that moved between functions, not work added). The whole
    /// run's CPU time is still compared.
    #[arg(long)]
    pub shares: bool,

    /// Print the full table (up to --top rows), the method and each inconclusive
    /// row's advice; the default prints the verdict, the rows that decide it and a
    /// summary. Markdown always holds the full table, under <details>.
    #[arg(short, long)]
    pub verbose: bool,

    /// Exit with status 3 when a function's self or total share (time with --absolute)
    /// rose by at least PCT percent of its BASE value and significantly.
    #[arg(long, value_name = "PCT", value_parser = parse_percent)]
    pub fail_on_regression: Option<f64>,

    /// Exit with status 4 when no function regressed but some function above
    /// --min-share was inconclusive: the runs had too few samples (or too few runs)
    /// to see a rise of the --fail-on-regression threshold. Without it such a diff
    /// exits 0 and says INCONCLUSIVE.
    #[arg(long, requires = "fail_on_regression")]
    pub fail_if_inconclusive: bool,

    /// What the counts of folded inputs are: `samples`, or `ns` of CPU time (as
    /// `perf script | inferno-collapse-perf` writes: each stack weighted by its
    /// samples' periods). Default: counts that are all multiples of one period of at
    /// least 1,000 are ns of that period, counts all of 100,000 or more with no
    /// common period are refused as ambiguous, and anything else is samples.
    #[arg(long, value_enum, value_name = "UNIT")]
    pub folded_unit: Option<FoldedUnitArg>,

    /// With --folded-unit ns: the sampling period in ns (e.g. 1001001 for perf's
    /// task-clock at -F 999). Default: the greatest common divisor of the counts.
    #[arg(long, value_name = "NS", requires = "folded_unit", value_parser = clap::value_parser!(u64).range(1..))]
    pub folded_period: Option<u64>,

    /// Family-wise false-alarm rate over all the rows of one diff (weighted Holm).
    #[arg(long, value_name = "P", default_value_t = 0.05, value_parser = parse_alpha)]
    pub alpha: f64,

    /// Functions under this percentage of CPU on both sides are shown but not tested.
    #[arg(long, value_name = "PCT", default_value_t = 1.0, value_parser = parse_share)]
    pub min_share: f64,

    /// Let kernel functions (`_[k]`) fail the gate too. By default a rise in one is at
    /// most "slower": a process's kernel time follows the machine (interrupts,
    /// scheduling) as much as the program, and a program's own extra system calls
    /// still show in the total of the user function that makes them.
    #[arg(long)]
    pub gate_kernel: bool,

    /// Compare time under an interrupt entry (x86-64 `asm_sysvec_*`,
    /// `asm_common_interrupt`; arm64 `el0_interrupt`, `el1_interrupt`, `*_handle_irq`)
    /// as the functions it passes through. By default it is the machine's, not the
    /// program's: it is left out of every function's row and of both sides' shares,
    /// and shown on a line of its own, so that a runner's load does not move every
    /// share. System calls and page faults are compared either way.
    #[arg(long)]
    pub compare_interrupts: bool,

    /// How to print the comparison.
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = DiffFormat::Table)]
    pub format: DiffFormat,

    /// Print JSON (the same as --format json).
    #[arg(long, conflicts_with = "format")]
    pub json: bool,

    /// Write the comparison here instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Rows of the full table (--verbose, and markdown's): every regression, then the
    /// largest changes up to N.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub top: usize,

    /// Write a differential flame graph of NEW here (red: more CPU in NEW than in BASE).
    #[arg(long, value_name = "PATH")]
    pub flamegraph: Option<PathBuf>,
}

impl DiffArgs {
    /// BASE and NEW runs from the positional arguments and the repeated options.
    pub fn inputs(&self) -> Result<(Vec<PathBuf>, Vec<PathBuf>), String> {
        let mut base = self.base.clone();
        let mut new = self.new.clone();
        match (&self.base_file, &self.new_file) {
            (Some(b), Some(n)) => {
                base.insert(0, b.clone());
                new.insert(0, n.clone());
            }
            (Some(one), None) if base.is_empty() && !new.is_empty() => base.push(one.clone()),
            (Some(one), None) if new.is_empty() && !base.is_empty() => new.push(one.clone()),
            (Some(_), None) => {
                return Err("give both BASE and NEW (or --base and --new)".to_owned());
            }
            _ => {}
        }
        if base.is_empty() || new.is_empty() {
            return Err("give both BASE and NEW (or --base and --new)".to_owned());
        }
        Ok((base, new))
    }

    pub fn format(&self) -> DiffFormat {
        if self.json {
            DiffFormat::Json
        } else {
            self.format
        }
    }

    /// How to read folded inputs.
    pub fn folded_unit(&self) -> profile::diff::FoldedUnit {
        use profile::diff::FoldedUnit;
        match self.folded_unit {
            None => FoldedUnit::Auto,
            Some(FoldedUnitArg::Samples) => FoldedUnit::Samples,
            Some(FoldedUnitArg::Ns) => FoldedUnit::Ns {
                period: self.folded_period,
            },
        }
    }

    pub fn to_options(&self) -> profile::diff::CompareOptions {
        let mut o = profile::diff::CompareOptions::default();
        o.basis = if self.absolute {
            profile::diff::Basis::Time
        } else if self.shares {
            profile::diff::Basis::Share
        } else {
            profile::diff::Basis::Auto
        };
        o.threshold = self.fail_on_regression.map(|p| p / 100.0);
        o.alpha = self.alpha;
        o.min_share = self.min_share / 100.0;
        o.gate_kernel = self.gate_kernel;
        o.compare_interrupts = self.compare_interrupts;
        o
    }
}

pub(crate) fn parse_percent(s: &str) -> Result<f64, String> {
    let p: f64 = s
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("`{s}` is not a percentage"))?;
    if !(p >= 0.0 && p.is_finite()) {
        return Err(format!("want a percentage of 0 or more, got {s}"));
    }
    Ok(p)
}

pub(crate) fn parse_share(s: &str) -> Result<f64, String> {
    let p = parse_percent(s)?;
    if p >= 100.0 {
        return Err(format!("want a percentage below 100, got {s}"));
    }
    Ok(p)
}

fn parse_alpha(s: &str) -> Result<f64, String> {
    let a: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a probability"))?;
    if !(a > 0.0 && a < 0.5) {
        return Err(format!("want a probability between 0 and 0.5, got {s}"));
    }
    Ok(a)
}
