//! SQLite (bundled) through rusqlite: one `WITHOUT ROWID` table per bench table,
//! so rows live in the primary-key B-tree like the other engines' entries.
//! WAL journal mode; `synchronous=OFF` when sync is off (with a checkpoint and
//! fsync at sync), `FULL` when every batch must be durable. Readers get their own
//! connections from a pool so threads read in parallel.

use crate::engine::{Engine, ReadView, Settings, SyncPolicy, TxnDone, TxnWrites, Visit, WriteOp};
use crate::{BenchError, Result};
use parking_lot::Mutex;
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior};
use std::path::{Path, PathBuf};

const NAME: &str = "sqlite";
/// Largest page cache given to SQLite (see `connect`).
pub const MAX_CACHE: u64 = 64 << 20;

pub struct SqliteEngine {
    path: PathBuf,
    settings: Settings,
    tables: Vec<String>,
    writer: Mutex<Connection>,
    readers: Mutex<Vec<Connection>>,
}

fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError::engine(NAME, e)
}

fn connect(path: &Path, s: &Settings) -> Result<Connection> {
    let c = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(err)?;
    let sync = match s.sync {
        SyncPolicy::Off => "OFF",
        SyncPolicy::EveryBatch => "FULL",
    };
    // cache_size < 0 is in KiB. Capped: on this build a cache_size of 96 MiB
    // or more made point reads collapse to under 1k/s (64 MiB: 150k/s on the
    // same 26 MiB Db), so larger caches are left to the OS page cache.
    let kib = (s.cache_bytes.min(MAX_CACHE) / 1024).max(64);
    c.execute_batch(&format!(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous={sync}; PRAGMA cache_size=-{kib}; PRAGMA busy_timeout=60000;"
    ))
    .map_err(err)?;
    Ok(c)
}

pub fn open(dir: &Path, s: &Settings, tables: &[&str]) -> Result<Box<dyn Engine>> {
    let path = dir.join("bench.sqlite");
    let fresh = !path.exists();
    let c = connect(&path, s)?;
    if fresh {
        if let Some(ps) = s.page_size {
            // page_size must be set before the first table; WAL mode keeps it.
            c.execute_batch(&format!("PRAGMA journal_mode=DELETE; PRAGMA page_size={ps}; VACUUM; PRAGMA journal_mode=WAL;"))
                .map_err(err)?;
        }
    }
    for t in tables {
        c.execute_batch(&format!(
            "CREATE TABLE IF NOT EXISTS \"{t}\" (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID;"
        ))
        .map_err(err)?;
    }
    Ok(Box::new(SqliteEngine {
        path,
        settings: s.clone(),
        tables: tables.iter().map(|t| t.to_string()).collect(),
        writer: Mutex::new(c),
        readers: Mutex::new(Vec::new()),
    }))
}

/// Looks `key` up in `table` on connection `c` (inside whatever
/// transaction `c` has open).
fn select(c: &Connection, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
    let sql = format!("SELECT v FROM \"{table}\" WHERE k = ?1");
    c.prepare_cached(&sql)
        .and_then(|mut st| st.query_row([key], |r| r.get::<_, Vec<u8>>(0)).optional())
        .map_err(err)
}

/// A read transaction on a pooled reader connection: in WAL mode every
/// SELECT in it reads the snapshot its first one started. The connection
/// goes back to the pool when the view is dropped.
struct SqliteView<'a> {
    engine: &'a SqliteEngine,
    conn: Option<Connection>,
}

impl ReadView for SqliteView<'_> {
    fn get(&self, table: usize, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let c = self.conn.as_ref().expect("held until drop");
        select(c, &self.engine.tables[table], key)
    }
}

impl Drop for SqliteView<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.conn.take() {
            // A connection whose read transaction cannot end is not reused.
            if c.execute_batch("COMMIT").is_ok() {
                self.engine.readers.lock().push(c);
            }
        }
    }
}

impl SqliteEngine {
    fn with_reader<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let c = match self.readers.lock().pop() {
            Some(c) => c,
            None => connect(&self.path, &self.settings)?,
        };
        let out = f(&c);
        self.readers.lock().push(c);
        out
    }
}

impl Engine for SqliteEngine {
    fn name(&self) -> &'static str {
        NAME
    }

    fn version(&self) -> String {
        format!(
            "SQLite {} (rusqlite 0.32.1, bundled; page cache capped at {} MiB)",
            rusqlite::version(),
            MAX_CACHE >> 20
        )
    }

    fn write_batch(&self, ops: Vec<WriteOp>) -> Result<()> {
        let mut c = self.writer.lock();
        let txn = c.transaction().map_err(err)?;
        for op in &ops {
            match op {
                WriteOp::Put { table, key, value } => {
                    let sql = format!(
                        "INSERT OR REPLACE INTO \"{}\" (k, v) VALUES (?1, ?2)",
                        self.tables[*table]
                    );
                    txn.prepare_cached(&sql)
                        .and_then(|mut st| st.execute((key, value)))
                        .map_err(err)?;
                }
                WriteOp::Delete { table, key } => {
                    let sql = format!("DELETE FROM \"{}\" WHERE k = ?1", self.tables[*table]);
                    txn.prepare_cached(&sql)
                        .and_then(|mut st| st.execute([key]))
                        .map_err(err)?;
                }
            }
        }
        txn.commit().map_err(err)
    }

    fn get(&self, table: usize, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.with_reader(|c| select(c, &self.tables[table], key))
    }

    fn read_view(&self) -> Result<Box<dyn ReadView + '_>> {
        let c = match self.readers.lock().pop() {
            Some(c) => c,
            None => connect(&self.path, &self.settings)?,
        };
        // A deferred transaction reads from the snapshot its first read
        // starts: read the schema now so the view is the Db as of this call.
        c.execute_batch("BEGIN; SELECT count(*) FROM sqlite_schema;")
            .map_err(err)?;
        Ok(Box::new(SqliteView {
            engine: self,
            conn: Some(c),
        }))
    }

    /// An immediate transaction on the writer connection (one writer at a
    /// time: no conflicts).
    fn transact(&self, table: usize, reads: &[Vec<u8>], writes: &TxnWrites) -> Result<TxnDone> {
        let name = &self.tables[table];
        let mut c = self.writer.lock();
        let txn = c
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        let mut found = 0;
        for k in reads {
            found += u64::from(select(&txn, name, k)?.is_some());
        }
        let sql = format!("INSERT OR REPLACE INTO \"{name}\" (k, v) VALUES (?1, ?2)");
        for (k, v) in writes {
            txn.prepare_cached(&sql)
                .and_then(|mut st| st.execute((k, v)))
                .map_err(err)?;
        }
        txn.commit().map_err(err)?;
        Ok(TxnDone {
            found,
            conflicts: 0,
        })
    }

    fn scan(&self, table: usize, start: &[u8], limit: usize, visit: Visit) -> Result<usize> {
        let sql = format!(
            "SELECT k, v FROM \"{}\" WHERE k >= ?1 ORDER BY k LIMIT ?2",
            self.tables[table]
        );
        self.with_reader(|c| {
            let mut st = c.prepare_cached(&sql).map_err(err)?;
            let mut rows = st.query((start, limit as i64)).map_err(err)?;
            let mut n = 0;
            while let Some(r) = rows.next().map_err(err)? {
                let k = r.get_ref(0).map_err(err)?.as_blob().map_err(err)?;
                let v = r.get_ref(1).map_err(err)?.as_blob().map_err(err)?;
                n += 1;
                if !visit(k, v) {
                    break;
                }
            }
            Ok(n)
        })
    }

    fn sync(&self) -> Result<()> {
        // Move the WAL into the main file, then fsync it (synchronous=OFF skipped that).
        let c = self.writer.lock();
        c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
            .map_err(err)?;
        for p in [self.path.clone(), self.path.with_extension("sqlite-wal")] {
            if let Ok(f) = std::fs::File::open(&p) {
                f.sync_all().map_err(|e| BenchError::os("fsync", &p, e))?;
            }
        }
        Ok(())
    }

    fn close(self: Box<Self>) -> Result<Option<serde_json::Value>> {
        self.sync()?;
        self.readers.lock().clear();
        let c = self.writer.into_inner();
        c.close().map_err(|(_, e)| err(e))?;
        Ok(None)
    }
}
