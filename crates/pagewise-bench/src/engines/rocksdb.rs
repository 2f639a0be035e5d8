//! RocksDB (LSM tree) through the `rocksdb` crate: one column family per table.
//! Block cache = the cache setting; compression none or LZ4; direct I/O for
//! reads and for flush/compaction when asked. Sync off: WAL written but not
//! fsync'd per batch (`flush_wal(true)` at sync); every-batch: `WriteOptions::set_sync`.
//!
//! Close flushes the memtables and then waits until no flush or compaction
//! is running or pending ([`RocksEngine::settle`]): the phase that wrote the
//! data pays for the compactions it caused (device bytes, close time), and
//! the next phase starts on a settled tree. Without the wait, the 5M-key
//! fill's compactions ran on in the next phase (a cached readrandom), whose
//! gets then missed the warmed block cache on every freshly compacted file
//! (docs/benchmarks.md, "Engine against peers (5M rows)": RocksDB's cached
//! readrandom).
//!
//! Reads through a view use a RocksDB snapshot (`ReadOptions` with it). A
//! phase that needs transactions (`txn`) opens the same files as an
//! `OptimisticTransactionDB` (pagewise's transactions are optimistic too):
//! its reads are `GetForUpdate`, so a key read and changed by another
//! commit before this one is a conflict (`Busy`/`TryAgain`), run again.

use crate::engine::{
    Engine, OpenFor, ReadView, Settings, SyncPolicy, TxnDone, TxnWrites, Visit, WriteOp,
};
use crate::{BenchError, Result};
use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamily, ColumnFamilyDescriptor, DBAccess, DBCompressionType,
    Direction, ErrorKind, IteratorMode, OptimisticTransactionDB, OptimisticTransactionOptions,
    Options, SnapshotWithThreadMode, WriteBatch, WriteBatchWithTransaction, WriteOptions, DB,
};
use std::path::Path;
use std::time::{Duration, Instant};

const NAME: &str = "rocksdb";

/// The Db as opened: plain, or as an optimistic transaction DB.
enum Handle {
    Plain(DB),
    Optimistic(OptimisticTransactionDB),
}

/// Runs `$body` with `$db` bound to whichever Db `$h` holds.
macro_rules! on_db {
    ($h:expr, $db:ident => $body:expr) => {
        match $h {
            Handle::Plain($db) => $body,
            Handle::Optimistic($db) => $body,
        }
    };
}

pub struct RocksEngine {
    db: Handle,
    tables: Vec<String>,
    sync: SyncPolicy,
    _cache: Cache,
}

fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError::engine(NAME, e)
}

pub fn open(
    dir: &Path,
    s: &Settings,
    tables: &[&str],
    open_for: OpenFor,
) -> Result<Box<dyn Engine>> {
    let cache = Cache::new_lru_cache(s.cache_bytes as usize);
    let mut bbo = BlockBasedOptions::default();
    bbo.set_block_cache(&cache);
    bbo.set_bloom_filter(10.0, false);
    let mut cf_opts = Options::default();
    cf_opts.set_block_based_table_factory(&bbo);
    cf_opts.set_compression_type(if s.compression {
        DBCompressionType::Lz4
    } else {
        DBCompressionType::None
    });
    let mut opts = cf_opts.clone();
    opts.create_if_missing(true);
    opts.create_missing_column_families(true);
    opts.increase_parallelism(2);
    opts.set_use_direct_reads(s.direct_io);
    opts.set_use_direct_io_for_flush_and_compaction(s.direct_io);
    let cfs = tables
        .iter()
        .map(|t| ColumnFamilyDescriptor::new(*t, cf_opts.clone()));
    let db = match open_for {
        OpenFor::Plain => Handle::Plain(DB::open_cf_descriptors(&opts, dir, cfs).map_err(err)?),
        OpenFor::Transactions => Handle::Optimistic(
            OptimisticTransactionDB::open_cf_descriptors(&opts, dir, cfs).map_err(err)?,
        ),
    };
    Ok(Box::new(RocksEngine {
        db,
        tables: tables.iter().map(|t| t.to_string()).collect(),
        sync: s.sync,
        _cache: cache,
    }))
}

/// How long a close waits for background work before giving up (and saying so).
const SETTLE_LIMIT: Duration = Duration::from_secs(3600);
const SETTLE_POLL: Duration = Duration::from_millis(100);
/// Consecutive idle polls that count as settled: a finished flush can
/// schedule a compaction a moment later.
const SETTLE_QUIET_POLLS: u32 = 3;

/// Background work of the whole Db at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Backlog {
    running_flushes: u64,
    running_compactions: u64,
    /// Tables (column families) with a flush or compaction waiting to run.
    pending_tables: u64,
    /// RocksDB's estimate, summed over tables.
    pending_compaction_bytes: u64,
}

impl Backlog {
    fn idle(&self) -> bool {
        self.running_flushes == 0 && self.running_compactions == 0 && self.pending_tables == 0
    }
}

/// What a close's wait for background work saw.
#[derive(Debug, Clone, Copy)]
struct Settled {
    at_start: Backlog,
    waited: Duration,
    /// False if the wait hit [`SETTLE_LIMIT`] or was interrupted.
    idle: bool,
}

impl RocksEngine {
    fn cf(&self, table: usize) -> Result<&ColumnFamily> {
        on_db!(&self.db, db => db.cf_handle(&self.tables[table]))
            .ok_or_else(|| err(format!("column family {} missing", self.tables[table])))
    }

    fn write_options(&self) -> WriteOptions {
        let mut wo = WriteOptions::default();
        wo.set_sync(self.sync == SyncPolicy::EveryBatch);
        wo
    }

    /// `ops` added to batch `b` (either kind of Db's batch).
    fn fill<const T: bool>(
        &self,
        b: &mut WriteBatchWithTransaction<T>,
        ops: &[WriteOp],
    ) -> Result<()> {
        for op in ops {
            match op {
                WriteOp::Put { table, key, value } => b.put_cf(self.cf(*table)?, key, value),
                WriteOp::Delete { table, key } => b.delete_cf(self.cf(*table)?, key),
            }
        }
        Ok(())
    }

    /// One optimistic transaction: Ok(None) if its commit met a conflict.
    fn try_transact(
        &self,
        db: &OptimisticTransactionDB,
        cf: &ColumnFamily,
        reads: &[Vec<u8>],
        writes: &TxnWrites,
    ) -> Result<Option<u64>> {
        let tx = db.transaction_opt(
            &self.write_options(),
            &OptimisticTransactionOptions::default(),
        );
        let mut found = 0;
        for k in reads {
            found += u64::from(tx.get_for_update_cf(cf, k, true).map_err(err)?.is_some());
        }
        for (k, v) in writes {
            tx.put_cf(cf, k, v).map_err(err)?;
        }
        match tx.commit() {
            Ok(()) => Ok(Some(found)),
            Err(e) if matches!(e.kind(), ErrorKind::Busy | ErrorKind::TryAgain) => Ok(None),
            Err(e) => Err(err(e)),
        }
    }
}

/// A RocksDB snapshot of either kind of Db.
struct RocksView<'a, D: DBAccess> {
    snap: SnapshotWithThreadMode<'a, D>,
    engine: &'a RocksEngine,
}

impl<D: DBAccess> ReadView for RocksView<'_, D> {
    fn get(&self, table: usize, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.snap.get_cf(self.engine.cf(table)?, key).map_err(err)
    }
}

impl Engine for RocksEngine {
    fn name(&self) -> &'static str {
        NAME
    }

    fn version(&self) -> String {
        // Which RocksDB is linked is decided at build time: bundled, or the
        // system library named by ROCKSDB_LIB_DIR.
        let lib = match option_env!("ROCKSDB_LIB_DIR") {
            Some(dir) => format!("system librocksdb from {dir} (rocksdb crate 0.22.0)"),
            None => "RocksDB 8.10.0 bundled (rocksdb crate 0.22.0)".into(),
        };
        match self.db {
            Handle::Plain(_) => lib,
            Handle::Optimistic(_) => format!("{lib}, opened as OptimisticTransactionDB"),
        }
    }

    fn write_batch(&self, ops: Vec<WriteOp>) -> Result<()> {
        let wo = self.write_options();
        match &self.db {
            Handle::Plain(db) => {
                let mut b = WriteBatch::default();
                self.fill(&mut b, &ops)?;
                db.write_opt(b, &wo).map_err(err)
            }
            Handle::Optimistic(db) => {
                let mut b = WriteBatchWithTransaction::<true>::default();
                self.fill(&mut b, &ops)?;
                db.write_opt(b, &wo).map_err(err)
            }
        }
    }

    fn get(&self, table: usize, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let cf = self.cf(table)?;
        on_db!(&self.db, db => db.get_cf(cf, key)).map_err(err)
    }

    fn multi_get(&self, table: usize, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        let cf = self.cf(table)?;
        on_db!(&self.db, db => db.multi_get_cf(keys.iter().map(|k| (cf, k.as_slice()))))
            .into_iter()
            .map(|r| r.map_err(err))
            .collect()
    }

    fn read_view(&self) -> Result<Box<dyn ReadView + '_>> {
        Ok(on_db!(&self.db, db => Box::new(RocksView {
            snap: db.snapshot(),
            engine: self,
        }) as Box<dyn ReadView + '_>))
    }

    /// An optimistic transaction, run again after a conflict; a plain Db
    /// (opened for another workload) refuses.
    fn transact(&self, table: usize, reads: &[Vec<u8>], writes: &TxnWrites) -> Result<TxnDone> {
        let Handle::Optimistic(db) = &self.db else {
            return Err(err("transactions need the Db opened as OptimisticTransactionDB (OpenFor::Transactions)"));
        };
        let cf = self.cf(table)?;
        let mut conflicts = 0;
        loop {
            match self.try_transact(db, cf, reads, writes)? {
                Some(found) => return Ok(TxnDone { found, conflicts }),
                None => conflicts += 1,
            }
        }
    }

    fn scan(&self, table: usize, start: &[u8], limit: usize, visit: Visit) -> Result<usize> {
        let cf = self.cf(table)?;
        let mode = IteratorMode::From(start, Direction::Forward);
        let mut n = 0;
        on_db!(&self.db, db => {
            for item in db.iterator_cf(cf, mode).take(limit) {
                let (k, v) = item.map_err(err)?;
                n += 1;
                if !visit(&k, &v) {
                    break;
                }
            }
        });
        Ok(n)
    }

    fn sync(&self) -> Result<()> {
        on_db!(&self.db, db => db.flush_wal(true)).map_err(err)
    }

    fn close(self: Box<Self>) -> Result<Option<serde_json::Value>> {
        // Memtables go to SST files now, so the phase that wrote them pays for it.
        for t in 0..self.tables.len() {
            let cf = self.cf(t)?;
            on_db!(&self.db, db => db.flush_cf(cf)).map_err(err)?;
        }
        self.sync()?;
        let settled = self.settle()?;
        Ok(Some(self.stats(&settled)?))
    }
}

impl RocksEngine {
    /// Flushes and compactions running or pending now, over every table.
    /// (Per-table properties must be read per column family: the default
    /// family the DB-wide call reads holds no data here.)
    fn backlog(&self) -> Result<Backlog> {
        let db_int = |name: &str| -> Result<u64> {
            Ok(on_db!(&self.db, db => db.property_int_value(name))
                .map_err(err)?
                .unwrap_or(0))
        };
        let mut b = Backlog {
            running_flushes: db_int("rocksdb.num-running-flushes")?,
            running_compactions: db_int("rocksdb.num-running-compactions")?,
            ..Backlog::default()
        };
        for t in 0..self.tables.len() {
            let cf = self.cf(t)?;
            let cf_int = |name: &str| -> Result<u64> {
                Ok(on_db!(&self.db, db => db.property_int_value_cf(cf, name))
                    .map_err(err)?
                    .unwrap_or(0))
            };
            let pending =
                cf_int("rocksdb.compaction-pending")? + cf_int("rocksdb.mem-table-flush-pending")?;
            b.pending_tables += u64::from(pending > 0);
            b.pending_compaction_bytes += cf_int("rocksdb.estimate-pending-compaction-bytes")?;
        }
        Ok(b)
    }

    /// Waits (polling, bounded by [`SETTLE_LIMIT`], stopped by Ctrl-C) until
    /// no flush or compaction has run or waited for [`SETTLE_QUIET_POLLS`]
    /// polls in a row.
    fn settle(&self) -> Result<Settled> {
        let t0 = Instant::now();
        let at_start = self.backlog()?;
        let mut quiet = 0;
        let max_polls = SETTLE_LIMIT.as_millis() / SETTLE_POLL.as_millis();
        for _ in 0..max_polls {
            quiet = if self.backlog()?.idle() { quiet + 1 } else { 0 };
            if quiet >= SETTLE_QUIET_POLLS || crate::interrupted() {
                break;
            }
            std::thread::sleep(SETTLE_POLL);
        }
        let settled = Settled {
            at_start,
            waited: t0.elapsed(),
            idle: quiet >= SETTLE_QUIET_POLLS,
        };
        // Only a timeout or Ctrl-C ends the wait early.
        debug_assert!(settled.idle || crate::interrupted() || settled.waited >= SETTLE_LIMIT);
        Ok(settled)
    }

    fn stats(&self, s: &Settled) -> Result<serde_json::Value> {
        let now = self.backlog()?;
        Ok(serde_json::json!({
            "settle_wait_s": s.waited.as_secs_f64(),
            "settled": s.idle,
            "at_close": {
                "running_compactions": s.at_start.running_compactions,
                "running_flushes": s.at_start.running_flushes,
                "tables_with_pending_work": s.at_start.pending_tables,
                "estimate_pending_compaction_bytes": s.at_start.pending_compaction_bytes,
            },
            "estimate_pending_compaction_bytes": now.pending_compaction_bytes,
            "num_running_compactions": now.running_compactions,
        }))
    }
}
