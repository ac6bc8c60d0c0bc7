//! Exact per-thread CPU accounting (docs/accounting.md): what each sample weighs and
//! what each thread's CPU time was, from the kernel's own per-thread counts rather
//! than samples x period.
//!
//! With `record --exact-weights`, every sample carries its thread's count of the
//! (thread, CPU) event it came from (PERF_SAMPLE_READ with `inherit`, Linux 6.12+);
//! the sample weighs the count since that event's previous sample, so a thread's
//! samples add up to its count at its last sample. By default samples carry no count
//! (it costs the target the kernel's slow context switch): each weighs its period.
//! What follows the last sample (or a thread that never reached one) is the
//! remainder, written as one `[unsampled]` sample under the thread at the end; a
//! thread whose samples weigh more than its clock is named in the summary, and
//! readers scale its samples to the clock (`summary_clocks`).
//!
//! A thread's total is its own clock (`sum_exec_runtime`) where the kernel gives it:
//! at its exit from a taskstats message (`taskstats`), at the end from /proc for a
//! thread still running, less what it had when the recording began for a thread found
//! at attach. Otherwise it comes from the events' counts, which miss the context
//! switches (accounting.md): the final counts its inherited events report as it exits
//! (`inherit_stat`, PERF_RECORD_READ); for a thread the recorder opened events on, the
//! events' counts minus those of every thread that inherited them. Pure: the recorder
//! feeds it records and a few numbers read from the kernel, so it is tested on
//! fixtures.
//!
//! With `--off-cpu` the counts come from the SWITCH records instead: every stretch a
//! thread ran is known, from where the kernel picked it (its `sched_switch` sample,
//! or the switch-out of the thread it followed) to its switch-out (or its exit, or
//! the end), each clipped to the recording, so a sample weighs the time its thread
//! ran since its previous sample. A thread's total is still its own clock less what
//! it ran outside the recording, or what its samples weigh when that is more; the
//! recording's summary keeps each thread's clock beside its stretches
//! ([`Accounting::summary_clocks`]), and a report gives running the clock and moves
//! the difference to or from runnable, as the kernel splits the two (its run-queue
//! clock is left un-updated after a wake-up preemption: `profile::split`). The
//! events then need neither PERF_SAMPLE_READ nor `inherit_stat`, which lets the
//! kernel keep its cheap context switch between the
//! target's threads (docs/off-cpu.md, "Cost").

use std::collections::HashMap;

mod clock;
mod foreign;
mod periods;
mod thread;

pub(super) use periods::{PeriodJitter, vary_after_ns, vary_interval};
use thread::{ThreadAccount, overlap};

/// The `[unsampled]` part of one thread: CPU time no sample stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Remainder {
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub cpu: u32,
    pub ns: u64,
    /// The thread had no sample at all: its whole time in the recording is here.
    pub no_sample: bool,
}

/// Counts read from the kernel when recording stops.
#[derive(Debug, Default, Clone)]
pub(super) struct EndCounts {
    /// For each thread the recorder opened events on: the sum of its events' counts
    /// (its own CPU time plus that of every thread that inherited its events).
    pub opened: HashMap<u32, u64>,
    /// The clock (`sum_exec_runtime`) of each thread still alive, as the kernel gives
    /// it: since the thread began, not since the recording did.
    pub alive: HashMap<u32, u64>,
}

/// Per-thread accounting state of one recording.
#[derive(Debug, Default)]
pub(super) struct Accounting {
    read_clock: foreign::ClockReader,
    exact: bool,
    /// Counts come from the SWITCH records (`--off-cpu`), from this start time.
    switches: Option<u64>,
    /// With SWITCH records: the end of the recording, past which records count as at
    /// the end (set when recording stops, before the last records are handled).
    until: Option<u64>,
    /// The count of each (thread, event id) at its previous sample.
    last: HashMap<(u32, u64), u64>,
    threads: HashMap<u32, ThreadAccount>,
    /// The thread each event the recorder opened belongs to, by event id.
    owners: HashMap<u64, u32>,
    /// Threads whose exit the kernel reported with a clock of 0 ([`Self::unclocked`]).
    unclocked: std::collections::HashSet<u32>,
    /// The periods the recorder gave the events it opened, and the CPU time their
    /// own threads' samples weigh ([`Self::period_set`], [`Self::own_ran`]).
    periods: periods::Varied,
    /// The clock of each thread found at attach when its events were opened (None:
    /// unknown, so its clock cannot give its total).
    started: HashMap<u32, Option<u64>>,
    /// The threads whose `started` clock was read when recording began, not when
    /// their events were opened (accounting from switches): what they ran before
    /// is not in their clock's total.
    from_begin: std::collections::HashSet<u32>,
    /// Each thread's clock at its exit (taskstats), and whether the kernel named its
    /// process.
    exit_clock: HashMap<u32, (u64, bool)>,
    /// Exits reported (taskstats) of threads not known yet, by tid: the process the
    /// kernel named, if it did, and the clock.
    reported: HashMap<u32, (Option<u32>, u64)>,
}

impl Accounting {
    /// `exact`: each thread's total is known (its own clock, or counts) and its
    /// `[unsampled]` remainder written; samples weigh their counts when they carry
    /// them, else their period ([`Self::summary_clocks`] names the threads whose
    /// samples then weigh more than their clock). Not
    /// `exact`: every sample weighs its period and no remainder is known.
    pub(super) fn new(exact: bool) -> Accounting {
        Accounting {
            exact,
            ..Default::default()
        }
    }

    /// Exact accounting from the SWITCH records of `record --off-cpu`, from `begin`
    /// (when the events were enabled; CLOCK_MONOTONIC): no count is read from the
    /// kernel, samples carry none.
    pub(super) fn from_switches(begin: u64) -> Accounting {
        Accounting {
            exact: true,
            switches: Some(begin),
            ..Default::default()
        }
    }

    pub(super) fn is_exact(&self) -> bool {
        self.exact
    }

    /// A SWITCH record of `tid`, its thread picked at the record's time.
    #[cfg(test)]
    pub(super) fn switch(&mut self, pid: u32, tid: u32, time: u64, cpu: u32, out: bool) {
        self.switch_from(pid, tid, time, cpu, out, time);
    }

    /// A SWITCH record of `tid` (accounting from switches only): `out` ends its
    /// running stretch, a switch-in starts one where the kernel `picked` the thread
    /// (its `sched_switch` sample, or the switch-out sample of the thread it followed
    /// on that CPU: `offcpu::Tracker::switched_in`; else the record's time). The kernel starts the thread's
    /// clock there; the SWITCH-in record comes after the previous thread's switch-out
    /// samples, the context switch and the scheduling-in of the thread's events, some
    /// microseconds a switch that its samples would otherwise not weigh (`[unsampled]`).
    pub(super) fn switch_from(
        &mut self,
        pid: u32,
        tid: u32,
        time: u64,
        cpu: u32,
        out: bool,
        picked: u64,
    ) {
        let Some(begin) = self.switches else { return };
        let window = self.window();
        let t = self.threads.entry(tid).or_default();
        t.pid = pid;
        t.first_seen(out, begin, time, cpu);
        if out {
            t.switch_out(time, cpu, window);
        } else if !t.exit.exited {
            t.switch_in(time, picked, cpu, window);
        }
        t.last_time = t.last_time.max(time);
        t.last_cpu = cpu;
    }

    /// A switch-out sample of `tid` (the off-CPU state or stack event) at `time` on
    /// `cpu`: where its running stretch ends, once its SWITCH-out record comes.
    pub(super) fn leaving(&mut self, tid: u32, time: u64, cpu: u32) {
        if self.switches.is_some()
            && let Some(t) = self.threads.get_mut(&tid)
        {
            t.leaving(time, cpu);
        }
    }

    /// The kernel lost records (a full ring): any thread's SWITCH records may be among
    /// them, a SWITCH-out and the SWITCH-in after it both, and a stretch still running
    /// then may have been off the CPU since. Each ends where its thread was last seen
    /// running; a sample or a switch-in starts the next (`ThreadAccount::running_at`).
    /// The clock gives each total; what this leaves out is `[unsampled]`.
    pub(super) fn lost(&mut self) {
        let window = self.window();
        for t in self.threads.values_mut() {
            if let Some(s) = t.runs.on_cpu_since {
                t.stop(t.runs.last_on.max(s), window);
            }
        }
    }

    /// Thread `tid` exec'd a new program at `time` (COMM exec): the launched command's
    /// events are enabled there.
    pub(super) fn exec(&mut self, tid: u32, time: u64) {
        if self.switches.is_some() {
            let t = self.threads.entry(tid).or_default();
            t.runs.born = t.runs.born.or(Some(time));
        }
    }

    /// The recording ended at `end` (accounting from switches): what threads run after
    /// it is not in the recording.
    pub(super) fn set_end(&mut self, end: u64) {
        self.until = Some(end);
    }

    /// The recording's bounds, for accounting from switches.
    fn window(&self) -> (u64, u64) {
        (self.switches.unwrap_or(0), self.until.unwrap_or(u64::MAX))
    }

    /// Thread `tid` exited at `time` (EXIT record): its last stretch ends there.
    pub(super) fn exit(&mut self, pid: u32, tid: u32, time: u64) {
        let window = self.window();
        if let Some(t) = self.threads.get_mut(&tid) {
            t.exit.gone = true;
            t.last_time = t.last_time.max(time);
        }
        let Some(begin) = self.switches else { return };
        let t = self.threads.entry(tid).or_default();
        t.pid = pid;
        t.exit.gone = true;
        t.first_seen(true, begin, time, t.last_cpu);
        t.stop(time, window);
        t.exit.exited = true;
        t.last_time = t.last_time.max(time);
    }

    /// Notes that the recorder opened the event `id` on thread `tid` of `pid`.
    pub(super) fn opened(&mut self, pid: u32, tid: u32, id: u64) {
        self.owners.insert(id, tid);
        let t = self.threads.entry(tid).or_default();
        t.pid = pid;
        t.root = Some(tid);
    }

    fn thread(&mut self, pid: u32, tid: u32, id: u64, time: u64, cpu: u32) -> &mut ThreadAccount {
        let root = self.owners.get(&id).copied();
        let t = self.threads.entry(tid).or_default();
        t.pid = pid;
        if t.root.is_none() {
            t.root = root;
        }
        t.last_time = t.last_time.max(time);
        t.last_cpu = cpu;
        t
    }

    /// Thread `tid`, found at attach, had used `ns` of CPU when its events were opened
    /// (None when /proc did not say).
    pub(super) fn started(&mut self, tid: u32, ns: Option<u64>) {
        self.started.insert(tid, ns);
    }

    /// Thread `tid`, found at attach, had used `ns` of CPU when recording began (with
    /// SWITCH records): its stretches before then are not taken off its clock. Read
    /// at the start, not when its events were opened: the stretches between were in
    /// rings nobody drained yet (attaching to a busy target in DWARF mode takes a
    /// while), and a ring that overflowed then lost the records that would have
    /// taken that time off (running up to 6% above the clock on pgbench backends).
    pub(super) fn started_at_begin(&mut self, tid: u32, ns: Option<u64>) {
        self.started.insert(tid, ns);
        self.from_begin.insert(tid);
    }

    /// The kernel's final account of an exiting thread. Taken if the thread is one of
    /// the recording's (same process, when the kernel names it); returns whether it
    /// was.
    pub(super) fn thread_exit(&mut self, tid: u32, tgid: Option<u32>, ns: u64) -> bool {
        match self.threads.get(&tid) {
            // A clock of 0: the thread ended between two updates of its clock. Its
            // time is its counts' where samples carry them, else no one's.
            Some(t) if ns == 0 && tgid.is_none_or(|p| p == t.pid) => {
                self.unclocked.insert(tid);
                true
            }
            Some(t) if tgid.is_none_or(|p| p == t.pid) => {
                self.exit_clock.insert(tid, (ns, tgid.is_some()));
                true
            }
            _ => false,
        }
    }

    /// A thread was created by `ptid`: it inherits the events `ptid` has.
    pub(super) fn fork(&mut self, pid: u32, tid: u32, ptid: u32, time: u64) {
        let root = self.threads.get(&ptid).and_then(|p| p.root);
        let t = self.threads.entry(tid).or_default();
        t.pid = pid;
        t.root = t.root.or(root);
        t.last_time = t.last_time.max(time);
        t.runs.born = Some(time);
    }

    /// The weight of a sample ([`Self::sample`]): the CPU time since the previous
    /// sample of the same (thread, event), or the period when counts are not
    /// available. None when its count cannot be its thread's ([`Self::foreign`]).
    #[allow(clippy::too_many_arguments)] // the fields of one sample, kept flat for tests
    fn weigh(
        &mut self,
        pid: u32,
        tid: u32,
        id: u64,
        fired: Option<u64>,
        count: Option<u64>,
        period: u64,
        time: u64,
        cpu: u32,
    ) -> Option<u64> {
        if let Some(begin) = self.switches {
            let window = self.window();
            let t = self.thread(pid, tid, id, time, cpu);
            t.first_seen(true, begin, time, cpu);
            if !t.exit.exited {
                t.running_at(time, cpu, window);
            }
            let ran = t.ran_until(time, window);
            let weight = ran.saturating_sub(t.runs.ran_at_sample);
            t.runs.ran_at_sample = ran;
            return Some(t.add_sampled(weight));
        }
        let weight = match (self.exact, count) {
            (true, Some(c)) => {
                // An event's count only grows: a sample whose count is not above the
                // highest seen (handled out of order, or twice) weighs nothing, and
                // never lowers the base the next sample is weighed from (that would
                // count the stretch between the two again).
                if let Some(last) = self.last.get_mut(&(tid, id)) {
                    let weight = c.saturating_sub(*last);
                    *last = (*last).max(c);
                    weight
                } else if self.foreign(pid, tid, id, c) {
                    return None;
                } else {
                    self.last.insert((tid, id), c);
                    c
                }
            }
            // No count in samples (the default, without `--exact-weights`): the
            // period. The kernel reports the one an event was opened with, and the
            // recorder varies those of the events it opened: a sample such an event
            // took itself, whatever thread, weighs the period last given it. An
            // inherited copy keeps the period its thread was created with. A thread
            // that gets more than it ran (the hypervisor's steal in task-clock) is
            // scaled to its clock by readers (`summary_clocks`).
            (true, None) | (false, _) => (self.opened_fired(id, tid, fired))
                .then(|| self.period_at(id, time))
                .flatten()
                .unwrap_or(period),
        };
        Some(self.thread(pid, tid, id, time, cpu).add_sampled(weight))
    }

    /// What thread `tid`'s samples weigh so far, with the `[unsampled]` time live
    /// windows gave it.
    pub(super) fn weighed(&self, tid: u32) -> u64 {
        self.threads
            .get(&tid)
            .map_or(0, |t| t.sampled + t.window.emitted)
    }

    /// An inherited event reported its final `count` as thread `tid` exited.
    pub(super) fn exit_count(&mut self, pid: u32, tid: u32, id: u64, count: u64, time: u64) {
        let t = self.thread(pid, tid, id, time, 0);
        t.exit.exit_counts += count;
        t.exit.exited_with_counts = true;
    }

    /// Each thread's total CPU time: its own clock where known, else its counts (or
    /// its stretches from the SWITCH records); `end_time` ends the stretches still
    /// running. Never less than its samples weigh.
    pub(super) fn totals(&self, end: &EndCounts, end_time: u64) -> HashMap<u32, u64> {
        let mut totals = self.counted(end, end_time);
        for (tid, clock) in self.clocks(end, end_time, &totals) {
            let sampled = self.threads.get(&tid).map_or(0, |t| t.sampled);
            totals.insert(tid, clock.max(sampled));
        }
        totals
    }

    /// Each thread's total from the events' counts (or the SWITCH records), where
    /// they give it.
    fn counted(&self, end: &EndCounts, end_time: u64) -> HashMap<u32, u64> {
        let mut totals: HashMap<u32, u64> = HashMap::new();
        if self.switches.is_some() {
            let window = self.window();
            for (&tid, t) in &self.threads {
                totals.insert(tid, t.ran_until(end_time.max(t.last_time), window));
            }
            return totals;
        }
        for (&tid, t) in &self.threads {
            if t.exit.exited_with_counts {
                // Its samples' counts are exact up to each event's last sample: a
                // final count lost with its record (a ring that was full) leaves
                // those, not less.
                totals.insert(tid, t.exit.exit_counts.max(t.sampled));
            } else if let Some(&ns) = end.alive.get(&tid)
                && !end.opened.contains_key(&tid)
            {
                totals.insert(tid, ns);
            }
        }
        // A thread the recorder opened events on: their counts include every thread
        // that inherited them; take those out. An inherited thread with no final
        // count (its records lost) is its samples' weight, which it is shown with:
        // left in, all of it would go to the thread the events were opened on.
        let mut inherited: HashMap<u32, u64> = HashMap::new();
        for (&tid, t) in &self.threads {
            if let Some(root) = t.root
                && root != tid
            {
                let ns = totals.get(&tid).copied().unwrap_or(t.sampled);
                *inherited.entry(root).or_default() += ns;
            }
        }
        for (&tid, &all) in &end.opened {
            let own = all.saturating_sub(inherited.get(&tid).copied().unwrap_or(0));
            totals.insert(tid, own);
        }
        totals
    }

    /// The `[unsampled]` remainder of every thread `keep` accepts (by pid), with
    /// `end_time` for threads still running. Empty when accounting is not exact.
    pub(super) fn remainders(
        &self,
        end: &EndCounts,
        end_time: u64,
        keep: impl Fn(u32, u32) -> bool,
    ) -> Vec<Remainder> {
        if !self.exact {
            return Vec::new();
        }
        let totals = self.totals(end, end_time);
        let mut out: Vec<Remainder> = self
            .threads
            .iter()
            .filter(|(tid, t)| keep(t.pid, **tid))
            .filter_map(|(&tid, t)| {
                let total = *totals.get(&tid)?;
                // What live windows already gave it is not given again.
                let ns = total
                    .checked_sub(t.sampled + t.window.emitted)
                    .filter(|&ns| ns > 0)?;
                let running = if self.switches.is_some() {
                    !t.exit.exited && !self.exit_clock.contains_key(&tid)
                } else {
                    let exited = t.exit.exited_with_counts || self.exit_clock.contains_key(&tid);
                    !exited && end.alive.contains_key(&tid)
                };
                Some(Remainder {
                    pid: t.pid,
                    tid,
                    time: if running || t.last_time == 0 {
                        end_time
                    } else {
                        t.last_time
                    },
                    cpu: t.last_cpu,
                    ns,
                    no_sample: t.sampled == 0 && t.window.emitted == 0,
                })
            })
            .collect();
        out.sort_by_key(|r| (r.time, r.tid));
        out
    }

    /// The `[unsampled]` time each thread `keep` accepts accrued up to `end_time`, the
    /// cut of a live window (docs/live.md): its own clock then (`alive`, read at
    /// `end_time` for the threads still running; the taskstats clock of one whose EXIT
    /// record has been handled) less its samples' weights up to `end_time` and what
    /// earlier windows gave it. A thread whose clock is not known yet waits for a later
    /// window or the end. Empty when accounting is not exact.
    pub(super) fn window_remainders(
        &mut self,
        alive: &HashMap<u32, u64>,
        end_time: u64,
        keep: impl Fn(u32, u32) -> bool,
    ) -> Vec<Remainder> {
        if !self.exact {
            return Vec::new();
        }
        let mut out = Vec::new();
        for (&tid, t) in self.threads.iter_mut() {
            if !keep(t.pid, tid) {
                continue;
            }
            // An exit clock counts once every sample before the exit is in: after
            // its EXIT record. Otherwise the clock read at the cut.
            let (at, running) = match (self.exit_clock.get(&tid), alive.get(&tid)) {
                (Some(&(ns, true)), _) if t.exit.gone => (ns, false),
                (_, Some(&ns)) => (ns, true),
                _ => continue,
            };
            let start = match self.started.get(&tid) {
                Some(&Some(s)) => s,
                Some(None) => continue,
                None => 0,
            };
            let total = at.saturating_sub(start);
            let ns = total.saturating_sub(t.sampled + t.window.emitted);
            if ns == 0 {
                continue;
            }
            let no_sample = t.sampled == 0 && t.window.emitted == 0;
            t.window.emitted += ns;
            t.window.credit += ns;
            out.push(Remainder {
                pid: t.pid,
                tid,
                time: if running || t.last_time == 0 {
                    end_time
                } else {
                    t.last_time.min(end_time)
                },
                cpu: t.last_cpu,
                ns,
                no_sample,
            });
        }
        out.sort_by_key(|r| (r.time, r.tid));
        out
    }

    /// How many threads are accounted.
    pub(super) fn len(&self) -> usize {
        self.threads.len()
    }

    /// Forgets the threads whose EXIT record has been handled, and `vanished` ones
    /// (gone without one: a LOST record held it), when accounting is not exact (a
    /// host agent, `-a`): nothing reads a thread's account then but its samples'
    /// weights, and none of its samples comes after its exit. An exact account is
    /// kept whole (its end's remainders read every thread's). Returns how many went.
    pub(super) fn forget_gone(&mut self, vanished: &[u32]) -> usize {
        if self.exact {
            return 0;
        }
        let before = self.threads.len();
        for tid in vanished {
            self.threads.remove(tid);
        }
        self.threads.retain(|_, t| !t.exit.gone);
        before - self.threads.len()
    }

    /// The tids accounted whose EXIT record has not been handled (to find those gone
    /// without one): a host agent asks `/proc` of each at every window's cut, and a
    /// fork-heavy host's exited threads would each cost a failed lookup there.
    pub(super) fn tids(&self) -> impl Iterator<Item = u32> + '_ {
        self.threads
            .iter()
            .filter(|(_, t)| !t.exit.gone)
            .map(|(tid, _)| *tid)
    }

    /// Threads the accounting knows of, with their pid (for reading what the
    /// still-running ones used at the end).
    pub(super) fn threads(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.threads
            .iter()
            .filter(|(tid, t)| {
                !t.exit.exited_with_counts && !t.exit.exited && !self.exit_clock.contains_key(tid)
            })
            .map(|(&tid, t)| (t.pid, tid))
    }
}

/// A thread's CPU time so far from the kernel (`sum_exec_runtime`, nanoseconds), or
/// None when it is gone or the kernel does not say.
pub(super) fn thread_cpu_ns(pid: u32, tid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat")).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// A thread's run-queue delay so far (the kernel's schedstat `run_delay`: time spent
/// runnable, waiting for a CPU), nanoseconds.
pub(super) fn thread_run_delay_ns(pid: u32, tid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat")).ok()?;
    text.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod end_tests;
#[cfg(test)]
mod over_tests;
#[cfg(test)]
mod pick_tests;
#[cfg(test)]
mod switch_tests;
#[cfg(test)]
mod tests;
