//! The thread masks of the filters that pick threads: by thread, process or service.

use super::FilterError;
use crate::profile::Profile;

impl Profile {
    pub(super) fn thread_mask(&self, wanted: &[String]) -> Result<Vec<bool>, FilterError> {
        if wanted.is_empty() {
            return Ok(vec![true; self.threads.len()]);
        }
        let mut mask = vec![false; self.threads.len()];
        for w in wanted {
            let tid: Option<u32> = w.parse().ok();
            let mut any = false;
            for (i, t) in self.threads.iter().enumerate() {
                if t.name == *w || tid == Some(t.tid) {
                    mask[i] = true;
                    any = true;
                }
            }
            if !any {
                let mut have: Vec<String> = self
                    .threads
                    .iter()
                    .map(|t| format!("{} ({})", t.name, t.tid))
                    .collect();
                have.sort();
                have.dedup();
                return Err(FilterError::NoSuchThread(w.clone(), have.join(", ")));
            }
        }
        Ok(mask)
    }

    pub(super) fn service_mask(&self, wanted: &[String]) -> Result<Vec<bool>, FilterError> {
        if self.threads.iter().all(|t| t.service.is_none()) {
            return Err(FilterError::NoServices);
        }
        let mask: Vec<bool> = self
            .threads
            .iter()
            .map(|t| t.service.as_ref().is_some_and(|s| wanted.contains(s)))
            .collect();
        if !mask.contains(&true) {
            let mut have: Vec<&str> = self
                .threads
                .iter()
                .filter_map(|t| t.service.as_deref())
                .collect();
            have.sort_unstable();
            have.dedup();
            return Err(FilterError::NoSuchService(
                wanted.join(", "),
                have.join(", "),
            ));
        }
        Ok(mask)
    }

    /// Which threads are of a process named (its main thread's name) or numbered as
    /// one of `wanted`.
    pub(super) fn process_mask(&self, wanted: &[String]) -> Result<Vec<bool>, FilterError> {
        let mut mask = vec![false; self.threads.len()];
        for w in wanted {
            let pid: Option<u32> = w.parse().ok();
            let mut any = false;
            for (i, t) in self.threads.iter().enumerate() {
                if t.process == *w || pid == Some(t.pid) {
                    mask[i] = true;
                    any = true;
                }
            }
            if !any {
                let mut have: Vec<String> = self
                    .threads
                    .iter()
                    .map(|t| format!("{} ({})", t.process, t.pid))
                    .collect();
                have.sort();
                have.dedup();
                return Err(FilterError::NoSuchProcess(w.clone(), have.join(", ")));
            }
        }
        Ok(mask)
    }
}
