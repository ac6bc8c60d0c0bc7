//! The pure core every road in shares: live recording, perf.data files and `dump`.
//! No system calls: each part is driven by the front end that owns the input and is
//! tested on bytes and fixtures.
//!
//! - [`decode`]: the kernel's perf records, for any event layout ([`abi`]: the
//!   kernel's numbers; [`layouts`]: which event a record is of).
//! - [`bind`]: a mapping bound to the file it maps (bias, build-id, unwind entry).
//! - [`stack`]: a sample's callchain, registers and stack copy → the recording's frames.
//! - [`java`]: the Java methods a JVM's native frames ran, put in their place.
//! - [`python`]: CPython's eval-loop frames → the Python functions they ran, read from
//!   the live process (the one part that reads a process, through the opener it is
//!   given).
//! - [`merge`]: the merge of runtime and native frames, written once.
//! - [`runtimes`]: the seam every runtime's frames are named through.

pub mod abi;
pub(crate) mod bind;
pub(crate) mod bound;
pub mod decode;
pub mod java;
pub mod layouts;
pub(crate) mod merge;
pub(crate) mod python;
pub(crate) mod runtimes;
pub mod stack;
