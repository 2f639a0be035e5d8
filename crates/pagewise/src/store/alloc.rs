//! Page allocation: free extents (start, length) and the file's high-water mark.
//!
//! Pages freed during an epoch (between checkpoints) go to `pending`: the last
//! durable checkpoint may still reference them, so they become reusable only
//! once the next checkpoint is durable ([`Alloc::release_pending`]).
//!
//! Companions (docs/design.md, "Delta placement"): a node page allocated
//! with [`Alloc::alloc_paired`] keeps the page after it free for its delta
//! block, so a miss reads base and delta in one request. A companion is free
//! on disk (the durable free list holds it); only this allocator, in memory,
//! keeps first fit away from it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[derive(Debug, Clone, Default)]
pub struct Alloc {
    free: BTreeMap<u64, u64>,
    free_pages: u64,
    pending: Vec<(u64, u64)>,
    /// Free pages kept for the page before them (its delta block's place).
    companions: BTreeSet<u64>,
    /// Companions that held a delta block the durable checkpoint may
    /// reference: kept again at release if their owner is still allocated.
    pending_companions: Vec<u64>,
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

    /// Allocates one node page and keeps the page after it as its companion
    /// (free, but not handed out by first fit).
    pub fn alloc_paired(&mut self) -> u64 {
        let first = self.alloc(2);
        self.free_pages += 1;
        assert!(
            self.companions.insert(first + 1),
            "a fresh page is no companion"
        );
        first
    }

    /// Allocates a page beside `base` for a delta block on it: its
    /// companion (or the page after it, if free), else the page before it if
    /// free. None when neither is to be had.
    pub fn alloc_beside(&mut self, base: u64) -> Option<u64> {
        assert!(base >= 2 && base < self.hwm, "base page {base}");
        if self.companions.remove(&(base + 1)) {
            self.free_pages -= 1;
            return Some(base + 1);
        }
        [base + 1, base - 1]
            .into_iter()
            .find(|&p| p >= 2 && self.take_free(p))
    }

    /// Keeps the page after `pid` as its companion if it is free. Returns
    /// whether `pid` has a companion now.
    pub fn reserve_companion(&mut self, pid: u64) -> bool {
        assert!(pid >= 2 && pid < self.hwm, "page {pid}");
        if self.companions.contains(&(pid + 1)) {
            return true;
        }
        if !self.take_free(pid + 1) {
            return false;
        }
        self.free_pages += 1;
        self.companions.insert(pid + 1)
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

    /// Frees companion page `c` (it held a delta block on `c - 1` that the
    /// durable checkpoint may reference): at release it is kept for `c - 1`
    /// again, unless `c - 1` was freed meanwhile.
    pub fn free_companion_later(&mut self, c: u64) {
        assert!(c >= 3 && c < self.hwm, "companion {c}");
        self.pending_companions.push(c);
    }

    /// Frees pages that the durable checkpoint may reference.
    pub fn free_later(&mut self, start: u64, n: u64) {
        assert!(
            n > 0 && start >= 2 && start + n <= self.hwm,
            "free of {start}+{n}"
        );
        self.pending.push((start, n));
    }

    /// The checkpoint that made `pending` unreferenced is durable.
    /// Returns the released extents (companions kept again among them).
    /// Requires: the extents do not overlap what is free or kept.
    pub fn release_pending(&mut self) -> Vec<(u64, u64)> {
        let mut p = std::mem::take(&mut self.pending);
        for &(s, n) in &p {
            self.insert_free(s, n);
        }
        // A companion whose owner was freed is plain free space again.
        for &(s, n) in &p {
            if self.companions.remove(&(s + n)) {
                self.free_pages -= 1;
                self.insert_free(s + n, 1);
            }
        }
        for c in std::mem::take(&mut self.pending_companions) {
            if self.is_free(c - 1) {
                self.insert_free(c, 1);
            } else {
                self.free_pages += 1;
                assert!(self.companions.insert(c), "companion {c} kept twice");
            }
            p.push((c, 1));
        }
        p
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
        for &(s, n) in &self.pending {
            a.insert_free(s, n);
        }
        for &c in self.companions.iter().chain(&self.pending_companions) {
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
        a.release_pending();
        assert_eq!(a.free_ranges(), 1);
        assert_eq!(a.alloc(3), 4);
        assert_eq!(a.alloc(2), 13);
        assert_eq!(a.alloc(1), 7);
        assert_eq!(a.free_pages(), 0);
    }

    #[test]
    fn companions_stay_free_beside_their_pages() {
        let mut a = Alloc::new(2, &[]);
        assert_eq!(a.alloc_paired(), 2);
        assert_eq!(a.alloc(1), 4, "first fit skips the companion");
        assert_eq!((a.free_pages(), a.durable_free_list()), (1, vec![(3, 1)]));
        assert_eq!(a.alloc_beside(2), Some(3));
        assert_eq!(a.free_pages(), 0);
        // The delta at 3 is replaced: not reusable before the checkpoint.
        a.free_companion_later(3);
        assert_eq!(a.alloc_beside(2), None);
        assert_eq!(a.durable_free_list(), vec![(3, 1)]);
        assert_eq!(a.release_pending(), vec![(3, 1)]);
        assert_eq!((a.companion_pages(), a.alloc(1)), (1, 5));
        // Its owner is freed: the companion is plain free space again.
        a.free_later(2, 1);
        a.release_pending();
        assert_eq!(a.companion_pages(), 0);
        assert_eq!((a.free_pages(), a.durable_free_list()), (2, vec![(2, 2)]));
        // The page before a base when its companion is taken.
        assert_eq!(a.alloc_beside(4), Some(3));
        assert!(a.reserve_companion(5), "page 6 is at the end: kept now");
        assert!(!a.reserve_companion(3), "page 4 is in use");
        assert_eq!((a.alloc(1), a.alloc(1)), (2, 7));
        // A companion freed with its owner in the same epoch is free space.
        assert_eq!(a.alloc_beside(5), Some(6));
        a.free_companion_later(6);
        a.free_later(5, 1);
        a.release_pending();
        assert_eq!(
            (a.companion_pages(), a.durable_free_list()),
            (0, vec![(5, 2)])
        );
    }
}
