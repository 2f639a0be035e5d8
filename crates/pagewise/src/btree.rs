//! B+tree updates, copy-on-write per checkpoint epoch.
//!
//! A page referenced by the last durable checkpoint is never overwritten: the
//! first change to it in an epoch copies it to a newly allocated page (and the
//! change propagates a new child pointer up to the root). Pages allocated in
//! the current epoch are dirty, live only in `State::dirty`, and are changed in
//! place until the checkpoint writes them.

use crate::alloc::Alloc;
use crate::db::{Inner, State};
use crate::error::Result;
use crate::meta::TreeMeta;
use crate::node::{capacity, Node, Val, LEAF_ENT};
use std::sync::Arc;

/// What an insert replaced or a remove took out.
#[derive(Debug, Clone, Copy)]
pub struct OldVal {
    pub entry_bytes: usize,
    pub overflow: Option<(u64, u64)>,
}

fn old_of(n: &Node, i: usize) -> OldVal {
    OldVal {
        entry_bytes: n.entry_bytes(i),
        overflow: match n.val(i) {
            Val::Overflow { pid, len } => Some((pid, len)),
            Val::Inline(_) => None,
        },
    }
}

type Split = Option<(Vec<u8>, u64)>;

pub struct Writer<'a> {
    pub st: &'a mut State,
    pub inner: &'a Inner,
    pub alloc: &'a mut Alloc,
}

impl Writer<'_> {
    fn cap(&self) -> usize {
        capacity(self.inner.pager.ps)
    }

    /// A node by page id: dirty, cached, or read (the writer may read while
    /// holding the state lock; commit prefetches the paths first so this is rare).
    pub fn node(&mut self, pid: u64) -> Result<Arc<Node>> {
        if let Some(n) = self.st.dirty.get(&pid) {
            return Ok(n.clone());
        }
        if let Some(n) = self.inner.cache.get(pid) {
            return Ok(n);
        }
        self.inner.cache.count_miss();
        let n = Arc::new(self.inner.pager.read_node(pid)?);
        // Page ids are reused only at checkpoint, which cannot run while we
        // hold the commit lock, so the page read is current.
        self.inner.cache.insert(pid, n.clone(), || true);
        Ok(n)
    }

    /// Makes `pid` writable in this epoch, copying it to a new page if the
    /// durable checkpoint may reference it. Returns the (possibly new) id.
    fn cow(&mut self, pid: u64) -> Result<u64> {
        if self.st.dirty.contains_key(&pid) {
            return Ok(pid);
        }
        let n = self.node(pid)?;
        let new = self.alloc.alloc(1);
        self.alloc.free_later(pid, 1);
        self.inner.cache.remove(pid);
        self.st.dirty.insert(new, Arc::new((*n).clone()));
        Ok(new)
    }

    fn get_mut(&mut self, pid: u64) -> &mut Node {
        Arc::make_mut(self.st.dirty.get_mut(&pid).expect("node made dirty first"))
    }

    fn add(&mut self, n: Node) -> u64 {
        let pid = self.alloc.alloc(1);
        self.st.dirty.insert(pid, Arc::new(n));
        pid
    }

    fn free_node(&mut self, pid: u64) {
        self.st.dirty.remove(&pid);
        self.inner.cache.remove(pid);
        self.alloc.free_later(pid, 1);
    }

    fn tree_meta(&self, tree: &str) -> TreeMeta {
        self.st.trees.get(tree).copied().unwrap_or_default()
    }

    /// Sets `key` to `val` in `tree` (created if missing).
    pub fn insert(&mut self, tree: &Arc<str>, key: &[u8], val: Val<'_>) -> Result<Option<OldVal>> {
        let mut tm = self.tree_meta(tree);
        let entry = LEAF_ENT + key.len() + val.stored_len();
        let old = if tm.root == 0 {
            let mut leaf = Node::new_leaf();
            leaf.insert_at(0, key, val);
            tm.root = self.add(leaf);
            tm.height = 1;
            tm.leaf_pages = 1;
            None
        } else {
            let (root, split, old) = self.ins(tm.root, tm.height, key, val, true, &mut tm)?;
            tm.root = root;
            if let Some((sep, right)) = split {
                let mut b = Node::new_branch(root);
                b.insert_child(1, &sep, right);
                tm.root = self.add(b);
                tm.height += 1;
                tm.branch_pages += 1;
            }
            old
        };
        match old {
            None => {
                tm.entries += 1;
                tm.leaf_bytes += entry as u64;
            }
            Some(o) => tm.leaf_bytes = tm.leaf_bytes + entry as u64 - o.entry_bytes as u64,
        }
        self.st.trees.insert(tree.clone(), tm);
        Ok(old)
    }

    fn ins(
        &mut self,
        pid: u64,
        level: u32,
        key: &[u8],
        val: Val<'_>,
        rightmost: bool,
        tm: &mut TreeMeta,
    ) -> Result<(u64, Split, Option<OldVal>)> {
        let cap = self.cap();
        if level == 1 {
            let pid = self.cow(pid)?;
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
                return Ok((pid, None, old));
            }
            // Appending at the right edge (sequential load): keep the left full.
            let at = (rightmost && old.is_none() && idx == node.len() - 1).then(|| node.len() - 1);
            let (sep, right) = node.split(at);
            let r = self.add(right);
            tm.leaf_pages += 1;
            return Ok((pid, Some((sep, r)), old));
        }
        let n = self.node(pid)?;
        let i = n.child_index(key);
        let child = n.child(i);
        let rm = rightmost && i == n.len() - 1;
        drop(n);
        let (new_child, split, old) = self.ins(child, level - 1, key, val, rm, tm)?;
        let pid = self.cow(pid)?;
        let node = self.get_mut(pid);
        node.set_child(i, new_child);
        let Some((sep, r)) = split else {
            return Ok((pid, None, old));
        };
        node.insert_child(i + 1, &sep, r);
        if node.bytes() <= cap {
            return Ok((pid, None, old));
        }
        let at = (rm && i + 1 == node.len() - 1).then(|| node.len() - 1);
        let (sep, right) = node.split(at);
        let r = self.add(right);
        tm.branch_pages += 1;
        Ok((pid, Some((sep, r)), old))
    }

    /// Removes `key` from `tree`; returns what was there.
    pub fn remove(&mut self, tree: &Arc<str>, key: &[u8]) -> Result<Option<OldVal>> {
        let mut tm = self.tree_meta(tree);
        if tm.root == 0 {
            return Ok(None);
        }
        let Some((root, old)) = self.rem(tm.root, tm.height, key, &mut tm)? else {
            return Ok(None);
        };
        tm.root = root;
        tm.entries -= 1;
        tm.leaf_bytes -= old.entry_bytes as u64;
        loop {
            let n = self.node(tm.root)?;
            if n.is_leaf() {
                if n.is_empty() {
                    self.free_node(tm.root);
                    tm.root = 0;
                    tm.height = 0;
                    tm.leaf_pages = 0;
                }
                break;
            }
            if n.len() > 1 {
                break;
            }
            self.free_node(tm.root);
            tm.root = n.child(0);
            tm.height -= 1;
            tm.branch_pages -= 1;
        }
        self.st.trees.insert(tree.clone(), tm);
        Ok(Some(old))
    }

    fn rem(
        &mut self,
        pid: u64,
        level: u32,
        key: &[u8],
        tm: &mut TreeMeta,
    ) -> Result<Option<(u64, OldVal)>> {
        let n = self.node(pid)?;
        if level == 1 {
            let Ok(i) = n.search(key) else {
                return Ok(None);
            };
            drop(n);
            let pid = self.cow(pid)?;
            let node = self.get_mut(pid);
            let old = old_of(node, i);
            node.remove_at(i);
            return Ok(Some((pid, old)));
        }
        let i = n.child_index(key);
        let child = n.child(i);
        drop(n);
        let Some((new_child, old)) = self.rem(child, level - 1, key, tm)? else {
            return Ok(None);
        };
        let pid = self.cow(pid)?;
        self.get_mut(pid).set_child(i, new_child);
        self.rebalance(pid, i, level - 1, tm)?;
        Ok(Some((pid, old)))
    }

    /// The pages of a subtree holding no entries (single-child branches down
    /// to an empty leaf), root first; None if it holds any entry.
    fn empty_chain(&mut self, mut pid: u64) -> Result<Option<Vec<u64>>> {
        let mut chain = Vec::new();
        loop {
            let n = self.node(pid)?;
            chain.push(pid);
            if n.is_leaf() {
                return Ok(n.is_empty().then_some(chain));
            }
            if n.len() != 1 {
                return Ok(None);
            }
            pid = n.child(0);
        }
    }

    /// Merges child `i` of dirty `parent` with a sibling when it has fallen
    /// below a quarter page and the pair fits in one page.
    fn rebalance(
        &mut self,
        parent: u64,
        i: usize,
        child_level: u32,
        tm: &mut TreeMeta,
    ) -> Result<()> {
        let cap = self.cap();
        let p = self.st.dirty[&parent].clone();
        let small = self.node(p.child(i))?.bytes() * 4 < cap;
        if !small || p.len() < 2 {
            return Ok(());
        }
        if let Some(chain) = self.empty_chain(p.child(i))? {
            // An empty subtree goes away whatever its siblings hold.
            for (k, &pid) in chain.iter().enumerate() {
                self.free_node(pid);
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
        let (lpid, rpid) = (p.child(l), p.child(r));
        let sep = p.key(r).to_vec();
        drop(p);
        let ln = self.node(lpid)?;
        let rn = self.node(rpid)?;
        if ln.merged_bytes(&sep, &rn) > cap {
            return Ok(());
        }
        drop(ln);
        let lnew = self.cow(lpid)?;
        self.get_mut(lnew).merge_from(&sep, &rn);
        self.free_node(rpid);
        let pn = self.get_mut(parent);
        pn.set_child(l, lnew);
        pn.remove_child(r);
        if child_level == 1 {
            tm.leaf_pages -= 1;
        } else {
            tm.branch_pages -= 1;
        }
        Ok(())
    }
}
