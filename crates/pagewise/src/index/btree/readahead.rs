//! Iterator read-ahead. When an iterator reaches a leaf that is not cached,
//! it reads that leaf together with the next few sibling leaves under the same
//! parent (in its direction of travel, not past its end bound) through one
//! queue, so a long scan waits for one device round trip per batch instead of
//! one per leaf.
//!
//! The window adapts like OS read-ahead: nothing on the first leaf (a short
//! range that stays in one leaf pays nothing), then 2 siblings, doubling with
//! each batch up to `Options::read_ahead` (default [`crate::options::READ_AHEAD_DEFAULT_PAGES`]) and
//! 1/16 of the cache. It doubles per batch
//! rather than per leaf: the leaves in between come from the previous batch,
//! and growing per leaf would let a scan that ends soon read far past its end.
//!
//! Best effort: a failed read-ahead read is ignored (the normal read path
//! reads the leaf again and reports its error) and nothing depends on the
//! pages staying cached.

use crate::index::Index;
use crate::store::read::NodeRef;
use std::sync::atomic::Ordering;

/// Siblings read with the second leaf an iterator visits.
const FIRST_PAGES: usize = 2;

/// Read-ahead state of one direction of one iterator.
#[derive(Debug, Default)]
pub struct Window {
    leaves: u64,
    size: usize,
}

impl Window {
    /// Siblings to read with the next leaf if it misses: none until a leaf
    /// was consumed, never more than `cap`.
    pub fn pages(&self, cap: usize) -> usize {
        if self.leaves == 0 {
            return 0;
        }
        self.size.max(FIRST_PAGES).min(cap)
    }

    pub fn leaf_done(&mut self) {
        self.leaves += 1;
    }

    /// A batch was read: the next one may be twice as large (up to `cap`).
    pub fn grow(&mut self, cap: usize) {
        self.size = (self.size.max(FIRST_PAGES) * 2).min(cap.max(FIRST_PAGES));
    }
}

/// The largest read-ahead batch: the option's, and 1/16 of the cache's
/// pages so a batch cannot evict much of what the cache holds.
pub fn cap_pages(ix: &Index) -> usize {
    (ix.store.cache.capacity() / ix.store.page_size() / 16).min(ix.read_ahead_pages)
}

/// Reads the missing leaf `refs[0]` and the sibling leaves after it (each
/// with the base its parent names) through one queue. `gen` is the reuse
/// generation the page ids were seen under: pages read after a reuse are
/// not cached. Errors are ignored, see the module comment.
pub fn read_ahead(ix: &Index, refs: &[NodeRef], gen: u64) {
    let Some(leaf) = refs.first().map(|r| r.pid) else {
        return;
    };
    ix.store.cache.count_miss();
    let c = &ix.counters;
    c.readahead_rounds.fetch_add(1, Ordering::Relaxed);
    c.readahead_pages
        .fetch_add(refs.len() as u64 - 1, Ordering::Relaxed);
    let _ = ix.store.load_pages(refs, gen, |pid| pid != leaf);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_starts_after_the_first_leaf_and_doubles_per_batch_to_the_cap() {
        let mut w = Window::default();
        assert_eq!(w.pages(32), 0, "first leaf reads nothing ahead");
        w.leaf_done();
        assert_eq!(w.pages(32), 2);
        let mut seen = vec![];
        for _ in 0..6 {
            w.grow(32);
            seen.push(w.pages(32));
        }
        assert_eq!(seen, [4, 8, 16, 32, 32, 32]);
        w.grow(1000);
        assert_eq!(w.pages(1000), 64, "grows by doubling only");
        assert_eq!(w.pages(5), 5, "the cache's cap wins");
        assert_eq!(w.pages(0), 0, "a tiny cache reads nothing ahead");
    }
}
