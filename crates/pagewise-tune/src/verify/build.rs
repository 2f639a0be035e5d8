//! Building a verification Db: its files (removed on drop, so also after an
//! error or Ctrl-C), the sorted bulk load, and the reopen with the scaled cache.

use super::keys::{key, value};
use anyhow::Context;
use pagewise::{Batch, Db, Durability, Options};
use pagewise_io::Fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Records per load batch.
const LOAD_BATCH: u64 = 4096;
/// The tree every verification Db uses.
pub const TREE: &str = "verify";

/// The files of one verification Db (`PATH`, `PATH-wal`, `PATH-lock`):
/// removed when dropped, whatever happened in between.
pub struct DbFiles {
    pub path: PathBuf,
    fs: Arc<dyn Fs>,
}

impl DbFiles {
    /// `tag` names the run ("verify" or "calibrate").
    /// Requires: nothing exists at `path` (the caller picked a fresh name).
    pub fn new(dir: &Path, tag: &str, page: u64, fs: Arc<dyn Fs>) -> anyhow::Result<Self> {
        let path = dir.join(format!("pagewise-{tag}-{}-{page}.pw", std::process::id()));
        anyhow::ensure!(
            !fs.exists(&path),
            "{} already exists: remove it (a previous verification was killed) and run again",
            path.display()
        );
        Ok(Self { path, fs })
    }

    pub fn all(&self) -> [PathBuf; 3] {
        [
            self.path.clone(),
            pagewise::wal_path(&self.path),
            pagewise::lock_path(&self.path),
        ]
    }

    pub fn options(&self) -> Options {
        Options::default().fs(self.fs.clone())
    }
}

impl Drop for DbFiles {
    fn drop(&mut self) {
        for p in self.all() {
            if self.fs.exists(&p) {
                let _ = self.fs.remove(&p);
            }
        }
    }
}

/// What the bulk load built.
pub struct Loaded {
    pub rows: u64,
    pub secs: f64,
    /// The tree as built: height and leaf pages.
    pub height: u32,
    pub leaf_pages: u64,
}

/// Loads records 0..rows in key order in batches with buffered durability,
/// each full leaf split so it keeps `fill` of its page (clamped to the
/// engine's 0.5..1.0), stopping early at `limit` (time) or on Ctrl-C;
/// closes the Db.
pub fn load(
    files: &DbFiles,
    page: u64,
    rows: u64,
    key_bytes: u64,
    value_bytes: u64,
    limit: Duration,
    fill: f64,
) -> anyhow::Result<Loaded> {
    assert!(rows >= 1 && page.is_power_of_two());
    assert!(fill > 0.0 && fill <= 1.0);
    let opts = files
        .options()
        .page_size(page as usize)
        .append_fill(fill.clamp(0.5, 1.0))
        .cache_bytes(64 << 20)
        .durability(Durability::Buffered);
    let db = Db::create(&files.path, opts)
        .with_context(|| format!("cannot create {}", files.path.display()))?;
    let start = Instant::now();
    let mut done = 0u64;
    // Bounded: at most rows / LOAD_BATCH + 1 batches.
    while done < rows {
        if pagewise_probe::interrupted() {
            anyhow::bail!("interrupted: verification stopped, its files are removed");
        }
        if start.elapsed() >= limit && done > 0 {
            break;
        }
        let end = (done + LOAD_BATCH).min(rows);
        let mut b = Batch::new();
        for i in done..end {
            b.insert(TREE, key(2 * i, key_bytes), value(i, value_bytes));
        }
        db.apply(b).context("bulk load failed")?;
        done = end;
    }
    let tree = db.stats().trees.into_iter().find(|t| t.name == TREE);
    db.close().context("closing the loaded Db failed")?;
    let out = Loaded {
        rows: done,
        secs: start.elapsed().as_secs_f64(),
        height: tree.as_ref().map_or(1, |t| t.height),
        leaf_pages: tree.map_or(1, |t| t.leaf_pages.max(1)),
    };
    assert!(out.rows >= 1 && out.rows <= rows);
    Ok(out)
}

/// Reopens with direct I/O, buffered commits and `cache_bytes` of cache.
pub fn reopen(files: &DbFiles, cache_bytes: u64) -> anyhow::Result<Db> {
    let opts = files
        .options()
        .cache_bytes(cache_bytes as usize)
        .direct_io(true)
        .durability(Durability::Buffered);
    Db::open(&files.path, opts).with_context(|| format!("cannot reopen {}", files.path.display()))
}
