//! `profile diff`: compare a BASE profile with a NEW one, function by function, and
//! say with a stated error rate whether some function got slower.
//!
//! Each side is one or more runs ([`input::Run`]: a recording or a folded file). For
//! every function the comparison ([`mod@compare`]) takes its self and total (inclusive)
//! share of each run's CPU samples (or, with `absolute`, its CPU time per run), tests
//! whether NEW is above BASE on the log scale of their ratio with the sampling noise
//! of single runs and the measured run-to-run spread of several ([`stats`]), corrects
//! for testing all functions at once with Holm's procedure, and gives every row a
//! verdict and the confidence interval it rests on. The outputs are a terminal table
//! or markdown ([`table`]), JSON ([`json`]) and a differential flame graph
//! ([`flamegraph`]). docs/ci.md describes the method for users.

pub mod compare;
pub mod flamegraph;
pub mod input;
pub mod json;
pub mod stats;
pub mod table;

pub use compare::{CompareError, CompareOptions, Comparison, Metric, Row, Unit, Verdict, compare};
pub use input::{FoldedUnit, InputError, InputKind, Run};

#[cfg(test)]
mod tests;
