//! Page allocation: free extents (start, length) and the file's high-water mark.
//!
//! Pages freed during an epoch (between checkpoints) go to `pending`: the last
//! durable checkpoint may still reference them, so they become reusable only
//! once the next checkpoint is durable ([`Alloc::release_pending`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[derive(Debug, Clone, Default)]
pub struct Alloc {
    free: BTreeMap<u64, u64>,
    free_pages: u64,
    pending: Vec<(u64, u64)>,
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

    /// Frees pages that the durable checkpoint may reference.
    pub fn free_later(&mut self, start: u64, n: u64) {
        assert!(
            n > 0 && start >= 2 && start + n <= self.hwm,
            "free of {start}+{n}"
        );
        self.pending.push((start, n));
    }

    /// The checkpoint that made `pending` unreferenced is durable.
    /// Returns the released extents.
    pub fn release_pending(&mut self) -> Vec<(u64, u64)> {
        let p = std::mem::take(&mut self.pending);
        for &(s, n) in &p {
            self.insert_free(s, n);
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
        a.free.into_iter().collect()
    }

    pub fn free_pages(&self) -> u64 {
        self.free_pages
    }
    pub fn pending_pages(&self) -> u64 {
        self.pending.iter().map(|p| p.1).sum()
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
}
