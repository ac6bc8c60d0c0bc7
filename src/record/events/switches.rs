//! The off-CPU samples of the event handler (`--off-cpu`): a switch-out's state or
//! stack sample handed to the tracker, a wake-up's woken thread, and the intervals
//! still open when the recording stops.

use super::EventHandler;
use crate::record::offcpu::SwitchSample;
use crate::replay::decode;

impl EventHandler {
    /// A switch-out sample (`--off-cpu`): why and where the thread left the CPU, or
    /// the stack it left with, waiting for its SWITCH record.
    pub(super) fn switch_sample(&mut self, s: &decode::Sample, kind: SwitchSample) {
        if kind == SwitchSample::Wakeup {
            // In the waker's context: the woken thread is in the raw fields.
            if let Some(o) = &mut self.off_cpu {
                o.wakeup(s.id, s.raw, s.time);
            }
            return;
        }
        // Every thread's CPU is accounted, kept or not: its stretch ends here.
        self.ledger.acct.leaving(s.tid, s.time, s.cpu);
        if !self.keep.thread(s.pid, s.tid) {
            return;
        }
        match kind {
            SwitchSample::State if self.dwarf => {
                // No kernel frames (the stack event's samples have them): the state
                // is its blocking site's.
                let Some(o) = &mut self.off_cpu else { return };
                let site = s.regs.map_or((0, 0), |[ip, sp, _]| (ip, sp));
                o.tracker.state_sample(s.tid, s.time, None, site, None);
            }
            SwitchSample::State => {
                // Frame-pointer mode: the whole stack comes with every switch-out.
                let stack = self.stack(s, false).unwrap_or(None);
                let Some(o) = &mut self.off_cpu else { return };
                let state = o.classify_frames(self.stacks.frames());
                o.tracker
                    .state_sample(s.tid, s.time, Some(state), (0, 0), stack);
            }
            SwitchSample::Wakeup => {}
            SwitchSample::Stack => {
                let stack = self.stack(s, false).unwrap_or(None);
                let Some(o) = &mut self.off_cpu else { return };
                let state = o.classify_frames(self.stacks.frames());
                let site = s.regs.map_or((0, 0), |[ip, sp, _]| (ip, sp));
                o.tracker.stack_sample(s.tid, s.time, stack, state, site);
            }
        }
    }

    /// Ends the intervals still open when recording stopped, at `end`.
    pub(in crate::record) fn finish_off_cpu(&mut self, end: u64) {
        if let Some(o) = &mut self.off_cpu {
            for interval in o.tracker.finish(end) {
                self.writer.off_cpu(&interval);
            }
        }
    }
}
