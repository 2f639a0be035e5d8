//! Online backup (docs/design.md, "Backup"): a consistent copy of a live
//! database, written from a snapshot while writers go on. The copy is a new
//! database of the same page size whose trees have the same kinds and
//! creation options and hold exactly the snapshot's entries (upserts
//! resolved), written in key order: compact, and checked by `check` like
//! any other file.

use crate::batch::Batch;
use crate::db::Db;
use crate::error::{Error, Result};
use crate::options::{Durability, Options};
use std::path::Path;
use std::time::{Duration, Instant};

/// Bytes of keys and values per batch written to the copy.
const BATCH_BYTES: usize = 4 << 20;

/// What [`Db::backup`] copied.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BackupReport {
    pub trees: usize,
    pub entries: u64,
    /// Key and value bytes copied.
    pub user_bytes: u64,
    /// Size of the copy's data file.
    pub file_bytes: u64,
    pub elapsed: Duration,
}

impl Db {
    /// Writes a consistent copy of the database, as of one snapshot taken
    /// now, to `path` (which must not exist; its log and lock files are
    /// created beside it). Writers are never stopped: they only pay for what
    /// they change while the snapshot lives. The copy is synced and closed
    /// before this returns; on an error a partial copy may remain at `path`.
    pub fn backup(&self, path: impl AsRef<Path>) -> Result<BackupReport> {
        let t0 = Instant::now();
        let path = path.as_ref();
        let snap = self.snapshot()?;
        let opts = Options::default()
            .page_size(self.inner.ix.store.page_size())
            .direct_io(self.inner.direct)
            .durability(Durability::Buffered)
            .fs(self.inner.fs.clone());
        let copy = Db::create(path, opts)?;
        let mut report = BackupReport {
            trees: 0,
            entries: 0,
            user_bytes: 0,
            file_bytes: 0,
            elapsed: Duration::ZERO,
        };
        for name in snap.tree_names() {
            let kind = snap.tree_kind(&name).ok_or_else(|| Error::Unsupported {
                what: format!("tree {name:?} vanished from its snapshot"),
            })?;
            let dst = copy.tree_with(&name, kind)?;
            let mut batch = Batch::new();
            for kv in snap.tree(&name)?.iter() {
                let (k, v) = kv?;
                report.entries += 1;
                report.user_bytes += (k.len() + v.len()) as u64;
                batch.insert(&dst, k, v);
                if batch.user_bytes() >= BATCH_BYTES {
                    copy.apply(std::mem::take(&mut batch))?;
                }
            }
            copy.apply(batch)?;
            report.trees += 1;
        }
        drop(snap);
        copy.sync()?;
        report.file_bytes = copy.stats().file_pages * copy.stats().page_size as u64;
        copy.close()?;
        report.elapsed = t0.elapsed();
        Ok(report)
    }
}
