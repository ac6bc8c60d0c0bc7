//! A running process as the front ends that read one share it, above the pure core:
//! the files it maps, loaded once while it surely still maps them, with their unwind
//! tables ([`modules`]), and the Python stage's opener of its memory as it is now
//! ([`python`]). The recorder and `dump` use both; the perf.data reader opens a
//! process still running through the opener. What `/proc` says is read below, in
//! [`crate::process`]; the syscalls, in [`crate::sys`].

pub(crate) mod modules;
pub(crate) mod python;
