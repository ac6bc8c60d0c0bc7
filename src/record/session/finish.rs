//! The last step of a recording: stop sampling, handle what the rings still hold,
//! read the threads' own clocks and run-queue delays at the end, name every unique
//! frame while the target's files are reachable, and write the summary.

use std::collections::HashMap;

use super::super::accounting::{self, EndCounts};
use super::super::events::{Ended, EventHandler};
use super::super::launch;
use super::super::offcpu::OffCpuRecorder;
use super::super::summary::{OffCpuSummary, RecordSummary};
use super::super::{RecordError, RecordOptions};
use super::setup::output_name;
use super::{Session, Stopped};
use crate::format::{FrameSymbols, SampleWeights, Summary};
use crate::replay::runtimes::{self, RuntimeFrames};
use crate::symbolize::frames as naming;
use crate::symbolize::kernel::KernelSymbols;
use crate::symbolize::perfmap::PerfMap;

impl Session<'_> {
    /// Stops sampling, handles what the rings still hold, names every frame and
    /// writes the summary.
    pub(super) fn finish(
        mut self,
        opts: &RecordOptions,
        stopped: Stopped,
        child: Option<u32>,
        mut kallsyms: Option<KernelSymbols>,
        kernel_note: Option<String>,
    ) -> Result<RecordSummary, RecordError> {
        let (alive, delays_now) = self.clocks_now();
        self.events.disable();
        // Records of the last moments, past the end, count as at the end.
        self.handler.sampling_ended(stopped.end_time_ns);
        let refiltered = self.wakeups.as_ref().map_or(0, |w| w.refiltered);
        // Closed: no more wake-ups; their ids stay known for the records in the rings.
        if let Some(w) = self.wakeups.as_mut() {
            w.close();
        }
        // The last maps first, so that samples still held are unwound with them.
        let jit_maps = self.handler.finish_jit();
        self.process(u64::MAX, false);
        self.take_exits(true);
        let thread_clocks = self.exits.take().is_some();
        self.handler.finish_off_cpu(stopped.end_time_ns);
        let unclassified = !self.events.cfg.kernel;
        let off_cpu = self.handler.off_cpu_mut().map(|o| {
            kallsyms = kallsyms.take().or_else(|| o.kallsyms.take());
            off_cpu_summary(
                o,
                unclassified,
                refiltered,
                stopped.end_time_ns,
                &delays_now,
            )
        });
        let opened = self.events.counts_by_thread();
        let cpu_time_ns = opened.values().sum();
        let end_counts = EndCounts { opened, alive };
        let (unsampled_samples, unsampled_ns) = self.handler.write_unsampled(
            &end_counts,
            stopped.end_time_ns,
            self.events.cfg.period_ns,
        );
        let clocks = self.handler.thread_clocks(&end_counts, stopped.end_time_ns);
        // Threads whose samples weigh more than their clocks: readers scale them down.
        let scaled_ns: u64 = if opts.off_cpu {
            0
        } else {
            clocks
                .iter()
                .map(|c| c.ran_ns.saturating_sub(c.clock_ns))
                .sum()
        };
        let exact = self.handler.accounting().is_exact();
        let sample_weights = exact.then_some(if opts.off_cpu {
            SampleWeights::Switches
        } else if self.events.cfg.exact {
            SampleWeights::Counts
        } else {
            SampleWeights::Periods
        });
        let acct_note = self.events.acct_note.take();
        if let Some(why) = self.events.capture_refused.take() {
            self.handler.python_mut().capture_refused(why);
        }
        let event_fds = self.events.fd_count() + self.rings.len();
        let ring_bytes = self.rings.iter().map(|r| r.ring.bytes()).sum();
        let rings = self.rings.len();
        let period_ns = self.events.cfg.period_ns;
        let filter_full = self.events.filter_full;
        drop(self.events); // closes every event: the target is left as it was

        let mut exit_code = stopped.exit_code;
        if let Some(pid) = child
            && exit_code.is_none()
        {
            exit_code = launch::finish_child(pid);
        }
        let h = &mut self.handler;
        let c = h.counters();
        let mut summary = Summary {
            end_time_ns: stopped.end_time_ns,
            // Every SAMPLE in the file, the [unsampled] ones included.
            samples: c.samples + unsampled_samples,
            lost: c.lost,
            throttled: c.throttled,
            dropped: c.dropped,
            cpu_time_ns,
            exit_code,
            stop_reason: stopped.reason,
            attached_ns: h.off_cpu().map_or(0, |o| o.attached_ns),
            cpu_accounting: crate::format::CpuAccounting::of(exact),
            thread_clocks: clocks,
            sample_weights,
            notes: Vec::new(),
        };
        // Name every unique frame once, while the target's files are reachable.
        if let Some(live) = self.live.as_mut() {
            // The last window first; a file gets every name below.
            live.cut(h, stopped.end_time_ns.max(live.start_ns()), true);
            live.finish(h, false);
        }
        let (symbols, symbol_stats) = if self.live.is_some() && opts.output.is_none() {
            // Live without a file: the windows had their names; what held the runtime
            // readers (budgets, processes not read) is still said once.
            let stats = naming::SymbolStats {
                runtime_notes: runtime_notes(h),
                ..Default::default()
            };
            (Vec::new(), stats)
        } else {
            name_every_frame(h, &jit_maps, &opts.debug_dirs, kallsyms)
        };
        // Said again by every report of the file (table, SVG, JSON).
        summary.notes = (symbol_stats.perf_map_notes.iter())
            .chain(&symbol_stats.runtime_notes)
            .cloned()
            .collect();
        h.write_symbols(&symbols);
        let output_err = |source| RecordError::Output {
            path: output_name(opts),
            source,
        };
        let Ended {
            writer,
            counters: c,
            write_error,
            sampled_ns,
        } = self.handler.end();
        if let Some(e) = write_error {
            return Err(output_err(e));
        }
        let out = writer.finish(&summary).map_err(output_err)?;
        let bytes = out.get_ref().metadata().map(|m| m.len()).unwrap_or(0);
        Ok(RecordSummary {
            output: opts.output.clone(),
            samples: c.samples,
            lost: c.lost,
            throttled: c.throttled,
            dropped: c.dropped,
            threads: c.per_thread.len() + c.retired_threads,
            processes: c.pids.len() + c.retired_processes,
            duration: stopped.duration,
            bytes,
            stop_reason: stopped.reason,
            exit_code,
            event_fds,
            ring_bytes,
            rings,
            cpu_time_ns,
            period_ns,
            exact,
            sample_weights,
            scaled_ns,
            thread_clocks,
            sampled_ns: sampled_ns.saturating_sub(scaled_ns),
            unsampled_ns,
            truncated_stacks: c.truncated,
            other_process_samples: c.other_process_samples,
            other_thread_samples: c.other_thread_samples,
            foreign_counts: c.foreign_counts,
            short_threads: (c.short_threads, c.short_ns),
            undersampled_threads: (c.undersampled_threads, c.undersampled_ns),
            unclocked_threads: c.unclocked_threads,
            existing_descendants: Vec::new(),
            filter_full,
            kernel_note: kernel_note
                .or(symbol_stats.kernel_note.clone())
                .or(acct_note),
            target_note: None,
            symbols: symbol_stats,
            off_cpu,
        })
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
        let delays = self.handler.off_cpu().map_or_else(HashMap::new, |o| {
            o.delay_at_start
                .iter()
                .map(|(&tid, &(pid, _))| (tid, pid))
                .chain(o.tracker.born.keys().map(|&t| (t, t)))
                .filter_map(|(tid, pid)| Some((tid, accounting::thread_run_delay_ns(pid, tid)?)))
                .collect()
        });
        (alive, delays)
    }
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
        intervals: o.tracker.intervals,
        stacked: o.tracker.stacked,
        borrowed: o.tracker.borrowed,
        unmatched: o.tracker.unmatched,
        unnamed: o.tracker.unnamed,
        named_by_site: o.tracker.named_by_site,
        site_unnamed: o.tracker.site_unnamed,
        unclassified,
        woken: o.tracker.woken,
        off_cpu_ns: o.tracker.off_cpu_ns,
        stacked_ns: o.tracker.stacked_ns,
        read_from_proc: o.tracker.read_from_proc,
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
            uids: &h.counters().uids,
            jit_maps,
            defer_dwarf: None,
        }),
        kernel: Ok(()),
    };
    let (mut symbols, mut stats) =
        naming::symbolize(h.writer().frames(), &bound, debug_dirs, kallsyms);
    stats.perf_map_notes.extend(h.jit().notes());
    let stages: [&dyn RuntimeFrames; 4] = [h.python(), h.java(), h.v8(), h.ruby()];
    symbols.extend(runtimes::names_from(&stages, h.writer().frames(), 0));
    symbols.sort_by_key(|s| s.frame);
    stats.runtime_notes = runtime_notes(h);
    (symbols, stats)
}

/// What the summary says of the runtime readers' processes.
fn runtime_notes(h: &EventHandler) -> Vec<String> {
    let stages: [&dyn RuntimeFrames; 4] = [h.python(), h.java(), h.v8(), h.ruby()];
    runtimes::notes(&stages)
}
