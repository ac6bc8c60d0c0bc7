//! One dump's reading of a process's threads: each read off the CPU from /proc, or
//! caught on a CPU by a one-shot sample; a running thread not caught is sampled
//! again or read off the CPU once it blocks, and one whose Python frames changed
//! under the reading is sampled again.

use std::time::Duration;

use super::errors::read_error;
use super::merged::{changed, thread_frames};
use super::thread::{read_blocked, truncation_note};
use super::{Capture, DumpError, DumpOptions, Image, PythonFrames, Stack, StackRead, ThreadDump};
use super::{ThreadState, java, sample};
use crate::format::Frame;
use crate::interp::jvm::JavaFrames;
use crate::replay::stack::StackBuilder;

/// A thread as read: its dump, its frames, and the address shown for each.
pub(super) type ThreadStack = (ThreadDump, Vec<Frame>, Vec<u64>);

/// What reading the process's threads needs.
pub(super) struct Reader<'o> {
    pid: u32,
    opts: &'o DumpOptions,
    pub(super) image: Image,
    mem: std::fs::File,
    /// A JVM's Java frames, read from its memory as the recorder reads them.
    pub(super) java: JavaFrames,
    /// The recorder's stack builder, CFI whatever the mode: /proc gives no rbp.
    unwinder: StackBuilder,
    /// Each thread's Python frames in place of CPython's eval-loop frames, read as
    /// soon as its native stack is (the shared stage of crate::replay::python).
    pub(super) python: PythonFrames,
}

impl<'o> Reader<'o> {
    pub(super) fn new(pid: u32, opts: &'o DumpOptions, image: Image, mem: std::fs::File) -> Self {
        let java = java::attach(pid, &image);
        Reader {
            pid,
            opts,
            image,
            mem,
            java,
            unwinder: StackBuilder::new(true, 0),
            python: PythonFrames::default(),
        }
    }

    /// Reads thread `tid` off the CPU (None: gone).
    fn blocked(&mut self, tid: u32) -> Result<Option<(ThreadDump, Stack, StackRead)>, DumpError> {
        let read = (&self.image, &mut self.java);
        read_blocked(
            self.pid,
            tid,
            read,
            &self.mem,
            self.opts,
            &mut self.unwinder,
        )
    }

    /// A thread's frames from its unwound stack and the copy it came from.
    fn frames(
        &mut self,
        t: &ThreadDump,
        stack: &Stack,
        read: &StackRead,
    ) -> (Vec<Frame>, Vec<u64>) {
        thread_frames(self.pid, t, stack, read, &self.image, &mut self.python)
    }

    /// Every thread of `tids` read from /proc, and the indices of those found
    /// runnable, to sample.
    pub(super) fn read_all(
        &mut self,
        tids: Vec<u32>,
    ) -> Result<(Vec<ThreadStack>, Vec<usize>), DumpError> {
        let mut stacks: Vec<ThreadStack> = Vec::new();
        let mut running = Vec::new();
        for tid in tids {
            let Some((t, stack, read)) = self.blocked(tid)? else {
                continue;
            };
            if t.capture == Capture::None && t.letter == 'R' {
                running.push(stacks.len());
            }
            let (frames, shown) = self.frames(&t, &stack, &read);
            stacks.push((t, frames, shown));
        }
        Ok((stacks, running))
    }

    /// Samples the `running` threads of `stacks`. A thread still waiting for a CPU
    /// after the first wait gets a second, four times as long: on a loaded machine
    /// (load 8 on 2 CPUs) a spinning thread once did not run within 200 ms, and its
    /// stack came out empty.
    pub(super) fn sample_running(
        &mut self,
        stacks: &mut [ThreadStack],
        mut running: Vec<usize>,
    ) -> Result<(), DumpError> {
        let timeout = self.opts.sample_timeout;
        let mut waits = [timeout, timeout * 4].into_iter().peekable();
        while !running.is_empty()
            && let Some(timeout) = waits.next()
        {
            let last = waits.peek().is_none();
            let tids: Vec<u32> = running.iter().map(|&i| stacks[i].0.tid).collect();
            let sampled = sample::sample_once(&tids, 63 * 1024, timeout)
                .map_err(|e| read_error(self.pid, e))?;
            let mut waiting = Vec::new();
            for i in std::mem::take(&mut running) {
                let (t, frames, shown) = &mut stacks[i];
                if let Some(s) = sampled.get(&t.tid) {
                    (*frames, *shown) = self.sampled(t, s);
                } else if let Some(again) = self.read_again(t.tid)? {
                    (*t, *frames, *shown) = again;
                } else if !last {
                    waiting.push(i);
                } else {
                    // Runnable as /proc said, but not seen running: not `running`.
                    t.state = ThreadState::Runnable;
                    t.note = Some(format!(
                        "not sampled: it did not run within {} ms (waiting for a CPU?)",
                        (self.opts.sample_timeout * 5).as_millis()
                    ));
                }
            }
            running = waiting;
        }
        Ok(())
    }

    /// A running thread the sample missed: it blocked meanwhile (a thread that runs a
    /// few microseconds at a time may not reach the 10 us sample for a long while),
    /// or never got a CPU. Read off the CPU now, a few times a few ms apart.
    fn read_again(&mut self, tid: u32) -> Result<Option<ThreadStack>, DumpError> {
        for _ in 0..5 {
            match self.blocked(tid)? {
                Some((again, a, read)) if again.capture == Capture::Proc => {
                    let (frames, shown) = self.frames(&again, &a, &read);
                    return Ok(Some((again, frames, shown)));
                }
                Some(_) => std::thread::sleep(Duration::from_millis(3)),
                None => break,
            }
        }
        Ok(None)
    }

    /// A running thread's Python frames are read from its memory after its sample:
    /// when the thread moved on meanwhile, they could not be validated and show as
    /// changed. Sampled again, up to three times, it keeps the reading with fewer.
    pub(super) fn resample_changed(&mut self, stacks: &mut [ThreadStack]) -> Result<(), DumpError> {
        for _ in 0..3 {
            let marked: Vec<usize> = (0..stacks.len())
                .filter(|&i| {
                    stacks[i].0.capture == Capture::Sample
                        && changed(&stacks[i].1, &self.python) > 0
                })
                .collect();
            if marked.is_empty() {
                break;
            }
            let tids: Vec<u32> = marked.iter().map(|&i| stacks[i].0.tid).collect();
            let sampled = sample::sample_once(&tids, 63 * 1024, self.opts.sample_timeout)
                .map_err(|e| read_error(self.pid, e))?;
            for i in marked {
                let (t, frames, shown) = &mut stacks[i];
                let Some(s) = sampled.get(&t.tid) else {
                    continue;
                };
                let mut again = t.clone();
                let (f, j) = self.sampled(&mut again, s);
                if changed(&f, &self.python) < changed(frames, &self.python) {
                    (*t, *frames, *shown) = (again, f, j);
                }
            }
        }
        Ok(())
    }

    /// A running thread's frames from its sample `s` (the thread marked running, its
    /// note the unwind's end).
    fn sampled(&mut self, t: &mut ThreadDump, s: &sample::Sampled) -> (Vec<Frame>, Vec<u64>) {
        let [ip, sp, bp] = s.regs;
        let copy = (sp, &s.stack[..], s.r13);
        let regs = (ip, Some(bp), copy);
        let (end, stack) = java::unwind(
            &mut self.java,
            self.pid,
            regs,
            &self.image,
            &mut self.unwinder,
        );
        t.note = truncation_note(end);
        t.capture = Capture::Sample;
        t.state = ThreadState::Running;
        let read = StackRead {
            sp,
            bytes: s.stack.clone(),
            regs: s.callee,
            blocked: None,
        };
        self.frames(t, &stack, &read)
    }
}
