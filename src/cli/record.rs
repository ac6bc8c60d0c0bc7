//! `profile record`'s arguments: the target, the rate, the stacks, the output.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use profile::record::{CallGraph, RecordOptions};

use super::shared::{ChildrenArgs, NamingArgs};

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
    sudo profile record --pid 4242 -d 10 --off-cpu -o app.prof
  Every process on the machine for 10 seconds (which one is busy?):
    sudo profile record -a -d 10 -o all.prof
  Stream a profile every 10 s to Pyroscope (or Grafana Alloy), labelled:
    sudo profile record --pid 4242 --push http://127.0.0.1:4040 --tag env=prod";

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
#[command(group = clap::ArgGroup::new("target").required(true).args(["pid", "tid", "command", "all_cpus"]))]
pub struct RecordArgs {
    /// Attach to every thread of these running processes (comma-separated, as perf
    /// takes them: -p 4242,4243); reports root each process's stacks at its name and pid.
    #[arg(short, long, value_name = "PID", value_delimiter = ',', num_args = 1)]
    pub pid: Vec<u32>,

    /// Attach to these threads only (comma-separated tids, as perf takes them): only
    /// their samples are kept, not those of threads they start.
    #[arg(short, long, value_name = "TID", value_delimiter = ',', num_args = 1)]
    pub tid: Vec<u32>,

    /// Every process on the machine (perf's -a): each CPU sampled every 1/HZ s of its
    /// time, whoever runs on it, processes started meanwhile included; reports root
    /// stacks at each process's name and pid. Needs root or CAP_PERFMON, or
    /// perf_event_paranoid <= 0.
    #[arg(short = 'a', long)]
    pub all_cpus: bool,

    /// Stop after this many seconds (fractions allowed, e.g. 2.5). Default: until Ctrl-C,
    /// SIGTERM or the target exits. A launched command still running then is sent SIGTERM.
    #[arg(short, long, value_name = "SECS", value_parser = parse_seconds)]
    pub duration: Option<Duration>,

    /// Samples per second of each thread's CPU time (-F 1000: one sample per 1 ms of
    /// CPU). Default: 99; 19 for a host agent (-a --push), as fleet profilers sample.
    #[arg(short = 'F', long, value_name = "HZ")]
    pub frequency: Option<u64>,

    /// A sample every NS nanoseconds of each thread's CPU time, instead of -F (perf's
    /// -c: -c 1000000 is -F 1000).
    #[arg(
        short = 'c',
        long = "count",
        value_name = "NS",
        conflicts_with = "frequency"
    )]
    pub period: Option<u64>,

    /// Write the recording here. Default: profile.prof; with --push, no file unless
    /// -o is given.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,

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

    #[command(flatten)]
    pub children: ChildrenArgs,

    #[command(flatten)]
    pub naming: NamingArgs,

    /// Under sudo: run COMMAND as the user who ran sudo (SUDO_UID and SUDO_GID, with
    /// that user's groups) while profile keeps root's privileges to record; the
    /// recording is made theirs. Without it COMMAND runs as root.
    #[arg(long, conflicts_with_all = ["pid", "tid", "all_cpus"])]
    pub user: bool,

    /// Also record every interval each thread spends off the CPU, with the stack where
    /// it left the CPU and why (runnable, sleep, wait, lock, io, other), so reports show
    /// every thread's whole wall time: see docs/off-cpu.md.
    #[arg(long)]
    pub off_cpu: bool,

    /// Weigh each sample by its own thread's CPU time since its previous sample (a
    /// count in every sample, Linux 6.12+) and vary the period of threads created
    /// while recording. Costs the target a slower context switch (+50% on a
    /// ping-pong of two threads): see docs/accounting.md. Without it each sample
    /// weighs its period, never more in all than its thread's own clock; totals are
    /// each thread's own clock either way.
    #[arg(long, conflicts_with_all = ["off_cpu", "all_cpus"])]
    pub exact_weights: bool,

    /// With `-a` and `--push` or windows (the host agent): MiB the symbol and unwind
    /// tables of the programs it names, and their parsed names, may take, half each.
    /// Past it the least recently used program's tables go and are read again when a
    /// sample needs them; one that does not fit is not read in that window (its frames
    /// are named by file and offset). Local users choose their binaries' sizes: see
    /// docs/security.md. Default: 256.
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u32).range(2..=65536))]
    pub tables_memory: Option<u32>,

    /// With a launched COMMAND: add `-XX:+UnlockDiagnosticVMOptions
    /// -XX:+DumpPerfMapAtExit` to JAVA_TOOL_OPTIONS (keeping what it holds), so that
    /// every JVM the command starts writes its whole perf map when it exits, and code it
    /// compiled after profile's last request (a short run, a JVM that exits before the
    /// recording ends) is named too; with --no-jvm-perfmap (or a JVM started with
    /// -XX:+DisableAttachMechanism) the map it writes at exit is the only one. profile
    /// says so when it starts, and the JVM prints `Picked up JAVA_TOOL_OPTIONS`. See
    /// docs/runtimes.md.
    #[arg(long, conflicts_with_all = ["pid", "tid", "all_cpus"])]
    pub jvm_flags: bool,

    /// Stream the profile to a Pyroscope-compatible server (Grafana Pyroscope, Grafana
    /// Cloud, Grafana Alloy's pyroscope.receive_http): one pprof profile per
    /// --push-interval to URL/ingest, for as long as recording runs. http:// or
    /// https:// (the server's certificate verified against the machine's CA bundle, or
    /// --push-ca). A user and password in the URL are sent as basic authentication. A
    /// server that is down delays nothing: windows queue (ten minutes' worth) and are
    /// retried. With --push-format otlp, an OpenTelemetry OTLP/HTTP receiver
    /// instead (http://HOST:4318; URL/v1development/profiles). See
    /// docs/continuous.md.
    #[arg(long, value_name = "URL")]
    pub push: Option<String>,

    /// The protocol of --push: `pyroscope` (Pyroscope's /ingest, pprof bodies) or
    /// `otlp` (OTLP/HTTP profiles, protobuf, for the OpenTelemetry Collector and OTLP
    /// receivers; docs/otlp.md). Default: pyroscope.
    #[arg(long, value_name = "FORMAT", requires = "push")]
    pub push_format: Option<PushFormatArg>,

    /// Seconds of samples in each pushed profile (at least 1). Default: 10, as
    /// Pyroscope's own agents.
    #[arg(long, value_name = "SECS", value_parser = parse_push_interval, requires = "push")]
    pub push_interval: Option<Duration>,

    /// The application name the server files profiles under (letters, digits, _ . - /).
    /// Default: the target's process name. With -a, one series per service instead
    /// (--push-rules, else the systemd service, else the executable's name), and
    /// --app names the processes that are in no systemd service and match no rule.
    #[arg(long, value_name = "NAME", requires = "push")]
    pub app: Option<String>,

    /// With -a: a file of rules naming the service each process is pushed under, one
    /// `KIND PATTERN SERVICE` a line (KIND: unit, container, pod, exe, cgroup; `*` in
    /// PATTERN matches anything; the first matching rule wins). SIGHUP reads it again
    /// (a file that does not parse keeps the rules in use) instead of ending the
    /// recording. See docs/continuous.md.
    #[arg(long, value_name = "FILE", requires = "push")]
    pub push_rules: Option<PathBuf>,

    /// Write what would be sent into DIR instead of sending it: per window and series,
    /// NNNNNN-APP.pprof (the gzipped body; NNNNNN-APP.otlp.pb.gz with --push-format
    /// otlp) and NNNNNN-APP.query (the request's query and labels). For checking labels before pointing at a real server.
    #[arg(long, value_name = "DIR", requires = "push")]
    pub push_dry_run: Option<PathBuf>,

    /// A label on every pushed profile, KEY=VALUE (repeatable: --tag env=prod --tag
    /// region=eu). `hostname` and `pid` are always added (a tag of that name replaces
    /// them); with -a, `hostname` and each service's `systemd_unit`, `container_id`,
    /// `pod_uid`, and no `pid`. With --push-format otlp, tags are resource attributes.
    #[arg(long, value_name = "KEY=VALUE", value_parser = profile::push::parse_tag, requires = "push")]
    pub tag: Vec<(String, String)>,

    /// Windows kept while the server cannot be reached; when more wait, the oldest are
    /// dropped (and counted in the summary). Default: 60, ten minutes at the default
    /// interval.
    #[arg(long, value_name = "WINDOWS", requires = "push",
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub push_buffer: Option<u32>,

    /// An HTTP header sent with every push, 'Name: value' (repeatable), e.g.
    /// 'Authorization: Bearer TOKEN' or 'X-Scope-OrgID: TENANT'; @FILE reads one header
    /// per line from FILE instead (keeps tokens out of the process list). Values are
    /// never printed.
    #[arg(long, value_name = "'NAME: VALUE'", requires = "push")]
    pub push_header: Vec<String>,

    /// Trust only the CA certificates in this PEM file for an https:// --push URL (a
    /// private CA), instead of the machine's CA bundle (/etc/ssl/certs/...). There is
    /// no way to turn verification off.
    #[arg(long, value_name = "FILE", requires = "push")]
    pub push_ca: Option<std::path::PathBuf>,

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

/// `--push-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PushFormatArg {
    /// Pyroscope's HTTP ingest (pprof).
    Pyroscope,
    /// OTLP/HTTP profiles (protobuf).
    Otlp,
}

impl From<PushFormatArg> for profile::push::PushFormat {
    fn from(f: PushFormatArg) -> Self {
        match f {
            PushFormatArg::Pyroscope => profile::push::PushFormat::Pyroscope,
            PushFormatArg::Otlp => profile::push::PushFormat::Otlp,
        }
    }
}

fn parse_push_interval(s: &str) -> Result<Duration, String> {
    let d = parse_seconds(s)?;
    if d < Duration::from_secs(1) {
        return Err(format!(
            "the push interval must be at least 1 second, got {s}"
        ));
    }
    Ok(d)
}

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
        if !self.tid.is_empty() && self.children.any() {
            return Err(
                "-t records only the given threads, not the processes they start; \
                        use -p PID --children to follow a process's children"
                    .into(),
            );
        }
        if self.push_rules.is_some() && !self.all_cpus {
            return Err(
                "--push-rules names the services of record -a --push; with one target, \
                 name its series with --app"
                    .into(),
            );
        }
        let target = if !self.pid.is_empty() {
            Target::Pids(self.pid.clone())
        } else if !self.tid.is_empty() {
            Target::Threads(self.tid.clone())
        } else if self.all_cpus {
            Target::AllCpus
        } else {
            Target::Command(self.command.clone())
        };
        let mut o = RecordOptions::new(target);
        o.duration = self.duration;
        o.frequency = self
            .frequency
            .unwrap_or(if self.all_cpus && self.push.is_some() {
                RecordOptions::FLEET_FREQUENCY
            } else {
                RecordOptions::DEFAULT_FREQUENCY
            });
        o.period_ns = self.period;
        o.output = match (&self.output, &self.push) {
            (Some(path), _) => Some(path.clone()),
            (None, Some(_)) => None,
            (None, None) => Some(PathBuf::from(RecordOptions::DEFAULT_OUTPUT)),
        };
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
        self.children.apply(&mut o);
        self.naming.apply(&mut o);
        if self.user {
            o.run_as = profile::record::RunAs::sudo_caller();
        }
        o.off_cpu = self.off_cpu;
        o.exact_weights = self.exact_weights;
        if let Some(mib) = self.tables_memory {
            o.tables_memory = (mib as usize) << 20;
        }
        o.hangup_stops = self.push_rules.is_none();
        if self.jvm_flags {
            let name = std::ffi::OsString::from("JAVA_TOOL_OPTIONS");
            let value = profile::record::jvm_tool_options(std::env::var_os(&name).as_deref());
            o.launch_env.push((name, value));
        }
        Ok(o)
    }
}
