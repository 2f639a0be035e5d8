//! pagewise as the storage of an [openraft](https://docs.rs/openraft/0.9)
//! cluster: the Raft log ([`LogStore`], openraft's `RaftLogStorage`) and the
//! replicated key-value state machine ([`StateMachine`], `RaftStateMachine`)
//! on one pagewise [`Db`] opened with `Durability::Buffered`: every write
//! Raft needs durable (log entries, the vote, truncate, purge, an installed
//! snapshot) is committed and then made durable with `Db::sync`, and the
//! applies in between ride along with the next sync. Key layout, the
//! reasons for one Db, and the crash argument: docs/design.md, "Raft
//! storage".
//!
//! ```no_run
//! let (log, sm) = pagewise_raft::open("/tmp/node1.pw")?;
//! # Ok::<(), pagewise_raft::OpenError>(())
//! ```

mod codec;
mod keys;
mod log_store;
pub mod network;
mod request;
pub mod server;
mod snapshot;
mod state_machine;

pub use keys::{DATA_TREE, LOG_TREE, META_TREE, SM_TREE};
pub use log_store::LogStore;
pub use request::{Op, Request, RequestError, Response, MAX_KEY_BYTES, MAX_VALUE_BYTES};
pub use state_machine::StateMachine;

use pagewise::{Db, Durability, Options};
use std::io::Cursor;
use std::path::Path;

openraft::declare_raft_types!(
    /// The cluster's types: string keys and values (see [`Request`]), node
    /// ids `u64`, nodes addressed by `BasicNode { addr }`, snapshots as bytes.
    pub TypeConfig:
        D = Request,
        R = Response,
);

/// A node id.
pub type NodeId = u64;
/// openraft's error for a storage call.
pub type StorageError = openraft::StorageError<NodeId>;

/// Why the storage could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot open the Raft storage Db: {0}")]
    Db(#[from] pagewise::Error),
    #[error(
        "the Db's page size {page_size} B allows keys of {max_key_len} B, below the {MAX_KEY_BYTES} B \
         a replicated key may take: use a page size of at least 4096 B"
    )]
    PageTooSmall {
        page_size: usize,
        max_key_len: usize,
    },
    #[error("the Raft metadata in the Db is damaged: {0}")]
    Corrupt(String),
}

/// The options the storage opens its Db with: `base` with
/// `Durability::Buffered` (the storage syncs where Raft needs it).
pub fn db_options(base: Options) -> Options {
    base.durability(Durability::Buffered)
}

/// Opens (creating if absent) the Db at `path` with default options and
/// returns the log storage and the state machine sharing it.
pub fn open(path: impl AsRef<Path>) -> Result<(LogStore, StateMachine), OpenError> {
    let db = Db::open_or_create(path, db_options(Options::default()))?;
    on_db(db)
}

/// The log storage and the state machine on `db`, which should be opened
/// with [`db_options`] (a `Sync` Db works too, with one more fsync per
/// apply).
pub fn on_db(db: Db) -> Result<(LogStore, StateMachine), OpenError> {
    if db.max_key_len() < MAX_KEY_BYTES {
        return Err(OpenError::PageTooSmall {
            page_size: db.page_size(),
            max_key_len: db.max_key_len(),
        });
    }
    let log = LogStore::new(db.clone())?;
    let sm = StateMachine::new(db)?;
    Ok((log, sm))
}

/// Snapshot bytes as openraft moves them.
pub type SnapshotData = Cursor<Vec<u8>>;
