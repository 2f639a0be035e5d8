//! `pagewise tune [DIR]`: probe the drive under DIR with a short default
//! sweep, fit the cost model, advise page sizes for a default dataset, and
//! write DIR/report.html. The README's main-job command.

mod wear;

pub use pagewise_tune::{answer, verify};

use crate::cmd::advise::parse_rows;
use crate::report::{self, ReportData};
use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pagewise_model::advise::{Advice, Mix};
use pagewise_model::units::{fmt_count, parse_percent, parse_rate, parse_size};
use pagewise_tune::{Phase, Progress, TuneSpec};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;
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
    pub verify: VerifyArgs,
}

#[derive(clap::Args, Debug, Clone)]
pub struct VerifyArgs {
    /// Check the advice on the engine: build Dbs at the recommended page size
    /// and its neighbours (half, double) and measure the mix on each.
    #[arg(long, value_enum, default_value_t = verify::Level::Quick)]
    pub verify: verify::Level,
    /// Seconds per measured verification phase (testing knob).
    #[arg(long, hide = true)]
    pub verify_secs: Option<f64>,
    /// Most records loaded per verified size (testing knob).
    #[arg(long, hide = true)]
    pub verify_rows: Option<u64>,
}

impl Args {
    /// The library's spec for these flags.
    pub fn spec(&self) -> TuneSpec {
        TuneSpec {
            dir: self.dir.clone(),
            rows: self.rows,
            key_bytes: self.key_bytes,
            value_bytes: self.value_bytes,
            cache_bytes: self.cache,
            mix: self.mix,
            range_rows: self.range,
            emulate: self.emulate.clone(),
            block_sizes: self.bs.clone(),
            duration_secs: self.duration,
            warmup_secs: self.warmup,
            file_size_bytes: self.file_size,
            qd_high: self.qd_high,
            qd_sweep: self.qd_sweep.clone(),
            verify: verify::VerifySpec {
                level: self.verify.verify,
                phase_secs: self.verify.verify_secs,
                max_rows: self.verify.verify_rows,
            },
        }
    }
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
    // Ctrl-C stops the probe at the next completion and the tune at its
    // next step, so its test file and Dbs are removed.
    crate::signals::install_stop();
    let bar = progress_bar(args.json);
    let json = args.json;
    let mut on_progress = |p: Progress| show(&bar, json, p);
    let out = pagewise_tune::tune(&args.spec(), &mut on_progress, &crate::signals::STOP);
    bar.finish_and_clear();
    let out = out?;
    let (results, results_path) = (&out.results, out.results_path.clone());
    let (model, advice, notes) = (&out.model, &out.advice, &out.notes);
    let (verification, answer, tuned_path) = (&out.verification, &out.answer, &out.tuned_path);
    let sweep_secs = out.sweep_secs;
    let (wear, wear_basis) = wear_rows(&args, &results.topology, advice)?;
    let data = ReportData {
        results,
        model,
        advice,
        wear: &wear,
        wear_basis,
        notes,
        sweep_secs,
        commands: commands(&args, &results_path),
        verification: verification.as_ref(),
        answer: Some(answer),
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
            "tuned": std::fs::canonicalize(tuned_path).unwrap_or(tuned_path.clone()),
            "tree_kind": answer.tree_kind,
            "best_page_size": answer.page_size,
            "bepsilon": answer.bepsilon,
            "answer": answer,
            "reason": advice.reason,
            "elapsed_secs": started.elapsed().as_secs_f64(),
            "verification": verification,
            "notes": notes,
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
            println!("Model: {}.", best_line(advice));
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

/// The CLI's view of the tune's progress: a bar over the probe points and
/// the verification's steps on stderr (neither with `--json`).
fn show(bar: &ProgressBar, json: bool, p: Progress) {
    match p.phase {
        Phase::Fill => bar.set_message(p.label),
        Phase::Sweep => {
            bar.set_length(p.steps.max(1));
            bar.set_position(p.step);
            bar.set_message(p.label);
        }
        Phase::Model | Phase::Done => bar.finish_and_clear(),
        Phase::Verify => {
            bar.finish_and_clear();
            if !json {
                eprintln!("{}", p.label);
            }
        }
    }
}

fn progress_bar(json: bool) -> ProgressBar {
    if json || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::with_draw_target(Some(1), ProgressDrawTarget::stderr());
    b.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} points, ETA {eta}  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    b
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
