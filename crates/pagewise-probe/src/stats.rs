//! Repetition statistics: mean, spread and the 95% confidence interval.

use serde::{Deserialize, Serialize};

/// Two-sided 95% Student t quantiles for 1..=30 degrees of freedom.
const T95: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// t quantile for a 95% two-sided interval with `df` degrees of freedom.
pub fn t95(df: usize) -> f64 {
    match df {
        0 => f64::INFINITY,
        d if d <= 30 => T95[d - 1],
        _ => 1.96,
    }
}

/// IOPS of every repetition of one point and what they say together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Repetitions {
    /// Number of measured repetitions.
    pub count: u32,
    /// IOPS of each repetition, in order.
    pub iops: Vec<f64>,
    /// Sample standard deviation of `iops` (0 with one repetition).
    pub stddev: f64,
    /// Half-width of the 95% confidence interval of the mean IOPS
    /// (Student t; infinite with one repetition, `null` in JSON then).
    pub ci95_half_width: Option<f64>,
    /// `ci95_half_width / mean`.
    pub ci95_rel: Option<f64>,
    pub min: f64,
    pub max: f64,
    /// True if `ci95_rel <= tolerance` was reached before `max_reps`.
    pub converged: bool,
}

impl Repetitions {
    pub fn from_iops(iops: &[f64], tolerance: f64) -> Self {
        let n = iops.len();
        let mean = mean(iops);
        let sd = stddev(iops);
        let half = (n >= 2).then(|| t95(n - 1) * sd / (n as f64).sqrt());
        let rel = half.map(|h| if mean > 0.0 { h / mean } else { 0.0 });
        Self {
            count: n as u32,
            iops: iops.to_vec(),
            stddev: sd,
            ci95_half_width: half,
            ci95_rel: rel,
            min: iops.iter().copied().fold(f64::INFINITY, f64::min),
            max: iops.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            converged: rel.is_some_and(|r| r <= tolerance),
        }
    }
}

pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.iter().sum::<f64>() / xs.len() as f64
}

pub fn stddev(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let m = mean(xs);
    (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_by_hand() {
        // mean 100, sample sd = sqrt(((−2)²+0²+2²)/2) = 2, half = 4.303 * 2 / sqrt(3).
        let r = Repetitions::from_iops(&[98.0, 100.0, 102.0], 0.05);
        assert!((r.stddev - 2.0).abs() < 1e-12);
        let want = 4.303 * 2.0 / 3f64.sqrt();
        assert!((r.ci95_half_width.unwrap() - want).abs() < 1e-9);
        assert!((r.ci95_rel.unwrap() - want / 100.0).abs() < 1e-9);
        assert!(r.converged);
        assert_eq!((r.min, r.max, r.count), (98.0, 102.0, 3));
        let loose = Repetitions::from_iops(&[50.0, 150.0], 0.05);
        assert!(!loose.converged);
        let one = Repetitions::from_iops(&[10.0], 0.05);
        assert_eq!(one.ci95_half_width, None);
        assert!(!one.converged);
    }
}
