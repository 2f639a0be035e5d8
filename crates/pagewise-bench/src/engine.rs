//! The one adapter trait every measured engine implements, and the settings
//! that make engines comparable (written into every result line).

use crate::{BenchError, Result};
use pagewise::{BEpsilonOptions, DeltaFlush, TreeKind};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// When writes are made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SyncPolicy {
    /// No fsync while loading; one `sync()` at the end of each phase.
    Off,
    /// Every batch is durable before `write_batch` returns.
    EveryBatch,
}

/// Settings applied the same way to every engine, then pagewise's own
/// (`None`: the engine's default; other engines ignore them). Each is a flag
/// of `pagewise bench run`; results written before a field existed read it
/// as its default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// Engine-managed cache in bytes (buffer pool, block cache, page cache size).
    pub cache_bytes: u64,
    /// Engine-side compression (pagewise and rocksdb offer it; off by default so
    /// write amplification compares structures, not compressors).
    pub compression: bool,
    pub sync: SyncPolicy,
    /// Direct I/O where the engine offers it (pagewise, rocksdb).
    pub direct_io: bool,
    /// Page size for engines that let you choose (pagewise, sqlite).
    pub page_size: Option<usize>,
    /// pagewise-bepsilon: target bytes of an internal node (`--bepsilon-node`);
    /// leaves follow it unless `bepsilon_leaf_bytes` is set.
    pub bepsilon_node_bytes: Option<u32>,
    /// pagewise-bepsilon: target bytes of a leaf (`--bepsilon-leaf`).
    pub bepsilon_leaf_bytes: Option<u32>,
    /// pagewise-bepsilon: target bytes of a leaf basement (`--bepsilon-basement`).
    pub bepsilon_basement_bytes: Option<u32>,
    /// pagewise-bepsilon: most children of an internal node (`--bepsilon-fanout`).
    pub bepsilon_fanout: Option<u16>,
    /// pagewise-bepsilon: values of at least this many bytes go to extents
    /// of their own, `Some(None)` none (`--bepsilon-value-extent SIZE|off`);
    /// None: the engine's default.
    pub bepsilon_value_extent: Option<Option<u32>>,
    /// pagewise-delta: change bytes a page may carry as delta blocks before
    /// it is written whole again (`--delta-threshold`).
    pub delta_threshold_bytes: Option<usize>,
    /// pagewise engines: log bytes that start a checkpoint (`--wal-limit`).
    pub wal_limit_bytes: Option<u64>,
    /// pagewise engines: percent of the cache that changed nodes may hold
    /// before a checkpoint (`--dirty-percent`).
    pub dirty_percent: Option<u8>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            cache_bytes: 256 << 20,
            compression: false,
            sync: SyncPolicy::Off,
            direct_io: false,
            page_size: None,
            bepsilon_node_bytes: None,
            bepsilon_leaf_bytes: None,
            bepsilon_basement_bytes: None,
            bepsilon_fanout: None,
            bepsilon_value_extent: None,
            delta_threshold_bytes: None,
            wal_limit_bytes: None,
            dirty_percent: None,
        }
    }
}

pub use pagewise::WAL_LIMIT_MIN_BYTES;

/// `opts` checked by the engine's own validation; a refusal names `flags`.
fn engine_check(opts: pagewise::Options, flags: String) -> Result<()> {
    opts.validate().map_err(|e| BenchError::Settings {
        flags,
        what: e.to_string(),
    })
}

impl Settings {
    /// pagewise-bepsilon's tree options: the engine's defaults with these
    /// settings applied, checked by the engine's own validation.
    pub fn bepsilon_options(&self) -> Result<BEpsilonOptions> {
        let mut o = BEpsilonOptions::default();
        if let Some(n) = self.bepsilon_node_bytes {
            o = o.node_bytes(n);
        }
        if let Some(n) = self.bepsilon_leaf_bytes {
            o = o.leaf_bytes(n);
        }
        if let Some(n) = self.bepsilon_basement_bytes {
            o = o.basement_bytes(n);
        }
        if let Some(n) = self.bepsilon_fanout {
            o = o.fanout(n);
        }
        if let Some(v) = self.bepsilon_value_extent {
            o = o.value_extent_bytes(v);
        }
        TreeKind::BEpsilon(o)
            .validate()
            .map_err(|e| BenchError::Settings {
                flags: self.bepsilon_flags(),
                what: e.to_string(),
            })?;
        Ok(o)
    }

    /// The B-epsilon settings given, as the flags that set them.
    fn bepsilon_flags(&self) -> String {
        let given = [
            ("--bepsilon-node", self.bepsilon_node_bytes.map(u64::from)),
            ("--bepsilon-leaf", self.bepsilon_leaf_bytes.map(u64::from)),
            (
                "--bepsilon-basement",
                self.bepsilon_basement_bytes.map(u64::from),
            ),
            ("--bepsilon-fanout", self.bepsilon_fanout.map(u64::from)),
            (
                "--bepsilon-value-extent",
                self.bepsilon_value_extent.map(|v| v.map_or(0, u64::from)),
            ),
        ];
        let set: Vec<String> = given
            .iter()
            .filter_map(|(flag, v)| v.map(|v| format!("{flag} {v}")))
            .collect();
        if set.is_empty() {
            "the B-epsilon defaults".into()
        } else {
            set.join(" ")
        }
    }

    /// pagewise-delta's delta flushes: the engine's defaults with the
    /// threshold applied (at least 1 byte).
    pub fn delta_flush(&self) -> Result<DeltaFlush> {
        let d = DeltaFlush::default();
        match self.delta_threshold_bytes {
            None => Ok(d),
            Some(0) => Err(BenchError::Settings {
                flags: "--delta-threshold 0".into(),
                what: format!(
                    "the threshold must be at least 1 byte (the default is {} bytes)",
                    d.threshold_bytes
                ),
            }),
            Some(t) => Ok(DeltaFlush {
                threshold_bytes: t,
                ..d
            }),
        }
    }

    /// The log limit for pagewise engines, if set (at least
    /// [`WAL_LIMIT_MIN_BYTES`]).
    pub fn wal_limit(&self) -> Result<Option<u64>> {
        if let Some(n) = self.wal_limit_bytes {
            let opts = pagewise::Options::default().wal_limit(n);
            engine_check(opts, format!("--wal-limit {n}"))?;
        }
        Ok(self.wal_limit_bytes)
    }

    /// The dirty percent for pagewise engines, if set (10 to 90).
    pub fn dirty_percent(&self) -> Result<Option<u8>> {
        if let Some(p) = self.dirty_percent {
            let opts = pagewise::Options::default().dirty_percent(p);
            engine_check(opts, format!("--dirty-percent {p}"))?;
        }
        Ok(self.dirty_percent)
    }

    /// Checks every pagewise setting, so a bad one is refused before a run
    /// starts rather than when its engine opens.
    pub fn validate(&self) -> Result<()> {
        self.bepsilon_options()?;
        self.delta_flush()?;
        self.wal_limit()?;
        self.dirty_percent()?;
        Ok(())
    }
}

/// One write of a batch; `table` indexes the names given at open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOp {
    Put {
        table: usize,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    Delete {
        table: usize,
        key: Vec<u8>,
    },
}

impl WriteOp {
    /// Key plus value bytes: what counts as user bytes written.
    pub fn user_bytes(&self) -> u64 {
        match self {
            WriteOp::Put { key, value, .. } => (key.len() + value.len()) as u64,
            WriteOp::Delete { key, .. } => key.len() as u64,
        }
    }
}

/// Bytes of a counter: the first 8 bytes of a value, little-endian.
pub const COUNTER_BYTES: usize = 8;

/// A value with `delta` added to its counter (wrapping): the rest of the
/// value is kept; an absent or shorter value becomes the 8-byte counter
/// `delta`. Every engine's increment, blind or read-modify-write, agrees
/// with this function.
pub fn add_counter(existing: Option<&[u8]>, delta: u64) -> Vec<u8> {
    match existing {
        Some(v) if v.len() >= COUNTER_BYTES => {
            let mut out = v.to_vec();
            let mut c = [0u8; COUNTER_BYTES];
            c.copy_from_slice(&v[..COUNTER_BYTES]);
            let sum = u64::from_le_bytes(c).wrapping_add(delta);
            out[..COUNTER_BYTES].copy_from_slice(&sum.to_le_bytes());
            out
        }
        _ => delta.to_le_bytes().to_vec(),
    }
}

/// [`Engine::increment`] by read-modify-write: a get per distinct key, then
/// one batch of puts (repeats of a key in `keys` add up, not overwrite).
pub fn increment_by_rmw<E: Engine + ?Sized>(
    engine: &E,
    table: usize,
    keys: &[Vec<u8>],
    delta: u64,
) -> Result<()> {
    let mut counts: Vec<(&[u8], u64)> = Vec::with_capacity(keys.len());
    let mut seen: std::collections::HashMap<&[u8], usize> = std::collections::HashMap::new();
    for k in keys {
        match seen.get(k.as_slice()) {
            Some(&i) => counts[i].1 += 1,
            None => {
                seen.insert(k, counts.len());
                counts.push((k, 1));
            }
        }
    }
    let mut ops = Vec::with_capacity(counts.len());
    for (key, n) in counts {
        let old = engine.get(table, key)?;
        ops.push(WriteOp::Put {
            table,
            key: key.to_vec(),
            value: add_counter(old.as_deref(), delta.wrapping_mul(n)),
        });
    }
    assert!(ops.len() <= keys.len());
    engine.write_batch(ops)
}

/// Visitor for scans: return false to stop early.
pub type Visit<'a> = &'a mut dyn FnMut(&[u8], &[u8]) -> bool;

/// A consistent read-only view of every table at one moment: a pagewise
/// snapshot, an LMDB or redb read transaction, a RocksDB snapshot, an SQLite
/// read transaction. Writes made after it was taken are not seen; dropping
/// it releases it.
pub trait ReadView {
    fn get(&self, table: usize, key: &[u8]) -> Result<Option<Vec<u8>>>;
}

/// What one transaction of the `txn` workload did ([`Engine::transact`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxnDone {
    /// Reads that found a value (in the attempt that committed).
    pub found: u64,
    /// Commits refused by a conflict and run again (optimistic engines).
    pub conflicts: u64,
}

/// Puts of a transaction: (key, value) in one table.
pub type TxnWrites = [(Vec<u8>, Vec<u8>)];

/// What a phase needs of an engine when it is opened. Only RocksDB opens
/// differently: as an `OptimisticTransactionDB` for transactions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OpenFor {
    #[default]
    Plain,
    Transactions,
}

/// An ordered key-value store with named tables, atomic batches, point reads,
/// forward range scans, sync and close. Shared between threads.
pub trait Engine: Send + Sync {
    fn name(&self) -> &'static str;
    /// Engine and library version, for results.
    fn version(&self) -> String;
    /// Applies all ops atomically (durable at return under `SyncPolicy::EveryBatch`).
    /// The ops are the engine's: one whose API takes owned bytes moves them.
    fn write_batch(&self, ops: Vec<WriteOp>) -> Result<()>;
    fn get(&self, table: usize, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Looks up several keys of one table; engines with a native multi-get override it.
    fn multi_get(&self, table: usize, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        keys.iter().map(|k| self.get(table, k)).collect()
    }
    /// Adds `delta` to the counter of each key of `keys` in `table`, as one
    /// batch (the `incrandom` workload). The default is read-modify-write:
    /// a get per distinct key, then one batch of puts of [`add_counter`]'s
    /// result. Engines with blind merges (pagewise's B-epsilon upserts)
    /// override it and read nothing.
    fn increment(&self, table: usize, keys: &[Vec<u8>], delta: u64) -> Result<()> {
        increment_by_rmw(self, table, keys, delta)
    }
    /// A consistent view for reads while writers go on (the
    /// `readwhilewriting` workload). Engines without one refuse.
    fn read_view(&self) -> Result<Box<dyn ReadView + '_>> {
        Err(BenchError::Unsupported {
            engine: self.name(),
            what: "reads through a consistent view (snapshot or read transaction)",
        })
    }
    /// One transaction of the `txn` workload: reads `reads` of `table`,
    /// then puts `writes`, committed atomically and serializably (run again
    /// after a conflict until it commits). Engines without one refuse.
    fn transact(&self, table: usize, reads: &[Vec<u8>], writes: &TxnWrites) -> Result<TxnDone> {
        let _ = (table, reads, writes);
        Err(BenchError::Unsupported {
            engine: self.name(),
            what: "write transactions",
        })
    }
    /// Visits up to `limit` entries with key >= `start`, in key order; returns how many.
    fn scan(&self, table: usize, start: &[u8], limit: usize, visit: Visit) -> Result<usize>;
    /// Makes every acknowledged write durable.
    fn sync(&self) -> Result<()>;
    /// Flushes and releases files; after it returns every byte is handed to
    /// the OS. Returns engine-specific statistics of the session that ends
    /// (pagewise: bytes written by category, emulated compressed bytes).
    fn close(self: Box<Self>) -> Result<Option<serde_json::Value>>;
}

/// The engines this binary knows, whether compiled in or not.
pub const ENGINES: &[&str] = &[
    "pagewise",
    "pagewise-bepsilon",
    "pagewise-delta",
    "redb",
    "lmdb",
    "sqlite",
    "rocksdb",
    "btreemap",
];

/// Engines compiled into this binary (btreemap is an in-memory reference, not a peer).
pub fn compiled_engines() -> Vec<&'static str> {
    let mut v = vec!["pagewise", "pagewise-bepsilon", "pagewise-delta"];
    if cfg!(feature = "redb") {
        v.push("redb");
    }
    if cfg!(feature = "heed") {
        v.push("lmdb");
    }
    if cfg!(feature = "rusqlite") {
        v.push("sqlite");
    }
    if cfg!(feature = "rocksdb") {
        v.push("rocksdb");
    }
    v
}

/// Opens (creating if missing) engine `name` in directory `dir` with `tables`.
pub fn open_engine(
    name: &str,
    dir: &Path,
    settings: &Settings,
    tables: &[&str],
) -> Result<Box<dyn Engine>> {
    open_engine_for(name, dir, settings, tables, OpenFor::Plain)
}

/// [`open_engine`] for a phase that needs `open_for`.
#[cfg_attr(not(feature = "rocksdb"), allow(unused_variables))]
pub fn open_engine_for(
    name: &str,
    dir: &Path,
    settings: &Settings,
    tables: &[&str],
    open_for: OpenFor,
) -> Result<Box<dyn Engine>> {
    use crate::engines;
    std::fs::create_dir_all(dir).map_err(|e| BenchError::os("create run directory", dir, e))?;
    match name {
        "pagewise" => engines::pagewise::open(dir, settings, tables),
        "pagewise-bepsilon" | "pagewise-beps" => {
            engines::pagewise::open_bepsilon(dir, settings, tables)
        }
        "pagewise-delta" => engines::pagewise::open_delta(dir, settings, tables),
        "btreemap" => Ok(Box::new(engines::btreemap::BTreeEngine::open(
            dir,
            tables.len(),
        )?)),
        #[cfg(feature = "redb")]
        "redb" => engines::redb::open(dir, settings, tables),
        #[cfg(feature = "heed")]
        "lmdb" => engines::lmdb::open(dir, settings, tables),
        #[cfg(feature = "rusqlite")]
        "sqlite" => engines::sqlite::open(dir, settings, tables),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => engines::rocksdb::open(dir, settings, tables, open_for),
        other if ENGINES.contains(&other) => Err(BenchError::NotCompiled(other.into())),
        other => Err(BenchError::UnknownEngine(other.into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_of_older_results_read_as_the_defaults() {
        let old = r#"{"cache_bytes":1048576,"compression":false,"sync":"off","direct_io":true,"page_size":null}"#;
        let s: Settings = serde_json::from_str(old).unwrap();
        assert_eq!(
            s,
            Settings {
                cache_bytes: 1 << 20,
                direct_io: true,
                ..Settings::default()
            }
        );
    }

    #[test]
    fn bepsilon_settings_go_through_the_engine_validation() {
        let s = Settings {
            bepsilon_node_bytes: Some(64 << 10),
            bepsilon_basement_bytes: Some(4 << 10),
            ..Settings::default()
        };
        let o = s.bepsilon_options().unwrap();
        assert_eq!((o.node_bytes, o.leaf_target_bytes()), (64 << 10, 64 << 10));
        assert_eq!(o.basement_bytes, 4 << 10);
        let bad = Settings {
            bepsilon_fanout: Some(2),
            ..s
        };
        let e = bad.validate().unwrap_err().to_string();
        assert!(
            e.starts_with("--bepsilon-node 65536 --bepsilon-basement 4096 --bepsilon-fanout 2: "),
            "{e}"
        );
        assert!(e.contains("fanout 2 must be between 3 and 1024"), "{e}");
    }

    #[test]
    fn delta_threshold_and_wal_limit_are_checked() {
        let zero = Settings {
            delta_threshold_bytes: Some(0),
            ..Settings::default()
        };
        assert!(zero
            .validate()
            .unwrap_err()
            .to_string()
            .contains("at least 1 byte"));
        let small = Settings {
            wal_limit_bytes: Some(WAL_LIMIT_MIN_BYTES - 1),
            ..Settings::default()
        };
        assert!(small
            .validate()
            .unwrap_err()
            .to_string()
            .contains("at least 64 KiB"));
        let fine = Settings {
            delta_threshold_bytes: Some(512),
            wal_limit_bytes: Some(WAL_LIMIT_MIN_BYTES),
            ..Settings::default()
        };
        assert_eq!(fine.delta_flush().unwrap().threshold_bytes, 512);
        assert_eq!(fine.wal_limit().unwrap(), Some(WAL_LIMIT_MIN_BYTES));
        Settings::default().validate().unwrap();
        for (p, ok) in [(9, false), (10, true), (90, true), (91, false)] {
            let s = Settings {
                dirty_percent: Some(p),
                ..Settings::default()
            };
            assert_eq!(s.validate().is_ok(), ok, "dirty percent {p}");
        }
    }
}
