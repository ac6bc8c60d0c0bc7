//! The thread masks of the filters that pick threads: by thread, process or service.

use super::FilterError;
use crate::profile::{Profile, Thread};

impl Profile {
    /// The threads with one of the names or tids of `wanted` (every thread when
    /// `wanted` is empty).
    pub(super) fn thread_mask(&self, wanted: &[String]) -> Result<Vec<bool>, FilterError> {
        if wanted.is_empty() {
            return Ok(vec![true; self.threads.len()]);
        }
        self.mask_by(wanted, |t| (&t.name, t.tid), FilterError::NoSuchThread)
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
        self.mask_by(wanted, |t| (&t.process, t.pid), FilterError::NoSuchProcess)
    }

    /// The threads whose `key` (a name and a number) matches one of `wanted`, by name
    /// or number; each of `wanted` must match one, or `missing` says which did not
    /// and lists the keys there are.
    fn mask_by(
        &self,
        wanted: &[String],
        key: impl Fn(&Thread) -> (&String, u32),
        missing: fn(String, String) -> FilterError,
    ) -> Result<Vec<bool>, FilterError> {
        let mut mask = vec![false; self.threads.len()];
        for w in wanted {
            let number: Option<u32> = w.parse().ok();
            let mut any = false;
            for (i, t) in self.threads.iter().enumerate() {
                let (name, n) = key(t);
                if name == w || number == Some(n) {
                    mask[i] = true;
                    any = true;
                }
            }
            if !any {
                let mut have: Vec<String> = (self.threads.iter())
                    .map(|t| {
                        let (name, n) = key(t);
                        format!("{name} ({n})")
                    })
                    .collect();
                have.sort();
                have.dedup();
                return Err(missing(w.clone(), have.join(", ")));
            }
        }
        Ok(mask)
    }
}
