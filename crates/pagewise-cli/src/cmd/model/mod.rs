//! `pagewise model INPUT...`: fit T(B) = S + B/W per workload and queue
//! depth, report how good the fit is, and how throughput scales with depth.

pub mod chart;
pub use pagewise_tune::{input, table};

use anyhow::Context;
use pagewise_model::fit::{fit_all, GroupFit, ModelReport, ParallelismFit};
use pagewise_model::measurement::workload_name;
use pagewise_model::units::{fmt_bytes, fmt_count, fmt_rate};
use serde::Serialize;
use std::path::PathBuf;
use table::Table;

#[derive(clap::Args)]
pub struct Args {
    /// Measurement files: probe results JSON or CSV (`pagewise probe --out`,
    /// `--csv`), fio JSON output (`fio --output-format=json`, one or several
    /// jobs), or CSV with header `block_size,iops` and optional
    /// `op,qd,threads,latency_us` (op: randread, randwrite, seqread, seqwrite, mixed).
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
    /// Print the fits as JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Write an SVG chart of measured points and fitted curves to FILE.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let loaded = input::load(&args.inputs)?;
    let report = fit_all(&loaded.measurements).context("cannot fit the model")?;
    if let Some(path) = &args.plot {
        let svg = chart::iops_chart(&report, "Measured IOPS and fitted T(B) = S + B/W").to_svg();
        crate::plot::save(path, &svg)
            .with_context(|| format!("cannot write {}", path.display()))?;
        if !args.json {
            eprintln!("chart written to {}", path.display());
        }
    }
    if args.json {
        let out = JsonOut {
            summary: report.fits.iter().map(Summary::of).collect(),
            report: &report,
            notes: &loaded.notes,
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    print!("{}", render_text(&report));
    for n in &loaded.notes {
        println!("note: {n}");
    }
    Ok(())
}

#[derive(Serialize)]
struct JsonOut<'a> {
    summary: Vec<Summary>,
    report: &'a ModelReport,
    notes: &'a [String],
}

/// The headline numbers of one fit, in the units people quote.
#[derive(Serialize)]
pub struct Summary {
    pub workload: String,
    pub qd: u32,
    pub threads: u32,
    pub setup_us: f64,
    /// `null` when the data show no transfer cost.
    pub bandwidth_mb_s: Option<f64>,
    pub half_bandwidth_bytes: Option<f64>,
    pub r2: f64,
    pub max_rel_residual: f64,
    pub poor_fit: Option<String>,
    pub knee_bytes: Option<u64>,
}

impl Summary {
    pub fn of(g: &GroupFit) -> Self {
        let w = g.affine.bandwidth();
        Self {
            workload: g.key.workload().into(),
            qd: g.key.qd,
            threads: g.key.threads,
            setup_us: g.affine.setup_s * 1e6,
            bandwidth_mb_s: w.is_finite().then_some(w / 1e6),
            half_bandwidth_bytes: w.is_finite().then(|| g.affine.half_bandwidth_point()),
            r2: g.affine.r2,
            max_rel_residual: g.affine.max_rel_residual,
            poor_fit: g.poor.clone(),
            knee_bytes: g
                .piecewise
                .as_ref()
                .filter(|_| g.knee_found)
                .map(|p| p.knee),
        }
    }
}

/// Tables of fits, residuals, knees and parallelism.
pub fn render_text(r: &ModelReport) -> String {
    let mut s = String::new();
    if !r.fits.is_empty() {
        s.push_str(
            "Fitted T(B) = S + B/W (service time per I/O in flight = qd x threads / IOPS)\n\n",
        );
        let mut t = Table::new(&[
            "workload",
            "points",
            "S",
            "W",
            "S x W",
            "R^2",
            "max resid",
            "fit",
        ]);
        for g in &r.fits {
            let f = &g.affine;
            t.row(vec![
                g.key.label(),
                f.points.len().to_string(),
                fmt_us(f.setup_s),
                fmt_w(f.bandwidth()),
                fmt_hbp(f.half_bandwidth_point()),
                format!("{:.4}", f.r2),
                format!("{:.1}%", f.max_rel_residual * 100.0),
                if g.poor.is_some() {
                    "poor".into()
                } else {
                    "good".into()
                },
            ]);
        }
        s.push_str(&t.render());
        s.push('\n');
        for g in &r.fits {
            s.push_str(&residual_line(g));
        }
        for g in &r.fits {
            if let Some(why) = &g.poor {
                s.push_str(&format!(
                    "\n{}: the affine fit is poor ({why}).\n",
                    g.key.label()
                ));
                match (&g.piecewise, g.knee_found) {
                    (Some(p), found) => s.push_str(&format!(
                        "  two-segment fit: S {}, knee at {}, W {} below and {} above, max residual {:.1}%{}\n",
                        fmt_us(p.setup_s),
                        fmt_bytes(p.knee as f64),
                        fmt_w(inv(p.sec_per_byte_below)),
                        fmt_w(inv(p.sec_per_byte_above)),
                        p.max_rel_residual * 100.0,
                        if found { "" } else { " (no clear knee: the data are noisy rather than bent)" }
                    )),
                    (None, _) => s.push_str("  too few block sizes (< 4) for a two-segment fit.\n"),
                }
            }
        }
    }
    for (k, why) in &r.skipped {
        s.push_str(&format!("not fitted: {} ({why})\n", k.label()));
    }
    if !r.parallelism.is_empty() {
        s.push_str("\nParallelism (throughput vs I/Os in flight)\n\n");
        s.push_str(&parallelism_table(&r.parallelism).render());
    }
    s
}

fn residual_line(g: &GroupFit) -> String {
    let parts: Vec<String> = g
        .affine
        .points
        .iter()
        .map(|p| {
            format!(
                "{} {:+.1}%",
                fmt_bytes(p.block_size as f64),
                p.rel_residual * 100.0
            )
        })
        .collect();
    format!("residuals {}: {}\n", g.key.label(), parts.join(", "))
}

pub fn parallelism_table(ps: &[ParallelismFit]) -> Table {
    let mut t = Table::new(&[
        "workload",
        "block",
        "in flight",
        "peak IOPS",
        "peak at",
        "PDAM P",
        "95% of peak at",
    ]);
    for p in ps {
        let q = &p.parallelism;
        let levels: Vec<String> = q.points.iter().map(|x| x.0.to_string()).collect();
        t.row(vec![
            workload_name(p.op, p.pattern).into(),
            fmt_bytes(p.block_size as f64),
            levels.join(","),
            fmt_count(q.peak_iops),
            q.peak_at.to_string(),
            format!("{:.1}", q.pdam_p),
            q.qd95.to_string(),
        ]);
    }
    t
}

fn inv(x: f64) -> f64 {
    if x > 0.0 {
        1.0 / x
    } else {
        f64::INFINITY
    }
}

pub fn fmt_us(s: f64) -> String {
    format!("{:.1} us", s * 1e6)
}

pub fn fmt_w(w: f64) -> String {
    if w.is_finite() {
        fmt_rate(w)
    } else {
        "unbounded".into()
    }
}

pub fn fmt_hbp(b: f64) -> String {
    if b.is_finite() {
        fmt_bytes(b.round())
    } else {
        "-".into()
    }
}
