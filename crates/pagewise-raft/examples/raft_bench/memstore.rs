//! The ceiling: a minimal in-memory log storage and state machine (nothing
//! durable), with the same request semantics as the pagewise ones.

use openraft::storage::{LogFlushed, LogState, RaftLogStorage, RaftStateMachine};
use openraft::{
    AnyError, BasicNode, Entry, EntryPayload, LogId, OptionalSend, RaftLogReader,
    RaftSnapshotBuilder, SnapshotMeta, StorageError, StorageIOError, StoredMembership, Vote,
};
use pagewise_raft::{Op, Response, TypeConfig};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io::Cursor;
use std::ops::RangeBounds;
use std::sync::Arc;

type Err = StorageError<u64>;
type Meta = SnapshotMeta<u64, BasicNode>;

#[derive(Default)]
struct Log {
    entries: BTreeMap<u64, Entry<TypeConfig>>,
    vote: Option<Vote<u64>>,
    committed: Option<LogId<u64>>,
    purged: Option<LogId<u64>>,
}

#[derive(Clone, Default)]
pub struct MemLog(Arc<Mutex<Log>>);

impl RaftLogReader<TypeConfig> for MemLog {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, Err> {
        Ok(self
            .0
            .lock()
            .entries
            .range(range)
            .map(|(_, e)| e.clone())
            .collect())
    }
}

impl RaftLogStorage<TypeConfig> for MemLog {
    type LogReader = MemLog;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, Err> {
        let l = self.0.lock();
        let last = l.entries.values().next_back().map(|e| e.log_id);
        Ok(LogState {
            last_purged_log_id: l.purged,
            last_log_id: last.or(l.purged),
        })
    }

    async fn get_log_reader(&mut self) -> MemLog {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<(), Err> {
        self.0.lock().vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, Err> {
        Ok(self.0.lock().vote)
    }

    async fn save_committed(&mut self, c: Option<LogId<u64>>) -> Result<(), Err> {
        self.0.lock().committed = c;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<u64>>, Err> {
        Ok(self.0.lock().committed)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), Err>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut l = self.0.lock();
        for e in entries {
            l.entries.insert(e.log_id.index, e);
        }
        callback.log_io_completed(Ok(()));
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<u64>) -> Result<(), Err> {
        self.0.lock().entries.split_off(&log_id.index);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<u64>) -> Result<(), Err> {
        let mut l = self.0.lock();
        l.purged = Some(log_id);
        l.entries = l.entries.split_off(&(log_id.index + 1));
        Ok(())
    }
}

#[derive(Default)]
struct Sm {
    data: BTreeMap<String, String>,
    applied: Option<LogId<u64>>,
    membership: StoredMembership<u64, BasicNode>,
    current: Option<(Meta, Vec<u8>)>,
}

#[derive(Clone, Default)]
pub struct MemSm(Arc<Mutex<Sm>>);

impl MemSm {
    pub fn get(&self, key: &str) -> Option<String> {
        self.0.lock().data.get(key).cloned()
    }
}

fn snapshot(meta: Meta, bytes: Vec<u8>) -> openraft::Snapshot<TypeConfig> {
    openraft::Snapshot {
        meta,
        snapshot: Box::new(Cursor::new(bytes)),
    }
}

impl RaftSnapshotBuilder<TypeConfig> for MemSm {
    async fn build_snapshot(&mut self) -> Result<openraft::Snapshot<TypeConfig>, Err> {
        let mut s = self.0.lock();
        let bytes = serde_json::to_vec(&s.data).expect("a map serializes");
        let meta = Meta {
            last_log_id: s.applied,
            last_membership: s.membership.clone(),
            snapshot_id: format!("{:?}", s.applied.map(|l| l.index)),
        };
        s.current = Some((meta.clone(), bytes.clone()));
        Ok(snapshot(meta, bytes))
    }
}

impl RaftStateMachine<TypeConfig> for MemSm {
    type SnapshotBuilder = MemSm;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<u64>>, StoredMembership<u64, BasicNode>), Err> {
        let s = self.0.lock();
        Ok((s.applied, s.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, Err>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut s = self.0.lock();
        let mut out = Vec::new();
        for e in entries {
            s.applied = Some(e.log_id);
            let index = e.log_id.index;
            match e.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(req) if req.validate().is_ok() => {
                    for op in req.ops {
                        match op {
                            Op::Put { key, value } => s.data.insert(key, value),
                            Op::Delete { key } => s.data.remove(&key),
                        };
                    }
                }
                EntryPayload::Normal(_) => {}
                EntryPayload::Membership(m) => {
                    s.membership = StoredMembership::new(Some(e.log_id), m)
                }
            }
            out.push(Response {
                index,
                refused: None,
            });
        }
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> MemSm {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, Err> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &Meta,
        data: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), Err> {
        let bytes = data.into_inner();
        let map: BTreeMap<String, String> = serde_json::from_slice(&bytes).map_err(|e| {
            StorageError::from(StorageIOError::read_snapshot(None, AnyError::new(&e)))
        })?;
        let mut s = self.0.lock();
        s.data = map;
        s.applied = meta.last_log_id;
        s.membership = meta.last_membership.clone();
        s.current = Some((meta.clone(), bytes));
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<openraft::Snapshot<TypeConfig>>, Err> {
        Ok(self.0.lock().current.clone().map(|(m, b)| snapshot(m, b)))
    }
}
