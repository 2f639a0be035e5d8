//! The measured phases on one open verification Db: warm the cache, point
//! gets, the described mix, and fully cached gets (CPU per level).
//!
//! A [`Session`] runs each phase in slices, so the caller interleaves
//! several Dbs round by round: on a shared machine whose speed drifts from
//! one minute to the next, every Db then sees the same drift, and the
//! calibration Dbs measure the machine as it is while the verified ones run.

use super::build::DbFiles;
use super::build::TREE;
use super::keys::{key, nth, value, Rng};
use anyhow::Context;
use pagewise::{Db, Stats, Tree};
use pagewise_model::advise::choice::Spread;
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
    /// KiB read from the data file per point get.
    pub point_kib_per_get: f64,
    pub point_hit_rate: f64,
    /// This thread's CPU time per point get, microseconds (user + system:
    /// the engine's work and the read syscalls; the rest is waiting).
    pub point_cpu_us: f64,
    /// Hit rate of the leaf level, assuming the levels above always hit
    /// (every get visits `height` pages; the misses are leaves).
    pub leaf_hit_rate: f64,
    /// The mix: operations per second, the median of the rounds' rates.
    pub mix_ops: f64,
    /// Each round's mix rate (the checkpoint that ends the mix charged to
    /// the rounds by their share of the inserts), and their spread.
    pub mix_rounds: Vec<f64>,
    pub mix_spread: Spread,
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
    /// CPU microseconds per get when every page is cached, and per level.
    pub cached_get_us: f64,
    pub cpu_per_level_us: f64,
}

impl Measured {
    /// The same with the mix put on another pass's scale: its rates times
    /// `k`, its times per operation divided by `k`. The point phase and the
    /// cached gets stay as measured (the fits use them as they are).
    pub fn rescaled(mut self, k: f64) -> Measured {
        assert!(k > 0.0 && k.is_finite());
        self.mix_ops *= k;
        self.mix_rounds.iter_mut().for_each(|r| *r *= k);
        self.mix_spread = self.mix_spread.scaled(k);
        for us in [
            &mut self.mix_point_us,
            &mut self.mix_range_us,
            &mut self.mix_insert_us,
        ] {
            *us = us.map(|t| t / k);
        }
        self
    }
}

/// The workload's shape: how many records are loaded, the record layout.
pub struct Workload {
    pub rows: u64,
    /// Which records are loaded: `None`, records 0..rows; `Some((step,
    /// of))`, the first `rows` of the scattered order over 0..of that
    /// `step` gives ([`nth`], a random-order load stopped early).
    pub order: Option<(u64, u64)>,
    pub key_bytes: u64,
    pub value_bytes: u64,
    pub range_records: u64,
    pub mix: Mix,
    pub seed: u64,
    /// Most distinct keys the cached-get phase reads over and over.
    pub hot_keys: u64,
    /// What the Db is, for notes: "32 KiB pages", "256 KiB nodes".
    pub name: String,
}

impl Workload {
    /// A random loaded record's number (its key is twice the number).
    fn pick(&self, r: &mut Rng) -> u64 {
        let i = r.below(self.rows);
        match self.order {
            None => i,
            Some((step, of)) => nth(i, step, of),
        }
    }
}

fn get(t: &Tree, r: &mut Rng, w: &Workload) -> anyhow::Result<()> {
    let n = 2 * w.pick(r);
    let v = t.get(key(n, w.key_bytes)).context("get failed")?;
    anyhow::ensure!(v.is_some(), "loaded key {n} is missing: engine bug");
    Ok(())
}

/// Runs `op` until `secs` pass (checked every few operations) or Ctrl-C.
/// Returns the operations done and the seconds taken.
pub fn timed(secs: f64, mut op: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<(u64, f64)> {
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

/// Sums of the point-get slices.
#[derive(Default)]
struct Points {
    gets: u64,
    secs: f64,
    cpu_s: f64,
    reads: u64,
    read_bytes: u64,
    hits: u64,
    misses: u64,
}

/// One open Db being measured, slice by slice. Closes its Db, then
/// removes its files (fields drop in declaration order).
pub struct Session {
    db: Db,
    tree: Tree,
    rng: Rng,
    w: Workload,
    height: u32,
    warm_secs: f64,
    points: Points,
    mix: PerOp,
    mix_secs: f64,
    /// Per mix slice: operations, seconds and inserts.
    rounds: Vec<(u64, f64, u64)>,
    mix_start: Option<Stats>,
    ckpt_page_us: Option<f64>,
    mix_end: Option<Stats>,
    _files: DbFiles,
}

impl Session {
    /// Requires: `db` holds `w.rows` records 0, 2, ... in tree [`TREE`].
    pub fn new(db: Db, files: DbFiles, w: Workload) -> anyhow::Result<Self> {
        assert!(w.rows >= 1);
        let tree = db.tree(TREE)?;
        Ok(Session {
            tree,
            rng: Rng(w.seed),
            w,
            height: 1,
            warm_secs: 0.0,
            points: Points::default(),
            mix: PerOp::default(),
            mix_secs: 0.0,
            rounds: Vec::new(),
            mix_start: None,
            ckpt_page_us: None,
            mix_end: None,
            db,
            _files: files,
        })
    }

    /// Random gets until the cache is full, a round of 512 gets misses
    /// under 1%, or `secs` pass.
    pub fn warm(&mut self, secs: f64) -> anyhow::Result<()> {
        let start = Instant::now();
        // Bounded by the clock: each round takes at least 512 gets.
        while start.elapsed().as_secs_f64() < secs {
            let before = self.db.stats();
            for _ in 0..512 {
                get(&self.tree, &mut self.rng, &self.w)?;
            }
            let after = self.db.stats();
            let misses = after.cache_misses - before.cache_misses;
            if after.cache_bytes as f64 >= 0.97 * after.cache_capacity as f64 || misses < 5 {
                break;
            }
            if pagewise_probe::interrupted() {
                anyhow::bail!("interrupted: verification stopped, its files are removed");
            }
        }
        self.warm_secs += start.elapsed().as_secs_f64();
        self.height = self.db.stats().trees.first().map_or(1, |s| s.height).max(1);
        Ok(())
    }

    /// Point gets for `secs`, added to the earlier slices.
    pub fn point_slice(&mut self, secs: f64) -> anyhow::Result<()> {
        let s0 = self.db.stats();
        let cpu0 = thread_cpu_s();
        let (t, r, w) = (&self.tree, &mut self.rng, &self.w);
        let (gets, took) = timed(secs, || get(t, r, w))?;
        let s1 = self.db.stats();
        let p = &mut self.points;
        p.cpu_s += thread_cpu_s() - cpu0;
        p.gets += gets;
        p.secs += took;
        p.reads += s1.pages.read_ops - s0.pages.read_ops;
        p.read_bytes += s1.pages.read_bytes - s0.pages.read_bytes;
        p.hits += s1.cache_hits - s0.cache_hits;
        p.misses += s1.cache_misses - s0.cache_misses;
        Ok(())
    }

    /// The described mix for `secs`, added to the earlier slices.
    pub fn mix_slice(&mut self, secs: f64) -> anyhow::Result<()> {
        if self.mix_start.is_none() {
            self.mix_start = Some(self.db.stats());
        }
        let inserts0 = self.mix.ops[2];
        let (t, r, w, per) = (&self.tree, &mut self.rng, &self.w, &mut self.mix);
        let (ops, took) = timed(secs, || mix_op(t, r, w, per))?;
        self.mix_secs += took;
        let inserts = self.mix.ops[2] - inserts0;
        self.rounds.push((ops, took, inserts));
        Ok(())
    }

    /// The checkpoint that ends the mix (timed, and charged to the inserts:
    /// their page writes are part of their cost).
    pub fn end_mix(&mut self) -> anyhow::Result<()> {
        assert!(self.mix_start.is_some() && self.mix_end.is_none());
        let pre = self.db.stats().pages.write_bytes;
        let ckpt = Instant::now();
        self.db
            .checkpoint()
            .context("checkpoint after the mix failed")?;
        let secs = ckpt.elapsed().as_secs_f64();
        self.mix.secs[2] += secs;
        self.mix_secs += secs;
        charge_checkpoint(&mut self.rounds, secs);
        let after = self.db.stats();
        let pages = (after.pages.write_bytes - pre) / self.db.page_size() as u64;
        self.ckpt_page_us = (pages > 0).then(|| secs / pages as f64 * 1e6);
        self.mix_end = Some(after);
        Ok(())
    }

    /// Forgets the measured phases (not the warm cache): the next point
    /// and mix slices start a new pass on the same Db.
    pub fn reset(&mut self) {
        self.points = Points::default();
        self.mix = PerOp::default();
        self.mix_secs = 0.0;
        self.rounds.clear();
        self.mix_start = None;
        self.ckpt_page_us = None;
        self.mix_end = None;
    }

    /// Closes the Db (its files go when the session drops).
    pub fn close(self) -> anyhow::Result<()> {
        self.db
            .close()
            .context("closing the verification Db failed")
    }

    /// Fully cached gets, then what this pass measured (the Db stays open
    /// for another pass after [`Session::reset`]).
    pub fn finish(&mut self, cached_secs: f64) -> anyhow::Result<Measured> {
        let (Some(s2), Some(s3)) = (&self.mix_start, &self.mix_end) else {
            anyhow::bail!("the mix was not run: internal error");
        };
        let page = self.db.page_size() as f64;
        let written = (s3.pages.write_bytes - s2.pages.write_bytes) as f64 / page;
        let mut r = Rng(self.w.seed ^ 0xca7e);
        let (cached_get_us, misses_hot) =
            cached(&self.db, &self.tree, &mut r, &self.w, cached_secs)?;
        if misses_hot > 0 {
            eprintln!(
                "note: {misses_hot} cache misses during the cached gets at {}",
                self.w.name
            );
        }
        let p = &self.points;
        let gets = p.gets.max(1) as f64;
        let inserts = self.mix.ops[2];
        let rates: Vec<f64> = (self.rounds.iter())
            .map(|&(ops, secs, _)| ops as f64 / secs.max(1e-9))
            .collect();
        let spread = Spread::of(&rates).context("the mix ran no round: internal error")?;
        let out = Measured {
            height: self.height,
            warm_secs: self.warm_secs,
            point_qps: gets / p.secs.max(1e-9),
            point_reads_per_get: p.reads as f64 / gets,
            point_kib_per_get: p.read_bytes as f64 / 1024.0 / gets,
            point_hit_rate: p.hits as f64 / ((p.hits + p.misses) as f64).max(1.0),
            point_cpu_us: p.cpu_s / gets * 1e6,
            leaf_hit_rate: (1.0 - p.misses as f64 / gets).clamp(0.0, 1.0),
            mix_ops: spread.median,
            mix_rounds: rates,
            mix_spread: spread,
            mix_inserts: inserts,
            mix_point_us: self.mix.us(0),
            mix_range_us: self.mix.us(1),
            mix_insert_us: self.mix.us(2),
            page_writes_per_insert: (inserts > 0).then(|| written / inserts as f64),
            checkpoints: s3.checkpoints - s2.checkpoints,
            checkpoint_page_us: self.ckpt_page_us,
            cached_get_us,
            cpu_per_level_us: cached_get_us / self.height as f64,
        };
        assert!(out.point_qps > 0.0 && out.mix_ops > 0.0);
        Ok(out)
    }
}

/// Charges the checkpoint that ends the mix (`secs`) to the mix's
/// `rounds` (operations, seconds, inserts) by their share of the inserts
/// (evenly without inserts), so each round's rate carries its writes.
fn charge_checkpoint(rounds: &mut [(u64, f64, u64)], secs: f64) {
    assert!(secs >= 0.0);
    let inserts: u64 = rounds.iter().map(|r| r.2).sum();
    let n = rounds.len().max(1) as f64;
    for r in rounds.iter_mut() {
        r.1 += if inserts > 0 {
            secs * r.2 as f64 / inserts as f64
        } else {
            secs / n
        };
    }
}

/// This thread's CPU seconds so far (0 if the clock is unavailable).
fn thread_cpu_s() -> f64 {
    cpu_clock_s(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU seconds on `clock` (a thread's or the process's; 0 if unavailable).
pub(super) fn cpu_clock_s(clock: libc::clockid_t) -> f64 {
    // SAFETY: ts is written by clock_gettime.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::clock_gettime(clock, &mut ts) } == 0;
    if ok {
        ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
    } else {
        0.0
    }
}

/// One operation of the mix, timed into `per` by kind.
fn mix_op(t: &Tree, r: &mut Rng, w: &Workload, per: &mut PerOp) -> anyhow::Result<()> {
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
            let from = key(2 * w.pick(r), w.key_bytes);
            for kv in t.range(from..).take(w.range_records as usize) {
                kv.context("range scan failed")?;
            }
        }
        _ => {
            let n = 2 * w.pick(r) + 1;
            t.insert(key(n, w.key_bytes), value(n, w.value_bytes))
                .context("insert failed")?;
        }
    }
    per.secs[k] += op.elapsed().as_secs_f64();
    per.ops[k] += 1;
    Ok(())
}

/// Gets over a hot set small enough to stay cached for `secs`: CPU
/// microseconds per get, and the misses seen (0 when the set stayed cached).
fn cached(db: &Db, t: &Tree, r: &mut Rng, w: &Workload, secs: f64) -> anyhow::Result<(f64, u64)> {
    let s = db.stats();
    let height = s.trees.first().map_or(1, |t| t.height).max(1) as usize;
    let n_hot =
        (s.cache_capacity / db.page_size() / (2 * height)).clamp(1, w.hot_keys.max(1) as usize);
    let hot: Vec<Vec<u8>> = (0..n_hot)
        .map(|_| key(2 * w.pick(r), w.key_bytes))
        .collect();
    for k in &hot {
        t.get(k)?;
    }
    let before = db.stats().cache_misses;
    let mut i = 0usize;
    // Thread CPU time, not wall time: c(B) is CPU per level, and on a
    // shared machine the wall clock also counts the time spent descheduled.
    let cpu0 = thread_cpu_s();
    let (gets, _) = timed(secs.max(0.05), || {
        i = (i + 1) % hot.len();
        t.get(&hot[i]).map(|_| ()).context("get failed")
    })?;
    let cpu_s = thread_cpu_s() - cpu0;
    let misses = db.stats().cache_misses - before;
    Ok((cpu_s / gets as f64 * 1e6, misses))
}

#[cfg(test)]
mod tests {
    use super::charge_checkpoint;

    #[test]
    fn the_checkpoint_is_charged_by_inserts() {
        // 4 s of checkpoint, inserts 10 and 30: 1 s and 3 s more.
        let mut r = [(100, 1.0, 10), (100, 1.0, 30)];
        charge_checkpoint(&mut r, 4.0);
        assert_eq!((r[0].1, r[1].1), (2.0, 4.0));
        // No inserts: evenly.
        let mut r = [(100, 1.0, 0), (100, 1.0, 0)];
        charge_checkpoint(&mut r, 1.0);
        assert_eq!((r[0].1, r[1].1), (1.5, 1.5));
    }
}
