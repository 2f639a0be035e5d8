//! Snapshots: a consistent, read-only view of every tree at one commit
//! (docs/design.md, "Snapshots"). Taking one copies three shared pointers
//! under the state lock's read side; writers then copy what they change
//! while it lives, and pages it can still read are not reused until it ends.

use crate::db::{check_tree_name, Db};
use crate::error::Result;
use crate::index::TreeKind;
use crate::tree::{Iter, Reads};
use std::ops::RangeBounds;
use std::sync::Arc;

/// Every tree as it was at one commit. Cheap to take and to clone (clones
/// share one snapshot); dropping the last clone ends it. Reads through it
/// never wait for writers and writers never wait for it.
///
/// Every read fails with `Error::Closed` once the Db is closed, and with
/// `Error::SnapshotTooOld` once older than `Options::snapshot_max_age`.
#[derive(Clone)]
pub struct Snapshot {
    db: Db,
    at: Arc<crate::index::Frozen>,
}

impl Db {
    /// A snapshot of every tree, at the latest commit applied.
    pub fn snapshot(&self) -> Result<Snapshot> {
        self.inner.check_open()?;
        let at = self.inner.ix.freeze(self.inner.snapshot_max_age);
        Ok(Snapshot {
            db: self.clone(),
            at,
        })
    }
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Snapshot(epoch {})", self.at.epoch.pin.epoch)
    }
}

impl Snapshot {
    /// Tree `name` as of the snapshot (empty if it did not exist then).
    pub fn tree(&self, name: &str) -> Result<SnapshotTree> {
        check_tree_name(name)?;
        Ok(SnapshotTree {
            reads: self.reads(Arc::from(name)),
        })
    }

    pub(crate) fn reads(&self, name: Arc<str>) -> Reads {
        Reads {
            inner: self.db.inner.clone(),
            at: self.at.clone(),
            name,
        }
    }

    /// Names of the trees that existed.
    pub fn tree_names(&self) -> Vec<String> {
        let trees = &self.at.epoch.trees.0;
        trees.keys().map(|k| k.to_string()).collect()
    }

    /// The kind of tree `name`, if it existed.
    pub fn tree_kind(&self, name: &str) -> Option<TreeKind> {
        self.at.epoch.trees.get(name).map(|d| d.kind())
    }

    /// The Db the snapshot was taken of.
    pub fn db(&self) -> &Db {
        &self.db
    }
}

/// One tree of a [`Snapshot`]: the read calls of [`crate::Tree`], all at
/// the snapshot's commit.
#[derive(Clone)]
pub struct SnapshotTree {
    reads: Reads,
}

impl std::fmt::Debug for SnapshotTree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SnapshotTree({:?})", self.reads.name)
    }
}

impl SnapshotTree {
    pub fn name(&self) -> &str {
        &self.reads.name
    }

    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.reads.get(key.as_ref())
    }

    pub fn contains(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        self.reads.contains(key.as_ref())
    }

    /// The values of `keys` in this snapshot, in their order (as
    /// [`crate::Tree::get_many`]).
    pub fn get_many<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        let keys: Vec<&[u8]> = keys.iter().map(|k| k.as_ref()).collect();
        self.reads.get_many(&keys)
    }

    /// Number of entries (as [`crate::Tree::len`]).
    pub fn len(&self) -> u64 {
        self.reads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entries with keys in `range`, in key order; `.rev()` for descending.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter {
        self.reads.range(range)
    }

    pub fn iter(&self) -> Iter {
        self.reads.range::<&[u8], _>(..)
    }

    /// Entries whose key starts with `prefix`.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Iter {
        self.reads.prefix(prefix)
    }

    pub fn first(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.iter().next().transpose()
    }

    pub fn last(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.iter().next_back().transpose()
    }
}
