//! The kernel's numbers for perf records (linux/perf_event.h, and perf's own record
//! kinds), as the decoder reads them.

/// Sample-type bits (perf_event_open(2), `enum perf_event_sample_format`).
pub mod sample {
    pub const IP: u64 = 1 << 0;
    pub const TID: u64 = 1 << 1;
    pub const TIME: u64 = 1 << 2;
    pub const ADDR: u64 = 1 << 3;
    pub const READ: u64 = 1 << 4;
    pub const CALLCHAIN: u64 = 1 << 5;
    pub const ID: u64 = 1 << 6;
    pub const CPU: u64 = 1 << 7;
    pub const PERIOD: u64 = 1 << 8;
    pub const STREAM_ID: u64 = 1 << 9;
    pub const RAW: u64 = 1 << 10;
    pub const BRANCH_STACK: u64 = 1 << 11;
    pub const REGS_USER: u64 = 1 << 12;
    pub const STACK_USER: u64 = 1 << 13;
    pub const IDENTIFIER: u64 = 1 << 16;
}

/// Record types (`enum perf_event_type`), and the perf tool's own that matter here.
pub mod kind {
    pub const MMAP: u32 = 1;
    pub const LOST: u32 = 2;
    pub const COMM: u32 = 3;
    pub const EXIT: u32 = 4;
    pub const THROTTLE: u32 = 5;
    pub const FORK: u32 = 7;
    pub const READ: u32 = 8;
    pub const SAMPLE: u32 = 9;
    pub const MMAP2: u32 = 10;
    pub const LOST_SAMPLES: u32 = 13;
    pub const SWITCH: u32 = 14;
    /// perf's own records (64 and up) that say a file holds something this crate
    /// cannot follow.
    pub const AUXTRACE: u32 = 71;
    pub const COMPRESSED: u32 = 81;
    pub const COMPRESSED2: u32 = 83;
}

/// Markers in a callchain (`enum perf_callchain_context`): the entries after one are
/// of that context; every marker is at least [`context::MAX`].
pub mod context {
    pub const KERNEL: u64 = -128i64 as u64;
    pub const USER: u64 = -512i64 as u64;
    pub const MAX: u64 = -4095i64 as u64;
}

pub(super) const MISC_CPUMODE_MASK: u16 = 7;
pub(super) const MISC_KERNEL: u16 = 1;
pub(super) const MISC_COMM_EXEC: u16 = 1 << 13;
pub(super) const MISC_MMAP_DATA: u16 = 1 << 13;
pub(super) const MISC_SWITCH_OUT: u16 = 1 << 13;
pub(super) const MISC_MMAP_BUILD_ID: u16 = 1 << 14;
pub(super) const MISC_SWITCH_OUT_PREEMPT: u16 = 1 << 14;
pub(super) const PROT_EXEC: u32 = 4;
/// The x86_64 register numbers in `sample_regs_user` (`enum perf_event_x86_regs`).
pub const REG_BX: u32 = 1;
pub const REG_BP: u32 = 6;
pub const REG_SP: u32 = 7;
pub const REG_IP: u32 = 8;
pub const REG_R12: u32 = 20;
pub const REG_R13: u32 = 21;
pub const REG_R14: u32 = 22;
pub const REG_R15: u32 = 23;
/// `branch_sample_type`'s PERF_SAMPLE_BRANCH_HW_INDEX: one u64 before the entries.
pub(super) const BRANCH_HW_INDEX: u64 = 1 << 17;
