//! The command line: clap definitions, converted into the library's option structs.
//! Help text, man pages and completions are all generated from these definitions.

mod diff;
mod dump;
mod record;
mod report;
mod shared;
mod top;

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

pub use diff::*;
pub use dump::*;
pub use record::*;
pub use report::*;
pub use top::*;

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
    after_help = "Exit status: 0 on success, 2 on errors, 3 when `diff` finds a regression, \
4 when it is inconclusive with --fail-if-inconclusive; `record -- COMMAND` exits with the \
command's own status."
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
    /// A live view: the functions and threads with the most CPU time, refreshed.
    #[command(after_help = TOP_EXAMPLES)]
    Top(TopArgs),
    /// Compare two profiles; fail on a statistically significant regression.
    #[command(long_about = DIFF_LONG_ABOUT, after_help = DIFF_EXAMPLES)]
    Diff(DiffArgs),
    /// Print every thread's stack now, with its state, without stopping the process.
    #[command(long_about = DUMP_LONG_ABOUT, after_help = DUMP_EXAMPLES)]
    Dump(DumpArgs),
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

#[cfg(test)]
mod tests;
#[cfg(test)]
mod top_tests;
