//! The last phase of a recording: stop sampling, handle what the rings still hold,
//! read the threads' own clocks and run-queue delays at the end, name every unique
//! frame while the target's files are reachable, and write the summary.

use std::collections::HashMap;

use super::super::accounting::{self, EndCounts};
use super::super::events::{Counters, Ended, EventHandler};
use super::super::launch;
use super::super::live::Live;
use super::super::offcpu::OffCpuRecorder;
use super::super::summary::{OffCpuSummary, RecordSummary};
use super::super::{RecordError, RecordOptions};
use super::Session;
use super::sampling::{Sampled, Stopped};
use super::setup::{kernel_thread_note, output_error};
use crate::format::{FrameSymbols, SampleWeights, Summary, ThreadClock};
use crate::replay::runtimes;
use crate::symbolize::frames as naming;
use crate::symbolize::kernel::KernelSymbols;
use crate::symbolize::perfmap::PerfMap;

impl Sampled<'_> {
    /// Stops sampling, handles what the rings still hold, names every frame and
    /// writes the summary.
    pub(super) fn finish(self) -> Result<RecordSummary, RecordError> {
        let Sampled {
            opts,
            session,
            stopped,
            child,
            kallsyms,
            kernel_note,
            existing_descendants,
        } = self;
        let target_note = if opts.target.is_attach() {
            session.pids.iter().find_map(|&p| kernel_thread_note(p))
        } else {
            None
        };
        let mut summary = session.finish(opts, stopped, child, kallsyms, kernel_note)?;
        summary.target_note = target_note;
        summary.existing_descendants = existing_descendants;
        Ok(summary)
    }
}

/// What is known once sampling stopped and the rings are empty, for the summaries.
struct Closed {
    cpu_time_ns: u64,
    /// The `[unsampled]` samples written, and the time they stand for.
    unsampled: (u64, u64),
    thread_clocks: Vec<ThreadClock>,
    /// Whether the kernel reported the exiting threads' clocks.
    exits_reported: bool,
    off_cpu: Option<OffCpuSummary>,
    kallsyms: Option<KernelSymbols>,
    jit_maps: HashMap<u32, PerfMap>,
    acct_note: Option<String>,
    event_fds: usize,
    ring_bytes: usize,
    rings: usize,
    period_ns: u64,
    filter_full: u64,
    /// The events counted in samples (`--exact-weights`).
    counts: bool,
}

impl Closed {
    /// The samples' weight past their threads' clocks (readers scale them down), and
    /// what the samples weigh when the accounting is `exact`.
    fn weights(&self, off_cpu: bool, exact: bool) -> (u64, Option<SampleWeights>) {
        let scaled_ns = if off_cpu {
            0
        } else {
            (self.thread_clocks.iter())
                .map(|c| c.ran_ns.saturating_sub(c.clock_ns))
                .sum()
        };
        let weights = exact.then_some(if off_cpu {
            SampleWeights::Switches
        } else if self.counts {
            SampleWeights::Counts
        } else {
            SampleWeights::Periods
        });
        (scaled_ns, weights)
    }
}

/// What writing the file's end left.
struct Written {
    c: Counters,
    bytes: u64,
    sampled_ns: u64,
    symbols: naming::SymbolStats,
}

impl Session<'_> {
    /// Stops sampling, handles what the rings still hold, names every frame and
    /// writes the summary.
    fn finish(
        mut self,
        opts: &RecordOptions,
        stopped: Stopped,
        child: Option<u32>,
        kallsyms: Option<KernelSymbols>,
        kernel_note: Option<String>,
    ) -> Result<RecordSummary, RecordError> {
        let mut closed = self.close(stopped.end_time_ns, kallsyms);
        drop(self.events); // closes every event: the target is left as it was
        let mut exit_code = stopped.exit_code;
        if let Some(pid) = child
            && exit_code.is_none()
        {
            exit_code = launch::finish_child(pid);
        }
        let exact = self.handler.accounting().is_exact();
        let (scaled_ns, sample_weights) = closed.weights(opts.off_cpu, exact);
        let c = &self.handler.counters;
        let summary = Summary {
            end_time_ns: stopped.end_time_ns,
            // Every SAMPLE in the file, the [unsampled] ones included.
            samples: c.samples + closed.unsampled.0,
            lost: c.lost,
            throttled: c.throttled,
            dropped: c.dropped,
            cpu_time_ns: closed.cpu_time_ns,
            exit_code,
            stop_reason: stopped.reason,
            attached_ns: self.handler.off_cpu.as_ref().map_or(0, |o| o.attached_ns),
            cpu_accounting: crate::format::CpuAccounting::of(exact),
            thread_clocks: std::mem::take(&mut closed.thread_clocks),
            sample_weights,
            notes: Vec::new(),
        };
        let w = write_end(self.handler, self.live.as_mut(), opts, summary, &mut closed)?;
        Ok(RecordSummary {
            output: opts.output.clone(),
            samples: w.c.samples,
            lost: w.c.lost,
            throttled: w.c.throttled,
            dropped: w.c.dropped,
            threads: w.c.per_thread.len() + w.c.retired_threads,
            processes: w.c.pids.len() + w.c.retired_processes,
            duration: stopped.duration,
            bytes: w.bytes,
            stop_reason: stopped.reason,
            exit_code,
            event_fds: closed.event_fds,
            ring_bytes: closed.ring_bytes,
            rings: closed.rings,
            cpu_time_ns: closed.cpu_time_ns,
            period_ns: closed.period_ns,
            exact,
            sample_weights,
            scaled_ns,
            thread_clocks: closed.exits_reported,
            sampled_ns: w.sampled_ns.saturating_sub(scaled_ns),
            unsampled_ns: closed.unsampled.1,
            truncated_stacks: w.c.truncated,
            other_process_samples: w.c.left_out.other_process_samples,
            other_thread_samples: w.c.left_out.other_thread_samples,
            foreign_counts: w.c.left_out.foreign_counts,
            short_threads: (w.c.remainders.short_threads, w.c.remainders.short_ns),
            undersampled_threads: (
                w.c.remainders.undersampled_threads,
                w.c.remainders.undersampled_ns,
            ),
            unclocked_threads: w.c.remainders.unclocked_threads,
            existing_descendants: Vec::new(),
            filter_full: closed.filter_full,
            kernel_note: (kernel_note.or(w.symbols.kernel_note.clone())).or(closed.acct_note),
            target_note: None,
            symbols: w.symbols,
            off_cpu: closed.off_cpu,
        })
    }

    /// Stops sampling: the threads' clocks read, every event disabled, what the
    /// rings still hold handled and the `[unsampled]` time written.
    fn close(&mut self, end_ns: u64, mut kallsyms: Option<KernelSymbols>) -> Closed {
        let (alive, delays_now) = self.clocks_now();
        self.events.disable();
        // Records of the last moments, past the end, count as at the end.
        self.handler.sampling_ended(end_ns);
        let refiltered = self.wakeups.as_ref().map_or(0, |w| w.refiltered);
        // Closed: no more wake-ups; their ids stay known for the records in the rings.
        if let Some(w) = self.wakeups.as_mut() {
            w.close();
        }
        // The last maps first, so that samples still held are unwound with them.
        let jit_maps = self.handler.jit.finish();
        self.process(u64::MAX, false);
        self.take_exits(true);
        let exits_reported = self.exits.take().is_some();
        self.handler.finish_off_cpu(end_ns);
        let unclassified = !self.events.cfg.kernel;
        let off_cpu = self.handler.off_cpu.as_mut().map(|o| {
            kallsyms = kallsyms.take().or_else(|| o.kallsyms.take());
            off_cpu_summary(o, unclassified, refiltered, end_ns, &delays_now)
        });
        let opened = self.events.counts_by_thread();
        let cpu_time_ns = opened.values().sum();
        let end_counts = EndCounts { opened, alive };
        let unsampled =
            (self.handler).write_unsampled(&end_counts, end_ns, self.events.cfg.period_ns);
        let thread_clocks = self.handler.thread_clocks(&end_counts, end_ns);
        let acct_note = self.events.opened_for.note.take();
        if let Some(why) = self.events.capture_refused.take() {
            self.handler.runtimes.python.capture_refused(why);
        }
        Closed {
            cpu_time_ns,
            unsampled,
            thread_clocks,
            exits_reported,
            off_cpu,
            kallsyms,
            jit_maps,
            acct_note,
            event_fds: self.events.fd_count() + self.rings.len(),
            ring_bytes: self.rings.iter().map(|r| r.ring.bytes()).sum(),
            rings: self.rings.len(),
            period_ns: self.events.cfg.period_ns,
            filter_full: self.events.filter_full,
            counts: self.events.cfg.exact,
        }
    }

    /// What the threads still running used, from their own clocks, and the kernel's
    /// run-queue delays of the off-CPU threads, as close as can be to the moment
    /// sampling stops (accounting.md).
    fn clocks_now(&self) -> (HashMap<u32, u64>, HashMap<u32, u64>) {
        let alive = if self.handler.accounting().is_exact() {
            let threads: Vec<(u32, u32)> = self.handler.accounting().threads().collect();
            threads
                .into_iter()
                .filter_map(|(pid, tid)| Some((tid, accounting::thread_cpu_ns(pid, tid)?)))
                .collect()
        } else {
            HashMap::new()
        };
        let delays = self
            .handler
            .off_cpu
            .as_ref()
            .map_or_else(HashMap::new, |o| {
                o.delay_at_start
                    .iter()
                    .map(|(&tid, &(pid, _))| (tid, pid))
                    .chain(o.tracker.born.keys().map(|&t| (t, t)))
                    .filter_map(|(tid, pid)| {
                        Some((tid, accounting::thread_run_delay_ns(pid, tid)?))
                    })
                    .collect()
            });
        (alive, delays)
    }
}

/// Names every unique frame once, while the target's files are reachable (a live
/// consumer's last window first), and writes the file's names, summary and end.
fn write_end(
    mut h: EventHandler,
    live: Option<&mut Live>,
    opts: &RecordOptions,
    mut summary: Summary,
    closed: &mut Closed,
) -> Result<Written, RecordError> {
    let live_only = live.is_some() && opts.output.is_none();
    if let Some(live) = live {
        // The last window first; a file gets every name below.
        live.cut(&mut h, summary.end_time_ns.max(live.start_ns()), true);
        live.finish(&h, false);
    }
    let (symbols, stats) = if live_only {
        // Live without a file: the windows had their names; what held the runtime
        // readers (budgets, processes not read) is still said once.
        let stats = naming::SymbolStats {
            runtime_notes: runtime_notes(&h),
            ..Default::default()
        };
        (Vec::new(), stats)
    } else {
        let kallsyms = closed.kallsyms.take();
        name_every_frame(&h, &closed.jit_maps, &opts.debug_dirs, kallsyms)
    };
    // Said again by every report of the file (table, SVG, JSON).
    summary.notes = (stats.perf_map_notes.iter())
        .chain(&stats.runtime_notes)
        .cloned()
        .collect();
    h.write_symbols(&symbols);
    let Ended {
        writer,
        counters,
        write_error,
        sampled_ns,
    } = h.end();
    if let Some(e) = write_error {
        return Err(output_error(opts, e));
    }
    let out = writer.finish(&summary).map_err(|e| output_error(opts, e))?;
    Ok(Written {
        c: counters,
        bytes: out.get_ref().metadata().map(|m| m.len()).unwrap_or(0),
        sampled_ns,
        symbols: stats,
    })
}

/// The off-CPU part of the summary, its runnable check made against the kernel's
/// run-queue delays read at the end (`delays_now`; others read now).
fn off_cpu_summary(
    o: &mut OffCpuRecorder,
    unclassified: bool,
    refiltered: u64,
    end_ns: u64,
    delays_now: &HashMap<u32, u64>,
) -> OffCpuSummary {
    o.check_at_end(end_ns, |pid, tid| {
        delays_now
            .get(&tid)
            .copied()
            .or_else(|| accounting::thread_run_delay_ns(pid, tid))
    });
    OffCpuSummary {
        intervals: o.tracker.counts.intervals,
        stacked: o.tracker.counts.stacked,
        borrowed: o.tracker.counts.borrowed,
        unmatched: o.tracker.counts.unmatched,
        unnamed: o.tracker.counts.unnamed,
        named_by_site: o.tracker.counts.named_by_site,
        site_unnamed: o.tracker.counts.site_unnamed,
        unclassified,
        woken: o.tracker.counts.woken,
        off_cpu_ns: o.tracker.counts.off_cpu_ns,
        stacked_ns: o.tracker.counts.stacked_ns,
        read_from_proc: o.tracker.counts.read_from_proc,
        no_wakeups: o.no_wakeups.clone(),
        refiltered,
        runnable_check: o.check.summary(),
    }
}

/// Names every unique frame of the recording: native, JIT and kernel frames by the
/// one namer, then the Python and Java frames read from the processes.
fn name_every_frame(
    h: &EventHandler,
    jit_maps: &HashMap<u32, PerfMap>,
    debug_dirs: &[std::path::PathBuf],
    kallsyms: Option<KernelSymbols>,
) -> (Vec<FrameSymbols>, naming::SymbolStats) {
    let bound = naming::Bound {
        mappings: h.writer().mappings(),
        modules: h.mapping_modules(),
        live: Some(naming::Live {
            uids: &h.counters.uids,
            jit_maps,
            defer_dwarf: None,
        }),
        kernel: Ok(()),
    };
    let (mut symbols, mut stats) =
        naming::symbolize(h.writer().frames(), &bound, debug_dirs, kallsyms);
    stats.perf_map_notes.extend(h.jit.notes());
    let stages = h.runtimes.stages();
    symbols.extend(runtimes::names_from(&stages, h.writer().frames(), 0));
    symbols.sort_by_key(|s| s.frame);
    stats.runtime_notes = runtime_notes(h);
    (symbols, stats)
}

/// What the summary says of the runtime readers' processes.
fn runtime_notes(h: &EventHandler) -> Vec<String> {
    let stages = h.runtimes.stages();
    runtimes::notes(&stages)
}
