//! `pagewise tune` verification: the advice checked on the engine it advises.
//!
//! After the advice, for the recommended page size B and its neighbours B/2
//! and 2B (clamped to 512 B..64 KiB), build a pagewise Db in the tune DIR,
//! measure it under the described mix, and set the measurements against the
//! advisor's prediction *for the same scaled dataset* (like for like).
//!
//! **Scaling rule** ([`pagewise_model::advise::scale`]): load
//! `rows' = min(rows, budget)` records in key order (buffered commits, then
//! close), and reopen with direct I/O and a cache that leaves the scaled tree
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

mod build;
mod keys;
mod run;
mod text;
mod verdict;

use crate::cmd::advise::advise_report;
use anyhow::Context;
use build::{load, reopen, DbFiles};
use pagewise_io::Fs;
use pagewise_model::advise::correct::{correct, fit_correction, Corrected, Correction, Sample};
use pagewise_model::advise::scale::{scale, Scaled};
use pagewise_model::advise::{Advice, Row};
use pagewise_model::fit::ModelReport;
use run::{measure, Measured, Workload};
use serde::Serialize;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use text::render_text;
use verdict::verdict;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
pub enum Level {
    /// No verification.
    Off,
    /// ~2.5 minutes: up to 2M records per size, 5 s per measured phase.
    Quick,
    /// ~10 minutes: up to 10M records per size, 20 s per phase.
    Full,
}

#[derive(clap::Args, Debug, Clone)]
pub struct VerifyArgs {
    /// Check the advice on the engine: build Dbs at the recommended page size
    /// and its neighbours (half, double) and measure the mix on each.
    #[arg(long, value_enum, default_value_t = Level::Quick)]
    pub verify: Level,
    /// Seconds per measured verification phase (testing knob).
    #[arg(long, hide = true)]
    pub verify_secs: Option<f64>,
    /// Most records loaded per verified size (testing knob).
    #[arg(long, hide = true)]
    pub verify_rows: Option<u64>,
}

/// The mode's budget.
struct Budget {
    rows: u64,
    phase_secs: f64,
    load_secs: f64,
    warm_secs: f64,
}

impl Budget {
    fn new(a: &VerifyArgs) -> Self {
        let (rows, secs, load) = match a.verify {
            Level::Full => (10_000_000, 20.0, 120.0),
            _ => (2_000_000, 5.0, 20.0),
        };
        let phase_secs = a.verify_secs.unwrap_or(secs).max(0.01);
        Budget {
            rows: a.verify_rows.unwrap_or(rows).max(100),
            phase_secs,
            load_secs: load,
            warm_secs: (phase_secs * 1.5).max(0.2),
        }
    }
}

/// One verified page size.
#[derive(Debug, Clone, Serialize)]
pub struct SizeCheck {
    pub page_size: u64,
    pub scaled: Scaled,
    pub load_secs: f64,
    /// The advisor's row for the scaled dataset (before correction).
    pub predicted: Row,
    pub corrected: Corrected,
    pub measured: Measured,
    /// measured / predicted - 1 for point gets, before and after correction.
    pub point_error: f64,
    pub point_error_corrected: f64,
}

/// The verification's answer, for the report and `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct Verification {
    pub level: Level,
    pub recommended: u64,
    pub best_measured: u64,
    pub verdict: String,
    pub sizes: Vec<SizeCheck>,
    pub correction: Correction,
    pub rule: String,
    pub notes: Vec<String>,
    pub elapsed_secs: f64,
}

pub const RULE: &str = "rows' = min(rows, budget); the cache leaves the scaled tree as many uncached levels (device reads per get) as the described dataset at that page size, and the Db at least 10x the cache when the described one is; same key/value sizes and mix; predictions are the advisor's on this scaled dataset (fill measured after a sorted load)";

/// The sizes to verify: B/2, B, 2B within 512 B..64 KiB.
pub fn sizes(best: u64) -> Vec<u64> {
    let mut v: Vec<u64> = [best / 2, best, best.saturating_mul(2)]
        .into_iter()
        .map(|p| p.clamp(512, 65536))
        .collect();
    v.dedup();
    v
}

/// Runs the verification for `advice` in `dir` on `fs` (`RealFs` normally).
/// `None` when `--verify off` or the layout cannot be verified (a note says why).
pub fn run(
    args: &VerifyArgs,
    dir: &Path,
    fs: Arc<dyn Fs>,
    model: &ModelReport,
    advice: &Advice,
    quiet: bool,
    notes: &mut Vec<String>,
) -> anyhow::Result<Option<Verification>> {
    if args.verify == Level::Off {
        return Ok(None);
    }
    let d = &advice.dataset;
    if d.key_bytes < 8 {
        notes.push("no verification: keys under 8 bytes cannot number the records".into());
        return Ok(None);
    }
    let start = Instant::now();
    let budget = Budget::new(args);
    let mut checks = Vec::new();
    let mut vnotes = Vec::new();
    for page in sizes(advice.best) {
        if !quiet {
            eprintln!("verify: {page} B pages...");
        }
        let c = check_size(page, dir, fs.clone(), model, advice, &budget, &mut vnotes)
            .with_context(|| {
                format!("verification at {page} B pages failed (skip it with --verify off)")
            })?;
        checks.push(c);
    }
    let out = finish(
        args.verify,
        advice,
        checks,
        vnotes,
        start.elapsed().as_secs_f64(),
    );
    Ok(Some(out))
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

fn check_size(
    page: u64,
    dir: &Path,
    fs: Arc<dyn Fs>,
    model: &ModelReport,
    advice: &Advice,
    b: &Budget,
    notes: &mut Vec<String>,
) -> anyhow::Result<SizeCheck> {
    let d = &advice.dataset;
    let row_bytes = (d.leaf_entry() as f64 / d.fill * 1.2) as u64 + 1;
    let disk_rows = free_bytes(dir)
        .map_or(u64::MAX, |f| f / 4 / row_bytes)
        .max(100);
    let files = DbFiles::new(dir, page, fs)?;
    let value_bytes = if d.value_bytes > 0 {
        d.value_bytes
    } else {
        d.pointer_bytes.max(1)
    };
    let rows = d.rows.min(b.rows).min(disk_rows);
    let loaded = load(
        &files,
        page,
        rows,
        d.key_bytes,
        value_bytes,
        Duration::from_secs_f64(b.load_secs),
    )?;
    if loaded.rows < rows {
        notes.push(format!(
            "{page} B: the load stopped at {} of {rows} records (time budget)",
            loaded.rows
        ));
    }
    let built_fill = (loaded.rows as f64 * d.leaf_entry() as f64
        / (loaded.leaf_pages * page) as f64)
        .clamp(0.05, 1.0);
    let scaled = scale(d, page, loaded.rows, built_fill).map_err(anyhow::Error::msg)?;
    for l in &scaled.limits {
        notes.push(format!("{page} B: {l}"));
    }
    let db = reopen(&files, scaled.dataset.cache_bytes)?;
    let w = Workload {
        rows: loaded.rows,
        key_bytes: d.key_bytes,
        value_bytes,
        range_records: d.range_records,
        mix: advice.mix,
        secs: b.phase_secs,
        seed: page ^ 0x7e57,
    };
    let measured = measure(&db, &w, b.warm_secs)?;
    db.close().context("closing the verification Db failed")?;
    drop(files);
    if measured.height != loaded.height.max(1) || measured.height != scaled.scaled_height {
        notes.push(format!(
            "{page} B: the engine's tree has {} levels, the model's {}",
            measured.height, scaled.scaled_height
        ));
    }
    let mut ignored = Vec::new();
    let a = advise_report(
        model,
        &scaled.dataset,
        advice.mix,
        None,
        &[page],
        &mut ignored,
    )?;
    let predicted = a
        .rows
        .into_iter()
        .next()
        .context("the advisor excluded this page size")?;
    Ok(SizeCheck {
        page_size: page,
        load_secs: loaded.secs,
        corrected: correct(&predicted, &scaled.dataset, advice.mix, &Correction::NONE),
        point_error: measured.point_qps / predicted.point_qps - 1.0,
        point_error_corrected: 0.0,
        scaled,
        predicted,
        measured,
    })
}

/// Fits the correction over every size, applies it, and words the verdict.
fn finish(
    level: Level,
    advice: &Advice,
    mut checks: Vec<SizeCheck>,
    notes: Vec<String>,
    secs: f64,
) -> Verification {
    let samples: Vec<Sample> = checks
        .iter()
        .map(|c| Sample {
            page_size: c.page_size,
            cpu_per_level_s: c.measured.cpu_per_level_us * 1e-6,
            predicted_point_ios: (c.predicted.height as f64 - c.predicted.cached_levels).max(0.0),
            measured_point_ios: c.measured.point_reads_per_get,
            measured_get_s: 1.0 / c.measured.point_qps,
            height: c.measured.height,
            read_s: 1.0 / c.predicted.read_iops,
            writes_per_insert: c.measured.page_writes_per_insert,
            write_cost_factor: c
                .measured
                .checkpoint_page_us
                .map(|us| us * 1e-6 * c.predicted.write_iops),
        })
        .collect();
    let correction = fit_correction(&samples);
    for c in &mut checks {
        c.corrected = correct(&c.predicted, &c.scaled.dataset, advice.mix, &correction);
        c.point_error_corrected = c.measured.point_qps / c.corrected.point_qps - 1.0;
    }
    let best_measured = checks
        .iter()
        .max_by(|a, b| a.measured.mix_ops.total_cmp(&b.measured.mix_ops))
        .map_or(advice.best, |c| c.page_size);
    Verification {
        level,
        recommended: advice.best,
        best_measured,
        verdict: verdict(advice.best, &checks, advice.mix, &correction),
        sizes: checks,
        correction,
        rule: RULE.into(),
        notes,
        elapsed_secs: secs,
    }
}
