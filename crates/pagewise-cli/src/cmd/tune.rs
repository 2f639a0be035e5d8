//! `pagewise tune [DIR]`: probe the drive under DIR with a short default
//! sweep, fit the cost model, advise page sizes for a default dataset, and
//! write DIR/report.html. The README's main-job command.

use crate::cmd::advise::{advise_report, parse_rows};
use crate::cmd::model::input;
use crate::report::{self, ReportData, WearRow};
use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pagewise_model::advise::{Advice, Dataset, Mix};
use pagewise_model::fit::fit_all;
use pagewise_model::units::{fmt_bytes, fmt_count, parse_percent, parse_rate, parse_size};
use pagewise_model::wear::{estimate, FtlWa, WearInput};
use pagewise_probe::{
    target, DeviceTopology, Engine, Limit, Mode, ProbeResults, Progress, Stage, SweepSpec,
};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

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
fn mix_arg(s: &str) -> Result<Mix, String> {
    Mix::parse(s).map_err(|e| e.to_string())
}

/// Block sizes that matter for page-size decisions, 512 B..1 MiB.
const DEFAULT_BS: [u64; 9] = [
    512, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 1048576,
];

extern "C" fn on_sigint(_: libc::c_int) {
    pagewise_probe::interrupt();
}

/// Ctrl-C asks the probe to stop at the next completion, so the 1 GiB test
/// file is removed on the way out; a second Ctrl-C kills (SA_RESETHAND).
fn install_sigint() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigint as *const () as usize;
        sa.sa_flags = libc::SA_RESETHAND;
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let started = Instant::now();
    install_sigint();
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
    let advice = advise_report(&model, &dataset, args.mix, None, &[], &mut notes)?;
    let (wear, wear_basis) = wear_rows(&args, &results.topology, &advice)?;
    let sweep_secs = results.elapsed_secs;
    let data = ReportData {
        results: &results,
        model: &model,
        advice: &advice,
        wear: &wear,
        wear_basis,
        notes: &notes,
        sweep_secs,
        commands: commands(&args, &results_path),
    };
    let html = report::render(&data);
    let report_path = args.dir.join("report.html");
    std::fs::write(&report_path, html)
        .with_context(|| format!("cannot write {}", report_path.display()))?;
    let shown = std::fs::canonicalize(&report_path).unwrap_or(report_path.clone());
    if args.json {
        let out = serde_json::json!({
            "report": shown,
            "results": std::fs::canonicalize(&results_path).unwrap_or(results_path),
            "best_page_size": advice.best,
            "reason": advice.reason,
            "betree_node_size": advice.betree.as_ref().map(|b| b.node_size),
            "elapsed_secs": started.elapsed().as_secs_f64(),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!(
            "Recommended B+tree page size: {} ({}).",
            fmt_bytes(advice.best as f64),
            best_line(&advice)
        );
        if let Some(b) = &advice.betree {
            println!(
                "B-epsilon tree: {} nodes, {} basements.",
                fmt_bytes(b.node_size as f64),
                fmt_bytes(b.basement_size as f64)
            );
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

/// The sweep: randread, seqread and randwrite at QD1 and randread at a high
/// QD over the block sizes, then randread 4 KiB over queue depths. One test
/// file serves every part.
fn sweep(args: &Args) -> anyhow::Result<ProbeResults> {
    let topo = std::fs::File::open(&args.dir)
        .map(|f| DeviceTopology::of(&f))
        .unwrap_or_default();
    let lbs = topo.logical_block_size.unwrap_or(512);
    let mut bs: Vec<u64> = if args.bs.is_empty() {
        DEFAULT_BS.to_vec()
    } else {
        args.bs.clone()
    };
    bs.retain(|b| b % lbs == 0);
    anyhow::ensure!(
        bs.len() >= 2,
        "need two or more block sizes that are multiples of the device's {lbs} B logical block"
    );
    let small = if bs.contains(&4096) { 4096 } else { bs[0] };
    let base = SweepSpec {
        block_sizes: bs.clone(),
        warmup_secs: args.warmup,
        limit: Limit::Seconds(args.duration),
        tolerance: 0.05,
        min_reps: 2,
        max_reps: 3,
        file_size: args.file_size,
        engine: Engine::Uring,
        ..SweepSpec::default()
    };
    let all = SweepSpec {
        modes: vec![Mode::RandRead, Mode::SeqRead, Mode::RandWrite],
        ..base.clone()
    };
    let bar = progress_bar(args.json, 0);
    let mut on_progress = |p: Progress| {
        if let Stage::Filling { done, total } = p.stage {
            bar.set_message(format!(
                "writing the test file {}/{}",
                fmt_bytes(done as f64),
                fmt_bytes(total as f64)
            ));
        }
    };
    let start = Instant::now();
    let prepared = target::prepare(&args.dir, &all, &mut on_progress)
        .with_context(|| format!("cannot prepare a test file in {}", args.dir.display()))?;
    // A synchronous engine keeps one I/O in flight per thread: reach the same
    // concurrency with threads instead (the model only sees qd x threads).
    let sync = prepared.info.engine == "sync";
    let concurrent = |levels: Vec<usize>, sizes: Vec<u64>| {
        let (qds, threads) = if sync {
            (vec![1], levels)
        } else {
            (levels, vec![1])
        };
        SweepSpec {
            modes: vec![Mode::RandRead],
            block_sizes: sizes,
            queue_depths: qds,
            threads,
            ..base.clone()
        }
    };
    let parts: Vec<SweepSpec> = vec![
        SweepSpec {
            modes: vec![Mode::RandRead, Mode::SeqRead, Mode::RandWrite],
            queue_depths: vec![1],
            ..base.clone()
        },
        concurrent(vec![args.qd_high], bs.clone()),
        concurrent(args.qd_sweep.clone(), vec![small]),
    ]
    .into_iter()
    .filter(|p| !p.queue_depths.is_empty() && !p.threads.is_empty())
    .collect();
    let total: usize = parts.iter().map(|p| p.points().len()).sum();
    bar.set_length(total as u64);
    let mut done_before = 0usize;
    let mut merged: Option<ProbeResults> = None;
    for part in &parts {
        let mut cb = |p: Progress| {
            if let Stage::PointDone { .. } = p.stage {
                bar.set_position((done_before + p.point + 1) as u64);
            } else if let Stage::PointStarted = p.stage {
                bar.set_message(p.label.clone());
            }
        };
        let r = pagewise_probe::run_sweep_on(prepared.backend.as_ref(), part, &mut cb)
            .context("the probe failed")?;
        done_before += part.points().len();
        match merged.as_mut() {
            None => merged = Some(r),
            Some(m) => m.points.extend(r.points),
        }
    }
    bar.finish_and_clear();
    let mut results = merged.context("empty sweep")?;
    results.target = prepared.info.clone();
    results.topology = prepared.topology.clone();
    results
        .warnings
        .splice(0..0, prepared.warnings.iter().cloned());
    results.spec = all;
    results.elapsed_secs = start.elapsed().as_secs_f64();
    drop(prepared);
    Ok(results)
}

fn progress_bar(json: bool, total: u64) -> ProgressBar {
    if json || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::with_draw_target(Some(total.max(1)), ProgressDrawTarget::stderr());
    b.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} points, ETA {eta}  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    b
}

/// Lifetime at one user write rate for the B+tree (one page written per
/// insert: engine WA = page / record), the B-epsilon tree (node writes per
/// insert x node / record) and the ideal of writing each byte once. The rate
/// is --write-rate, else the inserts/s the advised B+tree sustains in the mix.
fn wear_rows(
    args: &Args,
    topo: &DeviceTopology,
    a: &Advice,
) -> anyhow::Result<(Vec<WearRow>, String)> {
    let capacity = topo.disk_size.unwrap_or(256_000_000_000) as f64;
    let record = a.dataset.leaf_entry() as f64;
    let best = a.rows.iter().find(|r| r.page_size == a.best);
    let (user_rate, basis) = match (args.write_rate, best) {
        (Some(r), _) => (r, "the given --write-rate".to_string()),
        (None, Some(b)) if a.mix.insert > 0.0 => {
            let ins = b.mix_ops * a.mix.insert;
            (
                ins * record,
                format!(
                    "{} inserts/s of {} B records: the insert share of the mix at the recommended page size, running flat out",
                    fmt_count(ins),
                    record
                ),
            )
        }
        _ => (
            10e6,
            "10 MB/s (the mix has no inserts; set --write-rate)".to_string(),
        ),
    };
    let mut rows = Vec::new();
    let mut push = |label: String, engine_wa: f64| -> anyhow::Result<()> {
        let e = estimate(&WearInput {
            capacity_bytes: capacity,
            pe_cycles: args.pe_cycles,
            host_write_rate: user_rate,
            engine_wa: engine_wa.max(1.0),
            ftl: FtlWa::OverProvisioning(args.over_provisioning),
        })?;
        rows.push(WearRow { label, estimate: e });
        Ok(())
    };
    push(
        format!(
            "B+tree, {} pages, one page written per insert",
            fmt_bytes(a.best as f64)
        ),
        a.best as f64 / record,
    )?;
    if let Some(b) = &a.betree {
        push(
            format!(
                "B-epsilon tree, {} nodes, amortized flushes",
                fmt_bytes(b.node_size as f64)
            ),
            b.insert_ios / 2.0 * b.node_size as f64 / record,
        )?;
    }
    push("ideal: every user byte written once".into(), 1.0)?;
    Ok((rows, basis))
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
