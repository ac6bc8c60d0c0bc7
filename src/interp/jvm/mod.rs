//! HotSpot's Java frames read from outside (issue 30).

pub mod ahead;
pub mod code;
pub mod compiled;
pub mod epochs;
pub mod frames;
pub mod inlined;
pub mod method;
mod named;
pub mod vmstructs;

pub use code::HeapCode;
pub use frames::{JavaFrames, JavaStats};

#[cfg(all(test, target_os = "linux"))]
mod ahead_tests;
#[cfg(all(test, target_os = "linux"))]
mod inlined_tests;
#[cfg(all(test, target_os = "linux"))]
mod tests;
