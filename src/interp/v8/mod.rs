//! Node's JavaScript frames read from outside, with no flag (issue 47): the layout V8
//! describes in the binary's `v8dbg_*` symbols ([`layout`]), its heap objects read and
//! checked against it ([`heap`]), and the frames of a sample's stack named from them
//! ([`frames`]).

pub mod cache;
pub mod frames;
pub mod heap;
pub mod layout;
mod symbols;

pub(crate) use crate::process::locate::is_node;
pub use frames::{InJit, V8Frames, V8Stats};
pub use layout::{Layout, V8Error};

#[cfg(all(test, target_os = "linux"))]
mod reuse_tests;
#[cfg(all(test, target_os = "linux"))]
mod tests;
#[cfg(all(test, target_os = "linux"))]
mod walk_tests;
