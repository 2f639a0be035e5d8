//! A RocksDB-backed log storage and state machine (feature `rocksdb`), built
//! as the pagewise one is: one RocksDB per node, column families `log`
//! (entries by big-endian index), `meta` (vote, committed, purged) and `sm`
//! (the state machine's pairs, its last-applied id and membership). Log
//! writes are synced (`WriteOptions::set_sync`), applies are not: RocksDB's
//! one write-ahead log orders them, so a synced append also makes every
//! earlier apply durable, and a lost apply is applied again from the log.

// openraft's `StorageError` is the error its storage traits return; the
// helpers here return it too rather than box it.
#![allow(clippy::result_large_err)]

use openraft::storage::{LogFlushed, LogState, RaftLogStorage, RaftStateMachine};
use openraft::{
    AnyError, BasicNode, Entry, EntryPayload, LogId, OptionalSend, RaftLogReader,
    RaftSnapshotBuilder, SnapshotMeta, StorageError, StorageIOError, StoredMembership, Vote,
};
use pagewise_raft::{Op, Response, TypeConfig};
use parking_lot::Mutex;
use rocksdb::{
    ColumnFamilyDescriptor, DBWithThreadMode, Direction, IteratorMode, SingleThreaded, WriteBatch,
    WriteOptions,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io::Cursor;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

type Err = StorageError<u64>;
type Meta = SnapshotMeta<u64, BasicNode>;
type Rocks = DBWithThreadMode<SingleThreaded>;
/// The last snapshot built or installed, as sent to followers.
type Current = Arc<Mutex<Option<(Meta, Vec<u8>)>>>;

const LOG: &str = "log";
const META: &str = "meta";
const SM: &str = "sm";
const VOTE: &[u8] = b"vote";
const COMMITTED: &[u8] = b"committed";
const PURGED: &[u8] = b"purged";
/// State machine keys: pairs under `d/`, the applied id and membership
/// under `m/`.
const DATA_PREFIX: &[u8] = b"d/";
const DATA_END: &[u8] = b"d0"; // '/' + 1
const APPLIED: &[u8] = b"m/applied";
const MEMBERSHIP: &[u8] = b"m/membership";

fn io(e: impl std::fmt::Display) -> Err {
    StorageError::from(StorageIOError::write_logs(AnyError::error(e.to_string())))
}

fn enc<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).expect("raft types serialize")
}

fn dec<T: DeserializeOwned>(b: &[u8]) -> Result<T, Err> {
    serde_json::from_slice(b).map_err(io)
}

/// One node's RocksDB and its count of synced writes.
#[derive(Clone)]
pub struct Node {
    db: Arc<Rocks>,
    syncs: Arc<AtomicU64>,
}

impl Node {
    /// Creates the RocksDB at `path` (its default options but for the
    /// column families).
    pub fn create(path: &Path) -> Node {
        let mut opts = rocksdb::Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        let cfs =
            [LOG, META, SM].map(|n| ColumnFamilyDescriptor::new(n, rocksdb::Options::default()));
        let db = Rocks::open_cf_descriptors(&opts, path, cfs).expect("open RocksDB");
        Node {
            db: Arc::new(db),
            syncs: Arc::default(),
        }
    }

    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    pub fn storage(&self) -> (RocksLog, RocksSm) {
        let sm = RocksSm {
            node: self.clone(),
            current: Arc::default(),
        };
        (RocksLog(self.clone()), sm)
    }

    /// Writes `batch`, synced or not, off the async runtime's threads.
    async fn write(&self, batch: WriteBatch, sync: bool) -> Result<(), Err> {
        let node = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut wo = WriteOptions::default();
            wo.set_sync(sync);
            node.db.write_opt(batch, &wo).map_err(io)?;
            if sync {
                node.syncs.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        })
        .await
        .map_err(io)?
    }

    fn get<T: DeserializeOwned>(&self, cf: &str, key: &[u8]) -> Result<Option<T>, Err> {
        let cf = self.db.cf_handle(cf).expect("column family");
        match self.db.get_cf(cf, key).map_err(io)? {
            None => Ok(None),
            Some(v) => dec(&v).map(Some),
        }
    }
}

#[derive(Clone)]
pub struct RocksLog(Node);

impl RaftLogReader<TypeConfig> for RocksLog {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, Err> {
        let db = &self.0.db;
        let cf = db.cf_handle(LOG).expect("log family");
        let start = match range.start_bound() {
            Bound::Included(i) => *i,
            Bound::Excluded(i) => i + 1,
            Bound::Unbounded => 0,
        };
        let from = start.to_be_bytes();
        let mut out = Vec::new();
        for kv in db.iterator_cf(cf, IteratorMode::From(&from, Direction::Forward)) {
            let (k, v) = kv.map_err(io)?;
            let index = u64::from_be_bytes(k[..8].try_into().expect("8-byte key"));
            if !range.contains(&index) {
                break;
            }
            out.push(dec(&v)?);
        }
        Ok(out)
    }
}

impl RaftLogStorage<TypeConfig> for RocksLog {
    type LogReader = RocksLog;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, Err> {
        let purged: Option<LogId<u64>> = self.0.get(META, PURGED)?;
        let db = &self.0.db;
        let cf = db.cf_handle(LOG).expect("log family");
        let last = match db.iterator_cf(cf, IteratorMode::End).next() {
            Some(kv) => {
                let entry: Entry<TypeConfig> = dec(&kv.map_err(io)?.1)?;
                Some(entry.log_id)
            }
            None => None,
        };
        Ok(LogState {
            last_purged_log_id: purged,
            last_log_id: last.or(purged),
        })
    }

    async fn get_log_reader(&mut self) -> RocksLog {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<(), Err> {
        let mut b = WriteBatch::default();
        b.put_cf(self.0.db.cf_handle(META).expect("meta"), VOTE, enc(vote));
        self.0.write(b, true).await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, Err> {
        self.0.get(META, VOTE)
    }

    async fn save_committed(&mut self, c: Option<LogId<u64>>) -> Result<(), Err> {
        let mut b = WriteBatch::default();
        b.put_cf(self.0.db.cf_handle(META).expect("meta"), COMMITTED, enc(&c));
        self.0.write(b, false).await
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<u64>>, Err> {
        Ok(self.0.get::<Option<LogId<u64>>>(META, COMMITTED)?.flatten())
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), Err>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut b = WriteBatch::default();
        let cf = self.0.db.cf_handle(LOG).expect("log family");
        for e in entries {
            b.put_cf(cf, e.log_id.index.to_be_bytes(), enc(&e));
        }
        let r = self.0.write(b, true).await;
        callback.log_io_completed(r.clone().map_err(std::io::Error::other));
        r
    }

    async fn truncate(&mut self, log_id: LogId<u64>) -> Result<(), Err> {
        let mut b = WriteBatch::default();
        let cf = self.0.db.cf_handle(LOG).expect("log family");
        b.delete_range_cf(cf, log_id.index.to_be_bytes(), u64::MAX.to_be_bytes());
        b.delete_cf(cf, u64::MAX.to_be_bytes());
        self.0.write(b, true).await
    }

    async fn purge(&mut self, log_id: LogId<u64>) -> Result<(), Err> {
        let mut b = WriteBatch::default();
        let db = &self.0.db;
        b.put_cf(db.cf_handle(META).expect("meta"), PURGED, enc(&log_id));
        let cf = db.cf_handle(LOG).expect("log family");
        b.delete_range_cf(cf, 0u64.to_be_bytes(), (log_id.index + 1).to_be_bytes());
        self.0.write(b, true).await
    }
}

#[derive(Clone)]
pub struct RocksSm {
    node: Node,
    current: Current,
}

impl RocksSm {
    pub fn get(&self, key: &str) -> Option<String> {
        let db = &self.node.db;
        let k = [DATA_PREFIX, key.as_bytes()].concat();
        let v = db.get_cf(db.cf_handle(SM).expect("sm"), k).expect("read");
        v.map(|v| String::from_utf8(v).expect("UTF-8 value"))
    }
}

fn snapshot(meta: Meta, bytes: Vec<u8>) -> openraft::Snapshot<TypeConfig> {
    openraft::Snapshot {
        meta,
        snapshot: Box::new(Cursor::new(bytes)),
    }
}

impl RaftSnapshotBuilder<TypeConfig> for RocksSm {
    /// The pairs, applied id and membership of one RocksDB snapshot.
    async fn build_snapshot(&mut self) -> Result<openraft::Snapshot<TypeConfig>, Err> {
        let db = &self.node.db;
        let cf = db.cf_handle(SM).expect("sm");
        let snap = db.snapshot();
        let get = |k: &[u8]| snap.get_cf(cf, k).map_err(io);
        let applied: Option<LogId<u64>> = get(APPLIED)?.map(|v| dec(&v)).transpose()?;
        let membership: StoredMembership<u64, BasicNode> = match get(MEMBERSHIP)? {
            Some(v) => dec(&v)?,
            None => StoredMembership::default(),
        };
        let mut data = BTreeMap::new();
        let mode = IteratorMode::From(DATA_PREFIX, Direction::Forward);
        for kv in snap.iterator_cf(cf, mode) {
            let (k, v) = kv.map_err(io)?;
            if !k.starts_with(DATA_PREFIX) {
                break;
            }
            let key = String::from_utf8_lossy(&k[DATA_PREFIX.len()..]).into_owned();
            data.insert(key, String::from_utf8_lossy(&v).into_owned());
        }
        let bytes = enc(&data);
        let meta = Meta {
            last_log_id: applied,
            last_membership: membership,
            snapshot_id: format!("{:?}", applied.map(|l| l.index)),
        };
        *self.current.lock() = Some((meta.clone(), bytes.clone()));
        Ok(snapshot(meta, bytes))
    }
}

impl RaftStateMachine<TypeConfig> for RocksSm {
    type SnapshotBuilder = RocksSm;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<u64>>, StoredMembership<u64, BasicNode>), Err> {
        let applied = self.node.get(SM, APPLIED)?;
        let membership = self.node.get(SM, MEMBERSHIP)?.unwrap_or_default();
        Ok((applied, membership))
    }

    /// Applies `entries` in one unsynced batch with the applied id and any
    /// membership they carry.
    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, Err>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut b = WriteBatch::default();
        let cf = self.node.db.cf_handle(SM).expect("sm");
        let mut out = Vec::new();
        for e in entries {
            b.put_cf(cf, APPLIED, enc(&e.log_id));
            match e.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(req) if req.validate().is_ok() => {
                    for op in req.ops {
                        match op {
                            Op::Put { key, value } => {
                                b.put_cf(cf, [DATA_PREFIX, key.as_bytes()].concat(), value)
                            }
                            Op::Delete { key } => {
                                b.delete_cf(cf, [DATA_PREFIX, key.as_bytes()].concat())
                            }
                        }
                    }
                }
                EntryPayload::Normal(_) => {}
                EntryPayload::Membership(m) => {
                    let stored = StoredMembership::new(Some(e.log_id), m);
                    b.put_cf(cf, MEMBERSHIP, enc(&stored));
                }
            }
            out.push(Response {
                index: e.log_id.index,
                refused: None,
            });
        }
        self.node.write(b, false).await?;
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> RocksSm {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, Err> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    /// Replaces the whole state in one synced batch.
    async fn install_snapshot(
        &mut self,
        meta: &Meta,
        data: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), Err> {
        let bytes = data.into_inner();
        let map: BTreeMap<String, String> = dec(&bytes)?;
        let mut b = WriteBatch::default();
        let cf = self.node.db.cf_handle(SM).expect("sm");
        b.delete_range_cf(cf, DATA_PREFIX, DATA_END);
        for (k, v) in &map {
            b.put_cf(cf, [DATA_PREFIX, k.as_bytes()].concat(), v);
        }
        match &meta.last_log_id {
            Some(l) => b.put_cf(cf, APPLIED, enc(l)),
            None => b.delete_cf(cf, APPLIED),
        }
        b.put_cf(cf, MEMBERSHIP, enc(&meta.last_membership));
        self.node.write(b, true).await?;
        *self.current.lock() = Some((meta.clone(), bytes));
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<openraft::Snapshot<TypeConfig>>, Err> {
        Ok(self.current.lock().clone().map(|(m, b)| snapshot(m, b)))
    }
}
