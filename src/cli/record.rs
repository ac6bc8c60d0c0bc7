//! `profile record`'s arguments: the target, the rate, the stacks, the output.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use profile::record::{CallGraph, RecordOptions};

pub(crate) const RECORD_EXAMPLES: &str = "\
Examples:
  Attach to a running process for 10 seconds:
    sudo profile record --pid 4242 -d 10 -o app.prof
  Launch a command and profile it (and the processes it starts):
    profile record -o bench.prof -- ./target/release/bench
  Sample ten times as often, with frame-pointer stacks:
    profile record -F 999 --call-graph fp --pid 4242
  perf's spellings: two processes, a sample per 2 ms of CPU, 16 KiB stack copies:
    profile record -g -p 4242,4243 -c 2000000 --call-graph dwarf,16384
  Only two threads of a process:
    profile record -t 4250,4251 -d 5
  Where the time goes, off the CPU too (waits on locks, I/O, sleeps):
    sudo profile record --pid 4242 -d 10 --off-cpu -o app.prof";

/// `--call-graph MODE[,SIZE]`: perf's spelling (`dwarf`, `dwarf,16384`, `fp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallGraphArg {
    /// How user stacks are taken.
    pub mode: CallGraph,
    /// `dwarf,SIZE`: bytes of user stack copied per sample.
    pub stack_size: Option<u32>,
}

impl std::fmt::Display for CallGraphArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.mode.name())?;
        match self.stack_size {
            Some(n) => write!(f, ",{n}"),
            None => Ok(()),
        }
    }
}

pub(super) fn parse_call_graph(s: &str) -> Result<CallGraphArg, String> {
    let (mode, size) = match s.split_once(',') {
        Some((m, size)) => (m, Some(size)),
        None => (s, None),
    };
    let mode = match mode {
        "dwarf" => CallGraph::Dwarf,
        "fp" => CallGraph::Fp,
        "lbr" => {
            return Err(
                "lbr (last branch records) is not supported: profile takes stacks with \
                 `dwarf` (copied stacks, unwound with CFI) or `fp` (frame pointers)"
                    .into(),
            );
        }
        other => {
            return Err(format!(
                "`{other}` is not a call-graph mode: use `dwarf`, `dwarf,SIZE` or `fp`"
            ));
        }
    };
    let stack_size = match (mode, size) {
        (_, None) => None,
        (CallGraph::Dwarf, Some(n)) => Some(parse_stack_size(n)?),
        (CallGraph::Fp, Some(_)) => {
            return Err("`fp` takes no stack size (frame pointers copy no stack): \
                        use `fp`, or `dwarf,SIZE` to copy SIZE bytes of stack"
                .into());
        }
    };
    Ok(CallGraphArg { mode, stack_size })
}

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("target").required(true).args(["pid", "tid", "command"]))]
pub struct RecordArgs {
    /// Attach to every thread of these running processes (comma-separated, as perf
    /// takes them: -p 4242,4243); reports root each process's stacks at its name and pid.
    #[arg(short, long, value_name = "PID", value_delimiter = ',', num_args = 1)]
    pub pid: Vec<u32>,

    /// Attach to these threads only (comma-separated tids, as perf takes them): only
    /// their samples are kept, not those of threads they start.
    #[arg(short, long, value_name = "TID", value_delimiter = ',', num_args = 1)]
    pub tid: Vec<u32>,

    /// Stop after this many seconds (fractions allowed, e.g. 2.5). Default: until Ctrl-C,
    /// SIGTERM or the target exits. A launched command still running then is sent SIGTERM.
    #[arg(short, long, value_name = "SECS", value_parser = parse_seconds)]
    pub duration: Option<Duration>,

    /// Samples per second of each thread's CPU time (-F 1000: one sample per 1 ms of CPU).
    #[arg(short = 'F', long, value_name = "HZ", default_value_t = RecordOptions::DEFAULT_FREQUENCY)]
    pub frequency: u64,

    /// A sample every NS nanoseconds of each thread's CPU time, instead of -F (perf's
    /// -c: -c 1000000 is -F 1000).
    #[arg(
        short = 'c',
        long = "count",
        value_name = "NS",
        conflicts_with = "frequency"
    )]
    pub period: Option<u64>,

    /// Write the recording here.
    #[arg(short, long, value_name = "FILE", default_value = RecordOptions::DEFAULT_OUTPUT)]
    pub output: PathBuf,

    /// How to take user stacks: `dwarf` (copy the stack and unwind it with CFI: whole
    /// stacks without frame pointers), `dwarf,SIZE` (copying SIZE bytes, as perf writes
    /// it), or `fp` (frame pointers: cheaper; a stack that leaves code built without
    /// them ends at a `[truncated: ...]` frame).
    #[arg(long, value_name = "MODE[,SIZE]", value_parser = parse_call_graph,
          default_value_t = CallGraphArg { mode: CallGraph::default(), stack_size: None })]
    pub call_graph: CallGraphArg,

    /// Take call graphs in the default mode (perf's -g; profile always takes them, so
    /// this changes nothing: see --call-graph).
    #[arg(short = 'g')]
    pub g: bool,

    /// Bytes of user stack copied per sample for DWARF unwinding, 8..=64512 (rounded up to
    /// a multiple of 8; a whole sample record must fit the kernel's 64 KiB record limit).
    /// Default: 32768.
    #[arg(long, value_name = "BYTES", value_parser = parse_stack_size)]
    pub stack_size: Option<u32>,

    /// Ring-buffer data pages per CPU (a power of two). Default: chosen from the mode and
    /// the locked-memory limit.
    #[arg(long, value_name = "PAGES")]
    pub mmap_pages: Option<usize>,

    /// Also look for separate debug info here (DIR/.build-id/xx/yyyy.debug or
    /// DIR/NAME.debug); /usr/lib/debug and the target's own are always searched.
    #[arg(long, value_name = "DIR")]
    pub debug_dir: Vec<PathBuf>,

    /// With --pid: also keep samples of the processes they start after attach (their
    /// children, and theirs). Default: only the attached processes' own samples. A
    /// launched COMMAND is always followed into every process it starts.
    #[arg(long, conflicts_with = "command")]
    pub children: bool,

    /// Under sudo: run COMMAND as the user who ran sudo (SUDO_UID and SUDO_GID, with
    /// that user's groups) while profile keeps root's privileges to record; the
    /// recording is made theirs. Without it COMMAND runs as root.
    #[arg(long, conflicts_with_all = ["pid", "tid"])]
    pub user: bool,

    /// Also record every interval each thread spends off the CPU, with the stack where
    /// it left the CPU and why (runnable, sleep, lock, io, other), so reports show every
    /// thread's whole wall time: see docs/off-cpu.md.
    #[arg(long)]
    pub off_cpu: bool,

    /// Print nothing but errors (no status line, no summary).
    #[arg(short, long)]
    pub quiet: bool,

    /// The command to launch and profile, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// The longest `--duration`: about 31 years, far beyond any recording, and small enough
/// that adding it to a clock reading cannot overflow.
const MAX_SECONDS: f64 = 1e9;

pub(super) fn parse_seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !(secs > 0.0 && secs.is_finite()) {
        return Err(format!("duration must be positive, got {s}"));
    }
    if secs > MAX_SECONDS {
        return Err(format!(
            "duration must be at most {MAX_SECONDS:.0} seconds, got {s}"
        ));
    }
    Duration::try_from_secs_f64(secs).map_err(|e| format!("`{s}`: {e}"))
}

/// The kernel takes at most 65528 bytes of user stack, but a sample record (header,
/// registers, callchain and stack) must fit in 64 KiB: 63 KiB leaves room for the rest.
const MAX_STACK_SIZE: u32 = 63 * 1024;

fn parse_stack_size(s: &str) -> Result<u32, String> {
    let n: u32 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of bytes"))?;
    if !(8..=MAX_STACK_SIZE).contains(&n) {
        return Err(format!(
            "stack size must be in 8..={MAX_STACK_SIZE} bytes, got {s}"
        ));
    }
    Ok((n + 7) & !7)
}

impl RecordArgs {
    /// The library's options; an error says what cannot work together and what to do.
    pub fn to_options(&self) -> Result<RecordOptions, String> {
        use profile::record::Target;
        if !self.tid.is_empty() && self.children {
            return Err(
                "-t records only the given threads, not the processes they start; \
                        use -p PID --children to follow a process's children"
                    .into(),
            );
        }
        let target = if !self.pid.is_empty() {
            Target::Pids(self.pid.clone())
        } else if !self.tid.is_empty() {
            Target::Threads(self.tid.clone())
        } else {
            Target::Command(self.command.clone())
        };
        let mut o = RecordOptions::new(target);
        o.duration = self.duration;
        o.frequency = self.frequency;
        o.period_ns = self.period;
        o.output = Some(self.output.clone());
        o.call_graph = self.call_graph.mode;
        o.stack_size = match (self.call_graph.stack_size, self.stack_size) {
            (Some(a), Some(b)) if a != b => {
                return Err(format!(
                    "--call-graph dwarf,{a} and --stack-size {b} disagree: give the size once"
                ));
            }
            (a, b) => a.or(b).unwrap_or(RecordOptions::DEFAULT_STACK_SIZE),
        };
        o.progress = !self.quiet;
        o.ring_pages = self.mmap_pages;
        o.debug_dirs = self.debug_dir.clone();
        o.children = self.children;
        if self.user {
            o.run_as = profile::record::RunAs::sudo_caller();
        }
        o.off_cpu = self.off_cpu;
        Ok(o)
    }
}
