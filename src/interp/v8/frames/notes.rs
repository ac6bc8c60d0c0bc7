//! What the summary (and so every report, SVG and JSON) says of the Node processes
//! read: why their JavaScript frames are unnamed when they are (a binary whose V8
//! description cannot be used, a stripped one, frames that did not check out), and
//! which budgets held the reader.

use super::V8Frames;
use crate::interp::Budgets;

impl V8Frames {
    /// Every process met from now on is read within `budgets`.
    pub fn set_budgets(&mut self, budgets: Budgets) {
        self.budgets = budgets;
    }

    /// What the summary says, one note each.
    pub fn notes(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .refused
            .iter()
            .map(|(pid, r)| {
                format!(
                    "JavaScript frames of process {pid} unnamed: {}; start node with \
                     --perf-basic-prof to name them from its perf map ({})",
                    r.why, r.path
                )
            })
            .collect();
        for (pid, n) in &self.nodes {
            if n.layout.builtins.is_none() {
                v.push(format!(
                    "interpreted JavaScript frames of process {pid} not named: {} has no \
                     symbol table (stripped), so V8's interpreter cannot be told from other \
                     code; optimized frames are named. Start node with --perf-basic-prof \
                     --interpreted-frames-native-stack to name them from its perf map",
                    n.path
                ));
            }
            let s = n.named.stats;
            let marked = s.unreadable + s.over_budget;
            if s.unreadable > 0 {
                let all = s.named + marked;
                v.push(format!(
                    "{} of {all} JavaScript frames of process {pid} ({:.1}%) are {}: their \
                     function did not check out (a frame being set up or torn down, an object \
                     the collector was moving, or a read refused)",
                    s.unreadable,
                    s.unreadable as f64 * 100.0 / all.max(1) as f64,
                    super::UNREADABLE_NAME,
                ));
            }
            let trips = n.named.trips.describe(&self.budgets);
            if !trips.is_empty() {
                v.push(format!(
                    "process {pid}'s JavaScript reader kept within its budgets \
                     (docs/security.md): {}",
                    trips.join("; ")
                ));
            }
        }
        v.sort();
        v
    }
}
