//! The one adapter trait every measured engine implements, and the settings
//! that make engines comparable (written into every result line).

use crate::Result;
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

/// Settings applied the same way to every engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            cache_bytes: 256 << 20,
            compression: false,
            sync: SyncPolicy::Off,
            direct_io: false,
            page_size: None,
        }
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
    engine.write_batch(&ops)
}

/// Visitor for scans: return false to stop early.
pub type Visit<'a> = &'a mut dyn FnMut(&[u8], &[u8]) -> bool;

/// An ordered key-value store with named tables, atomic batches, point reads,
/// forward range scans, sync and close. Shared between threads.
pub trait Engine: Send + Sync {
    fn name(&self) -> &'static str;
    /// Engine and library version, for results.
    fn version(&self) -> String;
    /// Applies all ops atomically (durable at return under `SyncPolicy::EveryBatch`).
    fn write_batch(&self, ops: &[WriteOp]) -> Result<()>;
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
    use crate::engines;
    use crate::BenchError;
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
        "rocksdb" => engines::rocksdb::open(dir, settings, tables),
        other if ENGINES.contains(&other) => Err(BenchError::NotCompiled(other.into())),
        other => Err(BenchError::UnknownEngine(other.into())),
    }
}
