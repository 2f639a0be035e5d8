//! Offset distributions over aligned slots.
//!
//! A file of `size` bytes read with block size `bs` at alignment `align` has
//! `n = (size - bs) / align + 1` slots; slot `s` starts at byte `s * align`, so
//! every offset is aligned and `offset + bs <= size`.
//!
//! Skewed distributions first draw a *rank* (0 = hottest) and then map it to a
//! slot with a fixed bijection [`Scatter`], so the hot blocks are spread over the
//! whole file instead of sitting together at its start, where a drive's
//! read-ahead or a single flash die would flatter them. The map is
//! `slot = (rank * a + b) mod n` with `a` near `n / phi` and coprime to `n`
//! (hence a permutation) and `b = n / 3`; it depends only on `n`, not on the seed,
//! so two runs with the same geometry heat the same blocks.

use rand::Rng;
use rand_distr::Distribution;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Which slots the random modes touch. JSON: `"uniform"`, `"zipf:1.2"`,
/// `"pareto:0.2"`, `"hotcold:90/10"`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Dist {
    Uniform,
    /// P(rank k) proportional to 1 / (k+1)^theta (as fio's zipf:THETA).
    Zipf {
        theta: f64,
    },
    /// fio's pareto:H, 0 < H < 1: the hottest fraction H of the slots gets a
    /// fraction 1 - H of the accesses (pareto:0.2 is the 80/20 rule). Rank is
    /// `floor((n - 1) * u^p)` with `u` uniform and `p = ln H / ln(1 - H)`, so the
    /// rank-frequency curve is a power law of exponent `1/p - 1`.
    Pareto {
        h: f64,
    },
    /// `pct_ops`% of the I/Os go uniformly to the hottest `pct_space`% of the
    /// slots, the rest uniformly to the others.
    HotCold {
        pct_ops: f64,
        pct_space: f64,
    },
}

impl Dist {
    pub fn validate(&self) -> Result<(), String> {
        match *self {
            Dist::Uniform => Ok(()),
            Dist::Zipf { theta } if theta > 0.0 && theta.is_finite() => Ok(()),
            Dist::Zipf { theta } => Err(format!("zipf:{theta}: theta must be positive, e.g. zipf:1.2")),
            Dist::Pareto { h } if h > 0.0 && h < 1.0 => Ok(()),
            Dist::Pareto { h } => Err(format!("pareto:{h}: H must be between 0 and 1, e.g. pareto:0.2")),
            Dist::HotCold { pct_ops, pct_space }
                if (0.0..=100.0).contains(&pct_ops) && pct_space > 0.0 && pct_space < 100.0 =>
            {
                Ok(())
            }
            Dist::HotCold { pct_ops, pct_space } => Err(format!(
                "hotcold:{pct_ops}/{pct_space}: use PCT_OPS in 0..100 and PCT_SPACE in (0, 100), e.g. hotcold:90/10"
            )),
        }
    }

    /// Expected slope of log(frequency) against log(rank) for the power laws.
    pub fn rank_frequency_slope(&self) -> Option<f64> {
        match *self {
            Dist::Zipf { theta } => Some(-theta),
            Dist::Pareto { h } => Some(pareto_pow(h).recip() - 1.0),
            _ => None,
        }
    }
}

fn pareto_pow(h: f64) -> f64 {
    h.ln() / (1.0 - h).ln()
}

impl fmt::Display for Dist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dist::Uniform => f.write_str("uniform"),
            Dist::Zipf { theta } => write!(f, "zipf:{theta}"),
            Dist::Pareto { h } => write!(f, "pareto:{h}"),
            Dist::HotCold { pct_ops, pct_space } => write!(f, "hotcold:{pct_ops}/{pct_space}"),
        }
    }
}

impl FromStr for Dist {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim().to_ascii_lowercase();
        let num = |v: &str, what: &str| {
            v.trim().parse::<f64>().map_err(|_| {
                format!("'{s}': {what} must be a number, e.g. zipf:1.2, pareto:0.2, hotcold:90/10")
            })
        };
        let d = if s == "uniform" || s == "random" {
            Dist::Uniform
        } else if let Some(v) = s.strip_prefix("zipf:") {
            Dist::Zipf {
                theta: num(v, "THETA")?,
            }
        } else if let Some(v) = s.strip_prefix("pareto:") {
            Dist::Pareto { h: num(v, "H")? }
        } else if let Some(v) = s.strip_prefix("hotcold:") {
            let (a, b) = v.split_once('/').ok_or_else(|| {
                format!("'{s}': use hotcold:PCT_OPS/PCT_SPACE, e.g. hotcold:90/10")
            })?;
            Dist::HotCold {
                pct_ops: num(a, "PCT_OPS")?,
                pct_space: num(b, "PCT_SPACE")?,
            }
        } else {
            return Err(format!(
                "unknown distribution '{s}': use uniform, zipf:THETA, pareto:H or hotcold:PCT_OPS/PCT_SPACE"
            ));
        };
        d.validate()?;
        Ok(d)
    }
}

impl From<Dist> for String {
    fn from(d: Dist) -> String {
        d.to_string()
    }
}

impl TryFrom<String> for Dist {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

/// The fixed rank-to-slot permutation described in the module docs.
#[derive(Debug, Clone, Copy)]
pub struct Scatter {
    n: u64,
    a: u64,
    b: u64,
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Scatter {
    pub fn new(n: u64) -> Self {
        let n = n.max(1);
        let mut a = ((n as f64 / 1.618_033_988_75) as u64).max(1);
        while gcd(a, n) != 1 {
            a += 1;
        }
        Self {
            n,
            a: a % n.max(2),
            b: n / 3,
        }
    }

    pub fn slot(&self, rank: u64) -> u64 {
        if self.n == 1 {
            return 0;
        }
        ((rank as u128 * self.a as u128 + self.b as u128) % self.n as u128) as u64
    }
}

/// Draws slots for one thread.
#[derive(Debug, Clone)]
pub struct SlotGen {
    n: u64,
    kind: Kind,
    scatter: Scatter,
}

#[derive(Debug, Clone)]
enum Kind {
    Uniform,
    Zipf(rand_distr::Zipf<f64>),
    Pareto { pow: f64 },
    HotCold { p_hot: f64, hot: u64 },
}

impl SlotGen {
    /// A generator over `n >= 1` slots.
    pub fn new(dist: Dist, n: u64) -> Self {
        let n = n.max(1);
        let kind = match dist {
            Dist::Uniform => Kind::Uniform,
            Dist::Zipf { theta } => {
                Kind::Zipf(rand_distr::Zipf::new(n, theta).expect("theta validated positive"))
            }
            Dist::Pareto { h } => Kind::Pareto { pow: pareto_pow(h) },
            Dist::HotCold { pct_ops, pct_space } => {
                let hot = ((n as f64 * pct_space / 100.0).ceil() as u64).clamp(1, n);
                Kind::HotCold {
                    p_hot: pct_ops / 100.0,
                    hot,
                }
            }
        };
        Self {
            n,
            kind,
            scatter: Scatter::new(n),
        }
    }

    pub fn slots(&self) -> u64 {
        self.n
    }

    /// A rank: 0 is the hottest slot (uniform: the slot itself).
    pub fn rank<R: Rng>(&self, rng: &mut R) -> u64 {
        match &self.kind {
            Kind::Uniform => rng.gen_range(0..self.n),
            Kind::Zipf(z) => (z.sample(rng) as u64).clamp(1, self.n) - 1,
            Kind::Pareto { pow } => {
                let u: f64 = rng.gen();
                (((self.n - 1) as f64 * u.powf(*pow)) as u64).min(self.n - 1)
            }
            Kind::HotCold { p_hot, hot } => {
                if *hot == self.n || rng.gen::<f64>() < *p_hot {
                    rng.gen_range(0..*hot)
                } else {
                    rng.gen_range(*hot..self.n)
                }
            }
        }
    }

    /// A slot: the rank scattered over the file (uniform needs no scattering).
    pub fn slot<R: Rng>(&self, rng: &mut R) -> u64 {
        let r = self.rank(rng);
        match self.kind {
            Kind::Uniform => r,
            _ => self.scatter.slot(r),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{rngs::SmallRng, SeedableRng};

    #[test]
    fn parse_and_print() {
        for s in ["uniform", "zipf:1.2", "pareto:0.2", "hotcold:90/10"] {
            let d: Dist = s.parse().unwrap();
            assert_eq!(d.to_string(), s);
        }
        for bad in [
            "zipf:-1",
            "pareto:1.5",
            "hotcold:90",
            "hotcold:90/100",
            "gauss",
        ] {
            assert!(bad.parse::<Dist>().is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn scatter_is_a_permutation() {
        for n in [1u64, 2, 3, 10, 64, 1000, 4096, 262_143] {
            let s = Scatter::new(n);
            let mut seen = vec![false; n as usize];
            for r in 0..n {
                let slot = s.slot(r) as usize;
                assert!(!seen[slot], "n={n}: slot {slot} hit twice");
                seen[slot] = true;
            }
            if n >= 10 {
                // The 10 hottest ranks are not crowded at the start of the file.
                let max = (0..10).map(|r| s.slot(r)).max().unwrap();
                assert!(max > n / 2, "n={n}: hot slots all below {max}");
            }
        }
    }

    /// Least-squares slope of ln(count) on ln(rank + 1) over ranks [lo, hi).
    fn loglog_slope(counts: &[u64], lo: usize, hi: usize) -> f64 {
        let pts: Vec<(f64, f64)> = (lo..hi)
            .filter(|&r| counts[r] > 0)
            .map(|r| (((r + 1) as f64).ln(), (counts[r] as f64).ln()))
            .collect();
        let n = pts.len() as f64;
        let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
        let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
        let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
        sxy / sxx
    }

    fn rank_counts(d: Dist, n: u64, samples: usize, seed: u64) -> Vec<u64> {
        let g = SlotGen::new(d, n);
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut counts = vec![0u64; n as usize];
        for _ in 0..samples {
            counts[g.rank(&mut rng) as usize] += 1;
        }
        counts
    }

    #[test]
    fn zipf_rank_frequency_slope_matches_theta() {
        for (theta, seed) in [(0.8, 11u64), (1.2, 12)] {
            let d = Dist::Zipf { theta };
            let counts = rank_counts(d, 2000, 1_000_000, seed);
            // The head ranks are where counts are large enough to be precise.
            let slope = loglog_slope(&counts, 0, 200);
            let want = d.rank_frequency_slope().unwrap();
            assert!(
                (slope - want).abs() < 0.05,
                "seed {seed}: zipf:{theta} slope {slope:.3}, want {want:.3}"
            );
        }
    }

    #[test]
    fn pareto_rank_frequency_slope_and_80_20() {
        let (h, seed) = (0.2, 21u64);
        let d = Dist::Pareto { h };
        let n = 1000u64;
        let samples = 1_000_000;
        let counts = rank_counts(d, n, samples, seed);
        let want = d.rank_frequency_slope().unwrap();
        // Skip the first ranks, where flooring a continuous law bends the curve.
        let slope = loglog_slope(&counts, 10, n as usize);
        assert!(
            (slope - want).abs() < 0.05,
            "seed {seed}: pareto:{h} slope {slope:.3}, want {want:.3}"
        );
        let hot: u64 = counts[..(n as f64 * h) as usize].iter().sum();
        let frac = hot as f64 / samples as f64;
        assert!(
            (frac - (1.0 - h)).abs() < 0.01,
            "seed {seed}: hottest 20% got {frac:.3} of accesses"
        );
    }

    #[test]
    fn hotcold_fraction() {
        let seed = 31u64;
        let d = Dist::HotCold {
            pct_ops: 90.0,
            pct_space: 10.0,
        };
        let samples = 200_000;
        let counts = rank_counts(d, 1000, samples, seed);
        let hot: u64 = counts[..100].iter().sum();
        let frac = hot as f64 / samples as f64;
        assert!(
            (frac - 0.9).abs() < 0.01,
            "seed {seed}: hot fraction {frac:.3}"
        );
        // Within the cold part, accesses are uniform: no cold slot is starved.
        assert!(counts[100..].iter().all(|&c| c > 0));
    }

    #[test]
    fn uniform_is_flat() {
        let counts = rank_counts(Dist::Uniform, 100, 200_000, 41);
        let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        // Expected 2000 each, sd ~44: 5 sd either way.
        assert!(*min > 1780 && *max < 2220, "seed 41: min {min} max {max}");
    }
}
