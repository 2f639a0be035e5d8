//! Value bytes with a chosen compressibility, deterministic per (key, version)
//! so a reader can check what a writer wrote.

use crate::keys::mix64;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

/// How compressible values are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compressibility {
    /// Uniform random bytes: incompressible.
    Random,
    /// First half random, second half zeros: compresses to about half.
    Half,
    /// Words from a small vocabulary separated by spaces, like log lines.
    Text,
}

impl std::str::FromStr for Compressibility {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "random" => Ok(Self::Random),
            "half" | "half-zeros" => Ok(Self::Half),
            "text" | "text-like" => Ok(Self::Text),
            _ => Err(format!(
                "unknown value kind {s:?}: use random, half or text"
            )),
        }
    }
}

const POOL: usize = 1 << 20;
const WORDS: &[&str] = &[
    "select",
    "insert",
    "update",
    "delete",
    "from",
    "where",
    "order",
    "customer",
    "price",
    "register",
    "product",
    "status",
    "ok",
    "error",
    "timeout",
    "user",
    "session",
    "GET",
    "POST",
    "/api/v1/items",
    "200",
    "404",
    "500",
    "latency_ms",
    "db01",
    "db02",
    "cache",
    "miss",
    "hit",
];

/// Produces values of `size` bytes from a 1 MiB pool of the chosen kind.
#[derive(Debug, Clone)]
pub struct ValueGen {
    kind: Compressibility,
    size: usize,
    pool: Vec<u8>,
}

impl ValueGen {
    pub fn new(kind: Compressibility, size: usize, seed: u64) -> Self {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let len = POOL + size;
        let pool = match kind {
            Compressibility::Random | Compressibility::Half => {
                let mut p = vec![0u8; len];
                rng.fill(&mut p[..]);
                p
            }
            Compressibility::Text => {
                let mut p = Vec::with_capacity(len + 32);
                while p.len() < len {
                    p.extend_from_slice(WORDS[rng.gen_range(0..WORDS.len())].as_bytes());
                    p.push(if rng.gen_ratio(1, 12) { b'\n' } else { b' ' });
                }
                p.truncate(len);
                p
            }
        };
        Self { kind, size, pool }
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// The value of key `key` at write `version` (0 for the load).
    pub fn value_into(&self, key: u64, version: u64, out: &mut Vec<u8>) {
        let off = (mix64(key ^ version.wrapping_mul(0x2545_f491_4f6c_dd1d)) as usize) % POOL;
        out.clear();
        out.extend_from_slice(&self.pool[off..off + self.size]);
        if self.kind == Compressibility::Half {
            let half = self.size / 2;
            out[self.size - half..].fill(0);
        }
    }

    pub fn value(&self, key: u64, version: u64) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.size);
        self.value_into(key, version, &mut v);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Compressed/raw size, each value compressed on its own (like a 4 KiB block).
    fn lz4_ratio(g: &ValueGen) -> f64 {
        let (mut raw, mut packed) = (0, 0);
        for k in 0..200 {
            let v = g.value(k, 0);
            raw += v.len();
            packed += lz4_flex::compress(&v).len();
        }
        packed as f64 / raw as f64
    }

    #[test]
    fn deterministic_and_sized() {
        let g = ValueGen::new(Compressibility::Random, 100, 9);
        assert_eq!(g.value(5, 0), g.value(5, 0));
        assert_ne!(g.value(5, 0), g.value(5, 1));
        assert_eq!(g.value(5, 0).len(), 100);
    }

    #[test]
    fn compressibility_is_what_it_says() {
        let r = lz4_ratio(&ValueGen::new(Compressibility::Random, 4096, 1));
        let h = lz4_ratio(&ValueGen::new(Compressibility::Half, 4096, 1));
        let t = lz4_ratio(&ValueGen::new(Compressibility::Text, 4096, 1));
        assert!(r > 0.98, "random compressed to {r}");
        assert!((0.45..0.6).contains(&h), "half-zeros compressed to {h}");
        assert!(t < 0.6, "text compressed to only {t}");
    }
}
