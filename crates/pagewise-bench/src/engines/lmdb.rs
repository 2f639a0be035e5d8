//! LMDB through heed: memory-mapped copy-on-write B+tree. LMDB has no cache
//! of its own (the OS page cache is its cache), no compression and no direct I/O.
//! Sync off: the env is opened with NO_SYNC and `force_sync` runs at sync.
//! Always NO_READ_AHEAD (MDB_NORDAHEAD), LMDB's own advice for random access
//! to a map larger than the memory it may use: without it each page fault
//! reads the device's whole read-ahead window (2.5 MiB on our loop devices)
//! and, under a 5%-of-the-Db memory cap, evicts most of what was cached.

use crate::engine::{Engine, ReadView, Settings, SyncPolicy, TxnDone, TxnWrites, Visit, WriteOp};
use crate::{BenchError, Result};
use heed::types::Bytes;
use heed::{Database, Env, EnvFlags, EnvOpenOptions, RoTxn};
use std::ops::Bound;
use std::path::Path;

const NAME: &str = "lmdb";
/// Address space reserved for the map; the file grows only as pages are used.
const MAP_SIZE: usize = 256 << 30;

pub struct LmdbEngine {
    /// Always `Some` until dropped (see the `Drop` impl).
    env: Option<Env>,
    dbs: Vec<Database<Bytes, Bytes>>,
}

fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError::engine(NAME, e)
}

pub fn open(dir: &Path, s: &Settings, tables: &[&str]) -> Result<Box<dyn Engine>> {
    let mut o = EnvOpenOptions::new();
    o.map_size(MAP_SIZE).max_dbs(tables.len() as u32 + 1);
    // SAFETY: NO_READ_AHEAD only changes the madvise hint on the map.
    unsafe { o.flags(EnvFlags::NO_READ_AHEAD) };
    if s.sync == SyncPolicy::Off {
        // SAFETY: NO_SYNC only weakens durability, which the harness restores with force_sync.
        unsafe { o.flags(EnvFlags::NO_SYNC) };
    }
    // SAFETY: the directory is private to this run; no other process maps it.
    let env = unsafe { o.open(dir) }.map_err(err)?;
    let mut txn = env.write_txn().map_err(err)?;
    let mut dbs = Vec::new();
    for t in tables {
        dbs.push(
            env.create_database::<Bytes, Bytes>(&mut txn, Some(t))
                .map_err(err)?,
        );
    }
    txn.commit().map_err(err)?;
    Ok(Box::new(LmdbEngine {
        env: Some(env),
        dbs,
    }))
}

impl Engine for LmdbEngine {
    fn name(&self) -> &'static str {
        NAME
    }

    fn version(&self) -> String {
        "heed 0.20.5 (lmdb-master-sys 0.2.6)".into()
    }

    fn write_batch(&self, ops: Vec<WriteOp>) -> Result<()> {
        let mut txn = self.env().write_txn().map_err(err)?;
        for op in &ops {
            match op {
                WriteOp::Put { table, key, value } => {
                    self.dbs[*table].put(&mut txn, key, value).map_err(err)?
                }
                WriteOp::Delete { table, key } => {
                    self.dbs[*table].delete(&mut txn, key).map_err(err)?;
                }
            }
        }
        txn.commit().map_err(err)
    }

    fn get(&self, table: usize, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let txn = self.env().read_txn().map_err(err)?;
        Ok(self.dbs[table]
            .get(&txn, key)
            .map_err(err)?
            .map(<[u8]>::to_vec))
    }

    fn multi_get(&self, table: usize, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        let txn = self.env().read_txn().map_err(err)?;
        keys.iter()
            .map(|k| {
                Ok(self.dbs[table]
                    .get(&txn, k)
                    .map_err(err)?
                    .map(<[u8]>::to_vec))
            })
            .collect()
    }

    /// A read transaction (MVCC: it never waits for the writer).
    fn read_view(&self) -> Result<Box<dyn ReadView + '_>> {
        Ok(Box::new(LmdbView {
            txn: self.env().read_txn().map_err(err)?,
            dbs: &self.dbs,
        }))
    }

    /// A write transaction: LMDB runs one at a time, so none conflicts.
    fn transact(&self, table: usize, reads: &[Vec<u8>], writes: &TxnWrites) -> Result<TxnDone> {
        let db = &self.dbs[table];
        let mut txn = self.env().write_txn().map_err(err)?;
        let mut found = 0;
        for k in reads {
            found += u64::from(db.get(&txn, k).map_err(err)?.is_some());
        }
        for (k, v) in writes {
            db.put(&mut txn, k, v).map_err(err)?;
        }
        txn.commit().map_err(err)?;
        Ok(TxnDone {
            found,
            conflicts: 0,
        })
    }

    fn scan(&self, table: usize, start: &[u8], limit: usize, visit: Visit) -> Result<usize> {
        let txn = self.env().read_txn().map_err(err)?;
        // LMDB rejects a zero-length key, even as a range bound.
        let lo = if start.is_empty() {
            Bound::Unbounded
        } else {
            Bound::Included(start)
        };
        let range = (lo, Bound::Unbounded);
        let mut n = 0;
        for item in self.dbs[table]
            .range(&txn, &range)
            .map_err(err)?
            .take(limit)
        {
            let (k, v) = item.map_err(err)?;
            n += 1;
            if !visit(k, v) {
                break;
            }
        }
        Ok(n)
    }

    fn sync(&self) -> Result<()> {
        self.env().force_sync().map_err(err)
    }

    fn close(self: Box<Self>) -> Result<Option<serde_json::Value>> {
        self.env().force_sync().map_err(err)?;
        // Dropping closes the environment.
        Ok(None)
    }
}

/// An LMDB read transaction over every table.
struct LmdbView<'a> {
    txn: RoTxn<'a>,
    dbs: &'a [Database<Bytes, Bytes>],
}

impl ReadView for LmdbView<'_> {
    fn get(&self, table: usize, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.dbs[table]
            .get(&self.txn, key)
            .map_err(err)?
            .map(<[u8]>::to_vec))
    }
}

impl LmdbEngine {
    fn env(&self) -> &Env {
        self.env
            .as_ref()
            .expect("the environment is open until the engine is dropped")
    }
}

impl Drop for LmdbEngine {
    /// heed keeps every opened environment in a process-wide registry, so
    /// dropping the last handle does not close it: an engine dropped without
    /// `close` (a phase stopped by Ctrl-C) kept its files open and the run's
    /// mount busy. Closing here covers both paths.
    fn drop(&mut self) {
        if let Some(env) = self.env.take() {
            env.prepare_for_closing().wait();
        }
    }
}
