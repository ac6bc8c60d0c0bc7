//! What the summary (and so every report) says of the Ruby processes read: why a
//! process's frames are not read, how many were marked and why, which budgets held
//! the reader.

use super::{MOVED_NAME, RubyFrames, UNREADABLE_NAME};

impl RubyFrames {
    /// What the summary says, one note each.
    pub fn notes(&self) -> Vec<String> {
        let mut v: Vec<String> = (self.refused.iter())
            .map(|(pid, (path, why))| {
                format!("Ruby frames of process {pid} not read: {why} ({path})")
            })
            .collect();
        for (pid, p) in &self.procs {
            if let Some(Err(why)) = &p.ready {
                v.push(format!(
                    "Ruby frames of process {pid} not read: {why} ({})",
                    p.path
                ));
                continue;
            }
            let s = p.stats;
            if s.unreadable > 0 {
                v.push(format!(
                    "{} of {} Ruby frames of process {pid} are {UNREADABLE_NAME}: the \
                     thread's frames did not check out (being set up, or a read refused)",
                    s.unreadable,
                    s.named + s.unreadable
                ));
            }
            if s.moved > 0 {
                v.push(format!(
                    "{} samples of Ruby process {pid} have their innermost Ruby frames \
                     {MOVED_NAME}: the thread had left them when they were read, and the \
                     sample's registers did not place them ({} samples were read where \
                     their registers pointed)",
                    s.moved, s.at_sample
                ));
            }
            if let Some(Ok(r)) = &p.ready
                && r.table.is_none()
            {
                v.push(format!(
                    "C methods of Ruby process {pid} ({}) named by their owner only: its \
                     symbol table was not found",
                    r.version
                ));
            }
            let trips = p.trips.describe(&self.budgets);
            if !trips.is_empty() {
                v.push(format!(
                    "process {pid}'s Ruby reader kept within its budgets \
                     (docs/security.md): {}",
                    trips.join("; ")
                ));
            }
        }
        v.sort();
        v
    }
}
