//! Turning kernel records into recording events: samples (kernel callchain plus the
//! user stack, unwound here so no stack bytes are kept), mappings (with the CFI of
//! the mapped file for unwinding), thread and process life cycles.

use std::fs::File;
use std::sync::Arc;

use perf_event_open_sys::bindings as b;

use super::addrspace::{Mapped, Space};
use super::parse::{Record, SampleRecord};
use super::session::Session;
use crate::format::{Frame, FrameKind, Mapping, Sample, ThreadEvent, Truncation};
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
                time,
            } => {
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
        let module = if self.dwarf {
            self.module_for(pid, start, end, file_offset, &path)
        } else {
            None
        };
        let build_id = build_id.or_else(|| module.as_ref().and_then(|(_, _, id)| id.clone()));
        let id = self.writer.mapping(&Mapping {
            pid,
            start,
            end,
            file_offset,
            path,
            build_id,
            time,
        });
        let module = module.map(|(cfi, bias, _)| (cfi, bias));
        self.spaces
            .space_mut(pid)
            .insert(start, Mapped { end, id, module });
    }

    /// The unwind tables and load bias of a mapped file, loaded once per file.
    fn module_for(
        &mut self,
        pid: u32,
        start: u64,
        end: u64,
        file_offset: u64,
        path: &str,
    ) -> Option<(Arc<ModuleCfi>, u64, Option<Vec<u8>>)> {
        if path.is_empty()
            || (path.starts_with('[') && path != "[vdso]")
            || path.starts_with("//anon")
        {
            return None;
        }
        let key = if path == "[vdso]" {
            format!("[vdso]:{pid}")
        } else {
            path.to_owned()
        };
        if !self.modules.contains_key(&key) {
            let loaded = load_module(pid, path, start, end).and_then(|image| {
                let info = crate::elf::ElfInfo::parse((*image).as_ref()).ok()?;
                Some((Arc::new(ModuleCfi::new(image)), info))
            });
            self.modules.insert(key.clone(), loaded);
        }
        let (cfi, info) = self.modules.get(&key)?.as_ref()?;
        let bias = if path == "[vdso]" {
            info.bias_for_mapping(start, 0)?
        } else {
            info.bias_for_mapping(start, file_offset)?
        };
        Some((Arc::clone(cfi), bias, info.build_id.clone()))
    }

    fn sample(&mut self, s: &SampleRecord) {
        self.samples += 1;
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
        if self.dwarf {
            if let Some([ip, sp, bp]) = s.regs {
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
        }
        for &addr in &self.addrs {
            let mapping = self.spaces.lookup(s.pid, addr);
            self.frames.push(Frame {
                kind: FrameKind::User,
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
            weight: s.period,
            stack,
        });
    }
}

/// Opens a mapped file as the target sees it: through its root, then map_files.
fn load_module(pid: u32, path: &str, start: u64, end: u64) -> Option<crate::elf::Image> {
    if path == "[vdso]" {
        let mut buf = vec![0u8; (end - start) as usize];
        let f = File::open(format!("/proc/{pid}/mem")).ok()?;
        std::os::unix::fs::FileExt::read_exact_at(&f, &mut buf, start).ok()?;
        return Some(crate::elf::image_from_vec(buf));
    }
    let path = path.strip_suffix(" (deleted)").unwrap_or(path);
    crate::elf::map_file(std::path::Path::new(&format!("/proc/{pid}/root{path}")))
        .or_else(|_| {
            crate::elf::map_file(std::path::Path::new(&format!(
                "/proc/{pid}/map_files/{start:x}-{end:x}"
            )))
        })
        .ok()
}
