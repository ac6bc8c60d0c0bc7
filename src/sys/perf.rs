//! perf_event_open, the ring-buffer mapping and the ioctls, each wrapped in an owner
//! whose `Drop` gives the resource back. Nothing here interprets records; see
//! [`crate::replay::decode`].

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};

use perf_event_open_sys as sys;

use sys::bindings as b;

/// x86_64 user registers recorded with each stack copy: IP, SP, BP for unwinding; BX
/// and R12 to R15, the callee-saved registers an interpreter's loop keeps its state in
/// (CPython's current frame, HotSpot's bytecode pointer), read at the sample instant.
#[cfg(target_arch = "x86_64")]
pub(crate) const REGS_MASK: u64 = (1 << 8) | (1 << 7) | (1 << 6) | (1 << 1) | (0xf << 20);
#[cfg(not(target_arch = "x86_64"))]
pub const REGS_MASK: u64 = 0;

/// What to sample and how: the part of `perf_event_attr` the recorder varies.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EventConfig {
    pub period_ns: u64,
    /// Copy this many bytes of user stack and the user registers (0: frame pointers only).
    pub stack_size: u32,
    /// Frame-pointer mode (`stack_size` 0): copy the user registers and this many bytes
    /// of user stack besides the kernel's user callchain, for the CFI of the sampled
    /// function to find the caller the walk skips when that function has no frame yet.
    pub leaf_stack: u32,
    /// Include the kernel part of callchains (needs privilege).
    pub kernel: bool,
    /// Start disabled and enable at the child's exec.
    pub enable_on_exec: bool,
    /// Exact accounting from counts (Linux 6.12+): every sample carries its own
    /// thread's count (PERF_SAMPLE_READ with `inherit`), and an inherited event reports
    /// its thread's final count when the thread exits (`inherit_stat`,
    /// PERF_RECORD_READ). See docs/accounting.md. Off with `--off-cpu`, whose SWITCH
    /// records give the same counts without forcing the kernel's slow context switch.
    pub exact: bool,
    /// Wake the reader at each sample (`wakeup_events` 1) rather than when the ring
    /// is a quarter full: the samples of a CPython process, whose Python frames are
    /// read from its memory as soon as the sample is drained (record/python.rs).
    pub wake_each: bool,
}

/// What every sample of the recorder's events carries. STREAM_ID tells which event
/// fired: one the recorder opened, or a copy the kernel inherited from it (whose
/// samples carry the opened event's id), which the kernel can swap between the
/// threads of a process at a context switch (`Accounting::sample`).
pub(crate) const SAMPLE_TYPE: u64 = (b::PERF_SAMPLE_IDENTIFIER
    | b::PERF_SAMPLE_IP
    | b::PERF_SAMPLE_TID
    | b::PERF_SAMPLE_TIME
    | b::PERF_SAMPLE_STREAM_ID
    | b::PERF_SAMPLE_CPU
    | b::PERF_SAMPLE_PERIOD
    | b::PERF_SAMPLE_CALLCHAIN) as u64;

/// The fields of an event's `perf_event_attr` that decide how its records are laid
/// out: what the decoder is given (`crate::replay::decode::Layout`, made from these by
/// the recorder).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecordFields {
    pub sample_type: u64,
    pub read_format: u64,
    pub sample_id_all: bool,
    pub sample_regs_user: u64,
    pub branch_sample_type: u64,
}

/// How the records of events opened with `a` are laid out, for the decoder.
fn layout_of(a: &b::perf_event_attr) -> RecordFields {
    RecordFields {
        sample_type: a.sample_type,
        read_format: a.read_format,
        sample_id_all: a.sample_id_all() != 0,
        sample_regs_user: a.sample_regs_user,
        branch_sample_type: a.branch_sample_type,
    }
}

/// The layout of the CPU-time and context-switch events' records (they share it, so
/// that their samples decode one way).
pub(crate) fn sample_layout(cfg: &EventConfig) -> RecordFields {
    layout_of(&attr_for(cfg))
}

/// The layout of the tracepoint events' records ([`EventFd::open_tracepoint`]).
pub(crate) fn tracepoint_layout() -> RecordFields {
    layout_of(&tracepoint_attr(0))
}

/// The layout of [`EventFd::open_one_sample`]'s records.
pub(crate) fn one_sample_layout(stack_size: u32) -> RecordFields {
    layout_of(&one_sample_attr(stack_size))
}

/// `profile dump`'s one-sample event: see [`EventFd::open_one_sample`].
fn one_sample_attr(stack_size: u32) -> b::perf_event_attr {
    let mut a = b::perf_event_attr {
        type_: b::PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<b::perf_event_attr>() as u32,
        config: b::PERF_COUNT_SW_TASK_CLOCK as u64,
        sample_type: SAMPLE_TYPE | (b::PERF_SAMPLE_REGS_USER | b::PERF_SAMPLE_STACK_USER) as u64,
        ..Default::default()
    };
    // The kernel's shortest task-clock period.
    a.__bindgen_anon_1.sample_period = 10_000;
    a.sample_regs_user = REGS_MASK;
    a.sample_stack_user = stack_size;
    a.__bindgen_anon_2.wakeup_events = 1;
    a.set_exclude_callchain_user(1);
    a.set_exclude_callchain_kernel(1);
    a.set_exclude_hv(1);
    a.set_sample_id_all(1);
    a.set_use_clockid(1);
    a.clockid = libc::CLOCK_MONOTONIC;
    a
}

/// A tracepoint sampled at every hit: see [`EventFd::open_tracepoint`].
fn tracepoint_attr(tp_id: u64) -> b::perf_event_attr {
    let mut a = b::perf_event_attr {
        type_: b::PERF_TYPE_TRACEPOINT,
        size: std::mem::size_of::<b::perf_event_attr>() as u32,
        config: tp_id,
        sample_type: (b::PERF_SAMPLE_IDENTIFIER
            | b::PERF_SAMPLE_IP
            | b::PERF_SAMPLE_TID
            | b::PERF_SAMPLE_TIME
            | b::PERF_SAMPLE_CPU
            | b::PERF_SAMPLE_PERIOD
            | b::PERF_SAMPLE_RAW) as u64,
        ..Default::default()
    };
    a.__bindgen_anon_1.sample_period = 1;
    a.set_disabled(1);
    a.set_exclude_hv(1);
    a.set_sample_id_all(1);
    a.set_use_clockid(1);
    a.clockid = libc::CLOCK_MONOTONIC;
    a
}

/// Everything this recorder asks of the kernel, in one attr.
fn attr_for(cfg: &EventConfig) -> b::perf_event_attr {
    let mut a = b::perf_event_attr {
        type_: b::PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<b::perf_event_attr>() as u32,
        config: b::PERF_COUNT_SW_TASK_CLOCK as u64,
        sample_type: SAMPLE_TYPE,
        ..Default::default()
    };
    a.__bindgen_anon_1.sample_period = cfg.period_ns;
    if cfg.exact {
        // read_format 0: one u64, the thread's own count of this (thread, CPU) event.
        a.sample_type |= b::PERF_SAMPLE_READ as u64;
        a.set_inherit_stat(1);
    }
    if cfg.stack_size > 0 {
        a.sample_type |= (b::PERF_SAMPLE_REGS_USER | b::PERF_SAMPLE_STACK_USER) as u64;
        a.sample_regs_user = REGS_MASK;
        a.sample_stack_user = cfg.stack_size;
        // The user part of the callchain would be a frame-pointer walk we discard.
        a.set_exclude_callchain_user(1);
    } else if cfg.leaf_stack > 0 {
        a.sample_type |= (b::PERF_SAMPLE_REGS_USER | b::PERF_SAMPLE_STACK_USER) as u64;
        a.sample_regs_user = REGS_MASK;
        a.sample_stack_user = cfg.leaf_stack;
    }
    a.set_disabled(u64::from(cfg.enable_on_exec));
    a.set_enable_on_exec(u64::from(cfg.enable_on_exec));
    // New threads and child processes inherit the event from their first instruction.
    a.set_inherit(1);
    a.set_exclude_kernel(u64::from(!cfg.kernel));
    a.set_exclude_callchain_kernel(u64::from(!cfg.kernel));
    a.set_exclude_hv(1);
    a.set_mmap(1);
    a.set_mmap2(1);
    a.set_build_id(1);
    a.set_comm(1);
    a.set_comm_exec(1);
    a.set_task(1);
    a.set_sample_id_all(1);
    a.set_use_clockid(1);
    a.clockid = libc::CLOCK_MONOTONIC;
    if cfg.wake_each {
        // Counted per event into the ring it writes to (redirected: its CPU's), so the
        // ring owner's poll wakes at each of this event's samples.
        a.__bindgen_anon_2.wakeup_events = 1;
    }
    a
}

/// The attr of the `context-switches` events: as for CPU samples, without the
/// side-band records the task-clock event already delivers.
fn switch_attr(cfg: &EventConfig) -> b::perf_event_attr {
    let mut a = attr_for(cfg);
    a.config = b::PERF_COUNT_SW_CONTEXT_SWITCHES as u64;
    // Samples keep the task-clock events' layout (the rings are decoded one way),
    // but a thread's final count of context switches is no CPU time: no
    // PERF_RECORD_READ at exit.
    a.set_inherit_stat(0);
    without_side_band(&mut a);
    a
}

/// No mapping, name or life-cycle records from `a`: the task-clock events opened with
/// `inherit` deliver them.
fn without_side_band(a: &mut b::perf_event_attr) {
    a.set_mmap(0);
    a.set_mmap2(0);
    a.set_build_id(0);
    a.set_comm(0);
    a.set_comm_exec(0);
    a.set_task(0);
}

/// An open perf event. Closing it (drop) detaches it, and every copy the kernel
/// inherited into the target's new threads, from the target.
#[derive(Debug)]
pub(crate) struct EventFd(OwnedFd);

impl EventFd {
    /// Opens a sampling event on thread `tid` restricted to `cpu`.
    pub(crate) fn open(cfg: &EventConfig, tid: i32, cpu: i32) -> io::Result<EventFd> {
        let mut attr = attr_for(cfg);
        Self::open_attr(&mut attr, tid, cpu)
    }

    /// Opens the off-CPU state event on thread `tid` restricted to `cpu`: the
    /// `context-switches` software event sampled at every switch-out (period 1), in
    /// the switched-out thread's context, with `context_switch` SWITCH records for
    /// every switch out and in. Its samples are small: in dwarf mode the user
    /// registers alone (where in user space the thread blocked: no callchain, no
    /// stack copy); in frame-pointer mode the whole callchain, kernel and user, and
    /// the few bytes of stack that find a frameless function's caller
    /// (`EventConfig::leaf_stack`). Mappings, names
    /// and thread life cycles come from the task-clock event, not again from this one.
    pub(crate) fn open_switch_states(cfg: &EventConfig, tid: i32, cpu: i32) -> io::Result<EventFd> {
        let mut a = switch_attr(cfg);
        a.__bindgen_anon_1.sample_period = 1;
        a.set_context_switch(1);
        if cfg.stack_size > 0 {
            // No callchain at all (the layout keeps an empty one): walking the
            // kernel stack at every switch-out cost more than all else per switch
            // (docs/off-cpu.md, "Cost"); the stack event's samples name the states.
            a.sample_stack_user = 0;
            a.set_exclude_callchain_kernel(1);
        }
        Self::open_attr(&mut a, tid, cpu)
    }

    /// Opens the off-CPU stack event on thread `tid` restricted to `cpu` (dwarf mode):
    /// the `context-switches` event with the user stack copy as `cfg` asks for CPU
    /// samples, at most `stacks_hz` samples a second (frequency mode: the kernel
    /// adapts the period).
    pub(crate) fn open_switch_stacks(
        cfg: &EventConfig,
        stacks_hz: u64,
        tid: i32,
        cpu: i32,
    ) -> io::Result<EventFd> {
        let mut a = switch_attr(cfg);
        a.set_freq(1);
        a.__bindgen_anon_1.sample_freq = stacks_hz;
        Self::open_attr(&mut a, tid, cpu)
    }

    /// Opens a sampling event of thread `tid` alone on `cpu`, for a thread created
    /// during the recording: not inherited, so its period can be varied like those of
    /// the threads found at the start (an inherited copy keeps the period drawn at the
    /// thread's creation); enabled at once; no side-band records (the inherited
    /// events deliver them) and no count at exit (the inherited copy reports it).
    pub(crate) fn open_own(cfg: &EventConfig, tid: i32, cpu: i32) -> io::Result<EventFd> {
        let mut a = attr_for(cfg);
        a.set_inherit(0);
        a.set_inherit_stat(0);
        a.set_disabled(0);
        a.set_enable_on_exec(0);
        without_side_band(&mut a);
        Self::open_attr(&mut a, tid, cpu)
    }

    /// Opens the `-a` event of one CPU: every task that runs on `cpu` (pid -1), sampled
    /// every `period_ns` of that CPU's time by `cpu-clock` (perf's `-a` event; a
    /// CPU-wide `task-clock` would count the CPU context's time too, under a name that
    /// says otherwise: docs/live.md), the idle task left out. Mappings,
    /// names and task life cycles of every process on the CPU come with it.
    pub(crate) fn open_cpu_wide(cfg: &EventConfig, cpu: i32) -> io::Result<EventFd> {
        let mut a = attr_for(cfg);
        a.config = b::PERF_COUNT_SW_CPU_CLOCK as u64;
        a.set_inherit(0);
        a.set_inherit_stat(0);
        a.set_exclude_idle(1);
        Self::open_attr(&mut a, -1, cpu)
    }

    /// Opens an event that samples thread `tid` once, on any CPU, as soon as it has run
    /// for 10 us (`profile dump`: a running thread's registers and top of stack without
    /// stopping it). Not inherited, so it can have a ring of its own; the user
    /// registers and `stack_size` bytes of user stack, no callchain.
    pub(crate) fn open_one_sample(tid: i32, stack_size: u32) -> io::Result<EventFd> {
        Self::open_attr(&mut one_sample_attr(stack_size), tid, -1)
    }

    /// Opens a counting-only dummy event on the calling thread; it owns a CPU's ring
    /// buffer so that target events can come and go. Poll wakes the reader each time
    /// `wakeup_bytes` more are written.
    pub(crate) fn open_ring_owner(cpu: i32, wakeup_bytes: u32) -> io::Result<EventFd> {
        let mut a = b::perf_event_attr {
            type_: b::PERF_TYPE_SOFTWARE,
            size: std::mem::size_of::<b::perf_event_attr>() as u32,
            config: b::PERF_COUNT_SW_DUMMY as u64,
            sample_type: SAMPLE_TYPE,
            ..Default::default()
        };
        a.set_exclude_kernel(1);
        a.set_exclude_hv(1);
        a.set_use_clockid(1);
        a.set_sample_id_all(1);
        a.set_watermark(1);
        a.__bindgen_anon_2.wakeup_watermark = wakeup_bytes;
        a.clockid = libc::CLOCK_MONOTONIC;
        Self::open_attr(&mut a, 0, cpu)
    }

    /// Opens tracepoint `tp_id` on every task of `cpu` (pid -1), sampled at every hit
    /// with its raw fields (PERF_SAMPLE_RAW) and no callchain, keeping only the hits
    /// `filter` (the kernel's tracepoint filter syntax) accepts, then enables it. The
    /// kernel takes a filter once per event: a new filter needs a new event.
    pub(crate) fn open_tracepoint(
        tp_id: u64,
        cpu: i32,
        filter: Option<&str>,
    ) -> io::Result<EventFd> {
        let mut a = tracepoint_attr(tp_id);
        let fd = Self::open_attr(&mut a, -1, cpu)?;
        if let Some(f) = filter {
            let c = std::ffi::CString::new(f).map_err(|_| io::Error::from_raw_os_error(22))?;
            // SAFETY: an open perf event descriptor and a NUL-terminated string the
            // kernel only reads.
            check(unsafe { sys::ioctls::SET_FILTER(fd.raw(), c.as_ptr().cast_mut()) })?;
        }
        Ok(fd)
    }

    /// Opens the `bpf-output` event of `cpu` (pid -1): the records a BPF program
    /// writes there with `bpf_perf_event_output` are its samples, their data in the
    /// raw fields, laid out as a tracepoint's ([`tracepoint_layout`]). Opened
    /// disabled.
    pub(crate) fn open_bpf_output(cpu: i32) -> io::Result<EventFd> {
        let mut a = tracepoint_attr(0);
        a.type_ = b::PERF_TYPE_SOFTWARE;
        a.config = b::PERF_COUNT_SW_BPF_OUTPUT as u64;
        Self::open_attr(&mut a, -1, cpu)
    }

    /// Starts counting and sampling (events opened disabled).
    pub(crate) fn enable(&self) -> io::Result<()> {
        // SAFETY: an open perf event descriptor.
        check(unsafe { sys::ioctls::ENABLE(self.raw(), 0) })
    }

    fn open_attr(attr: &mut b::perf_event_attr, tid: i32, cpu: i32) -> io::Result<EventFd> {
        // SAFETY: attr is a valid, fully initialised perf_event_attr with `size` set.
        let fd = unsafe {
            sys::perf_event_open(attr, tid, cpu, -1, sys::bindings::PERF_FLAG_FD_CLOEXEC as _)
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a freshly opened descriptor that nothing else owns.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Sends this event's records into `owner`'s ring buffer (same CPU required).
    pub(crate) fn set_output(&self, owner: &EventFd) -> io::Result<()> {
        // SAFETY: both are open perf event descriptors.
        check(unsafe { sys::ioctls::SET_OUTPUT(self.raw(), owner.raw()) })
    }

    /// The event's count: for task-clock, nanoseconds of CPU the thread (and the
    /// threads that inherited the event from it) ran on this event's CPU.
    pub(crate) fn read_count(&self) -> io::Result<u64> {
        let mut v = 0u64;
        // SAFETY: reading 8 bytes into a u64 from an open perf event (read_format 0).
        let n = unsafe { libc::read(self.raw(), (&mut v as *mut u64).cast(), 8) };
        if n == 8 {
            Ok(v)
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// The kernel's id of this event: samples and records of it and of every copy
    /// the kernel inherited from it carry this id (PERF_SAMPLE_IDENTIFIER).
    pub(crate) fn id(&self) -> io::Result<u64> {
        let mut id = 0u64;
        // SAFETY: an open perf event descriptor and a u64 to fill.
        check(unsafe { sys::ioctls::ID(self.raw(), &mut id) })?;
        Ok(id)
    }

    /// Changes this event's sample period (nanoseconds of CPU) and restarts its
    /// current period; copies the kernel inherits from it afterwards take the new one.
    pub(crate) fn set_period(&self, ns: u64) -> io::Result<()> {
        let mut v = ns;
        // SAFETY: PERF_EVENT_IOC_PERIOD reads one u64 through the pointer (the binding
        // in perf-event-open-sys passes the value itself, which the kernel would take
        // for an address).
        check(unsafe { libc::ioctl(self.raw(), b::PERIOD as _, &mut v as *mut u64) })
    }

    pub(crate) fn disable(&self) -> io::Result<()> {
        // SAFETY: an open perf event descriptor.
        check(unsafe { sys::ioctls::DISABLE(self.raw(), 0) })
    }

    pub(crate) fn raw(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// A mapped ring buffer: one metadata page, then `2^n` data pages the kernel writes
/// records into. Unmapped on drop.
pub(crate) struct Ring {
    base: *mut u8,
    map_len: usize,
    data_size: u64,
    data_offset: u64,
}

// SAFETY: the mapping is owned by this value alone; the kernel is the only other writer
// and synchronises through data_head/data_tail.
unsafe impl Send for Ring {}

impl Ring {
    /// Maps `data_pages` (a power of two) of ring for `event`.
    pub(crate) fn map(event: &EventFd, data_pages: usize) -> io::Result<Ring> {
        let page = super::page_size();
        let map_len = (data_pages + 1) * page;
        // SAFETY: mapping a perf event fd as documented in perf_event_open(2).
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                event.raw(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut ring = Ring {
            base: base.cast(),
            map_len,
            data_size: (data_pages * page) as u64,
            data_offset: page as u64,
        };
        // Kernels since 4.1 say where data lives; older ones use the next page.
        let meta = ring.meta();
        // SAFETY: meta points at the mapped metadata page.
        let (off, size) = unsafe { ((*meta).data_offset, (*meta).data_size) };
        if size != 0 {
            ring.data_offset = off;
            ring.data_size = size;
        }
        Ok(ring)
    }

    fn meta(&self) -> *mut b::perf_event_mmap_page {
        self.base.cast()
    }

    fn head(&self) -> &AtomicU64 {
        // SAFETY: data_head is an aligned u64 in the mapped metadata page, written by
        // the kernel; reading it through an atomic gives the acquire ordering needed.
        unsafe { AtomicU64::from_ptr(std::ptr::addr_of_mut!((*self.meta()).data_head)) }
    }

    fn tail(&self) -> &AtomicU64 {
        // SAFETY: as for head; we are the only writer of data_tail.
        unsafe { AtomicU64::from_ptr(std::ptr::addr_of_mut!((*self.meta()).data_tail)) }
    }

    /// Copies every complete record currently in the ring to `out` (each record's
    /// bytes contiguous, wrap-around undone) and frees the space. Returns bytes read.
    pub(crate) fn drain_into(&mut self, out: &mut Vec<u8>) -> usize {
        let head = self.head().load(Ordering::Acquire);
        let tail = self.tail().load(Ordering::Relaxed);
        if head == tail {
            return 0;
        }
        let size = self.data_size;
        let avail = head.wrapping_sub(tail).min(size);
        // SAFETY: the data area is mapped for `size` bytes from base + data_offset.
        let data = unsafe {
            std::slice::from_raw_parts(self.base.add(self.data_offset as usize), size as usize)
        };
        let start = (tail % size) as usize;
        let first = (avail as usize).min(size as usize - start);
        out.extend_from_slice(&data[start..start + first]);
        out.extend_from_slice(&data[..avail as usize - first]);
        self.tail()
            .store(tail.wrapping_add(avail), Ordering::Release);
        avail as usize
    }

    pub(crate) fn bytes(&self) -> usize {
        self.map_len
    }

    /// Bytes of the data area (a power of two).
    pub(crate) fn data_size(&self) -> u64 {
        self.data_size
    }

    /// Where the kernel will write next (a position counted from the mapping, not
    /// wrapped): the bytes from [`tail`](Ring::tail) up to here are whole records.
    pub(crate) fn head_pos(&self) -> u64 {
        self.head().load(Ordering::Acquire)
    }

    /// Where the reader stands: the kernel writes nothing between here and the head.
    pub(crate) fn tail_pos(&self) -> u64 {
        self.tail().load(Ordering::Relaxed)
    }

    /// Gives the bytes before `pos` back to the kernel (`pos` between the tail and the
    /// head; records borrowed from before it must be done with, which the `&mut`
    /// makes sure of).
    pub(crate) fn set_tail(&mut self, pos: u64) {
        self.tail().store(pos, Ordering::Release);
    }

    /// The ring's bytes from position `from` for `len` bytes, in one or two pieces
    /// (the second when they wrap around the end), or None unless they lie between
    /// the tail and the last head read. Borrowed: the tail cannot move while they are.
    pub(crate) fn bytes_at(&self, from: u64, len: usize) -> Option<(&[u8], &[u8])> {
        let tail = self.tail_pos();
        let head = self.head_pos();
        let size = self.data_size;
        let end = from.checked_add(len as u64)?;
        if from < tail || end > head || len as u64 > size {
            return None;
        }
        let start = (from % size) as usize;
        let first = len.min(size as usize - start);
        // SAFETY: the data area is mapped for `size` bytes from base + data_offset, and
        // the kernel writes none of the bytes between the tail and the head (it only
        // writes past the head, and never past the tail plus the size); the tail moves
        // only through `set_tail(&mut self)`, which this borrow holds off.
        unsafe {
            let data = self.base.add(self.data_offset as usize);
            Some((
                std::slice::from_raw_parts(data.add(start), first),
                std::slice::from_raw_parts(data, len - first),
            ))
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what map() mapped.
        unsafe {
            libc::munmap(self.base.cast(), self.map_len);
        }
    }
}
