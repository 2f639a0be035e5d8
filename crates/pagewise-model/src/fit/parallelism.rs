//! How throughput grows with I/Os in flight, for one workload and block size.
//!
//! PDAM (Bender et al., "Small refinements to the DAM can have big
//! consequences for data-structure design", SPAA 2019) models a drive as P
//! parallel I/O slots: throughput scales linearly with concurrency up to P and
//! is flat beyond. Fitting that shape to measurements gives
//! P = peak IOPS / IOPS per I/O in flight at the lowest measured concurrency,
//! where the rising line meets the plateau.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Parallelism {
    /// (I/Os in flight = qd x threads, IOPS), ascending concurrency.
    pub points: Vec<(u32, f64)>,
    pub peak_iops: f64,
    /// Concurrency at which the peak was measured.
    pub peak_at: u32,
    /// PDAM's P: the concurrency where linear scaling meets the plateau.
    pub pdam_p: f64,
    /// Lowest measured concurrency reaching 95% of peak IOPS.
    pub qd95: u32,
}

impl Parallelism {
    /// `None` unless at least two distinct concurrency levels were measured.
    /// Repeated measurements of one level are averaged.
    pub fn from_points(raw: &[(u32, f64)]) -> Option<Self> {
        let mut levels: Vec<(u32, f64, u32)> = Vec::new();
        for &(c, iops) in raw {
            match levels.iter_mut().find(|l| l.0 == c) {
                Some(l) => {
                    l.1 += iops;
                    l.2 += 1;
                }
                None => levels.push((c, iops, 1)),
            }
        }
        if levels.len() < 2 {
            return None;
        }
        levels.sort_by_key(|l| l.0);
        let points: Vec<(u32, f64)> = levels.iter().map(|l| (l.0, l.1 / l.2 as f64)).collect();
        let (peak_at, peak_iops) = points.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1))?;
        let (c0, i0) = points[0];
        let per_slot = i0 / c0 as f64;
        let qd95 = points.iter().find(|p| p.1 >= 0.95 * peak_iops)?.0;
        Some(Self {
            points,
            peak_iops,
            peak_at,
            pdam_p: peak_iops / per_slot,
            qd95,
        })
    }
}
