//! One thread's account: the weights its samples were given, the final counts its
//! events reported, and (from SWITCH records) the stretches it ran, each clipped to
//! the recording; how a lost switch record is closed (see [`super`]).

/// What is known of one thread.
#[derive(Debug, Default, Clone)]
pub(super) struct ThreadAccount {
    pub(super) pid: u32,
    /// Sum of the weights given to its samples.
    pub(super) sampled: u64,
    /// The thread the recorder opened the events on that this thread's were inherited
    /// from (itself for such a thread), when known.
    pub(super) root: Option<u32>,
    /// Time of its last record: where its `[unsampled]` remainder is placed.
    pub(super) last_time: u64,
    pub(super) last_cpu: u32,
    /// The stretches it ran, from SWITCH records.
    pub(super) runs: Stretches,
    /// Its exit and the final counts its events reported then.
    pub(super) exit: Exit,
    /// What live windows gave it as `[unsampled]`.
    pub(super) window: WindowCredit,
}

/// The stretches a thread ran, from SWITCH records, each clipped to the recording.
#[derive(Debug, Default, Clone)]
pub(super) struct Stretches {
    /// Accounting from SWITCH records: when it was created (FORK) or exec'd, when
    /// recording began otherwise.
    pub(super) born: Option<u64>,
    /// Its first SWITCH record, sample or exit has been seen: before, whether it ran
    /// is not known.
    pub(super) seen: bool,
    /// The start of the stretch it is running now, and the CPU it runs on.
    pub(super) on_cpu_since: Option<u64>,
    pub(super) run_cpu: u32,
    /// When it began to leave the CPU it runs on: its switch-out sample (time, CPU),
    /// taken before the SWITCH-out record ([`ThreadAccount::switch_out`]).
    pub(super) leaving: Option<(u64, u32)>,
    /// The latest moment it is known to have been on a CPU (a switch-in, a sample),
    /// and the end of its last stretch: where a stretch whose switch-out record was
    /// lost ends, and after which a sample while off the CPU means the switch-in
    /// record was lost.
    pub(super) last_on: u64,
    pub(super) last_off: u64,
    /// The time of its ended stretches within the recording.
    pub(super) ran: u64,
    /// The time of its ended stretches outside the recording (before its start or
    /// after its end): in its own clock, not in the recording; and the part of it
    /// before the start (not in a clock read at the start).
    pub(super) outside: u64,
    pub(super) before: u64,
    /// `ran` plus the running stretch at its previous sample.
    pub(super) ran_at_sample: u64,
}

/// A thread's exit, and the final counts its inherited events reported then.
#[derive(Debug, Default, Clone)]
pub(super) struct Exit {
    /// Sum of the final counts its inherited events reported at its exit.
    pub(super) exit_counts: u64,
    pub(super) exited_with_counts: bool,
    /// It exited (EXIT record): its total is final.
    pub(super) exited: bool,
    /// Its EXIT record has been handled (with any accounting): every sample of it
    /// has been too.
    pub(super) gone: bool,
}

/// The `[unsampled]` time live windows gave a thread.
#[derive(Debug, Default, Clone)]
pub(super) struct WindowCredit {
    /// `[unsampled]` time already given to it in live windows
    /// ([`super::Accounting::window_remainders`]).
    pub(super) emitted: u64,
    /// The part of `emitted` its next samples' counts will cover again (the time
    /// between its last sample and a cut): taken off their weights.
    pub(super) credit: u64,
}

impl ThreadAccount {
    /// Adds a sample's weight, less what a window already gave as `[unsampled]`.
    pub(super) fn add_sampled(&mut self, weight: u64) -> u64 {
        let covered = weight.min(self.window.credit);
        self.window.credit -= covered;
        self.sampled += weight - covered;
        weight - covered
    }

    /// The CPU time the thread had used at `time`, from its stretches.
    /// The CPU time it had used at `time` within the recording `(lo, hi)`.
    pub(super) fn ran_until(&self, time: u64, (lo, hi): (u64, u64)) -> u64 {
        self.runs.ran
            + self
                .runs
                .on_cpu_since
                .map_or(0, |s| overlap(s, time, lo, hi))
    }

    /// Ends its running stretch at `time`.
    pub(super) fn stop(&mut self, time: u64, (lo, hi): (u64, u64)) {
        if let Some(s) = self.runs.on_cpu_since.take() {
            let within = overlap(s, time, lo, hi);
            self.runs.ran += within;
            self.runs.outside += time.saturating_sub(s) - within;
            self.runs.before += time.min(lo).saturating_sub(s);
            self.runs.last_off = self.runs.last_off.max(time);
        }
    }

    /// A SWITCH-in record at `time`. If a stretch is still running, its SWITCH-out
    /// record was lost (a full ring): it ends where the thread was last known to run
    /// (its switch-in or its last sample), never across the time it was off the CPU,
    /// which would give its samples that time too (running twice the thread's clock,
    /// issue 28). The clock's total covers what is left out, as `[unsampled]`.
    /// The new stretch begins where the kernel `picked` the thread (at or before
    /// `time`), never before its last stretch ended.
    pub(super) fn switch_in(&mut self, time: u64, picked: u64, cpu: u32, window: (u64, u64)) {
        if let Some(s) = self.runs.on_cpu_since
            && time > s
        {
            self.stop(self.runs.last_on.clamp(s, time), window);
        }
        if self.runs.on_cpu_since.is_none() {
            self.runs.on_cpu_since = Some(picked.max(self.runs.last_off).min(time));
            self.runs.run_cpu = cpu;
        }
        self.runs.last_on = self.runs.last_on.max(time);
    }

    /// A SWITCH-out record at `time` on `cpu`. A thread runs on one CPU from its
    /// switch-in to its switch-out (the kernel moves no task while it runs): a
    /// stretch that began on another CPU ended there unseen, and the thread came to
    /// `cpu` unseen too (a SWITCH-out and a SWITCH-in missing between). It ends where
    /// the thread was last known to run on its CPU, never across the time between,
    /// which it may have spent waiting for a CPU; the clock's total covers what it ran
    /// on `cpu` before `time`, as `[unsampled]`.
    ///
    /// The stretch ends where its switch-out was sampled, on that CPU, when it was:
    /// the kernel stopped the thread's clock before (when it picked the next task),
    /// and counts the time from there to the SWITCH-out record (the samples' own
    /// callchains and stack copies, some 5 µs a switch, 50 to 70 ms a second of
    /// switching on pgbench backends) as its run-queue delay or its wait.
    pub(super) fn switch_out(&mut self, time: u64, cpu: u32, window: (u64, u64)) {
        self.left_its_cpu(time, cpu, window);
        let left = match (self.runs.leaving.take(), self.runs.on_cpu_since) {
            (Some((at, c)), Some(s))
                if c == cpu && at >= s && at <= time && time - at <= PAIRING_NS =>
            {
                at
            }
            _ => time,
        };
        self.stop(left, window);
        self.runs.last_off = self.runs.last_off.max(time);
    }

    /// Its switch-out was sampled at `time` on `cpu`: it is leaving the CPU.
    pub(super) fn leaving(&mut self, time: u64, cpu: u32) {
        self.runs.leaving = Some((time, cpu));
    }

    /// A CPU sample at `time` on `cpu`: the thread is on that CPU. Off the CPU since a
    /// switch-out before `time`, or running on another CPU, its SWITCH-in record (and
    /// the SWITCH-out before it) was lost: it has run since the sample at least.
    pub(super) fn running_at(&mut self, time: u64, cpu: u32, window: (u64, u64)) {
        self.left_its_cpu(time, cpu, window);
        if self.runs.on_cpu_since.is_none() && time > self.runs.last_off {
            self.runs.on_cpu_since = Some(time);
            self.runs.run_cpu = cpu;
        }
        self.runs.last_on = self.runs.last_on.max(time);
    }

    /// Ends its running stretch where it was last seen on the CPU the stretch began on,
    /// when a record at `time` (after the stretch began) puts it on another `cpu`.
    fn left_its_cpu(&mut self, time: u64, cpu: u32, window: (u64, u64)) {
        if let Some(s) = self.runs.on_cpu_since
            && cpu != self.runs.run_cpu
            && time > s
        {
            self.stop(self.runs.last_on.clamp(s, time), window);
        }
    }

    /// Its first record says it was running before: since it was born, or since
    /// recording began.
    pub(super) fn first_seen(&mut self, running: bool, begin: u64, time: u64, cpu: u32) {
        if !self.runs.seen {
            self.runs.seen = true;
            if running {
                self.runs.on_cpu_since = Some(self.runs.born.unwrap_or(begin).min(time));
                self.runs.run_cpu = cpu;
            }
        }
    }
}

/// A switch-out sample and its SWITCH-out record are taken in one scheduler call,
/// microseconds apart: a sample further back is not this switch-out's.
const PAIRING_NS: u64 = 10_000_000;

/// How much of `[a, b]` lies within `[lo, hi]`.
pub(super) fn overlap(a: u64, b: u64, lo: u64, hi: u64) -> u64 {
    b.min(hi).saturating_sub(a.max(lo))
}
