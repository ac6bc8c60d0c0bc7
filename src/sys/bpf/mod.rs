//! The recorder's BPF programs, attached to its sampling events: the thread filter
//! that drops the inherited samples of chosen threads ([`filter`]) and the capture
//! that copies an interpreter's frames at each sample ([`capture`], its part of the
//! program in [`capture_program`], the layouts it shares with the recorder in
//! [`layout`]). Both are written with a small typed assembler ([`asm`]) and loaded
//! through the `bpf(2)` commands of [`syscall`]; the golden test (`tests`) holds
//! their listings against tests/data/bpf/programs.txt.

mod asm;
mod capture;
mod capture_program;
mod filter;
mod layout;
mod syscall;
#[cfg(test)]
mod tests;

pub(crate) use capture::{ChainEntry, CopiedChain, StackCapture, parse_capture};
pub(crate) use filter::{FILTER_CAPACITY, ThreadFilter};
pub(crate) use layout::COPY;
