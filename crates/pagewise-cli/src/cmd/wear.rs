//! `pagewise wear`: how long a drive lasts under a write rate.

use anyhow::bail;
use pagewise_model::units::{fmt_bytes, fmt_rate, parse_percent, parse_rate, parse_size};
use pagewise_model::wear::{estimate, FtlWa, WearEstimate, WearInput};

#[derive(clap::Args, Clone)]
pub struct Args {
    /// Drive capacity, e.g. 256GB (decimal) or 256GiB (binary).
    #[arg(long, value_parser = size)]
    pub capacity: f64,
    /// Program/erase cycles each flash cell survives (MLC ~3000, TLC ~1000, QLC ~300).
    #[arg(long, default_value_t = 1000.0)]
    pub pe_cycles: f64,
    /// Bytes the host writes, e.g. 10MB/s, 500GB/day.
    #[arg(long, value_parser = rate)]
    pub write_rate: f64,
    /// Engine write amplification: bytes written to the drive per byte of user data.
    #[arg(long, default_value_t = 1.0)]
    pub engine_wa: f64,
    /// FTL write amplification, if known (e.g. from SMART counters).
    #[arg(long, conflicts_with = "over_provisioning")]
    pub ftl_wa: Option<f64>,
    /// Spare flash as a fraction of user capacity, e.g. 7% or 28%: the FTL write
    /// amplification is then estimated with a greedy garbage-collection model
    /// (Xiang & Kurkoski 2012) for uniform random writes. Default: 7%.
    #[arg(long, value_parser = pct)]
    pub over_provisioning: Option<f64>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

fn size(s: &str) -> Result<f64, String> {
    parse_size(s).map_err(|e| e.to_string())
}
fn rate(s: &str) -> Result<f64, String> {
    parse_rate(s).map_err(|e| e.to_string())
}
fn pct(s: &str) -> Result<f64, String> {
    parse_percent(s).map_err(|e| e.to_string())
}

impl Args {
    pub fn input(&self) -> WearInput {
        let ftl = match (self.ftl_wa, self.over_provisioning) {
            (Some(a), _) => FtlWa::Given(a),
            (None, Some(op)) => FtlWa::OverProvisioning(op),
            (None, None) => FtlWa::OverProvisioning(0.07),
        };
        WearInput {
            capacity_bytes: self.capacity,
            pe_cycles: self.pe_cycles,
            host_write_rate: self.write_rate,
            engine_wa: self.engine_wa,
            ftl,
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.capacity <= 0.0 {
        bail!("--capacity must be positive, e.g. 256GB");
    }
    let e = estimate(&args.input())?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&e)?);
    } else {
        print!("{}", render_text(&e));
    }
    Ok(())
}

pub fn render_text(e: &WearEstimate) -> String {
    let i = &e.input;
    format!(
        "capacity {} ({:.0} GB), {} P/E cycles: {:.0} TB of flash writes\n\
         host writes {} ({:.2} drive writes per day) x engine WA {:.2} x FTL WA {:.2} ({}) = {} to flash\n\
         lifetime: {:.0} days ({:.2} years); the host can write {:.1} TB before wear-out\n",
        fmt_bytes(i.capacity_bytes),
        i.capacity_bytes / 1e9,
        i.pe_cycles,
        i.capacity_bytes * i.pe_cycles / 1e12,
        fmt_rate(i.host_write_rate),
        e.host_dwpd,
        i.engine_wa,
        e.ftl_wa,
        e.ftl_wa_source,
        fmt_rate(e.flash_write_rate),
        e.days,
        e.years,
        e.host_bytes_written / 1e12
    )
}
