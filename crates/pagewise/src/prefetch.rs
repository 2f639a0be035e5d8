//! Group prefetch: before a commit group takes the write lock, bring every
//! page its ops will descend through into the cache, one tree level per round,
//! all missing pages of a round read through one queue. A group of N random
//! inserts then costs about `height` waits of up to N/32 device round trips,
//! instead of one synchronous read per missing page.
//!
//! Best effort: the apply path reads any page that is still (or again) missing,
//! so eviction between here and the apply costs a read, never correctness.

use crate::batch::Op;
use crate::db::{Inner, State};
use crate::error::Result;
use crate::node::Node;
use std::collections::HashSet;
use std::hash::BuildHasherDefault;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Rounds are one per tree level; more only when a capped round left misses
/// behind or pages were evicted meanwhile. Bounded so a cache too small for
/// the group cannot keep the prefetch going forever.
const MAX_ROUNDS: usize = 16;

type PidSet = HashSet<u64, BuildHasherDefault<crate::cache::PidHasher>>;

impl Inner {
    /// Loads the root-to-leaf paths of every op of the group into the cache.
    /// Called with the commit lock held and the state lock free.
    pub(crate) fn prefetch_group<'a>(&self, ops: impl Iterator<Item = &'a Op>) -> Result<()> {
        let mut todo: Vec<&Op> = ops.collect();
        // A quarter of the cache per round, so a huge group cannot evict the
        // pages it just read before the apply uses them.
        let cap = (self.cache.capacity() / self.pager.ps / 4).max(1);
        for _ in 0..MAX_ROUNDS {
            let gen = self.reuse_gen.load(Ordering::Acquire);
            let mut missing = self.first_misses(&mut todo);
            if missing.is_empty() {
                return Ok(());
            }
            missing.sort_unstable();
            missing.truncate(cap);
            let loaded = self.load_pages(&missing, gen, |_| false)?;
            let c = &self.counters;
            self.cache
                .misses
                .fetch_add(missing.len() as u64, Ordering::Relaxed);
            c.prefetch_rounds.fetch_add(1, Ordering::Relaxed);
            c.prefetched_pages.fetch_add(loaded, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Descends every op's key; keeps in `todo` only the ops that hit a
    /// missing page and returns those pages, each once.
    fn first_misses(&self, todo: &mut Vec<&Op>) -> Vec<u64> {
        let st = self.state.read();
        let mut seen = PidSet::default();
        let mut missing = Vec::new();
        todo.retain(|op| match self.first_miss(&st, op) {
            Some(pid) => {
                if seen.insert(pid) {
                    missing.push(pid);
                }
                true
            }
            None => false,
        });
        missing
    }

    /// The first page on `op`'s path that is neither dirty nor cached.
    fn first_miss(&self, st: &State, op: &Op) -> Option<u64> {
        let tm = st.trees.get(&op.tree).filter(|t| t.root != 0)?;
        let mut pid = tm.root;
        loop {
            let node: Arc<Node> = match st.dirty.get(&pid) {
                Some(n) => n.clone(),
                None => match self.cache.lookup(pid) {
                    Some(n) => n,
                    None => return Some(pid),
                },
            };
            if node.is_leaf() {
                return None;
            }
            pid = node.child(node.child_index(&op.key));
        }
    }

    /// Reads `pids` through one queue and caches them (marked as read ahead
    /// where `ahead(pid)`), unless a page id was released for reuse since
    /// `gen` (then the content may be stale: drop it). Returns the pages
    /// cached, or the first error not explained by such a reuse.
    pub(crate) fn load_pages(
        &self,
        pids: &[u64],
        gen: u64,
        ahead: impl Fn(u64) -> bool,
    ) -> Result<u64> {
        let still = || self.reuse_gen.load(Ordering::Acquire) == gen;
        let mut first_err = None;
        let mut loaded = 0u64;
        self.pager.read_nodes(pids, |pid, node| match node {
            Ok(n) => {
                self.cache
                    .insert_marked(pid, Arc::new(n), ahead(pid), still);
                loaded += 1;
            }
            Err(e) if still() && first_err.is_none() => first_err = Some(e),
            Err(_) => {}
        })?;
        first_err.map_or(Ok(loaded), Err)
    }
}
