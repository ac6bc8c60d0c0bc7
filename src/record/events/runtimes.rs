//! The runtime readers the handler owns: each interpreted runtime's frames read from
//! its processes (CPython's, HotSpot's interpreter's, V8's), and how soon the loop
//! wakes for the Python processes' samples. The session and the live windows reach
//! them as [`EventHandler::runtimes`](super::EventHandler).

use crate::interp::jvm::JavaFrames;
use crate::interp::ruby::RubyFrames;
use crate::interp::v8::V8Frames;
use crate::record::python::Pace;
use crate::replay::decode::Sample;
use crate::replay::python::Ahead;
use crate::replay::runtimes::RuntimeFrames;
use crate::running::python::LivePython;

/// The runtime readers of the recording.
pub(in crate::record) struct Runtimes {
    /// Python frames put in place of CPython's eval-loop frames.
    pub python: LivePython,
    /// How often the loop wakes for the Python processes' samples.
    pace: Pace,
    /// The ids of the capture events (`sys::StackCapture`): their samples are no CPU
    /// samples.
    capture_ids: Vec<u64>,
    /// The methods HotSpot's interpreter runs, read from its frames (issue 30).
    pub java: JavaFrames,
    /// The JavaScript functions of Node processes, read from V8's frames (issue 47).
    pub v8: V8Frames,
    /// The Ruby methods of CRuby processes, read from the VM's control frames (issue 49).
    pub ruby: RubyFrames,
}

impl Runtimes {
    pub(super) fn new() -> Runtimes {
        Runtimes {
            python: Default::default(),
            pace: Default::default(),
            capture_ids: Vec::new(),
            java: JavaFrames::new(crate::sys::monotonic_ns),
            v8: Default::default(),
            ruby: Default::default(),
        }
    }

    /// Every reader, as the runtime seam sees them (names and notes).
    pub(in crate::record) fn stages(&self) -> [&dyn RuntimeFrames; 4] {
        [&self.python, &self.java, &self.v8, &self.ruby]
    }

    /// Whether drained samples are read ahead: Python's (when stacks are copied) or
    /// Ruby's frames move on as the thread runs.
    pub(in crate::record) fn reads_ahead(&self, copies_stacks: bool) -> bool {
        self.python.any() && copies_stacks || self.ruby.any()
    }

    /// Every sample up to `time` was handled: what was read ahead for them goes.
    pub(in crate::record) fn handled_upto(&mut self, time: u64) {
        self.python.handled_upto(time);
        self.ruby.handled_upto(time);
        self.v8.handled();
    }

    /// Whether samples of event `id` are captures of a thread's Python chain, not
    /// CPU samples.
    pub(super) fn is_capture(&self, id: u64) -> bool {
        self.capture_ids.contains(&id)
    }

    /// Samples of these events are captures, not CPU samples: handled at their drain.
    pub(in crate::record) fn set_capture_ids(&mut self, ids: Vec<u64>) {
        self.capture_ids = ids;
    }

    /// A sample was just drained, while Python or Ruby processes are recorded: a
    /// capture ([`Runtimes::captured`]) or a sample whose Python chain or Ruby frames
    /// are read now.
    pub(in crate::record) fn drained(&mut self, s: &Sample) {
        if self.capture_ids.contains(&s.id) {
            self.captured(s.time, s.raw);
            return;
        }
        if !s.stack.is_empty() {
            self.read_ahead(s.pid, s.tid, s.time);
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

    /// A sample of `tid` at `time` was just drained: its Python chain is read now
    /// (`PythonFrames::read_ahead`), unless it was copied at the sample instant.
    fn read_ahead(&mut self, pid: u32, tid: u32, time: u64) {
        let now = crate::sys::monotonic_ns();
        match self.python.read_ahead(pid, tid, time, now) {
            // Copied at the instant: on time.
            Some(Ahead::Captured) => self.pace.captured(),
            Some(Ahead::Read) => self.pace.drained(time, now),
            Some(Ahead::Later) => self.pace.read_when_handled(),
            None => {}
        }
    }

    /// A capture of a thread's Python chain at a sample instant was drained (the
    /// raw fields of a `bpf-output` record): it waits for its sample.
    fn captured(&mut self, time: u64, raw: &[u8]) {
        if let Some(chain) = crate::sys::parse_capture(raw) {
            self.python
                .captured(time, crate::record::python::captured_chain(chain));
        }
    }

    /// How long the loop may sleep, at most, for the Python processes' samples to be
    /// read soon after they were taken ([`Pace`]); no bound for a host agent
    /// (`host_wide`, `-a`: see `POLL_MS`).
    pub(in crate::record) fn poll_ms(&self, host_wide: bool) -> Option<i32> {
        if !self.python.any() || host_wide {
            return None;
        }
        self.pace.poll_ms()
    }
}
