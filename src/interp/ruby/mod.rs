//! CRuby's frames read from outside, with no flag and the target never stopped
//! (issue 49): what the stripped `libruby` still exports and the per-version offsets
//! of its structs ([`layout`]), a thread's control frames and what each ran, read and
//! checked ([`walk`]), the names of the classes that own their methods
//! ([`classes`]), and the frames of a sample's stack named from them
//! ([`frames`]).

pub mod classes;
pub mod forged;
pub mod frames;
pub mod layout;
pub mod walk;

pub use frames::{RubyFrames, RubyStats, Sampled};
pub use layout::{Layout, RubyError, Symbols, is_ruby};

#[cfg(all(test, target_os = "linux"))]
mod tests;
