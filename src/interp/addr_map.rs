//! Maps keyed by address, for the caches read on every sample (pages of a target's
//! memory, what is known of a JIT code address): SipHash, the default, was a tenth of
//! the JIT step's time; addresses need only a multiply and a rotate.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A hasher for addresses: a multiply and a rotate.
#[derive(Default)]
pub struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(26);
    }
}

/// A map keyed by address.
pub type AddrMap<V> = HashMap<u64, V, BuildHasherDefault<AddrHasher>>;
