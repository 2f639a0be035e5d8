//! Key numbers, their byte encoding, and the distributions that pick them.

use rand::Rng;
use rand_distr::{Distribution as _, Zipf};
use serde::{Deserialize, Serialize};

/// Smallest key size: the key number is stored big-endian in the first 8 bytes,
/// so byte order equals number order and scans see keys in number order.
pub const MIN_KEY_SIZE: usize = 8;

/// Writes key number `n` as a `size`-byte key into `out` (cleared first).
/// Bytes after the first 8 are a filler derived from `n`, so keys are not
/// mostly zeros (which would flatter engines that compress keys).
pub fn encode_key_into(n: u64, size: usize, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&n.to_be_bytes());
    let mut h = mix64(n);
    while out.len() < size {
        out.push(b'a' + (h % 26) as u8);
        h = h.rotate_right(5) ^ 0x9e37_79b9_7f4a_7c15;
    }
    out.truncate(size.max(MIN_KEY_SIZE));
}

pub fn encode_key(n: u64, size: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(size);
    encode_key_into(n, size, &mut v);
    v
}

/// The key number of a key made by [`encode_key`].
pub fn decode_key(k: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(k.get(..8)?.try_into().ok()?))
}

/// SplitMix64 finaliser: a fast, well-mixed 64-bit hash.
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A pseudo-random bijection on `0..n` (4-round Feistel network with cycle
/// walking), so "random order" visits every key exactly once.
#[derive(Debug, Clone)]
pub struct Permutation {
    n: u64,
    half_bits: u32,
    seed: u64,
}

impl Permutation {
    pub fn new(n: u64, seed: u64) -> Self {
        let bits = 64 - n.max(2).saturating_sub(1).leading_zeros();
        Self {
            n,
            half_bits: bits.div_ceil(2).max(1),
            seed,
        }
    }

    fn feistel(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        let (mut l, mut r) = (x >> self.half_bits, x & mask);
        for round in 0..4u64 {
            let f = mix64(
                r ^ self
                    .seed
                    .wrapping_add(round.wrapping_mul(0x632b_e59b_d9b4_e019)),
            ) & mask;
            (l, r) = (r, l ^ f);
        }
        (l << self.half_bits) | r
    }

    /// The `i`-th element of the permutation (`i < n`).
    pub fn apply(&self, i: u64) -> u64 {
        debug_assert!(i < self.n);
        let mut x = self.feistel(i);
        while x >= self.n {
            x = self.feistel(x);
        }
        x
    }
}

/// How keys are chosen for reads and updates.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum KeyDist {
    Uniform,
    /// Zipfian with exponent `theta` (YCSB uses 0.99); hot items are scattered
    /// over the key space by a permutation, like YCSB's scrambled zipfian.
    Zipf {
        theta: f64,
    },
    /// YCSB "latest": zipfian over recency, the newest key hottest.
    Latest {
        theta: f64,
    },
}

/// A sampler of key numbers in `0..n` for one thread.
pub struct KeyPicker {
    dist: KeyDist,
    zipf: Option<Zipf<f64>>,
    zipf_n: u64,
    scramble: Permutation,
}

impl KeyPicker {
    pub fn new(dist: KeyDist, n: u64, seed: u64) -> Self {
        let n = n.max(1);
        let zipf = match dist {
            KeyDist::Uniform => None,
            KeyDist::Zipf { theta } | KeyDist::Latest { theta } => {
                Some(Zipf::new(n, theta).expect("theta > 0 checked when parsing"))
            }
        };
        Self {
            dist,
            zipf,
            zipf_n: n,
            scramble: Permutation::new(n, seed ^ 0x5eed),
        }
    }

    /// A key number below `n` (n may have grown since construction through inserts).
    pub fn pick(&self, rng: &mut impl Rng, n: u64) -> u64 {
        let n = n.max(1);
        match self.dist {
            KeyDist::Uniform => rng.gen_range(0..n),
            KeyDist::Zipf { .. } => {
                let rank = self.zipf.as_ref().expect("zipf").sample(rng) as u64 - 1;
                let rank = rank.min(self.zipf_n - 1);
                self.scramble.apply(rank) % n
            }
            KeyDist::Latest { .. } => {
                let rank = self.zipf.as_ref().expect("zipf").sample(rng) as u64 - 1;
                n - 1 - rank.min(n - 1)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn permutation_is_a_bijection() {
        for n in [1u64, 2, 3, 10, 1000, 4097] {
            let p = Permutation::new(n, 42);
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                let x = p.apply(i);
                assert!(x < n, "n={n} i={i} x={x}");
                assert!(!seen[x as usize], "n={n}: {x} twice");
                seen[x as usize] = true;
            }
        }
    }

    #[test]
    fn permutation_is_not_the_identity_order() {
        let p = Permutation::new(10_000, 7);
        let in_place = (0..10_000).filter(|&i| p.apply(i) == i).count();
        assert!(in_place < 50, "{in_place} fixed points");
    }

    #[test]
    fn keys_sort_by_number() {
        let mut keys: Vec<Vec<u8>> = [5u64, 300, 1, 70_000, 2]
            .iter()
            .map(|&n| encode_key(n, 16))
            .collect();
        keys.sort();
        let nums: Vec<u64> = keys.iter().map(|k| decode_key(k).unwrap()).collect();
        assert_eq!(nums, vec![1, 2, 5, 300, 70_000]);
        assert!(keys.iter().all(|k| k.len() == 16));
    }

    #[test]
    fn zipf_is_skewed_and_latest_prefers_new_keys() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let n = 10_000;
        let z = KeyPicker::new(KeyDist::Zipf { theta: 0.99 }, n, 3);
        let mut counts = std::collections::HashMap::new();
        for _ in 0..100_000 {
            *counts.entry(z.pick(&mut rng, n)).or_insert(0u32) += 1;
        }
        let top = *counts.values().max().unwrap();
        // Rank 1 of a zipf(0.99) over 10k items holds about 10% of the mass.
        assert!(top > 5_000, "hottest key only {top} of 100000");
        let l = KeyPicker::new(KeyDist::Latest { theta: 0.99 }, n, 3);
        let recent = (0..10_000)
            .filter(|_| l.pick(&mut rng, n) >= n - 100)
            .count();
        assert!(
            recent > 5_000,
            "only {recent} of 10000 picks in the newest 100 keys"
        );
    }
}
