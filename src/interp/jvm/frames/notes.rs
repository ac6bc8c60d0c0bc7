//! What the summary says of the JVMs read: why a JVM's tables could not be read, and
//! which budgets held its reader; and the budgets every JVM is read within.

use super::JavaFrames;
use crate::interp::Budgets;
use crate::interp::jvm::ahead::Unread;

impl JavaFrames {
    /// Every JVM met from now on is read within `budgets`.
    pub fn set_budgets(&mut self, budgets: Budgets) {
        self.budgets = budgets;
    }

    /// Why the tables of JVMs could not be read, one note each.
    pub fn notes(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .jvms
            .iter()
            .filter(|(_, j)| j.ready.is_none())
            .filter_map(|(pid, j)| {
                let e = j.last_error.as_ref()?;
                Some(format!(
                    "interpreted Java methods of process {pid} not named: {e}"
                ))
            })
            .collect();
        v.extend(self.jvms.iter().filter_map(|(pid, j)| {
            let trips = j.named.trips.describe(&self.budgets);
            (!trips.is_empty()).then(|| {
                format!(
                    "process {pid}'s Java reader kept within its budgets (docs/security.md): {}",
                    trips.join("; ")
                )
            })
        }));
        v.sort();
        v.extend(self.unread_note());
        v
    }

    /// How many compiled Java frames were left unread (named as the perf map names
    /// them, with no line and no inlined methods), and why (issue 48).
    fn unread_note(&self) -> Option<String> {
        let s = &self.stats;
        let unread: u64 = s.unread.iter().sum();
        if unread == 0 {
            return None;
        }
        let all = unread + s.compiled;
        let why: Vec<String> = Unread::ALL
            .iter()
            .zip(s.unread)
            .filter(|&(_, n)| n > 0)
            .map(|(w, n)| format!("{n} {}", w.describe()))
            .collect();
        Some(format!(
            "{unread} of {all} compiled Java frames ({:.1}%) have no line and no inlined \
             methods: {}",
            unread as f64 * 100.0 / all as f64,
            why.join("; ")
        ))
    }
}
