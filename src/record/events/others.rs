//! The records other than CPU samples, each acted on in time order: context switches
//! (the accounting's stretches and, with `--off-cpu`, the intervals off the CPU),
//! mappings, names and execs, forks and exits, lost and throttled records.

use super::*;

impl EventHandler {
    /// Acts on a record that is not a CPU sample (or a sample of an off-CPU event).
    pub(super) fn handle_other(&mut self, rec: Record) {
        match rec {
            Record::Sample(s) => match self.off_cpu.as_ref().and_then(|o| o.kind(s.id)) {
                Some(kind) => self.switch_sample(&s, kind),
                None => {
                    let _ = self.sample(&s);
                }
            },
            Record::Switch {
                pid,
                tid,
                time,
                cpu,
                out,
                preempted,
            } => self.switch(pid, tid, time, cpu, (out, preempted)),
            Record::Mmap {
                pid,
                addr,
                len,
                pgoff,
                build_id,
                executable,
                filename,
                time,
                ..
            } => {
                if executable {
                    self.add_mapping(&Mapping {
                        pid,
                        start: addr,
                        end: addr.saturating_add(len),
                        file_offset: pgoff,
                        path: String::from_utf8_lossy(filename).into_owned(),
                        build_id: build_id.map(<[u8]>::to_vec),
                        time,
                    });
                }
            }
            Record::Comm {
                pid,
                tid,
                time,
                name,
                exec,
            } => self.comm(pid, tid, time, name, exec),
            Record::Fork {
                pid,
                ppid,
                tid,
                ptid,
                time,
            } => self.fork(pid, ppid, tid, ptid, time),
            Record::Exit { pid, tid, time } => self.exit(pid, tid, time),
            Record::Read {
                pid,
                tid,
                id,
                count,
                time,
            } => self.ledger.acct.exit_count(pid, tid, id, count, time),
            Record::Lost { time, count } => {
                self.ledger.acct.lost();
                self.counters.lost += count;
                self.writer.lost(time, count);
            }
            Record::Throttle { time } => {
                self.counters.throttled += 1;
                self.writer.throttle(time);
            }
            Record::Other { .. } => {}
        }
    }

    /// Thread `tid` of `pid` switched out of (`out`) or into CPU `cpu` at `time`.
    fn switch(&mut self, pid: u32, tid: u32, time: u64, cpu: u32, (out, preempted): (bool, bool)) {
        let kept = self.keep.thread(pid, tid);
        let (intervals, picked) = match &mut self.off_cpu {
            Some(o) if kept && out => {
                o.tracker.switch_out(pid, tid, cpu, time, preempted);
                (Vec::new(), None)
            }
            Some(o) if kept => o.tracker.switched_in(tid, cpu, time),
            _ => (Vec::new(), None),
        };
        // Its stretch on the CPU begins where its wait ended.
        self.ledger
            .acct
            .switch_from(pid, tid, time, cpu, out, picked.unwrap_or(time));
        for interval in intervals {
            self.writer.off_cpu(&interval);
        }
    }

    /// Thread `tid` of `pid` was named `name` at `time`, by an exec or a rename.
    fn comm(&mut self, pid: u32, tid: u32, time: u64, name: &[u8], exec: bool) {
        if exec {
            if let Some(done) = &mut self.lazy_snapshots {
                done.insert(pid);
            }
            self.ledger.acct.exec(tid, time);
            self.bind.spaces.exec(pid);
            self.forget_unbound(pid);
            if self.keep.process(pid) {
                self.read_workload(pid, time, None);
            }
            self.writer.thread_event(&ThreadEvent::Exec { time, pid });
        }
        let name = String::from_utf8_lossy(name).into_owned();
        self.name_thread(time, pid, tid, name);
    }

    /// Thread `tid` of `pid` was created by thread `ptid` of `ppid` at `time`.
    fn fork(&mut self, pid: u32, ppid: u32, tid: u32, ptid: u32, time: u64) {
        self.ledger.acct.fork(pid, tid, ptid, time);
        if let Some(l) = &mut self.lifecycle
            && self.keep.thread(pid, tid)
        {
            l.push((true, pid, tid));
        }
        if let Some(o) = &mut self.off_cpu
            && self.keep.thread(pid, tid)
        {
            o.tracker.new_thread(pid, tid, time);
        }
        if pid != ppid {
            self.bind.spaces.fork(ppid, pid);
            let mem = || sys::ProcessMemory::open(pid).map(|m| Box::new(m) as _);
            self.runtimes.ruby.forked(ppid, pid, mem);
            self.fork_unbound(ppid, pid);
            if self.keep.process(pid) {
                self.fork_workload(pid, time, ppid);
            }
            if let Some(done) = &mut self.lazy_snapshots
                && done.contains(&ppid)
            {
                done.insert(pid);
            }
        }
        self.writer.thread_event(&ThreadEvent::Start {
            time,
            pid,
            ppid,
            tid,
        });
        // The kernel gives the new task its creator's comm and reports a
        // rename (prctl, exec) by a COMM record, which comes after this one.
        // Only a new process is named here: a new thread without a name of
        // its own is its process's (the model's fallback), and naming it now
        // would split it in two when it names itself a moment later (its
        // first off-CPU interval would sit under the inherited name alone).
        if pid == tid
            && let Some(name) = self.written.names.get(&ptid).cloned()
        {
            self.name_thread(time, pid, tid, name);
        }
    }

    /// Thread `tid` of `pid` exited at `time`.
    fn exit(&mut self, pid: u32, tid: u32, time: u64) {
        self.ledger.acct.exit(pid, tid, time);
        if let Some(l) = &mut self.lifecycle {
            l.push((false, pid, tid));
        }
        self.written.names.remove(&tid);
        self.runtimes.python.thread_exited(tid);
        if pid == tid {
            self.written.workloads.remove(&pid);
        }
        self.retire_exited(pid, tid);
        self.retire_counts(pid, tid);
        if let Some(o) = &mut self.off_cpu {
            o.thread_exit(tid, time);
        }
        self.writer
            .thread_event(&ThreadEvent::Exit { time, pid, tid });
    }
}
