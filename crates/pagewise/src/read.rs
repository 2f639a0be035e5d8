//! The read path. Readers traverse under the shared state lock, which only
//! guards in-memory structures; on a cache miss they drop it, read the page
//! with no lock held (so N readers keep N reads in flight), and restart from
//! the root. A page read without the lock is trusted only if no page id was
//! released for reuse meanwhile (`reuse_gen` unchanged).

use crate::cache::PidMap;
use crate::db::{Inner, State};
use crate::error::Result;
use crate::meta::TreeMeta;
use crate::node::{Node, Val};
use crate::page::Kind;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub enum Step<T> {
    Done(T),
    Miss(u64),
}

/// What a traversal sees: dirty pages, cached pages, pages it read itself.
pub struct View<'a> {
    st: &'a State,
    inner: &'a Inner,
    pinned: &'a PidMap<Arc<Node>>,
    hits: std::cell::Cell<u64>,
}

impl View<'_> {
    pub fn tree(&self, name: &str) -> Option<TreeMeta> {
        self.st.trees.get(name).copied()
    }

    pub fn node(&self, pid: u64) -> Option<Arc<Node>> {
        if let Some(n) = self.st.dirty.get(&pid) {
            return Some(n.clone());
        }
        if let Some(n) = self.pinned.get(&pid) {
            return Some(n.clone());
        }
        let n = self.inner.cache.lookup(pid);
        self.hits.set(self.hits.get() + n.is_some() as u64);
        n
    }

    /// Whether `pid` is in memory (dirty, cached or read by this traversal),
    /// without counting a use.
    pub fn resident(&self, pid: u64) -> bool {
        self.st.dirty.contains_key(&pid)
            || self.pinned.contains_key(&pid)
            || self.inner.cache.contains(pid)
    }
}

/// A value copied out of a leaf: bytes, or where its overflow extent is.
#[derive(Debug, Clone)]
pub enum Owned {
    Inline(Vec<u8>),
    Overflow { pid: u64, len: u64 },
}

impl Owned {
    pub fn from_val(v: Val<'_>) -> Owned {
        match v {
            Val::Inline(b) => Owned::Inline(b.to_vec()),
            Val::Overflow { pid, len } => Owned::Overflow { pid, len },
        }
    }
}

impl Inner {
    /// Runs `f` against a consistent view, loading missing pages between tries.
    pub fn read<T>(&self, mut f: impl FnMut(&View) -> Step<T>) -> Result<T> {
        let mut pinned: PidMap<Arc<Node>> = PidMap::default();
        loop {
            let gen = self.reuse_gen.load(Ordering::Acquire);
            let step = {
                let st = self.state.read();
                let view = View {
                    st: &st,
                    inner: self,
                    pinned: &pinned,
                    hits: std::cell::Cell::new(0),
                };
                let step = f(&view);
                self.cache
                    .hits
                    .fetch_add(view.hits.get(), Ordering::Relaxed);
                step
            };
            let pid = match step {
                Step::Done(t) => return Ok(t),
                Step::Miss(pid) => pid,
            };
            self.cache.count_miss();
            let loaded = self.pager.read_node(pid);
            let still = || self.reuse_gen.load(Ordering::Acquire) == gen;
            let node = match loaded {
                Ok(n) => Arc::new(n),
                // The page was reused under us; its old content is gone. Retry.
                Err(_) if !still() => {
                    pinned.clear();
                    continue;
                }
                Err(e) => return Err(e),
            };
            if !still() {
                pinned.clear();
                continue;
            }
            self.cache.insert(pid, node.clone(), still);
            pinned.insert(pid, node);
        }
    }

    /// Reads an overflow value; `None` if a page reuse raced with the read.
    pub fn read_overflow(&self, pid: u64, len: u64, gen: u64) -> Result<Option<Vec<u8>>> {
        let r = self.pager.read_extent(pid, Kind::Overflow, len as usize);
        if self.reuse_gen.load(Ordering::Acquire) != gen {
            return Ok(None);
        }
        r.map(Some)
    }

    pub fn get(&self, tree: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        loop {
            let gen = self.reuse_gen.load(Ordering::Acquire);
            let found = self.read(|v| {
                let Some(tm) = v.tree(tree).filter(|t| t.root != 0) else {
                    return Step::Done(None);
                };
                match find_leaf(v, tm.root, key) {
                    Step::Done(leaf) => {
                        Step::Done(leaf.search(key).ok().map(|i| Owned::from_val(leaf.val(i))))
                    }
                    Step::Miss(p) => Step::Miss(p),
                }
            })?;
            match found {
                None => return Ok(None),
                Some(Owned::Inline(v)) => return Ok(Some(v)),
                Some(Owned::Overflow { pid, len }) => {
                    if let Some(v) = self.read_overflow(pid, len, gen)? {
                        return Ok(Some(v));
                    }
                }
            }
        }
    }
}

/// Descends to the leaf whose range holds `key`.
pub fn find_leaf(v: &View, root: u64, key: &[u8]) -> Step<Arc<Node>> {
    let mut pid = root;
    loop {
        let Some(n) = v.node(pid) else {
            return Step::Miss(pid);
        };
        if n.is_leaf() {
            return Step::Done(n);
        }
        pid = n.child(n.child_index(key));
    }
}
