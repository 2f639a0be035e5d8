//! `pagewise advise --device INPUT --rows N`: which page size serves the
//! workload best on this drive, with the table that shows why.

use crate::cmd::model::input;
use crate::cmd::model::table::Table;
use anyhow::{bail, Context};
use pagewise_model::advise::{
    predict_bepsilon, Advice, BEpsilonPrediction, BEpsilonShape, Dataset, Mix, Row,
};
use pagewise_model::fit::{fit_all, ModelReport, Source};
use pagewise_model::units::{fmt_bytes, fmt_count, parse_bytes, parse_size};
pub use pagewise_tune::advise::{advise_report, device};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Measurements of the drive: probe results JSON, fio JSON or CSV (see
    /// `pagewise model --help`). Random reads at several block sizes are required;
    /// random writes are used for inserts when present.
    #[arg(long, required = true, num_args = 1.., value_name = "INPUT")]
    pub device: Vec<PathBuf>,
    #[command(flatten)]
    pub data: DataArgs,
    /// Workload mix as relative weights, e.g. point=0.8,range=0.1,insert=0.1.
    #[arg(long, default_value = "point=1", value_parser = parse_mix)]
    pub mix: Mix,
    /// Use the random-read curve measured at this many I/Os in flight
    /// (qd x threads). Default: the lowest measured.
    #[arg(long, value_name = "N")]
    pub qd: Option<u32>,
    /// Candidate page sizes, comma-separated (e.g. 4k,16k,64k). Default:
    /// powers of two within the measured range, plus every measured size.
    #[arg(long, value_delimiter = ',', value_parser = parse_bytes_arg)]
    pub pages: Vec<u64>,
    /// Also predict B-epsilon trees of these node sizes (e.g.
    /// 64k,256k,1m,4m), with `--bepsilon-basement` and `--bepsilon-fanout`: the
    /// figures to set against `pagewise bench`'s `pagewise-bepsilon` engine.
    #[arg(long, value_delimiter = ',', value_parser = parse_bytes_arg)]
    pub bepsilon_nodes: Vec<u64>,
    /// Basement size for `--bepsilon-nodes` (the engine's default: 64k).
    #[arg(long, default_value = "64k", value_parser = parse_bytes_arg)]
    pub bepsilon_basement: u64,
    /// Fanout for `--bepsilon-nodes` (the engine's default: 16).
    #[arg(long, default_value_t = 16)]
    pub bepsilon_fanout: u64,
    /// Print the advice as JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// The dataset options, shared with `pagewise tune`.
#[derive(clap::Args, Clone)]
pub struct DataArgs {
    /// Records in the tree (accepts 1000000, 1e9, 1G = 10^9, 250M).
    #[arg(long, value_parser = parse_rows)]
    pub rows: u64,
    /// Key size in bytes.
    #[arg(long, default_value_t = 16)]
    pub key_bytes: u64,
    /// Value size in bytes stored in the leaves; 0: leaves hold entries like
    /// internal nodes (key + pointer to the row).
    #[arg(long, default_value_t = 0)]
    pub value_bytes: u64,
    /// Internal-node entry size in bytes (default: key bytes + pointer bytes).
    #[arg(long)]
    pub entry_bytes: Option<u64>,
    /// Child pointer size in bytes.
    #[arg(long, default_value_t = 8)]
    pub pointer_bytes: u64,
    /// Average node fill; ln 2 = 0.69 is what random inserts leave (Yao 1978).
    #[arg(long, default_value = "0.693")]
    pub fill: f64,
    /// Cache (buffer pool) size, e.g. 1GiB, 512MB; 0 for none.
    #[arg(long, default_value = "0", value_parser = parse_size_arg)]
    pub cache: u64,
    /// Records per range query.
    #[arg(long, default_value_t = 100)]
    pub range: u64,
}

impl DataArgs {
    pub fn dataset(&self) -> Dataset {
        Dataset {
            rows: self.rows,
            key_bytes: self.key_bytes,
            value_bytes: self.value_bytes,
            pointer_bytes: self.pointer_bytes,
            entry_bytes: self.entry_bytes,
            fill: self.fill,
            cache_bytes: self.cache,
            range_records: self.range,
        }
    }
}

fn parse_mix(s: &str) -> Result<Mix, String> {
    Mix::parse(s).map_err(|e| e.to_string())
}

fn parse_bytes_arg(s: &str) -> Result<u64, String> {
    parse_bytes(s).map_err(|e| e.to_string())
}

fn parse_size_arg(s: &str) -> Result<u64, String> {
    let v = parse_size(s).map_err(|e| e.to_string())?;
    if v < 0.0 {
        return Err(format!("{s}: a size cannot be negative"));
    }
    Ok(v as u64)
}

/// Row counts: plain integers, scientific (1e9) or decimal suffixes (k, M, G, T).
pub fn parse_rows(s: &str) -> Result<u64, String> {
    let t = s.trim().replace('_', "");
    let (num, mult) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1e3),
        Some('M') => (&t[..t.len() - 1], 1e6),
        Some('G' | 'B') => (&t[..t.len() - 1], 1e9),
        Some('T') => (&t[..t.len() - 1], 1e12),
        _ => (t.as_str(), 1.0),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a row count: write e.g. 1000000, 1e9 or 250M"))?;
    let rows = v * mult;
    if !(1.0..1.8e19).contains(&rows) || rows.fract() != 0.0 {
        return Err(format!("{s:?}: the row count must be a whole number >= 1"));
    }
    Ok(rows as u64)
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let loaded = input::load(&args.device)?;
    let report = fit_all(&loaded.measurements).context("cannot fit the drive model")?;
    let mut notes = loaded.notes.clone();
    let a = advise_report(
        &report,
        &args.data.dataset(),
        args.mix,
        args.qd,
        &args.pages,
        &mut notes,
    )?;
    let sweep = bepsilon_sweep(&args, &report, &mut notes)?;
    if args.json {
        #[derive(serde::Serialize)]
        struct Out<'a> {
            advice: &'a Advice,
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            bepsilon_sweep: &'a [BEpsilonPrediction],
            notes: &'a [String],
        }
        println!(
            "{}",
            serde_json::to_string_pretty(&Out {
                advice: &a,
                bepsilon_sweep: &sweep,
                notes: &notes
            })?
        );
        return Ok(());
    }
    print!("{}", render_text(&a));
    if !sweep.is_empty() {
        print!("{}", render_sweep(&sweep));
    }
    for n in &notes {
        println!("note: {n}");
    }
    Ok(())
}

/// Predictions for `--bepsilon-nodes`; refuses shapes the engine refuses.
fn bepsilon_sweep(
    args: &Args,
    report: &ModelReport,
    notes: &mut Vec<String>,
) -> anyhow::Result<Vec<BEpsilonPrediction>> {
    if args.bepsilon_nodes.is_empty() {
        return Ok(Vec::new());
    }
    if args.bepsilon_fanout < 2 {
        bail!(
            "--bepsilon-fanout {}: a B-epsilon node needs at least 2 children",
            args.bepsilon_fanout
        );
    }
    let dev = device(report, args.mix, args.qd, notes)?;
    let d = args.data.dataset();
    let mut out = Vec::new();
    for &node in &args.bepsilon_nodes {
        if args.bepsilon_basement < 512 || args.bepsilon_basement > node {
            bail!(
                "--bepsilon-basement {}: must be at least 512 B and at most the node size {}",
                fmt_bytes(args.bepsilon_basement as f64),
                fmt_bytes(node as f64)
            );
        }
        let shape = BEpsilonShape {
            node_bytes: node,
            basement_bytes: args.bepsilon_basement,
            fanout: args.bepsilon_fanout,
        };
        out.push(predict_bepsilon(dev, &d, shape));
    }
    Ok(out)
}

fn render_sweep(sweep: &[BEpsilonPrediction]) -> String {
    let mut t = Table::new(&[
        "node",
        "basement",
        "fanout",
        "height",
        "cached levels",
        "msgs/flush",
        "I/Os per insert",
        "inserts/s",
        "reads per get",
        "gets/s",
    ]);
    for p in sweep {
        t.row(vec![
            fmt_bytes(p.shape.node_bytes as f64),
            fmt_bytes(p.shape.basement_bytes as f64),
            p.shape.fanout.to_string(),
            p.height.to_string(),
            format!("{:.2}", p.cached_levels),
            format!("{:.0}", p.messages_per_flush),
            format!("{:.5}", p.insert_ios),
            fmt_count(p.inserts_per_s),
            format!("{:.2}", p.point_ios),
            fmt_count(p.point_qps),
        ]);
    }
    format!(
        "\nB-epsilon trees by node size (I/O only, as the rows above):\n{}",
        t.render()
    )
}

/// The advice table's cells from fanout to inserts/s, shared by the text
/// table and the HTML report so both always show the same figures.
pub fn row_cells(r: &Row) -> [String; 10] {
    [
        r.fanout.to_string(),
        r.leaf_capacity.to_string(),
        format!("{:.2}", r.continuous_hops),
        r.height.to_string(),
        format!("{:.2}", r.cached_levels),
        format!("{:.2}", r.uncached_hops),
        fmt_count(r.point_qps),
        format!("{:.2}", r.range_ios),
        format!("{:.3}", r.range_ms),
        fmt_count(r.insert_ops),
    ]
}

pub fn render_text(a: &Advice) -> String {
    let d = &a.dataset;
    let mut s = format!(
        "Dataset: {} rows, {} B keys, {} B values, {} B internal entries, fill {:.2}, cache {}, range {} records; mix: {}\n",
        fmt_count(d.rows as f64),
        d.key_bytes,
        d.value_bytes,
        d.internal_entry(),
        d.fill,
        fmt_bytes(d.cache_bytes as f64),
        d.range_records,
        a.mix.describe()
    );
    s.push_str(&format!(
        "Drive: reads from {}, writes from {}\n\n",
        a.read_curve,
        a.write_curve.as_deref().unwrap_or("(none: read curve)")
    ));
    let mut t = Table::new(&[
        "page",
        "read IOPS",
        "fanout",
        "leaf recs",
        "log_f N",
        "height",
        "cached",
        "I/O per get",
        "gets/s",
        "range I/Os",
        "range ms",
        "inserts/s",
        "mix ops/s",
        "",
    ]);
    let mut modelled = false;
    for r in &a.rows {
        let star = if r.read_source == Source::Model {
            modelled = true;
            "*"
        } else {
            ""
        };
        let iops = format!("{}{star}", fmt_count(r.read_iops));
        let mut cells = vec![fmt_bytes(r.page_size as f64), iops];
        cells.extend(row_cells(r));
        cells.push(fmt_count(r.mix_ops));
        cells.push(if r.page_size == a.best {
            "<- best".into()
        } else {
            String::new()
        });
        t.row(cells);
    }
    s.push_str(&t.render());
    if modelled {
        s.push_str("* IOPS predicted by the fitted model (no measurement at this size)\n");
    }
    for (p, why) in &a.excluded {
        s.push_str(&format!("excluded {}: {why}\n", fmt_bytes(*p as f64)));
    }
    s.push_str(&format!(
        "\nRecommendation: {} pages.\nWhy: {}.\n",
        fmt_bytes(a.best as f64),
        a.reason
    ));
    if let Some(why) = &a.bepsilon_note {
        s.push_str(&format!("\nB-epsilon tree: {why}.\n"));
    }
    if let Some(b) = &a.bepsilon {
        s.push_str(&format!(
            "\nB-epsilon tree: node {} (half-bandwidth point {}), basement {}, fanout {} (B^{}), height {}\n  amortized I/Os per insert {:.4} -> {} inserts/s; I/Os per point query {:.2} -> {} gets/s\n  recommended node size: {}\n",
            fmt_bytes(b.node_size as f64),
            fmt_bytes(b.half_bandwidth_point.round()),
            fmt_bytes(b.basement_size as f64),
            b.fanout,
            b.epsilon,
            b.height,
            b.insert_ios,
            fmt_count(b.inserts_per_s),
            b.point_ios,
            fmt_count(b.point_qps),
            fmt_bytes(b.node_size as f64)
        ));
    }
    s
}
