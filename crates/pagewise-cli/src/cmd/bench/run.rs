//! `pagewise bench run`: parse the workload list, run each engine on a fresh
//! filesystem, print a line per phase and append JSON lines to the results file.

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pagewise_bench::exec::Progress;
use pagewise_bench::keys::KeyDist;
use pagewise_bench::values::Compressibility;
use pagewise_bench::workload::{parse_count, parse_dist, parse_duration, parse_size};
use pagewise_bench::{
    compiled_engines, CacheLimiter, CapChoice, CapScope, Measure, Params, PhaseResult, RunConfig,
    Settings, Spec, SyncPolicy,
};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Engines, comma-separated: pagewise (B+tree), pagewise-bepsilon (B-epsilon trees),
    /// pagewise-delta (B+tree pages flushed as deltas), redb, lmdb, sqlite, rocksdb
    /// (peers need `--features peers` / `peers-all`), or `all` for every engine compiled in.
    #[arg(short, long, default_value = "pagewise", value_delimiter = ',')]
    pub engine: Vec<String>,
    /// Phases in order, each `name[:opt=value,...]`; repeat -w or separate with spaces.
    /// Names: fillseq fillrandom overwrite incrandom readrandom multireadrandom readseq scan
    /// ycsb-a..ycsb-f iibench readwhilewriting txn. Options: ops threads duration
    /// cache(=64M|5%) dist values batch multiget scan keys seed value_size
    /// warm(=1: read everything first) view_reads (readwhilewriting: reads per
    /// snapshot, default 16) reads writes (txn: per transaction, default 10 each).
    #[arg(short, long = "workload", default_value = "fillrandom readrandom")]
    pub workloads: Vec<String>,
    /// Keys loaded by fills (rows for iibench), e.g. 1M.
    #[arg(long, default_value = "1M", value_parser = count)]
    pub keys: u64,
    #[arg(long, default_value_t = 16)]
    pub key_size: usize,
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// Value compressibility: random, half (half zeros) or text.
    #[arg(long, default_value = "random")]
    pub values: Compressibility,
    /// Key distribution for reads and updates: uniform, zipf[=theta], latest[=theta].
    #[arg(long, default_value = "uniform", value_parser = dist)]
    pub dist: KeyDist,
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Operations per phase (default: the key count; scans: keys / scan length).
    #[arg(long, value_parser = count)]
    pub ops: Option<u64>,
    /// Stop each phase after this long (e.g. 60s), even if ops remain.
    #[arg(long, value_parser = duration)]
    pub duration: Option<std::time::Duration>,
    /// Writes per batch (rows per batch for iibench).
    #[arg(long, default_value_t = 1000)]
    pub batch: usize,
    #[arg(long, default_value_t = 16)]
    pub multiget: usize,
    #[arg(long, default_value_t = 100)]
    pub scan_len: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Engine cache (buffer pool / block cache), e.g. 256M; a phase may override it.
    #[arg(long, default_value = "256M", value_parser = size)]
    pub cache: u64,
    /// Engine-side compression where offered (rocksdb LZ4, pagewise).
    #[arg(long)]
    pub compression: bool,
    /// off: no fsync while loading, one sync at the end of each phase;
    /// batch: every batch fsync'd before it is acknowledged.
    #[arg(long, default_value = "off", value_parser = sync_policy)]
    pub sync: SyncPolicy,
    /// Direct I/O where the engine offers it (pagewise, rocksdb).
    #[arg(long)]
    pub direct: bool,
    /// Page size for engines that take one (pagewise, sqlite), e.g. 8K.
    #[arg(long, value_parser = size)]
    pub page_size: Option<u64>,
    /// pagewise-bepsilon: target bytes of an internal node, 256 to 64M
    /// (default 1M); leaves follow it unless --bepsilon-leaf is given.
    #[arg(long, value_parser = size_u32, value_name = "SIZE")]
    pub bepsilon_node: Option<u32>,
    /// pagewise-bepsilon: target bytes of a leaf, 256 to 64M (default 512K,
    /// or the node size when --bepsilon-node is given).
    #[arg(long, value_parser = size_u32, value_name = "SIZE")]
    pub bepsilon_leaf: Option<u32>,
    /// pagewise-bepsilon: target bytes of a leaf basement, 64 to half the
    /// leaf size (default 16K).
    #[arg(long, value_parser = size_u32, value_name = "SIZE")]
    pub bepsilon_basement: Option<u32>,
    /// pagewise-bepsilon: most children of an internal node, 3 to 1024 (default 8).
    #[arg(long, value_name = "N")]
    pub bepsilon_fanout: Option<u16>,
    /// pagewise-bepsilon: values of at least SIZE bytes are written once to
    /// an extent of their own and the tree carries a reference; `off` keeps
    /// every value in the tree (default 512, at least 64).
    #[arg(long, value_parser = size_or_off, value_name = "SIZE|off")]
    pub bepsilon_value_extent: Option<ValueExtent>,
    /// pagewise-delta: change bytes a page may carry as delta blocks before
    /// it is written whole again, at least 1 (default 2K).
    #[arg(long, value_parser = size, value_name = "SIZE")]
    pub delta_threshold: Option<u64>,
    /// pagewise engines: log bytes that start a checkpoint, at least 64K
    /// (default 256M).
    #[arg(long, value_parser = size, value_name = "SIZE")]
    pub wal_limit: Option<u64>,
    /// pagewise engines: percent of the cache that changed nodes may hold
    /// before a checkpoint, 10 to 90 (default 75).
    #[arg(long, value_name = "PERCENT")]
    pub dirty_percent: Option<u8>,
    /// Run pagewise with the configuration `pagewise tune DIR` chose
    /// (DIR/tuned.json): its page size, and its tree kind for the engine
    /// `pagewise` (a tuned B-epsilon tree runs as `pagewise-bepsilon` with the
    /// tuned node, leaf, basement and fanout). The cache stays --cache.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["page_size", "bepsilon_node", "bepsilon_leaf", "bepsilon_basement", "bepsilon_fanout", "bepsilon_value_extent"])]
    pub tuned: Option<PathBuf>,
    /// Work directory: loop images and mount points (or plain run directories).
    #[arg(long, default_value = "/var/tmp/pagewise-bench")]
    pub dir: PathBuf,
    /// Do not use a loop device: measure only the syscall write figure.
    #[arg(long)]
    pub no_loop: bool,
    /// Size of each run's sparse loop image.
    #[arg(long, default_value = "48G", value_parser = size)]
    pub image_size: u64,
    /// How phases whose cache is smaller than the Db keep the OS from caching
    /// the rest: cgroup (cap the process's memory, page cache and mapped pages
    /// included; root), fadvise (drop the Db's cached pages every 100 ms; cannot
    /// evict LMDB's map), or auto (cgroup where possible, else fadvise).
    #[arg(long, default_value = "auto")]
    pub memory_cap: CapChoice,
    /// Which phases the memory cap applies to: all (every phase, fills and
    /// iiBench included, at the engine's cache + slack, so an engine living in
    /// the OS page cache gets no more memory than one with its own buffer
    /// pool; needs a memory cgroup, i.e. root) or small-cache (only phases
    /// whose cache= is smaller than the Db, e.g. the 5%-cache reads).
    #[arg(long, default_value = "all")]
    pub cap_phases: CapScope,
    /// Put each engine's Db on an emulated compressing drive: a FUSE mount
    /// (over the run's loop filesystem) that meters, per 4 KiB block written,
    /// the bytes a drive with in-storage compression would store (zlib-class
    /// and lz4); results gain "WA csd" columns. Needs /dev/fuse and root (or
    /// fusermount3 from the fuse3 package).
    #[arg(long)]
    pub csd: bool,
    /// Append JSON lines here.
    #[arg(short, long, default_value = "bench-results.jsonl")]
    pub out: PathBuf,
    /// Print JSON lines on stdout instead of the table (no progress bars).
    #[arg(long)]
    pub json: bool,
}

fn count(s: &str) -> Result<u64, String> {
    parse_count(s).ok_or_else(|| format!("{s:?} is not a count (e.g. 1000000, 5M)"))
}
fn size(s: &str) -> Result<u64, String> {
    parse_size(s).ok_or_else(|| format!("{s:?} is not a size (e.g. 4096, 64M, 1G)"))
}
fn size_u32(s: &str) -> Result<u32, String> {
    let n = size(s)?;
    u32::try_from(n).map_err(|_| format!("{s:?} is too large: at most 4G - 1 bytes (e.g. 64K, 1M)"))
}
/// `--bepsilon-value-extent`: a size, or `off` (None).
#[derive(Debug, Clone, Copy)]
pub struct ValueExtent(Option<u32>);

fn size_or_off(s: &str) -> Result<ValueExtent, String> {
    if s == "off" {
        return Ok(ValueExtent(None));
    }
    size_u32(s).map(|n| ValueExtent(Some(n)))
}
fn duration(s: &str) -> Result<std::time::Duration, String> {
    parse_duration(s).ok_or_else(|| format!("{s:?} is not a duration (e.g. 30s, 2m)"))
}
fn dist(s: &str) -> Result<KeyDist, String> {
    parse_dist(s).ok_or_else(|| format!("{s:?}: use uniform, zipf[=theta] or latest[=theta]"))
}
fn sync_policy(s: &str) -> Result<SyncPolicy, String> {
    match s {
        "off" => Ok(SyncPolicy::Off),
        "batch" | "every-batch" | "on" => Ok(SyncPolicy::EveryBatch),
        _ => Err(format!("{s:?}: use off or batch")),
    }
}

/// A progress bar per phase on stderr.
struct Bar {
    bar: ProgressBar,
    engine: String,
}

impl Progress for Bar {
    fn start(&self, label: &str, total: u64) {
        self.bar.reset();
        self.bar.set_length(total);
        self.bar.set_message(format!("{} {label}", self.engine));
    }
    fn inc(&self, n: u64) {
        self.bar.inc(n);
    }
    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

fn params(a: &Args) -> Params {
    Params {
        keys: a.keys,
        key_size: a.key_size,
        value_size: a.value_size,
        values: a.values,
        dist: a.dist,
        threads: a.threads.max(1),
        ops: a.ops,
        duration: a.duration,
        batch: a.batch.max(1),
        multiget: a.multiget.max(1),
        scan_len: a.scan_len.max(1),
        cache: None,
        seed: a.seed,
        warm: false,
        view_reads: pagewise_bench::workload::DEFAULT_VIEW_READS,
        txn_reads: pagewise_bench::workload::DEFAULT_TXN_READS,
        txn_writes: pagewise_bench::workload::DEFAULT_TXN_WRITES,
    }
}

/// The engines' settings from the flags (and `--tuned`), checked before
/// anything runs.
fn settings(a: &Args, tuned: Option<&pagewise::Tuned>) -> anyhow::Result<Settings> {
    let mut settings = Settings {
        cache_bytes: a.cache,
        compression: a.compression,
        sync: a.sync,
        direct_io: a.direct,
        page_size: a.page_size.map(|p| p as usize),
        bepsilon_node_bytes: a.bepsilon_node,
        bepsilon_leaf_bytes: a.bepsilon_leaf,
        bepsilon_basement_bytes: a.bepsilon_basement,
        bepsilon_fanout: a.bepsilon_fanout,
        bepsilon_value_extent: a.bepsilon_value_extent.map(|v| v.0),
        delta_threshold_bytes: a.delta_threshold.map(|t| t as usize),
        wal_limit_bytes: a.wal_limit,
        dirty_percent: a.dirty_percent,
    };
    if let Some(t) = tuned {
        settings.page_size = Some(t.page_size);
        if let Some(b) = t.bepsilon {
            settings.bepsilon_node_bytes = Some(b.node_bytes);
            settings.bepsilon_leaf_bytes = b.leaf_bytes.or(Some(b.node_bytes));
            settings.bepsilon_basement_bytes = Some(b.basement_bytes);
            settings.bepsilon_fanout = Some(b.fanout);
        }
    }
    settings.validate()?;
    Ok(settings)
}

/// Notes flags that none of the chosen engines reads.
fn note_unused_flags(a: &Args, engines: &[String]) {
    let has = |names: &[&str]| engines.iter().any(|e| names.contains(&e.as_str()));
    let bepsilon = a.bepsilon_node.is_some()
        || a.bepsilon_leaf.is_some()
        || a.bepsilon_basement.is_some()
        || a.bepsilon_fanout.is_some()
        || a.bepsilon_value_extent.is_some();
    if bepsilon && !has(&["pagewise-bepsilon", "pagewise-beps"]) {
        eprintln!(
            "note: --bepsilon-* apply to pagewise-bepsilon only, which this run does not include"
        );
    }
    if a.delta_threshold.is_some() && !has(&["pagewise-delta"]) {
        eprintln!("note: --delta-threshold applies to pagewise-delta only, which this run does not include");
    }
    let pagewise = [
        "pagewise",
        "pagewise-bepsilon",
        "pagewise-beps",
        "pagewise-delta",
    ];
    if (a.wal_limit.is_some() || a.dirty_percent.is_some()) && !has(&pagewise) {
        eprintln!("note: --wal-limit and --dirty-percent apply to the pagewise engines only, which this run does not include");
    }
}

/// The engines to run; with a tuned B-epsilon configuration the engine
/// `pagewise` runs as `pagewise-bepsilon` (said on stderr).
fn engines(a: &Args, tuned: Option<&pagewise::Tuned>) -> anyhow::Result<Vec<String>> {
    let compiled = compiled_engines();
    let mut out = Vec::new();
    for e in &a.engine {
        if e == "all" {
            out.extend(compiled.iter().map(|s| s.to_string()));
        } else {
            out.push(e.clone());
        }
    }
    if tuned.is_some_and(|t| t.tree_kind == pagewise::TunedKind::Bepsilon) {
        for e in out.iter_mut().filter(|e| *e == "pagewise") {
            eprintln!("note: the tuned configuration is a B-epsilon tree: engine pagewise runs as pagewise-bepsilon");
            *e = "pagewise-bepsilon".into();
        }
    }
    Ok(out)
}

pub fn run(a: Args) -> anyhow::Result<()> {
    if a.key_size < pagewise_bench::keys::MIN_KEY_SIZE {
        bail!(
            "--key-size {} is too small: keys hold an 8-byte number, use 8 or more",
            a.key_size
        );
    }
    crate::signals::install_stop();
    let base = params(&a);
    let specs: Vec<Spec> = a
        .workloads
        .iter()
        .flat_map(|w| w.split_whitespace())
        .map(|w| Spec::parse(w, &base))
        .collect::<Result<_, _>>()?;
    if specs.is_empty() {
        bail!("no workloads given: use e.g. -w fillrandom -w readrandom");
    }
    let tuned = a.tuned.as_deref().map(pagewise::Tuned::load).transpose()?;
    let settings = settings(&a, tuned.as_ref())?;
    let measure = if a.no_loop {
        Measure::Plain { dir: a.dir.clone() }
    } else {
        Measure::Loop {
            work_dir: a.dir.clone(),
            image_bytes: a.image_size,
        }
    };
    if a.csd {
        if let Some(why) = pagewise_bench::csd::unavailable_reason() {
            bail!("--csd needs a FUSE mount: {why}");
        }
    }
    if !a.no_loop {
        if let Some(why) = pagewise_bench::loopfs::unavailable_reason() {
            eprintln!("note: no loop device ({why}); reporting the syscall write figure only");
        }
    }
    // Before anything the runs allocate: memory stays charged where it was first touched.
    let capped = a.cap_phases == CapScope::All || specs.iter().any(|s| s.params.cache.is_some());
    let mut limiter = CacheLimiter::new(a.memory_cap, capped)?;
    if let Some(why) = limiter.fallback() {
        eprintln!("note: memory cgroup not usable ({why}); capped phases trim the page cache with fadvise instead (LMDB's mapped pages stay cached)");
    }
    let command: String = std::env::args().collect::<Vec<_>>().join(" ");
    let mut out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&a.out)
        .with_context(|| format!("cannot open results file {}", a.out.display()))?;
    let show = !a.json && std::io::stderr().is_terminal();
    if !a.json {
        println!("{}", header());
    }
    let mut failed = Vec::new();
    let engines = engines(&a, tuned.as_ref())?;
    note_unused_flags(&a, &engines);
    for engine in engines {
        let bar = ProgressBar::with_draw_target(
            None,
            if show {
                ProgressDrawTarget::stderr()
            } else {
                ProgressDrawTarget::hidden()
            },
        );
        bar.set_style(
            ProgressStyle::with_template("{msg:28} [{bar:30}] {pos}/{len} {per_sec} eta {eta}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        let progress = Bar {
            bar,
            engine: engine.clone(),
        };
        let cfg = RunConfig {
            engine: engine.clone(),
            settings: settings.clone(),
            specs: specs.clone(),
            measure: measure.clone(),
            csd: a.csd,
            cap_scope: a.cap_phases,
        };
        let outcome =
            pagewise_bench::run_with(&cfg, &mut limiter, &progress, &mut |r: &PhaseResult| {
                let mut v = serde_json::to_value(r).expect("results serialise");
                v["command"] = serde_json::Value::String(command.clone());
                let line = serde_json::to_string(&v).expect("results serialise");
                writeln!(out, "{line}").map_err(|e| pagewise_bench::BenchError::Os {
                    what: "append results".into(),
                    path: a.out.clone(),
                    source: e,
                })?;
                if a.json {
                    println!("{line}");
                } else {
                    println!("{}", row(r));
                }
                Ok(())
            })
            .with_context(|| format!("engine {engine}"));
        // One engine failing must not cost the others' results.
        if pagewise_bench::interrupted() {
            bail!(
                "interrupted during engine {engine}: completed phases are in {}; the run's loop device and image were removed",
                a.out.display()
            );
        }
        if let Err(e) = outcome {
            eprintln!("error: {e:#}");
            failed.push(engine.clone());
        }
    }
    if !a.json {
        eprintln!(
            "results appended to {}; render with `pagewise bench report {} -o report.html`",
            a.out.display(),
            a.out.display()
        );
    }
    if !failed.is_empty() {
        bail!(
            "engines that failed (phases they completed are in the results): {}",
            failed.join(", ")
        );
    }
    Ok(())
}

fn header() -> String {
    format!(
        "{:<9} {:<28} {:>11} {:>9} {:>9} {:>7} {:>7} {:>8} {:>7} {:>9}",
        "engine", "workload", "ops/s", "p50", "p99", "WA dev", "WA sys", "WA csd", "SA", "db size"
    )
}

fn opt(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.2}"))
}

pub fn ns(v: u64) -> String {
    match v {
        0..=9_999 => format!("{v}ns"),
        10_000..=9_999_999 => format!("{:.1}us", v as f64 / 1e3),
        _ => format!("{:.1}ms", v as f64 / 1e6),
    }
}

pub fn mib(v: u64) -> String {
    format!("{:.1}MiB", v as f64 / (1 << 20) as f64)
}

fn row(r: &PhaseResult) -> String {
    let mut line = row_figures(r);
    if let Some(w) = r.side_writes_per_s {
        line += &format!("  writes beside the reads: {w:.0}/s");
    }
    if let Some(c) = r.conflicts {
        line += &format!("  conflicts: {c}");
    }
    line
}

fn row_figures(r: &PhaseResult) -> String {
    format!(
        "{:<9} {:<28} {:>11.0} {:>9} {:>9} {:>7} {:>7} {:>8} {:>7} {:>9}",
        r.engine,
        r.spec,
        r.ops_per_s,
        ns(r.latency.p50_ns),
        ns(r.latency.p99_ns),
        opt(r.write_amp_device),
        opt(r.write_amp_syscall),
        opt(r.write_amp_csd_zlib),
        opt(r.space_amp),
        mib(r.db_bytes)
    )
}
