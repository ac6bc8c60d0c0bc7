//! `profile record`'s arguments: the target, the rate, the stacks, the output.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use profile::record::{CallGraph, RecordOptions};

pub(crate) const RECORD_EXAMPLES: &str = "\
Examples:
  Attach to a running process for 10 seconds:
    sudo profile record --pid 4242 -d 10 -o app.prof
  Launch a command and profile it (and the processes it starts):
    profile record -o bench.prof -- ./target/release/bench
  Sample ten times as often, with frame-pointer stacks:
    profile record -F 999 --call-graph fp --pid 4242
  Where the time goes, off the CPU too (waits on locks, I/O, sleeps):
    sudo profile record --pid 4242 -d 10 --off-cpu -o app.prof";

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

    /// Bytes of user stack copied per sample for DWARF unwinding, 8..=64512 (rounded up to
    /// a multiple of 8; a whole sample record must fit the kernel's 64 KiB record limit).
    #[arg(long, value_name = "BYTES", default_value_t = RecordOptions::DEFAULT_STACK_SIZE,
          value_parser = parse_stack_size)]
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

    /// Under sudo: run COMMAND as the user who ran sudo (SUDO_UID and SUDO_GID, with
    /// that user's groups) while profile keeps root's privileges to record; the
    /// recording is made theirs. Without it COMMAND runs as root.
    #[arg(long, conflicts_with = "pid")]
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

fn parse_seconds(s: &str) -> Result<Duration, String> {
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
        if self.user {
            o.run_as = profile::record::RunAs::sudo_caller();
        }
        o.off_cpu = self.off_cpu;
        o
    }
}
