//! Page allocation: free extents (start, length) and the file's high-water mark.
//!
//! Pages freed during an epoch (between checkpoints) go to `pending`: the last
//! durable checkpoint may still reference them, so they become reusable only
//! once the next checkpoint is durable ([`Alloc::release_pending`]), and
//! not while a live snapshot may read them from disk: a snapshot of epoch E
//! reads a page from disk only if the page was written before E (allocated
//! in an earlier epoch, or written early: overflow values, B-epsilon
//! extents), so a page born in epoch A and freed in epoch F is held while a
//! snapshot of an epoch in A+1..=F lives (docs/design.md, "Snapshots").
//! Held pages are free on disk (the durable free list holds them), so a
//! crash leaks none.
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

/// Frees of pages born in epoch `born` and freed in epoch `freed`, held
/// for the snapshots of epochs `born + 1..=freed`.
#[derive(Debug, Clone, Default)]
struct Held {
    born: u64,
    freed: u64,
    pages: Vec<(u64, u64)>,
    companions: Vec<(u64, u64)>,
}

impl Held {
    /// Whether a snapshot of one of `live` epochs may read these pages.
    fn needed(&self, live: &[u64]) -> bool {
        live.iter().any(|&e| self.born < e && e <= self.freed)
    }
}

/// Page ranges (first page, pages).
pub type Ranges = Vec<(u64, u64)>;

/// The group of `groups` for pages born in `born` and freed in `freed`.
fn group(groups: &mut Vec<Held>, born: u64, freed: u64) -> &mut Held {
    let at = match groups.iter().position(|h| h.born == born) {
        Some(i) => i,
        None => {
            groups.push(Held {
                born,
                freed,
                ..Held::default()
            });
            groups.len() - 1
        }
    };
    &mut groups[at]
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
    /// Frees of ended epochs that a live snapshot may still read.
    held: Vec<Held>,
    /// The epoch under way (snapshot pins count epochs the same way, from 1).
    epoch: u64,
    /// The epoch each page was born in (allocated, or the one before for a
    /// page written at once); 0: before this process opened the file.
    born: Vec<u32>,
    /// Pages in the file, including the two superblocks.
    pub hwm: u64,
    /// Where the high-water mark is published for the pager's page-id checks.
    published: Option<Arc<AtomicU64>>,
}

impl Alloc {
    pub fn new(hwm: u64, ranges: &[(u64, u64)]) -> Self {
        let mut a = Self {
            hwm,
            epoch: 1,
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
    /// end of the file. They are born in this epoch: no snapshot of an
    /// earlier one reads them, and one of this epoch reads them from the
    /// dirty set, not the disk.
    pub fn alloc(&mut self, n: u64) -> u64 {
        let s = self.take(n);
        self.mark_born(s, n, self.epoch);
        s
    }

    /// [`Alloc::alloc`] for pages written at once and named by the trees
    /// before the checkpoint (overflow values, B-epsilon extents): a
    /// snapshot of this epoch may read them from disk, so they count as
    /// born in the epoch before.
    pub fn alloc_written(&mut self, n: u64) -> u64 {
        let s = self.take(n);
        self.mark_born(s, n, self.epoch - 1);
        s
    }

    fn mark_born(&mut self, s: u64, n: u64, epoch: u64) {
        let end = (s + n) as usize;
        if self.born.len() < end {
            self.born.resize(end.max(self.hwm as usize), 0);
        }
        self.born[s as usize..end].fill(epoch as u32);
    }

    fn born_of(&self, p: u64) -> u64 {
        self.born.get(p as usize).copied().unwrap_or(0) as u64
    }

    fn take(&mut self, n: u64) -> u64 {
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
        let pid = self.take(3) + 1;
        self.mark_born(pid, 1, self.epoch);
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
        let c = match near.clone().find(|c| self.companions.get(c) == Some(&base)) {
            Some(c) => {
                self.companions.remove(&c);
                self.free_pages -= 1;
                c
            }
            None => near.into_iter().find(|&p| p >= 2 && self.take_free(p))?,
        };
        self.mark_born(c, 1, self.epoch);
        Some(c)
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

    /// The checkpoint that ended the epoch under way is durable, so what the
    /// epoch freed is unreferenced by it. `live`: the epochs of the live
    /// snapshots (none later than the one that ended). Releases every free
    /// no live snapshot may read (this epoch's, and those held before) and
    /// holds the rest; the next epoch begins. Returns the released extents
    /// (companions kept again among them) and, apart, those that were held.
    pub fn release_pending(&mut self, live: &[u64]) -> (Ranges, Ranges) {
        let freed = self.epoch;
        assert!(
            live.iter().all(|&e| e <= freed),
            "a snapshot of a later epoch"
        );
        let mut fresh: Vec<Held> = Vec::new();
        for (s, n) in std::mem::take(&mut self.pending) {
            let born = self.born_of(s);
            group(&mut fresh, born, freed).pages.push((s, n));
        }
        for (c, owner) in std::mem::take(&mut self.pending_companions) {
            let born = self.born_of(c);
            group(&mut fresh, born, freed).companions.push((c, owner));
        }
        self.epoch += 1;
        let (mut now, mut was_held) = (Vec::new(), Vec::new());
        for h in fresh {
            match h.needed(live) {
                true => self.held.push(h),
                false => now.extend(self.release_group(h.pages, h.companions)),
            }
        }
        let (keep, go): (Vec<Held>, Vec<Held>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|h| h.needed(live));
        self.held = keep;
        for h in go {
            was_held.extend(self.release_group(h.pages, h.companions));
        }
        (now, was_held)
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

    /// The epoch under way.
    pub fn epoch(&self) -> u64 {
        self.epoch
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
        a.release_pending(&[]);
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
        assert_eq!(a.release_pending(&[]).0, vec![(4, 1)]);
        assert_eq!((a.companion_pages(), a.alloc(1)), (1, 6));
        // Its owner is freed: the companions are plain free space again.
        a.free_companion_later(2, 3);
        a.free_later(3, 1);
        a.release_pending(&[]);
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
        let old: Vec<u64> = (0..4).map(|_| a.alloc(1)).collect(); // born in epoch 1
        a.release_pending(&[]);
        // Epoch 2: a snapshot of it reads the pages born in epoch 1 from disk.
        a.free_later(old[0], 1);
        let young = a.alloc(1); // born in epoch 2: the snapshot never reads it from disk
        a.free_later(young, 1);
        let early = a.alloc_written(1); // written at once: it may
        a.free_later(early, 1);
        assert_eq!(a.release_pending(&[2]).0, vec![(young, 1)]);
        assert_eq!((a.held_pages(), a.free_pages()), (2, 1));
        assert_eq!(
            a.durable_free_list(),
            vec![(2, 1), (6, 2)],
            "held pages are free on disk"
        );
        // Epoch 3: the snapshot of epoch 2 still lives; a page born in epoch 2
        // and freed now is not needed by it (it had it in its dirty set).
        let mid = a.alloc(1);
        assert_eq!(mid, young, "the released page is reused");
        a.release_pending(&[2]);
        a.free_later(old[1], 1);
        a.free_later(mid, 1);
        assert_eq!(a.release_pending(&[2]).0, vec![(mid, 1)], "epoch 4 frees");
        assert_eq!(a.held_pages(), 3);
        // It ended: everything held goes, apart from the fresh frees.
        let (now, was_held) = a.release_pending(&[]);
        assert!(now.is_empty());
        assert_eq!(was_held.len(), 3);
        assert_eq!((a.held_pages(), a.free_pages()), (0, 4));
    }
}
