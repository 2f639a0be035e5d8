//! The database: orchestration only. Opening and recovery ([`open`]), group
//! commit ([`commit`]) and checkpoints ([`checkpoint`]) over the node store
//! ([`crate::store`]), the log ([`crate::log`]) and the index layer
//! ([`crate::index`]), which do the work.

mod checkpoint;
mod commit;
mod files;
mod open;

pub(crate) use commit::Validate;
pub use files::{lock_path, wal_path};

use crate::batch::Batch;
use crate::error::{Error, Result};
use crate::index::{Index, TreeKind};
use crate::log::Wal;
use crate::options::{Durability, Options};
use crate::store::extent::Extent;
use pagewise_io::{IoStats, LockGuard};
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Largest value accepted (values that do not fit a leaf go to extents).
pub const MAX_VALUE_LEN: usize = 1 << 30;

/// Owned by the commit leader (the holder of `Inner::commit`).
struct CommitState {
    wal: Wal,
    gen: u64,
    lsn: u64,
    /// The LSN the durable checkpoint covers: equal to `lsn` when nothing
    /// was committed since, so closing has nothing to write.
    ckpt_lsn: u64,
    /// The durable checkpoint's catalog (freed by the next checkpoint).
    catalog: Option<Extent>,
    /// `delta_consolidations` when the last checkpoint began: the next
    /// one's `Event::CheckpointBegin` reports what came since.
    consolidations_at_ckpt: u64,
}

#[derive(Default)]
pub struct Counters {
    pub commits: AtomicU64,
    pub groups: AtomicU64,
    pub checkpoints: AtomicU64,
    pub write_backs: AtomicU64,
    pub replayed: AtomicU64,
}

pub struct IoCats {
    pub wal: Arc<IoStats>,
    pub pages: Arc<IoStats>,
    pub meta: Arc<IoStats>,
}

pub struct Inner {
    pub path: PathBuf,
    pub durability: Durability,
    pub direct: bool,
    pub read_only: bool,
    wal_limit_bytes: u64,
    dirty_limit_bytes: u64,
    /// `Options::snapshot_max_age`.
    pub snapshot_max_age: Option<std::time::Duration>,
    /// `Options::fs`: where a backup's copy goes too.
    pub fs: Arc<dyn pagewise_io::Fs>,
    pub ix: Index,
    commit: Mutex<CommitState>,
    queue: Mutex<Vec<commit::Pending>>,
    poison: Mutex<Option<String>>,
    pub io: IoCats,
    pub counters: Counters,
    /// Set by `Db::close` (under the commit lock): every later call fails
    /// with `Error::Closed`.
    closed: AtomicBool,
    /// The file lock, released by `Db::close`.
    lock: Mutex<Option<Box<dyn LockGuard>>>,
}

/// An open database. Cheap to clone; all clones share one instance.
///
/// Lifetime: [`Db::close`] checkpoints, releases the file lock and closes
/// every clone and every [`crate::Tree`] and iterator made from it: their calls
/// return [`Error::Closed`] from then on, and the path can be opened again
/// at once. Dropping the last handle without `close` checkpoints too.
#[derive(Clone)]
pub struct Db {
    pub(crate) inner: Arc<Inner>,
}

impl Db {
    /// Creates a new database at `path` (which must not exist), plus its
    /// sidecar files `PATH-wal` and `PATH-lock`.
    pub fn create(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        open::create(path.as_ref(), opts)
    }

    /// Opens an existing database, replaying its write-ahead log. A file of
    /// format version 1 is upgraded to version 2 by its first read-write
    /// open (the checkpoint every open ends with writes the new format).
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        open::open(path.as_ref(), opts)
    }

    /// Opens `path` if it exists, else creates it.
    pub fn open_or_create(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        if opts.fs.exists(path.as_ref()) {
            Self::open(path, opts)
        } else {
            Self::create(path, opts)
        }
    }

    /// Names of the trees that exist (created explicitly or by a write).
    pub fn tree_names(&self) -> Vec<String> {
        let st = self.inner.ix.store.state.read();
        st.trees.0.keys().map(|k| k.to_string()).collect()
    }

    /// The kind of tree `name`, if it exists.
    pub fn tree_kind(&self, name: &str) -> Option<TreeKind> {
        self.inner
            .ix
            .store
            .state
            .read()
            .trees
            .get(name)
            .map(|d| d.kind())
    }

    /// Applies every write in `batch` atomically: after a crash either all or
    /// none of them are present, and readers never see part of it.
    pub fn apply(&self, batch: Batch) -> Result<()> {
        self.inner.commit(batch.ops)
    }

    /// Makes every acknowledged write durable (Buffered mode's explicit sync).
    pub fn sync(&self) -> Result<()> {
        self.inner.sync()
    }

    /// Moves every message buffered in the B-epsilon trees down to their
    /// leaves, then checkpoints. A replaced or removed value's space comes
    /// back only once the newer message reaches the level holding the old
    /// one (docs/design.md, "B-epsilon packed values"); a drain brings it
    /// all back at once, at the cost of rewriting every node that buffered
    /// something.
    pub fn drain(&self) -> Result<()> {
        self.inner.drain()
    }

    /// Writes all dirty pages and a new superblock; empties the log.
    pub fn checkpoint(&self) -> Result<()> {
        self.inner.check_open()?;
        self.inner.checkpoint()
    }

    pub fn page_size(&self) -> usize {
        self.inner.ix.store.page_size()
    }

    /// Longest key a tree of the default kind (a B+tree) accepts at this
    /// page size.
    pub fn max_key_len(&self) -> usize {
        crate::index::max_key_bytes(TreeKind::default(), self.page_size())
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Checkpoints (if anything was written since the last checkpoint),
    /// releases the file lock and closes every handle (see [`Db`]). The Db
    /// is closed even if the checkpoint fails: what was acknowledged is in
    /// the log, and the next open recovers it.
    pub fn close(self) -> Result<()> {
        self.inner.close()
    }

    /// True when opened with [`Options::read_only`].
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only
    }
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("path", &self.inner.path)
            .field("page_size", &self.page_size())
            .field("read_only", &self.inner.read_only)
            .finish()
    }
}

pub(crate) fn check_tree_name(name: &str) -> Result<()> {
    let bad = |why| {
        Err(Error::TreeName {
            name: name.to_string(),
            why,
        })
    };
    if name.is_empty() {
        return bad("it is empty");
    }
    if name.len() > 255 {
        return bad("it is longer than 255 bytes");
    }
    Ok(())
}

impl Drop for Inner {
    fn drop(&mut self) {
        if !self.closed.load(Ordering::Acquire) && !std::thread::panicking() {
            let _ = self.close_checkpoint();
        }
    }
}

impl Inner {
    /// `Error::Closed` once `Db::close` ran.
    #[inline]
    pub fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed {
                path: self.path.clone(),
            });
        }
        Ok(())
    }

    /// Marks the Db closed under the commit lock (so no commit is half
    /// way), checkpoints what is dirty, then releases the file lock.
    /// After the close checkpoint: the log file's stale tail becomes a
    /// hole (`Wal::punch_stale`). Advice: an error is counted, not raised.
    fn punch_log(&self, cs: &CommitState) {
        if self.read_only || cs.wal.bytes != 0 {
            return;
        }
        if cs.wal.punch_stale().is_err() {
            self.ix.store.punch_errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn close(&self) -> Result<()> {
        let r = {
            let mut cs = self.commit.lock();
            if self.closed.swap(true, Ordering::AcqRel) {
                return Err(Error::Closed {
                    path: self.path.clone(),
                });
            }
            self.close_checkpoints(&mut cs)
        };
        let released = self.lock.lock().take();
        assert!(released.is_some(), "the lock is released once");
        drop(released);
        r
    }

    pub fn poison(&self, reason: String) {
        let mut p = self.poison.lock();
        if p.is_none() {
            *p = Some(reason);
        }
    }

    fn check_writable(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly {
                path: self.path.clone(),
            });
        }
        Ok(())
    }

    pub fn check_poison(&self) -> Result<()> {
        match &*self.poison.lock() {
            Some(reason) => Err(Error::Poisoned {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    pub fn poisoned(&self) -> Option<String> {
        self.poison.lock().clone()
    }

    pub fn wal_bytes(&self) -> u64 {
        self.commit.lock().wal.bytes
    }
}
