//! `profile top`'s arguments: the target, the rate, the refresh and the window.

use std::time::Duration;

use clap::Args;
use profile::record::{CallGraph, RecordOptions};
use profile::top::View;

use super::record::{CallGraphArg, RecordArgs, parse_call_graph, parse_seconds};
use super::shared::{ChildrenArgs, NamingArgs};

pub(crate) const TOP_EXAMPLES: &str = "\
Examples:
  The hottest functions of a running process, refreshed every second:
    sudo profile top --pid 4242
  The whole machine, when you do not know yet which process is slow:
    sudo profile top -a
  A command, off-CPU time included (time by state, waits under their functions):
    profile top --off-cpu -- ./server --port 8080
  One table every 2 seconds for a log or CI (what `top` prints without a terminal):
    profile top --pid 4242 --interval 2 -d 10 | tee top.log
  A pre-fork server (gunicorn, nginx, PostgreSQL): each worker under its master:
    sudo profile top --pid MASTER --children=all --view processes

Keys: q (or Ctrl-C) quits, s sorts by self or total time, t shows threads, processes or
functions in turn, p pauses the display (sampling goes on).";

/// The table `top` shows first (`t` turns to the next one on a terminal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ViewArg {
    /// The functions with the most time.
    Functions,
    /// The threads, each with its hottest function.
    Threads,
    /// The processes, each under the process that started it (a server's workers
    /// under their master), with its CPU, threads and hottest function.
    Processes,
}

impl From<ViewArg> for View {
    fn from(v: ViewArg) -> View {
        match v {
            ViewArg::Functions => View::Functions,
            ViewArg::Threads => View::Threads,
            ViewArg::Processes => View::Processes,
        }
    }
}

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("target").required(true).args(["pid", "command", "all_cpus"]))]
pub struct TopArgs {
    /// Attach to every thread of these running processes (comma-separated).
    #[arg(short, long, value_name = "PID", value_delimiter = ',', num_args = 1)]
    pub pid: Vec<u32>,

    /// Every process on the machine (perf's -a): each CPU sampled by its own time,
    /// functions rooted at their process; `t` shows threads of every process. Needs
    /// root, or CAP_PERFMON with perf_event_paranoid <= 0.
    #[arg(short = 'a', long)]
    pub all_cpus: bool,

    /// Stop after this many seconds. Default: until `q`, Ctrl-C, SIGTERM or the target
    /// exits.
    #[arg(short, long, value_name = "SECS", value_parser = parse_seconds)]
    pub duration: Option<Duration>,

    /// Samples per second of each thread's CPU time.
    #[arg(short = 'F', long, value_name = "HZ", default_value_t = RecordOptions::DEFAULT_FREQUENCY)]
    pub frequency: u64,

    /// How to take user stacks: `dwarf`, `dwarf,SIZE` or `fp` (as for `record`).
    #[arg(long, value_name = "MODE[,SIZE]", value_parser = parse_call_graph,
          default_value_t = CallGraphArg { mode: CallGraph::default(), stack_size: None })]
    pub call_graph: CallGraphArg,

    /// Seconds between refreshes (fractions allowed).
    #[arg(long, value_name = "SECS", value_parser = parse_seconds, default_value = "1")]
    pub interval: Duration,

    /// Seconds of the sliding window the table covers (at least one interval).
    #[arg(long, value_name = "SECS", value_parser = parse_seconds, default_value = "5")]
    pub window: Duration,

    /// Rows per table without a terminal (a terminal shows as many as fit).
    #[arg(long, value_name = "N", default_value_t = 15)]
    pub rows: usize,

    /// Print a plain table per interval even on a terminal (what a pipe gets).
    #[arg(long)]
    pub plain: bool,

    /// The table shown (the only one in plain tables; `t` turns to the next on a
    /// terminal).
    #[arg(long, value_enum, value_name = "TABLE", default_value = "functions")]
    pub view: ViewArg,

    /// The runtimes' view (as `report --runtime-only`): the native and kernel frames
    /// under a Python, Java or JIT frame count as that frame's own time, so the
    /// program's functions lead the table rather than the interpreter's internals.
    #[arg(long)]
    pub runtime_only: bool,

    /// Also record time off the CPU: the header shows time by state and functions
    /// count their waits (see docs/off-cpu.md).
    #[arg(long)]
    pub off_cpu: bool,

    #[command(flatten)]
    pub children: ChildrenArgs,

    #[command(flatten)]
    pub naming: NamingArgs,

    /// The command to launch and watch, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

impl TopArgs {
    /// The `record` a `top` stands for: its target, rate, stacks, off-CPU time,
    /// children and naming, quiet, and nothing of files or pushing.
    pub fn record_args(&self) -> RecordArgs {
        RecordArgs {
            pid: self.pid.clone(),
            tid: Vec::new(),
            all_cpus: self.all_cpus,
            duration: self.duration,
            frequency: Some(self.frequency),
            period: None,
            output: None,
            call_graph: self.call_graph,
            g: false,
            stack_size: None,
            mmap_pages: None,
            children: self.children.clone(),
            naming: self.naming.clone(),
            user: false,
            off_cpu: self.off_cpu,
            exact_weights: false,
            tables_memory: None,
            jvm_flags: false,
            push: None,
            push_format: None,
            push_interval: None,
            app: None,
            push_rules: None,
            push_dry_run: None,
            tag: Vec::new(),
            push_buffer: None,
            push_header: Vec::new(),
            push_ca: None,
            quiet: true,
            command: self.command.clone(),
        }
    }

    /// The recorder's options: those of [`Self::record_args`], with no file.
    pub fn to_options(&self) -> Result<RecordOptions, String> {
        let mut o = self.record_args().to_options()?;
        o.output = None;
        Ok(o)
    }
}
