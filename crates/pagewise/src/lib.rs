//! pagewise: an embedded, crash-safe, ordered key-value store whose page size
//! is chosen at creation (512 B to 64 KiB), doing I/O the way SSDs want it:
//! direct, aligned, page-sized, through `pagewise_io` so every byte is counted.
//!
//! ```no_run
//! use pagewise::{Db, Options, Batch};
//! let db = Db::create("/tmp/example.pw", Options::default().page_size(8192))?;
//! let orders = db.tree("orders")?;
//! orders.insert(b"k1", b"v1")?;
//! let mut b = Batch::new();
//! b.insert(&orders, b"k2", b"v2");
//! b.remove("index", b"old");
//! db.apply(b)?;
//! for kv in orders.range(&b"k"[..]..) {
//!     let (k, v) = kv?;
//!     println!("{k:?} = {v:?}");
//! }
//! # Ok::<(), pagewise::Error>(())
//! ```
//!
//! Design, on-disk formats and the durability contract: docs/design.md.

mod backup;
mod batch;
mod bytes;
mod check;
mod db;
mod error;
mod events;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzz;
mod index;
mod log;
mod merge;
mod options;
mod snapshot;
mod stats;
mod store;
#[doc(hidden)]
pub mod structure;
mod transaction;
mod tree;
mod tuned;

pub use backup::BackupReport;
pub use batch::Batch;
pub use bytes::IntoBytes;
pub use check::CheckReport;
#[doc(hidden)]
pub use check::{FileMap, Region};
pub use db::{lock_path, wal_path, Db, MAX_VALUE_LEN};
pub use error::{Error, Result};
pub use events::{Event, EventListener};
pub use index::bepsilon::{BEpsilonOptions, Compression};
pub use index::TreeKind;
pub use merge::{builtin_merge_operator, AddU64, Append, BUILTIN_MERGE_OPERATORS};
pub use options::{
    DeltaFlush, Durability, MergeOperator, Options, DIRTY_PERCENT_DEFAULT, MAX_PAGE_SIZE,
    MIN_PAGE_SIZE, READ_AHEAD_DEFAULT_PAGES, WAL_LIMIT_DEFAULT, WAL_LIMIT_MIN_BYTES,
};
pub use snapshot::{Snapshot, SnapshotTree};
pub use stats::{LevelReads, Stats, TreeStats};
pub use store::superblock::FORMAT_VERSION;
pub use transaction::{Transaction, TxIter};
pub use tree::{Iter, Tree};
pub use tuned::{
    sidecar_path, Tuned, TunedBEpsilon, TunedKind, TunedSource, TUNED_FILE, TUNED_SCHEMA,
};

/// Longest key a B+tree accepts with `page_size` pages.
pub fn max_key_len(page_size: usize) -> usize {
    index::max_key_bytes(TreeKind::default(), page_size)
}
