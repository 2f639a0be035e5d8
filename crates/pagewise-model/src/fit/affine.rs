//! The affine cost model T(B) = S + B/W (Kuszmaul's "what is a performance
//! model for SSDs"): a fixed setup time S per I/O plus transfer at bandwidth W.

use super::lsq::{nnls, Obs};
use serde::{Deserialize, Serialize};

/// One point of a fit: measured and predicted service time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FitPoint {
    pub block_size: u64,
    /// Measured service time, seconds per I/O per slot.
    pub measured_s: f64,
    pub predicted_s: f64,
    /// (measured - predicted) / measured.
    pub rel_residual: f64,
}

/// A fitted T(B) = S + B/W.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AffineFit {
    /// Setup time S in seconds.
    pub setup_s: f64,
    /// 1/W in seconds per byte; 0 when the data show no size dependence.
    pub sec_per_byte: f64,
    pub r2: f64,
    pub max_rel_residual: f64,
    pub points: Vec<FitPoint>,
}

impl AffineFit {
    /// Fits (block size, service time) pairs. Least squares on service time,
    /// weighted by 1/T^2 so the residuals minimised are relative: block sizes
    /// are spaced geometrically and an unweighted fit would let the 1 MiB point
    /// decide S. Coefficients are kept non-negative (a negative setup time has
    /// no meaning). `None` with fewer than two distinct block sizes.
    pub fn fit(points: &[(u64, f64)]) -> Option<Self> {
        if distinct_sizes(points) < 2 {
            return None;
        }
        let obs: Vec<Obs> = points
            .iter()
            .map(|&(b, t)| Obs {
                x: vec![1.0, b as f64],
                y: t,
                w: 1.0 / (t * t),
            })
            .collect();
        let (c, _) = nnls(&obs, 2)?;
        Some(Self::with_coefficients(c[0], c[1], points))
    }

    /// A model with given S and 1/W, scored against `points`.
    pub fn with_coefficients(setup_s: f64, sec_per_byte: f64, points: &[(u64, f64)]) -> Self {
        let mut f = Self {
            setup_s,
            sec_per_byte,
            r2: 1.0,
            max_rel_residual: 0.0,
            points: Vec::new(),
        };
        let (pts, r2, max) = score(points, |b| f.time(b));
        (f.points, f.r2, f.max_rel_residual) = (pts, r2, max);
        f
    }

    /// Predicted service time of one I/O of `block_size` bytes, seconds.
    pub fn time(&self, block_size: u64) -> f64 {
        self.setup_s + block_size as f64 * self.sec_per_byte
    }

    /// Bandwidth W in bytes/s (infinite when transfer time is nil).
    pub fn bandwidth(&self) -> f64 {
        if self.sec_per_byte > 0.0 {
            1.0 / self.sec_per_byte
        } else {
            f64::INFINITY
        }
    }

    /// S x W: the block size at which setup and transfer take equal time, so
    /// the drive delivers half its bandwidth (Kuszmaul's half-power point).
    pub fn half_bandwidth_point(&self) -> f64 {
        self.setup_s * self.bandwidth()
    }
}

pub(crate) fn distinct_sizes(points: &[(u64, f64)]) -> usize {
    let mut s: Vec<u64> = points.iter().map(|p| p.0).collect();
    s.sort_unstable();
    s.dedup();
    s.len()
}

/// Residuals, R^2 (on raw service times) and the largest relative residual.
pub(crate) fn score(
    points: &[(u64, f64)],
    model: impl Fn(u64) -> f64,
) -> (Vec<FitPoint>, f64, f64) {
    let n = points.len() as f64;
    let mean = points.iter().map(|p| p.1).sum::<f64>() / n;
    let (mut ss_res, mut ss_tot, mut max) = (0.0, 0.0, 0.0f64);
    let mut out = Vec::with_capacity(points.len());
    for &(b, t) in points {
        let p = model(b);
        ss_res += (t - p) * (t - p);
        ss_tot += (t - mean) * (t - mean);
        let rel = (t - p) / t;
        max = max.max(rel.abs());
        out.push(FitPoint {
            block_size: b,
            measured_s: t,
            predicted_s: p,
            rel_residual: rel,
        });
    }
    let r2 = if ss_tot > 0.0 {
        1.0 - ss_res / ss_tot
    } else {
        1.0
    };
    (out, r2, max)
}
