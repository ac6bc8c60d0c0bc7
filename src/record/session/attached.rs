//! The second phase: the target's events opened (on every thread of the processes
//! asked for, on the launched command before its exec, or on every CPU with `-a`),
//! the output put in its place and where each thread's states begin set: recording
//! has begun.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use super::super::sys::{self, PidFd};
use super::super::{RecordError, RecordOptions, Target};
use super::setup::{Setup, only_tids, output_error};
use super::{Session, register_captures};
use crate::process;
use crate::symbolize::kernel::KernelSymbols;

/// A recording whose events are open on the target: sampling has begun.
pub(super) struct Attached<'a> {
    pub opts: &'a RecordOptions,
    pub session: Session<'a>,
    pub stop: Arc<AtomicBool>,
    pub pidfds: Vec<PidFd>,
    /// The launched command, released to run its program.
    pub child: Option<u32>,
    /// When sampling began: `-d` counts from here.
    pub begun: Instant,
    pub kallsyms: Option<KernelSymbols>,
    /// Why the kernel side of the recording is partial, when attaching found out.
    pub kernel_note: Option<String>,
    pub existing_descendants: Vec<(u32, String)>,
}

impl<'a> Setup<'a> {
    /// Opens the events on the target, releases a launched command into its program
    /// and puts the output in its place: recording begins.
    pub(super) fn attach(mut self) -> Result<Attached<'a>, RecordError> {
        let opts = self.opts;
        let kernel_note = match &opts.target {
            Target::Pids(_) | Target::Threads(_) => self.attach_processes()?,
            Target::Command(argv) => self.attach_command(argv)?,
            Target::AllCpus => {
                // Every process's mappings and names before sampling starts: loading
                // their modules in the loop would leave the rings to overflow.
                // Processes started from here on are read at their first sample.
                for pid in process::all_pids() {
                    self.session.handler.snapshot_process(pid);
                }
                self.session.events.attach_all_cpus(&self.session.rings)?;
                None
            }
        };
        // A JVM was asked for its perf map as its mappings were read: the first
        // samples cut in its code wait for that map (JitTracker::hold) while the rings
        // are drained. Recording has begun: the file takes its place (see `output`).
        if let Some(pending) = self.pending.as_mut() {
            pending.commit().map_err(|e| output_error(opts, e))?;
        }
        self.guard.0 = None;
        let begin = sys::monotonic_ns();
        // `-d` counts from here, where sampling has begun: attaching to many threads,
        // or a launch on a loaded machine, may take a second that is not the
        // recording's.
        let begun = Instant::now();
        let mut s = self.session;
        if let Some(live) = s.live.as_mut() {
            live.begin(begin);
        }
        let mut kallsyms = self.kallsyms;
        let off_cpu_kallsyms = if opts.off_cpu { kallsyms.take() } else { None };
        let pids = s.pids.clone();
        s.begin_states(
            opts,
            begin,
            &pids,
            only_tids(opts),
            off_cpu_kallsyms,
            self.no_wakeups,
        );
        Ok(Attached {
            opts,
            session: s,
            stop: self.stop,
            pidfds: self.pidfds,
            child: self.launched.as_ref().map(|l| l.pid),
            begun,
            kallsyms,
            kernel_note,
            existing_descendants: self.existing_descendants,
        })
    }

    /// Opens the events on every thread of the processes asked for (`-p`) or on the
    /// threads asked for (`-t`); returns why the kernel side is partial, if it is.
    fn attach_processes(&mut self) -> Result<Option<String>, RecordError> {
        let only_tids = only_tids(self.opts);
        let s = &mut self.session;
        let mut note = None;
        for (i, pid) in s.pids.clone().into_iter().enumerate() {
            match s.events.attach(pid, only_tids, &s.rings) {
                Ok(n) => note = note.or(n),
                // A descendant that ended while attaching: nothing to record.
                Err(RecordError::NoSuchProcess(_) | RecordError::ExitedDuringAttach(_))
                    if i >= self.asked =>
                {
                    continue;
                }
                Err(e) => return Err(e),
            }
            s.keep_up();
            s.handler.snapshot_process(pid);
            // A CPython process's threads: their chains copied from the start.
            if s.events.capture().is_some() {
                s.handler.python_prepare(pid);
                register_captures(&s.events, &mut s.handler);
            }
            s.keep_up();
        }
        Ok(note)
    }

    /// Opens the events on the launched command and releases it into its program.
    fn attach_command(&mut self, argv: &[String]) -> Result<Option<String>, RecordError> {
        let s = &mut self.session;
        let pid = s.pids.first().copied().unwrap_or(0);
        // Not yet its command: what /proc says is the recorder's fork.
        let cpython = argv
            .first()
            .is_some_and(|p| super::super::python::command_runs_cpython(p));
        s.events.runs_cpython(pid, cpython);
        let ruby = argv
            .first()
            .is_some_and(|p| super::super::python::command_runs_ruby(p));
        s.events.runs_ruby(pid, ruby);
        let note = s.events.open_thread(pid, pid, &s.rings)?;
        if let Some(l) = self.launched.as_mut() {
            l.release(&argv.join(" "))?;
        }
        Ok(note)
    }
}
