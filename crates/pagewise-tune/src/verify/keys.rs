//! Keys, values and a small random generator for the verification runs.
//!
//! Loaded records have even numbers 0, 2, 4, ...; inserts of new keys use odd
//! numbers, so they land between loaded keys all over the tree.

/// `key_bytes` bytes: the number big-endian in the first 8, zeros after, so
/// byte order is number order. Requires `key_bytes >= 8`.
pub fn key(n: u64, key_bytes: u64) -> Vec<u8> {
    assert!(key_bytes >= 8);
    let mut k = vec![0u8; key_bytes as usize];
    k[..8].copy_from_slice(&n.to_be_bytes());
    k
}

/// `value_bytes` bytes derived from `n` (not all zeros, so nothing along
/// the way can shortcut them).
pub fn value(n: u64, value_bytes: u64) -> Vec<u8> {
    let mut r = Rng(n ^ 0x5eed);
    let mut v = Vec::with_capacity(value_bytes as usize);
    while (v.len() as u64) < value_bytes {
        v.extend_from_slice(&r.next().to_le_bytes());
    }
    v.truncate(value_bytes as usize);
    v
}

/// splitmix64: fast, seedable, good enough to pick keys.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n (n >= 1).
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n >= 1);
        ((self.next() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The `i`-th record of the scattered order over 0..rows that `step` (from
/// [`coprime_step`]) gives.
pub fn nth(i: u64, step: u64, rows: u64) -> u64 {
    (i as u128 * step as u128 % rows as u128) as u64
}

/// A step coprime with `n`, so i -> i x step mod n visits 0..n once each in
/// a scattered order.
pub fn coprime_step(n: u64) -> u64 {
    assert!(n >= 1);
    let gcd = |mut a: u64, mut b: u64| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let mut s = (0x9e37_79b9_7f4a_7c15u64 % n).max(1);
    // Bounded: consecutive integers include one coprime with n within
    // fewer than 64 x ln(n) steps; give up at n (step 1 is coprime).
    for _ in 0..n.min(1 << 20) {
        if gcd(s, n) == 1 {
            return s;
        }
        s = s % n + 1;
    }
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_like_their_numbers() {
        let ks: Vec<Vec<u8>> = [0u64, 1, 255, 256, 1 << 40]
            .iter()
            .map(|&n| key(n, 16))
            .collect();
        assert!(ks.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(ks[0].len(), 16);
        assert_eq!(value(7, 100).len(), 100);
        assert_ne!(value(7, 100), value(8, 100));
    }

    #[test]
    fn below_stays_in_range() {
        let mut r = Rng(1);
        assert!((0..10_000).all(|_| r.below(3) < 3));
        assert!((0..1000).all(|_| (0.0..1.0).contains(&r.unit())));
    }
}
