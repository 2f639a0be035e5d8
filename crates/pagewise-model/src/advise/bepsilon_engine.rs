//! The B-epsilon prediction with the engine's costs.
//!
//! [`predict_bepsilon`] counts device I/O only: one basement read per uncached
//! level for a get, a child read and write per flush for an insert. The
//! node-size sweep at 5M rows (docs/benchmarks.md, "B-epsilon tree") measured inserts at 0.22-0.36x that prediction
//! (11-13.5 µs of CPU per insert) and 1.10-1.73 reads per get (shells and
//! buffers miss too) at 78-186 µs of CPU per get. The corrected times, with
//! the engine's constants mirroring the B+tree's correction (`correct.rs`:
//! `c(B)` per cached level, `x(B)` per miss, `f` per write), are
//!
//! ```text
//! insert_s = f_ins x flushes x (1/R(N) + 1/W(N))  +  c_ins
//! get_s    = c_get + max(0, sum_k miss_k x (1/R(read_k) + x0) + x1 x kib)
//! kib      = sum_k miss_k x read_k / 1 KiB
//! range_s  = get_s + r x (R - 1)
//! ```
//!
//! - `c_ins`: CPU seconds per insert (buffer inserts, flushes, encoding and
//!   compressing nodes at checkpoints), measured as process CPU;
//! - `f_ins`: the insert's measured device time (wall minus CPU) over the
//!   flush I/O [`predict_bepsilon`] counts: how far checkpoint batches, cached
//!   children and the drive's state since the probe move it (1 = as
//!   counted);
//! - `c_get`: a get whose path is cached (wall time of gets on hot keys);
//! - `x0 + x1 x KiB`: seconds a miss costs on top of the drive's read time
//!   (the system call, page and partition checksums, decompression,
//!   scanning a probed buffer, cache upkeep, and any drift of the drive),
//!   fitted from the timed gets' residual per read, as `x(B)` is;
//! - `r`: seconds per record a range scan of `R` records returns beyond its
//!   seek (a get): merging the buffers' messages over the range, decoding
//!   them, crossing basements and the reads that brings; the mean of the
//!   measured scans' `(range_s - get_s) / (R - 1)`;
//!
//! ([`BEpsilonCosts`], fitted by [`fit_bepsilon_costs`] from `pagewise tune`'s
//! measurements), and `miss_k`, `read_k` the misses per get and bytes per
//! read of each part a get touches:
//!
//! - the **shell** (header, directory, pivots; internal nodes add child
//!   references and buffer filters) of the node on the path at every level:
//!   `n_l` shells of `64 + c x 24 + (c - 1) x (2 + key)` bytes (internal:
//!   `+ c x 16 + 10 bits per buffered message`), `c` children or basements
//!   per node; every get touches one; a miss reads whole 4 KiB pages;
//! - the **buffer** partition for the child on the path, at internal levels
//!   only when its filter admits the key: an internal node flushes when its
//!   buffers reach N bytes, moving at least a child's share N / F, so it
//!   holds `buf = N x (1 - 1 / 2F)` on average; a get reads it with
//!   probability `p_l = min(1, n_l x buf / msg / rows + 0.008)` (the share of
//!   records whose newest message sits at level l, plus the filters' false
//!   positives); buffers of a node range evenly from empty to twice the
//!   mean, so a get, landing in one in proportion to its messages, reads
//!   `4/3` of the mean `buf / c` (size-biased);
//! - one **basement** of B bytes in the leaf, `b = ceil(N x fill / B)` per
//!   leaf; every get touches one.
//!
//! A miss on a partition reads one segment of it (format 6; the engine's
//! `segment::target_bytes`): a range of `s` bytes at a random offset spans
//! `1 + s / P` pages of P bytes on average, so a miss reads
//! `P + min(s, whole)` bytes, `s = max(B / 4, P)` for a basement and for a
//! buffer alike (docs/benchmarks.md, "B-epsilon tree": segments).
//!
//! Which of them the cache holds: the engine's CLOCK cache is taken as LRU
//! under independent uniform references (Che, Tung and Wang 2002): an object
//! referenced at rate `lambda` per get stays cached while it is referenced
//! within `k x T` gets, so its hit ratio is `1 - exp(-lambda x k x T)`, with
//! `k = 3` for shells (they survive `SHELL_KEEP_PASSES` = 2 extra CLOCK
//! passes, crates/pagewise/src/index/bepsilon/node.rs) and 1 for partitions,
//! and `T` solving `sum_k count_k x bytes_k x (1 - exp(-lambda_k x k_k x T))
//! = cache bytes`. Then `miss_k = a_k x exp(-lambda_k x k_k x T)`, `a_k` the
//! accesses per get (1 or `p_l`) and `lambda_k = a_k / count_k`.

use super::bepsilon::{
    predict_bepsilon, BEpsilonPrediction, BEpsilonShape, MESSAGE_OVERHEAD_BYTES,
};
use super::btree::levels;
use super::correct::{leave_one_out_with, line_fit_rising};
use super::{Dataset, Device, Mix};
use serde::{Deserialize, Serialize};

/// Extra CLOCK passes a B-epsilon node image (its shell) survives beyond a
/// partition's one (the engine's `SHELL_KEEP_PASSES`).
pub const SHELL_KEEP_PASSES: f64 = 2.0;
/// False-positive rate of a buffer key filter (10 bits per key, 6 probes:
/// docs/design.md, "Buffer key filters").
pub const FILTER_FALSE_POSITIVE: f64 = 0.008;
/// Bytes of a node header and of one directory entry (docs/design.md,
/// "B-epsilon nodes").
const HEADER_BYTES: f64 = 64.0;
const DIRECTORY_ENTRY_BYTES: f64 = 24.0;
const CHILD_REF_BYTES: f64 = 16.0;
const FILTER_BITS_PER_KEY: f64 = 10.0;
const PAGE_BYTES: f64 = 4096.0;
/// Segments per basement bytes (the engine's
/// `segment::SEGMENTS_PER_BASEMENT`): a miss on a basement, or on a buffer
/// its filter admits, reads one segment of a quarter basement (at least a
/// page).
pub const SEGMENTS_PER_BASEMENT: f64 = 4.0;

/// Raw bytes of one segment for basements of `basement` bytes.
fn segment_bytes(basement: f64) -> f64 {
    (basement / SEGMENTS_PER_BASEMENT).max(PAGE_BYTES)
}

/// How the engine reads a partition a get misses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PartitionReads {
    /// Whole: buffers before format 5, basements before format 6 (the
    /// engine the node-size sweep measured).
    Whole,
    /// One segment of each: buffers from format 5, basements from format 6
    /// (this build).
    Segments,
}

/// Bytes a miss reads of a partition of `whole` bytes stored as segments
/// of `segment` bytes: the pages one segment (or the whole partition, if
/// smaller) spans at a random offset, `P + bytes` on average.
fn segment_read_bytes(whole: f64, segment: f64) -> f64 {
    assert!(whole > 0.0 && segment > 0.0);
    let out = PAGE_BYTES + whole.min(segment);
    assert!(out > PAGE_BYTES);
    out
}

/// The engine's costs on a B-epsilon tree (the module comment's terms).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BEpsilonCosts {
    /// CPU seconds per insert (`c_ins`).
    pub cpu_insert_s: f64,
    /// Measured insert device time over the counted flush I/O (`f_ins`).
    pub insert_io_factor: f64,
    /// Seconds of a get whose path is cached (`c_get`).
    pub cpu_get_s: f64,
    /// Seconds a miss costs on top of the drive's read time (`x0`), and per
    /// KiB it reads (`x1`).
    pub miss_extra_s: f64,
    pub miss_extra_per_kib_s: f64,
    /// Seconds per record a range scan returns beyond its seek (`r`; 0
    /// where no scan was measured, as in costs kept before it existed).
    #[serde(default)]
    pub range_record_s: f64,
}

impl BEpsilonCosts {
    /// The device-only prediction (with the derived reads per get).
    pub const NONE: BEpsilonCosts = BEpsilonCosts {
        cpu_insert_s: 0.0,
        insert_io_factor: 1.0,
        cpu_get_s: 0.0,
        miss_extra_s: 0.0,
        miss_extra_per_kib_s: 0.0,
        range_record_s: 0.0,
    };

    /// Seconds of a get whose `reads` misses take `device_s` on the drive
    /// and read `kib` KiB: `c_get + max(0, device_s + x0 reads + x1 kib)`.
    pub fn get_at_s(&self, device_s: f64, reads: f64, kib: f64) -> f64 {
        assert!(device_s >= 0.0 && reads >= 0.0 && kib >= 0.0);
        let miss_s = device_s + self.miss_extra_s * reads + self.miss_extra_per_kib_s * kib;
        let out = self.cpu_get_s.max(0.0) + miss_s.max(0.0);
        assert!(out.is_finite());
        out
    }

    /// Seconds of a range scan of `records` records whose seek takes
    /// `get_s`: `get_s + r x (records - 1)`.
    pub fn range_at_s(&self, get_s: f64, records: u64) -> f64 {
        assert!(get_s >= 0.0 && records >= 1);
        let out = get_s + self.range_record_s.max(0.0) * (records - 1) as f64;
        assert!(out >= get_s && out.is_finite());
        out
    }
}

/// One kind of object a get touches: a level's shells, buffers or basements.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Part {
    pub kind: PartKind,
    /// Height above the leaves (0 = leaf).
    pub height: u32,
    /// Objects of this kind in the tree.
    pub count: f64,
    /// Bytes one of them holds in the cache.
    pub cached_bytes: f64,
    /// Bytes a miss reads.
    pub read_bytes: f64,
    /// Accesses per get (1, or the probability the filter admits the key).
    pub accesses: f64,
    /// Cache lifetime in units of `T`: 3 for shells, 1 for partitions.
    pub lifetime: f64,
    /// Misses per get, once the cache is solved.
    pub misses: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PartKind {
    Shell,
    Buffer,
    Basement,
}

/// What a get reads from the device, by part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GetReads {
    pub parts: Vec<Part>,
    pub shell_reads: f64,
    pub buffer_reads: f64,
    pub basement_reads: f64,
    /// All device reads per get.
    pub reads: f64,
    /// KiB read per get.
    pub kib: f64,
}

/// The parts a get touches in `shape` holding dataset `d`, misses unset,
/// read as `how`.
pub fn parts(d: &Dataset, shape: BEpsilonShape, how: PartitionReads) -> Vec<Part> {
    assert!(shape.fanout >= 2 && shape.basement_bytes >= 512 && d.rows >= 1);
    let node = shape.node_bytes as f64;
    let leaf_cap = ((node * d.fill / d.leaf_entry() as f64).floor() as u64).max(1);
    let lv = levels(d.rows, leaf_cap, shape.fanout);
    let pivot_bytes = (2 + d.key_bytes) as f64;
    let message_bytes = (d.key_bytes + d.value_bytes + MESSAGE_OVERHEAD_BYTES) as f64;
    let shell = |c: f64| HEADER_BYTES + c * DIRECTORY_ENTRY_BYTES + (c - 1.0) * pivot_bytes;
    let pages = |b: f64| (b / PAGE_BYTES).ceil().max(1.0) * PAGE_BYTES;
    let mut out = Vec::with_capacity(2 * lv.len());
    for (i, &n) in lv.iter().enumerate() {
        let n = n as f64;
        let height = (lv.len() - 1 - i) as u32;
        let obj = |kind, count, cached_bytes, read_bytes, accesses, lifetime| Part {
            kind,
            height,
            count,
            cached_bytes,
            read_bytes,
            accesses,
            lifetime,
            misses: 0.0,
        };
        let shell_life = 1.0 + SHELL_KEEP_PASSES;
        if height == 0 {
            let b = (node * d.fill / shape.basement_bytes as f64)
                .ceil()
                .max(1.0);
            let s = shell(b);
            out.push(obj(PartKind::Shell, n, s, pages(s), 1.0, shell_life));
            let basement = shape.basement_bytes as f64;
            let read = match how {
                PartitionReads::Whole => basement,
                PartitionReads::Segments => segment_read_bytes(basement, segment_bytes(basement)),
            };
            out.push(obj(PartKind::Basement, n * b, basement, read, 1.0, 1.0));
            continue;
        }
        let c = (lv[i + 1] as f64 / n).max(1.0);
        let buf = node * (1.0 - 1.0 / (2.0 * shape.fanout as f64));
        let messages = buf / message_bytes;
        let s = shell(c) + c * CHILD_REF_BYTES + messages * FILTER_BITS_PER_KEY / 8.0;
        out.push(obj(PartKind::Shell, n, s, pages(s), 1.0, shell_life));
        let p = (n * messages / d.rows as f64 + FILTER_FALSE_POSITIVE).min(1.0);
        let share = buf / c;
        let segment = segment_bytes(shape.basement_bytes as f64);
        let read = match how {
            PartitionReads::Whole => share * 4.0 / 3.0,
            PartitionReads::Segments => segment_read_bytes(share * 4.0 / 3.0, segment),
        };
        out.push(obj(PartKind::Buffer, n * c, share, read, p, 1.0));
    }
    assert!(out.len() == 2 * lv.len() && out.iter().all(|p| p.count >= 1.0));
    out
}

/// Bytes the cache holds after `t` gets of characteristic time.
fn held_bytes(parts: &[Part], t: f64) -> f64 {
    parts
        .iter()
        .map(|p| p.count * p.cached_bytes * -(-(p.accesses / p.count) * p.lifetime * t).exp_m1())
        .sum()
}

/// The characteristic time `T` (in gets) at which `parts` fill `cache_bytes`,
/// `None` when everything fits.
pub fn characteristic_gets(parts: &[Part], cache_bytes: f64) -> Option<f64> {
    assert!(cache_bytes >= 0.0 && !parts.is_empty());
    let total: f64 = parts.iter().map(|p| p.count * p.cached_bytes).sum();
    if total <= cache_bytes {
        return None;
    }
    let (mut lo, mut hi) = (0.0, 1.0);
    // Bounded: held_bytes rises to total > cache, so 2^200 gets suffice.
    for _ in 0..200 {
        if held_bytes(parts, hi) >= cache_bytes {
            break;
        }
        hi *= 2.0;
    }
    // Bounded bisection: 100 halvings are below f64 resolution.
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if held_bytes(parts, mid) < cache_bytes {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let t = 0.5 * (lo + hi);
    assert!(t.is_finite() && t >= 0.0);
    Some(t)
}

/// Reads per get in `shape` holding `d`, with `d.cache_bytes` of cache (see
/// the module comment), partitions read as `how`.
pub fn get_reads(d: &Dataset, shape: BEpsilonShape, how: PartitionReads) -> GetReads {
    let mut ps = parts(d, shape, how);
    let t = characteristic_gets(&ps, d.cache_bytes as f64);
    for p in &mut ps {
        p.misses = match t {
            None => 0.0,
            Some(t) => p.accesses * (-(p.accesses / p.count) * p.lifetime * t).exp(),
        };
    }
    let sum = |k: PartKind| ps.iter().filter(|p| p.kind == k).map(|p| p.misses).sum();
    let out = GetReads {
        shell_reads: sum(PartKind::Shell),
        buffer_reads: sum(PartKind::Buffer),
        basement_reads: sum(PartKind::Basement),
        reads: ps.iter().map(|p| p.misses).sum(),
        kib: ps.iter().map(|p| p.misses * p.read_bytes).sum::<f64>() / 1024.0,
        parts: ps,
    };
    assert!(out.reads >= 0.0 && out.reads <= out.parts.len() as f64);
    out
}

/// The B-epsilon prediction with the engine's costs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BEpsilonEnginePrediction {
    /// The advisor's device-only prediction (inserts' I/O from here).
    pub io: BEpsilonPrediction,
    pub reads: GetReads,
    pub costs: BEpsilonCosts,
    /// Drive seconds per get: sum of misses x 1 / R(read bytes).
    pub get_device_s: f64,
    /// Seconds per get, per range scan of the dataset's range and per
    /// insert, everything counted.
    pub get_s: f64,
    pub range_s: f64,
    pub insert_s: f64,
    pub inserts_per_s: f64,
    pub point_qps: f64,
    pub range_qps: f64,
}

impl BEpsilonEnginePrediction {
    /// Operations per second of `mix` (weights renormalised; inserts alone
    /// when every weight is 0).
    pub fn mix_ops(&self, mix: Mix) -> f64 {
        assert!(mix.point >= 0.0 && mix.range >= 0.0 && mix.insert >= 0.0);
        let total = mix.point + mix.range + mix.insert;
        let s = if total > 0.0 {
            (mix.point * self.get_s + mix.range * self.range_s + mix.insert * self.insert_s) / total
        } else {
            self.insert_s
        };
        let out = 1.0 / s.max(1e-12);
        assert!(out > 0.0 && out.is_finite());
        out
    }
}

/// The drive's seconds for the misses of `reads`: sum of misses x 1 / R.
fn device_s(dev: Device, reads: &GetReads) -> f64 {
    (reads.parts.iter())
        .filter(|p| p.misses > 0.0)
        .map(|p| p.misses / dev.read.iops(p.read_bytes.round() as u64).0)
        .sum()
}

/// Predicts inserts and gets for `shape` with the engine's `costs` (the
/// module comment's formulas), for this build's engine (segment reads).
/// `BEpsilonCosts::NONE` gives the device time alone, with the derived reads
/// per get.
pub fn predict_bepsilon_engine(
    dev: Device,
    d: &Dataset,
    shape: BEpsilonShape,
    costs: BEpsilonCosts,
) -> BEpsilonEnginePrediction {
    predict_bepsilon_engine_with(dev, d, shape, costs, PartitionReads::Segments)
}

/// [`predict_bepsilon_engine`] for an engine that reads partitions as `how`.
pub fn predict_bepsilon_engine_with(
    dev: Device,
    d: &Dataset,
    shape: BEpsilonShape,
    costs: BEpsilonCosts,
    how: PartitionReads,
) -> BEpsilonEnginePrediction {
    assert!(costs.cpu_insert_s >= 0.0 && costs.insert_io_factor >= 0.0);
    let io = predict_bepsilon(dev, d, shape);
    let reads = get_reads(d, shape, how);
    let get_device_s = device_s(dev, &reads);
    let get_s = costs.get_at_s(get_device_s, reads.reads, reads.kib);
    let insert_s = costs.insert_io_factor / io.inserts_per_s + costs.cpu_insert_s;
    let range_s = costs.range_at_s(get_s, d.range_records.max(1));
    let out = BEpsilonEnginePrediction {
        inserts_per_s: 1.0 / insert_s.max(1e-9),
        point_qps: 1.0 / get_s.max(1e-9),
        range_qps: 1.0 / range_s.max(1e-9),
        io,
        reads,
        costs,
        get_device_s,
        get_s,
        range_s,
        insert_s,
    };
    assert!(out.inserts_per_s > 0.0 && out.point_qps > 0.0);
    out
}

/// What one measured node size gives the fit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BEpsilonSample {
    pub node_bytes: u64,
    /// Wall and process CPU (user + system) seconds per insert of the load.
    pub insert_s: f64,
    pub cpu_insert_s: f64,
    /// The flush I/O per insert [`predict_bepsilon`] counts for this Db.
    pub predicted_insert_io_s: f64,
    /// Wall seconds per timed get, its device reads and KiB, and the
    /// drive's read time at the bytes per read, 1 / R(KiB x 1024 / reads).
    pub get_s: f64,
    pub reads_per_get: f64,
    pub kib_per_get: f64,
    pub read_s: f64,
    /// Seconds per get of keys whose path is cached, when measured.
    pub cached_get_s: Option<f64>,
    /// Wall seconds per range scan of `range_records` records, when
    /// measured (the mix has ranges).
    pub range_s: Option<f64>,
    pub range_records: u64,
}

/// Fits [`BEpsilonCosts`] (none without samples): `c_ins` the mean CPU per
/// insert; `f_ins` the total measured insert device time (wall minus CPU,
/// at least 0) over the total counted; `c_get` the mean cached get (0 when
/// none was measured); `x0 + x1 x KiB per read` a least-squares line through
/// each size's residual per read, `(get_s - c_get) / reads - read_s`, over
/// sizes with 0.05 reads per get or more (a falling line, noise, or one
/// below zero at 0 KiB, becomes the mean), so the model's misses cost what
/// the measured ones did; `r` the mean of `(range_s - get_s) / (R - 1)`
/// over the sizes with scans of two or more records (at least 0).
pub fn fit_bepsilon_costs(samples: &[BEpsilonSample]) -> BEpsilonCosts {
    if samples.is_empty() {
        return BEpsilonCosts::NONE;
    }
    let mean = |v: Vec<f64>| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let c_get = mean(samples.iter().filter_map(|s| s.cached_get_s).collect()).max(0.0);
    let measured_io: f64 = (samples.iter())
        .map(|s| (s.insert_s - s.cpu_insert_s).max(0.0))
        .sum();
    let counted_io: f64 = samples.iter().map(|s| s.predicted_insert_io_s).sum();
    let residuals: Vec<(f64, f64)> = (samples.iter().filter(|s| s.reads_per_get >= 0.05))
        .map(|s| {
            let per_read = (s.get_s - c_get) / s.reads_per_get - s.read_s;
            (s.kib_per_get / s.reads_per_get, per_read)
        })
        .collect();
    let (x0, x1) = match line_fit_rising(residuals.iter().copied()) {
        // Sizes whose KiB per read lie close together give a steep line that
        // makes a small read cost less than nothing (one `tune` run fitted
        // -50.9 µs + 5.74 µs per KiB, predicting a 64 KiB node's gets 10x
        // too fast): like a falling line, it becomes the mean.
        (x0, _) if x0 < 0.0 => line_fit_rising(residuals.iter().map(|p| (0.0, p.1))),
        line => line,
    };
    let out = BEpsilonCosts {
        cpu_insert_s: mean(samples.iter().map(|s| s.cpu_insert_s).collect()).max(0.0),
        insert_io_factor: if counted_io > 0.0 {
            measured_io / counted_io
        } else {
            1.0
        },
        cpu_get_s: c_get,
        miss_extra_s: x0,
        miss_extra_per_kib_s: x1,
        range_record_s: range_record_s(samples),
    };
    assert!(out.insert_io_factor >= 0.0 && out.miss_extra_per_kib_s >= 0.0);
    out
}

/// The mean seconds per scanned record beyond the seek over `samples`
/// with a measured scan of at least two records (0 without one).
fn range_record_s(samples: &[BEpsilonSample]) -> f64 {
    let per: Vec<f64> = (samples.iter())
        .filter(|s| s.range_records >= 2)
        .filter_map(|s| {
            s.range_s
                .map(|r| (r - s.get_s) / (s.range_records - 1) as f64)
        })
        .collect();
    let out = (per.iter().sum::<f64>() / per.len().max(1) as f64).max(0.0);
    assert!(out.is_finite());
    out
}

/// Entry `i`: the costs fitted on every sample but `i` (out of sample for
/// `i`); with one sample, [`BEpsilonCosts::NONE`].
pub fn leave_one_out_bepsilon(samples: &[BEpsilonSample]) -> Vec<BEpsilonCosts> {
    leave_one_out_with(samples, fit_bepsilon_costs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fit::fit_all;
    use crate::{Measurement, OpKind, Pattern};

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    /// 10,000 rows of 16 B keys and 100 B values, fill 1; 64 KiB nodes,
    /// 16 KiB basements, fanout 16.
    fn small() -> (Dataset, BEpsilonShape) {
        let d = Dataset {
            rows: 10_000,
            key_bytes: 16,
            value_bytes: 100,
            fill: 1.0,
            cache_bytes: 0,
            ..Dataset::default()
        };
        let shape = BEpsilonShape {
            node_bytes: 65536,
            basement_bytes: 16384,
            fanout: 16,
        };
        (d, shape)
    }

    #[test]
    fn parts_by_hand() {
        // Leaves hold floor(65,536 / 116) = 564 records: 18 leaves, 2, 1.
        // Leaf: b = 4 basements, shell 64 + 4 x 24 + 3 x 18 = 214 B (one
        // 4 KiB page read). Internal: buf = 65,536 x (1 - 1/32) = 63,488 B,
        // 484.64 messages of 131 B, filters 605.8 B. Height 1: 2 nodes of
        // 9 children: shell 64 + 216 + 144 + 144 + 605.8 = 1,173.8 B; p =
        // 2 x 484.64 / 10,000 + 0.008 = 0.104930; share 7,054.2 B, of
        // which a miss reads one 4 KiB segment (a quarter of a 16 KiB
        // basement), on the 4 KiB page it starts in and the pages after:
        // 8 KiB of pages on average. Root: 2 children: shell 767.8 B, p =
        // 0.056464, one 4 KiB segment of its 31,744-byte buffers. A basement
        // miss likewise reads one 4 KiB segment: 8 KiB.
        let (d, shape) = small();
        let ps = parts(&d, shape, PartitionReads::Segments);
        assert_eq!(ps.len(), 6);
        let m = 63488.0 / 131.0;
        let (root_shell, root_buf) = (ps[0], ps[1]);
        assert!(close(
            root_shell.cached_bytes,
            64.0 + 48.0 + 18.0 + 32.0 + m * 1.25
        ));
        assert!(close(root_buf.accesses, m / 10_000.0 + 0.008));
        assert!(close(root_buf.cached_bytes, 31744.0) && root_buf.count == 2.0);
        let (s1, b1) = (ps[2], ps[3]);
        assert_eq!((s1.height, s1.count, s1.lifetime), (1, 2.0, 3.0));
        assert!(close(
            s1.cached_bytes,
            64.0 + 216.0 + 144.0 + 144.0 + m * 1.25
        ));
        assert!(close(b1.accesses, 2.0 * m / 10_000.0 + 0.008));
        assert!(close(b1.read_bytes, 8192.0) && b1.count == 18.0);
        let (leaf, base) = (ps[4], ps[5]);
        assert_eq!(
            (leaf.kind, leaf.count, leaf.read_bytes),
            (PartKind::Shell, 18.0, 4096.0)
        );
        assert!(close(leaf.cached_bytes, 214.0));
        assert_eq!(
            (base.kind, base.count, base.read_bytes),
            (PartKind::Basement, 72.0, 8192.0)
        );
        // Read whole (the engine before segments): 4/3 of the share, and
        // the 16 KiB basement.
        let whole = parts(&d, shape, PartitionReads::Whole);
        assert!(close(whole[3].read_bytes, 63488.0 / 9.0 * 4.0 / 3.0));
        assert_eq!(whole[5].read_bytes, 16384.0);
    }

    #[test]
    fn no_cache_reads_everything_a_get_touches() {
        // Three shells, the two buffers with their probabilities, a basement.
        let (d, shape) = small();
        let m = 63488.0 / 131.0;
        let (p0, p1) = (m / 10_000.0 + 0.008, 2.0 * m / 10_000.0 + 0.008);
        let r = get_reads(&d, shape, PartitionReads::Segments);
        assert!(close(r.reads, 3.0 + p0 + p1 + 1.0), "{}", r.reads);
        assert!(close(r.shell_reads, 3.0) && close(r.basement_reads, 1.0));
        let kib =
            (3.0 * 4096.0 + p0 * (4096.0 + 4096.0) + p1 * (4096.0 + 4096.0) + 8192.0) / 1024.0;
        assert!(close(r.kib, kib), "{} {kib}", r.kib);
        // A cache larger than the tree: nothing read.
        let all = Dataset {
            cache_bytes: 1 << 30,
            ..d
        };
        assert_eq!(get_reads(&all, shape, PartitionReads::Segments).reads, 0.0);
    }

    fn part(count: f64, lifetime: f64) -> Part {
        Part {
            kind: PartKind::Basement,
            height: 0,
            count,
            cached_bytes: 1000.0,
            read_bytes: 1000.0,
            accesses: 1.0,
            lifetime,
            misses: 0.0,
        }
    }

    #[test]
    fn characteristic_time_by_hand() {
        // 100 objects of 1,000 B, one touched per get: half fit when
        // 1e5 x (1 - exp(-T / 100)) = 5e4, T = 100 ln 2; a miss ratio of 1/2.
        let t = characteristic_gets(&[part(100.0, 1.0)], 50_000.0).unwrap();
        assert!((t - 100.0 * std::f64::consts::LN_2).abs() < 1e-6, "{t}");
        // Shells live 3 T: with x = exp(-T / 100) = 1/2, shells miss x^3 =
        // 1/8 and partitions 1/2, holding 2e5 - 1e5 x (1/8 + 1/2) = 137,500 B.
        let t = characteristic_gets(&[part(100.0, 3.0), part(100.0, 1.0)], 137_500.0).unwrap();
        assert!((t - 100.0 * std::f64::consts::LN_2).abs() < 1e-6, "{t}");
        assert_eq!(characteristic_gets(&[part(100.0, 1.0)], 1e5), None);
    }

    #[test]
    fn engine_costs_add_to_the_device_time() {
        let ms: Vec<Measurement> = [
            (OpKind::Read, 4096, 10_000.0),
            (OpKind::Read, 65536, 2_000.0),
            (OpKind::Write, 4096, 5_000.0),
            (OpKind::Write, 65536, 1_000.0),
        ]
        .iter()
        .map(|&(op, b, i)| Measurement::simple(op, Pattern::Random, b, i))
        .collect();
        let r = fit_all(&ms).unwrap();
        let dev = Device {
            read: r.find(OpKind::Read, Pattern::Random, None).unwrap(),
            write: r.find(OpKind::Write, Pattern::Random, None),
            read_parallelism: 1.0,
        };
        let (d, shape) = small();
        let cached = Dataset {
            cache_bytes: 1 << 30,
            ..d.clone()
        };
        let c = BEpsilonCosts {
            cpu_insert_s: 10e-6,
            insert_io_factor: 0.5,
            cpu_get_s: 4e-6,
            miss_extra_s: 20e-6,
            miss_extra_per_kib_s: 2e-6,
            range_record_s: 1e-6,
        };
        // A cached tree: a get costs c_get alone, 4 µs -> 250,000/s; an
        // insert half predict_bepsilon's device time + 10 µs.
        let p = predict_bepsilon_engine(dev, &cached, shape, c);
        assert!(close(p.point_qps, 250_000.0), "{}", p.point_qps);
        assert!(close(p.insert_s, 0.5 / p.io.inserts_per_s + 10e-6));
        // No cache: the drive's time for every part's misses, plus 4 µs +
        // 20 µs per read + 2 µs per KiB.
        let q = predict_bepsilon_engine(dev, &d, shape, c);
        let dev_s: f64 = (q.reads.parts.iter())
            .map(|p| p.misses / dev.read.iops(p.read_bytes.round() as u64).0)
            .sum();
        assert!(close(q.get_device_s, dev_s));
        let want = 4e-6 + dev_s + 20e-6 * q.reads.reads + 2e-6 * q.reads.kib;
        assert!(close(q.get_s, want) && close(1.0 / q.point_qps, want));
        // A scan of the dataset's 100 records: the seek + 99 x 1 µs.
        assert!(close(q.range_s, want + 99e-6) && close(1.0 / q.range_qps, q.range_s));
        // The mix 80/10/10 weighs the three times; renormalised weights
        // give the same rate, no weights the inserts alone.
        let m = |point, range, insert| Mix {
            point,
            range,
            insert,
        };
        let mix_s = 0.8 * q.get_s + 0.1 * q.range_s + 0.1 * q.insert_s;
        assert!(close(q.mix_ops(m(0.8, 0.1, 0.1)), 1.0 / mix_s));
        assert!(close(q.mix_ops(m(8.0, 1.0, 1.0)), 1.0 / mix_s));
        assert!(close(q.mix_ops(m(0.0, 0.0, 0.0)), q.inserts_per_s));
        // A miss cannot cost less than nothing: c_get alone.
        let fast = BEpsilonCosts {
            miss_extra_s: -1.0,
            ..c
        };
        let f = predict_bepsilon_engine(dev, &d, shape, fast);
        assert!(close(f.get_s, 4e-6), "{}", f.get_s);
    }

    #[test]
    fn fit_by_hand() {
        // Cached gets 4 µs, reads of 100 µs on the drive, misses costing 10
        // µs + 1 µs per KiB on top: a get of r reads and k KiB takes 4 +
        // 110 r + k µs. At 1 read of 16 KiB, 2 of 64 and 1 of 64 the
        // residual per read is 26, 42, 74 µs at 16, 32, 64 KiB per read.
        // Inserts: CPU 10, 12, 14 µs; counted I/O 20, 10, 30 µs of which
        // half is measured: f_ins = (10 + 5 + 15) / 60 = 0.5, c_ins 12 µs.
        let s = |reads: f64, kib: f64, cpu_us: f64, io_us: f64| BEpsilonSample {
            node_bytes: 65536,
            insert_s: (cpu_us + io_us / 2.0) * 1e-6,
            cpu_insert_s: cpu_us * 1e-6,
            predicted_insert_io_s: io_us * 1e-6,
            get_s: (4.0 + 110.0 * reads + kib) * 1e-6,
            reads_per_get: reads,
            kib_per_get: kib,
            read_s: 100e-6,
            cached_get_s: Some(4e-6),
            range_s: None,
            range_records: 0,
        };
        let three = [
            s(1.0, 16.0, 10.0, 20.0),
            s(2.0, 64.0, 12.0, 10.0),
            s(1.0, 64.0, 14.0, 30.0),
        ];
        let c = fit_bepsilon_costs(&three);
        let near = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert!(near(c.cpu_get_s, 4e-6) && near(c.cpu_insert_s, 12e-6));
        assert!(near(c.miss_extra_s, 10e-6), "{}", c.miss_extra_s);
        assert!(near(c.miss_extra_per_kib_s, 1e-6) && near(c.insert_io_factor, 0.5));
        // 4 + max(0, 200 + 2 x 10 + 40) = 264 µs.
        assert!(near(c.get_at_s(200e-6, 2.0, 40.0), 264e-6));
        // Leaving the third out keeps the exact line and f_ins (5 + 10) /
        // 30; the insert CPU is then 11 µs.
        let loo = leave_one_out_bepsilon(&three);
        assert!(near(loo[2].miss_extra_s, 10e-6) && near(loo[2].insert_io_factor, 0.5));
        assert!(near(loo[2].cpu_insert_s, 11e-6));
        // A residual falling with the KiB per read (40 µs at 16, 20 µs at
        // 64) is noise: its mean, 30 µs, for every miss.
        // Two sizes of one read per get: (KiB per read, get µs) each.
        let two = |a: (f64, f64), b: (f64, f64)| {
            let at = |(kib, get_us): (f64, f64)| BEpsilonSample {
                get_s: get_us * 1e-6,
                ..s(1.0, kib, 10.0, 20.0)
            };
            fit_bepsilon_costs(&[at(a), at(b)])
        };
        let f = two((16.0, 144.0), (64.0, 124.0));
        assert!(near(f.miss_extra_s, 30e-6) && f.miss_extra_per_kib_s == 0.0);
        // Residuals of 10 µs at 8 KiB per read and 30 µs at 10 KiB: the
        // line (10 µs per KiB, -70 µs at 0 KiB) would make a 4 KiB read
        // cost less than nothing, so it too becomes the mean, 20 µs.
        let steep = two((8.0, 114.0), (10.0, 134.0));
        assert!(near(steep.miss_extra_s, 20e-6), "{}", steep.miss_extra_s);
        assert_eq!(steep.miss_extra_per_kib_s, 0.0);
        // No cached gets measured: c_get = 0, the rest per read.
        let one = fit_bepsilon_costs(&[BEpsilonSample {
            cached_get_s: None,
            ..s(2.0, 0.0, 10.0, 20.0)
        }]);
        assert_eq!(one.cpu_get_s, 0.0);
        assert!(near(one.miss_extra_s, 12e-6), "{}", one.miss_extra_s);
        assert_eq!(fit_bepsilon_costs(&[]), BEpsilonCosts::NONE);
        assert_eq!(c.range_record_s, 0.0);
        // Scans of 101 records taking 300 and 500 µs beside gets of 100 µs
        // cost 2 and 4 µs per record beyond the seek: r = 3 µs. A one-record
        // scan says nothing per record; a scan faster than its get, 0.
        let scan = |get_us: f64, range_us: f64, records: u64| BEpsilonSample {
            get_s: get_us * 1e-6,
            range_s: Some(range_us * 1e-6),
            range_records: records,
            ..s(1.0, 16.0, 10.0, 20.0)
        };
        let r = fit_bepsilon_costs(&[
            scan(100.0, 300.0, 101),
            scan(100.0, 500.0, 101),
            scan(100.0, 900.0, 1),
        ]);
        assert!(near(r.range_record_s, 3e-6), "{}", r.range_record_s);
        assert_eq!(
            fit_bepsilon_costs(&[scan(100.0, 50.0, 101)]).range_record_s,
            0.0
        );
        assert_eq!(
            leave_one_out_bepsilon(&three[..1]),
            vec![BEpsilonCosts::NONE]
        );
    }
}
