//! The read protocol shared by every tree kind. Readers traverse under the
//! shared state lock, which only guards memory; on a cache miss they drop
//! it, read the page with no lock held (so N readers keep N reads in
//! flight), and restart from the root. A page read without the lock is
//! trusted only if no page id was released for reuse meanwhile (`reuse_gen`
//! unchanged). docs/design.md, "Concurrency".

use super::cache::PidMap;
use super::extent::Extent;
use super::image::Image;
use super::page::Kind;
use super::{Epoch, Store};
use crate::error::{Error, Result};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// A snapshot's frozen state (docs/design.md, "Snapshots"): the trees and
/// dirty images of one moment, and the pin that keeps the clean pages they
/// name from reuse. Reads through it see that moment only.
pub struct Frozen<T> {
    pub epoch: Epoch<T>,
    /// When it was taken (`pin::now_ns`).
    pub taken_ns: u64,
    /// `Options::snapshot_max_age`.
    pub max_age: Option<Duration>,
}

impl<T> Frozen<T> {
    /// `Error::SnapshotTooOld` once older than the bound: from then on a
    /// checkpoint may reuse the pages it holds.
    pub fn check_age(&self) -> Result<()> {
        let Some(max) = self.max_age else {
            return Ok(());
        };
        let age = Duration::from_nanos(super::pin::now_ns().saturating_sub(self.taken_ns));
        if age > max {
            return Err(Error::SnapshotTooOld {
                age_ms: age.as_millis() as u64,
                max_ms: max.as_millis() as u64,
            });
        }
        Ok(())
    }

    /// Whether a read that began at reuse generation `gen` may trust what it
    /// found: always while the pin holds, else only without a reuse since.
    pub fn trusts(&self, gen: u64, now_gen: u64) -> bool {
        self.pinned() || gen == now_gen
    }

    /// Whether every page this snapshot can read is held for as long as it
    /// lives (no age bound): then no reuse of page ids concerns its reads,
    /// and a page it read is cached even if a checkpoint ended meanwhile.
    pub fn pinned(&self) -> bool {
        self.max_age.is_none()
    }
}

/// Restarts of one read after a page-id reuse raced with it. Each restart
/// means a checkpoint completed meanwhile, so this bounds a read that loses
/// to this many checkpoints in a row (never seen; it fails loudly).
pub const MAX_RESTARTS: usize = 1 << 20;

/// A parent's entry says: the child is a whole page.
pub const BASE_NONE: u64 = 0;
/// A parent's entry does not say whether the child has a base (a format-3
/// branch, or the root descriptor): the child is read first.
pub const BASE_UNNAMED: u64 = 1;

/// Bytes at the end of a page that hold a delta block on the page after it,
/// in files with `superblock::FLAG_TAIL_BEFORE` (docs/design.md, "Delta
/// placement"): such a miss reads these and the base, not two pages.
pub const TAIL_BYTES: usize = 4096;

/// A node's page id and what its parent's entry says of its base page
/// (docs/design.md, "B+tree node payload"): [`BASE_NONE`], [`BASE_UNNAMED`],
/// or the base page id (>= 2) of the delta block at `pid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeRef {
    pub pid: u64,
    pub base: u64,
}

impl NodeRef {
    /// A node whose base, if any, nobody names (a root, a kind's own page).
    pub fn unnamed(pid: u64) -> NodeRef {
        NodeRef {
            pid,
            base: BASE_UNNAMED,
        }
    }

    /// The base page to read with the node, when the parent names one.
    pub fn named_base(&self) -> Option<u64> {
        (self.base >= 2).then_some(self.base)
    }

    /// The node is a delta block on the page after or before its named base,
    /// so one read covers both (docs/design.md, "Delta placement").
    pub fn beside_base(&self) -> bool {
        self.base >= 2 && (self.pid == self.base + 1 || self.before_base())
    }

    /// The node is a delta block on the page just before its named base.
    pub fn before_base(&self) -> bool {
        self.base >= 2 && self.pid + 1 == self.base
    }
}

/// One step of a traversal: finished, or blocked on a node not in memory.
pub enum Step<T> {
    Done(T),
    Miss(NodeRef),
}

/// What a traversal sees: the trees, dirty pages, cached pages and pages it
/// read itself.
pub struct View<'a, T> {
    epoch: &'a Epoch<T>,
    store: &'a Store<T>,
    pinned: &'a PidMap<Image>,
    hits: std::cell::Cell<u64>,
}

impl<T> View<'_, T> {
    pub fn trees(&self) -> &T {
        &self.epoch.trees
    }

    #[inline]
    pub fn node(&self, pid: u64) -> Option<Image> {
        if let Some(n) = self.epoch.dirty.get(pid) {
            return Some(n.clone());
        }
        if let Some(n) = self.pinned.get(&pid) {
            return Some(n.clone());
        }
        let n = self.store.cache.lookup(pid);
        self.hits.set(self.hits.get() + n.is_some() as u64);
        n
    }

    /// Runs `f` on the image of `pid` without taking a reference to it
    /// (dirty, read by this traversal, or under the cache shard's read lock:
    /// [`super::cache::Cache::with`], whose requirement `f` meets), or None
    /// when it is not in memory.
    #[inline]
    pub fn with_node<R>(&self, pid: u64, f: impl FnOnce(&Image) -> R) -> Option<R> {
        if let Some(n) = self.epoch.dirty.get(pid) {
            return Some(f(n));
        }
        if let Some(n) = self.pinned.get(&pid) {
            return Some(f(n));
        }
        let r = self.store.cache.with(pid, f);
        self.hits.set(self.hits.get() + r.is_some() as u64);
        r
    }

    /// Whether `pid` is in memory (dirty, cached or read by this traversal),
    /// without counting a use.
    pub fn resident(&self, pid: u64) -> bool {
        self.epoch.dirty.contains(pid)
            || self.pinned.contains_key(&pid)
            || self.store.cache.contains(pid)
    }
}

impl<T> Store<T> {
    /// Runs `f` against a consistent view of the live state (`at` None) or
    /// of a snapshot's, loading missing pages between tries. `f` must be a
    /// pure function of the view (it may run many times).
    /// A snapshot's clean pages are pinned, so a reuse of page ids does not
    /// concern it unless it outlived `snapshot_max_age` (then it fails).
    pub fn read_at<R>(
        &self,
        at: Option<&Frozen<T>>,
        mut f: impl FnMut(&View<T>) -> Step<R>,
    ) -> Result<R> {
        let mut pinned: PidMap<Image> = PidMap::default();
        for _ in 0..MAX_RESTARTS {
            if let Some(fz) = at {
                fz.check_age()?;
            }
            let gen = self.reuse_gen.load(Ordering::Acquire);
            let step = {
                let guard;
                let epoch = match at {
                    Some(fz) => &fz.epoch,
                    None => {
                        guard = self.state.read();
                        &*guard
                    }
                };
                let view = View {
                    epoch,
                    store: self,
                    pinned: &pinned,
                    hits: std::cell::Cell::new(0),
                };
                let step = f(&view);
                self.cache.hits.add(view.hits.get());
                step
            };
            let pinned_at = at.is_some_and(|fz| fz.pinned());
            let still = || pinned_at || self.reuse_gen.load(Ordering::Acquire) == gen;
            let miss = match step {
                Step::Done(t)
                    if at.is_none_or(|fz| {
                        fz.trusts(gen, self.reuse_gen.load(Ordering::Acquire))
                    }) =>
                {
                    return Ok(t)
                }
                Step::Done(_) => {
                    pinned.clear();
                    continue;
                }
                Step::Miss(r) => r,
            };
            let pid = miss.pid;
            self.cache.count_miss();
            let loaded = self.pager.read_node_ref(miss);
            match loaded {
                Ok(node) if still() => {
                    self.cache.insert(pid, node.clone(), still);
                    pinned.insert(pid, node);
                }
                // The page was reused under us; its old content is gone. Retry.
                _ if !still() => pinned.clear(),
                Ok(_) => unreachable!(),
                Err(e) => return Err(e),
            }
        }
        panic!("a read restarted {MAX_RESTARTS} times: page reuse never settles");
    }

    /// Reads an extent seen under reuse generation `gen` (None: by a
    /// snapshot that holds it); `None` if a page reuse raced with the read
    /// (the caller looks again).
    pub fn read_extent_at(
        &self,
        ext: &Extent,
        kind: Kind,
        gen: Option<u64>,
    ) -> Result<Option<Vec<u8>>> {
        let r = self.pager.read_extent(ext, kind);
        if gen.is_some_and(|g| self.reuse_gen.load(Ordering::Acquire) != g) {
            return Ok(None);
        }
        r.map(Some)
    }

    /// Reads the nodes `refs` (with the bases their parents name) through
    /// one queue and caches them (marked as read ahead where `ahead(pid)`),
    /// unless a page id was released for reuse since `gen` (then the content
    /// may be stale: drop it). Returns the nodes cached, or the first error
    /// not explained by such a reuse.
    pub fn load_pages(
        &self,
        refs: &[NodeRef],
        gen: u64,
        ahead: impl Fn(u64) -> bool,
    ) -> Result<u64> {
        let still = || self.reuse_gen.load(Ordering::Acquire) == gen;
        let mut first_err = None;
        let mut loaded = 0u64;
        self.pager.read_nodes(refs, |pid, node| match node {
            Ok(n) => {
                self.cache.insert_marked(pid, n, ahead(pid), still);
                loaded += 1;
            }
            Err(e) if still() && first_err.is_none() => first_err = Some(e),
            Err(_) => {}
        })?;
        assert!(loaded <= refs.len() as u64);
        first_err.map_or(Ok(loaded), Err)
    }
}
