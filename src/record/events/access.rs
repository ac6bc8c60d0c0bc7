//! What the session and the live windows may ask of and tell the [`EventHandler`]:
//! its state is private, and each thing done to it from outside is a method that
//! says what it does (flush the recording, end the recording, give the accounting a
//! thread's exit, poll the JVMs' perf maps) or a read-only view of one part.

use std::collections::HashMap;

use super::{Counters, EventHandler, Writer};
use crate::format::FrameSymbols;
use crate::format::writer::LiveLog;
use crate::interp::jvm::JavaFrames;
use crate::record::accounting::Accounting;
use crate::record::jit::JitTracker;
use crate::record::offcpu::OffCpuRecorder;
use crate::replay::python::Ahead;
use crate::running::python::LivePython;
use crate::symbolize::perfmap::PerfMap;

/// What is left of the handler once the recording ends (see [`EventHandler::end`]).
pub(in crate::record) struct Ended {
    /// The recording, its summary and end still to write.
    pub writer: Writer,
    pub counters: Counters,
    /// The first error writing the recording, if any.
    pub write_error: Option<std::io::Error>,
    /// CPU time the written samples' stacks stand for.
    pub sampled_ns: u64,
}

impl EventHandler {
    /// Whether every process of the host is recorded (`-a`: processes are read as
    /// they are first sampled).
    pub(in crate::record) fn host_wide(&self) -> bool {
        self.lazy_snapshots.is_some()
    }

    /// The runtime readers read every process within `budgets`.
    pub(in crate::record) fn with_budgets(
        mut self,
        budgets: crate::interp::Budgets,
    ) -> EventHandler {
        self.python = std::mem::take(&mut self.python).with_budgets(budgets);
        self.java.set_budgets(budgets);
        self.v8.set_budgets(budgets);
        self.ruby.set_budgets(budgets);
        self
    }

    /// Asks JVMs for their perf maps when `on` (`--no-jvm-perfmap` turns it off).
    pub(in crate::record) fn with_jvm_perfmaps(mut self, on: bool) -> EventHandler {
        self.jit.enabled = on;
        self
    }

    /// The recording being written, to read.
    pub(in crate::record) fn writer(&self) -> &Writer {
        &self.writer
    }

    /// Takes the current live window's samples and events from the writer.
    pub(in crate::record) fn take_live(&mut self) -> Option<LiveLog> {
        self.writer.take_live()
    }

    /// What has been counted so far.
    pub(in crate::record) fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Counts `n` kernel records that could not be decoded.
    pub(in crate::record) fn count_dropped(&mut self, n: u64) {
        self.counters.dropped += n;
    }

    /// The per-thread CPU accounting.
    pub(in crate::record) fn accounting(&self) -> &Accounting {
        &self.acct
    }

    /// Puts the accounting of the opened events in place, once they are attached.
    pub(in crate::record) fn set_accounting(&mut self, acct: Accounting) {
        self.acct = acct;
    }

    /// Gives the accounting a thread's exit as the kernel reported it (and with
    /// `--off-cpu`, its run-queue delay); false when the thread is not known (yet).
    pub(in crate::record) fn thread_exited(
        &mut self,
        tid: u32,
        tgid: Option<u32>,
        cpu_ns: u64,
        run_delay_ns: u64,
    ) -> bool {
        let known = self.acct.thread_exit(tid, tgid, cpu_ns);
        if known && let Some(o) = self.off_cpu.as_mut() {
            o.delay_at_exit(tid, run_delay_ns);
        }
        known
    }

    /// The kernel reported that thread `tid` exited with `cpu_ns` of CPU, perhaps
    /// before its records are handled (`Accounting::exit_reported`).
    pub(in crate::record) fn exit_reported(&mut self, tid: u32, tgid: Option<u32>, cpu_ns: u64) {
        self.acct.exit_reported(tid, tgid, cpu_ns);
    }

    /// The recorder gave event `id` a new sampling `period` at `time`
    /// (`Accounting::period_set`).
    pub(in crate::record) fn period_set(&mut self, id: u64, time: u64, period: u64) {
        self.acct.period_set(id, time, period);
    }

    /// The exit reported for `tid` was taken, or forgotten.
    pub(in crate::record) fn forget_exit(&mut self, tid: u32) {
        self.acct.forget_exit(tid);
    }

    /// Sampling ended at `end_ns`: records past it count as at the end.
    pub(in crate::record) fn sampling_ended(&mut self, end_ns: u64) {
        self.acct.set_end(end_ns);
        if let Some(o) = self.off_cpu.as_mut() {
            let from = o.tracker.window.map_or(0, |w| w.0);
            o.tracker.window = Some((from, end_ns));
        }
    }

    /// Records switches with `rec` (`--off-cpu`), from the attach on.
    pub(in crate::record) fn record_off_cpu(&mut self, rec: OffCpuRecorder) {
        self.off_cpu = Some(rec);
    }

    /// The off-CPU recorder, with `--off-cpu`.
    pub(in crate::record) fn off_cpu(&self) -> Option<&OffCpuRecorder> {
        self.off_cpu.as_ref()
    }

    /// The off-CPU recorder, with `--off-cpu`, to refilter its wake-ups or sum it up.
    pub(in crate::record) fn off_cpu_mut(&mut self) -> Option<&mut OffCpuRecorder> {
        self.off_cpu.as_mut()
    }

    /// The JVMs' perf maps and the samples waiting for them.
    pub(in crate::record) fn jit(&self) -> &JitTracker {
        &self.jit
    }

    /// Takes the JVMs' perf maps that came, and drops the names exited JVMs' frames
    /// do not need when that is due.
    pub(in crate::record) fn poll_jit_maps(&mut self) {
        self.jit.poll(std::time::Duration::ZERO);
        if self.jit.prune_due() {
            // Exited JVMs keep only the names their frames need.
            self.jit.prune(self.writer.frames());
        }
    }

    /// Whether a sample cut in JIT code may be held for its JVM's perf map.
    pub(in crate::record) fn hold_for_jit_maps(&mut self, on: bool) {
        self.jit.holding = on;
    }

    /// Takes the JVMs' last perf maps, so that samples still held are unwound with
    /// them; returns every map, by process.
    pub(in crate::record) fn finish_jit(&mut self) -> HashMap<u32, PerfMap> {
        self.jit.finish()
    }

    /// Whether samples copy the user stack for unwinding (dwarf mode). Frame-pointer
    /// mode's samples copy a few words only, for the sampled function's caller: too
    /// few to read an interpreter's frames from.
    pub(in crate::record) fn copies_stacks(&self) -> bool {
        self.dwarf
    }

    /// The Python frames read from the processes.
    pub(in crate::record) fn python(&self) -> &LivePython {
        &self.python
    }

    /// A sample was just drained, while Python or Ruby processes are recorded: a
    /// capture ([`EventHandler::python_captured`]) or a sample whose Python chain or
    /// Ruby frames are read now.
    pub(in crate::record) fn python_drained(&mut self, s: &crate::replay::decode::Sample) {
        if self.capture_ids.contains(&s.id) {
            self.python_captured(s.time, s.raw);
        } else {
            if !s.stack.is_empty() {
                self.python_read_ahead(s.pid, s.tid, s.time);
            }
            let reg = |r| s.reg(r).filter(|&v| v != 0);
            let at = reg(crate::replay::decode::REG_R14)
                .zip(reg(crate::replay::decode::REG_R15))
                .map(|(pc, cfp)| crate::interp::ruby::Sampled {
                    pc,
                    cfp,
                    stack: s.stack,
                });
            self.ruby.read_ahead(s.pid, s.tid, s.time, at);
        }
    }

    /// A sample of `tid` at `time` was just drained: its Python chain is read now
    /// (`PythonFrames::read_ahead`), unless it was copied at the sample instant.
    pub(in crate::record) fn python_read_ahead(&mut self, pid: u32, tid: u32, time: u64) {
        let now = crate::sys::monotonic_ns();
        match self.python.read_ahead(pid, tid, time, now) {
            // Copied at the instant: on time.
            Some(Ahead::Captured) => self.python_pace.captured(),
            Some(Ahead::Read) => self.python_pace.drained(time, now),
            Some(Ahead::Later) => self.python_pace.read_when_handled(),
            None => {}
        }
    }

    /// A capture of a thread's Python chain at a sample instant was drained (the
    /// raw fields of a `bpf-output` record): it waits for its sample.
    pub(in crate::record) fn python_captured(&mut self, time: u64, raw: &[u8]) {
        if let Some(chain) = crate::sys::parse_capture(raw) {
            self.python
                .captured(time, crate::record::python::captured_chain(chain));
        }
    }

    /// Reads process `pid`'s Python state now if it runs CPython, its threads to be
    /// registered for the copy (`PythonFrames::prepare`).
    pub(in crate::record) fn python_prepare(&mut self, pid: u32) {
        self.python.capture_on();
        let mappings = self.writer.mappings();
        self.python.prepare(pid, mappings, &self.mapping_modules);
    }

    /// The Python stage, to tell it of captures and take its registrations.
    pub(in crate::record) fn python_mut(&mut self) -> &mut LivePython {
        &mut self.python
    }

    /// Samples of these events are captures, not CPU samples: handled at their drain.
    pub(in crate::record) fn set_capture_ids(&mut self, ids: Vec<u64>) {
        self.capture_ids = ids;
    }

    /// How long the loop may sleep, at most, for the Python processes' samples to be
    /// read soon after they were taken ([`Pace`](super::super::python::Pace)); no
    /// bound for a host agent (`-a`: see `POLL_MS`).
    pub(in crate::record) fn python_poll_ms(&self) -> Option<i32> {
        if !self.python.any() || self.host_wide() {
            return None;
        }
        self.python_pace.poll_ms()
    }

    /// Every sample up to `time` was handled: what was read ahead for them goes.
    pub(in crate::record) fn python_handled_upto(&mut self, time: u64) {
        self.python.handled_upto(time);
        self.ruby.handled_upto(time);
    }

    /// The methods HotSpot's interpreter runs.
    pub(in crate::record) fn java(&self) -> &JavaFrames {
        &self.java
    }

    /// The Ruby methods of the CRuby processes.
    pub(in crate::record) fn ruby(&self) -> &crate::interp::ruby::RubyFrames {
        &self.ruby
    }

    /// Whether drained samples are read ahead: Python's or Ruby's frames move on as
    /// the thread runs.
    pub(in crate::record) fn reads_ahead(&self) -> bool {
        self.python.any() && self.dwarf || self.ruby.any()
    }

    /// The JavaScript functions of the Node processes.
    pub(in crate::record) fn v8(&self) -> &crate::interp::v8::V8Frames {
        &self.v8
    }

    /// The methods HotSpot's interpreter runs, to read them from the JVMs while they
    /// live.
    pub(in crate::record) fn java_mut(&mut self) -> &mut JavaFrames {
        &mut self.java
    }

    /// Whether writing the recording failed (recording stops on it).
    pub(in crate::record) fn write_failed(&self) -> bool {
        self.write_error.is_some()
    }

    /// Writes out the chunk being filled; false when that failed (the error is kept
    /// for the end).
    pub(in crate::record) fn flush_chunk(&mut self) -> bool {
        match self.writer.flush_chunk() {
            Ok(()) => true,
            Err(e) => {
                self.write_error = Some(e);
                false
            }
        }
    }

    /// Writes the frames' names, unless writing already failed.
    pub(in crate::record) fn write_symbols(&mut self, symbols: &[FrameSymbols]) {
        if self.write_error.is_none()
            && let Err(e) = self.writer.symbols(symbols)
        {
            self.write_error = Some(e);
        }
    }

    /// Ends the handler: what the summary and the file's end need.
    pub(in crate::record) fn end(self) -> Ended {
        Ended {
            writer: self.writer,
            counters: self.counters,
            write_error: self.write_error,
            sampled_ns: self.sampled_ns,
        }
    }
}
