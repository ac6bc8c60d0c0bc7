//! The threads' exits the kernel reports (taskstats), given to the accounting once it
//! knows their threads.

use std::time::{Duration, Instant};

use super::Session;

impl Session<'_> {
    /// Gives the accounting the exits the kernel reported, once it knows their
    /// threads; exits of other processes are forgotten after a few seconds, and all
    /// unmatched ones at the `last` call.
    pub(super) fn take_exits(&mut self, last: bool) {
        self.drain_exits();
        let now = Instant::now();
        let handler = &mut self.handler;
        self.pending_exits.retain(|(e, at)| {
            let known = handler.thread_exited(e.tid, e.tgid, e.cpu_ns, e.run_delay_ns);
            let keep = !known && !last && now.duration_since(*at) < Duration::from_secs(3);
            if !keep {
                handler.forget_exit(e.tid);
            }
            keep
        });
    }

    /// Takes the exits the kernel reported since the last call: they wait until the
    /// accounting knows their threads, and meanwhile vouch for their clocks.
    pub(super) fn drain_exits(&mut self) {
        let Some(listener) = self.exits.as_mut() else {
            return;
        };
        let now = Instant::now();
        let pending = &mut self.pending_exits;
        let handler = &mut self.handler;
        listener.drain(|e| {
            handler.exit_reported(e.tid, e.tgid, e.cpu_ns);
            pending.push((e, now));
        });
    }
}
