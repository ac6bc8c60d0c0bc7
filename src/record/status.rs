//! The live status line `record` keeps on a terminal: elapsed time, samples, threads
//! and lost samples, redrawn a few times a second; nothing when stderr is not a
//! terminal.

use std::io::{IsTerminal, Write};
use std::time::Duration;

/// The live status line on a terminal.
pub(super) struct StatusLine {
    enabled: bool,
    what: String,
}

impl StatusLine {
    /// `pid` is the first target process of `processes` (0 with -a).
    pub(super) fn new(progress: bool, pid: u32, processes: usize, launched: bool) -> StatusLine {
        StatusLine {
            enabled: progress && std::io::stderr().is_terminal(),
            what: if launched {
                format!("command (pid {pid})")
            } else if pid == 0 {
                "every process (-a)".to_owned()
            } else if processes > 1 {
                format!(
                    "{} (pids {pid}, …)",
                    crate::output::plural(processes, "process", "processes")
                )
            } else {
                format!("pid {pid}")
            },
        }
    }

    pub(super) fn show(&self, elapsed: Duration, samples: u64, threads: usize, lost: u64) {
        if self.enabled {
            let mut e = std::io::stderr().lock();
            let _ = write!(
                e,
                "\r\x1b[Kprofile: recording {} · {:.1} s · {} · {} · {} lost",
                self.what,
                elapsed.as_secs_f64(),
                crate::output::plural(samples as usize, "sample", "samples"),
                crate::output::plural(threads, "thread", "threads"),
                lost
            );
            let _ = e.flush();
        }
    }

    pub(super) fn clear(&self) {
        if self.enabled {
            let _ = write!(std::io::stderr(), "\r\x1b[K");
        }
    }
}
