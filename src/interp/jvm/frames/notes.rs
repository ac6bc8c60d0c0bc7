//! What the summary says of the JVMs read: why a JVM's tables could not be read, and
//! which budgets held its reader; and the budgets every JVM is read within.

use super::JavaFrames;
use crate::interp::Budgets;

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
        v
    }
}
