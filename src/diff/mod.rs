//! `profile diff`: compare a BASE profile with a NEW one, function by function, and
//! say with a stated error rate whether some function got slower.
//!
//! Each side is one or more runs ([`input::Run`]: a recording or a folded file). For
//! every function the comparison ([`mod@compare`]) takes its self and total (inclusive)
//! CPU time per run (several recordings a side from one kind of machine) or share of
//! each run's CPU samples (otherwise), tests whether NEW is above BASE on the log
//! scale of their ratio with the sampling noise of single runs and the measured
//! run-to-run spread of several ([`stats`]); the whole run's CPU time is a row too.
//! Time under an interrupt entry is the machine's: it is set apart before any of that
//! ([`interrupts`]) and shown on a line of its own.
//! It corrects for testing all rows at once with a weighted Holm procedure (the whole
//! run first, then the largest functions' self time, then the rest: `judge`), and gives every
//! row a verdict and the confidence interval it rests on. The outputs are a terminal table
//! or markdown ([`table`]), JSON ([`json`]) and a differential flame graph
//! ([`flamegraph`]). docs/ci.md describes the method for users.

pub mod compare;
pub mod flamegraph;
pub mod input;
pub mod interrupts;
pub mod json;
mod judge;
pub mod row;
pub mod stats;
pub mod summary;
pub mod table;
pub mod whole;

pub use compare::{
    Basis, CompareError, CompareOptions, Comparison, Interrupts, Machine, Metric, Row, Unit,
    Verdict, WHOLE_RUN, compare,
};
pub use input::{FoldedUnit, InputError, InputKind, Run};

#[cfg(test)]
mod tests;
