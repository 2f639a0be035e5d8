//! B+tree updates, copy-on-write per checkpoint epoch (docs/design.md,
//! "Checkpoints").
//!
//! A page referenced by the last durable checkpoint is never overwritten: the
//! first change to it in an epoch copies it to a newly allocated page (and the
//! change propagates a new child pointer up to the root). Pages allocated in
//! the current epoch are dirty, live only in the store's dirty set, and are
//! changed in place until the checkpoint writes them.

use super::delta::{Changes, DELTA_HDR};
use super::node::{capacity, Node, Val, LEAF_ENT};
use super::{as_node, Meta, MAX_HEIGHT};
use crate::error::Result;
use crate::index::Counters;
use crate::options::DeltaFlush;
use crate::store::alloc::Alloc;
use crate::store::cache::Cache;
use crate::store::dirty::Dirty;
use crate::store::extent::Extent;
use crate::store::image::{self, Image};
use crate::store::page::HDR;
use crate::store::pager::Pager;
use crate::store::read::{NodeRef, BASE_NONE};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// What an insert replaced or a remove took out.
#[derive(Debug, Clone, Copy)]
pub struct OldVal {
    pub entry_bytes: usize,
    pub overflow: Option<Extent>,
}

fn old_of(n: &Node, i: usize) -> OldVal {
    OldVal {
        entry_bytes: n.entry_bytes(i),
        overflow: match n.val(i) {
            Val::Overflow(ext) => Some(ext),
            Val::Inline(_) => None,
        },
    }
}

type Split = Option<(Vec<u8>, u64)>;

/// Applies ops to one tree. Holds the state write lock (through `dirty`)
/// and the allocator for the whole group.
pub struct Writer<'a> {
    pub dirty: &'a mut Dirty,
    pub pager: &'a Pager,
    pub cache: &'a Cache,
    pub alloc: &'a mut Alloc,
    /// Delta flushes (docs/design.md, "Delta blocks for B+tree pages").
    pub delta: Option<DeltaFlush>,
    /// `Options::append_fill`, in [0.5, 1.0].
    pub append_fill: f64,
    pub counters: &'a Counters,
}

impl Writer<'_> {
    fn cap(&self) -> usize {
        capacity(self.pager.ps)
    }

    /// Node `r` (its page id and what its parent's entry says of its base):
    /// dirty, cached, or read (the writer may read while holding the state
    /// lock; commit prefetches the paths first so this is rare).
    pub fn node(&mut self, r: NodeRef) -> Result<Arc<Node>> {
        let pid = r.pid;
        if let Some(n) = self.dirty.get(pid) {
            return Ok(as_node(n.clone()));
        }
        if let Some(n) = self.cache.get(pid) {
            return Ok(as_node(n));
        }
        self.cache.count_miss();
        let n: Image = self.pager.read_node_ref(r)?;
        // Page ids are reused only at checkpoint, which cannot run while we
        // hold the commit lock, so the page read is current.
        self.cache.insert(pid, n.clone(), || true);
        Ok(as_node(n))
    }

    /// `node(r)`, which must be a leaf at level 1 and a branch above.
    fn node_at(&mut self, r: NodeRef, level: u32) -> Result<Arc<Node>> {
        assert!((1..=MAX_HEIGHT).contains(&level));
        let pid = r.pid;
        let n = self.node(r)?;
        if n.is_leaf() != (level == 1) {
            let what = format!(
                "a {} at level {level}",
                if n.is_leaf() { "leaf" } else { "branch" }
            );
            return Err(self.pager.corrupt(pid, what));
        }
        Ok(n)
    }

    /// Makes `pid` writable in this epoch, copying it to a new page if the
    /// durable checkpoint may reference it. Returns the (possibly new) id.
    fn cow(&mut self, r: NodeRef) -> Result<u64> {
        let pid = r.pid;
        if self.dirty.contains(pid) {
            return Ok(pid);
        }
        let copy = (*self.node(r)?).clone();
        Ok(self.cow_copy(pid, copy))
    }

    /// `cow(r)` for a node that must be at `level`: checked on the one
    /// fetch that also gives the copy (a clean leaf is looked up once).
    fn cow_at(&mut self, r: NodeRef, level: u32) -> Result<u64> {
        let pid = r.pid;
        let n = self.node_at(r, level)?;
        if self.dirty.contains(pid) {
            return Ok(pid);
        }
        let copy = (*n).clone();
        drop(n);
        Ok(self.cow_copy(pid, copy))
    }

    /// Requires: `copy` is the clean node at `pid`. Effect: `copy` becomes
    /// dirty under a new page id, which is returned.
    fn cow_copy(&mut self, pid: u64, mut copy: Node) -> u64 {
        debug_assert!(!self.dirty.contains(pid));
        self.cache.remove(pid);
        self.rebase(pid, &mut copy);
        let new = self.place(copy.base_pid());
        self.dirty.insert(new, Arc::new(copy));
        let new = self.settle(new);
        assert_ne!(new, pid);
        new
    }

    /// A fresh page id for a dirty node with base `base` (docs/design.md,
    /// "Delta placement"): beside the base when it can be, else a lone page
    /// (counted in `delta_apart`); a node without a base gets a page with
    /// companions (delta flushes on) or a lone page (off).
    fn place(&mut self, base: Option<u64>) -> u64 {
        if self.delta.is_none() {
            debug_assert!(base.is_none(), "only delta flushes keep bases");
            return self.alloc.alloc(1);
        }
        let Some(base) = base else {
            return self.alloc.alloc_node();
        };
        // Before its base, a block must fit the page's tail (format 7).
        let tail = self.pager.tail_bytes();
        let block_bytes = self.delta.map_or(tail, |d| d.block_bytes);
        let fits = block_bytes <= tail && HDR + DELTA_HDR + self.limit_bytes() <= tail;
        let before = !self.pager.tail_before() || fits;
        if let Some(pid) = self.alloc.alloc_beside(base, before) {
            return pid;
        }
        self.counters.delta_apart.fetch_add(1, Relaxed);
        let pid = self.alloc.alloc(1);
        if before || pid + 1 != base {
            return pid;
        }
        // First fit gave the page before the base, whose tail the block may
        // not fit: take the next page (not that one) and give it back.
        let other = self.alloc.alloc(1);
        self.alloc.free_later(pid, 1);
        other
    }

    /// Requires: `copy` is the clean node at `pid`, about to become dirty.
    /// Effect: frees what the copy no longer needs and sets its base
    /// (docs/design.md, "Delta blocks for B+tree pages", the copy table).
    fn rebase(&mut self, pid: u64, copy: &mut Node) {
        if !copy.is_leaf() && !copy.names_bases() && self.convert(pid, copy) {
            return;
        }
        match (self.delta, copy.base_pid()) {
            (Some(d), Some(base)) => {
                // The old delta block; beside its base, a companion again.
                if pid.abs_diff(base) == 1 {
                    self.alloc.free_companion_later(pid, base);
                } else {
                    self.alloc.free_later(pid, 1);
                }
                copy.set_block_bytes(d.block_bytes);
                self.counters.delta_carries.fetch_add(1, Relaxed);
            }
            (Some(d), None) => {
                // The full page at `pid` becomes the base: kept, not freed.
                let crc = copy.payload_crc();
                copy.set_changes(Some(Changes::new(pid, crc, d.block_bytes)));
                self.counters.delta_rebases.fetch_add(1, Relaxed);
            }
            (None, Some(base)) => {
                self.alloc.free_later(pid, 1);
                self.alloc.free_later(base, 1);
                copy.set_changes(None);
            }
            (None, None) => self.alloc.free_later(pid, 1),
        }
        debug_assert!(self.delta.is_some() || copy.base_pid().is_none());
    }

    /// Requires: `copy` is the clean kind-3 branch at `pid`. Effect: if it
    /// fits a page as kind 8, converts it, to be written whole (its page and
    /// base are freed); returns whether it did (docs/design.md, "B+tree node
    /// payload").
    fn convert(&mut self, pid: u64, copy: &mut Node) -> bool {
        let old = copy.set_changes(None);
        if !copy.upgrade_if_fits() {
            copy.set_changes(old);
            return false;
        }
        self.alloc.free_later(pid, 1);
        if let Some(c) = old {
            self.alloc.free_later(c.base_pid, 1);
        }
        debug_assert!(copy.names_bases() && copy.changes().is_none());
        true
    }

    /// What a parent's entry names as dirty node `pid`'s base: its base
    /// page, or `BASE_NONE` when it is written whole.
    fn base_of(&self, pid: u64) -> u64 {
        let n = self.dirty.get(pid).expect("a changed child is dirty");
        let base = super::node_ref(n).base_pid().unwrap_or(BASE_NONE);
        assert_ne!(base, pid);
        base
    }

    /// Largest change-record bytes a delta block may hold.
    fn limit_bytes(&self) -> usize {
        let room = self.pager.ps - HDR - DELTA_HDR;
        self.delta.map_or(0, |d| d.threshold_bytes.min(room))
    }

    /// Consolidates dirty node `pid` if its changes outgrew the threshold.
    /// Returns its page id, new if the consolidation moved it.
    fn settle(&mut self, pid: u64) -> u64 {
        if self.delta.is_none() {
            // Without delta flushes no dirty node carries changes (`rebase`).
            debug_assert!(self
                .dirty
                .get(pid)
                .is_some_and(|n| super::node_ref(n).changes().is_none()));
            return pid;
        }
        let limit = self.limit_bytes();
        let dirty = self
            .dirty
            .get(pid)
            .expect("settled nodes are dirty")
            .clone();
        if as_node(dirty).changes().is_some_and(|c| c.bytes() > limit) {
            return self.consolidate(pid);
        }
        pid
    }

    /// Drops dirty node `pid`'s base (freed after the checkpoint): the node
    /// is written whole. With delta flushes on, a node whose page has no
    /// companion to keep moves to one that has (docs/design.md, "Delta
    /// placement"). Returns the node's page id.
    fn consolidate(&mut self, pid: u64) -> u64 {
        let Some(c) = self.get_mut(pid).set_changes(None) else {
            return pid;
        };
        self.alloc.free_later(c.base_pid, 1);
        self.counters.delta_consolidations.fetch_add(1, Relaxed);
        if self.alloc.has_companion(pid) {
            return pid;
        }
        // `pid` is fresh this epoch and was never written: nothing names it
        // but the caller, which takes the returned id.
        let node = self
            .dirty
            .remove(pid)
            .expect("consolidated nodes are dirty");
        let new = self.alloc.alloc_node();
        self.alloc.free_later(pid, 1);
        self.dirty.insert(new, node);
        new
    }

    /// Requires: `r` is the tree's new root (a dirty node, or a clean one
    /// with its former parent's entry). Effect: with tail placement (format
    /// 7), a root that is or would be written as a delta block in the tail
    /// of the page before its base is written whole instead, since the root
    /// is read without a parent's entry, from its page's start
    /// (docs/design.md, "Delta placement"). Returns its page id.
    fn root_at_head(&mut self, r: NodeRef) -> Result<u64> {
        let base = match self.dirty.get(r.pid) {
            Some(n) => super::node_ref(n).base_pid(),
            None => r.named_base(),
        };
        if !self.pager.tail_before() || base != Some(r.pid + 1) {
            return Ok(r.pid);
        }
        let pid = self.cow(r)?;
        let pid = self.consolidate(pid);
        debug_assert!(as_node(self.dirty.get(pid).expect("dirty").clone())
            .base_pid()
            .is_none());
        Ok(pid)
    }

    fn get_mut(&mut self, pid: u64) -> &mut Node {
        image::make_mut::<Node>(self.dirty.get_mut(pid).expect("node made dirty first"))
    }

    fn add(&mut self, n: Node) -> u64 {
        assert!(n.base_pid().is_none(), "a new node is written whole");
        let pid = self.place(None);
        self.dirty.insert(pid, Arc::new(n));
        pid
    }

    /// Frees node `r` and its base page, if it has one.
    fn free_node(&mut self, r: NodeRef) -> Result<()> {
        let pid = r.pid;
        let base = self.node(r)?.base_pid();
        self.dirty.remove(pid);
        self.cache.remove(pid);
        self.alloc.free_later(pid, 1);
        if let Some(b) = base {
            self.alloc.free_later(b, 1);
        }
        Ok(())
    }

    /// Sets `key` to `val`, freeing a replaced overflow extent and keeping
    /// the overflow page count (requires: `val`'s extent, if any, is fresh).
    pub fn put(&mut self, tm: &mut Meta, key: &[u8], val: Val<'_>) -> Result<()> {
        let added = match val {
            Val::Overflow(ext) => ext.count_pages,
            Val::Inline(_) => 0,
        };
        let old = self.insert(tm, key, val)?;
        tm.overflow_pages += added;
        self.release(tm, old);
        Ok(())
    }

    /// Removes `key` if present, freeing its overflow extent.
    pub fn delete(&mut self, tm: &mut Meta, key: &[u8]) -> Result<()> {
        let old = self.remove(tm, key)?;
        self.release(tm, old);
        Ok(())
    }

    fn release(&mut self, tm: &mut Meta, old: Option<OldVal>) {
        if let Some(ext) = old.and_then(|o| o.overflow) {
            assert!(tm.overflow_pages >= ext.count_pages);
            tm.overflow_pages -= ext.count_pages;
            self.alloc.free_later(ext.first_page, ext.count_pages);
        }
    }

    /// Sets `key` to `val` in the tree `tm` describes.
    pub fn insert(&mut self, tm: &mut Meta, key: &[u8], val: Val<'_>) -> Result<Option<OldVal>> {
        let entry = LEAF_ENT + key.len() + val.stored_len();
        let old = if tm.root == 0 {
            let mut leaf = Node::new_leaf(self.pager.ps);
            leaf.insert_at(0, key, val);
            tm.root = self.add(leaf);
            tm.height = 1;
            tm.leaf_pages = 1;
            None
        } else {
            let at = NodeRef::unnamed(tm.root);
            let (root, split, old) = self.ins(at, tm.height, key, val, true, tm)?;
            tm.root = root;
            if let Some((sep, right)) = split {
                let mut b = Node::new_branch(self.pager.ps, root, self.base_of(root));
                b.insert_child(1, &sep, right, BASE_NONE);
                tm.root = self.add(b);
                tm.height += 1;
                tm.branch_pages += 1;
                assert!(tm.height <= MAX_HEIGHT);
            }
            tm.root = self.root_at_head(NodeRef::unnamed(tm.root))?;
            old
        };
        match old {
            None => {
                tm.entries += 1;
                tm.leaf_bytes += entry as u64;
            }
            Some(o) => tm.leaf_bytes = tm.leaf_bytes + entry as u64 - o.entry_bytes as u64,
        }
        Ok(old)
    }

    /// Inserts into the subtree at `pid`, `level` levels above the leaves
    /// (the recursion depth is the tree height). Returns the subtree's
    /// (possibly copied) root, a split to link into the parent, and what was
    /// replaced.
    fn ins(
        &mut self,
        at: NodeRef,
        level: u32,
        key: &[u8],
        val: Val<'_>,
        rightmost: bool,
        tm: &mut Meta,
    ) -> Result<(u64, Split, Option<OldVal>)> {
        let (cap, fill) = (self.cap(), self.append_fill);
        if level == 1 {
            let pid = self.cow_at(at, 1)?;
            let node = self.get_mut(pid);
            let (old, idx) = match node.search(key) {
                Ok(i) => {
                    let o = old_of(node, i);
                    node.replace_at(i, val);
                    (Some(o), i)
                }
                Err(i) => {
                    node.insert_at(i, key, val);
                    (None, i)
                }
            };
            if node.bytes() <= cap {
                return Ok((self.settle(pid), None, old));
            }
            // Appending at the right edge (sequential load): keep the left
            // filled to `append_fill`.
            let appended = rightmost && old.is_none() && idx == node.len() - 1;
            let at = appended.then(|| node.fill_point(fill, cap));
            let pid = self.consolidate(pid);
            let (sep, right) = self.get_mut(pid).split(at);
            let r = self.add(right);
            tm.leaf_pages += 1;
            return Ok((pid, Some((sep, r)), old));
        }
        let n = self.node_at(at, level)?;
        let i = n.child_index(key);
        let child = n.child_ref(i);
        let rm = rightmost && i == n.len() - 1;
        drop(n);
        let (new_child, split, old) = self.ins(child, level - 1, key, val, rm, tm)?;
        let pid = self.cow(at)?;
        let base = self.base_of(new_child);
        let node = self.get_mut(pid);
        node.set_child(i, new_child, base);
        let Some((sep, r)) = split else {
            return Ok((self.settle(pid), None, old));
        };
        node.insert_child(i + 1, &sep, r, BASE_NONE);
        if node.bytes() <= cap {
            return Ok((self.settle(pid), None, old));
        }
        let appended = rm && i + 1 == node.len() - 1;
        let at = appended.then(|| node.fill_point(fill, cap));
        let pid = self.consolidate(pid);
        let (sep, right) = self.get_mut(pid).split(at);
        let r = self.add(right);
        tm.branch_pages += 1;
        Ok((pid, Some((sep, r)), old))
    }

    /// Removes `key` from the tree `tm` describes; returns what was there.
    pub fn remove(&mut self, tm: &mut Meta, key: &[u8]) -> Result<Option<OldVal>> {
        if tm.root == 0 {
            return Ok(None);
        }
        let at = NodeRef::unnamed(tm.root);
        let Some((root, old)) = self.rem(at, tm.height, key, tm)? else {
            return Ok(None);
        };
        tm.root = root;
        tm.entries -= 1;
        tm.leaf_bytes -= old.entry_bytes as u64;
        self.collapse_root(tm)?;
        if tm.root != 0 {
            tm.root = self.root_at_head(NodeRef::unnamed(tm.root))?;
        }
        Ok(Some(old))
    }

    /// Frees an empty root leaf, and root branches with a single child (one
    /// level per step, so at most `height` steps).
    fn collapse_root(&mut self, tm: &mut Meta) -> Result<()> {
        for _ in 0..=tm.height {
            let root = NodeRef::unnamed(tm.root);
            let n = self.node(root)?;
            if n.is_leaf() {
                if n.is_empty() {
                    self.free_node(root)?;
                    *tm = Meta {
                        overflow_pages: tm.overflow_pages,
                        ..Meta::default()
                    };
                }
                return Ok(());
            }
            if n.len() > 1 {
                return Ok(());
            }
            self.free_node(root)?;
            tm.root = self.root_at_head(n.child_ref(0))?;
            tm.height -= 1;
            tm.branch_pages -= 1;
        }
        unreachable!("root collapse ran past the tree height");
    }

    fn rem(
        &mut self,
        at: NodeRef,
        level: u32,
        key: &[u8],
        tm: &mut Meta,
    ) -> Result<Option<(u64, OldVal)>> {
        let n = self.node_at(at, level)?;
        if level == 1 {
            let Ok(i) = n.search(key) else {
                return Ok(None);
            };
            drop(n);
            let pid = self.cow(at)?;
            let node = self.get_mut(pid);
            let old = old_of(node, i);
            node.remove_at(i);
            return Ok(Some((self.settle(pid), old)));
        }
        let i = n.child_index(key);
        let child = n.child_ref(i);
        drop(n);
        let Some((new_child, old)) = self.rem(child, level - 1, key, tm)? else {
            return Ok(None);
        };
        let pid = self.cow(at)?;
        let base = self.base_of(new_child);
        self.get_mut(pid).set_child(i, new_child, base);
        self.rebalance(pid, i, level - 1, tm)?;
        Ok(Some((self.settle(pid), old)))
    }

    /// The pages of a subtree of `level` levels holding no entries
    /// (single-child branches down to an empty leaf), root first; None if it
    /// holds any entry.
    fn empty_chain(&mut self, mut at: NodeRef, level: u32) -> Result<Option<Vec<NodeRef>>> {
        let mut chain = Vec::new();
        for l in (1..=level).rev() {
            let n = self.node_at(at, l)?;
            chain.push(at);
            if n.is_leaf() {
                return Ok(n.is_empty().then_some(chain));
            }
            if n.len() != 1 {
                return Ok(None);
            }
            at = n.child_ref(0);
        }
        unreachable!("node_at checks that level 1 is a leaf");
    }

    /// Merges child `i` of dirty `parent` with a sibling when it has fallen
    /// below a quarter page and the pair fits in one page.
    fn rebalance(&mut self, parent: u64, i: usize, child_level: u32, tm: &mut Meta) -> Result<()> {
        let cap = self.cap();
        let p = as_node(self.dirty.get(parent).expect("parent is dirty").clone());
        let small = self.node(p.child_ref(i))?.bytes() * 4 < cap;
        if !small || p.len() < 2 {
            return Ok(());
        }
        if let Some(chain) = self.empty_chain(p.child_ref(i), child_level)? {
            // An empty subtree goes away whatever its siblings hold.
            for (k, &r) in chain.iter().enumerate() {
                self.free_node(r)?;
                if k + 1 == chain.len() {
                    tm.leaf_pages -= 1;
                } else {
                    tm.branch_pages -= 1;
                }
            }
            self.get_mut(parent).remove_child(i);
            return Ok(());
        }
        let (l, r) = if i + 1 < p.len() {
            (i, i + 1)
        } else {
            (i - 1, i)
        };
        let (lref, rref) = (p.child_ref(l), p.child_ref(r));
        let sep = p.key(r).to_vec();
        drop(p);
        let ln = self.node(lref)?;
        let rn = self.node(rref)?;
        if ln.merged_bytes(&sep, &rn) > cap {
            return Ok(());
        }
        drop(ln);
        let lnew = self.cow(lref)?;
        let lnew = self.consolidate(lnew);
        self.get_mut(lnew).merge_from(&sep, &rn);
        self.free_node(rref)?;
        let base = self.base_of(lnew);
        let pn = self.get_mut(parent);
        pn.set_child(l, lnew, base);
        pn.remove_child(r);
        if child_level == 1 {
            tm.leaf_pages -= 1;
        } else {
            tm.branch_pages -= 1;
        }
        Ok(())
    }
}
