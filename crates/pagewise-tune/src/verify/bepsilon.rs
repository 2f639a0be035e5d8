//! `pagewise tune` verification of the B-epsilon advice: trees at the advised
//! node size and its neighbours (half, double), each loaded by random
//! inserts, then measured in the same interleaved rounds and phases as the
//! B+tree page sizes ([`super::run::Session`]: point gets, the described
//! mix, cached gets), and set against
//! [`pagewise_model::advise::predict_bepsilon`] on the same scaled dataset.
//!
//! **Scaling rule** ([`BEPSILON_RULE`]): `rows' = min(rows, budget / 8)` records
//! inserted in a random order (what a B-epsilon tree is for), batches of
//! 1,000, buffered commits; the load's insert rate includes the final
//! checkpoint (close). The cache keeps the described Db-to-cache ratio for
//! the rows inserted (a load the time limit stops early has fewer):
//! `cache' = cache x rows' / rows`, at least 1 MiB and at least what holds
//! one node in the engine's dirty budget ([`cache_for_node`]); node sizes
//! stay within the planned cache's budget ([`largest_node_for`]). Basement and fanout are
//! the advisor's (the basement at most half the node, as the engine
//! requires). Two predictions per size: the advisor's, I/O only, and the
//! corrected one ([`pagewise_model::advise::predict_bepsilon_engine`]: reads
//! per get derived from the shells, buffers and basements a get touches and
//! what the cache holds, plus the engine's costs). The costs are measured
//! here: process CPU per insert over the load, the load's remaining time
//! against the flush I/O the advisor counts, the CPU of gets on a few hot
//! keys (a cached get) and the timed gets' time per read beside the
//! drive's; each size is predicted with the constants fitted on the other
//! sizes (out of sample). The verdict compares the measured ranking of the
//! node sizes for the described mix (the rounds' median rate) with the
//! recommendation, and names the corrected model's pick.

use super::build::{DbFiles, TREE};
use super::keys::{coprime_step, key, nth, value};
use super::run::{Measured, Session, Workload};
use super::Budget;
use anyhow::Context;
use pagewise::{BEpsilonOptions, Batch, Db, Durability, TreeKind};
use pagewise_model::advise::{
    fit_bepsilon_costs, leave_one_out_bepsilon, predict_bepsilon, predict_bepsilon_engine, Advice,
    BEpsilonCosts, BEpsilonEnginePrediction, BEpsilonPrediction, BEpsilonSample, BEpsilonShape,
    Dataset, Device,
};
use pagewise_model::units::fmt_bytes;
use serde::Serialize;
use std::time::{Duration, Instant};

/// Records per insert batch (as `pagewise bench`'s fills).
const BATCH: u64 = 1000;
/// Node sizes the verification builds (the engine accepts 256 B..64 MiB;
/// below 16 KiB a node holds too few messages to buffer).
pub const MIN_NODE_BYTES: u64 = 16 << 10;
pub const MAX_NODE_BYTES: u64 = 16 << 20;
/// Below this a gap between two node sizes is run-to-run noise.
const MARGIN: f64 = 0.03;

pub const BEPSILON_RULE: &str = "rows' = min(rows, an eighth of the B+tree budget), inserted in a random order in batches of 1,000 (buffered commits, the final checkpoint timed; a load the time limit stops early counts the rows it inserted); cache' = cache x rows' / rows (at least 1 MiB, and at least what holds one node in the dirty budget), keeping the Db-to-cache ratio; node sizes at most the planned cache's dirty budget; basement and fanout as advised; then the same warm-up, point gets, mix and cached gets as the B+tree page sizes, in the same interleaved rounds; predictions are the advisor's (I/O only) and the corrected model's (derived reads per get, the engine's costs fitted on the other node sizes) on this scaled dataset";
/// Most distinct keys read over and over for the cached-get CPU.
const HOT_KEYS: u64 = 64;

/// One measured node size.
#[derive(Debug, Clone, Serialize)]
pub struct NodeCheck {
    pub shape: BEpsilonShape,
    pub rows: u64,
    pub cache_bytes: u64,
    pub predicted: BEpsilonPrediction,
    /// The random-order load: seconds and inserts per second (what the
    /// B-epsilon model's insert rate is set against).
    pub insert_secs: f64,
    pub inserts_per_s: f64,
    /// Point gets per second of the rounds' point phase.
    pub point_qps: f64,
    /// Data-file reads per point get, and their KiB.
    pub reads_per_get: f64,
    pub kib_per_get: f64,
    /// Process CPU (user + system) per insert of the load; thread CPU per
    /// timed get and per get of a few hot keys (a cached path).
    pub cpu_insert_s: f64,
    pub cpu_get_s: f64,
    pub cpu_cached_get_s: f64,
    /// Microseconds per range scan of the described range's records from a
    /// random key inside the mix (`None` when the mix has no ranges).
    pub range_us: Option<f64>,
    pub height: u32,
    /// measured / predicted - 1.
    pub insert_error: f64,
    pub point_error: f64,
    /// The described mix per second: measured (the median of the rounds'
    /// rates, as the B+tree's) and predicted by the advisor (point gets and
    /// inserts: its B-epsilon model has no scans).
    pub mix_ops: f64,
    pub predicted_mix_ops: f64,
    /// The corrected prediction, with the CPU constants fitted on the other
    /// node sizes (out of sample; none with one size), and its errors; its
    /// mix counts scans too (a get's seek plus the fitted cost per record).
    pub corrected: Option<BEpsilonEnginePrediction>,
    pub corrected_insert_error: f64,
    pub corrected_point_error: f64,
    pub corrected_mix_ops: f64,
    /// The interleaved rounds' measurement (point gets, the mix by
    /// operation and by round, cached gets) that the rates above come from.
    pub measured: Measured,
}

/// Operations per second of a mix of point gets and inserts weighted
/// `point` and `insert` (renormalised; inserts alone when both are 0).
pub fn mix_rate(point: f64, insert: f64, point_qps: f64, inserts_per_s: f64) -> f64 {
    assert!(point >= 0.0 && insert >= 0.0 && point_qps > 0.0 && inserts_per_s > 0.0);
    let (wp, wi) = if point + insert > 0.0 {
        (point / (point + insert), insert / (point + insert))
    } else {
        (0.0, 1.0)
    };
    let out = 1.0 / (wp / point_qps + wi / inserts_per_s);
    assert!(out > 0.0 && out.is_finite());
    out
}

#[derive(Debug, Clone, Serialize)]
pub struct BEpsilonVerification {
    pub recommended_node_bytes: u64,
    /// The node size with the highest measured mix rate.
    pub best_measured_node_bytes: u64,
    /// The CPU constants fitted on every measured size (in sample).
    pub costs: BEpsilonCosts,
    /// The node size the corrected model, with `costs`, ranks first for the
    /// mix among the measured ones.
    pub corrected_best_node_bytes: u64,
    pub verdict: String,
    pub sizes: Vec<NodeCheck>,
    pub rule: &'static str,
    /// Seconds the node sizes' loads took (they are measured in the
    /// B+tree's interleaved rounds, whose time the verification reports).
    pub elapsed_secs: f64,
}

/// The advised node size as the verification measured it (clamped to the
/// range it builds).
pub fn clamp_node(advised: u64) -> u64 {
    advised.clamp(MIN_NODE_BYTES, MAX_NODE_BYTES)
}

/// The largest node size a cache of `cache_bytes` verifies: the largest
/// power of two within the engine's dirty budget (`dirty_percent` of the
/// cache), at least [`MIN_NODE_BYTES`]. A larger dirty node cannot stay in
/// the budget, so every insert writes nodes back (2 MiB nodes in 1-2 MiB of
/// cache measured 124-308 mix ops/s against 1,100-7,800 at 1 MiB:
/// docs/benchmarks.md, "Tune's advice measured").
pub fn largest_node_for(cache_bytes: u64) -> u64 {
    let percent = dirty_percent();
    let budget = cache_bytes.saturating_mul(percent) / 100;
    let out = if budget < MIN_NODE_BYTES {
        MIN_NODE_BYTES
    } else {
        (1u64 << (63 - budget.leading_zeros())).min(MAX_NODE_BYTES)
    };
    assert!(out.is_power_of_two() && (MIN_NODE_BYTES..=MAX_NODE_BYTES).contains(&out));
    out
}

/// The percent of a node Db's cache its dirty set may take (the engine's
/// default, which the verification's Dbs keep).
fn dirty_percent() -> u64 {
    let percent = pagewise::Options::default().dirty_percent as u64;
    assert!((1..=100).contains(&percent));
    percent
}

/// A cache of `cache_bytes` for `rows_of` rows scaled to `rows` rows,
/// keeping the Db-to-cache ratio, and at least 1 MiB (the rule of
/// [`BEPSILON_RULE`]; the kept costs rank at the same scale).
pub fn scaled_cache(cache_bytes: u64, rows: u64, rows_of: u64) -> u64 {
    let out = (cache_bytes as f64 * rows as f64 / rows_of.max(1) as f64) as u64;
    out.max(1 << 20)
}

/// The smallest cache whose dirty budget holds a `node_bytes` node:
/// `ceil(node x 100 / dirty_percent)`, so `largest_node_for` of it is at
/// least `node_bytes`.
pub fn cache_for_node(node_bytes: u64) -> u64 {
    let percent = dirty_percent();
    let out = (node_bytes.saturating_mul(100)).div_ceil(percent.max(1));
    assert!(out.saturating_mul(percent) / 100 >= node_bytes);
    out
}

/// Node sizes to verify: N/2, N, 2N within the verified range, at most `hi`.
pub fn node_sizes(advised: u64, hi: u64) -> Vec<u64> {
    let hi = hi.clamp(MIN_NODE_BYTES, MAX_NODE_BYTES);
    let n = advised.clamp(MIN_NODE_BYTES, hi);
    let mut v: Vec<u64> = [n / 2, n, n.saturating_mul(2)]
        .into_iter()
        .map(|s| s.clamp(MIN_NODE_BYTES, hi))
        .collect();
    v.dedup();
    assert!(!v.is_empty() && v.windows(2).all(|w| w[0] < w[1]));
    v
}

/// What a B-epsilon verification builds: the node shapes, the records
/// each loads and the scaled cache. `None` without B-epsilon advice.
pub(super) fn plan(budget: &Budget, advice: &Advice) -> Option<(Vec<BEpsilonShape>, u64, u64)> {
    let b = advice.bepsilon.as_ref()?;
    let d = &advice.dataset;
    let rows = d.rows.min((budget.rows / 8).max(1000));
    let cache = scaled_cache(d.cache_bytes, rows, d.rows);
    let shapes = (node_sizes(b.node_size, largest_node_for(cache)).into_iter())
        .map(|node| shape(b, node))
        .collect();
    Some((shapes, rows, cache))
}

/// The advised shape at node size `node` (basement at most half the node).
pub(super) fn shape(b: &pagewise_model::advise::BEpsilonAdvice, node: u64) -> BEpsilonShape {
    BEpsilonShape {
        node_bytes: node,
        basement_bytes: b.basement_size.clamp(512, node / 2),
        fanout: b.fanout.clamp(3, 1024),
    }
}

/// A loaded B-epsilon Db: what its random-order load measured.
pub(super) struct NodeLoad {
    pub shape: BEpsilonShape,
    /// Records inserted (fewer than planned when the load hit its limit).
    pub rows: u64,
    pub planned_rows: u64,
    pub cache_bytes: u64,
    pub insert_secs: f64,
    pub cpu_insert_s: f64,
}

/// Loads node size `shape` by `rows` random inserts (timed, the final
/// checkpoint included) and reopens it with `cache` bytes of cache, ready
/// for the same measured phases as the B+tree's ([`Session`]).
pub(super) fn build(
    budget: &Budget,
    ctx: &super::Ctx,
    shape: BEpsilonShape,
    rows: u64,
    cache: u64,
) -> anyhow::Result<(NodeLoad, Session)> {
    let advice = ctx.advice;
    let d = &advice.dataset;
    let files = DbFiles::new(ctx.dir, "bepsilon", shape.node_bytes, ctx.fs.clone())?;
    let opts = BEpsilonOptions::default()
        .node_bytes(shape.node_bytes as u32)
        .basement_bytes(shape.basement_bytes as u32)
        .fanout(shape.fanout as u16);
    // 6 s of inserts per size in quick mode (48 s in full): the node sizes
    // fit tune's 5-minute budget even on an emulated hard disk.
    let limit = Duration::from_secs_f64(budget.load_secs * 0.4);
    let cpu0 = cpu_s();
    let (done, insert_secs) = insert(&files, opts, rows, cache, d.key_bytes, d.value_bytes, limit)?;
    let cpu_insert_s = (cpu_s() - cpu0) / done.max(1) as f64;
    // A load the time limit stopped early keeps the Db-to-cache ratio too:
    // node sizes load different row counts, and the same cache would
    // flatter the smaller trees' gets.
    let cache = scaled_cache(cache, done, rows);
    // The plan kept the node within the planned cache's dirty budget; a
    // shorter load can take it out again: raise the cache to hold it.
    let cache = cache.max(cache_for_node(shape.node_bytes));
    let db = Db::open(
        &files.path,
        files.options().cache_bytes(cache as usize).direct_io(true),
    )
    .with_context(|| format!("cannot reopen {}", files.path.display()))?;
    let w = Workload {
        rows: done,
        order: Some((coprime_step(rows), rows)),
        key_bytes: d.key_bytes,
        value_bytes: d.value_bytes,
        range_records: d.range_records,
        mix: advice.mix,
        seed: shape.node_bytes ^ 0xbe75,
        // Each hot key keeps its basement (and the buffers on its path)
        // cached: at most a quarter of the cache in basements.
        hot_keys: (cache / 4 / shape.basement_bytes.max(1)).clamp(1, HOT_KEYS),
        name: format!("{} nodes", fmt_bytes(shape.node_bytes as f64)),
    };
    let load = NodeLoad {
        shape,
        rows: done,
        planned_rows: rows,
        cache_bytes: cache,
        insert_secs,
        cpu_insert_s,
    };
    assert!(load.rows >= 1 && load.rows <= rows);
    Ok((load, Session::new(db, files, w)?))
}

/// The verification of the measured node sizes `sizes` (their corrected
/// predictions, the verdict); `load_secs` is the time their loads took.
pub(super) fn finish(
    dev: Device,
    advice: &Advice,
    mut sizes: Vec<NodeCheck>,
    load_secs: f64,
) -> Option<BEpsilonVerification> {
    let b = advice.bepsilon.as_ref()?;
    let best = sizes
        .iter()
        .max_by(|a, b| a.mix_ops.total_cmp(&b.mix_ops))?
        .shape
        .node_bytes;
    let (costs, corrected_best) = correct(dev, advice, &mut sizes);
    let verdict = verdict(&sizes, clamp_node(b.node_size), corrected_best);
    Some(BEpsilonVerification {
        recommended_node_bytes: b.node_size,
        best_measured_node_bytes: best,
        costs,
        corrected_best_node_bytes: corrected_best,
        verdict,
        sizes,
        rule: BEPSILON_RULE,
        elapsed_secs: load_secs,
    })
}

/// The scaled dataset a check ran on.
fn scaled(d: &Dataset, c: &NodeCheck) -> Dataset {
    Dataset {
        rows: c.rows,
        cache_bytes: c.cache_bytes,
        ..d.clone()
    }
}

/// Fits the engine's constants on `sizes`, fills in each size's
/// corrected prediction from the constants fitted on the others, and
/// returns the in-sample constants and the node size the corrected model
/// ranks first for the mix.
fn correct(dev: Device, advice: &Advice, sizes: &mut [NodeCheck]) -> (BEpsilonCosts, u64) {
    assert!(!sizes.is_empty());
    let samples: Vec<BEpsilonSample> = (sizes.iter())
        .map(|c| {
            let bytes_per_read = c.kib_per_get * 1024.0 / c.reads_per_get.max(1e-9);
            BEpsilonSample {
                node_bytes: c.shape.node_bytes,
                insert_s: c.insert_secs / c.rows.max(1) as f64,
                cpu_insert_s: c.cpu_insert_s,
                predicted_insert_io_s: 1.0 / c.predicted.inserts_per_s,
                get_s: 1.0 / c.point_qps,
                reads_per_get: c.reads_per_get,
                kib_per_get: c.kib_per_get,
                read_s: 1.0 / dev.read.iops(bytes_per_read.max(512.0) as u64).0,
                cached_get_s: Some(c.cpu_cached_get_s),
                range_s: c.range_us.map(|us| us * 1e-6),
                range_records: advice.dataset.range_records,
            }
        })
        .collect();
    let costs = fit_bepsilon_costs(&samples);
    let loo = leave_one_out_bepsilon(&samples);
    let m = advice.mix;
    let mut best = (0u64, 0.0f64);
    for (c, k) in sizes.iter_mut().zip(loo) {
        let d = scaled(&advice.dataset, c);
        let p = predict_bepsilon_engine(dev, &d, c.shape, k);
        c.corrected_insert_error = c.inserts_per_s / p.inserts_per_s - 1.0;
        c.corrected_point_error = c.point_qps / p.point_qps - 1.0;
        c.corrected_mix_ops = p.mix_ops(m);
        c.corrected = Some(p);
        let q = predict_bepsilon_engine(dev, &d, c.shape, costs);
        let mix = q.mix_ops(m);
        if mix > best.1 {
            best = (c.shape.node_bytes, mix);
        }
    }
    assert!(best.0 > 0);
    (costs, best.0)
}

/// The check of one node size from its load and what the interleaved
/// rounds measured on it.
pub(super) fn node_check(dev: Device, advice: &Advice, l: &NodeLoad, m: Measured) -> NodeCheck {
    let scaled = Dataset {
        rows: l.rows,
        cache_bytes: l.cache_bytes,
        ..advice.dataset.clone()
    };
    let predicted = predict_bepsilon(dev, &scaled, l.shape);
    let inserts_per_s = l.rows as f64 / l.insert_secs.max(1e-9);
    let mx = advice.mix;
    let out = NodeCheck {
        shape: l.shape,
        rows: l.rows,
        cache_bytes: l.cache_bytes,
        insert_secs: l.insert_secs,
        inserts_per_s,
        point_qps: m.point_qps,
        reads_per_get: m.point_reads_per_get,
        kib_per_get: m.point_kib_per_get,
        cpu_insert_s: l.cpu_insert_s,
        cpu_get_s: m.point_cpu_us * 1e-6,
        cpu_cached_get_s: m.cached_get_us * 1e-6,
        range_us: m.mix_range_us,
        height: m.height,
        insert_error: inserts_per_s / predicted.inserts_per_s - 1.0,
        point_error: m.point_qps / predicted.point_qps - 1.0,
        mix_ops: m.mix_ops,
        predicted_mix_ops: mix_rate(
            mx.point,
            mx.insert,
            predicted.point_qps,
            predicted.inserts_per_s,
        ),
        predicted,
        corrected: None,
        corrected_insert_error: 0.0,
        corrected_point_error: 0.0,
        corrected_mix_ops: 0.0,
        measured: m,
    };
    assert!(out.rows >= 1 && out.inserts_per_s > 0.0 && out.mix_ops > 0.0);
    out
}

/// Inserts keys 0..rows (even numbers) in a random order; the close (the
/// final checkpoint) is timed. Returns the records inserted and the seconds.
fn insert(
    files: &DbFiles,
    opts: BEpsilonOptions,
    rows: u64,
    cache: u64,
    key_bytes: u64,
    value_bytes: u64,
    limit: Duration,
) -> anyhow::Result<(u64, f64)> {
    let o = files
        .options()
        .cache_bytes(cache as usize)
        .direct_io(true)
        .durability(Durability::Buffered);
    let db = Db::create(&files.path, o)
        .with_context(|| format!("cannot create {}", files.path.display()))?;
    db.tree_with(TREE, TreeKind::BEpsilon(opts))
        .context("cannot create the B-epsilon tree")?;
    let step = coprime_step(rows);
    let start = Instant::now();
    let mut done = 0u64;
    // Bounded: at most rows / BATCH + 1 batches.
    while done < rows {
        if pagewise_probe::interrupted() {
            anyhow::bail!("interrupted: verification stopped, its files are removed");
        }
        if done > 0 && start.elapsed() >= limit {
            break;
        }
        let end = (done + BATCH).min(rows);
        let mut b = Batch::new();
        for i in done..end {
            let n = nth(i, step, rows);
            b.insert(TREE, key(2 * n, key_bytes), value(n, value_bytes));
        }
        db.apply(b).context("B-epsilon insert failed")?;
        done = end;
    }
    db.close()
        .context("closing the B-epsilon verification Db failed")?;
    Ok((done, start.elapsed().as_secs_f64()))
}

/// Process CPU seconds (user + system, every thread) so far.
fn cpu_s() -> f64 {
    super::run::cpu_clock_s(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// "confirmed: ..." when the recommended node size measured the highest
/// mix rate (or within [`MARGIN`] of it), else the best, the gap and the
/// rates behind it, measured and predicted by the corrected model; then the
/// corrected model's own pick among the measured sizes (`corrected_best`).
fn verdict(sizes: &[NodeCheck], recommended: u64, corrected_best: u64) -> String {
    let by_mix = |a: &&NodeCheck, b: &&NodeCheck| a.mix_ops.total_cmp(&b.mix_ops);
    let Some(best) = sizes.iter().max_by(by_mix) else {
        return "no node size was measured".into();
    };
    let n = |c: &NodeCheck| fmt_bytes(c.shape.node_bytes as f64);
    let pick = format!(
        "; the corrected model (the engine's costs fitted on these sizes) ranks {} first{}",
        fmt_bytes(corrected_best as f64),
        if corrected_best == best.shape.node_bytes {
            ", as measured"
        } else {
            ", not the measured best"
        }
    );
    let Some(rec) = sizes.iter().find(|c| c.shape.node_bytes == recommended) else {
        return format!("measured best is {} nodes{pick}", n(best));
    };
    if best.shape.node_bytes == recommended {
        let second = (sizes.iter())
            .filter(|c| c.shape.node_bytes != recommended)
            .max_by(by_mix);
        return match second {
            Some(s) => format!(
                "confirmed: {} nodes measured fastest for the mix, {:.1}% ahead of {}{pick}",
                n(rec),
                (rec.mix_ops / s.mix_ops - 1.0) * 100.0,
                n(s)
            ),
            None => format!("confirmed: {} nodes (the only size measured)", n(rec)),
        };
    }
    let gap = best.mix_ops / rec.mix_ops - 1.0;
    if gap < MARGIN {
        return format!(
            "confirmed within noise: {} nodes measured {:.1}% faster for the mix than the recommended {}, under the {:.0}% margin{pick}",
            n(best),
            gap * 100.0,
            n(rec),
            MARGIN * 100.0
        );
    }
    format!("{}{pick}", miss_text(best, rec, gap))
}

/// Why the measured best beat the recommendation: both rates, measured and
/// as the corrected model predicts them (out of sample), and reads per get.
fn miss_text(best: &NodeCheck, rec: &NodeCheck, gap: f64) -> String {
    let n = |c: &NodeCheck| fmt_bytes(c.shape.node_bytes as f64);
    let k = |c: &NodeCheck| {
        c.corrected
            .as_ref()
            .map(|p| (p.inserts_per_s, p.point_qps, p.reads.reads))
    };
    let (kb, kr) = (k(best).unwrap_or_default(), k(rec).unwrap_or_default());
    format!(
        "measured best is {} nodes, {:.1}% ahead of the recommended {} for the mix: inserts/s {:.0} against {:.0} (corrected model {:.0} against {:.0}), gets/s {:.0} against {:.0} (corrected model {:.0} against {:.0}), reads per get {:.2} against {:.2} (corrected model {:.2} against {:.2})",
        n(best),
        gap * 100.0,
        n(rec),
        best.inserts_per_s,
        rec.inserts_per_s,
        kb.0,
        kr.0,
        best.point_qps,
        rec.point_qps,
        kb.1,
        kr.1,
        best.reads_per_get,
        rec.reads_per_get,
        kb.2,
        kr.2
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_sizes_clamp_and_dedup() {
        let any = MAX_NODE_BYTES;
        assert_eq!(
            node_sizes(64 << 10, any),
            vec![32 << 10, 64 << 10, 128 << 10]
        );
        assert_eq!(node_sizes(4096, any), vec![16 << 10, 32 << 10]);
        assert_eq!(node_sizes(1 << 30, any), vec![8 << 20, 16 << 20]);
        // A cache's limit caps the sizes (and the advised one).
        assert_eq!(node_sizes(512 << 10, 512 << 10), vec![256 << 10, 512 << 10]);
        assert_eq!(node_sizes(2 << 20, 512 << 10), vec![256 << 10, 512 << 10]);
    }

    /// The cache keeps the Db-to-cache ratio at the verified rows, by hand:
    /// 64 MiB for 5M rows at 250k rows is a twentieth (67,108,864 / 20,
    /// rounded down); at 1,000 rows the 1 MiB floor; no described rows
    /// count as one.
    #[test]
    fn the_cache_scales_with_the_rows() {
        assert_eq!(scaled_cache(64 << 20, 250_000, 5_000_000), 3_355_443);
        assert_eq!(scaled_cache(64 << 20, 1_000, 5_000_000), 1 << 20);
        assert_eq!(scaled_cache(8 << 20, 3, 0), 24 << 20);
    }

    #[test]
    fn the_largest_node_fits_the_dirty_budget() {
        // 75% of the cache, rounded down to a power of two: 1 MiB of cache
        // holds 768 KiB dirty -> 512 KiB; 1,341,440 B (hdd's 1 MiB-node
        // run) -> 1,006,080 -> 512 KiB; 1,962,934 B (x25e) -> 1,472,200 ->
        // 1 MiB; 2,684,354 B (the real drive's 2 MiB-node run) ->
        // 2,013,265 -> 1 MiB; tiny caches give the smallest node.
        assert_eq!(pagewise::Options::default().dirty_percent, 75);
        assert_eq!(largest_node_for(1 << 20), 512 << 10);
        assert_eq!(largest_node_for(1_341_440), 512 << 10);
        assert_eq!(largest_node_for(1_962_934), 1 << 20);
        assert_eq!(largest_node_for(2_684_354), 1 << 20);
        assert_eq!(largest_node_for(4096), MIN_NODE_BYTES);
        assert_eq!(largest_node_for(u64::MAX), MAX_NODE_BYTES);
        // The cache that holds a node: 1 MiB / 0.75 = 1,398,102 B (rounded
        // up), whose budget holds 1 MiB; one byte less does not.
        assert_eq!(cache_for_node(1 << 20), 1_398_102);
        assert_eq!(largest_node_for(1_398_102), 1 << 20);
        assert_eq!(largest_node_for(1_398_101), 512 << 10);
    }

    #[test]
    fn coprime_step_visits_every_index_once() {
        for n in [1u64, 2, 7, 1000, 1024, 999_983] {
            let s = coprime_step(n);
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                let k = nth(i, s, n) as usize;
                assert!(!seen[k], "n {n} step {s} repeats {k}");
                seen[k] = true;
            }
        }
    }
}

#[cfg(test)]
mod mix_tests {
    use super::mix_rate;

    #[test]
    fn mix_rate_by_hand() {
        // 80% gets at 1,000/s (800 us) + 20% inserts at 10,000/s (20 us):
        // 820 us per operation -> 1,219.5/s.
        let r = mix_rate(0.8, 0.2, 1000.0, 10_000.0);
        assert!((r - 1e6 / 820.0).abs() < 1e-9, "{r}");
        // Weights renormalise: 0.4 / 0.1 is the same mix.
        assert!((mix_rate(0.4, 0.1, 1000.0, 10_000.0) - r).abs() < 1e-9);
        // No gets or inserts in the mix: inserts alone.
        assert!((mix_rate(0.0, 0.0, 1000.0, 10_000.0) - 10_000.0).abs() < 1e-9);
    }
}
