//! crc32c of a part of a page from the same pass that checks the page: a
//! base page's payload crc (which a delta block names, docs/design.md,
//! "Delta blocks for B+tree pages") without a second pass over the payload.
//!
//! CRCs are linear over GF(2): crc(A || B) = crc(A) * x^(8 |B|) + crc(B)
//! (mod the polynomial), with the standard pre and post inversion of
//! CRC-32C cancelling out. So from crc(A) and crc(B) the crc of A || B
//! costs one multiplication by x^(8 |B|), built from a table of
//! x^(2^k) mod P, not a pass over B.

/// CRC-32C (Castagnoli) polynomial, bit-reflected.
const POLY: u32 = 0x82f6_3b78;
/// The polynomial 1 (x^0) in the reflected representation.
const ONE: u32 = 1 << 31;
/// Table entries: x^(2^k) for k below this; covers 2^61 bytes.
const POWERS: usize = 64;

/// a * b mod P, both reflected (bit 31 is the coefficient of x^0).
fn mul_mod(a: u32, mut b: u32) -> u32 {
    let mut p = 0u32;
    // Bounded: one step per coefficient of `a`, from x^0 up; b = b * x^i.
    for i in 0..32 {
        let bit = ONE >> i;
        if a & bit != 0 {
            p ^= b;
        }
        if a & (bit - 1) == 0 {
            break; // no higher coefficient left
        }
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
    }
    p
}

/// x^(2^k) mod P for k in 0..POWERS.
fn powers() -> &'static [u32; POWERS] {
    static TABLE: std::sync::OnceLock<[u32; POWERS]> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = [0u32; POWERS];
        t[0] = ONE >> 1; // x^1
        for k in 1..POWERS {
            t[k] = mul_mod(t[k - 1], t[k - 1]);
        }
        t
    })
}

/// x^(8 * len_bytes) mod P.
fn shift_for(len_bytes: u64) -> u32 {
    let t = powers();
    let mut p = ONE;
    let mut n = len_bytes;
    let mut k = 3; // x^(8n) = x^(n * 2^3)
    while n != 0 {
        assert!(k < POWERS, "a crc over 2^61 bytes");
        if n & 1 != 0 {
            p = mul_mod(t[k], p);
        }
        n >>= 1;
        k += 1;
    }
    p
}

/// crc32c(A || B) from crc32c(A), crc32c(B) and B's length.
pub fn combine(crc_a: u32, crc_b: u32, len_b_bytes: usize) -> u32 {
    mul_mod(shift_for(len_b_bytes as u64), crc_a) ^ crc_b
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn combine_matches_one_pass() {
        let seed = rand::random::<u64>();
        println!("seed {seed}");
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut data = vec![0u8; 70_000];
        rng.fill(&mut data[..]);
        let cuts = [
            0, 1, 2, 7, 28, 31, 32, 4095, 4096, 16_352, 65_536, 69_999, 70_000,
        ];
        for &cut in &cuts {
            for &end in &cuts {
                if end < cut {
                    continue;
                }
                let (a, b) = (&data[..cut], &data[cut..end]);
                let whole = crc32c::crc32c(&data[..end]);
                assert_eq!(
                    combine(crc32c::crc32c(a), crc32c::crc32c(b), b.len()),
                    whole,
                    "cut {cut} end {end}"
                );
            }
        }
        // Random splits of a random prefix.
        for _ in 0..200 {
            let end = rng.gen_range(0..=data.len());
            let cut = rng.gen_range(0..=end);
            let (a, b) = (&data[..cut], &data[cut..end]);
            let got = combine(crc32c::crc32c(a), crc32c::crc32c(b), b.len());
            assert_eq!(got, crc32c::crc32c(&data[..end]), "cut {cut} end {end}");
        }
        // A hand check: x^0 times x^1 is x^1; the table's first entry is x^1.
        assert_eq!(mul_mod(ONE, ONE >> 1), ONE >> 1);
        assert_eq!(powers()[0], ONE >> 1);
    }
}
