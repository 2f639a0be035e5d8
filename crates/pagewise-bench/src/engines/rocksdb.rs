//! RocksDB (LSM tree) through the `rocksdb` crate: one column family per table.
//! Block cache = the cache setting; compression none or LZ4; direct I/O for
//! reads and for flush/compaction when asked. Sync off: WAL written but not
//! fsync'd per batch (`flush_wal(true)` at sync); every-batch: `WriteOptions::set_sync`.

use crate::engine::{Engine, Settings, SyncPolicy, Visit, WriteOp};
use crate::{BenchError, Result};
use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamilyDescriptor, DBCompressionType, Direction, IteratorMode,
    Options, WriteBatch, WriteOptions, DB,
};
use std::path::Path;

const NAME: &str = "rocksdb";

pub struct RocksEngine {
    db: DB,
    tables: Vec<String>,
    sync: SyncPolicy,
    _cache: Cache,
}

fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError::engine(NAME, e)
}

pub fn open(dir: &Path, s: &Settings, tables: &[&str]) -> Result<Box<dyn Engine>> {
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
    let db = DB::open_cf_descriptors(&opts, dir, cfs).map_err(err)?;
    Ok(Box::new(RocksEngine {
        db,
        tables: tables.iter().map(|t| t.to_string()).collect(),
        sync: s.sync,
        _cache: cache,
    }))
}

impl RocksEngine {
    fn cf(&self, table: usize) -> Result<&rocksdb::ColumnFamily> {
        self.db
            .cf_handle(&self.tables[table])
            .ok_or_else(|| err(format!("column family {} missing", self.tables[table])))
    }
}

impl Engine for RocksEngine {
    fn name(&self) -> &'static str {
        NAME
    }

    fn version(&self) -> String {
        // Which RocksDB is linked is decided at build time: bundled, or the
        // system library named by ROCKSDB_LIB_DIR.
        match option_env!("ROCKSDB_LIB_DIR") {
            Some(dir) => format!("system librocksdb from {dir} (rocksdb crate 0.22.0)"),
            None => "RocksDB 8.10.0 bundled (rocksdb crate 0.22.0)".into(),
        }
    }

    fn write_batch(&self, ops: &[WriteOp]) -> Result<()> {
        let mut b = WriteBatch::default();
        for op in ops {
            match op {
                WriteOp::Put { table, key, value } => b.put_cf(self.cf(*table)?, key, value),
                WriteOp::Delete { table, key } => b.delete_cf(self.cf(*table)?, key),
            }
        }
        let mut wo = WriteOptions::default();
        wo.set_sync(self.sync == SyncPolicy::EveryBatch);
        self.db.write_opt(b, &wo).map_err(err)
    }

    fn get(&self, table: usize, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.db.get_cf(self.cf(table)?, key).map_err(err)
    }

    fn multi_get(&self, table: usize, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        let cf = self.cf(table)?;
        self.db
            .multi_get_cf(keys.iter().map(|k| (cf, k.as_slice())))
            .into_iter()
            .map(|r| r.map_err(err))
            .collect()
    }

    fn scan(&self, table: usize, start: &[u8], limit: usize, visit: Visit) -> Result<usize> {
        let it = self.db.iterator_cf(
            self.cf(table)?,
            IteratorMode::From(start, Direction::Forward),
        );
        let mut n = 0;
        for item in it.take(limit) {
            let (k, v) = item.map_err(err)?;
            n += 1;
            if !visit(&k, &v) {
                break;
            }
        }
        Ok(n)
    }

    fn sync(&self) -> Result<()> {
        self.db.flush_wal(true).map_err(err)
    }

    fn close(self: Box<Self>) -> Result<Option<serde_json::Value>> {
        // Memtables go to SST files now, so the phase that wrote them pays for it.
        for t in 0..self.tables.len() {
            self.db.flush_cf(self.cf(t)?).map_err(err)?;
        }
        self.db.flush_wal(true).map_err(err)?;
        Ok(self.stats())
    }
}

impl RocksEngine {
    fn stats(&self) -> Option<serde_json::Value> {
        let p = |name: &str| self.db.property_int_value(name).ok().flatten();
        Some(serde_json::json!({
            "estimate_pending_compaction_bytes": p("rocksdb.estimate-pending-compaction-bytes"),
            "num_running_compactions": p("rocksdb.num-running-compactions"),
        }))
    }
}
