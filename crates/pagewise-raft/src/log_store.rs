//! openraft's log storage on a pagewise Db: entries in [`LOG_TREE`] keyed by
//! big-endian index, the vote and the committed and purged ids in
//! [`META_TREE`]. Every change is one batch followed by `Db::sync`, so it is
//! durable and all-or-nothing (docs/design.md, "Raft storage").

use crate::codec::{blocking, decode, encode, io_err};
use crate::keys::{log_index, log_key, COMMITTED, LOG_TREE, META_TREE, PURGED, VOTE};
use crate::{NodeId, OpenError, StorageError, TypeConfig};
use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{Entry, LogId, OptionalSend, RaftLogId, RaftLogReader, StorageIOError, Vote};
use pagewise::{Batch, Db, Tree};
use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};

/// The Raft log on a pagewise Db. Cheap to clone (clones share the Db); a
/// clone is also the log reader openraft's replication tasks use.
#[derive(Clone, Debug)]
pub struct LogStore {
    db: Db,
    log: Tree,
    meta: Tree,
}

impl LogStore {
    pub(crate) fn new(db: Db) -> Result<LogStore, OpenError> {
        let store = LogStore {
            log: db.tree(LOG_TREE)?,
            meta: db.tree(META_TREE)?,
            db,
        };
        // Refuse damaged metadata at open rather than at the first call.
        store
            .read_meta::<Vote<NodeId>>(VOTE)
            .map_err(OpenError::Corrupt)?;
        store
            .read_meta::<LogId<NodeId>>(PURGED)
            .map_err(OpenError::Corrupt)?;
        store.last_entry_id().map_err(OpenError::Corrupt)?;
        Ok(store)
    }

    fn read_meta<T: serde::de::DeserializeOwned>(&self, key: &[u8]) -> Result<Option<T>, String> {
        match self.meta.get(key).map_err(|e| e.to_string())? {
            None => Ok(None),
            Some(v) => decode(&v, "Raft metadata").map(Some),
        }
    }

    fn last_entry_id(&self) -> Result<Option<LogId<NodeId>>, String> {
        match self.log.last().map_err(|e| e.to_string())? {
            None => Ok(None),
            Some((_, v)) => {
                let entry: Entry<TypeConfig> = decode(&v, "log entry")?;
                Ok(Some(*entry.get_log_id()))
            }
        }
    }

    /// Commits `batch` and makes it durable.
    async fn commit_durable(&self, batch: Batch) -> Result<(), String> {
        let db = self.db.clone();
        blocking(move || {
            db.apply(batch).map_err(|e| e.to_string())?;
            db.sync().map_err(|e| e.to_string())
        })
        .await
    }

    /// Removes every entry with an index in `range` in `batch`.
    fn remove_entries(
        &self,
        batch: &mut Batch,
        from: Bound<u64>,
        to: Bound<u64>,
    ) -> Result<u64, String> {
        let range = (from.map(log_key), to.map(log_key));
        let mut removed = 0u64;
        for kv in self.log.range(range) {
            let (k, _) = kv.map_err(|e| e.to_string())?;
            batch.remove(LOG_TREE, k);
            removed += 1;
        }
        Ok(removed)
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError> {
        let keys = (
            range.start_bound().map(|i| log_key(*i)),
            range.end_bound().map(|i| log_key(*i)),
        );
        let mut out = Vec::new();
        for kv in self.log.range(keys) {
            let (k, v) = kv.map_err(|e| io_err(StorageIOError::read_logs, e))?;
            let entry: Entry<TypeConfig> =
                decode(&v, "log entry").map_err(|e| io_err(StorageIOError::read_logs, e))?;
            assert_eq!(
                log_index(&k),
                Some(entry.get_log_id().index),
                "entry under its own index"
            );
            out.push(entry);
        }
        Ok(out)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let purged: Option<LogId<NodeId>> = self
            .read_meta(PURGED)
            .map_err(|e| io_err(StorageIOError::read_logs, e))?;
        let last = self
            .last_entry_id()
            .map_err(|e| io_err(StorageIOError::read_logs, e))?;
        Ok(LogState {
            last_purged_log_id: purged,
            last_log_id: last.or(purged),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError> {
        let mut b = Batch::new();
        b.insert(META_TREE, VOTE, encode(vote));
        self.commit_durable(b)
            .await
            .map_err(|e| io_err(StorageIOError::write_vote, e))
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError> {
        self.read_meta(VOTE)
            .map_err(|e| io_err(StorageIOError::read_vote, e))
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<NodeId>>,
    ) -> Result<(), StorageError> {
        // Not synced: openraft only reads it back to apply sooner after a
        // restart, and the next durable log write carries it.
        let mut b = Batch::new();
        b.insert(META_TREE, COMMITTED, encode(&committed));
        self.db
            .apply(b)
            .map_err(|e| io_err(StorageIOError::write_logs, e))
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StorageError> {
        let c: Option<Option<LogId<NodeId>>> = self
            .read_meta(COMMITTED)
            .map_err(|e| io_err(StorageIOError::read_logs, e))?;
        Ok(c.flatten())
    }

    /// Contract: `callback` is called only once the entries are durable
    /// (committed and synced), and the entries are readable on return.
    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut b = Batch::new();
        for entry in entries {
            b.insert(LOG_TREE, log_key(entry.get_log_id().index), encode(&entry));
        }
        let r = self.commit_durable(b).await;
        callback.log_io_completed(r.clone().map_err(std::io::Error::other));
        r.map_err(|e| io_err(StorageIOError::write_logs, e))
    }

    /// Removes the entries from `log_id.index` on, in one durable batch.
    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError> {
        let mut b = Batch::new();
        self.remove_entries(&mut b, Bound::Included(log_id.index), Bound::Unbounded)
            .map_err(|e| io_err(StorageIOError::write_logs, e))?;
        self.commit_durable(b)
            .await
            .map_err(|e| io_err(StorageIOError::write_logs, e))
    }

    /// Records `log_id` as purged and removes the entries up to it, in one
    /// durable batch.
    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError> {
        let mut b = Batch::new();
        b.insert(META_TREE, PURGED, encode(&log_id));
        self.remove_entries(&mut b, Bound::Unbounded, Bound::Included(log_id.index))
            .map_err(|e| io_err(StorageIOError::write_logs, e))?;
        self.commit_durable(b)
            .await
            .map_err(|e| io_err(StorageIOError::write_logs, e))
    }
}
