//! Keeping a long `record -a` bounded: what the handler holds per process (address
//! space, `/proc` alias, snapshot mark, workload) is dropped when the process
//! exits; after each window of a host agent without a file, what the window needed
//! is forgotten ([`EventHandler::new_generation`]), and so is what the end summary
//! and the naming of the window kept of the threads and processes that exited in
//! it (their sample counts become counts of threads and processes retired; their
//! accounts, uids and Python readers go). `PROFILE_DEBUG_TABLES=SECONDS`
//! prints the size of every table that grows with the processes seen, every that
//! many seconds, so a soak (and a test) shows where memory goes.

use super::*;
use crate::format::MappingId;

impl EventHandler {
    /// At a thread's EXIT record: under `-a` (lazy snapshots), a process whose main
    /// thread exits is forgotten: its address space, `/proc` alias and snapshot mark.
    /// Every record before the exit has been handled (they come in time order), so
    /// nothing of the process still needs them; its samples' frames keep their
    /// mapping ids. Should a thread of it outlive the main thread and be sampled,
    /// the process is snapshotted again from `/proc` at that sample, as a process
    /// first seen then.
    pub(super) fn retire_exited(&mut self, pid: u32, tid: u32) {
        if pid != tid || pid == 0 {
            return;
        }
        let Some(done) = &mut self.lazy_snapshots else {
            return;
        };
        done.remove(&pid);
        self.bind.spaces.remove(pid);
        self.forget_unbound(pid);
        self.bind.proc_alias.remove(&pid);
    }

    /// A host agent without a file (`-a`, windows, no `-o`) forgets what it held of
    /// each thread and process that exited once the window holding its last
    /// samples is cut (see [`EventHandler::forget_exited`]).
    pub(in crate::record) fn forget_exited_at_cuts(&mut self) {
        self.retire.forget_exited = true;
    }

    /// At a thread's EXIT record, with `forget_exited` under `-a`: its sample count
    /// becomes one thread retired (every sample of it came before its exit); its
    /// process, when it is the main thread, is forgotten at the next cut.
    pub(super) fn retire_counts(&mut self, pid: u32, tid: u32) {
        if !self.retire.forget_exited || self.lazy_snapshots.is_none() {
            return;
        }
        if self.counters.per_thread.remove(&tid).is_some() {
            self.counters.retired_threads += 1;
        }
        if pid == tid && pid != 0 {
            self.retire.exited_pids.push(pid);
        }
    }

    /// Right after a window's cut, with `forget_exited`: the processes that exited
    /// before it leave the sampled processes (counted as retired), with their uids
    /// (the window's job has its copy) and Python readers, unless a new process
    /// took the pid since; the threads that exited leave the accounting. The
    /// threads and processes whose `/proc` entry is gone go too, their EXIT seen or
    /// not: the kernel may have lost it, or (most likely, not confirmed) a sample of
    /// the thread was handled after it (a full-suite CI run kept 79 such threads of
    /// a storm of 200 short processes). One `stat` per sampled thread and process a
    /// window.
    fn forget_exited(&mut self) {
        if !self.retire.forget_exited || self.lazy_snapshots.is_none() {
            return;
        }
        let mut gone = std::mem::take(&mut self.retire.exited_pids);
        // Whose EXIT was handled need no look in /proc (a failed lookup there costs
        // the kernel a new dentry, and a fork-heavy host has thousands a window).
        let exited: HashSet<u32> = gone.iter().copied().collect();
        let absent = |id: &u32| !std::path::Path::new(&format!("/proc/{id}")).exists();
        let threads = self.counters.per_thread.keys().copied();
        let mut vanished: Vec<u32> = threads
            .chain(self.ledger.acct.tids())
            .filter(|t| *t != 0 && absent(t))
            .collect();
        vanished.sort_unstable();
        vanished.dedup();
        for tid in &vanished {
            if self.counters.per_thread.remove(tid).is_some() {
                self.counters.retired_threads += 1;
            }
        }
        gone.extend(
            self.counters
                .pids
                .iter()
                .copied()
                .filter(|p| *p != 0 && !exited.contains(p) && absent(p)),
        );
        for pid in gone {
            // A process forked under the same pid since has an address space.
            if self.bind.spaces.space(pid).is_some() {
                continue;
            }
            if self.counters.pids.remove(&pid) {
                self.counters.retired_processes += 1;
            }
            if self.counters.uids.remove(&pid).is_some() {
                self.counters.uids_changed += 1;
            }
            self.runtimes.python.forget(pid);
        }
        self.ledger.acct.forget_gone(&vanished);
    }

    /// Under `-a`: retires the processes that are gone although their exit was not
    /// seen (the kernel drops records when the recorder falls behind: a LOST record
    /// may have held an EXIT).
    fn retire_vanished(&mut self) {
        if self.lazy_snapshots.is_none() {
            return;
        }
        let gone: Vec<u32> = self
            .bind
            .spaces
            .pids()
            .filter(|&pid| pid != 0 && !std::path::Path::new(&format!("/proc/{pid}")).exists())
            .collect();
        for pid in gone {
            self.retire_exited(pid, pid);
        }
    }

    /// Forgets what the windows sent so far needed (a host agent without a file:
    /// see [`RecordingWriter::new_generation`]): frames and stack nodes, and the
    /// mappings of processes that exited, with their modules unless a live process
    /// maps them. The mappings of live processes are recorded again (at `time`)
    /// under new ids. Call it right after a window's cut, and only when no stack id
    /// outlives a window (not with `--off-cpu`, whose open intervals hold some).
    /// Modules unused for `keep` generations and held by nobody are dropped.
    pub(crate) fn new_generation(&mut self, time: u64, keep: u64) {
        self.retire_vanished();
        self.forget_exited();
        let (old_base, old_mappings) = self.writer.new_generation();
        let old_modules = std::mem::take(&mut self.bind.mapping_modules);
        let mut renumbered: HashMap<MappingId, Option<MappingId>> = HashMap::new();
        let writer = &mut self.writer;
        let modules = &mut self.bind.mapping_modules;
        self.bind.spaces.for_each_mapped_mut(|mapped| {
            let new = *renumbered.entry(mapped.id).or_insert_with(|| {
                let i = mapped.id.checked_sub(old_base)? as usize;
                let m = old_mappings.get(i)?;
                let id = writer.mapping(&Mapping { time, ..m.clone() });
                modules.push(old_modules.get(i).cloned().flatten());
                Some(id)
            });
            // An id from before the previous generation cannot be: keep it.
            if let Some(new) = new {
                mapped.id = new;
            }
        });
        debug_assert_eq!(
            self.bind.mapping_modules.len(),
            self.writer.mappings().len(),
            "one module slot per mapping"
        );
        drop(old_modules);
        // Modules unused for `keep` generations (windows) and held by nobody go.
        if self.bind.modules.prune(keep) > 0 {
            sys::release_free_memory();
        }
    }

    /// The number of entries in each table that grows with the processes, threads
    /// and frames seen (for `PROFILE_DEBUG_TABLES`).
    pub(crate) fn table_sizes(&self) -> String {
        let w = self.writer.table_sizes();
        let (tables, evicted, refused) = self.tables_usage();
        format!(
            "rss {} KiB spaces {} mappings {} mapping_modules {} modules {} ({} MiB, tables {} KiB, \
             evicted {} refused {}) frames {} nodes {} \
             live_nodes {} names {} workloads {} alias {} snapshots {} pids {} uids {} \
             per_thread {} acct_threads {} jit {} retired_threads {} retired_processes {} \
             runtime_kib {}",
            rss_kib(),
            self.bind.spaces.len(),
            w.mappings,
            self.bind.mapping_modules.len(),
            self.bind.modules.len(),
            self.bind.modules.image_bytes() >> 20,
            tables >> 10,
            evicted,
            refused,
            w.frames,
            w.nodes,
            w.live_nodes,
            self.written.names.len(),
            self.written.workloads.len(),
            self.bind.proc_alias.len(),
            self.lazy_snapshots.as_ref().map_or(0, HashSet::len),
            self.counters.pids.len(),
            self.counters.uids.len(),
            self.counters.per_thread.len(),
            self.ledger.acct.len(),
            self.jit.processes.len(),
            self.counters.retired_threads,
            self.counters.retired_processes,
            (self.runtimes.python.kept_bytes() + self.runtimes.java.kept_bytes()) >> 10,
        )
    }
}

/// This process's resident memory, in KiB (0 if unknown).
pub(in crate::record) fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// How often `PROFILE_DEBUG_TABLES=SECONDS` asks for the table sizes (read once;
/// unset or `0`: never).
pub(in crate::record) fn debug_tables_every() -> Option<std::time::Duration> {
    static EVERY: std::sync::OnceLock<Option<std::time::Duration>> = std::sync::OnceLock::new();
    *EVERY.get_or_init(|| {
        let v = std::env::var("PROFILE_DEBUG_TABLES").ok()?;
        let secs: f64 = v.trim().parse().unwrap_or(10.0);
        (secs > 0.0 && secs.is_finite()).then(|| std::time::Duration::from_secs_f64(secs))
    })
}

/// Whether `PROFILE_DEBUG_TABLES` asks for table sizes.
pub(in crate::record) fn debug_tables() -> bool {
    debug_tables_every().is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Meta;

    // Pids above any pid_max this test runs under: nothing of them is in /proc.
    const P: u32 = 4_500_000;

    fn handler(all_cpus: bool) -> EventHandler {
        let file = tempfile::tempfile().unwrap();
        let w = RecordingWriter::new(BufWriter::new(file), &Meta::default()).unwrap();
        EventHandler::new(w, true, Keep::default()).with_lazy_snapshots(all_cpus)
    }

    fn mmap(pid: u32, addr: u64, path: &str, time: u64) -> Record<'_> {
        Record::Mmap {
            pid,
            tid: pid,
            time,
            kernel: false,
            addr,
            len: 0x1000,
            pgoff: 0,
            build_id: None,
            executable: true,
            filename: path.as_bytes(),
        }
    }

    fn exec(pid: u32, time: u64) -> Record<'static> {
        Record::Comm {
            pid,
            tid: pid,
            time,
            name: b"sh",
            exec: true,
        }
    }

    fn fork(parent: u32, child: u32, time: u64) -> Record<'static> {
        Record::Fork {
            pid: child,
            ppid: parent,
            tid: child,
            ptid: parent,
            time,
        }
    }

    fn exit(pid: u32, tid: u32, time: u64) -> Record<'static> {
        Record::Exit { pid, tid, time }
    }

    /// A process that exec'd, mapped two files and forked; the parent exits.
    fn storm(h: &mut EventHandler) {
        for r in [
            exec(P, 1),
            mmap(P, 0x1000, "/nonexistent/a.so", 2),
            mmap(P, 0x3000, "/nonexistent/b.so", 3),
            fork(P, P + 1, 4),
            exit(P, P, 5),
        ] {
            h.handle(r).unwrap();
        }
    }

    #[test]
    fn a_process_is_forgotten_at_its_main_threads_exit_under_all_cpus() {
        let mut h = handler(true);
        storm(&mut h);
        assert!(
            h.bind.spaces.space(P).is_none(),
            "the exited parent's space"
        );
        assert!(!h.lazy_snapshots.as_ref().unwrap().contains(&P));
        // The child has its own copy of the mappings, and is still known.
        assert_eq!(h.bind.spaces.lookup(P + 1, 0x1000), Some(0));
        assert_eq!(h.bind.spaces.lookup(P + 1, 0x3000), Some(1));
        assert!(h.lazy_snapshots.as_ref().unwrap().contains(&(P + 1)));
        // A thread that is not the main one exits: its process stays.
        h.handle(exit(P + 1, P + 2, 6)).unwrap();
        assert_eq!(h.bind.spaces.lookup(P + 1, 0x1000), Some(0));
        assert_eq!(h.bind.spaces.len(), 1);
    }

    #[test]
    fn without_all_cpus_nothing_is_forgotten() {
        let mut h = handler(false);
        storm(&mut h);
        assert_eq!(h.bind.spaces.lookup(P, 0x1000), Some(0));
        assert_eq!(h.bind.spaces.len(), 2);
    }

    #[test]
    fn a_new_generation_keeps_the_live_processes_mappings_under_new_ids() {
        let mut h = handler(true);
        // The child that lives on is this test (its /proc entry is there); P + 1,
        // forked too, vanished without an exit record (lost, say): retired at the
        // generation.
        let me = std::process::id();
        for r in [
            exec(P, 1),
            mmap(P, 0x1000, "/nonexistent/a.so", 2),
            mmap(P, 0x3000, "/nonexistent/b.so", 3),
            fork(P, me, 4),
            fork(P, P + 1, 4),
            exit(P, P, 5),
            // A third child maps a file of its own and exits.
            exec(P + 3, 7),
            mmap(P + 3, 0x1000, "/nonexistent/c.so", 8),
            exit(P + 3, P + 3, 9),
        ] {
            h.handle(r).unwrap();
        }
        assert_eq!(h.writer.mappings().len(), 3);
        assert_eq!(h.mapping_modules().len(), 3);
        assert_eq!(h.bind.spaces.len(), 2);
        h.new_generation(10, 3);
        assert_eq!(h.bind.spaces.len(), 1, "the vanished child is retired");
        assert!(h.bind.spaces.space(P + 1).is_none());
        // The live child's two mappings (shared with its exited parent) are recorded
        // again, once each; the exited one's is not.
        assert_eq!(h.writer.mapping_base(), 3);
        let paths: Vec<&str> = h.writer.mappings().iter().map(|m| &*m.path).collect();
        assert_eq!(paths.len(), 2, "{paths:?}");
        assert!(paths.contains(&"/nonexistent/a.so") && paths.contains(&"/nonexistent/b.so"));
        assert!(
            h.writer
                .mappings()
                .iter()
                .all(|m| m.time == 10 && m.pid == P)
        );
        assert_eq!(h.mapping_modules().len(), 2);
        let a = h.bind.spaces.lookup(me, 0x1000).unwrap();
        let b = h.bind.spaces.lookup(me, 0x3000).unwrap();
        assert!(a >= 3 && b >= 3 && a != b);
        assert_eq!(
            h.writer.mappings()[(a - 3) as usize].path,
            "/nonexistent/a.so"
        );
        // A mapping after the generation gets the next id.
        h.handle(mmap(me, 0x8000, "/nonexistent/d.so", 11)).unwrap();
        assert_eq!(h.bind.spaces.lookup(me, 0x8000), Some(5));
        assert_eq!(h.mapping_modules().len(), 3);
    }

    #[test]
    fn under_all_cpus_a_forked_child_takes_its_parents_workload() {
        let me = std::process::id();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let exe = |h: &EventHandler| h.written.workloads.get(&pid).map(|w| w.exe.clone());
        // -a: the parent's, without reading the child's /proc (its exe differs).
        let mut all = handler(true);
        all.read_workload(me, 1, None);
        all.handle(fork(me, pid, 2)).unwrap();
        let mine = all.written.workloads[&me].clone();
        assert_eq!(exe(&all), Some(mine.exe.clone()));
        assert_eq!(all.written.workloads[&pid].cgroup, mine.cgroup);
        // Its exec reads it.
        all.handle(exec(pid, 3)).unwrap();
        let after_exec = exe(&all).unwrap();
        // Not -a: read at the fork.
        let mut one = handler(false);
        one.read_workload(me, 1, None);
        one.handle(fork(me, pid, 2)).unwrap();
        let read = exe(&one).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(after_exec.ends_with("/sleep"), "{after_exec}");
        assert!(read.ends_with("/sleep"), "{read}");
    }
}
