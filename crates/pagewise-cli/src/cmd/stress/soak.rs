//! `pagewise stress DIR --soak`: a long load without kills — writers churn
//! a fixed key space (inserts, overwrites, removes), readers check every value
//! — while memory and file sizes are sampled once a second.
//!
//! Bounds (the run fails when one is exceeded):
//! * RSS <= cache budget + `--rss-slack-mib`, where the cache budget is
//!   `cache_bytes` for clean pages plus a quarter of it for dirty pages
//!   (at least 16 pages), as `Options::cache_bytes` documents;
//! * after the warm-up (the first fifth of the run, at least 10 s), the data
//!   file may not exceed twice its size at the end of the warm-up plus 4 MiB:
//!   the key space is fixed, so a file that keeps growing leaks pages;
//! * the log file stays under twice `wal_limit` plus 1 MiB (one checkpoint's
//!   worth, plus the largest group commit).
//!
//! At the end the database is compared with the in-memory model, closed,
//! reopened, compared again and checked.

use super::expected::Model;
use super::workers::{self, Counters, Load, MemJournal};
use super::{verify, Args, DB_FILE};
use anyhow::{bail, Context, Result};
use pagewise::Db;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;

#[derive(Debug, Default, serde::Serialize)]
pub struct SoakSummary {
    pub seed: u64,
    pub duration_s: f64,
    pub batches: u64,
    /// Batches of them committed as transactions.
    pub transactions: u64,
    pub reads: u64,
    /// Snapshot checks passed (a batch shown whole or not at all).
    pub snapshot_checks: u64,
    pub rss_max_bytes: u64,
    pub rss_bound_bytes: u64,
    pub db_bytes_at_warmup: u64,
    pub db_bytes_max: u64,
    pub db_bound_bytes: u64,
    pub wal_bytes_max: u64,
    pub wal_bound_bytes: u64,
    pub entries_final: u64,
    pub violations: u64,
    pub first_violation: Option<String>,
    /// Every 10 s: (seconds, RSS bytes, data file bytes, log file bytes).
    pub timeline: Vec<(u64, u64, u64, u64)>,
}

/// Resident set size of this process, from /proc/self/status (VmRSS).
pub fn rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

fn file_len(p: &std::path::Path) -> u64 {
    std::fs::metadata(p).map_or(0, |m| m.len())
}

struct Sampler {
    t0: Instant,
    warmup: Duration,
    last: Instant,
    db_path: std::path::PathBuf,
    wal_path: std::path::PathBuf,
    s: SoakSummary,
    problem: Option<String>,
}

impl Sampler {
    /// Takes one sample (at most once a second); records a broken bound.
    fn sample(&mut self, load: &Load) {
        if self.last.elapsed() < Duration::from_secs(1) {
            return;
        }
        self.last = Instant::now();
        let (rss, db, wal) = (
            rss_bytes(),
            file_len(&self.db_path),
            file_len(&self.wal_path),
        );
        let t = self.t0.elapsed();
        let s = &mut self.s;
        s.rss_max_bytes = s.rss_max_bytes.max(rss);
        s.wal_bytes_max = s.wal_bytes_max.max(wal);
        if t < self.warmup {
            s.db_bytes_at_warmup = db;
        } else {
            s.db_bound_bytes = 2 * s.db_bytes_at_warmup + 4 * MIB;
            s.db_bytes_max = s.db_bytes_max.max(db);
        }
        if t.as_secs() / 10 >= s.timeline.len() as u64 {
            s.timeline.push((t.as_secs(), rss, db, wal));
            let c = &load.counters;
            eprintln!(
                "soak: {:>6}s  batches {:>8}  reads {:>9}  RSS {:>6.1} MiB  data {:>6.1} MiB  log {:>6.0} KiB",
                t.as_secs(), c.batches.load(Ordering::Relaxed), c.reads.load(Ordering::Relaxed),
                rss as f64 / MIB as f64, db as f64 / MIB as f64, wal as f64 / 1024.0
            );
        }
        let broken = if rss > s.rss_bound_bytes {
            Some(format!(
                "RSS {rss} bytes exceeds the bound {}",
                s.rss_bound_bytes
            ))
        } else if t >= self.warmup && db > s.db_bound_bytes {
            Some(format!(
                "data file {db} bytes exceeds the bound {} (2 x {} at warm-up + 4 MiB)",
                s.db_bound_bytes, s.db_bytes_at_warmup
            ))
        } else if wal > s.wal_bound_bytes {
            Some(format!(
                "log file {wal} bytes exceeds the bound {}",
                s.wal_bound_bytes
            ))
        } else {
            None
        };
        if let Some(b) = broken {
            self.problem
                .get_or_insert(format!("at {}s: {b}", t.as_secs()));
        }
    }
}

pub fn run(a: &Args, seed: u64) -> Result<()> {
    let lay = a.shape.layout()?;
    let limit = a.duration.unwrap_or(Duration::from_secs(60));
    let mut shape = a.shape.clone();
    shape.delta_flush = lay.delta_flush(true);
    let opts = shape.options();
    let cache = (a.shape.cache_kib as u64) << 10;
    let dirty = (cache / 4).max(16 * a.shape.page_size as u64);
    let path = a.dir.join(DB_FILE);
    let db =
        Db::create(&path, opts.clone()).with_context(|| format!("creating {}", path.display()))?;
    let journal = Arc::new(MemJournal(Mutex::new(Model::new(lay.trees.len()))));
    let load = Arc::new(Load {
        trees: verify::create_trees(&db, &lay).map_err(anyhow::Error::msg)?,
        db,
        lay: lay.clone(),
        journal: journal.clone(),
        remove_pct: a.shape.remove_pct,
        txn_pct: a.shape.txn_pct,
        recent: Mutex::new(Default::default()),
        sabotage: Default::default(),
        stop: AtomicBool::new(false),
        counters: Counters::default(),
        failure: Mutex::new(None),
    });
    let mut smp = Sampler {
        t0: Instant::now(),
        warmup: (limit / 5).max(Duration::from_secs(10)),
        last: Instant::now() - Duration::from_secs(2),
        wal_path: pagewise::wal_path(&path),
        db_path: path.clone(),
        s: SoakSummary {
            seed,
            rss_bound_bytes: cache + dirty + a.rss_slack_mib * MIB,
            wal_bound_bytes: 2 * (a.shape.wal_limit_kib << 10).max(64 << 10) + MIB,
            ..Default::default()
        },
        problem: None,
    };
    let failure = workers::run(&load, a.shape.readers, false, seed, || {
        smp.sample(&load);
        smp.problem.is_some() || smp.t0.elapsed() >= limit
    });
    let mut s = std::mem::take(&mut smp.s);
    s.duration_s = smp.t0.elapsed().as_secs_f64();
    s.batches = load.counters.batches.load(Ordering::Relaxed);
    s.reads = load.counters.reads.load(Ordering::Relaxed);
    s.transactions = load.counters.transactions.load(Ordering::Relaxed);
    s.snapshot_checks = load.counters.snapshot_checks.load(Ordering::Relaxed);
    let mut problem = failure.or(smp.problem);
    if problem.is_none() {
        problem = final_verify(load, &journal, &lay, &path, &opts, &mut s).err();
    }
    s.violations = problem.is_some() as u64;
    s.first_violation = problem.clone();
    print_summary(&s, a.json)?;
    if let Some(p) = problem {
        bail!("soak: FAILED (seed {seed}): {p}");
    }
    Ok(())
}

/// Compares with the model, closes, reopens, compares again and checks.
fn final_verify(
    load: Arc<Load>,
    j: &MemJournal,
    lay: &super::value::Layout,
    path: &std::path::Path,
    opts: &pagewise::Options,
    s: &mut SoakSummary,
) -> Result<(), String> {
    let model = j.0.lock();
    if !model.pending.is_empty() {
        return Err(format!(
            "{} batches neither acknowledged nor failed",
            model.pending.len()
        ));
    }
    let load = Arc::into_inner(load).ok_or("worker threads still hold the database")?;
    verify::compare(&load.db, &load.trees, lay, &model)?;
    drop(load.trees);
    load.db.close().map_err(|e| format!("close: {e}"))?;
    let db = Db::open(path, opts.clone()).map_err(|e| format!("reopen: {e}"))?;
    let trees = verify::trees(&db, lay)?;
    s.entries_final = verify::compare(&db, &trees, lay, &model)?;
    verify::check(&db)?;
    db.close().map_err(|e| format!("close: {e}"))
}

fn print_summary(s: &SoakSummary, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(s)?);
        return Ok(());
    }
    let mib = |b: u64| b as f64 / MIB as f64;
    println!("seed             {}", s.seed);
    println!("duration         {:.1} s", s.duration_s);
    println!("batches / reads  {} / {}", s.batches, s.reads);
    println!(
        "RSS max          {:.1} MiB (bound {:.1} MiB)",
        mib(s.rss_max_bytes),
        mib(s.rss_bound_bytes)
    );
    println!(
        "data file        {:.1} MiB at warm-up, {:.1} MiB max after (bound {:.1} MiB)",
        mib(s.db_bytes_at_warmup),
        mib(s.db_bytes_max),
        mib(s.db_bound_bytes)
    );
    println!(
        "log file max     {:.2} MiB (bound {:.2} MiB)",
        mib(s.wal_bytes_max),
        mib(s.wal_bound_bytes)
    );
    println!("entries at end   {}", s.entries_final);
    println!("violations       {}", s.violations);
    Ok(())
}
