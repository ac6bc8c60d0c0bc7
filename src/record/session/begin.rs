//! Where each thread's states begin, once the events are attached: the accounting
//! of the opened events (each thread's clock as recording begins), and with
//! `--off-cpu` the recorder of switches with the threads found blocked at the attach.

use super::super::RecordOptions;
use super::super::accounting::{self, Accounting};
use super::super::offcpu::OffCpuRecorder;
use super::Session;
use crate::format::ThreadState;
use crate::process;
use crate::symbolize::kernel::KernelSymbols;

/// Threads blocked at the attach whose stacks are read from /proc, at most.
const BLOCKED_STACKS: usize = 512;

impl Session<'_> {
    /// Where each thread's states begin: the accounting of the opened events, and
    /// with `--off-cpu` the recorder of switches, with the threads already blocked
    /// at the attach (their states and stacks, as `dump` reads them) and each one's
    /// run-queue delay so far (checked against ours at its exit or the end).
    pub(super) fn begin_states(
        &mut self,
        opts: &RecordOptions,
        begin: u64,
        pids: &[u32],
        only_tids: Option<&[u32]>,
        kallsyms: Option<KernelSymbols>,
        no_wakeups: Option<String>,
    ) {
        // Attached: the recording's states begin here. Launched: at the exec, where the
        // events are enabled (records before it cannot be).
        let states_from = if opts.target.is_attach() { begin } else { 0 };
        let mut acct = if opts.off_cpu {
            Accounting::from_switches(states_from)
        } else {
            // Totals from the threads' own clocks need the exits the kernel reports
            // (taskstats) when samples carry no counts (`--exact-weights`); -a has
            // no thread to count.
            let exact = self.events.cfg.exact
                || (self.exits.is_some() && opts.target != super::super::Target::AllCpus);
            Accounting::new(exact)
        };
        for &(pid, tid, id) in &self.events.opened_for.ids {
            acct.opened(pid, tid, id);
        }
        if opts.off_cpu && opts.target.is_attach() {
            // The clocks as recording begins (accounting.rs, `started_at_begin`).
            let pid_of: std::collections::HashMap<u32, u32> = self
                .events
                .opened_for
                .ids
                .iter()
                .map(|&(p, t, _)| (t, p))
                .collect();
            for &(tid, _) in &self.events.opened_for.started {
                let now = pid_of
                    .get(&tid)
                    .and_then(|&pid| accounting::thread_cpu_ns(pid, tid));
                acct.started_at_begin(tid, now);
            }
        } else {
            for &(tid, ns) in &self.events.opened_for.started {
                acct.started(tid, ns);
            }
        }
        self.handler.set_accounting(acct);
        if !self.handler.accounting().is_exact() {
            self.exits = None;
        }
        if opts.off_cpu {
            let mut rec = OffCpuRecorder::new(self.events.switch_ids(), kallsyms);
            rec.attached_ns = begin;
            rec.tracker.window = Some((states_from, u64::MAX));
            rec.wakeups = self.wakeups.as_ref().map(|w| w.samples.clone());
            rec.no_wakeups = no_wakeups;
            if opts.target.is_attach() {
                self.blocked_at_start(&mut rec, pids, only_tids);
            } else {
                // The launched command's one thread, to check its runnable time at its
                // exit or the end (its threads to come start from zero).
                for &pid in pids {
                    if let Some(d) = accounting::thread_run_delay_ns(pid, pid) {
                        rec.delay_at_start.insert(pid, (pid, d));
                    }
                }
            }
            self.handler.off_cpu = Some(rec);
        }
    }

    /// The threads of `pids` (those of `only_tids`) as the events were enabled: each
    /// one's run-queue delay so far, and its state, with its stack as `dump` reads it
    /// when blocked (for the first [`BLOCKED_STACKS`]).
    fn blocked_at_start(
        &mut self,
        rec: &mut OffCpuRecorder,
        pids: &[u32],
        only_tids: Option<&[u32]>,
    ) {
        let mut read_stacks = BLOCKED_STACKS;
        // Threads already blocked when the events were enabled switch in first.
        for &pid in pids {
            for tid in process::list_tids(pid).unwrap_or_default() {
                if only_tids.is_some_and(|t| !t.contains(&tid)) {
                    continue;
                }
                if let Some(d) = accounting::thread_run_delay_ns(pid, tid) {
                    rec.delay_at_start.insert(tid, (pid, d));
                }
                if let Some(state) = process::state::state_now(pid, tid) {
                    // Its stack as `dump` reads it, for the first threads (a few
                    // hundred microseconds each, while the rings fill).
                    let stack = (read_stacks > 0)
                        .then(|| self.handler.stack_of_blocked(pid, tid, None))
                        .flatten();
                    read_stacks = read_stacks.saturating_sub(1);
                    rec.tracker
                        .blocked_at_start(pid, tid, rec.attached_ns, state, stack);
                } else {
                    // Running or waiting for a CPU (`R`): if its first record is
                    // a SWITCH-in it was waiting, runnable from the start (on a
                    // busy machine, up to seconds); a SWITCH-out first says it
                    // ran, and the guess goes.
                    rec.tracker.blocked_at_start(
                        pid,
                        tid,
                        rec.attached_ns,
                        ThreadState::Runnable,
                        None,
                    );
                }
            }
            self.keep_up();
        }
    }
}
