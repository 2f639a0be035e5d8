//! `pagewise stress DIR`: kill a real loader process at random moments,
//! during checkpoints and during recovery, and verify the database against
//! an expected-state file after every kill; or (`--soak`) run a long load
//! without kills and watch memory and file sizes.

pub mod child;
mod child_proc;
mod expected;
mod kill;
mod soak;
mod value;
mod verify;
mod workers;

use anyhow::{bail, Result};
use pagewise::{DeltaFlush, Durability, Options};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub const DB_FILE: &str = "stress.pw";
pub const EXPECTED_FILE: &str = "expected.log";

/// The database and load shape, shared by the parent and its children.
#[derive(clap::Args, Clone, Debug)]
pub struct Shape {
    /// Tree kinds to test, comma-separated, trees of every kind in one Db and
    /// in the same batches: `btree`, `bepsilon` (with upserts through a merge
    /// operator) and `delta` (B+trees with delta flushes; the engine sets
    /// those per Db, so with both `btree` and `delta` each child opens the Db
    /// with delta flushes on or off at random, seeded).
    #[arg(long, default_value = "btree,bepsilon,delta")]
    pub kinds: String,
    /// Trees per kind.
    #[arg(long, default_value_t = 3)]
    pub trees: u32,
    /// Keys per tree (bounded, so overwrites and removes hit).
    #[arg(long, default_value_t = 2000)]
    pub keys: u32,
    /// Writer threads (each owns the keys with index % writers == its number).
    #[arg(long, default_value_t = 2)]
    pub writers: u32,
    /// Reader threads.
    #[arg(long, default_value_t = 2)]
    pub readers: u32,
    #[arg(long, default_value_t = 4096)]
    pub page_size: usize,
    /// Page cache in KiB (small, so pages are evicted and re-read).
    #[arg(long, default_value_t = 1024)]
    pub cache_kib: usize,
    /// Checkpoint when the log reaches this many KiB (at least 64).
    #[arg(long, default_value_t = 256)]
    pub wal_limit_kib: u64,
    /// Percent of writes that are removes.
    #[arg(long, default_value_t = 30)]
    pub remove_pct: u32,
    /// Percent of batches committed as transactions that first read every
    /// key they write (writers own disjoint keys, so none may conflict).
    #[arg(long, default_value_t = 30)]
    pub txn_pct: u32,
    /// Bypass O_DIRECT (use the page cache).
    #[arg(long)]
    pub no_direct: bool,
    /// Open the Db with delta flushes (set per child by the parent).
    #[arg(long, hide = true)]
    pub delta_flush: bool,
}

impl Shape {
    pub fn layout(&self) -> Result<value::Layout> {
        let kinds = value::parse_kinds(&self.kinds).map_err(anyhow::Error::msg)?;
        if self.trees == 0 || self.trees as usize * kinds.len() > 200 {
            bail!(
                "--trees must be 1..=200 in total (got {} per kind)",
                self.trees
            );
        }
        if !(1..=16).contains(&self.writers) || self.keys < self.writers || self.keys > 9_999_999 {
            bail!("--writers must be 1..=16 and --keys between --writers and 9999999");
        }
        if self.remove_pct > 100 || self.txn_pct > 100 {
            bail!("--remove-pct and --txn-pct are percentages (0..=100)");
        }
        Ok(value::Layout::new(
            &kinds,
            self.trees,
            self.keys,
            self.writers,
            self.page_size,
        ))
    }

    /// The Db's options. Delta flushes: a small threshold, so nodes are
    /// consolidated often, in blocks of two sectors, so a block can tear.
    pub fn options(&self) -> Options {
        let delta = DeltaFlush {
            threshold_bytes: 500,
            block_bytes: self.page_size.min(1024),
        };
        Options::default()
            .page_size(self.page_size)
            .cache_bytes(self.cache_kib << 10)
            .wal_limit(self.wal_limit_kib << 10)
            .durability(Durability::Sync)
            .direct_io(!self.no_direct)
            .delta_flush(self.delta_flush.then_some(delta))
            .merge_operator(Arc::new(value::StressMerge))
    }

    /// The same shape as command-line arguments for a child.
    pub fn to_args(&self) -> Vec<String> {
        let mut v: Vec<String> = [
            ("--kinds", self.kinds.clone()),
            ("--trees", self.trees.to_string()),
            ("--keys", self.keys.to_string()),
            ("--writers", self.writers.to_string()),
            ("--readers", self.readers.to_string()),
            ("--page-size", self.page_size.to_string()),
            ("--cache-kib", self.cache_kib.to_string()),
            ("--wal-limit-kib", self.wal_limit_kib.to_string()),
            ("--remove-pct", self.remove_pct.to_string()),
            ("--txn-pct", self.txn_pct.to_string()),
        ]
        .into_iter()
        .flat_map(|(k, v)| [k.to_string(), v])
        .collect();
        if self.no_direct {
            v.push("--no-direct".into());
        }
        if self.delta_flush {
            v.push("--delta-flush".into());
        }
        v
    }
}

#[derive(clap::Args)]
pub struct Args {
    /// Directory for the run's files (created; must not hold an earlier run).
    pub dir: PathBuf,
    #[command(flatten)]
    pub shape: Shape,
    /// Stop after this long (e.g. 45s, 30m, 2h). Default 60s unless --kills is given.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Stop after this many kills (whichever of --duration and --kills comes first).
    #[arg(long)]
    pub kills: Option<u64>,
    /// Seed for the load and the kill schedule (printed at start).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Longest random delay before a kill, in ms.
    #[arg(long, default_value_t = 400)]
    pub max_delay_ms: u64,
    /// Run a soak instead: no kills, steady churn, RSS and file sizes watched.
    #[arg(long)]
    pub soak: bool,
    /// Soak: RSS may exceed the cache budget (cache + a quarter for dirty pages) by this many MiB.
    #[arg(long, default_value_t = 64)]
    pub rss_slack_mib: u64,
    /// Print a JSON summary on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Make the children break the contract on purpose (tests of the verifier).
    #[arg(long, value_enum, default_value = "none", hide = true)]
    pub sabotage: workers::Sabotage,
}

/// Parses `500ms`, `45s`, `30m`, `2h` or a plain number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (e.g. 45s, 30m, 2h)"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "" | "s" => n,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        _ => {
            return Err(format!(
                "unknown unit {unit:?} in {s:?} (use ms, s, m or h)"
            ))
        }
    };
    if !(0.0..=30.0 * 86400.0).contains(&secs) {
        return Err(format!("{s:?} is out of range (at most 30 days)"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Creates DIR (or accepts an empty one); refuses one holding a run.
fn prepare_dir(dir: &std::path::Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("creating {}: {e}", dir.display()))?;
    for f in [DB_FILE, EXPECTED_FILE] {
        if dir.join(f).exists() {
            bail!(
                "{} already holds a stress run ({f}); pass a new or empty directory",
                dir.display()
            );
        }
    }
    Ok(())
}

pub fn run(a: Args) -> Result<()> {
    a.shape.layout()?;
    prepare_dir(&a.dir)?;
    let seed = a.seed.unwrap_or_else(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        t.as_nanos() as u64 ^ std::process::id() as u64
    });
    eprintln!("stress: seed {seed} (the load is seeded; kill timing is not reproducible)");
    if a.soak {
        soak::run(&a, seed)
    } else {
        kill::run(&a, seed)
    }
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("45s"), Ok(Duration::from_secs(45)));
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("").is_err());
    }
}
