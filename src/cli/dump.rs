//! `profile dump`'s arguments: the process, the output shape.

use std::path::PathBuf;

use clap::Args;
use profile::dump::DumpOptions;

pub(crate) const DUMP_EXAMPLES: &str = "\
Examples:
  Every thread's stack now, with its state (running, sleep, wait, lock, io, ...):
    sudo profile dump --pid 4242
  The same as JSON, for a script:
    sudo profile dump --pid 4242 --json > stacks.json";

pub(crate) const DUMP_LONG_ABOUT: &str = "\
Print every thread's stack now, once, with thread names and states: running, runnable, \
sleep, wait (idle: condition variables, semaphores, epoll), lock (a contended mutex), io \
(files, pipes, sockets) or other, \
with the system call and kernel function a blocked thread waits in.

No thread is stopped (see docs/live.md). A blocked thread's registers come from /proc/PID/task/TID/syscall \
and its stack from its memory; a running thread is caught by a one-shot perf sample. \
Needs root, or the target's user with ptrace allowed (kernel stacks and kernel function \
names need root; running threads need perf events: CAP_PERFMON or perf_event_paranoid <= 1).";

#[derive(Debug, Args)]
pub struct DumpArgs {
    /// The process to dump (a thread id dumps its whole process).
    #[arg(short, long, value_name = "PID")]
    pub pid: u32,

    /// Write JSON (every thread, its state, kernel stack and frames) instead of text.
    #[arg(long)]
    pub json: bool,

    /// Also look for separate debug info here (DIR/.build-id/xx/yyyy.debug or
    /// DIR/NAME.debug); /usr/lib/debug and the target's own are always searched.
    #[arg(long, value_name = "DIR")]
    pub debug_dir: Vec<PathBuf>,
}

impl DumpArgs {
    /// The library's options.
    pub fn to_options(&self) -> DumpOptions {
        let mut o = DumpOptions::new(self.pid);
        o.debug_dirs = self.debug_dir.clone();
        o
    }
}
