//! The unwinder's rule cache: a fixed-size, direct-mapped table from (module, SVMA) to
//! the [`RuleLookup`] computed for it, so the CFI of a hot return address is parsed and
//! evaluated once rather than on every sample.
//!
//! Direct-mapped because a profile's return addresses repeat exactly from sample to
//! sample: a lookup is one hash and one compare, a miss simply overwrites the slot, and
//! the memory is bounded (slots × 88 bytes).

use super::cfi::RuleLookup;

#[derive(Debug, Clone, Copy)]
struct Slot {
    module: u64,
    svma: u64,
    rule: RuleLookup,
}

/// A direct-mapped cache of unwind rules.
#[derive(Debug)]
pub(crate) struct RuleCache {
    slots: Vec<Option<Slot>>,
    shift: u32,
}

impl RuleCache {
    /// A cache with `slots` entries, rounded up to a power of two (0 disables caching).
    pub(super) fn new(slots: usize) -> RuleCache {
        let slots = if slots == 0 {
            0
        } else {
            slots.next_power_of_two()
        };
        RuleCache {
            slots: vec![None; slots],
            shift: 64 - slots.max(1).trailing_zeros(),
        }
    }

    fn index(&self, module: u64, svma: u64) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        // Fibonacci hashing of the mixed key; the top bits pick the slot.
        let key = svma ^ module.rotate_left(40);
        let hash = key.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let index = if self.shift >= 64 {
            0
        } else {
            hash >> self.shift
        };
        usize::try_from(index).ok()
    }

    pub(super) fn get(&self, module: u64, svma: u64) -> Option<RuleLookup> {
        let slot = self.slots.get(self.index(module, svma)?)?.as_ref()?;
        (slot.module == module && slot.svma == svma).then_some(slot.rule)
    }

    pub(super) fn insert(&mut self, module: u64, svma: u64, rule: RuleLookup) {
        if let Some(i) = self.index(module, svma)
            && let Some(slot) = self.slots.get_mut(i)
        {
            *slot = Some(Slot { module, svma, rule });
        }
    }

    pub(super) fn clear(&mut self) {
        self.slots.iter_mut().for_each(|s| *s = None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hit_after_insert_and_miss_for_other_module() {
        let mut cache = RuleCache::new(100);
        assert_eq!(cache.slots.len(), 128);
        cache.insert(1, 0x1000, RuleLookup::NoFde);
        assert_eq!(cache.get(1, 0x1000), Some(RuleLookup::NoFde));
        assert_eq!(cache.get(2, 0x1000), None);
        assert_eq!(cache.get(1, 0x1001), None);
        cache.clear();
        assert_eq!(cache.get(1, 0x1000), None);
    }

    #[test]
    fn slots_stay_small() {
        // The memory bound quoted in the module docs and in UnwindOptions.
        assert!(std::mem::size_of::<Option<Slot>>() <= 96);
    }

    #[test]
    fn zero_and_one_slot_caches_work() {
        let mut off = RuleCache::new(0);
        off.insert(1, 2, RuleLookup::Bad);
        assert_eq!(off.get(1, 2), None);
        let mut one = RuleCache::new(1);
        one.insert(1, 2, RuleLookup::Bad);
        assert_eq!(one.get(1, 2), Some(RuleLookup::Bad));
        one.insert(1, 3, RuleLookup::NoFde);
        assert_eq!(one.get(1, 2), None);
    }
}
