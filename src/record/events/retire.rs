//! Keeping a long `record -a` bounded: what the handler holds per process (address
//! space, `/proc` alias, snapshot mark, uid, workload) is dropped when the process
//! exits; after each window of a host agent without a file, what the window needed
//! is forgotten ([`EventHandler::new_generation`]). `PROFILE_DEBUG_TABLES=SECONDS`
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
        self.spaces.remove(pid);
        self.proc_alias.remove(&pid);
    }

    /// Forgets what the windows sent so far needed (a host agent without a file:
    /// see [`RecordingWriter::new_generation`]): frames and stack nodes, and the
    /// mappings of processes that exited, with their modules unless a live process
    /// maps them. The mappings of live processes are recorded again (at `time`)
    /// under new ids. Call it right after a window's cut, and only when no stack id
    /// outlives a window (not with `--off-cpu`, whose open intervals hold some).
    pub fn new_generation(&mut self, time: u64) {
        let (old_base, old_mappings) = self.writer.new_generation();
        let old_modules = std::mem::take(&mut self.mapping_modules);
        let mut renumbered: HashMap<MappingId, Option<MappingId>> = HashMap::new();
        let writer = &mut self.writer;
        let modules = &mut self.mapping_modules;
        self.spaces.for_each_mapped_mut(|mapped| {
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
            self.mapping_modules.len(),
            self.writer.mappings().len(),
            "one module slot per mapping"
        );
        drop(old_modules);
        // Modules unused for three generations (windows) and held by nobody go.
        if self.modules.prune(3) > 0 {
            sys::release_free_memory();
        }
    }

    /// The number of entries in each table that grows with the processes, threads
    /// and frames seen (for `PROFILE_DEBUG_TABLES`).
    pub fn table_sizes(&self) -> String {
        let w = self.writer.table_sizes();
        format!(
            "rss {} KiB spaces {} mappings {} mapping_modules {} modules {} ({} MiB) frames {} nodes {} \
             live_nodes {} names {} workloads {} alias {} snapshots {} pids {} uids {} \
             per_thread {} acct_threads {} jit {}",
            rss_kib(),
            self.spaces.len(),
            w.mappings,
            self.mapping_modules.len(),
            self.modules.len(),
            self.modules.image_bytes() >> 20,
            w.frames,
            w.nodes,
            w.live_nodes,
            self.names.len(),
            self.workloads.len(),
            self.proc_alias.len(),
            self.lazy_snapshots.as_ref().map_or(0, HashSet::len),
            self.counters.pids.len(),
            self.counters.uids.len(),
            self.counters.per_thread.len(),
            self.acct.len(),
            self.jit.processes.len(),
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
