//! Group commit (docs/design.md, "Concurrency"): the first committer to take
//! the commit lock writes and syncs the log for everyone queued, then applies
//! all their batches under one acquisition of the state write lock.

use super::{check_tree_name, CommitState, Inner, MAX_VALUE_LEN};
use crate::error::{Error, Result};
use crate::index::placed::{Out, Placed};
use crate::index::{self, TreeKind, Trees};
use crate::log::{self, Op};
use crate::options::Durability;
use parking_lot::Mutex;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Buffered mode writes the log tail once this much is pending.
const BUFFERED_FLUSH_BYTES: usize = 1 << 20;

/// A commit group with this many bytes of out-of-line values writes them
/// on a second thread while it logs (`log_and_apply`): below it they take
/// one write, not worth a thread.
const OVERLAP_VALUE_BYTES: usize = 1 << 20;

/// How a batch queued behind another thread's group commit failed.
#[derive(Clone)]
enum Failure {
    Group(String),
    Conflict(String),
}

type Slot = Arc<Mutex<Option<std::result::Result<(), Failure>>>>;

/// A transaction's check, run by the commit leader before logging
/// (`crate::transaction`): given the writes of the batches ahead of it in
/// the group (not applied yet), Ok if what it read is unchanged.
pub(crate) type Validate = Box<dyn FnOnce(&[&Op]) -> Result<()> + Send>;

pub(super) struct Pending {
    ops: Vec<Op>,
    slot: Slot,
    check: Option<Validate>,
}

impl Inner {
    /// Logs and applies `ops` atomically (one log record), returning once
    /// the durability mode's promise holds.
    pub fn commit(&self, ops: Vec<Op>) -> Result<()> {
        self.commit_checked(ops, None)
    }

    /// [`Inner::commit`] of a batch that `check` must accept first, under
    /// the commit lock: `Error::Conflict` (nothing written) otherwise.
    pub fn commit_checked(&self, mut ops: Vec<Op>, check: Option<Validate>) -> Result<()> {
        self.check_open()?;
        if ops.is_empty() {
            return Ok(());
        }
        self.check_writable()?;
        self.add_creates(&mut ops)?;
        self.check_poison()?;
        let slot: Slot = Arc::new(Mutex::new(None));
        self.queue.lock().push(Pending {
            ops,
            slot: slot.clone(),
            check,
        });
        let mut cs = self.commit.lock();
        self.check_open()?;
        if let Some(r) = slot.lock().take() {
            return r.map_err(|f| match f {
                Failure::Group(s) => Error::GroupCommit(s),
                Failure::Conflict(what) => Error::Conflict { what },
            });
        }
        let group = std::mem::take(&mut *self.queue.lock());
        assert!(
            group.iter().any(|p| Arc::ptr_eq(&p.slot, &slot)),
            "the leader's batch is in its group"
        );
        let (group, mine) = validate_group(group, &slot);
        if group.is_empty() {
            return mine; // the leader's transaction conflicted, alone
        }
        let mut r = self.commit_group(&mut cs, &group);
        if r.is_ok() && cs.wal.bytes >= self.wal_limit_bytes {
            r = self.checkpoint_locked(&mut cs);
        } else if r.is_ok() {
            r = self.relieve_dirty(&mut cs);
        }
        let shared = r
            .as_ref()
            .map(|_| ())
            .map_err(|e| Failure::Group(e.to_string()));
        for p in &group {
            if !Arc::ptr_eq(&p.slot, &slot) {
                *p.slot.lock() = Some(shared.clone());
            }
        }
        r.and(mine)
    }

    /// Validates `ops` and puts a create-tree op before the first put on a
    /// tree that does not exist yet, so the log says what kind it is.
    fn add_creates(&self, ops: &mut Vec<Op>) -> Result<()> {
        let ps = self.ix.store.page_size();
        let st = self.ix.store.state.read();
        // The common case, every op on an existing tree: validate in place.
        let mut total_bytes = 0usize;
        let mut all_exist = true;
        for op in ops.iter() {
            let kind = match (op, st.trees.get(op.tree())) {
                (Op::CreateTree { .. }, _) | (Op::Put { .. } | Op::Upsert { .. }, None) => {
                    all_exist = false;
                    break;
                }
                (_, Some(d)) => d.kind(),
                (Op::Remove { .. }, None) => TreeKind::default(),
            };
            check_tree_name(op.tree())?;
            total_bytes += self.check_op(op, kind, ps)?;
        }
        if !all_exist {
            total_bytes = self.insert_creates(&st.trees, ops, ps)?;
        }
        if total_bytes > u32::MAX as usize / 2 {
            return Err(Error::ValueTooLarge {
                len: total_bytes,
                max: u32::MAX as usize / 2,
            });
        }
        Ok(())
    }

    /// Validates the sizes in `op` on a tree of `kind`; returns the bytes it
    /// adds to the batch's record.
    fn check_op(&self, op: &Op, kind: TreeKind, page_size: usize) -> Result<usize> {
        validate(op, kind, page_size)?;
        if let Op::Upsert { tree, .. } = op {
            self.check_upsert(tree, kind)?;
        }
        Ok(op.user_bytes() + op.tree().len() + 16)
    }

    /// Rebuilds `ops` with a create-tree op before the first put or upsert on
    /// each tree that does not exist yet; returns the batch's record bytes.
    fn insert_creates(&self, trees: &Trees, ops: &mut Vec<Op>, page_size: usize) -> Result<usize> {
        let mut created: Vec<(Arc<str>, TreeKind)> = Vec::new();
        let mut out = Vec::with_capacity(ops.len() + 1);
        let mut total_bytes = 0usize;
        for op in ops.drain(..) {
            check_tree_name(op.tree())?;
            let kind = kind_of(trees, &created, &op)?;
            total_bytes += self.check_op(&op, kind, page_size)?;
            let exists =
                trees.get(op.tree()).is_some() || created.iter().any(|c| &c.0 == op.tree());
            match &op {
                Op::CreateTree { tree, .. } => created.push((tree.clone(), kind)),
                Op::Put { tree, .. } | Op::Upsert { tree, .. } if !exists => {
                    out.push(Op::CreateTree {
                        tree: tree.clone(),
                        kind: kind.code(),
                        params: kind.params(),
                    });
                    created.push((tree.clone(), kind));
                }
                _ => {}
            }
            out.push(op);
        }
        assert!(out.len() >= created.len());
        *ops = out;
        Ok(total_bytes)
    }

    /// An upsert needs a tree kind that takes them and a registered merge
    /// operator.
    fn check_upsert(&self, tree: &str, kind: TreeKind) -> Result<()> {
        kind.check_upsert(tree)?;
        if self.ix.merge.is_none() {
            return Err(Error::Unsupported {
                what: format!("upsert on tree {tree:?}: no merge operator is registered (Options::merge_operator)"),
            });
        }
        Ok(())
    }

    /// Requires the commit lock. Effect: when the dirty set has reached its
    /// budget, writes the B-epsilon trees' dirty leaves back
    /// (docs/design.md, "Checkpoints", leaf write-back), then checkpoints if
    /// the dirty set still holds [`WRITE_BACK_KEEP_PCT`] of the budget or
    /// more. A call that does not checkpoint leaves the dirty set under that
    /// share, so the next write-back waits for commits to add the rest of
    /// the budget: write-backs cannot follow each other commit by commit.
    pub(super) fn relieve_dirty(&self, cs: &mut CommitState) -> Result<()> {
        let limit_bytes = self.dirty_limit_bytes;
        if self.dirty_bytes() < limit_bytes {
            return Ok(());
        }
        self.check_poison()?;
        // As around a checkpoint: glibc's free pages go back before the
        // encoded leaves come and after the written ones left the dirty set.
        crate::store::trim::release_free_heap(limit_bytes);
        let wb = match self.ix.write_back_leaves(cs.gen + 1) {
            Ok(wb) => wb,
            Err(e) => {
                self.poison(format!("leaf write-back failed: {e}"));
                return Err(e);
            }
        };
        if wb.count_leaves == 0 {
            return self.checkpoint_locked(cs); // B+trees only, or no dirty leaf
        }
        self.counters.write_backs.fetch_add(1, Ordering::Relaxed);
        self.ix.store.cache.reserve(wb.dirty_after_bytes as usize);
        crate::store::trim::release_free_heap(limit_bytes);
        if wb.dirty_after_bytes >= limit_bytes / 100 * WRITE_BACK_KEEP_PCT {
            return self.checkpoint_locked(cs);
        }
        assert!(wb.dirty_after_bytes < limit_bytes);
        Ok(())
    }

    /// Bytes the next checkpoint would write for dirty pages.
    pub(super) fn dirty_bytes(&self) -> u64 {
        let st = self.ix.store.state.read();
        st.dirty.bytes()
    }

    fn commit_group(&self, cs: &mut CommitState, group: &[Pending]) -> Result<()> {
        self.check_poison()?;
        // Bring the paths into the cache without holding the write lock.
        self.ix.prefetch(group.iter().flat_map(|p| &p.ops))?;
        let r = self.log_and_apply(cs, group);
        if let Err(e) = &r {
            self.poison(format!("commit failed: {e}"));
        }
        r
    }

    /// Writes the group's out-of-line values to fresh pages and its log
    /// records, then applies its batches. Past [`OVERLAP_VALUE_BYTES`] of
    /// such values a second thread writes them while this one encodes and
    /// writes the records: the log carries the values, so the two orders
    /// are equally safe (fresh pages are never referenced by the durable
    /// checkpoint). Either failing fails the group (the Db is then
    /// poisoned); a group that failed may have reached the log, like one
    /// whose sync failed, and is replayed on reopen.
    fn log_and_apply(&self, cs: &mut CommitState, group: &[Pending]) -> Result<()> {
        let batches: Vec<&[Op]> = group.iter().map(|p| &p.ops[..]).collect();
        let outs = self.out_of_line(&batches);
        let placed = if out_of_line_bytes(&batches, &outs) < OVERLAP_VALUE_BYTES {
            let placed = self.place_values(&batches, &outs)?;
            self.log_group(cs, group)?;
            placed
        } else {
            let (placed, logged) = std::thread::scope(|s| {
                let writer = s.spawn(|| self.place_values(&batches, &outs));
                let logged = self.log_group(cs, group);
                let placed = writer.join().expect("the value writer panicked");
                (placed, logged)
            });
            logged?;
            placed?
        };
        for (p, ovf) in group.iter().zip(placed) {
            self.apply_placed(&p.ops, ovf)?;
        }
        let c = &self.counters;
        c.commits.fetch_add(group.len() as u64, Ordering::Relaxed);
        c.groups.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Appends one record per batch of `group` and flushes (and syncs) the
    /// log as the durability mode asks.
    fn log_group(&self, cs: &mut CommitState, group: &[Pending]) -> Result<()> {
        let mut payload = Vec::new();
        for p in group {
            payload.clear();
            log::ops::encode(&p.ops, &mut payload);
            cs.lsn += 1;
            cs.wal.append(cs.lsn, &payload);
        }
        match self.durability {
            Durability::Sync => {
                cs.wal.flush()?;
                cs.wal.sync()?;
            }
            Durability::Buffered if cs.wal.unflushed() >= BUFFERED_FLUSH_BYTES => cs.wal.flush()?,
            Durability::Buffered => {}
        }
        Ok(())
    }

    /// Per batch, per op, where its value goes
    /// ([`crate::index::Index::out_of_line`]).
    fn out_of_line(&self, batches: &[&[Op]]) -> Vec<Vec<Out>> {
        batches.iter().map(|ops| self.ix.out_of_line(ops)).collect()
    }

    /// Writes the values `outs` sends out of line in `batches` to fresh
    /// pages (never referenced by the durable checkpoint, so writing them
    /// early is safe): per batch, per op, where its value went.
    fn place_values(
        &self,
        batches: &[&[Op]],
        outs: &[Vec<Out>],
    ) -> Result<Vec<Vec<Option<Placed>>>> {
        if outs.iter().flatten().all(|o| *o == Out::Inline) {
            return Ok(batches.iter().map(|ops| vec![None; ops.len()]).collect());
        }
        crate::index::placed::place(&self.ix.store, batches, outs)
    }

    /// Applies one batch under the state write lock and the allocator
    /// ([`crate::index::Index::apply_batch`]); then the cache gives clean
    /// images up for what the dirty set holds.
    fn apply_placed(&self, ops: &[Op], placed: Vec<Option<Placed>>) -> Result<()> {
        assert_eq!(ops.len(), placed.len());
        let mut st = self.ix.store.state.write();
        let mut al = self.ix.store.alloc.lock();
        let r = self.ix.apply_batch(&mut st, &mut al, ops, placed);
        st.dirty.recharge();
        let dirty_bytes = st.dirty.bytes();
        drop((st, al));
        self.ix.store.cache.reserve(dirty_bytes as usize);
        crate::store::trim::release_at_dirty_step(dirty_bytes, self.dirty_limit_bytes);
        r
    }

    /// Places and applies a replayed batch.
    pub(super) fn apply_ops(&self, ops: &[Op]) -> Result<()> {
        let batches = [ops];
        let outs = self.out_of_line(&batches);
        let placed = self.place_values(&batches, &outs)?;
        let placed = placed.into_iter().next().expect("one batch");
        self.apply_placed(ops, placed)
    }
}

/// Runs the transactions' checks of `group` in queue order, each against
/// the writes ahead of it; a failed one leaves the group with its error in
/// its slot. Returns the rest and the leader's (`slot`'s) own verdict.
fn validate_group(group: Vec<Pending>, slot: &Slot) -> (Vec<Pending>, Result<()>) {
    if group.iter().all(|p| p.check.is_none()) {
        return (group, Ok(()));
    }
    let mut kept: Vec<Pending> = Vec::with_capacity(group.len());
    let mut mine = Ok(());
    for mut p in group {
        let verdict = match p.check.take() {
            Some(check) => {
                let earlier: Vec<&Op> = kept.iter().flat_map(|k| &k.ops).collect();
                check(&earlier)
            }
            None => Ok(()),
        };
        match verdict {
            Ok(()) => kept.push(p),
            Err(e) if Arc::ptr_eq(&p.slot, slot) => mine = Err(e),
            Err(Error::Conflict { what }) => *p.slot.lock() = Some(Err(Failure::Conflict(what))),
            Err(e) => *p.slot.lock() = Some(Err(Failure::Group(e.to_string()))),
        }
    }
    (kept, mine)
}

/// The kind `op`'s tree has or will have (a create-tree op earlier in the
/// batch, else B+tree for a tree that does not exist yet).
fn kind_of(trees: &Trees, created: &[(Arc<str>, TreeKind)], op: &Op) -> Result<TreeKind> {
    let existing = trees
        .get(op.tree())
        .map(|d| d.kind())
        .or_else(|| created.iter().find(|c| &c.0 == op.tree()).map(|c| c.1));
    match (op, existing) {
        (Op::CreateTree { tree, kind, .. }, Some(found)) if found.code() != *kind => {
            Err(Error::TreeKind {
                name: tree.to_string(),
                found,
                wanted: TreeKind::from_code(*kind).unwrap_or(found),
            })
        }
        (Op::CreateTree { kind, params, .. }, _) => TreeKind::decode(*kind, params),
        (_, Some(k)) => Ok(k),
        (_, None) => Ok(TreeKind::default()),
    }
}

/// Size limits of one op on a tree of `kind`.
fn validate(op: &Op, kind: TreeKind, page_size: usize) -> Result<()> {
    let max_key = index::max_key_bytes(kind, page_size);
    if let Some(key) = op.key() {
        if key.len() > max_key {
            return Err(Error::KeyTooLarge {
                len: key.len(),
                max: max_key,
                page_size,
            });
        }
    }
    let value_len = match op {
        Op::Put { value, .. } => value.len(),
        Op::Upsert { operand, .. } => operand.len(),
        _ => 0,
    };
    if value_len > MAX_VALUE_LEN {
        return Err(Error::ValueTooLarge {
            len: value_len,
            max: MAX_VALUE_LEN,
        });
    }
    Ok(())
}

/// The share of the dirty budget, in percent, that the dirty set may still
/// hold after a leaf write-back without a checkpoint following. Chosen by
/// measurement (docs/benchmarks.md, "B-epsilon tree", leaf write-back).
pub(super) const WRITE_BACK_KEEP_PCT: u64 = 90;

/// Bytes of the values `outs` sends out of line in `batches`.
fn out_of_line_bytes(batches: &[&[Op]], outs: &[Vec<Out>]) -> usize {
    let ops = batches.iter().flat_map(|b| b.iter());
    ops.zip(outs.iter().flatten())
        .map(|(op, o)| match (op, o) {
            (Op::Put { value, .. }, Out::Extent | Out::Packed) => value.len(),
            _ => 0,
        })
        .sum()
}
