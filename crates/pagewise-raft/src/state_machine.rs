//! openraft's state machine on a pagewise Db: the client's data in
//! [`DATA_TREE`], the last applied log id and the membership in [`SM_TREE`],
//! written together in one batch per `apply` call (docs/design.md, "Raft
//! storage").

use crate::codec::{blocking, decode, encode, io_err};
use crate::keys::{APPLIED, DATA_TREE, MEMBERSHIP, SM_TREE};
use crate::request::{Op, Request, Response};
use crate::snapshot::{self, Meta, Writer};
use crate::{NodeId, OpenError, SnapshotData, StorageError, TypeConfig};
use openraft::storage::RaftStateMachine;
use openraft::{
    BasicNode, Entry, EntryPayload, LogId, OptionalSend, RaftSnapshotBuilder, StorageIOError,
    StoredMembership,
};
use pagewise::{Batch, Db};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

type Applied = (Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>);
/// A snapshot's meta and bytes.
type Stored = (Meta, Vec<u8>);

/// The replicated key-value state machine. Cheap to clone; clones share
/// the Db and the current snapshot.
#[derive(Clone, Debug)]
pub struct StateMachine {
    db: Db,
    /// The last snapshot built or installed, as sent to followers.
    current: Arc<Mutex<Option<Stored>>>,
    builds: Arc<AtomicU64>,
}

impl StateMachine {
    pub(crate) fn new(db: Db) -> Result<StateMachine, OpenError> {
        read_applied(&db, None).map_err(OpenError::Corrupt)?;
        Ok(StateMachine {
            db,
            current: Arc::new(Mutex::new(None)),
            builds: Arc::new(AtomicU64::new(0)),
        })
    }

    /// The Db (for reads of [`DATA_TREE`] and for stats).
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Reads `key` from the applied state.
    pub fn get(&self, key: &str) -> Result<Option<String>, String> {
        let v = self
            .db
            .tree(DATA_TREE)
            .and_then(|t| t.get(key))
            .map_err(|e| e.to_string())?;
        Ok(v.map(|v| String::from_utf8_lossy(&v).into_owned()))
    }

    /// Up to `limit` pairs with keys in `[from, to)` (`to` None: no end).
    pub fn range(
        &self,
        from: &str,
        to: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, String)>, String> {
        let tree = self.db.tree(DATA_TREE).map_err(|e| e.to_string())?;
        let bounds = (
            std::ops::Bound::Included(from.as_bytes().to_vec()),
            match to {
                Some(t) => std::ops::Bound::Excluded(t.as_bytes().to_vec()),
                None => std::ops::Bound::Unbounded,
            },
        );
        let mut out = Vec::new();
        for kv in tree.range(bounds).take(limit) {
            let (k, v) = kv.map_err(|e| e.to_string())?;
            out.push((
                String::from_utf8_lossy(&k).into_owned(),
                String::from_utf8_lossy(&v).into_owned(),
            ));
        }
        Ok(out)
    }

    /// Builds a snapshot of the state as of now from a pagewise snapshot,
    /// so applying goes on meanwhile.
    fn build(&self) -> Result<Stored, String> {
        let snap = self.db.snapshot().map_err(|e| e.to_string())?;
        let sm = snap.tree(SM_TREE).map_err(|e| e.to_string())?;
        let (last_log_id, last_membership) = read_applied(&self.db, Some(&sm))?;
        let n = self.builds.fetch_add(1, Ordering::Relaxed);
        let snapshot_id = match last_log_id {
            Some(id) => format!("{}-{}-{n}", id.leader_id.term, id.index),
            None => format!("0-0-{n}"),
        };
        let meta = Meta {
            last_log_id,
            last_membership,
            snapshot_id,
        };
        let mut w = Writer::new(&meta);
        for kv in snap.tree(DATA_TREE).map_err(|e| e.to_string())?.iter() {
            let (k, v) = kv.map_err(|e| e.to_string())?;
            w.pair(&k, &v);
        }
        let bytes = w.finish();
        *self.current.lock() = Some((meta.clone(), bytes.clone()));
        Ok((meta, bytes))
    }
}

/// The last applied id and membership, from `tree` (a snapshot's) or the
/// Db's current state.
fn read_applied(db: &Db, tree: Option<&pagewise::SnapshotTree>) -> Result<Applied, String> {
    let get = |k: &[u8]| -> Result<Option<Vec<u8>>, String> {
        match tree {
            Some(t) => t.get(k),
            None => db.tree(SM_TREE).and_then(|t| t.get(k)),
        }
        .map_err(|e| e.to_string())
    };
    let applied = match get(APPLIED)? {
        Some(v) => Some(decode::<LogId<NodeId>>(&v, "last applied log id")?),
        None => None,
    };
    let membership = match get(MEMBERSHIP)? {
        Some(v) => decode(&v, "membership")?,
        None => StoredMembership::default(),
    };
    Ok((applied, membership))
}

/// Adds `req`'s writes to `b` if it passes `Request::validate` (checked on
/// every node alike), and says what was done.
fn apply_request(b: &mut Batch, req: &Request, index: u64) -> Response {
    if let Err(e) = req.validate() {
        let refused = Some(e.to_string());
        return Response { index, refused };
    }
    for op in &req.ops {
        match op {
            Op::Put { key, value } => b.insert(DATA_TREE, key, value),
            Op::Delete { key } => b.remove(DATA_TREE, key),
        }
    }
    Response {
        index,
        refused: None,
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<openraft::Snapshot<TypeConfig>, StorageError> {
        let me = self.clone();
        let (meta, bytes) = blocking(move || me.build())
            .await
            .map_err(|e| io_err(|a| StorageIOError::write_snapshot(None, a), e))?;
        Ok(snapshot::handle(meta, bytes))
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = StateMachine;

    async fn applied_state(&mut self) -> Result<Applied, StorageError> {
        read_applied(&self.db, None).map_err(|e| io_err(StorageIOError::read_state_machine, e))
    }

    /// Applies `entries` in one batch that also records the last applied
    /// id and any membership, so a crash keeps all of it or none.
    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, StorageError>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut b = Batch::new();
        let mut out = Vec::new();
        let mut last = None;
        for entry in entries {
            let index = entry.log_id.index;
            last = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Blank => out.push(Response {
                    index,
                    refused: None,
                }),
                EntryPayload::Normal(req) => out.push(apply_request(&mut b, &req, index)),
                EntryPayload::Membership(m) => {
                    let stored = StoredMembership::new(Some(entry.log_id), m);
                    b.insert(SM_TREE, MEMBERSHIP, encode(&stored));
                    out.push(Response {
                        index,
                        refused: None,
                    });
                }
            }
        }
        let Some(last) = last else { return Ok(out) };
        b.insert(SM_TREE, APPLIED, encode(&last));
        let db = self.db.clone();
        blocking(move || db.apply(b).map_err(|e| e.to_string()))
            .await
            .map_err(|e| io_err(StorageIOError::write_state_machine, e))?;
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<SnapshotData>, StorageError> {
        Ok(Box::new(std::io::Cursor::new(Vec::new())))
    }

    /// Replaces the whole state with the snapshot's in one durable batch:
    /// every current key removed, the snapshot's pairs, applied id and
    /// membership written; a crash keeps the old state or the new one.
    async fn install_snapshot(
        &mut self,
        meta: &Meta,
        data: Box<SnapshotData>,
    ) -> Result<(), StorageError> {
        let bytes = data.into_inner();
        let err = |e: String| {
            io_err(
                |a| StorageIOError::write_snapshot(Some(meta.signature()), a),
                e,
            )
        };
        let decoded = snapshot::decode(&bytes).map_err(err)?;
        if decoded.meta.last_log_id != meta.last_log_id {
            return Err(err(format!(
                "snapshot bytes cover {:?}, its meta says {:?}",
                decoded.meta.last_log_id, meta.last_log_id
            )));
        }
        let (db, m) = (self.db.clone(), meta.clone());
        blocking(move || install(&db, &m, decoded.pairs))
            .await
            .map_err(err)?;
        *self.current.lock() = Some((meta.clone(), bytes));
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<openraft::Snapshot<TypeConfig>>, StorageError> {
        if let Some((meta, bytes)) = self.current.lock().clone() {
            return Ok(Some(snapshot::handle(meta, bytes)));
        }
        // None kept since the open: the applied state is a valid snapshot.
        let applied = read_applied(&self.db, None)
            .map_err(|e| io_err(StorageIOError::read_state_machine, e))?;
        if applied.0.is_none() {
            return Ok(None);
        }
        self.build_snapshot().await.map(Some)
    }
}

/// The durable batch of `install_snapshot`.
fn install(db: &Db, meta: &Meta, pairs: Vec<(Vec<u8>, Vec<u8>)>) -> Result<(), String> {
    let mut b = Batch::new();
    let data = db.tree(DATA_TREE).map_err(|e| e.to_string())?;
    for kv in data.iter() {
        let (k, _) = kv.map_err(|e| e.to_string())?;
        b.remove(DATA_TREE, k);
    }
    for (k, v) in pairs {
        b.insert(DATA_TREE, k, v);
    }
    match meta.last_log_id {
        Some(id) => b.insert(SM_TREE, APPLIED, encode(&id)),
        None => b.remove(SM_TREE, APPLIED),
    }
    b.insert(SM_TREE, MEMBERSHIP, encode(&meta.last_membership));
    db.apply(b).map_err(|e| e.to_string())?;
    db.sync().map_err(|e| e.to_string())
}
