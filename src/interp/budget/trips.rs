//! What tripped, counted per process for the summary.

use super::{Budgets, Spent};

/// How often each budget tripped for one process, for the summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Trips {
    /// Cache entries let go to stay within the bytes budgets.
    pub evicted: u64,
    /// Tables refused outright: larger than their code could need.
    pub refused: u64,
    /// Names not kept: the names budget was spent.
    pub names: u64,
    /// Walks that met a loop.
    pub looped: u64,
    /// Walks cut at their node bound.
    pub bounded: u64,
    /// Samples given up for their reads budget.
    pub reads: u64,
    /// Samples given up for their CPU budget.
    pub cpu: u64,
}

impl Trips {
    /// Whether anything tripped.
    pub fn any(&self) -> bool {
        *self != Trips::default()
    }

    /// Counts a sample's [`Spent`].
    pub fn spent(&mut self, s: Option<Spent>) {
        match s {
            Some(Spent::Reads) => self.reads += 1,
            Some(Spent::Cpu) => self.cpu += 1,
            None => {}
        }
    }

    /// What tripped, in words (empty when nothing did).
    pub fn describe(&self, budgets: &Budgets) -> Vec<String> {
        let mib = |b: usize| b as f64 / (1 << 20) as f64;
        let mut out = Vec::new();
        if self.evicted > 0 {
            out.push(format!(
                "{} cached entries let go to keep within {:.0} MiB per process ({:.0} MiB \
                 in all)",
                self.evicted,
                mib(budgets.process_bytes),
                mib(budgets.total_bytes)
            ));
        }
        if self.refused > 0 {
            out.push(format!(
                "{} line tables refused, larger than their code could need (their frames \
                 keep their names, without a line)",
                self.refused
            ));
        }
        if self.names > 0 {
            out.push(format!(
                "{} frames not named: the names budget was spent",
                self.names
            ));
        }
        if self.looped > 0 {
            out.push(format!(
                "{} walks of its thread list met a loop",
                self.looped
            ));
        }
        if self.bounded > 0 {
            out.push(format!(
                "{} walks of its thread list cut at {} nodes",
                self.bounded, budgets.walk_nodes
            ));
        }
        if self.reads > 0 {
            out.push(format!(
                "{} samples given up after {} reads",
                self.reads, budgets.sample_reads
            ));
        }
        if self.cpu > 0 {
            out.push(format!(
                "{} samples given up after {} ms of CPU",
                self.cpu,
                budgets.sample_cpu.as_secs_f64() * 1e3
            ));
        }
        out
    }
}
