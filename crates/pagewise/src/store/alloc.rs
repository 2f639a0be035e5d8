//! Page allocation: free extents (start, length) and the file's high-water mark.
//!
//! Pages freed during an epoch (between checkpoints) go to `pending`: the last
//! durable checkpoint may still reference them, so they become reusable only
//! once the next checkpoint is durable ([`Alloc::release_pending`]), and
//! not before every snapshot taken in or before the epoch that freed them
//! has ended: until then the epoch's frees are held (docs/design.md,
//! "Snapshots"). Held pages are free on disk (the durable free list holds
//! them), so a crash leaks none.
//!
//! Companions (docs/design.md, "Delta placement"): a node page allocated
//! with [`Alloc::alloc_node`] keeps the pages before and after it free for
//! its delta blocks (used in turn: copy-on-write never overwrites the one
//! the durable checkpoint holds), so a miss reads base and delta in one
//! request. A companion is free on disk (the durable free list holds it);
//! only this allocator, in memory, keeps first fit away from it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// One epoch's frees, held for snapshots.
#[derive(Debug, Clone, Default)]
struct Held {
    epoch: u64,
    pages: Vec<(u64, u64)>,
    companions: Vec<(u64, u64)>,
}

#[derive(Debug, Clone, Default)]
pub struct Alloc {
    free: BTreeMap<u64, u64>,
    free_pages: u64,
    pending: Vec<(u64, u64)>,
    /// Free pages kept for a neighbour (their owner, the value) as the
    /// place of its delta blocks.
    companions: BTreeMap<u64, u64>,
    /// Companions (page, owner) that held a delta block the durable
    /// checkpoint may reference: kept again at release if their owner is
    /// still allocated.
    pending_companions: Vec<(u64, u64)>,
    /// Frees of ended epochs that a live snapshot may still read: (epoch,
    /// pages, companions), oldest first.
    held: std::collections::VecDeque<Held>,
    /// Pages in the file, including the two superblocks.
    pub hwm: u64,
    /// Where the high-water mark is published for the pager's page-id checks.
    published: Option<Arc<AtomicU64>>,
}

impl Alloc {
    pub fn new(hwm: u64, ranges: &[(u64, u64)]) -> Self {
        let mut a = Self {
            hwm,
            ..Default::default()
        };
        for &(s, n) in ranges {
            a.insert_free(s, n);
        }
        a
    }

    /// Publishes the high-water mark to `to` now and whenever it grows.
    pub fn publish_to(&mut self, to: Arc<AtomicU64>) {
        to.store(self.hwm, Ordering::Relaxed);
        self.published = Some(to);
    }

    /// Allocates `n` contiguous pages: first fit among free extents, else the
    /// end of the file.
    pub fn alloc(&mut self, n: u64) -> u64 {
        assert!(n > 0 && self.hwm >= 2);
        let hit = self
            .free
            .iter()
            .find(|(_, &len)| len >= n)
            .map(|(&s, &len)| (s, len));
        if let Some((s, len)) = hit {
            self.free.remove(&s);
            if len > n {
                self.free.insert(s + n, len - n);
            }
            self.free_pages -= n;
            return s;
        }
        let s = self.hwm;
        self.hwm += n;
        if let Some(p) = &self.published {
            p.store(self.hwm, Ordering::Relaxed);
        }
        assert!(s >= 2, "pages 0 and 1 are the superblocks");
        s
    }

    /// Allocates one node page and keeps the pages before and after it as
    /// its companions (free, but not handed out by first fit).
    pub fn alloc_node(&mut self) -> u64 {
        let pid = self.alloc(3) + 1;
        self.free_pages += 2;
        for c in [pid - 1, pid + 1] {
            let old = self.companions.insert(c, pid);
            assert!(old.is_none(), "fresh page {c} was a companion");
        }
        pid
    }

    /// Allocates a page beside `base` for a delta block on it: one of its
    /// companions (after it first), else the page after or before it if
    /// free; the page before only if `before`. None when none is to be had.
    pub fn alloc_beside(&mut self, base: u64, before: bool) -> Option<u64> {
        assert!(base >= 2 && base < self.hwm, "base page {base}");
        let near = if before {
            &[base + 1, base - 1][..]
        } else {
            &[base + 1][..]
        };
        let near = near.iter().copied();
        if let Some(c) = near.clone().find(|c| self.companions.get(c) == Some(&base)) {
            self.companions.remove(&c);
            self.free_pages -= 1;
            return Some(c);
        }
        near.into_iter().find(|&p| p >= 2 && self.take_free(p))
    }

    /// Whether `pid` has a companion kept for it now.
    pub fn has_companion(&self, pid: u64) -> bool {
        [pid + 1, pid - 1]
            .iter()
            .any(|c| self.companions.get(c) == Some(&pid))
    }

    /// Whether page `p` lies in a free extent.
    fn is_free(&self, p: u64) -> bool {
        self.free
            .range(..=p)
            .next_back()
            .is_some_and(|(&s, &n)| p < s + n)
    }

    /// Takes page `p` out of the free extents if it is there, or grows the
    /// file by it if it is the next page at the end.
    fn take_free(&mut self, p: u64) -> bool {
        if p == self.hwm {
            self.hwm += 1;
            if let Some(h) = &self.published {
                h.store(self.hwm, Ordering::Relaxed);
            }
            return true;
        }
        if !self.is_free(p) {
            return false;
        }
        let (&s, &n) = self.free.range(..=p).next_back().expect("p is free");
        self.free.remove(&s);
        if p > s {
            self.free.insert(s, p - s);
        }
        if s + n > p + 1 {
            self.free.insert(p + 1, s + n - p - 1);
        }
        self.free_pages -= 1;
        true
    }

    /// Frees page `c` beside `owner` (it held a delta block on `owner` that
    /// the durable checkpoint may reference): at release it is kept for
    /// `owner` as a companion, unless `owner` was freed meanwhile.
    pub fn free_companion_later(&mut self, c: u64, owner: u64) {
        assert!(
            c >= 2 && c < self.hwm && c.abs_diff(owner) == 1,
            "companion {c} of {owner}"
        );
        self.pending_companions.push((c, owner));
    }

    /// Frees pages that the durable checkpoint may reference.
    pub fn free_later(&mut self, start: u64, n: u64) {
        assert!(
            n > 0 && start >= 2 && start + n <= self.hwm,
            "free of {start}+{n}"
        );
        self.pending.push((start, n));
    }

    /// The checkpoint that ended epoch `epoch` is durable, so what the
    /// epoch freed is unreferenced by it. Releases every epoch's frees
    /// (held ones, oldest first, then this one's) that no snapshot may
    /// read: those of epochs before `oldest_snapshot`, the epoch of the
    /// oldest live snapshot (None: none is live). The rest are held.
    /// Returns the released extents (companions kept again among them).
    pub fn release_pending(&mut self, epoch: u64, oldest_snapshot: Option<u64>) -> Vec<(u64, u64)> {
        assert!(
            self.held.back().is_none_or(|h| h.epoch < epoch),
            "epochs go forward"
        );
        assert!(oldest_snapshot.is_none_or(|o| o <= epoch + 1));
        self.held.push_back(Held {
            epoch,
            pages: std::mem::take(&mut self.pending),
            companions: std::mem::take(&mut self.pending_companions),
        });
        let mut out = Vec::new();
        let bound = self.held.len();
        for _ in 0..bound {
            match self.held.front() {
                Some(h) if oldest_snapshot.is_none_or(|o| h.epoch < o) => {
                    let h = self.held.pop_front().expect("front");
                    out.extend(self.release_group(h.pages, h.companions));
                }
                _ => break,
            }
        }
        out
    }

    /// Makes `pages` and `companions` (one epoch's frees) reusable.
    fn release_group(
        &mut self,
        mut p: Vec<(u64, u64)>,
        companions: Vec<(u64, u64)>,
    ) -> Vec<(u64, u64)> {
        for &(s, n) in &p {
            self.insert_free(s, n);
        }
        // A companion whose owner was freed is plain free space again.
        for &(s, n) in &p {
            for c in [s - 1, s + n] {
                if self
                    .companions
                    .get(&c)
                    .is_some_and(|o| (s..s + n).contains(o))
                {
                    self.companions.remove(&c);
                    self.free_pages -= 1;
                    self.insert_free(c, 1);
                }
            }
        }
        for (c, owner) in companions {
            if self.is_free(owner) {
                self.insert_free(c, 1);
            } else {
                self.free_pages += 1;
                let old = self.companions.insert(c, owner);
                assert!(old.is_none(), "companion {c} kept twice");
            }
            p.push((c, 1));
        }
        p
    }

    /// Pages held for live snapshots (freed, not yet reusable).
    pub fn held_pages(&self) -> u64 {
        let group = |h: &Held| h.pages.iter().map(|p| p.1).sum::<u64>() + h.companions.len() as u64;
        self.held.iter().map(group).sum()
    }

    fn insert_free(&mut self, mut s: u64, mut n: u64) {
        self.free_pages += n;
        if let Some((&ps, &pn)) = self.free.range(..s).next_back() {
            debug_assert!(ps + pn <= s, "double free of page {s}");
            if ps + pn == s {
                self.free.remove(&ps);
                s = ps;
                n += pn;
            }
        }
        if let Some(&nn) = self.free.get(&(s + n)) {
            self.free.remove(&(s + n));
            n += nn;
        }
        debug_assert!(
            self.free.range(s..s + n).next().is_none(),
            "double free in {s}+{n}"
        );
        self.free.insert(s, n);
    }

    /// Free extents as the next checkpoint will record them: free now, plus
    /// everything freed this epoch.
    pub fn durable_free_list(&self) -> Vec<(u64, u64)> {
        let mut a = Alloc::new(self.hwm, &[]);
        for (&s, &n) in &self.free {
            a.insert_free(s, n);
        }
        let held = self.held.iter();
        for &(s, n) in self
            .pending
            .iter()
            .chain(held.clone().flat_map(|h| &h.pages))
        {
            a.insert_free(s, n);
        }
        let kept = self.companions.keys().copied();
        let held_companions = held.flat_map(|h| h.companions.iter().map(|c| c.0));
        let pending_companions = self.pending_companions.iter().map(|c| c.0);
        for c in kept.chain(pending_companions).chain(held_companions) {
            a.insert_free(c, 1);
        }
        a.free.into_iter().collect()
    }

    /// Pages free now, companions included.
    pub fn free_pages(&self) -> u64 {
        debug_assert!(self.free_pages >= self.companions.len() as u64);
        self.free_pages
    }
    pub fn pending_pages(&self) -> u64 {
        self.pending.iter().map(|p| p.1).sum::<u64>() + self.pending_companions.len() as u64
    }
    /// Companions kept now.
    #[cfg(test)]
    pub fn companion_pages(&self) -> u64 {
        self.companions.len() as u64
    }
    #[cfg(test)]
    pub fn free_ranges(&self) -> usize {
        self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuse_after_release_and_coalesce() {
        let mut a = Alloc::new(2, &[]);
        let p: Vec<u64> = (0..10).map(|_| a.alloc(1)).collect();
        assert_eq!(p, (2..12).collect::<Vec<_>>());
        for &x in &p[2..6] {
            a.free_later(x, 1);
        }
        // Not reusable before the checkpoint is durable.
        assert_eq!(a.alloc(1), 12);
        assert_eq!(a.durable_free_list(), vec![(4, 4)]);
        a.release_pending(0, None);
        assert_eq!(a.free_ranges(), 1);
        assert_eq!(a.alloc(3), 4);
        assert_eq!(a.alloc(2), 13);
        assert_eq!(a.alloc(1), 7);
        assert_eq!(a.free_pages(), 0);
    }

    #[test]
    fn companions_stay_free_beside_their_pages() {
        let mut a = Alloc::new(2, &[]);
        assert_eq!(a.alloc_node(), 3);
        assert_eq!(a.alloc(1), 5, "first fit skips companions 2 and 4");
        assert_eq!(a.free_pages(), 2);
        assert_eq!(a.durable_free_list(), vec![(2, 1), (4, 1)]);
        assert!(a.has_companion(3) && !a.has_companion(5));
        // Delta blocks on base 3 use its companions in turn.
        assert_eq!(a.alloc_beside(3, true), Some(4));
        a.free_companion_later(4, 3);
        assert_eq!(
            a.alloc_beside(3, false),
            None,
            "the page before is not wanted"
        );
        assert_eq!(a.alloc_beside(3, true), Some(2));
        assert_eq!((a.free_pages(), a.alloc_beside(3, true)), (0, None));
        assert_eq!(a.durable_free_list(), vec![(4, 1)]);
        assert_eq!(a.release_pending(0, None), vec![(4, 1)]);
        assert_eq!((a.companion_pages(), a.alloc(1)), (1, 6));
        // Its owner is freed: the companions are plain free space again.
        a.free_companion_later(2, 3);
        a.free_later(3, 1);
        a.release_pending(1, None);
        assert_eq!(a.companion_pages(), 0);
        assert_eq!((a.free_pages(), a.durable_free_list()), (3, vec![(2, 3)]));
        // Plain free pages beside a base serve too, and the file's end.
        assert_eq!(a.alloc_beside(5, true), Some(4));
        assert_eq!(a.alloc_beside(6, false), Some(7));
        assert_eq!(a.hwm, 8);
        assert_eq!((a.alloc(1), a.alloc(1), a.alloc(1)), (2, 3, 8));
    }

    #[test]
    fn frees_wait_for_the_snapshots_that_may_read_them() {
        let mut a = Alloc::new(2, &[]);
        let p: Vec<u64> = (0..6).map(|_| a.alloc(1)).collect();
        a.free_later(p[0], 1);
        // A snapshot of epoch 0 is live: epoch 0's frees are held.
        assert_eq!(a.release_pending(0, Some(0)), vec![]);
        assert_eq!((a.held_pages(), a.free_pages()), (1, 0));
        assert_eq!(
            a.durable_free_list(),
            vec![(2, 1)],
            "held pages are free on disk"
        );
        assert_eq!(a.alloc(1), 8, "a held page is not reused");
        a.free_later(p[1], 1);
        // Still live: epoch 1's frees wait too.
        assert_eq!(a.release_pending(1, Some(0)), vec![]);
        a.free_later(p[2], 1);
        // It ended; a snapshot of epoch 2 is live: epochs 0 and 1 go, 2 waits.
        assert_eq!(a.release_pending(2, Some(2)), vec![(2, 1), (3, 1)]);
        assert_eq!((a.held_pages(), a.free_pages()), (1, 2));
        assert_eq!(a.release_pending(3, None), vec![(4, 1)]);
        assert_eq!((a.held_pages(), a.free_pages()), (0, 3));
    }
}
