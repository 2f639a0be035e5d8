//! Named trees: the public handle. Every call checks that the Db is open,
//! then goes to the index layer (reads) or to group commit (writes).

use crate::bytes::IntoBytes;
use crate::db::{check_tree_name, Db, Inner};
use crate::error::{Error, Result};
pub(crate) use crate::index::in_range;
use crate::index::{Cursor, Frozen, KindHint, TreeKind};
use crate::log::Op;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

/// A named, ordered map from byte keys to byte values.
#[derive(Clone)]
pub struct Tree {
    inner: Arc<Inner>,
    name: Arc<str>,
    /// The tree's kind as this handle's reads last found it.
    kind: KindHint,
}

impl Db {
    /// A handle on the B+tree `name`; a B+tree of that name is created by
    /// its first write. Use [`Db::tree_with`] for another kind.
    pub fn tree(&self, name: &str) -> Result<Tree> {
        check_tree_name(name)?;
        self.inner.check_open()?;
        Ok(Tree::new(self.inner.clone(), Arc::from(name)))
    }

    /// A handle on tree `name` of `kind`, created now (durably, like a
    /// commit) if it does not exist; `Error::TreeKind` if it exists with
    /// another kind.
    pub fn tree_with(&self, name: &str, kind: TreeKind) -> Result<Tree> {
        let t = self.tree(name)?;
        kind.validate()?;
        t.kind.set_bepsilon(matches!(kind, TreeKind::BEpsilon(_)));
        let found = self.tree_kind(name);
        match found {
            Some(k) if k.code() == kind.code() => Ok(t),
            Some(k) => Err(Error::TreeKind {
                name: name.to_string(),
                found: k,
                wanted: kind,
            }),
            None => {
                let op = Op::CreateTree {
                    tree: Arc::from(name),
                    kind: kind.code(),
                    params: kind.params(),
                };
                self.inner.commit(vec![op])?;
                Ok(t)
            }
        }
    }
}

impl AsRef<str> for Tree {
    fn as_ref(&self) -> &str {
        &self.name
    }
}

impl std::fmt::Debug for Tree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tree({:?})", self.name)
    }
}

impl Tree {
    pub(crate) fn new(inner: Arc<Inner>, name: Arc<str>) -> Self {
        Self {
            inner,
            name,
            kind: KindHint::default(),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.inner.check_open()?;
        self.inner
            .ix
            .get(None, &self.name, key.as_ref(), &self.kind)
    }

    pub fn contains(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        self.inner.check_open()?;
        self.inner
            .ix
            .contains(None, &self.name, key.as_ref(), &self.kind)
    }

    /// The values of `keys`, in their order: for each key what
    /// [`Tree::get`] answers (duplicates and missing keys allowed; no keys,
    /// no values). The pages the batch misses are read through one queue
    /// per tree level instead of one read at a time (docs/design.md,
    /// "Batched gets").
    pub fn get_many<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        self.inner.check_open()?;
        let keys: Vec<&[u8]> = keys.iter().map(|k| k.as_ref()).collect();
        self.inner.ix.get_many(None, &self.name, &keys)
    }

    /// The reads of a snapshot of this tree taken now: iterators read
    /// through one (docs/design.md, "Snapshots").
    fn frozen(&self) -> Reads {
        Reads {
            inner: self.inner.clone(),
            at: self.inner.ix.freeze(self.inner.snapshot_max_age),
            name: self.name.clone(),
        }
    }

    /// Sets `key` to `value` (one-operation batch; owned bytes move in,
    /// borrowed ones are copied: [`crate::IntoBytes`]).
    pub fn insert(&self, key: impl IntoBytes, value: impl IntoBytes) -> Result<()> {
        self.inner.commit(vec![Op::Put {
            tree: self.name.clone(),
            key: key.into_bytes(),
            value: value.into_bytes(),
        }])
    }

    /// Merges `operand` into the value of `key` with the Db's merge operator
    /// (`Options::merge_operator`), without reading it: B-epsilon trees only
    /// (docs/design.md, "B-epsilon nodes", merge operator).
    pub fn upsert(&self, key: impl IntoBytes, operand: impl IntoBytes) -> Result<()> {
        self.inner.commit(vec![Op::Upsert {
            tree: self.name.clone(),
            key: key.into_bytes(),
            operand: operand.into_bytes(),
        }])
    }

    /// Removes `key` if present.
    pub fn remove(&self, key: impl IntoBytes) -> Result<()> {
        self.inner.commit(vec![Op::Remove {
            tree: self.name.clone(),
            key: key.into_bytes(),
        }])
    }

    /// Number of entries (0 once the Db is closed). A B-epsilon tree counts
    /// them by iterating a snapshot (messages above its leaves may add or
    /// remove keys), stopping at the first read error.
    pub fn len(&self) -> u64 {
        self.frozen().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entries with keys in `range`, in key order; `.rev()` for descending.
    /// The iterator reads a snapshot taken now: it sees no write committed
    /// after this call.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter {
        self.frozen().range(range)
    }

    /// All entries in key order (a snapshot's, as [`Tree::range`]).
    pub fn iter(&self) -> Iter {
        self.frozen().range::<&[u8], _>(..)
    }

    /// Entries whose key starts with `prefix` (a snapshot's).
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Iter {
        self.frozen().prefix(prefix)
    }

    pub fn first(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.iter().next().transpose()
    }

    pub fn last(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.iter().next_back().transpose()
    }
}

/// The reads of one tree in one snapshot: what [`Tree`]'s iterators and
/// [`crate::SnapshotTree`] share.
#[derive(Clone)]
pub(crate) struct Reads {
    pub inner: Arc<Inner>,
    pub at: Arc<Frozen>,
    pub name: Arc<str>,
}

impl Reads {
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.check_open()?;
        // A snapshot knows its trees' kinds: no hint to keep.
        let hint = KindHint::default();
        self.inner.ix.get(Some(&self.at), &self.name, key, &hint)
    }

    pub fn contains(&self, key: &[u8]) -> Result<bool> {
        self.inner.check_open()?;
        let hint = KindHint::default();
        self.inner
            .ix
            .contains(Some(&self.at), &self.name, key, &hint)
    }

    pub fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        self.inner.check_open()?;
        self.inner.ix.get_many(Some(&self.at), &self.name, keys)
    }

    /// Entries (0 once the Db is closed; a B-epsilon tree counts them by
    /// iterating, stopping at the first read error).
    pub fn len(&self) -> u64 {
        let (entries, counted) = match self.at.epoch.trees.get(&self.name) {
            Some(crate::index::Desc::BEpsilon(_)) => (0, true),
            d => (d.map_or(0, |d| d.entries()), false),
        };
        if !counted || self.inner.check_open().is_err() {
            return entries;
        }
        self.range::<&[u8], _>(..).map_while(|r| r.ok()).count() as u64
    }

    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter {
        let own = |b: Bound<&K>| match b {
            Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
            Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
            Bound::Unbounded => Bound::Unbounded,
        };
        Iter::new(
            self.clone(),
            own(range.start_bound()),
            own(range.end_bound()),
        )
    }

    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Iter {
        let p = prefix.as_ref().to_vec();
        let hi = match prefix_successor(&p) {
            Some(s) => Bound::Excluded(s),
            None => Bound::Unbounded,
        };
        Iter::new(self.clone(), Bound::Included(p), hi)
    }
}

/// The smallest key greater than every key starting with `p`.
pub(crate) fn prefix_successor(p: &[u8]) -> Option<Vec<u8>> {
    let mut s = p.to_vec();
    while let Some(last) = s.pop() {
        if last < 0xff {
            s.push(last + 1);
            return Some(s);
        }
    }
    None
}

/// Ordered iterator over a key range of a tree, both directions, reading
/// one snapshot (taken when it was made) and holding no lock between calls
/// (docs/design.md, "Snapshots").
pub struct Iter {
    reads: Reads,
    cursor: Cursor,
    failed: bool,
}

impl Iter {
    fn new(reads: Reads, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) -> Self {
        let cursor = Cursor::new(&reads.inner.ix, Some(&reads.at), reads.name.clone(), lo, hi);
        Self {
            reads,
            cursor,
            failed: false,
        }
    }

    fn step(&mut self, forward: bool) -> Option<Result<(&[u8], &[u8])>> {
        if self.failed {
            return None;
        }
        if let Err(e) = self.reads.inner.check_open() {
            self.failed = true;
            return Some(Err(e));
        }
        let r = self
            .cursor
            .step(&self.reads.inner.ix, Some(&self.reads.at), forward);
        self.failed = matches!(r, Some(Err(_)));
        r
    }

    /// The next entry in key order, borrowed from the iterator until its
    /// next call: nothing is allocated for it, where [`Iterator::next`]
    /// copies its key and value into a `Vec` each. For scans that look at
    /// an entry and move on:
    ///
    /// ```no_run
    /// # fn f(tree: &pagewise::Tree) -> pagewise::Result<()> {
    /// let mut entries = tree.range(&b"user:"[..]..);
    /// while let Some(entry) = entries.next_ref() {
    ///     let (key, value) = entry?;
    ///     println!("{} bytes under {key:?}", value.len());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn next_ref(&mut self) -> Option<Result<(&[u8], &[u8])>> {
        self.step(true)
    }

    /// The next entry from the back, in descending key order, borrowed as
    /// [`Iter::next_ref`]'s.
    pub fn next_back_ref(&mut self) -> Option<Result<(&[u8], &[u8])>> {
        self.step(false)
    }
}

/// An entry copied out of the iterator's arena for [`Iterator`]'s items.
fn owned(r: Option<Result<(&[u8], &[u8])>>) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
    r.map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
}

impl Iterator for Iter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        owned(self.step(true))
    }
}

impl DoubleEndedIterator for Iter {
    fn next_back(&mut self) -> Option<Self::Item> {
        owned(self.step(false))
    }
}

#[cfg(test)]
mod tests {
    use crate::{BEpsilonOptions, Db, Options, TreeKind};

    /// A handle's kind hint only orders the reads: a handle made before its
    /// tree existed, and handles whose hint is wrong either way, get and
    /// find what the tree holds, and the first read corrects the hint.
    #[test]
    fn a_wrong_kind_hint_costs_a_read_not_an_answer() {
        let d = tempfile::tempdir().unwrap();
        let db = Db::open_or_create(d.path().join("db.pw"), Options::default()).unwrap();
        let early = db.tree("be").unwrap(); // hint: B+tree, no tree yet
        assert_eq!(early.get(b"k").unwrap(), None);
        let be = db
            .tree_with("be", TreeKind::BEpsilon(BEpsilonOptions::default()))
            .unwrap();
        assert!(be.kind.bepsilon());
        be.insert(b"k", b"v1").unwrap();
        assert_eq!(early.get(b"k").unwrap().as_deref(), Some(&b"v1"[..]));
        assert!(early.kind.bepsilon(), "corrected by the get");
        let bt = db.tree("bt").unwrap();
        bt.insert(b"k", b"v2").unwrap();
        bt.kind.set_bepsilon(true); // wrong the other way
        assert_eq!(bt.get(b"k").unwrap().as_deref(), Some(&b"v2"[..]));
        assert!(!bt.kind.bepsilon(), "corrected by the get");
        bt.kind.set_bepsilon(true);
        assert!(bt.contains(b"k").unwrap() && !bt.contains(b"x").unwrap());
        early.kind.set_bepsilon(false);
        assert!(early.contains(b"k").unwrap() && !early.contains(b"x").unwrap());
        let absent = db.tree("none").unwrap();
        absent.kind.set_bepsilon(true);
        assert_eq!(absent.get(b"k").unwrap(), None);
        assert!(!absent.contains(b"k").unwrap());
        let snap = db.snapshot().unwrap();
        assert_eq!(
            snap.tree("be").unwrap().get(b"k").unwrap().as_deref(),
            Some(&b"v1"[..])
        );
        assert_eq!(
            snap.tree("bt").unwrap().get(b"k").unwrap().as_deref(),
            Some(&b"v2"[..])
        );
    }
}
