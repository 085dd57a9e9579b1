//! A fast non-cryptographic hasher for the planner's lookup tables.
//!
//! The planner hashes a few hundred thousand short keys (UUID strings,
//! addresses) per plan; `SipHash`'s flood resistance buys nothing here (keys
//! come from the cloud's admin APIs, and a collision flood could only slow a
//! plan down, never change it: every output is sorted and every tie broken
//! explicitly), so a multiply-rotate word hasher is used instead.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// Word-at-a-time multiply-rotate hasher.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct WordHasher {
    state: u64,
}

/// An odd constant with well-mixed bits (from the golden ratio).
const SEED: u64 = 0x9e37_79b9_7f4a_7c15;

impl WordHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.state = (self.state.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for WordHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    /// A multiply only carries entropy upwards, while the table picks its
    /// bucket from the low bits: fold the high half down (the 64-bit
    /// finaliser of `MurmurHash3`) or keys differing late collide.
    #[inline]
    fn finish(&self) -> u64 {
        let mut x = self.state;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x
    }
}

pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<WordHasher>>;
pub(crate) type FastSet<K> = HashSet<K, BuildHasherDefault<WordHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_keys_hash_apart_and_maps_work() {
        let mut m: FastMap<String, usize> = FastMap::default();
        for i in 0..10_000 {
            m.insert(format!("{i:08x}-0000-4000-8000-{i:012x}"), i);
        }
        assert_eq!(m.len(), 10_000);
        assert_eq!(m["0000002a-0000-4000-8000-00000000002a"], 42);
        let mut a = WordHasher::default();
        a.write(b"abc");
        let mut b = WordHasher::default();
        b.write(b"abd");
        assert_ne!(a.finish(), b.finish());
        // Keys differing only in their last bytes must still spread over
        // the low bits, which pick the bucket.
        let low: FastSet<u64> = (0..1024u32)
            .map(|i| {
                let mut h = WordHasher::default();
                h.write(format!("00000000-0000-4000-8000-00000000{i:04x}").as_bytes());
                h.finish() & 0x3ff
            })
            .collect();
        assert!(
            low.len() > 500,
            "only {} distinct low-bit patterns",
            low.len()
        );
    }
}
