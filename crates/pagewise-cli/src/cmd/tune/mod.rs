//! `pagewise tune [DIR]`: probe the drive under DIR with a short default
//! sweep, fit the cost model, advise page sizes for a default dataset, and
//! write DIR/report.html. The README's main-job command.

pub mod answer;
mod sweep;
pub mod verify;
mod wear;

use crate::cmd::advise::{advise_report, parse_rows};
use crate::cmd::model::input;
use crate::report::{self, ReportData};
use anyhow::Context;
use pagewise_model::advise::{Advice, Dataset, Mix};
use pagewise_model::fit::fit_all;
use pagewise_model::units::{fmt_count, parse_percent, parse_rate, parse_size};
use std::path::{Path, PathBuf};
use std::time::Instant;
use sweep::sweep;
use wear::wear_rows;

#[derive(clap::Args)]
pub struct Args {
    /// Directory on the drive to tune for: holds the probe's temporary test
    /// file, probe-results.json and report.html (created if missing).
    #[arg(default_value = "./pagewise-data")]
    pub dir: PathBuf,
    /// Records in the dataset to advise for (1e9, 250M, ...).
    #[arg(long, value_parser = parse_rows, default_value = "100M")]
    pub rows: u64,
    /// Key size in bytes.
    #[arg(long, default_value_t = 16)]
    pub key_bytes: u64,
    /// Value size in bytes.
    #[arg(long, default_value_t = 100)]
    pub value_bytes: u64,
    /// Cache (buffer pool) size, e.g. 1GiB.
    #[arg(long, default_value = "1GiB", value_parser = size_arg)]
    pub cache: u64,
    /// Workload mix as relative weights.
    #[arg(long, default_value = "point=0.8,range=0.1,insert=0.1", value_parser = mix_arg)]
    pub mix: Mix,
    /// Records per range query.
    #[arg(long, default_value_t = 100)]
    pub range: u64,
    /// User data write rate for the wear estimate, e.g. 10MB/s. Default: the
    /// insert rate the advised configuration sustains under the mix.
    #[arg(long, value_parser = rate_arg)]
    pub write_rate: Option<f64>,
    /// P/E cycles of the flash for the wear estimate.
    #[arg(long, default_value_t = 1000.0)]
    pub pe_cycles: f64,
    /// Over-provisioning for the FTL write-amplification model.
    #[arg(long, default_value = "7%", value_parser = pct_arg)]
    pub over_provisioning: f64,
    /// Print a JSON summary instead of text.
    #[arg(long)]
    pub json: bool,
    /// Tune for an emulated drive instead of the real one: a preset (x25e,
    /// x25e-datasheet, rethinkdb-2009, hdd, nvme) or S,W,P such as
    /// 500us,120MB/s,1 (see `pagewise probe --help`). The test file still
    /// lives in DIR; the report says the drive was emulated.
    #[arg(long, value_name = "PROFILE|S,W,P", value_parser = emulate_arg)]
    pub emulate: Option<pagewise_io::DriveProfile>,
    /// Block sizes to sweep (testing knob).
    #[arg(long, hide = true, value_delimiter = ',', value_parser = bytes_arg)]
    pub bs: Vec<u64>,
    /// Seconds measured per repetition (testing knob).
    #[arg(long, hide = true, default_value_t = 0.6)]
    pub duration: f64,
    /// Warm-up seconds per point (testing knob).
    #[arg(long, hide = true, default_value_t = 0.2)]
    pub warmup: f64,
    /// Size of the probe's test file (testing knob).
    #[arg(long, hide = true, default_value = "1GiB", value_parser = size_arg)]
    pub file_size: u64,
    /// The higher queue depth for random reads (testing knob).
    #[arg(long, hide = true, default_value_t = 32)]
    pub qd_high: usize,
    /// Queue depths swept at 4 KiB for parallelism (testing knob).
    #[arg(
        long,
        hide = true,
        value_delimiter = ',',
        default_value = "2,4,8,16,64"
    )]
    pub qd_sweep: Vec<usize>,
    #[command(flatten)]
    pub verify: verify::VerifyArgs,
}

fn size_arg(s: &str) -> Result<u64, String> {
    parse_size(s).map_err(|e| e.to_string()).and_then(|v| {
        (v >= 0.0)
            .then_some(v as u64)
            .ok_or("size cannot be negative".into())
    })
}
fn bytes_arg(s: &str) -> Result<u64, String> {
    pagewise_model::units::parse_bytes(s).map_err(|e| e.to_string())
}
fn rate_arg(s: &str) -> Result<f64, String> {
    parse_rate(s).map_err(|e| e.to_string())
}
fn pct_arg(s: &str) -> Result<f64, String> {
    parse_percent(s).map_err(|e| e.to_string())
}
fn emulate_arg(s: &str) -> Result<pagewise_io::DriveProfile, String> {
    pagewise_io::DriveProfile::parse(s).map_err(|e| e.to_string())
}
fn mix_arg(s: &str) -> Result<Mix, String> {
    Mix::parse(s).map_err(|e| e.to_string())
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let started = Instant::now();
    // Ctrl-C stops the probe at the next completion so its test file is removed.
    crate::signals::install_stop();
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("cannot create {}: check permissions", args.dir.display()))?;
    let dataset = Dataset {
        rows: args.rows,
        key_bytes: args.key_bytes,
        value_bytes: args.value_bytes,
        cache_bytes: args.cache,
        range_records: args.range,
        ..Dataset::default()
    };
    dataset.validate()?;

    let results = sweep(&args)?;
    let results_path = args.dir.join("probe-results.json");
    std::fs::write(&results_path, results.to_json())
        .with_context(|| format!("cannot write {}", results_path.display()))?;

    let mut notes = results.warnings.clone();
    let value = serde_json::to_value(&results)?;
    let ms = input::from_probe(&value, &mut notes)?;
    let model = fit_all(&ms).context("cannot fit the drive model")?;
    let mut advice = advise_report(&model, &dataset, args.mix, None, &[], &mut notes)?;
    let sweep_secs = results.elapsed_secs;
    // Verification runs on the drive the advice is for: the emulated one
    // when `--emulate` is given. It calibrates the engine's costs first and
    // moves `advice.best` to the engine-aware best.
    let real: std::sync::Arc<dyn pagewise_io::Fs> = std::sync::Arc::new(pagewise_io::RealFs);
    let fs: std::sync::Arc<dyn pagewise_io::Fs> = match &args.emulate {
        Some(profile) => std::sync::Arc::new(pagewise_io::EmulatedFs::new(real, profile.clone())?),
        None => real,
    };
    let drive = verify::drive_name(args.emulate.as_ref());
    let verification = verify::run(
        &args.verify,
        &args.dir,
        fs,
        &drive,
        &model,
        &mut advice,
        args.json,
        &mut notes,
    )?;
    let answer = take_answer(&mut advice, verification.as_ref());
    let tuned_path = answer::tuned(&answer, &advice, &drive, &args.dir).save(&args.dir)?;
    let (wear, wear_basis) = wear_rows(&args, &results.topology, &advice)?;
    let data = ReportData {
        results: &results,
        model: &model,
        advice: &advice,
        wear: &wear,
        wear_basis,
        notes: &notes,
        sweep_secs,
        commands: commands(&args, &results_path),
        verification: verification.as_ref(),
        answer: Some(&answer),
    };
    let html = report::render(&data);
    let report_path = args.dir.join("report.html");
    std::fs::write(&report_path, html)
        .with_context(|| format!("cannot write {}", report_path.display()))?;
    let shown = std::fs::canonicalize(&report_path).unwrap_or(report_path.clone());
    if args.json {
        let mut out = serde_json::json!({
            "report": shown,
            "results": std::fs::canonicalize(&results_path).unwrap_or(results_path),
            "tuned": std::fs::canonicalize(&tuned_path).unwrap_or(tuned_path.clone()),
            "tree_kind": answer.tree_kind,
            "best_page_size": answer.page_size,
            "bepsilon": answer.bepsilon,
            "answer": answer,
            "reason": advice.reason,
            "elapsed_secs": started.elapsed().as_secs_f64(),
            "verification": verification,
        });
        if let Some(p) = &results.emulated {
            out["emulated"] = serde_json::to_value(p)?;
        }
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        if let Some(p) = &results.emulated {
            println!("{}", p.banner());
        }
        for l in &answer.lines {
            println!("{l}.");
        }
        println!(
            "Written to {} (pagewise db create --tuned {}).",
            tuned_path.display(),
            args.dir.display()
        );
        if verification.is_none() {
            println!("Model: {}.", best_line(&advice));
        }
        if let Some(v) = &verification {
            print!("{}", verify::render_text(v));
        }
        println!("Report: {}", shown.display());
        println!(
            "Done in {:.0} s (probe {:.0} s).",
            started.elapsed().as_secs_f64(),
            sweep_secs
        );
    }
    Ok(())
}

/// tune's answer from the verification (or the advice without one), and
/// the advice moved to it so the rest of the report (wear, KPIs) is about
/// the configuration named.
fn take_answer(advice: &mut Advice, v: Option<&verify::Verification>) -> answer::Answer {
    let a = match v {
        Some(v) => answer::measured(advice, v),
        None => answer::unmeasured(advice),
    };
    advice.best = a.page_size;
    if let (Some(b), Some(s)) = (advice.bepsilon.as_mut(), a.bepsilon) {
        b.node_size = s.node_bytes;
        b.basement_size = s.basement_bytes;
        b.fanout = s.fanout;
    }
    a
}

fn best_line(a: &Advice) -> String {
    a.rows
        .iter()
        .find(|r| r.page_size == a.best)
        .map(|r| {
            format!(
                "{} ops/s for the mix {}",
                fmt_count(r.mix_ops),
                a.mix.describe()
            )
        })
        .unwrap_or_default()
}

fn commands(args: &Args, results: &Path) -> Vec<String> {
    let r = results.display();
    vec![
        format!("pagewise model {r} --plot fit.svg"),
        format!(
            "pagewise advise --device {r} --rows {} --key-bytes {} --value-bytes {} --cache {} --range {} --mix point={:.2},range={:.2},insert={:.2}",
            args.rows, args.key_bytes, args.value_bytes, args.cache, args.range, args.mix.point, args.mix.range, args.mix.insert
        ),
        format!(
            "pagewise wear --capacity <drive size> --pe-cycles {} --write-rate <user MB/s> --over-provisioning {:.0}% --engine-wa <from the table>",
            args.pe_cycles,
            args.over_provisioning * 100.0
        ),
    ]
}
