//! The command line: clap definitions, converted into the library's option structs.
//! Help text, man pages and completions are all generated from these definitions.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use profile::record::{CallGraph, RecordOptions};

const RECORD_EXAMPLES: &str = "\
Examples:
  Attach to a running process for 10 seconds:
    sudo profile record --pid 4242 -d 10 -o app.prof
  Launch a command and profile it (and the processes it starts):
    profile record -o bench.prof -- ./target/release/bench
  Sample ten times as often, with frame-pointer stacks:
    profile record -F 999 --call-graph fp --pid 4242";

const REPORT_EXAMPLES: &str = "\
Examples:
  The functions with the most CPU time:
    profile report -i app.prof
  An SVG flame graph:
    profile report -i app.prof --flamegraph app.svg
  Folded stacks, one tower per thread, on stdout:
    profile report -i app.prof --per-thread --folded -
  Thread `worker` from 1 s to 2 s, merged by the running function:
    profile report -i app.prof --thread worker --time 1..2 --reverse --flamegraph w.svg
  For pprof (go tool pprof -top app.pb.gz), speedscope.app and scripts, in one go:
    profile report -i app.prof --pprof app.pb.gz --speedscope app.json --json=top.json";

const DIFF_EXAMPLES: &str = "\
Examples:
  profile diff base.prof new.prof                        the largest changes, BASE -> NEW
  profile diff base.prof new.prof --fail-on-regression 10 --flamegraph diff.svg
  profile diff --base a1.prof --base a2.prof --base a3.prof \\
               --new b1.prof --new b2.prof --new b3.prof --fail-on-regression 5
  profile diff main.folded pr.folded --format markdown -o comment.md

Exit status: 0 no regression (or no gate), 3 regression, 2 error. See docs/ci.md.";

const DIFF_LONG_ABOUT: &str = "\
Compare a BASE profile with a NEW one, function by function, and fail when a function \
got slower.

Each side is one or more recordings (.prof) or folded files (`root;...;leaf COUNT` \
lines), given as BASE NEW or with --base/--new, repeated for several runs per side. For \
every function the diff compares its self and its total (inclusive) share of each run's \
CPU samples, or with --absolute its CPU time per run.

With --fail-on-regression PCT the exit status is 3 when some function's self or total \
share (time with --absolute) rose by at least PCT percent of its BASE value \
(NEW/BASE - 1 >= PCT/100; 20% -> 22% of CPU is a 10% rise) AND the rise is \
statistically significant. Significance: a one-sided test on ln(NEW/BASE). With one \
run on a side its noise is the sampling noise (binomial shares, Poisson times); with \
several, the measured spread between the runs (never less than sampling noise) with a \
Student t on Welch-Satterthwaite degrees of freedom, so run-to-run variance counts. All \
tests of one diff are corrected together with Holm's step-down procedure, so the chance \
of any false alarm when nothing changed is at most --alpha (default 5%). Functions under \
--min-share of CPU on both sides are shown but never tested, and kernel functions do \
not gate unless --gate-kernel is given. Every tested row prints \
the interval its verdict rests on: two-sided, at the level Holm judged the row at; its \
lower end above 0 is a significant rise.";

const MAIN_ABOUT: &str =
    "A sampling CPU profiler for Linux: attach to a process, get a flame graph.";

const MAIN_LONG_ABOUT: &str = "\
A sampling CPU profiler for Linux: attach to a process, get a flame graph.

Every thread of the target is sampled in proportion to its own CPU time (one perf_event \
task-clock counter per thread), at the exact instruction it is running: no safepoint \
bias, and a thread's samples always match its CPU time.";

#[derive(Debug, Parser)]
#[command(name = "profile", version, about = MAIN_ABOUT, long_about = MAIN_LONG_ABOUT)]
#[command(
    after_help = "Exit status: 0 on success, 2 on errors, 3 when `diff` finds a regression; \
`record -- COMMAND` exits with the command's own status."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Sample a running process or a command and write a recording.
    #[command(after_help = RECORD_EXAMPLES)]
    Record(RecordArgs),
    /// Read a recording: top functions, folded stacks, flame graphs.
    #[command(after_help = REPORT_EXAMPLES)]
    Report(ReportArgs),
    /// Compare two profiles; fail on a statistically significant regression.
    #[command(long_about = DIFF_LONG_ABOUT, after_help = DIFF_EXAMPLES)]
    Diff(DiffArgs),
    /// Generate shell completions or man pages (for packagers).
    #[command(hide = true)]
    Generate {
        #[arg(value_enum)]
        what: GenerateWhat,
        /// Directory to write into.
        dir: PathBuf,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GenerateWhat {
    Completions,
    Man,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CallGraphArg {
    /// Copy user stacks and unwind them with DWARF CFI (complete stacks without frame pointers).
    Dwarf,
    /// Frame pointers only (cheaper; stops early in code built without them).
    Fp,
}

impl From<CallGraph> for CallGraphArg {
    fn from(c: CallGraph) -> Self {
        match c {
            CallGraph::Dwarf => CallGraphArg::Dwarf,
            CallGraph::Fp => CallGraphArg::Fp,
        }
    }
}

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("target").required(true).args(["pid", "command"]))]
pub struct RecordArgs {
    /// Attach to every thread of this running process.
    #[arg(short, long, value_name = "PID")]
    pub pid: Option<u32>,

    /// Stop after this many seconds (fractions allowed, e.g. 2.5). Default: until Ctrl-C,
    /// SIGTERM or the target exits. A launched command still running then is sent SIGTERM.
    #[arg(short, long, value_name = "SECS", value_parser = parse_seconds)]
    pub duration: Option<Duration>,

    /// Samples per second of each thread's CPU time (-F 1000: one sample per 1 ms of CPU).
    #[arg(short = 'F', long, value_name = "HZ", default_value_t = RecordOptions::DEFAULT_FREQUENCY)]
    pub frequency: u64,

    /// Write the recording here.
    #[arg(short, long, value_name = "FILE", default_value = RecordOptions::DEFAULT_OUTPUT)]
    pub output: PathBuf,

    /// How to take user stacks.
    #[arg(long, value_enum, value_name = "MODE", default_value_t = CallGraph::default().into())]
    pub call_graph: CallGraphArg,

    /// Bytes of user stack copied per sample for DWARF unwinding (rounded up to a multiple of 8).
    #[arg(long, value_name = "BYTES", default_value_t = RecordOptions::DEFAULT_STACK_SIZE)]
    pub stack_size: u32,

    /// Ring-buffer data pages per CPU (a power of two). Default: chosen from the mode and
    /// the locked-memory limit.
    #[arg(long, value_name = "PAGES")]
    pub mmap_pages: Option<usize>,

    /// Also look for separate debug info here (DIR/.build-id/xx/yyyy.debug or
    /// DIR/NAME.debug); /usr/lib/debug and the target's own are always searched.
    #[arg(long, value_name = "DIR")]
    pub debug_dir: Vec<PathBuf>,

    /// With --pid: also keep samples of the processes it starts after attach (their
    /// children, and theirs). Default: only the attached process's own samples. A
    /// launched COMMAND is always followed into every process it starts.
    #[arg(long, conflicts_with = "command")]
    pub children: bool,

    /// Print nothing but errors (no status line, no summary).
    #[arg(short, long)]
    pub quiet: bool,

    /// The command to launch and profile, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The recording to read.
    #[arg(short, long, value_name = "FILE", default_value = RecordOptions::DEFAULT_OUTPUT)]
    pub input: PathBuf,

    /// Write folded stacks (`root;...;leaf COUNT` per line, COUNT in samples) here; `-`
    /// is stdout.
    #[arg(long, value_name = "PATH", help_heading = "Outputs")]
    pub folded: Option<PathBuf>,

    /// Write an SVG flame graph here; `-` is stdout. Widths are CPU time; native code is
    /// red, inlined functions aqua, kernel orange, JIT green.
    #[arg(long, value_name = "PATH", help_heading = "Outputs")]
    pub flamegraph: Option<PathBuf>,

    /// Write a gzipped pprof profile (profile.proto) here, for `go tool pprof`,
    /// Pyroscope, Parca, Grafana; `-` is stdout.
    #[arg(long, value_name = "PATH", help_heading = "Outputs")]
    pub pprof: Option<PathBuf>,

    /// Write a speedscope JSON file (one profile per thread) here, for
    /// speedscope.app; `-` is stdout.
    #[arg(long, value_name = "PATH", help_heading = "Outputs")]
    pub speedscope: Option<PathBuf>,

    /// Print the top table's data as JSON, with totals, threads and recording
    /// metadata; `--json=PATH` writes it to a file.
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = "-",
          help_heading = "Outputs")]
    pub json: Option<PathBuf>,

    /// Print the N functions with the most self CPU time (the default output, N = 20,
    /// when no other output goes to stdout); limits --json too.
    #[arg(long, value_name = "N", help_heading = "Outputs")]
    pub top: Option<usize>,

    /// Root every stack at its thread's name, then its tid (folded, flame graph).
    #[arg(long, help_heading = "Flame graphs and folded stacks")]
    pub per_thread: bool,

    /// Root every stack at its process's name, then its pid (folded, flame graph).
    #[arg(long, help_heading = "Flame graphs and folded stacks")]
    pub per_process: bool,

    /// Merge stacks by the running function (leaf first), callers above it.
    #[arg(long, help_heading = "Flame graphs and folded stacks")]
    pub reverse: bool,

    /// Draw an icicle graph: roots at the top, stacks growing down.
    #[arg(
        long,
        visible_alias = "inverted",
        help_heading = "Flame graphs and folded stacks"
    )]
    pub icicle: bool,

    /// Merge flame graph frames narrower than this percentage of the total into one
    /// frame per parent (narrower merged frames are left out).
    #[arg(long, value_name = "PERCENT", default_value_t = 0.01,
          value_parser = parse_share, help_heading = "Flame graphs and folded stacks")]
    pub min_width: f64,

    /// Flame graph title (default: `profile: COMMAND`).
    #[arg(
        long,
        value_name = "TEXT",
        help_heading = "Flame graphs and folded stacks"
    )]
    pub title: Option<String>,

    /// Keep only samples of the threads with this name or tid (repeatable).
    #[arg(long, value_name = "NAME|TID", help_heading = "Filters (every output)")]
    pub thread: Vec<String>,

    /// Keep only samples taken in this window, in seconds from the start of the
    /// recording: START..END, START.. or ..END.
    #[arg(long, value_name = "START..END", value_parser = parse_time_range,
          help_heading = "Filters (every output)")]
    pub time: Option<profile::profile::filter::TimeRange>,

    /// Keep only samples with a frame whose name matches this regular expression
    /// anywhere (repeatable: any of them). Whole samples are kept, stacks unchanged.
    #[arg(long, value_name = "REGEX", value_parser = parse_regex,
          help_heading = "Filters (every output)")]
    pub include: Vec<regex::Regex>,

    /// Drop samples with a frame whose name matches this regular expression anywhere
    /// (repeatable).
    #[arg(long, value_name = "REGEX", value_parser = parse_regex,
          help_heading = "Filters (every output)")]
    pub exclude: Vec<regex::Regex>,

    /// Keep only samples through this function and start their stacks at it (its
    /// outermost call): an exact function name, else a regular expression.
    #[arg(long, value_name = "FUNCTION", help_heading = "Filters (every output)")]
    pub focus: Option<String>,

    /// Tell functions apart by source line: `name:LINE` frames.
    #[arg(long, help_heading = "Filters (every output)")]
    pub lines: bool,
}

fn parse_time_range(s: &str) -> Result<profile::profile::filter::TimeRange, String> {
    s.parse()
        .map_err(|e: profile::profile::filter::FilterError| e.to_string())
}

fn parse_regex(s: &str) -> Result<regex::Regex, String> {
    regex::Regex::new(s).map_err(|e| e.to_string())
}

impl ReportArgs {
    /// The filters shared by every output.
    pub fn filter(&self) -> profile::profile::filter::Filter {
        let mut f = profile::profile::filter::Filter::default();
        f.threads = self.thread.clone();
        f.time = self.time.unwrap_or_default();
        f.include = self.include.clone();
        f.exclude = self.exclude.clone();
        f.focus = self.focus.clone();
        f
    }

    pub fn folded_options(&self) -> profile::output::folded::FoldedOptions {
        let mut o = profile::output::folded::FoldedOptions::per_thread(self.per_thread);
        o.per_process = self.per_process;
        o.reverse = self.reverse;
        o
    }

    pub fn flamegraph_options(
        &self,
        note: Option<String>,
    ) -> profile::output::flamegraph::FlameGraphOptions {
        let mut o = profile::output::flamegraph::FlameGraphOptions::default();
        o.per_thread = self.per_thread;
        o.per_process = self.per_process;
        o.reverse = self.reverse;
        o.icicle = self.icicle;
        o.min_width = self.min_width;
        o.title = self.title.clone();
        o.note = note;
        o
    }
}

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
    /// The baseline: a recording or a folded file (or use --base).
    #[arg(value_name = "BASE")]
    pub base_file: Option<PathBuf>,

    /// The profile to judge: a recording or a folded file (or use --new).
    #[arg(value_name = "NEW")]
    pub new_file: Option<PathBuf>,

    /// A BASE run; repeat for several runs (their spread is then part of the test).
    #[arg(long, value_name = "FILE")]
    pub base: Vec<PathBuf>,

    /// A NEW run; repeat for several runs.
    #[arg(long, value_name = "FILE")]
    pub new: Vec<PathBuf>,

    /// Compare CPU time per run instead of shares of CPU (for benchmarks of fixed work).
    /// Folded files carry sample counts only: they compare in samples, which assumes
    /// the same sampling rate on both sides, and cannot be mixed with recordings.
    #[arg(long)]
    pub absolute: bool,

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
    /// least 1,000 are ns of that period, small counts are samples, and large counts
    /// with no common period are refused as ambiguous.
    #[arg(long, value_enum, value_name = "UNIT")]
    pub folded_unit: Option<FoldedUnitArg>,

    /// With --folded-unit ns: the sampling period in ns (e.g. 1001001 for perf's
    /// task-clock at -F 999). Default: the greatest common divisor of the counts.
    #[arg(long, value_name = "NS", requires = "folded_unit", value_parser = clap::value_parser!(u64).range(1..))]
    pub folded_period: Option<u64>,

    /// Family-wise false-alarm rate over all the functions of one diff (Holm).
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

    /// How to print the comparison.
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = DiffFormat::Table)]
    pub format: DiffFormat,

    /// Print JSON (the same as --format json).
    #[arg(long, conflicts_with = "format")]
    pub json: bool,

    /// Write the comparison here instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Rows to show: every regression, then the largest changes up to N.
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
        o.absolute = self.absolute;
        o.threshold = self.fail_on_regression.map(|p| p / 100.0);
        o.alpha = self.alpha;
        o.min_share = self.min_share / 100.0;
        o.gate_kernel = self.gate_kernel;
        o
    }
}

fn parse_percent(s: &str) -> Result<f64, String> {
    let p: f64 = s
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("`{s}` is not a percentage"))?;
    if !(p >= 0.0 && p.is_finite()) {
        return Err(format!("want a percentage of 0 or more, got {s}"));
    }
    Ok(p)
}

fn parse_share(s: &str) -> Result<f64, String> {
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

fn parse_seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !(secs > 0.0 && secs.is_finite()) {
        return Err(format!("duration must be positive, got {s}"));
    }
    Ok(Duration::from_secs_f64(secs))
}

impl RecordArgs {
    pub fn to_options(&self) -> RecordOptions {
        use profile::record::Target;
        let mut o = RecordOptions::new(match self.pid {
            Some(pid) => Target::Pid(pid),
            None => Target::Command(self.command.clone()),
        });
        o.duration = self.duration;
        o.frequency = self.frequency;
        o.output = self.output.clone();
        o.call_graph = match self.call_graph {
            CallGraphArg::Dwarf => CallGraph::Dwarf,
            CallGraphArg::Fp => CallGraph::Fp,
        };
        o.stack_size = self.stack_size;
        o.progress = !self.quiet;
        o.ring_pages = self.mmap_pages;
        o.debug_dirs = self.debug_dir.clone();
        o.children = self.children;
        o
    }
}

#[cfg(test)]
mod tests;
