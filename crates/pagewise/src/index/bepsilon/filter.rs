//! Key filters of internal nodes' buffers: one Bloom filter per buffer,
//! stored in the node shell after the child references, so a point read
//! whose buffer is not in memory skips reading it when the key cannot be
//! there. Format and hash: docs/design.md, "B-epsilon nodes", buffer key
//! filters (the hash is part of the format: never change it).

use std::sync::Arc;

/// Filter bits per distinct key the writer allots.
pub const BITS_PER_KEY: usize = 10;
/// Probes per key the writer uses (about 0.8% false positives at 10 bits).
pub const PROBES: u8 = 6;
/// Most probes a stored node may declare (bounds every probe loop).
pub const MAX_PROBES: u8 = 16;

/// A Bloom filter over the keys of one buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    probes: u8,
    bits: Arc<[u8]>,
}

/// 64-bit FNV-1a of `key`, then a 64-bit finalizer (docs/design.md).
pub fn key_hash(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// Bytes of the filter the writer builds for `keys` distinct keys (0 for
/// none: an empty buffer needs no filter to be skipped).
pub fn filter_bytes(keys: usize) -> usize {
    (keys * BITS_PER_KEY).div_ceil(8)
}

impl Filter {
    /// A filter with `probes` probes over `keys`, sized by [`filter_bytes`].
    pub fn build<'a>(keys: impl ExactSizeIterator<Item = &'a [u8]>, probes: u8) -> Filter {
        assert!((1..=MAX_PROBES).contains(&probes));
        let mut bits = vec![0u8; filter_bytes(keys.len())];
        let m = bits.len() as u64 * 8;
        for key in keys {
            for x in probe_bits(key_hash(key), m, probes) {
                bits[(x / 8) as usize] |= 1 << (x % 8);
            }
        }
        Filter {
            probes,
            bits: bits.into(),
        }
    }

    /// A stored filter. Requires: `probes` in 1..=[`MAX_PROBES`] (the
    /// decoder checks it first).
    pub fn from_stored(probes: u8, bytes: &[u8]) -> Filter {
        assert!((1..=MAX_PROBES).contains(&probes));
        Filter {
            probes,
            bits: bytes.into(),
        }
    }

    /// False only if `key` was not among the keys the filter was built of.
    pub fn may_contain(&self, key: &[u8]) -> bool {
        self.may_contain_hash(key_hash(key))
    }

    /// [`Self::may_contain`] of a key whose [`key_hash`] is `h` (a get
    /// hashes its key once for every filter on its path).
    #[inline]
    pub fn may_contain_hash(&self, h: u64) -> bool {
        if self.bits.is_empty() {
            return false; // built over no key
        }
        let m = self.bits.len() as u64 * 8;
        probe_bits(h, m, self.probes).all(|x| self.bits[(x / 8) as usize] & (1 << (x % 8)) != 0)
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bits
    }
}

fn split(h: u64) -> (u64, u64) {
    (h & 0xffff_ffff, (h >> 32) | 1)
}

/// The bits `(h1 + j * h2) mod m` that probes `j = 0..probes` of a key
/// hashing to `h` set or test (docs/design.md, buffer key filters), with
/// two divisions per key instead of one per probe: `h1` and `h2` are below
/// 2^32 and `j` at most 16, so `h1 + j * h2` never wraps, and adding `h2
/// mod m` to the previous bit, less `m` when it reaches `m`, is the same
/// residue.
#[inline]
fn probe_bits(h: u64, m: u64, probes: u8) -> impl Iterator<Item = u64> {
    assert!(m > 0 && probes <= MAX_PROBES);
    let (h1, h2) = split(h);
    let step = h2 % m;
    let mut x = h1 % m;
    (0..probes).map(move |_| {
        let bit = x;
        x += step;
        if x >= m {
            x -= m;
        }
        debug_assert!(bit < m);
        bit
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_false_negatives_and_few_false_positives() {
        let keys: Vec<Vec<u8>> = (0..5000u32)
            .map(|i| format!("k{i:08}").into_bytes())
            .collect();
        let f = Filter::build(keys.iter().map(Vec::as_slice), PROBES);
        assert_eq!(f.bytes().len(), filter_bytes(5000));
        assert!(keys.iter().all(|k| f.may_contain(k)), "a false negative");
        let fp = (0..20_000u32)
            .filter(|i| f.may_contain(format!("x{i:08}").as_bytes()))
            .count();
        // 10 bits per key, 6 probes: 0.84% expected.
        assert!(fp < 20_000 / 50, "{fp} false positives in 20,000");
        let empty = Filter::build(std::iter::empty(), PROBES);
        assert!(empty.bytes().is_empty() && !empty.may_contain(b"k00000001"));
        let again = Filter::from_stored(PROBES, f.bytes());
        assert_eq!(again, f);
    }

    /// The stepped residues are the stored format's `(h1 + j * h2) mod m`.
    #[test]
    fn probe_bits_are_the_formula() {
        for (i, m) in (0..3000u64).zip([8u64, 24, 808, 4096, 65_528, 800_000].iter().cycle()) {
            let h = key_hash(&i.to_le_bytes());
            let (h1, h2) = split(h);
            let want: Vec<u64> = (0..MAX_PROBES as u64)
                .map(|j| h1.wrapping_add(j.wrapping_mul(h2)) % m)
                .collect();
            let got: Vec<u64> = probe_bits(h, *m, MAX_PROBES).collect();
            assert_eq!(got, want, "key {i}, m {m}");
        }
    }

    /// The hash is part of the stored format: pinned by hand-computed values
    /// (FNV-1a of "" is the offset basis; "a" is 0xaf63dc4c8601ec8c).
    #[test]
    fn key_hash_is_pinned() {
        let fin = |mut h: u64| {
            h ^= h >> 33;
            h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
            h ^= h >> 33;
            h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
            h ^ (h >> 33)
        };
        assert_eq!(key_hash(b""), fin(0xcbf2_9ce4_8422_2325));
        assert_eq!(key_hash(b"a"), fin(0xaf63_dc4c_8601_ec8c));
    }
}
