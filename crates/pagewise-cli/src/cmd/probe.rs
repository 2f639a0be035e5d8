//! `pagewise probe PATH`: measure a drive the way a database uses it.

mod charts;
mod table;

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressStyle};
use pagewise_probe::{
    parse_count_list, parse_size, parse_size_list, Dist, Engine, Limit, Mode, ProbeResults,
    Progress, Stage, SweepSpec,
};
use std::io::IsTerminal;
use std::path::PathBuf;

/// Sweep block size x alignment x access pattern x concurrency on a directory,
/// file or block device, with fio-grade numbers: warm-up, repetitions until the
/// IOPS 95% confidence interval is within --tolerance, HDR latency percentiles.
///
/// Lists accept commas and power-of-two ranges: `--bs 512,4k,64k`, `--bs 4k..1m`,
/// `--qd 1..32`. Every list is an axis; the sweep is their cartesian product.
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Directory (a test file of --size is created there and removed afterwards),
    /// existing file (read-only unless --allow-write) or block device (read-only
    /// unless --destroy-data; never written while mounted).
    pub path: PathBuf,

    /// Access patterns: randread, randwrite, seqread, seqwrite, mixed:READPCT (e.g. mixed:70).
    #[arg(long, default_value = "randread")]
    pub mode: String,

    /// Block sizes, 512 B..4 MiB: list and/or power-of-two ranges, e.g. 512,4k,64k or 4k..1m.
    #[arg(long, default_value = "512..1m")]
    pub bs: String,

    /// Offset alignment ("stride") of random I/O, e.g. 512..4k [default: each block size].
    #[arg(long)]
    pub align: Option<String>,

    /// Offset distributions: uniform, zipf:THETA, pareto:H (fraction H of the blocks gets
    /// 1-H of the I/O), hotcold:PCT_OPS/PCT_SPACE.
    #[arg(long, default_value = "uniform")]
    pub dist: String,

    /// Threads, each with its own queue, e.g. 1,2,4.
    #[arg(long, default_value = "1")]
    pub threads: String,

    /// I/Os in flight per thread (queue depth), e.g. 1,32 or 1..32. The sync engine always runs 1.
    #[arg(long, default_value = "1")]
    pub qd: String,

    /// I/O engine: uring (io_uring, real queue depth) or sync (pread/pwrite).
    #[arg(long, default_value = "uring")]
    pub engine: String,

    /// Bypass the page cache with O_DIRECT [default: on; buffered only if the filesystem refuses].
    #[arg(long, overrides_with = "no_direct")]
    pub direct: bool,

    /// Use buffered I/O through the page cache (measures memory as much as the drive).
    #[arg(long = "no-direct")]
    pub no_direct: bool,

    /// fdatasync after every N writes per thread (0 = never).
    #[arg(long, default_value_t = 0)]
    pub fsync_every: u64,

    /// Size of the test file created in a directory (shrunk if free space is short).
    #[arg(long, default_value = "1g")]
    pub size: String,

    /// Measured time per repetition, e.g. 2s, 500ms, 1m.
    #[arg(long, default_value = "2s")]
    pub duration: String,

    /// Measure a fixed number of I/Os per repetition instead of --duration.
    #[arg(long)]
    pub ops: Option<u64>,

    /// Unmeasured I/O before each point's first repetition, e.g. 1s or 0.
    #[arg(long, default_value = "1s")]
    pub warmup: String,

    /// Repeat until the IOPS 95% confidence half-width is within this fraction of the mean (0.05 or 5%).
    #[arg(long, default_value = "5%")]
    pub tolerance: String,

    /// Minimum repetitions per point.
    #[arg(long, default_value_t = 2)]
    pub min_reps: u32,

    /// Maximum repetitions per point (reported as not converged if reached).
    #[arg(long, default_value_t = 5)]
    pub max_reps: u32,

    /// Seed of offsets, read/write mix and file contents.
    #[arg(long, default_value_t = SweepSpec::default().seed)]
    pub seed: u64,

    /// Write the full results (every point, topology, host, tool version) as JSON to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,

    /// Write one CSV row per point to this file.
    #[arg(long)]
    pub csv: Option<PathBuf>,

    /// Write SVG charts to this directory: IOPS, throughput and latency vs block size, and
    /// block size x alignment heat maps when several alignments were swept.
    #[arg(long)]
    pub plot: Option<PathBuf>,

    /// With --plot: also render PNGs with headless Chromium when it is installed.
    #[arg(long)]
    pub png: bool,

    /// Print the results JSON on stdout instead of the table (no progress bar).
    #[arg(long)]
    pub json: bool,

    /// Allow write modes on an existing file: its contents are overwritten with random data.
    #[arg(long)]
    pub allow_write: bool,

    /// Allow write modes on an unmounted block device: its data is destroyed.
    #[arg(long)]
    pub destroy_data: bool,

    /// Measure an emulated drive instead of the real one: a preset (x25e,
    /// x25e-datasheet, rethinkdb-2009, hdd, nvme) or S,W,P such as
    /// 500us,120MB/s,1 (setup time, bandwidth per channel, channels; optional
    /// 4th part: fsync time). Every I/O takes S + B/W on one of P channels, or
    /// longer if the real device is slower: emulate drives slower than it.
    #[arg(long, value_name = "PROFILE|S,W,P")]
    pub emulate: Option<String>,
}

/// Parses `--emulate`; the error names the bad part.
pub fn parse_emulate(s: &str) -> anyhow::Result<pagewise_io::DriveProfile> {
    pagewise_io::DriveProfile::parse(s).map_err(|e| anyhow::anyhow!("--emulate: {e}"))
}

fn parse_list<T>(
    flag: &str,
    s: &str,
    one: impl Fn(&str) -> Result<T, String>,
) -> anyhow::Result<Vec<T>> {
    let v: Result<Vec<T>, String> = s
        .split(',')
        .filter(|p| !p.trim().is_empty())
        .map(one)
        .collect();
    match v {
        Ok(v) if !v.is_empty() => Ok(v),
        Ok(_) => bail!("--{flag} is empty: give at least one value"),
        Err(e) => bail!("--{flag}: {e}"),
    }
}

/// Seconds from "2s", "500ms", "1m", "1.5" (seconds).
fn parse_secs(flag: &str, s: &str) -> anyhow::Result<f64> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mult) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else {
        (t.as_str(), 1.0)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok(v * mult),
        _ => bail!("--{flag} '{s}' is not a duration: use e.g. 2s, 500ms or 1m"),
    }
}

fn parse_fraction(s: &str) -> anyhow::Result<f64> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    };
    match v {
        Ok(v) if v > 0.0 && v < 1.0 => Ok(v),
        _ => {
            bail!("--tolerance '{s}' is invalid: use a fraction like 0.05 or a percentage like 5%")
        }
    }
}

/// Builds the library's sweep request from the command line.
pub fn spec_from_args(a: &Args) -> anyhow::Result<SweepSpec> {
    let counts = |flag: &str, s: &str| -> anyhow::Result<Vec<usize>> {
        let v = parse_count_list(s).map_err(|e| anyhow::anyhow!("--{flag}: {e}"))?;
        Ok(v.into_iter().map(|x| x as usize).collect())
    };
    let size = parse_size(&a.size).map_err(|e| anyhow::anyhow!("--size: {e}"))?;
    Ok(SweepSpec {
        modes: parse_list("mode", &a.mode, |s| s.parse::<Mode>())?,
        block_sizes: parse_size_list(&a.bs).map_err(|e| anyhow::anyhow!("--bs: {e}"))?,
        alignments: match &a.align {
            Some(s) => parse_size_list(s).map_err(|e| anyhow::anyhow!("--align: {e}"))?,
            None => Vec::new(),
        },
        distributions: parse_list("dist", &a.dist, |s| s.parse::<Dist>())?,
        threads: counts("threads", &a.threads)?,
        queue_depths: counts("qd", &a.qd)?,
        engine: a
            .engine
            .parse::<Engine>()
            .map_err(|e| anyhow::anyhow!("--engine: {e}"))?,
        direct: !a.no_direct || a.direct,
        fsync_every: a.fsync_every,
        warmup_secs: parse_secs("warmup", &a.warmup)?,
        limit: match a.ops {
            Some(n) => Limit::Ops(n),
            None => Limit::Seconds(parse_secs("duration", &a.duration)?),
        },
        tolerance: parse_fraction(&a.tolerance)?,
        min_reps: a.min_reps,
        max_reps: a.max_reps,
        file_size: size,
        allow_write: a.allow_write,
        destroy_data: a.destroy_data,
        seed: a.seed,
    })
}

/// Progress on stderr: one bar for filling the test file, one over the points.
struct Bars {
    fill: Option<ProgressBar>,
    points: Option<ProgressBar>,
    hidden: bool,
}

fn make_bar(hidden: bool, len: u64, template: &str) -> ProgressBar {
    if hidden {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template(template)
            .expect("static template")
            .progress_chars("=> "),
    );
    pb
}

impl Bars {
    fn update(&mut self, p: Progress) {
        let hidden = self.hidden;
        match p.stage {
            Stage::Filling { done, total } => {
                let pb = self.fill.get_or_insert_with(|| {
                    make_bar(
                        hidden,
                        total,
                        "filling test file {bar:30} {bytes}/{total_bytes} (ETA {eta})",
                    )
                });
                pb.set_position(done);
                if done >= total {
                    pb.finish_and_clear();
                }
            }
            Stage::PointStarted => {
                let pb = self.points.get_or_insert_with(|| {
                    make_bar(
                        hidden,
                        p.points as u64,
                        "{bar:30} {pos}/{len} points, {elapsed} elapsed, ETA {eta}  {msg}",
                    )
                });
                pb.set_message(format!("{} (warm-up)", p.label));
            }
            Stage::Repetition {
                rep,
                max_reps,
                iops,
                rel_ci,
            } => {
                if let Some(pb) = &self.points {
                    let ci = rel_ci.map_or(String::new(), |r| format!(" ±{:.1}%", r * 100.0));
                    pb.set_message(format!(
                        "{}: rep {rep}/{max_reps} {iops:.0} IOPS{ci}",
                        p.label
                    ));
                }
            }
            Stage::PointDone { .. } => {
                if let Some(pb) = &self.points {
                    pb.inc(1);
                    if p.point + 1 == p.points {
                        pb.finish_and_clear();
                    }
                }
            }
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let spec = spec_from_args(&args)?;
    let emulate = args.emulate.as_deref().map(parse_emulate).transpose()?;
    crate::signals::install_stop();
    let hidden = args.json || !std::io::stderr().is_terminal();
    let mut bars = Bars {
        fill: None,
        points: None,
        hidden,
    };
    let results =
        pagewise_probe::run_sweep_on_drive(&args.path, &spec, emulate.as_ref(), &mut |p| {
            bars.update(p)
        })?;
    write_outputs(&args, &results)?;
    if args.json {
        println!("{}", results.to_json());
    } else {
        print!("{}", table::render(&results));
    }
    Ok(())
}

fn write_outputs(args: &Args, results: &ProbeResults) -> anyhow::Result<()> {
    if let Some(out) = &args.out {
        std::fs::write(out, results.to_json())
            .with_context(|| format!("cannot write {}", out.display()))?;
    }
    if let Some(csv) = &args.csv {
        std::fs::write(csv, results.to_csv())
            .with_context(|| format!("cannot write {}", csv.display()))?;
    }
    if let Some(dir) = &args.plot {
        let files = charts::write_all(results, dir, args.png)
            .with_context(|| format!("cannot write charts to {}", dir.display()))?;
        if !args.json {
            for f in files {
                eprintln!("chart: {}", f.display());
            }
        }
    }
    Ok(())
}
