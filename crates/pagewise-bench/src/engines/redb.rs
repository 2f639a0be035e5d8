//! redb (pure Rust copy-on-write B-tree). One redb table per bench table.
//! Sync off: commits with `Durability::None`, except every
//! [`DURABLE_EVERY`]th batch, and one `Immediate` commit at sync. redb frees
//! pages only at durable commits, so with `None` alone the file grows without
//! bound (measured: 28x space amplification on a 100k-key fill).

use crate::engine::{Engine, ReadView, Settings, SyncPolicy, TxnDone, TxnWrites, Visit, WriteOp};
use crate::{BenchError, Result};
use redb::{
    Database, Durability, ReadOnlyTable, ReadTransaction, ReadableTable, TableDefinition,
    WriteTransaction,
};
use std::cell::OnceCell;
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

impl RedbEngine {
    /// A write transaction with the durability of the sync policy (with
    /// sync off, every [`DURABLE_EVERY`]th one durable).
    fn begin_write(&self) -> Result<WriteTransaction> {
        let mut txn = self.db.begin_write().map_err(err)?;
        let n = self
            .batches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if self.sync == SyncPolicy::Off && !(n + 1).is_multiple_of(DURABLE_EVERY) {
            txn.set_durability(Durability::None);
        }
        Ok(txn)
    }
}

type View = ReadOnlyTable<&'static [u8], &'static [u8]>;

/// A redb read transaction over every table.
struct RedbView<'a> {
    txn: ReadTransaction,
    names: &'a [String],
    open: Vec<OnceCell<View>>,
}

impl ReadView for RedbView<'_> {
    fn get(&self, table: usize, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let t = match self.open[table].get() {
            Some(t) => t,
            None => {
                let t = self.txn.open_table(def(&self.names[table])).map_err(err)?;
                self.open[table].get_or_init(|| t)
            }
        };
        Ok(t.get(key).map_err(err)?.map(|g| g.value().to_vec()))
    }
}

impl Engine for RedbEngine {
    fn name(&self) -> &'static str {
        NAME
    }

    fn version(&self) -> String {
        format!("redb 2.6.4 (sync off: every {DURABLE_EVERY}th commit durable so pages are freed)")
    }

    fn write_batch(&self, ops: Vec<WriteOp>) -> Result<()> {
        let txn = self.begin_write()?;
        {
            let mut open: Vec<Option<redb::Table<&[u8], &[u8]>>> =
                (0..self.tables.len()).map(|_| None).collect();
            for op in &ops {
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

    /// A read transaction; each table is opened on its first read.
    fn read_view(&self) -> Result<Box<dyn ReadView + '_>> {
        Ok(Box::new(RedbView {
            txn: self.db.begin_read().map_err(err)?,
            names: &self.tables,
            open: (0..self.tables.len()).map(|_| OnceCell::new()).collect(),
        }))
    }

    /// A write transaction (redb runs one at a time: no conflicts), made
    /// durable as the batches are.
    fn transact(&self, table: usize, reads: &[Vec<u8>], writes: &TxnWrites) -> Result<TxnDone> {
        let txn = self.begin_write()?;
        let mut found = 0;
        {
            let mut t = txn.open_table(def(&self.tables[table])).map_err(err)?;
            for k in reads {
                found += u64::from(t.get(k.as_slice()).map_err(err)?.is_some());
            }
            for (k, v) in writes {
                t.insert(k.as_slice(), v.as_slice()).map_err(err)?;
            }
        }
        txn.commit().map_err(err)?;
        Ok(TxnDone {
            found,
            conflicts: 0,
        })
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
