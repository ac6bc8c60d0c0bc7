//! The arguments `record` and `top` share, each defined once and flattened into both:
//! which descendants of an attached process are followed (`--children`), and how the
//! frames are named (debug directories, the JVM's perf map, the runtime readers'
//! memory). A live view takes what a recording takes, so the two cannot drift apart.

use std::path::PathBuf;

use clap::Args;
use profile::record::{JvmPerfMap, RecordOptions};

/// Which descendants of an attached process `--children` records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Children {
    /// The processes started after attach (what `--children` alone means).
    New,
    /// Those and the descendants already running at attach: the whole process tree.
    All,
}

/// `--children[=new|all]`.
#[derive(Debug, Clone, Args)]
pub struct ChildrenArgs {
    /// With --pid: also record the processes they start after attach (their children,
    /// and theirs); `--children=all` also attaches to the ones already running at
    /// attach (a server's existing workers), the whole process tree. Default: only the
    /// attached processes, and a note names the running descendants left out. A
    /// launched COMMAND is always followed into every process it starts.
    #[arg(long, value_name = "WHICH", value_enum, num_args = 0..=1,
          require_equals = true, default_missing_value = "new",
          conflicts_with_all = ["command", "all_cpus"])]
    pub children: Option<Children>,
}

impl ChildrenArgs {
    /// Whether any descendants are followed.
    pub fn any(&self) -> bool {
        self.children.is_some()
    }

    /// Sets the recorder's options.
    pub fn apply(&self, o: &mut RecordOptions) {
        o.children = self.children.is_some();
        o.existing_children = self.children == Some(Children::All);
    }
}

/// How frames are named: where debug info is, the JVM's perf map, what the runtime
/// readers may keep.
#[derive(Debug, Clone, Args)]
pub struct NamingArgs {
    /// Also look for separate debug info here (DIR/.build-id/xx/yyyy.debug or
    /// DIR/NAME.debug); /usr/lib/debug and the target's own are always searched.
    #[arg(long, value_name = "DIR")]
    pub debug_dir: Vec<PathBuf>,

    /// Never ask HotSpot JVMs for their perf map. By default a JVM is asked (as `jcmd
    /// PID Compiler.perfmap` asks it: /tmp/perf-PID.map written at attach, every few
    /// seconds and at the end) only if its JIT code cannot be found in its own code
    /// heaps: a JDK whose tables profile cannot read, or with --call-graph fp. The
    /// others are asked nothing and write nothing: see docs/runtimes.md.
    #[arg(long, conflicts_with = "jvm_perfmap")]
    pub no_jvm_perfmap: bool,

    /// Ask every HotSpot JVM for its perf map (JDK 17+), at attach, every few seconds
    /// and at the end, even one whose code heaps profile reads: its stubs and methods
    /// are then also named as the map names them where the code heaps could not be
    /// read in time.
    #[arg(long)]
    pub jvm_perfmap: bool,

    /// MiB the runtime readers (Python, Java) may keep of what they read from one
    /// process (code objects, line tables, methods, names); four times that, and at
    /// least 128, across every process recorded. Past it, what was used least recently
    /// is let go and read again when met. A process's memory is another user's to
    /// shape: see docs/security.md. Default: 32.
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub runtime_memory: Option<u32>,
}

impl NamingArgs {
    /// Sets the recorder's options.
    pub fn apply(&self, o: &mut RecordOptions) {
        o.debug_dirs = self.debug_dir.clone();
        o.jvm_perfmap = match (self.jvm_perfmap, self.no_jvm_perfmap) {
            (true, _) => JvmPerfMap::Always,
            (_, true) => JvmPerfMap::Never,
            _ => JvmPerfMap::Fallback,
        };
        if let Some(mib) = self.runtime_memory {
            o.runtime_budgets =
                profile::interp::Budgets::default().with_process_bytes((mib as usize) << 20);
        }
    }
}
