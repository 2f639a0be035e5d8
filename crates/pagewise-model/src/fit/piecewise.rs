//! Two-segment (hinge) model for curves the affine model cannot follow, e.g.
//! a drive whose transfer rate changes past some size (stripe or channel width,
//! a readahead window, a cache):
//! T(B) = S + min(B, K)/W1 + max(B - K, 0)/W2, continuous at the knee K.

use super::affine::{distinct_sizes, score, FitPoint};
use super::lsq::{nnls, Obs};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PiecewiseFit {
    pub setup_s: f64,
    /// The knee K in bytes: a measured block size where the slope changes.
    pub knee: u64,
    /// Seconds per byte below and above the knee.
    pub sec_per_byte_below: f64,
    pub sec_per_byte_above: f64,
    pub r2: f64,
    pub max_rel_residual: f64,
    pub points: Vec<FitPoint>,
}

impl PiecewiseFit {
    /// Tries every interior measured size as the knee and keeps the best
    /// (relative least squares, as the affine fit). Needs four distinct sizes,
    /// else three parameters would fit any data exactly.
    pub fn fit(points: &[(u64, f64)]) -> Option<Self> {
        if distinct_sizes(points) < 4 {
            return None;
        }
        let mut sizes: Vec<u64> = points.iter().map(|p| p.0).collect();
        sizes.sort_unstable();
        sizes.dedup();
        let mut best: Option<(f64, Self)> = None;
        for &k in &sizes[1..sizes.len() - 1] {
            let obs: Vec<Obs> = points
                .iter()
                .map(|&(b, t)| Obs {
                    x: vec![1.0, b.min(k) as f64, b.saturating_sub(k) as f64],
                    y: t,
                    w: 1.0 / (t * t),
                })
                .collect();
            let Some((c, sse)) = nnls(&obs, 3) else {
                continue;
            };
            if best.as_ref().is_none_or(|(b, _)| sse < *b) {
                let mut f = Self {
                    setup_s: c[0],
                    knee: k,
                    sec_per_byte_below: c[1],
                    sec_per_byte_above: c[2],
                    r2: 1.0,
                    max_rel_residual: 0.0,
                    points: Vec::new(),
                };
                let (pts, r2, max) = score(points, |b| f.time(b));
                (f.points, f.r2, f.max_rel_residual) = (pts, r2, max);
                best = Some((sse, f));
            }
        }
        best.map(|b| b.1)
    }

    pub fn time(&self, b: u64) -> f64 {
        self.setup_s
            + b.min(self.knee) as f64 * self.sec_per_byte_below
            + b.saturating_sub(self.knee) as f64 * self.sec_per_byte_above
    }
}
