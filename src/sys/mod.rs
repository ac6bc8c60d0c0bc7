//! The recorder's only `unsafe`: the kernel interfaces it calls directly, each behind a
//! small safe function or an owner whose `Drop` gives the resource back.
//!
//! - [`perf`]: perf_event_open, the ring-buffer mapping, the ioctls.
//! - [`process`]: fork and exec of a launched command, waiting for and signalling it,
//!   pidfds, poll, resource limits, clocks, the effective user, the allocator trim.
//! - [`netlink`]: a generic netlink socket (the taskstats exit listener).
//! - [`dirfd`]: files reached from a directory descriptor without following links.
//! - [`bpf`]: the programs attached to the sampling events, written with a small
//!   typed assembler: the kernel-side filter that drops inherited samples of chosen
//!   threads, and its copy of an interpreter's frames at each sample.
//! - [`memory`]: reading a target's memory with `process_vm_readv`.
//! - [`attach`]: what keeps a JVM's handshake on that JVM: pidfd signals, a socket
//!   connected through the checked inode, the peer's credentials.
//!
//! Everything else in the crate is `#![deny(unsafe_code)]`.

mod attach;
mod bpf;
pub(crate) mod dirfd;
#[allow(dead_code)]
mod memory;
mod netlink;
mod perf;
mod process;

pub(crate) use attach::*;
pub(crate) use bpf::*;
// Used by the interpreter readers of issues 29 and 30 (remove this allow with them).
#[allow(unused_imports)]
pub(crate) use memory::*;
pub(crate) use netlink::*;
pub(crate) use perf::*;
pub(crate) use process::*;
