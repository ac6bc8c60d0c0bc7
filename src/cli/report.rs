//! `profile report`'s arguments: the input, the filters, the outputs.

use std::path::PathBuf;

use clap::Args;
use profile::record::RecordOptions;

use super::diff::parse_share;

pub(crate) const REPORT_EXAMPLES: &str = "\
Examples:
  The functions with the most CPU time:
    profile report -i app.prof
  An SVG flame graph:
    profile report -i app.prof --flamegraph app.svg
  Folded stacks, one tower per thread, on stdout:
    profile report -i app.prof --per-thread --folded -
  Thread `worker` from 1 s to 2 s, merged by the running function:
    profile report -i app.prof --thread worker --time 1..2 --reverse --flamegraph w.svg
  An off-CPU recording: every thread's wall time, lock waits only, thread timeline:
    profile report -i app.prof --per-thread --flamegraph wall.svg
    profile report -i app.prof --state lock --flamegraph locks.svg
    profile report -i app.prof --timeline threads.svg
  For pprof (go tool pprof -top app.pb.gz), speedscope.app and scripts, in one go:
    profile report -i app.prof --pprof app.pb.gz --speedscope app.json --json=top.json
  For the OpenTelemetry Collector (OTLP Profiles, protobuf):
    profile report -i app.prof --otlp app.otlp.pb
  perf's own recording (perf record -e task-clock --call-graph dwarf|fp), any output:
    profile report -i perf.data --per-thread --flamegraph perf.svg";

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The recording to read: profile's, or a perf.data file from `perf record`
    /// (task-clock, cpu-clock or cycles samples; dwarf stacks are unwound, fp and
    /// kernel callchains taken as recorded; binaries found by build-id).
    #[arg(short, long, value_name = "FILE", default_value = RecordOptions::DEFAULT_OUTPUT)]
    pub input: PathBuf,

    /// Write folded stacks (`root;...;leaf COUNT` per line, COUNT in samples) here; `-`
    /// is stdout. In an off-CPU recording COUNT is nanoseconds of wall time, and an
    /// off-CPU stack ends in an `[off-cpu: STATE]` frame.
    #[arg(long, value_name = "PATH", help_heading = "Outputs")]
    pub folded: Option<PathBuf>,

    /// Write an SVG flame graph here; `-` is stdout. Widths are CPU time; native code is
    /// red, inlined functions aqua, kernel orange, JIT green, Python purple. In an
    /// off-CPU recording widths are wall time and `[off-cpu: STATE]` frames are shades
    /// of blue.
    #[arg(long, value_name = "PATH", help_heading = "Outputs")]
    pub flamegraph: Option<PathBuf>,

    /// Write a gzipped pprof profile (profile.proto) here, for `go tool pprof`,
    /// Pyroscope, Parca, Grafana; `-` is stdout. Locations carry their source line
    /// numbers where the debug info (or the runtime) gives them, so `go tool pprof
    /// -list FUNCTION` and `-lines` work; functions stay whole unless --lines.
    #[arg(long, value_name = "PATH", help_heading = "Outputs")]
    pub pprof: Option<PathBuf>,

    /// Leave source line numbers out of --pprof and --otlp (smaller files; a
    /// location's functions are kept). Conflicts with --lines.
    #[arg(long, help_heading = "Outputs", conflicts_with = "lines")]
    pub no_source_lines: bool,

    /// Write an OpenTelemetry profile (OTLP Profiles, protobuf ProfilesData of
    /// profiles/v1development) here, for the OpenTelemetry Collector and OTLP
    /// receivers; `-` is stdout. docs/otlp.md tells the mapping.
    #[arg(long, value_name = "PATH", help_heading = "Outputs")]
    pub otlp: Option<PathBuf>,

    /// Write a speedscope JSON file (one profile per thread) here, for
    /// speedscope.app; `-` is stdout.
    #[arg(long, value_name = "PATH", help_heading = "Outputs")]
    pub speedscope: Option<PathBuf>,

    /// Print the top table's data as JSON, with totals, threads and recording
    /// metadata; `--json=PATH` writes it to a file. In an off-CPU recording each thread
    /// has `states`: nanoseconds per state.
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = "-",
          help_heading = "Outputs")]
    pub json: Option<PathBuf>,

    /// Write an SVG timeline here: one row per thread, time across, each stretch
    /// coloured by the thread's state (an off-CPU recording), or its CPU samples
    /// (CPU-only); hover for the function at the top of the stack.
    #[arg(long, value_name = "PATH", help_heading = "Outputs")]
    pub timeline: Option<PathBuf>,

    /// Print the N functions with the most self CPU time (the default output, N = 20,
    /// when no other output goes to stdout); limits --json too.
    #[arg(long, value_name = "N", help_heading = "Outputs")]
    pub top: Option<usize>,

    /// Root every stack at its thread's name, then its tid (folded, flame graph).
    #[arg(long, help_heading = "Flame graphs and folded stacks")]
    pub per_thread: bool,

    /// Root every stack at its process's name, then its pid: one tower per process
    /// (folded, flame graph). Without it, a recording of several processes
    /// (`record -p A,B`, `-a`) roots stacks at their processes' names only, so that
    /// processes of one program (a server's workers) merge into one tower.
    /// Given explicitly, stacks are rooted at `service NAME` above that: the
    /// process's service (systemd unit, else executable) when the recording holds
    /// workloads.
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

    /// Keep only time in this state (repeatable): running (on CPU), runnable, sleep,
    /// wait, lock, io, other. States other than running need an off-CPU recording.
    #[arg(long, value_name = "STATE", value_parser = parse_state,
          help_heading = "Filters (every output)")]
    pub state: Vec<profile::profile::ThreadState>,

    /// Leave out the threads idle for the whole recording (off the CPU 99.9% of their
    /// time and 95% of it in one wait: a pool's parked workers, a blocked helper);
    /// a note says how many. Off-CPU recordings only.
    #[arg(long, help_heading = "Filters (every output)")]
    pub hide_idle: bool,

    /// Keep only samples through this function and start their stacks at it (its
    /// outermost call): an exact function name, else a regular expression.
    #[arg(long, value_name = "FUNCTION", help_heading = "Filters (every output)")]
    pub focus: Option<String>,

    /// Keep only samples of processes of this service (repeatable): a systemd
    /// service's name (`nginx` for nginx.service), else the executable's name;
    /// `kernel` for kernel threads. Recordings made before workloads were recorded
    /// have none.
    #[arg(long, value_name = "NAME", help_heading = "Filters (every output)")]
    pub service: Vec<String>,

    /// Keep only samples of the processes with this name (their main thread's) or pid
    /// (repeatable): one program of a `record -a` or `-p A,B` recording.
    #[arg(
        long,
        visible_alias = "pid",
        value_name = "NAME|PID",
        help_heading = "Filters (every output)"
    )]
    pub process: Vec<String>,

    /// Tell functions apart by source line: `name:LINE` frames.
    #[arg(long, help_heading = "Filters (every output)")]
    pub lines: bool,

    /// The runtimes' view: in a stack with a Python, Java or JIT frame, the native
    /// frames before the first one stay and every native or kernel frame after it
    /// (the interpreter's internals, a C extension, a system call) is folded into
    /// the runtime frame that called it, as py-spy shows a program by default.
    /// Stacks of native code alone are kept whole.
    #[arg(long, help_heading = "Filters (every output)")]
    pub runtime_only: bool,
}

fn parse_time_range(s: &str) -> Result<profile::profile::filter::TimeRange, String> {
    s.parse()
        .map_err(|e: profile::profile::filter::FilterError| e.to_string())
}

fn parse_state(s: &str) -> Result<profile::profile::ThreadState, String> {
    profile::profile::ThreadState::from_name(s)
        .ok_or_else(|| "expected one of running, runnable, sleep, wait, lock, io, other".to_owned())
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
        f.states = self.state.clone();
        f.hide_idle = self.hide_idle;
        f.services = self.service.clone();
        f.processes = self.process.clone();
        f.runtime_only = self.runtime_only;
        f
    }

    pub fn folded_options(&self) -> profile::output::folded::FoldedOptions {
        let mut o = profile::output::folded::FoldedOptions::per_thread(self.per_thread);
        o.per_process = self.per_process;
        o.per_service = self.per_process;
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
        o.per_service = self.per_process;
        o.reverse = self.reverse;
        o.icicle = self.icicle;
        o.min_width = self.min_width;
        o.title = self.title.clone();
        o.note = note;
        o
    }
}
