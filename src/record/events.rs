//! Turning kernel records into recording events: samples (kernel callchain plus the
//! user stack, unwound here so no stack bytes are kept), mappings (with the CFI of
//! the mapped file for unwinding), thread and process life cycles.

use std::sync::Arc;

use perf_event_open_sys::bindings as b;

use super::addrspace::{Mapped, Space};
use super::parse::{Record, SampleRecord};
use super::session::Session;
use crate::elf::ElfInfo;
use crate::format::{Frame, FrameKind, Mapping, Sample, ThreadEvent, Truncation};
use crate::symbolize::locate;
use crate::unwind::{self, ModuleCfi};

impl Session {
    pub(super) fn handle(&mut self, rec: Record) {
        match rec {
            Record::Sample(s) => self.sample(&s),
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
                    let path = String::from_utf8_lossy(filename).into_owned();
                    self.add_mapping(
                        pid,
                        addr,
                        addr + len,
                        pgoff,
                        path,
                        build_id.map(<[u8]>::to_vec),
                        time,
                    );
                }
            }
            Record::Comm {
                pid,
                tid,
                time,
                name,
                exec,
            } => {
                if exec {
                    self.spaces.exec(pid);
                    self.writer.thread_event(&ThreadEvent::Exec { time, pid });
                }
                let name = String::from_utf8_lossy(name).into_owned();
                self.writer.thread_event(&ThreadEvent::Name {
                    time,
                    pid,
                    tid,
                    name,
                });
            }
            Record::Fork {
                pid,
                ppid,
                tid,
                ptid,
                time,
            } => {
                self.acct.fork(pid, tid, ptid, time);
                if pid != ppid {
                    self.spaces.fork(ppid, pid);
                }
                self.writer.thread_event(&ThreadEvent::Start {
                    time,
                    pid,
                    ppid,
                    tid,
                });
            }
            Record::Exit { pid, tid, time } => {
                self.writer
                    .thread_event(&ThreadEvent::Exit { time, pid, tid });
            }
            Record::Read {
                pid,
                tid,
                id,
                count,
                time,
            } => self.acct.exit_count(pid, tid, id, count, time),
            Record::Lost { time, count } => {
                self.lost += count;
                self.writer.lost(time, count);
            }
            Record::Throttle { time } => {
                self.throttled += 1;
                self.writer.throttle(time);
            }
            Record::Other { .. } => {}
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn add_mapping(
        &mut self,
        pid: u32,
        start: u64,
        end: u64,
        file_offset: u64,
        path: String,
        build_id: Option<Vec<u8>>,
        time: u64,
    ) {
        let module = self.module_for(pid, start, end, &path, build_id.as_deref());
        // The vdso is an image of its own: its mapping offset is not a file offset.
        let offset_in_image = if path == "[vdso]" { 0 } else { file_offset };
        let biased =
            module.and_then(|m| Some((m.info.bias_for_mapping(start, offset_in_image)?, m)));
        let build_id =
            build_id.or_else(|| biased.as_ref().and_then(|(_, m)| m.info.build_id.clone()));
        let id = self.writer.mapping(&Mapping {
            pid,
            start,
            end,
            file_offset,
            path,
            build_id,
            time,
        });
        let unwind = biased
            .as_ref()
            .and_then(|(bias, m)| Some((Arc::clone(m.cfi.as_ref()?), *bias)));
        self.mapping_modules.push(biased.map(|(bias, m)| (m, bias)));
        debug_assert_eq!(self.mapping_modules.len(), id as usize + 1);
        self.spaces.space_mut(pid).insert(
            start,
            Mapped {
                end,
                id,
                module: unwind,
            },
        );
    }

    /// The mapped file's image, ELF facts and (in dwarf mode) unwind tables, loaded
    /// once per file while the target surely still has it mapped.
    fn module_for(
        &mut self,
        pid: u32,
        start: u64,
        end: u64,
        path: &str,
        build_id: Option<&[u8]>,
    ) -> Option<Arc<LoadedModule>> {
        if path.is_empty()
            || (path.starts_with('[') && path != "[vdso]")
            || path.starts_with("//anon")
        {
            return None;
        }
        let key = module_key(pid, path, start, end, build_id);
        if let Some(m) = self.modules.get(&key) {
            return m.clone();
        }
        let image = if path == "[vdso]" {
            locate::read_vdso(pid, start, end).ok()
        } else {
            locate::open_mapped_file(pid, path, (start, end), build_id)
                .ok()
                .map(|l| l.image)
        };
        let loaded = image.and_then(|image| {
            let info = ElfInfo::parse((*image).as_ref()).ok()?;
            let cfi = self
                .dwarf
                .then(|| Arc::new(ModuleCfi::new(Arc::clone(&image))));
            Some(Arc::new(LoadedModule { image, info, cfi }))
        });
        self.modules.insert(key, loaded.clone());
        loaded
    }

    fn sample(&mut self, s: &SampleRecord) {
        // Every thread's CPU is accounted, kept or not: an opened thread's counts
        // include the threads and processes that inherited its events.
        let weight = self
            .acct
            .sample(s.pid, s.tid, s.id, s.count, s.period, s.time, s.cpu);
        if self.only_pid.is_some_and(|pid| pid != s.pid) {
            self.other_process_samples += 1;
            return;
        }
        self.samples += 1;
        self.sampled_ns += weight;
        *self.per_thread.entry(s.tid).or_default() += 1;
        self.pids.insert(s.pid);
        self.frames.clear();
        self.addrs.clear();
        let mut context = 0u64;
        for e in s.callchain_entries() {
            if e >= b::PERF_CONTEXT_MAX {
                context = e;
                continue;
            }
            if context == b::PERF_CONTEXT_KERNEL {
                self.frames.push(Frame {
                    kind: FrameKind::Kernel,
                    pid: 0,
                    addr: e,
                    mapping: None,
                });
            } else if context == b::PERF_CONTEXT_USER && !self.dwarf {
                self.addrs.push(e);
            }
        }
        let mut cut = None;
        if self.dwarf
            && let Some([ip, sp, bp]) = s.regs
        {
            let regs = unwind::Regs { ip, sp, bp };
            let stack = unwind::StackCopy { sp, bytes: s.stack };
            let empty = Space::default();
            let space = self.spaces.space(s.pid).unwrap_or(&empty);
            match self.unwinder.unwind(&regs, &stack, space, &mut self.addrs) {
                unwind::UnwindEnd::Complete => {}
                unwind::UnwindEnd::Truncated(r) => {
                    cut = Some(match r {
                        unwind::TruncateReason::StackCopyExhausted => {
                            Truncation::StackCopyExhausted
                        }
                        unwind::TruncateReason::NoUnwindInfo => Truncation::NoUnwindInfo,
                        unwind::TruncateReason::BadUnwindInfo => Truncation::BadUnwindInfo,
                        unwind::TruncateReason::TooDeep => Truncation::TooDeep,
                    })
                }
            }
        }
        for (i, &addr) in self.addrs.iter().enumerate() {
            // The first address is where the thread was; the rest are return addresses.
            let kind = if i == 0 {
                FrameKind::User
            } else {
                FrameKind::Return
            };
            let mapping = self.spaces.lookup(s.pid, kind.lookup_address(addr));
            self.frames.push(Frame {
                kind,
                pid: s.pid,
                addr,
                mapping,
            });
        }
        if let Some(reason) = cut {
            self.truncated += 1;
            self.frames.push(Frame {
                kind: FrameKind::Truncated,
                pid: 0,
                addr: reason as u64,
                mapping: None,
            });
        }
        let stack = self.writer.intern_stack(&self.frames);
        self.writer.sample(&Sample {
            time: s.time,
            pid: s.pid,
            tid: s.tid,
            cpu: s.cpu,
            weight,
            stack,
        });
    }
}

/// A mapped file's identity: its device and inode as the target sees it (so the same
/// path in two mount namespaces stays two files), else its build-id, else its path.
fn module_key(pid: u32, path: &str, start: u64, end: u64, build_id: Option<&[u8]>) -> String {
    use std::os::unix::fs::MetadataExt;
    if path == "[vdso]" {
        return format!("[vdso] of {pid}");
    }
    let stat = std::fs::metadata(format!("/proc/{pid}/map_files/{start:x}-{end:x}"))
        .or_else(|_| std::fs::metadata(format!("/proc/{pid}/root{path}")));
    match (stat, build_id) {
        (Ok(m), _) => format!("{}:{}", m.dev(), m.ino()),
        (Err(_), Some(id)) => format!("build-id {}", crate::elf::build_id_hex(id)),
        (Err(_), None) => path.to_owned(),
    }
}

/// One mapped file, loaded once: its bytes, ELF facts and unwind tables.
pub(super) struct LoadedModule {
    pub image: crate::elf::Image,
    pub info: ElfInfo,
    /// Unwind tables, in dwarf mode.
    pub cfi: Option<Arc<ModuleCfi>>,
}
