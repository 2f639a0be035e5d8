//! redb (pure Rust copy-on-write B-tree). One redb table per bench table.
//! Sync off: commits with `Durability::None`, except every
//! [`DURABLE_EVERY`]th batch, and one `Immediate` commit at sync. redb frees
//! pages only at durable commits, so with `None` alone the file grows without
//! bound (measured: 28x space amplification on a 100k-key fill).

use crate::engine::{Engine, Settings, SyncPolicy, Visit, WriteOp};
use crate::{BenchError, Result};
use redb::{Database, Durability, TableDefinition};
use std::path::Path;

const NAME: &str = "redb";
/// With sync off, one batch in this many commits durably so pages get freed.
pub const DURABLE_EVERY: u64 = 8;

pub struct RedbEngine {
    db: Database,
    tables: Vec<String>,
    sync: SyncPolicy,
    batches: std::sync::atomic::AtomicU64,
}

fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError::engine(NAME, e)
}

fn def(name: &str) -> TableDefinition<'_, &'static [u8], &'static [u8]> {
    TableDefinition::new(name)
}

pub fn open(dir: &Path, s: &Settings, tables: &[&str]) -> Result<Box<dyn Engine>> {
    let db = Database::builder()
        .set_cache_size(s.cache_bytes as usize)
        .create(dir.join("bench.redb"))
        .map_err(err)?;
    let txn = db.begin_write().map_err(err)?;
    for t in tables {
        txn.open_table(def(t)).map_err(err)?;
    }
    txn.commit().map_err(err)?;
    Ok(Box::new(RedbEngine {
        db,
        tables: tables.iter().map(|t| t.to_string()).collect(),
        sync: s.sync,
        batches: Default::default(),
    }))
}

impl Engine for RedbEngine {
    fn name(&self) -> &'static str {
        NAME
    }

    fn version(&self) -> String {
        format!("redb 2.6.4 (sync off: every {DURABLE_EVERY}th commit durable so pages are freed)")
    }

    fn write_batch(&self, ops: &[WriteOp]) -> Result<()> {
        let mut txn = self.db.begin_write().map_err(err)?;
        let n = self
            .batches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if self.sync == SyncPolicy::Off && !(n + 1).is_multiple_of(DURABLE_EVERY) {
            txn.set_durability(Durability::None);
        }
        {
            let mut open: Vec<Option<redb::Table<&[u8], &[u8]>>> =
                (0..self.tables.len()).map(|_| None).collect();
            for op in ops {
                let t = match op {
                    WriteOp::Put { table, .. } | WriteOp::Delete { table, .. } => *table,
                };
                if open[t].is_none() {
                    open[t] = Some(txn.open_table(def(&self.tables[t])).map_err(err)?);
                }
                let table = open[t].as_mut().expect("opened above");
                match op {
                    WriteOp::Put { key, value, .. } => {
                        table
                            .insert(key.as_slice(), value.as_slice())
                            .map_err(err)?;
                    }
                    WriteOp::Delete { key, .. } => {
                        table.remove(key.as_slice()).map_err(err)?;
                    }
                }
            }
        }
        txn.commit().map_err(err)
    }

    fn get(&self, table: usize, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let txn = self.db.begin_read().map_err(err)?;
        let t = txn.open_table(def(&self.tables[table])).map_err(err)?;
        Ok(t.get(key).map_err(err)?.map(|g| g.value().to_vec()))
    }

    fn multi_get(&self, table: usize, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        let txn = self.db.begin_read().map_err(err)?;
        let t = txn.open_table(def(&self.tables[table])).map_err(err)?;
        keys.iter()
            .map(|k| {
                Ok(t.get(k.as_slice())
                    .map_err(err)?
                    .map(|g| g.value().to_vec()))
            })
            .collect()
    }

    fn scan(&self, table: usize, start: &[u8], limit: usize, visit: Visit) -> Result<usize> {
        let txn = self.db.begin_read().map_err(err)?;
        let t = txn.open_table(def(&self.tables[table])).map_err(err)?;
        let mut n = 0;
        for item in t.range(start..).map_err(err)?.take(limit) {
            let (k, v) = item.map_err(err)?;
            n += 1;
            if !visit(k.value(), v.value()) {
                break;
            }
        }
        Ok(n)
    }

    fn sync(&self) -> Result<()> {
        // An Immediate commit makes every earlier Durability::None commit durable.
        let mut txn = self.db.begin_write().map_err(err)?;
        txn.set_durability(Durability::Immediate);
        txn.commit().map_err(err)
    }

    fn close(self: Box<Self>) -> Result<Option<serde_json::Value>> {
        self.sync()?;
        drop(self.db);
        Ok(None)
    }
}
