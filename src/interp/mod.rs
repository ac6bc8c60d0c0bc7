//! Frames of interpreters, read from outside the process: the Python functions a
//! CPython thread is running, the Java methods a JVM is interpreting, the JavaScript
//! functions a Node process runs. Pure: every
//! reader here works over [`Memory`], an address space it can only read, so the walkers
//! are tested on snapshots captured from real processes; the recorder supplies a
//! memory that reads the target (`crate::sys::ProcessMemory`) overlaid with the
//! sample's own stack copy ([`memory::Overlay`]), exact at the sample instant.
//!
//! The frames found here replace the native frames of the interpreter that ran them
//! (`_PyEval_EvalFrameDefault`, HotSpot's `Interpreter`) in a sample's stack, as
//! [`crate::format::FrameKind::Interpreted`] frames named in the recording's symbols.

pub mod addr_map;
pub mod budget;
pub mod capture;
pub mod elf_symbols;
pub mod jvm;
pub mod memory;
pub mod pages;
pub mod python;
pub mod ruby;
pub mod v8;

pub use addr_map::AddrMap;
pub use budget::Budgets;
pub use capture::Capture;

/// Where a JIT runtime says its code is: the range holding an address, and the name
/// it gave that code (a JVM's perf map). The interpreter readers check compiled code
/// they read against it; `symbolize::perfmap::PerfMap` is one.
pub trait CodeRegions {
    /// The code range holding `addr` (start, end) and its name.
    fn region(&self, addr: u64) -> Option<(u64, u64, &str)>;
}
pub use memory::{AtSample, Memory, Overlay, Snapshot};
pub use pages::{PageMap, Pages};
