//! Fitting measurements: the affine model per workload and concurrency, a
//! two-segment model where the affine one is poor, and parallelism per block size.

pub mod affine;
mod lsq;
pub mod parallelism;
pub mod piecewise;

pub use affine::{AffineFit, FitPoint};
pub use parallelism::Parallelism;
pub use piecewise::PiecewiseFit;

use crate::measurement::{workload_name, Measurement, OpKind, Pattern};
use crate::ModelError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The affine fit is called poor past either threshold.
pub const MAX_GOOD_REL_RESIDUAL: f64 = 0.10;
pub const MIN_GOOD_R2: f64 = 0.98;
/// The hinge model must cut the weighted squared error by this factor to name a knee.
const KNEE_GAIN: f64 = 4.0;

/// One workload at one concurrency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct GroupKey {
    pub op: OpKind,
    pub pattern: Pattern,
    pub qd: u32,
    pub threads: u32,
}

impl GroupKey {
    pub fn of(m: &Measurement) -> Self {
        Self {
            op: m.op,
            pattern: m.pattern,
            qd: m.qd,
            threads: m.threads,
        }
    }

    pub fn workload(&self) -> &'static str {
        workload_name(self.op, self.pattern)
    }

    pub fn concurrency(&self) -> u32 {
        self.qd.saturating_mul(self.threads)
    }

    /// `randread qd1`, `randwrite qd4 x2 threads`.
    pub fn label(&self) -> String {
        if self.threads > 1 {
            format!("{} qd{}x{}t", self.workload(), self.qd, self.threads)
        } else {
            format!("{} qd{}", self.workload(), self.qd)
        }
    }
}

/// The model of one workload at one concurrency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupFit {
    pub key: GroupKey,
    pub affine: AffineFit,
    /// Why the affine fit is poor; `None` when it is good.
    pub poor: Option<String>,
    /// The two-segment fit, when the affine one is poor and there are >= 4 sizes.
    pub piecewise: Option<PiecewiseFit>,
    /// True when the two-segment fit is much better: its knee is real.
    pub knee_found: bool,
    /// Mean measured IOPS per block size (repeats averaged), ascending size.
    pub measured: Vec<(u64, f64)>,
    /// Relative 95% CI half-width of each `measured` IOPS (the widest of
    /// repeats), where the input reported one.
    #[serde(default)]
    pub ci95_rel: Vec<Option<f64>>,
}

impl GroupFit {
    /// IOPS at `block_size`: the measured mean if there is one, else the
    /// model's prediction (concurrency / T(B)). The flag says which.
    pub fn iops(&self, block_size: u64) -> (f64, Source) {
        if let Some(&(_, iops)) = self.measured.iter().find(|m| m.0 == block_size) {
            return (iops, Source::Measured);
        }
        (self.predicted_iops(block_size), Source::Model)
    }

    /// The measured IOPS' relative 95% CI half-width at `block_size`, if known.
    pub fn ci95_rel(&self, block_size: u64) -> Option<f64> {
        let i = self.measured.iter().position(|m| m.0 == block_size)?;
        self.ci95_rel.get(i).copied().flatten()
    }

    /// The better model's prediction: the hinge when a knee was found.
    pub fn predicted_time(&self, block_size: u64) -> f64 {
        match (&self.piecewise, self.knee_found) {
            (Some(p), true) => p.time(block_size),
            _ => self.affine.time(block_size),
        }
    }

    pub fn predicted_iops(&self, block_size: u64) -> f64 {
        self.key.concurrency() as f64 / self.predicted_time(block_size)
    }
}

/// Where a number in a table came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Measured,
    Model,
}

/// Parallelism of one workload at one block size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParallelismFit {
    pub op: OpKind,
    pub pattern: Pattern,
    pub block_size: u64,
    pub parallelism: Parallelism,
}

/// Everything `pagewise model` reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelReport {
    pub fits: Vec<GroupFit>,
    /// Groups with a single block size, which cannot be fitted, and why.
    pub skipped: Vec<(GroupKey, String)>,
    pub parallelism: Vec<ParallelismFit>,
}

impl ModelReport {
    /// The fit for a workload at the given concurrency, or at the lowest
    /// measured concurrency when `concurrency` is `None`.
    pub fn find(
        &self,
        op: OpKind,
        pattern: Pattern,
        concurrency: Option<u32>,
    ) -> Option<&GroupFit> {
        let mut c: Vec<&GroupFit> = self
            .fits
            .iter()
            .filter(|f| f.key.op == op && f.key.pattern == pattern)
            .filter(|f| concurrency.is_none_or(|q| f.key.concurrency() == q))
            .collect();
        c.sort_by_key(|f| (f.key.concurrency(), f.key.threads));
        c.first().copied()
    }
}

/// Fits every workload/concurrency group with two or more block sizes, and
/// the parallelism of every workload/block size with two or more concurrencies.
pub fn fit_all(ms: &[Measurement]) -> Result<ModelReport, ModelError> {
    if ms.is_empty() {
        return Err(ModelError::Empty);
    }
    for m in ms {
        m.validate()?;
    }
    let mut groups: BTreeMap<GroupKey, Vec<(u64, f64)>> = BTreeMap::new();
    let mut by_size: BTreeMap<(OpKind, Pattern, u64), Vec<(u32, f64)>> = BTreeMap::new();
    let mut cis: BTreeMap<(GroupKey, u64), f64> = BTreeMap::new();
    for m in ms {
        if let Some(c) = m.ci95_rel {
            let e = cis.entry((GroupKey::of(m), m.block_size)).or_insert(c);
            *e = e.max(c);
        }
        groups
            .entry(GroupKey::of(m))
            .or_default()
            .push((m.block_size, m.service_time()));
        by_size
            .entry((m.op, m.pattern, m.block_size))
            .or_default()
            .push((m.concurrency(), m.iops));
    }
    let mut fits = Vec::new();
    let mut skipped = Vec::new();
    for (key, pts) in groups {
        match fit_group(key, &pts) {
            Some(mut f) => {
                f.ci95_rel = f
                    .measured
                    .iter()
                    .map(|&(b, _)| cis.get(&(key, b)).copied())
                    .collect();
                fits.push(f)
            }
            None => skipped.push((key, format!("only block size {} measured", pts[0].0))),
        }
    }
    let parallelism: Vec<ParallelismFit> = by_size
        .into_iter()
        .filter_map(|((op, pattern, block_size), pts)| {
            Parallelism::from_points(&pts).map(|parallelism| ParallelismFit {
                op,
                pattern,
                block_size,
                parallelism,
            })
        })
        .collect();
    if fits.is_empty() && parallelism.is_empty() {
        let what = if ms.len() == 1 {
            "one point only".to_string()
        } else {
            format!(
                "{} points, no workload with two block sizes or two queue depths",
                ms.len()
            )
        };
        return Err(ModelError::TooFewPoints(what));
    }
    Ok(ModelReport {
        fits,
        skipped,
        parallelism,
    })
}

/// Fits one group of (block size, service time) points.
pub fn fit_group(key: GroupKey, pts: &[(u64, f64)]) -> Option<GroupFit> {
    let affine = AffineFit::fit(pts)?;
    let poor = assess(&affine);
    let mut piecewise = None;
    let mut knee_found = false;
    if poor.is_some() {
        if let Some(p) = PiecewiseFit::fit(pts) {
            knee_found = weighted_sse(&p.points) * KNEE_GAIN < weighted_sse(&affine.points);
            piecewise = Some(p);
        }
    }
    Some(GroupFit {
        key,
        measured: mean_iops(key, pts),
        ci95_rel: Vec::new(),
        affine,
        poor,
        piecewise,
        knee_found,
    })
}

fn assess(f: &AffineFit) -> Option<String> {
    if f.max_rel_residual > MAX_GOOD_REL_RESIDUAL {
        let worst = f
            .points
            .iter()
            .max_by(|a, b| a.rel_residual.abs().total_cmp(&b.rel_residual.abs()))?;
        return Some(format!(
            "max relative residual {:.0}% at {} B (threshold {:.0}%)",
            f.max_rel_residual * 100.0,
            worst.block_size,
            MAX_GOOD_REL_RESIDUAL * 100.0
        ));
    }
    if f.r2 < MIN_GOOD_R2 {
        return Some(format!("R^2 {:.3} below {MIN_GOOD_R2}", f.r2));
    }
    None
}

fn weighted_sse(points: &[FitPoint]) -> f64 {
    points.iter().map(|p| p.rel_residual * p.rel_residual).sum()
}

fn mean_iops(key: GroupKey, pts: &[(u64, f64)]) -> Vec<(u64, f64)> {
    let mut acc: BTreeMap<u64, (f64, u32)> = BTreeMap::new();
    for &(b, t) in pts {
        let e = acc.entry(b).or_default();
        e.0 += key.concurrency() as f64 / t;
        e.1 += 1;
    }
    acc.into_iter()
        .map(|(b, (s, n))| (b, s / n as f64))
        .collect()
}
