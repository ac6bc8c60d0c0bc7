//! The names a process's Python frames are given: one id per distinct (function,
//! file, line), which becomes the frames' address in the recording, each text kept
//! once however many lines and code objects share it. Names are never let go (the
//! recording's samples refer to them by id), so they have a budget of their own, half
//! the process's bytes: past it, a frame whose name would be new is [`BUDGET`].

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::FrameName;
use crate::interp::budget::Meter;

/// The id of the frame that stands for a Python frame whose name the names budget
/// could not keep.
pub const BUDGET: u64 = u64::MAX;

/// Its name.
pub const BUDGET_NAME: &str = "[python: budget]";

/// Distinct names kept at most, whatever their bytes.
const MAX_NAMES: usize = 1 << 20;

/// What one name costs besides its texts: its entries in both maps.
const ENTRY_BYTES: usize = 96;

/// What one text costs besides its bytes: its entry and its allocation.
const TEXT_BYTES: usize = 48;

/// The names of one process's Python frames.
#[derive(Default)]
pub(super) struct Names {
    ids: HashMap<FrameName, u64>,
    /// By id (index `id - 1`).
    names: Vec<FrameName>,
    texts: HashSet<Arc<str>>,
    /// Bytes kept, on the process's meter too.
    bytes: usize,
}

impl Names {
    /// The name of `id` (ids start at 1).
    pub(super) fn get(&self, id: u64) -> Option<&FrameName> {
        self.names.get(usize::try_from(id.checked_sub(1)?).ok()?)
    }

    /// The id of `function` of `file` at `line`, given now if it is new and fits the
    /// budget; None if it does not.
    pub(super) fn id(
        &mut self,
        meter: &mut Meter,
        function: &str,
        file: &str,
        line: Option<u32>,
    ) -> Option<u64> {
        let known = |t: &str| self.texts.get(t).cloned();
        let (f, fl) = (known(function), known(file));
        if let (Some(function), Some(file)) = (&f, &fl)
            && let Some(&id) = self.ids.get(&FrameName {
                function: function.clone(),
                file: file.clone(),
                line,
            })
        {
            return Some(id);
        }
        let text_cost = |t: &Option<Arc<str>>, s: &str| match t {
            Some(_) => 0,
            None => s.len() + TEXT_BYTES,
        };
        let cost = ENTRY_BYTES + text_cost(&f, function) + text_cost(&fl, file);
        if self.names.len() >= MAX_NAMES || self.bytes + cost > meter.budgets().process_bytes / 2 {
            return None;
        }
        let mut intern = |known: Option<Arc<str>>, s: &str| {
            known.unwrap_or_else(|| {
                let t: Arc<str> = Arc::from(s);
                self.texts.insert(t.clone());
                t
            })
        };
        let name = FrameName {
            function: intern(f, function),
            file: intern(fl, file),
            line,
        };
        self.bytes += cost;
        meter.add(cost);
        self.names.push(name.clone());
        let id = self.names.len() as u64;
        self.ids.insert(name, id);
        Some(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::budget::{Budgets, Pool};

    #[test]
    fn texts_are_kept_once_and_the_budget_holds() {
        let budgets = Budgets {
            process_bytes: 2 * (ENTRY_BYTES * 4 + 2 * TEXT_BYTES + 1500),
            ..Budgets::default()
        };
        let mut meter = Meter::new(Pool::default(), budgets);
        let mut n = Names::default();
        let long = "f".repeat(1000);
        let a = n.id(&mut meter, &long, "m.py", Some(1)).unwrap();
        assert_eq!(n.id(&mut meter, &long, "m.py", Some(1)), Some(a));
        // Another line of the same function costs an entry, not its text again.
        let before = meter.kept();
        let b = n.id(&mut meter, &long, "m.py", Some(2)).unwrap();
        assert_eq!(meter.kept() - before, ENTRY_BYTES);
        assert_ne!(a, b);
        assert_eq!(&*n.get(b).unwrap().function, long.as_str());
        // A second long text does not fit: refused, the names kept stay.
        assert_eq!(n.id(&mut meter, &"g".repeat(1000), "m.py", None), None);
        assert_eq!(n.get(a).unwrap().line, Some(1));
        assert_eq!(n.id(&mut meter, &long, "m.py", Some(1)), Some(a));
    }
}
