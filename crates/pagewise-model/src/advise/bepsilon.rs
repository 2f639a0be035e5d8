//! A B-epsilon tree sized from the affine model.
//!
//! Nodes are as large as the half-bandwidth point S x W: bigger nodes mean more
//! buffered messages per flush, and up to S x W each I/O costs at most twice a
//! minimal one. Point queries read only a basement node (a partial read of the
//! leaf), sized so its transfer costs at most a quarter of the setup time.
//! With B entries per node the fanout is B^epsilon; each flush moves the
//! child's share of the parent's buffer, node x fill / fanout bytes of
//! messages (key + value + 15 B each), one level down, so an insert costs
//! uncached levels / messages per flush amortised node reads and writes
//! (Brodal and Fagerberg 2003; Bender et al., ";login:" 2015). A flush is
//! counted in messages, not in internal entries (key + pointer): counting
//! entries overstated the messages a flush moves by (key + value + 15) /
//! (key + 8).

use super::btree::{caching, levels};
use super::{Dataset, Device, Row};
use crate::units::fmt_bytes;
use serde::{Deserialize, Serialize};

pub const EPSILON: f64 = 0.5;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BEpsilonAdvice {
    pub epsilon: f64,
    /// S x W of the random-read fit, bytes.
    pub half_bandwidth_point: f64,
    /// The recommended node size: the power of two nearest S x W (>= 4 KiB).
    pub node_size: u64,
    /// Partial-read unit for point queries: largest power of two <= S x W / 4.
    pub basement_size: u64,
    pub entries_per_node: f64,
    /// floor(entries per node ^ epsilon).
    pub fanout: u64,
    pub height: u32,
    pub cached_levels: f64,
    /// Amortised node I/Os (reads + writes) per insert.
    pub insert_ios: f64,
    /// Basement reads per point query.
    pub point_ios: f64,
    pub inserts_per_s: f64,
    pub point_qps: f64,
    /// The same for the recommended B+tree page, for comparison.
    pub btree_inserts_per_s: f64,
    pub btree_point_qps: f64,
    pub summary: String,
}

/// A B-epsilon tree's size parameters, as the engine's `BEpsilonOptions` takes them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BEpsilonShape {
    pub node_bytes: u64,
    pub basement_bytes: u64,
    /// Children per internal node (the engine's default is 16; the advisor's
    /// own choice is floor(entries per node ^ epsilon)).
    pub fanout: u64,
}

/// What the model predicts for one B-epsilon shape on one drive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BEpsilonPrediction {
    pub shape: BEpsilonShape,
    pub height: u32,
    pub cached_levels: f64,
    /// Messages one flush moves one level down: the parent's buffer bytes
    /// (node x fill) shared by `fanout` children, over a message's bytes.
    pub messages_per_flush: f64,
    /// Amortised node I/Os (reads + writes) per insert.
    pub insert_ios: f64,
    /// Basement reads per point query.
    pub point_ios: f64,
    pub inserts_per_s: f64,
    pub point_qps: f64,
}

/// Fixed bytes of a buffered message besides key and value (sequence
/// number, kind, lengths: docs/design.md, "B-epsilon nodes").
pub const MESSAGE_OVERHEAD_BYTES: u64 = 15;

/// Predicts inserts and point queries for `shape` (I/O only, like the
/// B+tree rows; [`super::predict_bepsilon_engine`] adds the reads per get the
/// engine's cache really misses and its costs). Each uncached level's flush reads and writes one child
/// node per `messages_per_flush` inserts; a point query reads one basement
/// per uncached level.
pub fn predict_bepsilon(dev: Device, d: &Dataset, shape: BEpsilonShape) -> BEpsilonPrediction {
    assert!(shape.fanout >= 2 && shape.basement_bytes >= 512);
    assert!(shape.basement_bytes <= shape.node_bytes);
    let leaf_cap =
        ((shape.node_bytes as f64 * d.fill / d.leaf_entry() as f64).floor() as u64).max(1);
    let lv = levels(d.rows, leaf_cap, shape.fanout);
    let c = caching(&lv, shape.node_bytes, d.cache_bytes);
    let h = lv.len() as f64;
    let uncached_levels = (h - c.whole_levels as f64 - c.partial).max(1.0);
    let message_bytes = (d.key_bytes + d.value_bytes + MESSAGE_OVERHEAD_BYTES) as f64;
    let messages_per_flush =
        (shape.node_bytes as f64 * d.fill / shape.fanout as f64 / message_bytes).max(1.0);
    let flushes = uncached_levels / messages_per_flush;
    let (r_node, _) = dev.read.iops(shape.node_bytes);
    let (w_node, _, _) = dev.write_iops(shape.node_bytes);
    let insert_s = flushes * (1.0 / r_node + 1.0 / w_node);
    let (r_base, _) = dev.read.iops(shape.basement_bytes);
    let out = BEpsilonPrediction {
        shape,
        height: lv.len() as u32,
        cached_levels: c.whole_levels as f64 + c.partial,
        messages_per_flush,
        insert_ios: 2.0 * flushes,
        point_ios: uncached_levels,
        inserts_per_s: 1.0 / insert_s,
        point_qps: r_base / uncached_levels,
    };
    assert!(out.inserts_per_s > 0.0 && out.point_qps > 0.0);
    out
}

/// The advisor's B-epsilon tree: nodes at the power of two nearest S x W
/// (at least 4 KiB), basements at most a quarter of it, fanout
/// floor(entries per node ^ epsilon).
pub fn advise_bepsilon(
    dev: Device,
    d: &Dataset,
    btree_best: &Row,
) -> Result<BEpsilonAdvice, String> {
    let hbp = dev.read.affine.half_bandwidth_point();
    if !hbp.is_finite() || hbp <= 0.0 {
        return Err("no B-epsilon node size: the random-read fit shows no transfer cost (W unbounded), so there is no finite half-bandwidth point S x W; measure larger block sizes or probe longer".into());
    }
    let node = nearest_pow2(hbp).max(4096);
    let btree = (btree_best.insert_ops, btree_best.point_qps);
    Ok(bepsilon_at(dev, d, hbp, node, btree))
}

/// The advice with `node`-byte nodes (a power of two of at least 4 KiB) on
/// a drive whose half-bandwidth point is `hbp`: the basement and fanout
/// follow the advisor's rules for that node size. `btree` is the B+tree's
/// (inserts/s, point gets/s) the summary compares with.
pub fn bepsilon_at(
    dev: Device,
    d: &Dataset,
    hbp: f64,
    node: u64,
    btree: (f64, f64),
) -> BEpsilonAdvice {
    assert!(hbp > 0.0 && node >= 4096 && node.is_power_of_two());
    let basement = floor_pow2(hbp / 4.0).clamp(512, node);
    let entries = node as f64 * d.fill / d.internal_entry() as f64;
    let fanout = (entries.powf(EPSILON).floor() as u64).max(2);
    let p = predict_bepsilon(
        dev,
        d,
        BEpsilonShape {
            node_bytes: node,
            basement_bytes: basement,
            fanout,
        },
    );
    let summary = format!(
        "B-epsilon tree (epsilon {EPSILON}): {} nodes (half-bandwidth point {}), {} basements, fanout {}: {:.4} I/Os per insert ({:.0}x the B+tree's {:.0} inserts/s), {:.2} basement reads per point query ({:.0} q/s vs the B+tree's {:.0})",
        fmt_bytes(node as f64),
        fmt_bytes(hbp),
        fmt_bytes(basement as f64),
        fanout,
        p.insert_ios,
        p.inserts_per_s / btree.0,
        btree.0,
        p.point_ios,
        p.point_qps,
        btree.1
    );
    let out = BEpsilonAdvice {
        epsilon: EPSILON,
        half_bandwidth_point: hbp,
        node_size: node,
        basement_size: basement,
        entries_per_node: entries,
        fanout,
        height: p.height,
        cached_levels: p.cached_levels,
        insert_ios: p.insert_ios,
        point_ios: p.point_ios,
        inserts_per_s: p.inserts_per_s,
        point_qps: p.point_qps,
        btree_inserts_per_s: btree.0,
        btree_point_qps: btree.1,
        summary,
    };
    assert!(out.basement_size <= out.node_size && out.fanout >= 2);
    out
}

/// The power of two nearest `v` on a log scale.
pub fn nearest_pow2(v: f64) -> u64 {
    let k = v.max(1.0).log2().round().clamp(0.0, 62.0);
    1u64 << (k as u32)
}

/// The largest power of two <= `v` (1 for v < 2).
pub fn floor_pow2(v: f64) -> u64 {
    let k = v.max(1.0).log2().floor().clamp(0.0, 62.0);
    1u64 << (k as u32)
}
