//! Page-size advisor: for each candidate page size, the B+tree's shape, the
//! I/Os per operation after caching, and the operations per second the drive
//! sustains at that size; then the best size for the workload mix, and a
//! B-epsilon tree alternative sized from the half-bandwidth point.

pub mod bepsilon;
pub mod bepsilon_engine;
pub mod btree;
pub mod choice;
pub mod correct;
pub mod dataset;
mod explain;
pub mod scale;

pub use bepsilon::{
    advise_bepsilon, bepsilon_at, predict_bepsilon, BEpsilonAdvice, BEpsilonPrediction,
    BEpsilonShape,
};
pub use bepsilon_engine::{
    fit_bepsilon_costs, get_reads, leave_one_out_bepsilon, predict_bepsilon_engine,
    predict_bepsilon_engine_with, BEpsilonCosts, BEpsilonEnginePrediction, BEpsilonSample,
    GetReads, PartitionReads,
};
pub use btree::{caching, read_ahead, Caching, ReadAhead, Shape};
pub use dataset::{Dataset, Mix};
use explain::{close_call, explain};

use crate::fit::{GroupFit, Source};
use crate::ModelError;
use serde::{Deserialize, Serialize};

/// The drive as the advisor sees it: a random-read curve and, if measured,
/// a random-write curve (same concurrency preferred).
#[derive(Debug, Clone, Copy)]
pub struct Device<'a> {
    pub read: &'a GroupFit,
    pub write: Option<&'a GroupFit>,
    /// Parallel read slots (PDAM's P, at least 1): how many of a range's
    /// read-ahead pages the drive serves in one read time. 1 when the probe
    /// measured one concurrency only.
    pub read_parallelism: f64,
}

impl Device<'_> {
    fn write_iops(&self, page: u64) -> (f64, Source, bool) {
        match self.write {
            Some(w) => {
                let (i, s) = w.iops(page);
                (i, s, true)
            }
            None => {
                let (i, s) = self.read.iops(page);
                (i, s, false)
            }
        }
    }
}

/// One candidate page size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub page_size: u64,
    pub read_iops: f64,
    pub read_source: Source,
    /// Relative 95% CI half-width of a measured read IOPS.
    pub read_ci95_rel: Option<f64>,
    pub write_iops: f64,
    pub write_source: Source,
    pub fanout: u64,
    pub leaf_capacity: u64,
    pub continuous_hops: f64,
    pub height: u32,
    /// Whole levels cached plus the cached fraction of the next.
    pub cached_levels: f64,
    pub uncached_hops: f64,
    /// read IOPS / uncached hops.
    pub point_qps: f64,
    /// read IOPS / log_fanout(rows), no cache: the blog post's column.
    pub envelope_qps: f64,
    /// I/Os per range query of `range_records` records (read-ahead pages
    /// past the range's end included).
    pub range_ios: f64,
    /// Device round trips per range query, each one QD1 read time: the point
    /// query's hops plus read-ahead batches of up to P pages per round.
    #[serde(default)]
    pub range_rounds: f64,
    /// Time of one range query at the measured concurrency, milliseconds.
    pub range_ms: f64,
    pub range_qps: f64,
    /// Reads to find the leaf plus one page write.
    pub insert_ops: f64,
    /// Operations per second of the weighted mix.
    pub mix_ops: f64,
}

/// The advisor's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Advice {
    pub dataset: Dataset,
    pub mix: Mix,
    pub read_curve: String,
    pub write_curve: Option<String>,
    pub rows: Vec<Row>,
    /// Page sizes left out, and why.
    pub excluded: Vec<(u64, String)>,
    pub best: u64,
    pub reason: String,
    /// Set when the runner-up is within the measurement uncertainty.
    pub close_call: Option<String>,
    pub bepsilon: Option<BEpsilonAdvice>,
    /// Why there is no B-epsilon advice, when there is none.
    pub bepsilon_note: Option<String>,
}

/// Powers of two from 512 B to 1 MiB within the measured range, plus every
/// measured size: the advisor never extrapolates the model past the data.
pub fn candidates(read: &GroupFit) -> Vec<u64> {
    let lo = read.measured.first().map_or(512, |m| m.0);
    let hi = read.measured.last().map_or(1 << 20, |m| m.0);
    let mut v: Vec<u64> = (9..=20)
        .map(|k| 1u64 << k)
        .filter(|p| *p >= lo && *p <= hi)
        .chain(read.measured.iter().map(|m| m.0))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Rows for the given page sizes, best size for the mix, and the reason.
pub fn advise(dev: Device, d: &Dataset, mix: Mix, pages: &[u64]) -> Result<Advice, ModelError> {
    d.validate()?;
    let mut rows = Vec::new();
    let mut excluded = Vec::new();
    for &p in pages {
        match row(dev, d, mix, p) {
            Ok(r) => rows.push(r),
            Err(why) => excluded.push((p, why)),
        }
    }
    let best = rows
        .iter()
        .max_by(|a, b| a.mix_ops.total_cmp(&b.mix_ops))
        .ok_or_else(|| {
            ModelError::Dataset(format!(
                "no candidate page size can hold the entries ({}); use smaller --key-bytes/--value-bytes",
                excluded
                    .first()
                    .map(|e| e.1.clone())
                    .unwrap_or_else(|| "no page sizes".into())
            ))
        })?
        .clone();
    let close_call = close_call(&best, &rows);
    let mut reason = explain(&best, &rows, d, mix);
    if let Some(c) = &close_call {
        reason.push_str(". ");
        reason.push_str(c);
    }
    let (bepsilon, bepsilon_note) = match advise_bepsilon(dev, d, &best) {
        Ok(b) => (Some(b), None),
        Err(why) => (None, Some(why)),
    };
    Ok(Advice {
        dataset: d.clone(),
        mix,
        read_curve: dev.read.key.label(),
        write_curve: dev.write.map(|w| w.key.label()),
        rows,
        excluded,
        best: best.page_size,
        reason,
        close_call,
        bepsilon,
        bepsilon_note,
    })
}

fn row(dev: Device, d: &Dataset, mix: Mix, page: u64) -> Result<Row, String> {
    let shape = Shape::new(page, d)?;
    let c = caching(&shape.levels, page, d.cache_bytes);
    let (read_iops, read_source) = dev.read.iops(page);
    let (write_iops, write_source, _) = dev.write_iops(page);
    let conc = dev.read.key.concurrency() as f64;
    let point_qps = read_iops / c.uncached_hops;
    // Leaves touched by R consecutive records starting anywhere in a leaf of
    // L records: 1 + (R - 1)/L on average; the first is the point query's
    // leaf, the others come in read-ahead batches (docs/design.md,
    // "Verification and model correction").
    let extra_leaves = (d.range_records - 1) as f64 / shape.leaf_capacity as f64;
    let ra = read_ahead(extra_leaves, dev.read_parallelism.max(1.0));
    let range_ios = c.uncached_hops + ra.pages * c.leaf_miss;
    let range_rounds = c.uncached_hops + ra.rounds * c.leaf_miss;
    let range_qps = read_iops / range_rounds;
    let insert_s = c.uncached_hops / read_iops + 1.0 / write_iops;
    let point_s = 1.0 / point_qps;
    let range_s = 1.0 / range_qps;
    let mix_s = mix.point * point_s + mix.range * range_s + mix.insert * insert_s;
    Ok(Row {
        page_size: page,
        read_iops,
        read_source,
        read_ci95_rel: dev.read.ci95_rel(page),
        write_iops,
        write_source,
        fanout: shape.fanout,
        leaf_capacity: shape.leaf_capacity,
        continuous_hops: shape.continuous_hops,
        height: shape.height(),
        cached_levels: c.whole_levels as f64 + c.partial,
        uncached_hops: c.uncached_hops,
        point_qps,
        envelope_qps: read_iops / shape.continuous_hops,
        range_ios,
        range_rounds,
        range_ms: range_rounds * conc / read_iops * 1e3,
        range_qps,
        insert_ops: 1.0 / insert_s,
        mix_ops: 1.0 / mix_s,
    })
}
