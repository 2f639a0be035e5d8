//! `pagewise tune` verification of the B-epsilon advice: trees at the advised
//! node size and its neighbours (half, double), each loaded by random inserts
//! and then read by random point gets, set against
//! [`pagewise_model::advise::predict_bepsilon`] on the same scaled dataset.
//!
//! **Scaling rule** ([`BEPSILON_RULE`]): `rows' = min(rows, budget / 8)` records
//! inserted in a random order (what a B-epsilon tree is for), batches of
//! 1,000, buffered commits; the insert rate includes the final checkpoint
//! (close). The cache keeps the described Db-to-cache ratio:
//! `cache' = cache x rows' / rows`, at least 1 MiB. Basement and fanout are
//! the advisor's (the basement at most half the node, as the engine
//! requires). Two predictions per size: the advisor's, I/O only, and the
//! corrected one ([`pagewise_model::advise::predict_bepsilon_engine`]: reads
//! per get derived from the shells, buffers and basements a get touches and
//! what the cache holds, plus the engine's costs). The costs are measured
//! here: process CPU per insert over the load, the load's remaining time
//! against the flush I/O the advisor counts, the wall time of gets on a few
//! hot keys (a cached get) and the timed gets' time per read beside the
//! drive's; each size is predicted with the constants fitted on the other
//! sizes (out of sample). The verdict compares the measured ranking of the node sizes for
//! the described mix's point gets and inserts with the recommendation, and
//! names the corrected model's pick.

use super::build::DbFiles;
use super::keys::{key, value, Rng};
use super::run::timed;
use super::Budget;
use anyhow::Context;
use pagewise::{BEpsilonOptions, Batch, Db, Durability, TreeKind};
use pagewise_io::Fs;
use pagewise_model::advise::{
    fit_bepsilon_costs, leave_one_out_bepsilon, predict_bepsilon, predict_bepsilon_engine, Advice,
    BEpsilonCosts, BEpsilonEnginePrediction, BEpsilonPrediction, BEpsilonSample, BEpsilonShape,
    Dataset, Device,
};
use pagewise_model::units::fmt_bytes;
use serde::Serialize;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The tree every B-epsilon verification Db uses.
const TREE: &str = "verify-bepsilon";
/// Records per insert batch (as `pagewise bench`'s fills).
const BATCH: u64 = 1000;
/// Node sizes the verification builds (the engine accepts 256 B..64 MiB;
/// below 16 KiB a node holds too few messages to buffer).
const MIN_NODE_BYTES: u64 = 16 << 10;
const MAX_NODE_BYTES: u64 = 16 << 20;
/// Below this a gap between two node sizes is run-to-run noise.
const MARGIN: f64 = 0.03;

pub const BEPSILON_RULE: &str = "rows' = min(rows, an eighth of the B+tree budget), inserted in a random order in batches of 1,000 (buffered commits, the final checkpoint timed); cache' = cache x rows' / rows (at least 1 MiB), keeping the Db-to-cache ratio; basement and fanout as advised; predictions are the advisor's (I/O only) and the corrected model's (derived reads per get, the engine's costs fitted on the other node sizes) on this scaled dataset";
/// Distinct keys read over and over for the cached-get CPU.
const HOT_KEYS: u64 = 64;

/// One measured node size.
#[derive(Debug, Clone, Serialize)]
pub struct NodeCheck {
    pub shape: BEpsilonShape,
    pub rows: u64,
    pub cache_bytes: u64,
    pub predicted: BEpsilonPrediction,
    pub insert_secs: f64,
    pub inserts_per_s: f64,
    pub point_qps: f64,
    /// Data-file reads per point get, and their KiB.
    pub reads_per_get: f64,
    pub kib_per_get: f64,
    /// Process CPU (user + system) per insert of the load and per timed get;
    /// wall time per get of a few hot keys (a cached path, so CPU).
    pub cpu_insert_s: f64,
    pub cpu_get_s: f64,
    pub cpu_cached_get_s: f64,
    /// Microseconds per range scan of the described range's records from a
    /// random key (`None` when the mix has no ranges).
    pub range_us: Option<f64>,
    pub height: u32,
    /// measured / predicted - 1.
    pub insert_error: f64,
    pub point_error: f64,
    /// The described mix per second: measured (point gets, ranges and
    /// inserts) and predicted (point gets and inserts: the advisor has no
    /// B-epsilon range model).
    pub mix_ops: f64,
    pub predicted_mix_ops: f64,
    /// The corrected prediction, with the CPU constants fitted on the other
    /// node sizes (out of sample; none with one size), and its errors.
    pub corrected: Option<BEpsilonEnginePrediction>,
    pub corrected_insert_error: f64,
    pub corrected_point_error: f64,
    pub corrected_mix_ops: f64,
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
    /// The node size with the highest measured insert rate.
    pub best_measured_node_bytes: u64,
    /// The CPU constants fitted on every measured size (in sample).
    pub costs: BEpsilonCosts,
    /// The node size the corrected model, with `costs`, ranks first for the
    /// mix among the measured ones.
    pub corrected_best_node_bytes: u64,
    pub verdict: String,
    pub sizes: Vec<NodeCheck>,
    pub rule: &'static str,
    pub elapsed_secs: f64,
}

/// The advised node size as the verification measured it (clamped to the
/// range it builds).
pub fn clamp_node(advised: u64) -> u64 {
    advised.clamp(MIN_NODE_BYTES, MAX_NODE_BYTES)
}

/// Node sizes to verify: N/2, N, 2N within the verified range.
pub fn node_sizes(advised: u64) -> Vec<u64> {
    let n = advised.clamp(MIN_NODE_BYTES, MAX_NODE_BYTES);
    let mut v: Vec<u64> = [n / 2, n, n.saturating_mul(2)]
        .into_iter()
        .map(|s| s.clamp(MIN_NODE_BYTES, MAX_NODE_BYTES))
        .collect();
    v.dedup();
    assert!(!v.is_empty() && v.windows(2).all(|w| w[0] < w[1]));
    v
}

/// Verifies `advice.bepsilon` in `dir` on `fs`; `None` without B-epsilon
/// advice. Every Db's files are removed when its check ends (also on error).
pub(super) fn run(
    budget: &Budget,
    dir: &Path,
    fs: Arc<dyn Fs>,
    dev: Device,
    advice: &Advice,
    step: super::Step,
) -> anyhow::Result<Option<BEpsilonVerification>> {
    let Some(b) = &advice.bepsilon else {
        return Ok(None);
    };
    let start = Instant::now();
    let d = &advice.dataset;
    let rows = d.rows.min((budget.rows / 8).max(1000));
    let cache = ((d.cache_bytes as f64 * rows as f64 / d.rows as f64) as u64).max(1 << 20);
    let mut sizes = Vec::new();
    for node in node_sizes(b.node_size) {
        let shape = BEpsilonShape {
            node_bytes: node,
            basement_bytes: b.basement_size.clamp(512, node / 2),
            fanout: b.fanout.clamp(3, 1024),
        };
        step(format!(
            "B-epsilon check: {} nodes, {rows} random inserts...",
            fmt_bytes(node as f64)
        ))?;
        sizes.push(check(
            budget,
            dir,
            fs.clone(),
            dev,
            advice,
            shape,
            rows,
            cache,
        )?);
    }
    let best = sizes
        .iter()
        .max_by(|a, b| a.mix_ops.total_cmp(&b.mix_ops))
        .map(|c| c.shape.node_bytes)
        .unwrap_or(b.node_size);
    let (costs, corrected_best) = correct(dev, advice, &mut sizes);
    let verdict = verdict(
        &sizes,
        b.node_size.clamp(MIN_NODE_BYTES, MAX_NODE_BYTES),
        corrected_best,
    );
    Ok(Some(BEpsilonVerification {
        recommended_node_bytes: b.node_size,
        best_measured_node_bytes: best,
        costs,
        corrected_best_node_bytes: corrected_best,
        verdict,
        sizes,
        rule: BEPSILON_RULE,
        elapsed_secs: start.elapsed().as_secs_f64(),
    }))
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
        c.corrected_mix_ops = mix_rate(m.point, m.insert, p.point_qps, p.inserts_per_s);
        c.corrected = Some(p);
        let q = predict_bepsilon_engine(dev, &d, c.shape, costs);
        let mix = mix_rate(m.point, m.insert, q.point_qps, q.inserts_per_s);
        if mix > best.1 {
            best = (c.shape.node_bytes, mix);
        }
    }
    assert!(best.0 > 0);
    (costs, best.0)
}

/// Builds, loads and reads one node size.
#[allow(clippy::too_many_arguments)]
fn check(
    budget: &Budget,
    dir: &Path,
    fs: Arc<dyn Fs>,
    dev: Device,
    advice: &Advice,
    shape: BEpsilonShape,
    rows: u64,
    cache: u64,
) -> anyhow::Result<NodeCheck> {
    let d = &advice.dataset;
    let files = DbFiles::new(dir, "bepsilon", shape.node_bytes, fs)?;
    let opts = BEpsilonOptions::default()
        .node_bytes(shape.node_bytes as u32)
        .basement_bytes(shape.basement_bytes as u32)
        .fanout(shape.fanout as u16);
    // 8 s of inserts per size in quick mode (48 s in full): the three sizes
    // fit tune's 5-minute budget even on an emulated hard disk.
    let limit = Duration::from_secs_f64(budget.load_secs * 0.4);
    let cpu0 = cpu_s();
    let (done, insert_secs) = insert(&files, opts, rows, cache, d.key_bytes, d.value_bytes, limit)?;
    let cpu_insert_s = (cpu_s() - cpu0) / done.max(1) as f64;
    let db = Db::open(
        &files.path,
        files.options().cache_bytes(cache as usize).direct_io(true),
    )
    .with_context(|| format!("cannot reopen {}", files.path.display()))?;
    let g = gets(&db, rows, done, d.key_bytes, budget)?;
    let range_us = (advice.mix.range > 0.0)
        .then(|| ranges(&db, done, d.key_bytes, d.range_records, budget))
        .transpose()?;
    db.close()
        .context("closing the B-epsilon verification Db failed")?;
    let scaled = pagewise_model::advise::Dataset {
        rows: done,
        cache_bytes: cache,
        ..d.clone()
    };
    let predicted = predict_bepsilon(dev, &scaled, shape);
    let inserts_per_s = done as f64 / insert_secs.max(1e-9);
    let m = advice.mix;
    let out = NodeCheck {
        shape,
        rows: done,
        cache_bytes: cache,
        insert_secs,
        inserts_per_s,
        point_qps: g.point_qps,
        reads_per_get: g.reads_per_get,
        kib_per_get: g.kib_per_get,
        cpu_insert_s,
        cpu_get_s: g.cpu_get_s,
        cpu_cached_get_s: g.cpu_cached_get_s,
        range_us,
        height: g.height,
        insert_error: inserts_per_s / predicted.inserts_per_s - 1.0,
        point_error: g.point_qps / predicted.point_qps - 1.0,
        mix_ops: measured_mix(m, g.point_qps, range_us, inserts_per_s),
        predicted_mix_ops: mix_rate(
            m.point,
            m.insert,
            predicted.point_qps,
            predicted.inserts_per_s,
        ),
        predicted,
        corrected: None,
        corrected_insert_error: 0.0,
        corrected_point_error: 0.0,
        corrected_mix_ops: 0.0,
    };
    assert!(out.rows >= 1 && out.inserts_per_s > 0.0);
    Ok(out)
}

/// The measured mix rate: ranges included when measured.
fn measured_mix(
    m: pagewise_model::advise::Mix,
    point_qps: f64,
    range_us: Option<f64>,
    inserts_per_s: f64,
) -> f64 {
    let t = pagewise_model::advise::choice::KindTimes {
        point_us: 1e6 / point_qps,
        range_us,
        insert_us: Some(1e6 / inserts_per_s),
    };
    match pagewise_model::advise::choice::mix_us(m, &t) {
        Some(us) => 1e6 / us,
        None => mix_rate(m.point, m.insert, point_qps, inserts_per_s),
    }
}

/// Times range scans of `len` records from random inserted keys for a
/// quarter of a phase: microseconds per scan.
fn ranges(db: &Db, done: u64, key_bytes: u64, len: u64, budget: &Budget) -> anyhow::Result<f64> {
    let t = db.tree(TREE).context("the B-epsilon tree is missing")?;
    // Inserted keys are 2n for n in 0..rows; any even key starts a scan.
    let mut r = Rng(0x5ca7);
    let (n, secs) = timed(budget.phase_secs / 4.0, || {
        let from = key(2 * r.below(done), key_bytes);
        for kv in t.range(from..).take(len.max(1) as usize) {
            kv.context("range scan failed")?;
        }
        Ok(())
    })?;
    Ok(secs * 1e6 / n.max(1) as f64)
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

/// The `i`-th record of the scattered order over 0..rows that `step` (from
/// [`coprime_step`]) gives.
fn nth(i: u64, step: u64, rows: u64) -> u64 {
    (i as u128 * step as u128 % rows as u128) as u64
}

/// A step coprime with `n`, so i -> i x step mod n visits 0..n once each in
/// a scattered order.
fn coprime_step(n: u64) -> u64 {
    assert!(n >= 1);
    let gcd = |mut a: u64, mut b: u64| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let mut s = (0x9e37_79b9_7f4a_7c15u64 % n).max(1);
    // Bounded: consecutive integers include one coprime with n within
    // fewer than 64 x ln(n) steps; give up at n (step 1 is coprime).
    for _ in 0..n.min(1 << 20) {
        if gcd(s, n) == 1 {
            return s;
        }
        s = s % n + 1;
    }
    1
}

/// Process CPU seconds (user + system, every thread) so far.
fn cpu_s() -> f64 {
    super::run::cpu_clock_s(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// What the gets of one node size measured.
struct Gets {
    point_qps: f64,
    reads_per_get: f64,
    kib_per_get: f64,
    cpu_get_s: f64,
    cpu_cached_get_s: f64,
    height: u32,
}

/// Warms with random gets, then times them (half the B+tree phases' time
/// each), then times gets of [`HOT_KEYS`] keys read over and over (a tenth
/// of a phase): a cached get's CPU. The records inserted are the first
/// `done` indices of `insert`'s permutation of `rows` (all of them unless
/// the insert phase hit its time limit); gets pick among those.
fn gets(db: &Db, rows: u64, done: u64, key_bytes: u64, budget: &Budget) -> anyhow::Result<Gets> {
    assert!(done >= 1 && done <= rows);
    let t = db.tree(TREE).context("the B-epsilon tree is missing")?;
    let step = coprime_step(rows);
    let mut r = Rng(0xbe75);
    let mut get = |i: u64| -> anyhow::Result<()> {
        let n = nth(i, step, rows);
        let v = t.get(key(2 * n, key_bytes)).context("get failed")?;
        anyhow::ensure!(v.is_some(), "inserted key {n} is missing: engine bug");
        Ok(())
    };
    timed(budget.warm_secs / 2.0, || get(r.below(done)))?;
    let (s0, cpu0) = (db.stats(), cpu_s());
    let (n, secs) = timed(budget.phase_secs / 2.0, || get(r.below(done)))?;
    let (s1, cpu1) = (db.stats(), cpu_s());
    let hot = HOT_KEYS.min(done);
    (0..hot).try_for_each(&mut get)?;
    let mut k = 0u64;
    let (n_hot, hot_secs) = timed(budget.phase_secs / 10.0, || {
        k += 1;
        get(k % hot)
    })?;
    let per = |x: f64| x / n.max(1) as f64;
    let out = Gets {
        point_qps: n as f64 / secs.max(1e-9),
        reads_per_get: per((s1.pages.read_ops - s0.pages.read_ops) as f64),
        kib_per_get: per((s1.pages.read_bytes - s0.pages.read_bytes) as f64 / 1024.0),
        cpu_get_s: per(cpu1 - cpu0),
        cpu_cached_get_s: hot_secs / n_hot.max(1) as f64,
        height: (s1.trees.iter().find(|s| s.name == TREE)).map_or(1, |s| s.height),
    };
    assert!(out.point_qps > 0.0 && out.cpu_cached_get_s >= 0.0);
    Ok(out)
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
        assert_eq!(node_sizes(64 << 10), vec![32 << 10, 64 << 10, 128 << 10]);
        assert_eq!(node_sizes(4096), vec![16 << 10, 32 << 10]);
        assert_eq!(node_sizes(1 << 30), vec![8 << 20, 16 << 20]);
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
