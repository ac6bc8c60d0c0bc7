//! `profile`: a sampling CPU profiler for Linux.
//!
//! The pipeline runs one way: [`record`] (live capture through perf_event, Linux only,
//! privileged) writes a recording file ([`mod@format`]); user stacks are unwound while
//! recording ([`unwind`]) so raw stack bytes never reach the disk, and every unique
//! address is symbolized once at the end ([`symbolize`]) so a recording carries its names. Reports
//! read the file into one in-memory model ([`profile`]) that every output
//! ([`output`]) renders. perf's own recordings (perf.data) are read into the same
//! recording in memory ([`perfdata`]), so every report works on them too.
//! [`dump`] reuses the recorder's unwinder and symbolizer to
//! print every thread's stack of a live process once, without stopping it.

// The only `unsafe` is in `sys` (system calls); each block says why it is sound.
// Target files are read, never mapped (see `elf::read_module`).
#![deny(unsafe_code)]
#![warn(unreachable_pub)]
#![warn(missing_docs)]
// The crate's docs are for its maintainers (`cargo doc --document-private-items`):
// module pages may point at the private modules that do the work.
#![allow(rustdoc::private_intra_doc_links)]

pub(crate) mod cache_dir;
pub mod diff;
#[cfg(target_os = "linux")]
pub mod dump;
pub mod elf;
pub mod format;
pub mod input;
pub mod interp;
pub mod output;
pub mod perfdata;
pub(crate) mod process;
pub mod profile;
pub mod push;
#[cfg(target_os = "linux")]
pub mod record;
// Public only for the record-decoding micro-benchmark (benches/parse.rs).
#[doc(hidden)]
pub mod replay;
#[cfg(target_os = "linux")]
pub(crate) mod running;
pub mod symbolize;
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub(crate) mod sys;
pub mod text;
pub mod tls;
pub mod top;
pub mod unwind;
pub mod workload;

/// Fixtures shared with the integration tests and benches (one file for all).
#[cfg(test)]
#[path = "../tests/fixture/mod.rs"]
pub(crate) mod test_fixture;
