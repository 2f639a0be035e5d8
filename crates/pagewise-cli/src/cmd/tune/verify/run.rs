//! The measured phases on one open verification Db: warm the cache, point
//! gets, the described mix, and fully cached gets (CPU per level).

use super::build::TREE;
use super::keys::{key, value, Rng};
use anyhow::Context;
use pagewise::{Db, Stats, Tree};
use pagewise_model::advise::Mix;
use serde::Serialize;
use std::time::{Duration, Instant};

/// Operations between checks of the clock and of Ctrl-C.
const CHECK_EVERY: u64 = 64;
/// Upper bound on operations in one phase (the clock ends it long before).
const MAX_OPS: u64 = 1 << 32;

/// What the engine did at one page size.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    pub height: u32,
    pub warm_secs: f64,
    pub point_qps: f64,
    /// Data-file reads per point get, and the cache hit rate of the gets.
    pub point_reads_per_get: f64,
    pub point_hit_rate: f64,
    /// This thread's CPU time per point get, microseconds (user + system:
    /// the engine's work and the read syscalls; the rest is waiting).
    pub point_cpu_us: f64,
    /// Hit rate of the leaf level, assuming the levels above always hit
    /// (every get visits `height` pages; the misses are leaves).
    pub leaf_hit_rate: f64,
    pub mix_ops: f64,
    pub mix_inserts: u64,
    /// Mean microseconds per operation of each kind inside the mix; the
    /// inserts carry the checkpoints they trigger and the one that ends the
    /// mix. `None` for a kind the mix did not run.
    pub mix_point_us: Option<f64>,
    pub mix_range_us: Option<f64>,
    pub mix_insert_us: Option<f64>,
    /// Page writes (bytes / page size) per insert, the final checkpoint
    /// included; `None` without inserts.
    pub page_writes_per_insert: Option<f64>,
    pub checkpoints: u64,
    /// Microseconds per page written by the checkpoint that ends the mix
    /// (`None` when it wrote none).
    pub checkpoint_page_us: Option<f64>,
    /// Microseconds per get when every page is cached, and per level.
    pub cached_get_us: f64,
    pub cpu_per_level_us: f64,
}

/// The workload's shape: how many records are loaded, the record layout.
pub struct Workload {
    pub rows: u64,
    pub key_bytes: u64,
    pub value_bytes: u64,
    pub range_records: u64,
    pub mix: Mix,
    pub secs: f64,
    pub seed: u64,
}

fn get(t: &Tree, r: &mut Rng, w: &Workload) -> anyhow::Result<()> {
    let n = 2 * r.below(w.rows);
    let v = t.get(key(n, w.key_bytes)).context("get failed")?;
    anyhow::ensure!(v.is_some(), "loaded key {n} is missing: engine bug");
    Ok(())
}

/// Runs `op` until `secs` pass (checked every few operations) or Ctrl-C.
/// Returns the operations done and the seconds taken.
fn timed(secs: f64, mut op: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<(u64, f64)> {
    let start = Instant::now();
    let limit = Duration::from_secs_f64(secs.max(0.0));
    let mut n = 0u64;
    while n < MAX_OPS {
        if n.is_multiple_of(CHECK_EVERY) {
            if pagewise_probe::interrupted() {
                anyhow::bail!("interrupted: verification stopped, its files are removed");
            }
            if n > 0 && start.elapsed() >= limit {
                break;
            }
        }
        op()?;
        n += 1;
    }
    Ok((n, start.elapsed().as_secs_f64()))
}

/// Random gets until the cache is full, a round of 512 gets misses under
/// 1%, or `secs` pass.
fn warm(db: &Db, t: &Tree, r: &mut Rng, w: &Workload, secs: f64) -> anyhow::Result<f64> {
    let start = Instant::now();
    // Bounded by the clock: each round takes at least 512 gets.
    while start.elapsed().as_secs_f64() < secs {
        let before = db.stats();
        for _ in 0..512 {
            get(t, r, w)?;
        }
        let after = db.stats();
        let misses = after.cache_misses - before.cache_misses;
        if after.cache_bytes as f64 >= 0.97 * after.cache_capacity as f64 || misses < 5 {
            break;
        }
        if pagewise_probe::interrupted() {
            anyhow::bail!("interrupted: verification stopped, its files are removed");
        }
    }
    Ok(start.elapsed().as_secs_f64())
}

/// This thread's CPU seconds so far (0 if the clock is unavailable).
fn thread_cpu_s() -> f64 {
    // SAFETY: ts is written by clock_gettime.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0;
    if ok {
        ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
    } else {
        0.0
    }
}

/// Seconds and operations per kind in the mix: point, range, insert.
#[derive(Default)]
struct PerOp {
    secs: [f64; 3],
    ops: [u64; 3],
}

impl PerOp {
    fn us(&self, k: usize) -> Option<f64> {
        (self.ops[k] > 0).then(|| self.secs[k] / self.ops[k] as f64 * 1e6)
    }
}

type MixOut = (f64, u64, Option<f64>, Stats, Stats, PerOp);

/// Requires: `db` holds `w.rows` records 0, 2, ... in tree [`TREE`].
pub fn measure(db: &Db, w: &Workload, warm_secs: f64) -> anyhow::Result<Measured> {
    assert!(w.rows >= 1 && w.secs > 0.0);
    let t = db.tree(TREE)?;
    let page = db.page_size() as f64;
    let mut r = Rng(w.seed);
    let warmed = warm(db, &t, &mut r, w, warm_secs)?;
    let height = db.stats().trees.first().map_or(1, |s| s.height).max(1);

    let s0 = db.stats();
    let cpu0 = thread_cpu_s();
    let (gets, secs) = timed(w.secs, || get(&t, &mut r, w))?;
    let point_cpu_us = (thread_cpu_s() - cpu0) / gets as f64 * 1e6;
    let s1 = db.stats();
    let reads = (s1.pages.read_ops - s0.pages.read_ops) as f64 / gets as f64;
    let (hits, misses) = (
        (s1.cache_hits - s0.cache_hits) as f64,
        (s1.cache_misses - s0.cache_misses) as f64,
    );

    let (mix_ops, inserts, ckpt_page_us, s2, s3, per_op) = mix(db, &t, &mut r, w)?;
    let written = (s3.pages.write_bytes - s2.pages.write_bytes) as f64 / page;
    let (cached_get_us, misses_hot) = cached(db, &t, &mut r, w)?;
    let out = Measured {
        height,
        warm_secs: warmed,
        point_qps: gets as f64 / secs,
        point_reads_per_get: reads,
        point_hit_rate: hits / (hits + misses).max(1.0),
        point_cpu_us,
        leaf_hit_rate: (1.0 - misses / gets as f64).clamp(0.0, 1.0),
        mix_ops,
        mix_inserts: inserts,
        mix_point_us: per_op.us(0),
        mix_range_us: per_op.us(1),
        mix_insert_us: per_op.us(2),
        page_writes_per_insert: (inserts > 0).then(|| written / inserts as f64),
        checkpoints: s3.checkpoints - s2.checkpoints,
        checkpoint_page_us: ckpt_page_us,
        cached_get_us,
        cpu_per_level_us: cached_get_us / height as f64,
    };
    if misses_hot > 0 {
        eprintln!("note: {misses_hot} cache misses during the cached run at {page} B pages");
    }
    assert!(out.point_qps > 0.0 && out.mix_ops > 0.0);
    Ok(out)
}

/// The described mix for `w.secs`, then a checkpoint (timed: inserts' page
/// writes are part of their cost). Returns ops/s, inserts, microseconds per
/// page of that checkpoint, and the stats around the phase.
fn mix(db: &Db, t: &Tree, r: &mut Rng, w: &Workload) -> anyhow::Result<MixOut> {
    let before = db.stats();
    let mut per = PerOp::default();
    let start = Instant::now();
    let (ops, _) = timed(w.secs, || {
        let u = r.unit();
        let k = if u < w.mix.point {
            0
        } else if u < w.mix.point + w.mix.range {
            1
        } else {
            2
        };
        let op = Instant::now();
        match k {
            0 => get(t, r, w)?,
            1 => {
                let from = key(2 * r.below(w.rows), w.key_bytes);
                for kv in t.range(from..).take(w.range_records as usize) {
                    kv.context("range scan failed")?;
                }
            }
            _ => {
                let n = 2 * r.below(w.rows) + 1;
                t.insert(key(n, w.key_bytes), value(n, w.value_bytes))
                    .context("insert failed")?;
            }
        }
        per.secs[k] += op.elapsed().as_secs_f64();
        per.ops[k] += 1;
        Ok(())
    })?;
    let pre = db.stats().pages.write_bytes;
    let ckpt = Instant::now();
    db.checkpoint().context("checkpoint after the mix failed")?;
    let ckpt_secs = ckpt.elapsed().as_secs_f64();
    per.secs[2] += ckpt_secs;
    let secs = start.elapsed().as_secs_f64();
    let after = db.stats();
    let pages = (after.pages.write_bytes - pre) / db.page_size() as u64;
    let per_page_us = (pages > 0).then(|| ckpt_secs / pages as f64 * 1e6);
    let inserts = per.ops[2];
    assert!(per.ops.iter().sum::<u64>() == ops);
    Ok((ops as f64 / secs, inserts, per_page_us, before, after, per))
}

/// Gets over a hot set small enough to stay cached: microseconds per get,
/// and the misses seen (0 when the set stayed cached).
fn cached(db: &Db, t: &Tree, r: &mut Rng, w: &Workload) -> anyhow::Result<(f64, u64)> {
    let s = db.stats();
    let height = s.trees.first().map_or(1, |t| t.height).max(1) as usize;
    let n_hot = (s.cache_capacity / db.page_size() / (2 * height)).clamp(1, 256);
    let hot: Vec<Vec<u8>> = (0..n_hot)
        .map(|_| key(2 * r.below(w.rows), w.key_bytes))
        .collect();
    for k in &hot {
        t.get(k)?;
    }
    let before = db.stats().cache_misses;
    let mut i = 0usize;
    let (gets, secs) = timed((w.secs / 3.0).max(0.05), || {
        i = (i + 1) % hot.len();
        t.get(&hot[i]).map(|_| ()).context("get failed")
    })?;
    let misses = db.stats().cache_misses - before;
    Ok((secs / gets as f64 * 1e6, misses))
}
