//! Write transactions (docs/design.md, "Transactions"): optimistic, like
//! RocksDB's OptimisticTransactionDB. A transaction reads a snapshot taken
//! when it began plus its own writes, records what it read (keys, and the
//! part of each range it consumed), and buffers its writes. `commit`
//! validates under the commit lock that everything it read is unchanged in
//! the live trees (value by value), then logs and applies its writes as one
//! batch through group commit; a change it read gives `Error::Conflict` and
//! writes nothing. Dropping it aborts: nothing reaches the log or the trees.
//! Serializable: a committed transaction read what it would have read at
//! its commit, where its writes land.

use crate::bytes::IntoBytes;
use crate::db::{Db, Validate};
use crate::error::{Error, Result};
use crate::log::Op;
use crate::snapshot::Snapshot;
use crate::tree::Iter;
use parking_lot::Mutex;
use std::collections::{BTreeMap, VecDeque};
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

/// A write of the transaction not yet committed, as its reads see it.
#[derive(Debug, Clone)]
enum Base {
    /// The key's value in the snapshot, then the operands.
    Snapshot,
    /// Put (Some) or removed (None) in this transaction, then the operands.
    Set(Option<Vec<u8>>),
}

#[derive(Debug, Clone)]
struct Overlay {
    base: Base,
    operands: Vec<Vec<u8>>,
}

/// A range read and how much of it was consumed: from the front up to
/// `front` (inclusive bound) and from the back down to `back`.
#[derive(Debug, Clone)]
pub(crate) struct RangeRead {
    pub tree: Arc<str>,
    pub lo: Bound<Vec<u8>>,
    pub hi: Bound<Vec<u8>>,
    pub front: Option<Bound<Vec<u8>>>,
    pub back: Option<Bound<Vec<u8>>>,
}

/// What a transaction read: validated at commit against the live trees.
#[derive(Default)]
pub(crate) struct ReadSet {
    pub keys: Vec<(Arc<str>, Vec<u8>)>,
    pub ranges: Vec<Arc<Mutex<RangeRead>>>,
}

/// A write transaction: reads of one snapshot plus its own writes, then
/// [`Transaction::commit`] or drop (abort). Use it from one thread at a time
/// (it is `Send`); several transactions run side by side.
pub struct Transaction {
    snap: Snapshot,
    overlay: BTreeMap<(Arc<str>, Vec<u8>), Overlay>,
    ops: Vec<Op>,
    reads: Mutex<ReadSet>,
}

impl Db {
    /// Begins a write transaction reading the latest commit.
    pub fn transaction(&self) -> Result<Transaction> {
        Ok(Transaction {
            snap: self.snapshot()?,
            overlay: BTreeMap::new(),
            ops: Vec::new(),
            reads: Mutex::new(ReadSet::default()),
        })
    }
}

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Transaction({:?}, {} writes)", self.snap, self.ops.len())
    }
}

impl Transaction {
    /// The snapshot the transaction reads (without its own writes).
    pub fn snapshot(&self) -> &Snapshot {
        &self.snap
    }

    /// Writes buffered so far.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The value of `key` in `tree` as this transaction sees it.
    pub fn get(&self, tree: impl AsRef<str>, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let (tree, key) = (tree.as_ref(), key.as_ref());
        let o = self.overlay.get(&(Arc::from(tree), key.to_vec()));
        match o {
            Some(Overlay {
                base: Base::Set(v),
                operands,
            }) if operands.is_empty() => Ok(v.clone()),
            Some(o) => {
                let base = self.base_value(tree, key, &o.base)?;
                self.merge(tree, key, base, &o.operands)
            }
            None => self.snapshot_get(tree, key),
        }
    }

    pub fn contains(&self, tree: impl AsRef<str>, key: impl AsRef<[u8]>) -> Result<bool> {
        Ok(self.get(tree, key)?.is_some())
    }

    fn snapshot_get(&self, tree: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let v = self.snap.tree(tree)?.get(key)?;
        self.reads.lock().keys.push((Arc::from(tree), key.to_vec()));
        Ok(v)
    }

    fn base_value(&self, tree: &str, key: &[u8], base: &Base) -> Result<Option<Vec<u8>>> {
        match base {
            Base::Set(v) => Ok(v.clone()),
            Base::Snapshot => self.snapshot_get(tree, key),
        }
    }

    fn merge(
        &self,
        tree: &str,
        key: &[u8],
        base: Option<Vec<u8>>,
        operands: &[Vec<u8>],
    ) -> Result<Option<Vec<u8>>> {
        if operands.is_empty() {
            return Ok(base);
        }
        let Some(op) = self.snap.db().inner.ix.merge.as_deref() else {
            return Err(Error::NoMergeOperator {
                tree: tree.to_string(),
            });
        };
        let ops: Vec<&[u8]> = operands.iter().map(|o| o.as_slice()).collect();
        Ok(Some(op.full_merge(key, base.as_deref(), &ops)))
    }

    /// Sets `key` to `value` in `tree` when the transaction commits (owned
    /// bytes move in, borrowed ones are copied: [`crate::IntoBytes`]).
    pub fn insert(&mut self, tree: impl AsRef<str>, key: impl IntoBytes, value: impl IntoBytes) {
        let (tree, key, value) = (
            Arc::<str>::from(tree.as_ref()),
            key.into_bytes(),
            value.into_bytes(),
        );
        let o = Overlay {
            base: Base::Set(Some(value.clone())),
            operands: Vec::new(),
        };
        self.overlay.insert((tree.clone(), key.clone()), o);
        self.ops.push(Op::Put { tree, key, value });
    }

    /// Removes `key` from `tree` when the transaction commits.
    pub fn remove(&mut self, tree: impl AsRef<str>, key: impl IntoBytes) {
        let (tree, key) = (Arc::<str>::from(tree.as_ref()), key.into_bytes());
        let o = Overlay {
            base: Base::Set(None),
            operands: Vec::new(),
        };
        self.overlay.insert((tree.clone(), key.clone()), o);
        self.ops.push(Op::Remove { tree, key });
    }

    /// Merges `operand` into `key` of B-epsilon tree `tree` when the
    /// transaction commits (as `Tree::upsert`), without reading it: a
    /// blind write that never conflicts. Reads of the key in the
    /// transaction apply the merge operator to what they see.
    pub fn upsert(&mut self, tree: impl AsRef<str>, key: impl IntoBytes, operand: impl IntoBytes) {
        let (tree, key, operand) = (
            Arc::<str>::from(tree.as_ref()),
            key.into_bytes(),
            operand.into_bytes(),
        );
        let o = self
            .overlay
            .entry((tree.clone(), key.clone()))
            .or_insert(Overlay {
                base: Base::Snapshot,
                operands: Vec::new(),
            });
        o.operands.push(operand.clone());
        self.ops.push(Op::Upsert { tree, key, operand });
    }

    /// Entries of `tree` with keys in `range` as the transaction sees them
    /// (the snapshot's, with its own writes over them), in key order;
    /// `.rev()` for descending. What the iterator returns is what the
    /// transaction read: a commit conflicts if any of it changed, or if a
    /// key appeared in the consumed part of the range.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        tree: impl AsRef<str>,
        range: R,
    ) -> Result<TxIter> {
        let own = |b: Bound<&K>| match b {
            Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
            Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
            Bound::Unbounded => Bound::Unbounded,
        };
        self.range_owned(
            tree.as_ref(),
            own(range.start_bound()),
            own(range.end_bound()),
        )
    }

    /// Entries whose key starts with `prefix` (as [`Transaction::range`]).
    pub fn prefix(&self, tree: impl AsRef<str>, prefix: impl AsRef<[u8]>) -> Result<TxIter> {
        let p = prefix.as_ref().to_vec();
        let hi = match crate::tree::prefix_successor(&p) {
            Some(s) => Bound::Excluded(s),
            None => Bound::Unbounded,
        };
        self.range_owned(tree.as_ref(), Bound::Included(p), hi)
    }

    fn range_owned(&self, tree: &str, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) -> Result<TxIter> {
        let name: Arc<str> = Arc::from(tree);
        let snap = self
            .snap
            .reads(name.clone())
            .range((lo.clone(), hi.clone()));
        let mut mine = VecDeque::new();
        let start = (name.clone(), Vec::new());
        for ((t, k), o) in self.overlay.range(start..) {
            if *t != name {
                break;
            }
            if !crate::tree::in_range(k, &lo, &hi) {
                continue;
            }
            let base = self.base_value(tree, k, &o.base)?;
            mine.push_back((k.clone(), self.merge(tree, k, base, &o.operands)?));
        }
        let read = Arc::new(Mutex::new(RangeRead {
            tree: name,
            lo,
            hi,
            front: None,
            back: None,
        }));
        self.reads.lock().ranges.push(read.clone());
        Ok(TxIter {
            snap,
            mine,
            peek_front: None,
            peek_back: None,
            read,
            failed: false,
        })
    }

    /// Validates what the transaction read against the live trees and, if
    /// nothing changed, logs and applies its writes atomically under the
    /// Db's durability. `Error::Conflict` (nothing written) if something it
    /// read changed since its snapshot: run it again.
    pub fn commit(self) -> Result<()> {
        let reads = std::mem::take(&mut *self.reads.lock());
        let inner = self.snap.db().inner.clone();
        if self.ops.is_empty() {
            return inner.check_open();
        }
        let snap = self.snap;
        let check: Validate = Box::new(move |earlier: &[&Op]| validate(&snap, &reads, earlier));
        inner.commit_checked(self.ops, Some(check))
    }

    /// Ends the transaction without writing anything (as dropping it does).
    pub fn abort(self) {}
}

/// Ordered iterator of a transaction's view of a key range, both
/// directions: the snapshot's entries merged with the transaction's writes.
pub struct TxIter {
    snap: Iter,
    /// The transaction's writes in the range, resolved (None: removed).
    mine: VecDeque<(Vec<u8>, Option<Vec<u8>>)>,
    peek_front: Option<(Vec<u8>, Vec<u8>)>,
    peek_back: Option<(Vec<u8>, Vec<u8>)>,
    read: Arc<Mutex<RangeRead>>,
    failed: bool,
}

type Kv = (Vec<u8>, Vec<u8>);

impl TxIter {
    /// The snapshot's next entry from one end (what the other end peeked
    /// when they met).
    fn snap_next(&mut self, forward: bool) -> Result<Option<Kv>> {
        let (mine, other) = if forward {
            (&mut self.peek_front, &mut self.peek_back)
        } else {
            (&mut self.peek_back, &mut self.peek_front)
        };
        if mine.is_none() {
            let got = if forward {
                self.snap.next()
            } else {
                self.snap.next_back()
            };
            *mine = match got {
                Some(r) => Some(r?),
                None => other.take(),
            };
        }
        Ok(mine.clone())
    }

    fn step(&mut self, forward: bool) -> Result<Option<Kv>> {
        let bound = self.mine.len();
        for _ in 0..=bound {
            let s = self.snap_next(forward)?;
            let m = if forward {
                self.mine.front()
            } else {
                self.mine.back()
            };
            let take_mine = match (&s, m) {
                (None, None) => return Ok(None),
                (Some(_), None) => false,
                (None, Some(_)) => true,
                (Some(s), Some(m)) => (forward && m.0 <= s.0) || (!forward && m.0 >= s.0),
            };
            if !take_mine {
                return Ok(self.take_peek(forward));
            }
            let (k, v) = if forward {
                self.mine.pop_front()
            } else {
                self.mine.pop_back()
            }
            .expect("some");
            if s.as_ref().is_some_and(|s| s.0 == k) {
                self.take_peek(forward); // shadowed by the transaction's write
            }
            if let Some(v) = v {
                return Ok(Some((k, v)));
            }
        }
        unreachable!("a merge step consumes an entry")
    }

    fn take_peek(&mut self, forward: bool) -> Option<Kv> {
        if forward {
            self.peek_front.take()
        } else {
            self.peek_back.take()
        }
    }

    /// Records how far this end consumed: through `key`, or all of it.
    fn note(&self, forward: bool, key: Option<&[u8]>) {
        let mut r = self.read.lock();
        let to = match key {
            Some(k) => Bound::Included(k.to_vec()),
            None if forward => r.hi.clone(),
            None => r.lo.clone(),
        };
        if forward {
            r.front = Some(to);
        } else {
            r.back = Some(to);
        }
    }

    fn next_in(&mut self, forward: bool) -> Option<Result<Kv>> {
        if self.failed {
            return None;
        }
        match self.step(forward) {
            Ok(got) => {
                self.note(forward, got.as_ref().map(|kv| kv.0.as_slice()));
                got.map(Ok)
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

impl Iterator for TxIter {
    type Item = Result<Kv>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_in(true)
    }
}

impl DoubleEndedIterator for TxIter {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.next_in(false)
    }
}

/// Whether `key` of `tree` lies in the consumed part of range read `r`.
fn consumed(r: &RangeRead, tree: &str, key: &[u8]) -> bool {
    let front = r.front.as_ref().is_some_and(|f| in_range(key, &r.lo, f));
    let back = r.back.as_ref().is_some_and(|b| in_range(key, b, &r.hi));
    &*r.tree == tree && (front || back)
}

fn conflict(what: String) -> Error {
    Error::Conflict { what }
}

/// Requires the commit lock (no commit applies meanwhile). `earlier`: the
/// writes of the batches ahead in the same commit group, not applied yet.
/// Ok when everything `reads` recorded is the same in the live trees as in
/// `snap` and no earlier write of the group touches it.
fn validate(snap: &Snapshot, reads: &ReadSet, earlier: &[&Op]) -> Result<()> {
    for op in earlier {
        let Some(k) = op.key() else { continue };
        let t = op.tree();
        let read_key = reads.keys.iter().any(|(rt, rk)| rt == t && rk == k);
        if read_key || reads.ranges.iter().any(|r| consumed(&r.lock(), t, k)) {
            return Err(conflict(format!("key {k:?} of tree {t:?}")));
        }
    }
    let db = snap.db();
    for (t, k) in &reads.keys {
        let live = db
            .inner
            .ix
            .get(None, t, k, &crate::index::KindHint::default())?;
        if snap.reads(t.clone()).get(k)? != live {
            return Err(conflict(format!("key {k:?} of tree {t:?}")));
        }
    }
    for r in &reads.ranges {
        let r = r.lock().clone();
        let parts = [
            r.front.clone().map(|f| (r.lo.clone(), f)),
            r.back.clone().map(|b| (b, r.hi.clone())),
        ];
        for (lo, hi) in parts.into_iter().flatten() {
            let old = snap.reads(r.tree.clone()).range((lo.clone(), hi.clone()));
            let now = db.tree(&r.tree)?.range((lo, hi));
            if !same(old, now)? {
                return Err(conflict(format!("a range of tree {:?}", r.tree)));
            }
        }
    }
    Ok(())
}

/// Whether two iterators return the same entries.
fn same(mut a: Iter, mut b: Iter) -> Result<bool> {
    loop {
        match (a.next().transpose()?, b.next().transpose()?) {
            (None, None) => return Ok(true),
            (x, y) if x != y => return Ok(false),
            _ => {}
        }
    }
}

use crate::tree::in_range;
