use pagewise_io::IoError;
use std::path::PathBuf;

/// Errors of the engine. Each says what went wrong, where, and what to do.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("{path}: not a pagewise database (no pagewise superblock at offset 0 or in the second slot); check the path")]
    NotADatabase { path: PathBuf },
    #[error("{path}: the superblock says format version {found}, newer than this build supports (up to {supported}); use a newer pagewise")]
    NewerVersion {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    #[error("{path}: truncated: the superblock needs at least {expected} bytes but the file has {actual}; restore the file from a backup")]
    Truncated {
        path: PathBuf,
        expected: u64,
        actual: u64,
    },
    #[error("{path}: checksum mismatch in {structure} page {page} at offset {offset} (stored {stored:#010x}, computed {computed:#010x}); the file is corrupt: restore it from a backup (`pagewise db check` lists every bad page)")]
    Checksum {
        path: PathBuf,
        /// What the page was read as: `superblock`, `catalog`, `B+tree
        /// node`, `B+tree delta base`, `overflow`, `B-epsilon node`.
        structure: &'static str,
        page: u64,
        offset: u64,
        stored: u32,
        computed: u32,
    },
    #[error("{path}: page {page} at offset {offset}: {what}; the file is corrupt: restore it from a backup")]
    Corrupt {
        path: PathBuf,
        page: u64,
        offset: u64,
        what: String,
    },
    #[error("key of {len} bytes exceeds the limit of {max} bytes for {page_size}-byte pages; use shorter keys or create the database with a larger page size")]
    KeyTooLarge {
        len: usize,
        max: usize,
        page_size: usize,
    },
    #[error("value of {len} bytes exceeds the limit of {max} bytes")]
    ValueTooLarge { len: usize, max: usize },
    #[error("invalid tree name {name:?}: {why}")]
    TreeName { name: String, why: &'static str },
    #[error("invalid options: {0}")]
    Options(String),
    #[error("{path}: bad tuned configuration: {why}")]
    Tuned { path: PathBuf, why: String },
    #[error("{path} already exists; open it with Db::open (or choose another path)")]
    AlreadyExists { path: PathBuf },
    #[error("{path} does not exist; create it with Db::create")]
    NotFound { path: PathBuf },
    #[error("{path} is locked by another process or another open Db in this process; close that one first")]
    Locked { path: PathBuf, source: IoError },
    #[error("{path} was closed; open it again with Db::open to use it (handles of a closed Db return this error)")]
    Closed { path: PathBuf },
    #[error("tree {name:?} is a {} tree, not a {}; open it with its own kind or use another name", found.name(), wanted.name())]
    TreeKind {
        name: String,
        found: crate::TreeKind,
        wanted: crate::TreeKind,
    },
    #[error("tree {tree:?} holds upserts but no merge operator is registered; open the Db with Options::merge_operator set to the operator it was written with")]
    NoMergeOperator { tree: String },
    #[error("not supported: {what}")]
    Unsupported { what: String },
    #[error("the database refuses writes after an earlier failure ({reason}); reopen it to recover from the log")]
    Poisoned { reason: String },
    #[error("{path} is open read-only; reopen it without `read_only` to write")]
    ReadOnly { path: PathBuf },
    #[error("{path}: the log holds {records} record(s) not yet applied to the data file; open it read-write once to recover them (read-only opens never write)")]
    NeedsRecovery { path: PathBuf, records: usize },
    #[error("snapshot is {age_ms} ms old, beyond Options::snapshot_max_age ({max_ms} ms): its pages may be reused; take a new snapshot (or raise the bound)")]
    SnapshotTooOld { age_ms: u64, max_ms: u64 },
    #[error("transaction conflict: {what} changed after the transaction read it; nothing was written: run the transaction again")]
    Conflict { what: String },
    #[error("commit failed in a group commit led by another thread: {0}")]
    GroupCommit(String),
}

pub type Result<T> = std::result::Result<T, Error>;
