//! `pagewise tune` verification: the advice checked on the engine it advises.
//!
//! After the advice, for the recommended page size B and its neighbours B/2
//! and 2B (clamped to 512 B..64 KiB), build a pagewise Db in the tune DIR,
//! measure it under the described mix, and set the measurements against the
//! advisor's prediction *for the same scaled dataset* (like for like).
//!
//! **Scaling rule** ([`pagewise_model::advise::scale`]): load
//! `rows' = min(rows, budget)` records in key order (buffered commits, then
//! close; leaves split at the described fill, `Options::append_fill`, so the
//! tree is as large as the described one's), and reopen with direct I/O and a cache that leaves the scaled tree
//! as many uncached levels (device reads per get) as the described dataset
//! has at that page size, with the Db at least 10x the cache when the
//! described one is. The budget is the mode's row cap, a load-time cap and a
//! quarter of the free disk space; the limits of the rule (a shorter tree,
//! the engine's smallest cache) are reported as notes per size.
//!
//! Per size: warm the cache with random gets, time point gets, time the mix
//! (point gets, ranges of `--range` records, inserts of new keys, then a
//! checkpoint), and time gets over a hot set that stays cached (CPU per
//! level). The files are removed afterwards, on error and on Ctrl-C.
//! The filesystem is a parameter so emulated drives can reuse all of this.

pub mod bepsilon;
mod build;
pub mod costs;
pub mod extend;
mod keys;
mod node_rank;
mod pass;
mod run;
mod text;
mod verdict;

use crate::advise::advise_report;
use anyhow::Context;
use build::{load, reopen, DbFiles};
use costs::{EngineCosts, KeptNodes};
use pagewise_io::Fs;
use pagewise_model::advise::correct::{
    correct, engine_best, fit_correction, leave_one_out, Corrected, Correction, Sample,
};
use pagewise_model::advise::scale::{scale, Scaled};
use pagewise_model::advise::{Advice, Mix, Row};
use pagewise_model::fit::ModelReport;
use pagewise_model::units::{fmt_bytes, fmt_count};
use pass::{Built, What};
use run::{Session, Workload};
use serde::Serialize;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use run::Measured;
pub use text::render_text;
use verdict::verdict;
pub use verdict::{miss_reason, CONFIRM_FRACTION};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Level {
    /// No verification (the advice uses DIR/engine-costs.json if an earlier
    /// run left it).
    Off,
    /// ~3 minutes: two calibration Dbs, up to 2M records per verified
    /// page size (250k per node size), 3 s per measured phase.
    Quick,
    /// ~10 minutes: up to 10M records per size, 20 s per phase.
    Full,
}

/// How much verification a tune runs (the CLI's `--verify` and its testing
/// knobs `--verify-secs`, `--verify-rows`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VerifySpec {
    pub level: Level,
    /// Seconds per measured phase; `None`: the level's.
    pub phase_secs: Option<f64>,
    /// Most records loaded per verified size; `None`: the level's.
    pub max_rows: Option<u64>,
}

impl Default for VerifySpec {
    fn default() -> Self {
        VerifySpec {
            level: Level::Quick,
            phase_secs: None,
            max_rows: None,
        }
    }
}

/// Reports a verification step (a label for the progress line) and
/// returns an error when the tune was asked to stop.
pub type Step<'a> = &'a mut dyn FnMut(String) -> anyhow::Result<()>;

/// The mode's budget for one run of the phases.
#[derive(Clone, Copy)]
struct Budget {
    rows: u64,
    phase_secs: f64,
    load_secs: f64,
    warm_secs: f64,
    /// A range extension starts only before this many seconds of the
    /// verification have passed (the whole tune's time budget).
    extend_until_secs: f64,
}

impl Budget {
    fn new(a: &VerifySpec) -> Self {
        // Quick fits 5 minutes on an emulated hard disk (S = 8.3 ms) with
        // the probe (~70 s), seven or eight Dbs and one extension step.
        let (rows, secs, load, until) = match a.level {
            Level::Full => (10_000_000, 20.0, 120.0, 900.0),
            _ => (2_000_000, 3.0, 15.0, 170.0),
        };
        let phase_secs = a.phase_secs.unwrap_or(secs).max(0.01);
        Budget {
            rows: a.max_rows.unwrap_or(rows).max(100),
            phase_secs,
            load_secs: load,
            warm_secs: (phase_secs * 1.5).max(0.2),
            extend_until_secs: until,
        }
    }

    /// The calibration's: a quarter of the rows, half the time.
    fn calibration(&self) -> Self {
        Budget {
            rows: (self.rows / 4).max(100),
            phase_secs: self.phase_secs / 2.0,
            load_secs: self.load_secs,
            warm_secs: self.warm_secs / 2.0,
            extend_until_secs: self.extend_until_secs,
        }
    }
}

/// One measured page size (verified or calibration).
#[derive(Debug, Clone, Serialize)]
pub struct SizeCheck {
    pub page_size: u64,
    pub scaled: Scaled,
    pub load_secs: f64,
    /// The advisor's row for the scaled dataset (device only).
    pub predicted: Row,
    /// The same with the fitted drive curve's read IOPS ([`smooth`]): what
    /// the engine-aware predictions start from.
    pub engine_row: Row,
    /// With the calibration's engine costs (out of sample).
    pub calibrated: Corrected,
    /// With the costs fitted on the other verified sizes (out of sample).
    pub loo: Corrected,
    /// With the costs fitted on all verified sizes (in sample).
    pub corrected: Corrected,
    pub measured: Measured,
    /// measured / predicted - 1 for point gets, per prediction above.
    pub point_error: f64,
    pub point_error_calibrated: f64,
    pub point_error_loo: f64,
    pub point_error_corrected: f64,
}

/// The calibration run: separate Dbs, the constants fitted there.
/// `elapsed_secs` is the time until the interleaved rounds ended (the
/// calibration Dbs are measured together with the verified ones).
#[derive(Debug, Clone, Serialize)]
pub struct Calibration {
    pub sizes: Vec<SizeCheck>,
    pub correction: Correction,
    pub elapsed_secs: f64,
}

/// Largest |error| over the verified sizes, per prediction.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Errors {
    pub device_only: f64,
    pub calibrated: f64,
    pub leave_one_out: f64,
    pub in_sample: f64,
}

/// The verification's answer, for the report and `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct Verification {
    pub level: Level,
    /// The device-only advisor's size, and the recommendation after the
    /// calibrated engine costs (what was verified around).
    pub device_only_best: u64,
    pub recommended: u64,
    pub best_measured: u64,
    pub verdict: String,
    pub sizes: Vec<SizeCheck>,
    pub calibration: Calibration,
    /// Fitted on the verified sizes (in sample).
    pub correction: Correction,
    pub max_point_error: Errors,
    pub rule: String,
    pub notes: Vec<String>,
    /// The B-epsilon node size checked the same way (`None` without
    /// B-epsilon advice).
    pub bepsilon: Option<bepsilon::BEpsilonVerification>,
    /// Sizes measured past an edge of the verified range, in order; their
    /// checks are in `sizes` (pages) or `bepsilon.sizes` (nodes).
    pub extensions: Vec<extend::Extension>,
    pub elapsed_secs: f64,
}

pub const RULE: &str = "rows' = min(rows, budget); the cache leaves the scaled tree as many uncached levels (device reads per get) as the described dataset at that page size, and the Db at least 10x the cache when the described one is; same key/value sizes and mix; predictions are the advisor's on this scaled dataset (loaded in key order with leaves split at the described fill, the fill measured after the load); calibration: the same on separate Dbs of a quarter of the rows at the smallest and largest size";

/// The sizes to verify: B/2, B, 2B within 512 B..64 KiB (the engine's
/// page sizes), B itself clamped first so that a B beyond 64 KiB still gets
/// two sizes: 32 and 64 KiB.
pub fn sizes(best: u64) -> Vec<u64> {
    let best = best.clamp(512, 65536);
    let mut v: Vec<u64> = [best / 2, best, best.saturating_mul(2)]
        .into_iter()
        .map(|p| p.clamp(512, 65536))
        .collect();
    v.dedup();
    v
}

/// What every measured size needs besides its page size.
struct Ctx<'a> {
    dir: &'a Path,
    fs: Arc<dyn Fs>,
    model: &'a ModelReport,
    advice: &'a Advice,
}

/// "real drive" or the emulated profile's banner: whose costs these are.
pub fn drive_name(emulated: Option<&pagewise_io::DriveProfile>) -> String {
    emulated.map_or("real drive".into(), |p| p.banner())
}

/// Runs calibration and verification for `advice` in `dir` on `fs`
/// (`RealFs` normally), moving `advice.best` to the engine-aware best.
/// With `--verify off`, only applies costs an earlier run left in `dir`.
/// `None` when `--verify off` or the layout cannot be verified (a note says why).
#[allow(clippy::too_many_arguments)]
pub fn run(
    args: &VerifySpec,
    dir: &Path,
    fs: Arc<dyn Fs>,
    drive: &str,
    model: &ModelReport,
    advice: &mut Advice,
    step: Step,
    notes: &mut Vec<String>,
) -> anyhow::Result<Option<Verification>> {
    let dev = crate::advise::device(model, advice.mix, None, &mut Vec::new())?;
    if args.level == Level::Off {
        let calibrated =
            |c: &EngineCosts| Some((c.calibrated, "learned by an earlier verification"));
        apply_kept(dir, drive, model, dev, advice, notes, calibrated);
        return Ok(None);
    }
    if advice.dataset.key_bytes < 8 {
        notes.push("no verification: keys under 8 bytes cannot number the records".into());
        return Ok(None);
    }
    let start = Instant::now();
    let budget = Budget::new(args);
    let device_only_best = advice.best;
    // The costs an earlier verification fitted on its verified sizes move
    // the starting point now (the fresh calibration can still move it again).
    let verified = |c: &EngineCosts| {
        let whence = "fitted on the sizes an earlier run verified on this drive";
        c.verified.map(|v| (v, whence))
    };
    apply_kept(dir, drive, model, dev, advice, notes, verified);
    let mut vnotes = Vec::new();
    let verify_pages = sizes(advice.best);
    let cal_pages = [verify_pages[0], verify_pages[verify_pages.len() - 1]];
    let ctx = Ctx {
        dir,
        fs,
        model,
        advice,
    };
    let mut dbs = Vec::new();
    for &page in &cal_pages {
        let b = budget.calibration();
        dbs.push(build(page, "calibrate", &ctx, &b, &mut *step, &mut vnotes)?);
    }
    for &page in &verify_pages {
        dbs.push(build(
            page,
            "verify",
            &ctx,
            &budget,
            &mut *step,
            &mut vnotes,
        )?);
    }
    build_nodes(&ctx, &budget, &mut dbs, &mut *step)?;
    let ms = pass::measure(&mut dbs.iter_mut().collect::<Vec<_>>(), 1.0, &mut *step)?;
    for (b, m) in dbs.iter_mut().zip(ms) {
        b.measured = Some(m);
    }
    let extensions = extend::run(&mut dbs, &ctx, &budget, start, &mut *step, &mut vnotes)?;
    let measured_secs = start.elapsed().as_secs_f64();
    let (cal_checks, checks, nodes) = checks_of(dbs, &ctx, dev)?;
    let node_load_secs = nodes.iter().map(|c| c.insert_secs).sum();
    let calibration = calibrate(cal_checks, advice.mix, measured_secs);
    // The engine's costs move the advice only among the verified sizes:
    // beyond them the fitted terms would be extrapolated.
    let range = (cal_pages[0], cal_pages[1]);
    let c = &calibration.correction;
    rerank(
        advice,
        model,
        range,
        c,
        notes,
        "calibrated on this drive just now",
    );
    let mut out = finish(args.level, advice, calibration, checks, vnotes);
    out.device_only_best = device_only_best;
    out.bepsilon = bepsilon::finish(dev, advice, nodes, node_load_secs);
    out.extensions = extensions;
    out.elapsed_secs = start.elapsed().as_secs_f64();
    let mut kept = EngineCosts::new(
        drive.into(),
        out.calibration.correction,
        out.sizes.iter().map(|c| c.page_size).collect(),
    );
    kept.verified = Some(out.correction);
    kept.bepsilon = out.bepsilon.as_ref().map(kept_nodes);
    costs::save(dir, &kept)?;
    Ok(Some(out))
}

/// What a B-epsilon verification leaves for the next run: its in-sample
/// costs, the node sizes and the median of the records they loaded.
fn kept_nodes(b: &bepsilon::BEpsilonVerification) -> KeptNodes {
    let mut rows: Vec<u64> = b.sizes.iter().map(|c| c.rows).collect();
    rows.sort_unstable();
    KeptNodes {
        costs: b.costs,
        node_sizes: b.sizes.iter().map(|c| c.shape.node_bytes).collect(),
        rows: rows.get(rows.len() / 2).copied().unwrap_or(1),
    }
}

/// Loads the B-epsilon node sizes to verify (none without B-epsilon
/// advice) into `dbs`.
fn build_nodes(ctx: &Ctx, budget: &Budget, dbs: &mut Vec<Built>, step: Step) -> anyhow::Result<()> {
    let Some((shapes, rows, cache)) = bepsilon::plan(budget, ctx.advice) else {
        return Ok(());
    };
    for shape in shapes {
        step(format!(
            "B-epsilon check: {} nodes, {rows} random inserts...",
            fmt_bytes(shape.node_bytes as f64)
        ))?;
        let (load, session) =
            bepsilon::build(budget, ctx, shape, rows, cache).with_context(|| {
                format!(
                    "B-epsilon check at {} B nodes failed (skip it with --verify off)",
                    shape.node_bytes
                )
            })?;
        dbs.push(Built::new(What::Node(load), *budget, session));
    }
    Ok(())
}

/// The measured Dbs as checks: calibration and verified page sizes, node
/// sizes (each in measuring order); closes every Db.
fn checks_of(
    dbs: Vec<Built>,
    ctx: &Ctx,
    dev: pagewise_model::advise::Device,
) -> anyhow::Result<(Vec<SizeCheck>, Vec<SizeCheck>, Vec<bepsilon::NodeCheck>)> {
    let (mut cal, mut ver, mut nodes) = (Vec::new(), Vec::new(), Vec::new());
    for b in dbs {
        let m = (b.measured.clone()).context("a Db was not measured: internal error")?;
        match &b.what {
            What::Page {
                tag,
                page,
                scaled,
                load_secs,
            } => {
                let c = size_check(*page, scaled.clone(), *load_secs, m, ctx)?;
                if *tag == "calibrate" {
                    cal.push(c);
                } else {
                    ver.push(c);
                }
            }
            What::Node(l) => nodes.push(bepsilon::node_check(dev, ctx.advice, l, m)),
        }
        b.session.close()?;
    }
    Ok((cal, ver, nodes))
}

/// Applies what an earlier verification on this drive kept (`costs.rs`):
/// the kept B-epsilon costs move the node size, and the page-size costs
/// `pick` chooses (with where they come from) re-rank the page size within
/// the sizes that verification measured. Nothing when nothing was kept.
fn apply_kept(
    dir: &Path,
    drive: &str,
    model: &ModelReport,
    dev: pagewise_model::advise::Device,
    advice: &mut Advice,
    notes: &mut Vec<String>,
    pick: impl FnOnce(&EngineCosts) -> Option<(Correction, &'static str)>,
) {
    let Some(c) = costs::load(dir, drive, notes) else {
        return;
    };
    if let Some(k) = &c.bepsilon {
        node_rank::rerank_nodes(dev, advice, k, notes);
    }
    let Some((correction, whence)) = pick(&c) else {
        return;
    };
    let lo = c.page_sizes.iter().min().copied().unwrap_or(0);
    let hi = c.page_sizes.iter().max().copied().unwrap_or(u64::MAX);
    rerank(advice, model, (lo, hi), &correction, notes, whence);
}

/// The calibration: the engine costs fitted on the calibration Dbs.
fn calibrate(mut checks: Vec<SizeCheck>, mix: Mix, secs: f64) -> Calibration {
    let correction = fit_correction(&samples(&checks));
    for c in &mut checks {
        c.corrected = correct(&c.engine_row, &c.scaled.dataset, mix, &correction);
        c.point_error_corrected = c.measured.point_qps / c.corrected.point_qps - 1.0;
    }
    Calibration {
        sizes: checks,
        correction,
        elapsed_secs: secs,
    }
}

/// The engine-aware ranking replaces the device-only size only when it
/// predicts at least this much more of the mix.
const MOVE_GAIN: f64 = 1.03;

/// Re-ranks `advice` with the engine's costs `c` (only the engine terms:
/// the described dataset has its own caching and fill) and says so.
fn rerank(
    advice: &mut Advice,
    model: &ModelReport,
    range: (u64, u64),
    c: &Correction,
    notes: &mut Vec<String>,
    whence: &str,
) {
    let e = c.engine_only();
    let rows: Vec<Row> = (advice.rows.iter())
        .filter(|r| r.page_size >= range.0 && r.page_size <= range.1)
        .map(|r| smooth(r, model))
        .collect();
    let Some((best, ops)) = engine_best(&rows, &advice.dataset, advice.mix, &e) else {
        return;
    };
    let device = advice.best;
    // Move away from the device-only size only for a clear gain: the
    // calibrated terms carry the noise of a few seconds of measurement.
    let device_ops = (rows.iter().find(|r| r.page_size == device))
        .map(|r| correct(r, &advice.dataset, advice.mix, &e).mix_ops);
    let (best, ops) = match device_ops {
        Some(d) if ops < d * MOVE_GAIN => (device, d),
        _ => (best, ops),
    };
    let line = format!(
        "with the engine's costs {whence} (CPU {:.2} µs per cached level at 4 KiB, {:.1} µs per miss beyond the drive's read at 4 KiB), the model ranks {} first at {} mix ops/s",
        e.cpu_per_level_s(4096) * 1e6,
        e.miss_extra(4096) * 1e6,
        fmt_bytes(best as f64),
        fmt_count(ops)
    );
    if best != device {
        advice.reason = format!(
            "{line}, not the device-only {}. Device-only: {}",
            fmt_bytes(device as f64),
            advice.reason
        );
        advice.best = best;
    } else {
        notes.push(format!("{line}, as the device-only model does"));
    }
}

/// `row` with the read IOPS of the fitted drive curve (T(B) = S + B/W, or
/// its hinge) instead of the probe's point at that size: the engine-aware
/// prediction uses the smooth curve, so one noisy probe point does not
/// shift one size against its neighbours.
fn smooth(row: &Row, model: &ModelReport) -> Row {
    let fit = model.find(
        pagewise_model::OpKind::Read,
        pagewise_model::Pattern::Random,
        None,
    );
    let out = Row {
        read_iops: fit.map_or(row.read_iops, |f| f.predicted_iops(row.page_size)),
        ..row.clone()
    };
    assert!(out.read_iops > 0.0 && out.page_size == row.page_size);
    out
}

/// Free bytes on the filesystem of `dir`, if known.
fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: c is a valid C string; st is written by statvfs.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    (unsafe { libc::statvfs(c.as_ptr(), &mut st) } == 0)
        .then(|| st.f_bavail as u64 * st.f_frsize as u64)
}

/// The advisor's prediction for measured Db `m` of `page` B pages.
fn size_check(
    page: u64,
    scaled: Scaled,
    load_secs: f64,
    measured: Measured,
    ctx: &Ctx,
) -> anyhow::Result<SizeCheck> {
    let mut ignored = Vec::new();
    let a = advise_report(
        ctx.model,
        &scaled.dataset,
        ctx.advice.mix,
        None,
        &[page],
        &mut ignored,
    )?;
    let predicted = a
        .rows
        .into_iter()
        .next()
        .context("the advisor excluded this page size")?;
    let engine_row = smooth(&predicted, ctx.model);
    let none = correct(
        &engine_row,
        &scaled.dataset,
        ctx.advice.mix,
        &Correction::NONE,
    );
    Ok(SizeCheck {
        page_size: page,
        load_secs,
        calibrated: none,
        loo: none,
        corrected: none,
        point_error: measured.point_qps / predicted.point_qps - 1.0,
        point_error_calibrated: 0.0,
        point_error_loo: 0.0,
        point_error_corrected: 0.0,
        scaled,
        predicted,
        engine_row,
        measured,
    })
}

/// Loads the scaled Db (`tag` names its files) and reopens it with the
/// scaled cache, ready to measure.
fn build(
    page: u64,
    tag: &'static str,
    ctx: &Ctx,
    b: &Budget,
    step: Step,
    notes: &mut Vec<String>,
) -> anyhow::Result<Built> {
    step(format!("{tag}: loading {page} B pages..."))?;
    let failed = || format!("{tag} at {page} B pages failed (skip it with --verify off)");
    build_inner(page, tag, ctx, b, notes).with_context(failed)
}

fn build_inner(
    page: u64,
    tag: &'static str,
    ctx: &Ctx,
    b: &Budget,
    notes: &mut Vec<String>,
) -> anyhow::Result<Built> {
    let d = &ctx.advice.dataset;
    let row_bytes = (d.leaf_entry() as f64 / d.fill * 1.2) as u64 + 1;
    let disk_rows = free_bytes(ctx.dir)
        .map_or(u64::MAX, |f| f / 4 / row_bytes)
        .max(100);
    let files = DbFiles::new(ctx.dir, tag, page, ctx.fs.clone())?;
    let value_bytes = if d.value_bytes > 0 {
        d.value_bytes
    } else {
        d.pointer_bytes.max(1)
    };
    let rows = d.rows.min(b.rows).min(disk_rows);
    let limit = Duration::from_secs_f64(b.load_secs);
    // Leaves as full as the described dataset's (`Options::append_fill`):
    // a load in key order would pack them full, and the leaf fill moves
    // both the tree's size against the cache and a range scan's leaves.
    let loaded = load(&files, page, rows, d.key_bytes, value_bytes, limit, d.fill)?;
    if loaded.rows < rows {
        notes.push(format!(
            "{tag} {page} B: the load stopped at {} of {rows} records (time budget)",
            loaded.rows
        ));
    }
    let built_fill = (loaded.rows as f64 * d.leaf_entry() as f64
        / (loaded.leaf_pages * page) as f64)
        .clamp(0.05, 1.0);
    let scaled = scale(d, page, loaded.rows, built_fill).map_err(anyhow::Error::msg)?;
    for l in &scaled.limits {
        notes.push(format!("{tag} {page} B: {l}"));
    }
    if loaded.height != scaled.scaled_height {
        notes.push(format!(
            "{tag} {page} B: the engine's tree has {} levels, the model's {}",
            loaded.height, scaled.scaled_height
        ));
    }
    let db = reopen(&files, scaled.dataset.cache_bytes)?;
    let w = Workload {
        rows: loaded.rows,
        key_bytes: d.key_bytes,
        value_bytes,
        range_records: d.range_records,
        mix: ctx.advice.mix,
        seed: page ^ 0x7e57 ^ tag.len() as u64,
        order: None,
        hot_keys: 256,
        name: format!("{} pages", fmt_bytes(page as f64)),
    };
    let what = What::Page {
        tag,
        page,
        scaled,
        load_secs: loaded.secs,
    };
    Ok(Built::new(what, *b, Session::new(db, files, w)?))
}

/// The correction's inputs from measured sizes.
fn samples(checks: &[SizeCheck]) -> Vec<Sample> {
    checks
        .iter()
        .map(|c| Sample {
            page_size: c.page_size,
            cpu_per_level_s: c.measured.cpu_per_level_us * 1e-6,
            predicted_point_ios: (c.predicted.height as f64 - c.predicted.cached_levels).max(0.0),
            measured_point_ios: c.measured.point_reads_per_get,
            measured_get_s: 1.0 / c.measured.point_qps,
            height: c.measured.height,
            read_s: 1.0 / c.engine_row.read_iops,
            writes_per_insert: c.measured.page_writes_per_insert,
            write_cost_factor: write_cost_factor(c),
        })
        .collect()
}

/// `f`: what an insert costs beyond a get (its page writes, at
/// checkpoints inside the mix and the one ending it), per page written, in
/// QD1 random writes of the drive: `(t_insert - t_get) x Wr(B) / w`.
/// `None` without inserts or page writes.
fn write_cost_factor(c: &SizeCheck) -> Option<f64> {
    let m = &c.measured;
    let insert_us = m.mix_insert_us?;
    let w = m.page_writes_per_insert.filter(|w| *w > 0.0)?;
    let beyond_s = ((insert_us - 1e6 / m.point_qps) * 1e-6).max(0.0);
    Some(beyond_s * c.predicted.write_iops / w)
}

/// Applies the calibrated, leave-one-out and in-sample corrections to the
/// verified sizes, and words the verdict.
fn finish(
    level: Level,
    advice: &Advice,
    calibration: Calibration,
    mut checks: Vec<SizeCheck>,
    notes: Vec<String>,
) -> Verification {
    let s = samples(&checks);
    let correction = fit_correction(&s);
    let loo = leave_one_out(&s);
    let mix = advice.mix;
    for (c, l) in checks.iter_mut().zip(&loo) {
        let d = &c.scaled.dataset;
        c.calibrated = correct(&c.engine_row, d, mix, &calibration.correction);
        c.loo = correct(&c.engine_row, d, mix, l);
        c.corrected = correct(&c.engine_row, d, mix, &correction);
        let m = c.measured.point_qps;
        c.point_error_calibrated = m / c.calibrated.point_qps - 1.0;
        c.point_error_loo = m / c.loo.point_qps - 1.0;
        c.point_error_corrected = m / c.corrected.point_qps - 1.0;
    }
    let worst = |f: fn(&SizeCheck) -> f64| checks.iter().map(|c| f(c).abs()).fold(0.0, f64::max);
    let max_point_error = Errors {
        device_only: worst(|c| c.point_error),
        calibrated: worst(|c| c.point_error_calibrated),
        leave_one_out: worst(|c| c.point_error_loo),
        in_sample: worst(|c| c.point_error_corrected),
    };
    let best_measured = checks
        .iter()
        .max_by(|a, b| a.measured.mix_ops.total_cmp(&b.measured.mix_ops))
        .map_or(advice.best, |c| c.page_size);
    Verification {
        level,
        device_only_best: advice.best,
        recommended: advice.best,
        best_measured,
        verdict: verdict(advice.best, &checks, mix),
        sizes: checks,
        calibration,
        correction,
        max_point_error,
        rule: RULE.into(),
        notes,
        bepsilon: None,
        extensions: Vec::new(),
        elapsed_secs: 0.0,
    }
}
