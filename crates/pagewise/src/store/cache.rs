//! The buffer pool for clean pages: sharded, bounded in bytes, CLOCK eviction.
//!
//! Dirty pages never live here (the writer keeps them until the checkpoint
//! writes them), so eviction never does I/O and never blocks on it.

use super::image::{Image, MAX_KEEP_PASSES};
use super::read_mostly::ReadMostly;
use super::tally::Tally;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// The smallest unit of a shard's budget the engine asks for (see `new`):
/// shards of at least 4 MiB hold a B-epsilon node image of the default 1 MiB
/// nodes (up to 3 MiB in heap, `bepsilon::write::HEAP_FACTOR`), so no image
/// pushes its shard far over budget.
pub const SHARD_UNIT_BYTES: usize = 512 << 10;

/// Hasher for page ids: one multiply (SipHash costs more than the lookup).
#[derive(Default, Clone, Copy)]
pub struct PidHasher(u64);

impl Hasher for PidHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (v ^ self.0)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(29);
    }
}

/// A map keyed by page id.
pub type PidMap<V> = HashMap<u64, V, BuildHasherDefault<PidHasher>>;

struct Slot {
    pid: u64,
    node: Option<Image>,
    /// CLOCK's second-chance bit; set by readers under the shared lock.
    referenced: AtomicBool,
    /// Loaded by iterator read-ahead and not looked up since.
    ahead: AtomicBool,
    charge: usize,
    /// Unreferenced passes of the hand left before eviction
    /// (`NodeImage::keep_passes`, renewed by a reference).
    spare: u8,
}

#[derive(Default)]
struct Shard {
    map: PidMap<usize>,
    slots: Vec<Slot>,
    free: Vec<usize>,
    hand: usize,
    used: usize,
}

/// Lookups take a shard's lock shared, so readers never block each other.
pub struct Cache {
    shards: Vec<ReadMostly<Shard>>,
    budget: usize,
    /// Bytes the dirty set holds ([`Cache::reserve`]): clean images give
    /// them up, so clean and dirty together stay within the budget.
    reserved: AtomicUsize,
    /// Fraction of a shard's budget clean images always keep, in 1/256ths
    /// ([`Cache::set_dirty_percent`]).
    clean_floor_256: AtomicUsize,
    /// Lookups that found their page (striped: every get adds to it).
    pub hits: Tally,
    pub misses: AtomicU64,
    pub evictions: AtomicU64,
    /// Read-ahead pages found by a lookup, and evicted before any lookup.
    pub ahead_hits: AtomicU64,
    pub ahead_unused: AtomicU64,
}

impl Cache {
    /// A cache of `budget` bytes in up to 16 shards of at least 8
    /// `unit_bytes` each (few shards for tiny caches, so an image never
    /// outgrows its shard's budget).
    pub fn new(budget: usize, unit_bytes: usize) -> Self {
        let n = (budget / (8 * unit_bytes)).clamp(1, 16);
        Self {
            shards: (0..n).map(|_| ReadMostly::new(Shard::default())).collect(),
            budget: budget / n,
            reserved: AtomicUsize::new(0),
            clean_floor_256: AtomicUsize::new(128),
            hits: Tally::default(),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            ahead_hits: AtomicU64::new(0),
            ahead_unused: AtomicU64::new(0),
        }
    }

    /// A shard's budget for clean images: its share of the budget less its
    /// share of the reservation, and at least the clean floor (the dirty
    /// budget, the rest of the cache, triggers a checkpoint before the
    /// reservation passes it).
    fn shard_budget(&self) -> usize {
        let r = self.reserved.load(Ordering::Relaxed) / self.shards.len();
        let floor = self.budget / 256 * self.clean_floor_256.load(Ordering::Relaxed);
        self.budget.saturating_sub(r).max(floor)
    }

    /// The dirty set may take `percent` of the cache before a checkpoint
    /// (`Options::dirty_percent`): clean images keep the rest.
    pub fn set_dirty_percent(&self, percent: usize) {
        assert!((10..=90).contains(&percent));
        let floor_256 = (100 - percent) * 256 / 100;
        self.clean_floor_256.store(floor_256, Ordering::Relaxed);
        assert!(self.shard_budget() >= self.budget / 16);
    }

    /// Sets the bytes the dirty set holds outside the cache; shards above
    /// their new budget evict down to it now. Returns the pages evicted.
    pub fn reserve(&self, dirty_bytes: usize) -> u64 {
        self.reserved.store(dirty_bytes, Ordering::Relaxed);
        let budget = self.shard_budget();
        let mut evicted_total = 0;
        for shard in &self.shards {
            if shard.read().used <= budget {
                continue;
            }
            let mut s = shard.write();
            let (evicted, unused) = Self::make_room(&mut s, 0, budget);
            self.evictions.fetch_add(evicted, Ordering::Relaxed);
            self.ahead_unused.fetch_add(unused, Ordering::Relaxed);
            evicted_total += evicted;
        }
        evicted_total
    }

    fn shard(&self, pid: u64) -> &ReadMostly<Shard> {
        // Fibonacci hashing spreads consecutive page ids over shards.
        let h = pid.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        &self.shards[(h as usize) % self.shards.len()]
    }

    pub fn get(&self, pid: u64) -> Option<Image> {
        let n = self.lookup(pid)?;
        self.hits.add(1);
        Some(n)
    }

    /// A lookup the caller counts (readers add their hits once per operation
    /// instead of contending on the counter per page).
    pub fn lookup(&self, pid: u64) -> Option<Image> {
        self.with(pid, Image::clone)
    }

    /// Runs `f` on the cached image of `pid` (a lookup the caller counts,
    /// as [`Cache::lookup`]) without taking a reference to it: a descent
    /// that only needs a child pointer or a value's bytes then writes no
    /// reference count that readers on other cores share.
    /// Requires: `f` is short and takes no cache lock (it runs under the
    /// shard's read lock, which an insert or eviction of the shard waits
    /// for).
    #[inline]
    pub fn with<R>(&self, pid: u64, f: impl FnOnce(&Image) -> R) -> Option<R> {
        let s = self.shard(pid).read();
        let i = *s.map.get(&pid)?;
        let slot = &s.slots[i];
        if !slot.referenced.load(Ordering::Relaxed) {
            slot.referenced.store(true, Ordering::Relaxed);
        }
        if slot.ahead.load(Ordering::Relaxed) && slot.ahead.swap(false, Ordering::Relaxed) {
            self.ahead_hits.fetch_add(1, Ordering::Relaxed);
        }
        slot.node.as_ref().map(f)
    }

    /// Whether `pid` is cached, without counting it as a use.
    pub fn contains(&self, pid: u64) -> bool {
        self.shard(pid).read().map.contains_key(&pid)
    }

    pub fn count_miss(&self) {
        self.misses.fetch_add(1, Ordering::Relaxed);
    }

    /// Inserts a clean page if `valid()` still holds under the shard lock (the
    /// caller's check that the page id was not reused while it was reading).
    pub fn insert(&self, pid: u64, node: Image, valid: impl FnOnce() -> bool) {
        self.insert_marked(pid, node, false, valid)
    }

    /// `insert`, marking the page as read ahead (`ahead`) so its first
    /// lookup, or its eviction without one, is counted.
    pub fn insert_marked(&self, pid: u64, node: Image, ahead: bool, valid: impl FnOnce() -> bool) {
        let mut s = self.shard(pid).write();
        if !valid() || s.map.contains_key(&pid) {
            return;
        }
        self.put(&mut s, pid, node, ahead, false);
    }

    /// Requires: `node` is a newer image of what `pid` holds (a node with one
    /// more partition loaded), just used by the caller. Effect: it replaces
    /// the cached image, or is inserted, marked referenced so the CLOCK hand
    /// gives it its second chance (a fresh slot would be the first to go).
    pub fn replace(&self, pid: u64, node: Image, valid: impl FnOnce() -> bool) {
        let mut s = self.shard(pid).write();
        if !valid() {
            return;
        }
        if let Some(i) = s.map.remove(&pid) {
            let c = s.slots[i].charge;
            s.slots[i].node = None;
            s.free.push(i);
            s.used -= c;
        }
        self.put(&mut s, pid, node, false, true);
        debug_assert!(s.map.contains_key(&pid));
    }

    /// Makes room in shard `s` and stores `node` under `pid` (absent).
    fn put(&self, s: &mut Shard, pid: u64, node: Image, ahead: bool, referenced: bool) {
        debug_assert!(!s.map.contains_key(&pid));
        let charge = node.charge_bytes();
        let (evicted, unused) = Self::make_room(s, charge, self.shard_budget());
        self.evictions.fetch_add(evicted, Ordering::Relaxed);
        self.ahead_unused.fetch_add(unused, Ordering::Relaxed);
        let spare = node.keep_passes().min(MAX_KEEP_PASSES);
        let slot = Slot {
            pid,
            node: Some(node),
            referenced: AtomicBool::new(referenced),
            ahead: AtomicBool::new(ahead),
            charge,
            spare,
        };
        let i = match s.free.pop() {
            Some(i) => {
                s.slots[i] = slot;
                i
            }
            None => {
                s.slots.push(slot);
                s.slots.len() - 1
            }
        };
        s.map.insert(pid, i);
        s.used += charge;
    }

    /// Evicts until `charge` fits; returns pages evicted, and how many of
    /// them were read-ahead pages nobody looked up.
    fn make_room(s: &mut Shard, charge: usize, budget: usize) -> (u64, u64) {
        let mut evicted = 0;
        let mut unused = 0;
        let mut steps = 0;
        // A slot may be passed three times (shed, second chance, evict)
        // plus its spare passes.
        let limit = (3 + MAX_KEEP_PASSES as usize) * s.slots.len() + 1;
        while s.used + charge > budget && !s.map.is_empty() && steps < limit {
            steps += 1;
            let n = s.slots.len();
            s.hand = (s.hand + 1) % n;
            let h = s.hand;
            let slot = &mut s.slots[h];
            let Some(img) = &slot.node else {
                continue;
            };
            if let Some(small) = img.shed() {
                let c = small.charge_bytes();
                assert!(c <= slot.charge, "a shed image is smaller");
                let freed = slot.charge - c;
                (slot.node, slot.charge) = (Some(small), c);
                s.used -= freed;
                continue;
            }
            if *slot.referenced.get_mut() {
                *slot.referenced.get_mut() = false;
                slot.spare = img.keep_passes().min(MAX_KEEP_PASSES);
                continue;
            }
            if slot.spare > 0 {
                slot.spare -= 1;
                continue;
            }
            let (pid, c) = (slot.pid, slot.charge);
            unused += *slot.ahead.get_mut() as u64;
            slot.node = None;
            s.map.remove(&pid);
            s.free.push(h);
            s.used -= c;
            evicted += 1;
        }
        (evicted, unused)
    }

    pub fn remove(&self, pid: u64) {
        let mut s = self.shard(pid).write();
        if let Some(i) = s.map.remove(&pid) {
            let c = s.slots[i].charge;
            s.slots[i].node = None;
            s.free.push(i);
            s.used -= c;
        }
    }

    /// Whether `pid`'s shard can take `bytes` more without evicting.
    pub fn has_room(&self, pid: u64, bytes: usize) -> bool {
        let s = self.shard(pid).read();
        s.used + bytes <= self.budget
    }

    /// The budget of each shard for clean images, in bytes.
    pub fn shard_budget_bytes(&self) -> usize {
        self.budget
    }

    pub fn used_bytes(&self) -> usize {
        self.shards.iter().map(|s| s.read().used).sum()
    }

    pub fn capacity(&self) -> usize {
        self.budget * self.shards.len()
    }

    pub fn pages(&self) -> usize {
        self.shards.iter().map(|s| s.read().map.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::image::testing::blob;

    fn node(n: usize) -> Image {
        blob(n)
    }

    #[test]
    fn bounded_and_clock_keeps_referenced() {
        let c = Cache::new(4096, 512);
        assert_eq!(c.shards.len(), 1);
        for pid in 0..100 {
            c.insert(pid, node(300), || true);
            // Keep page 0 hot.
            assert!(c.get(0).is_some(), "hot page evicted at {pid}");
            assert!(c.used_bytes() <= 4096);
        }
        assert!(c.get(99).is_some());
        assert!(c.evictions.load(Ordering::Relaxed) > 80);
    }

    /// An image that can drop `parts` units of 100 bytes, one per pass.
    struct Layered(usize);

    impl crate::store::image::NodeImage for Layered {
        fn charge_bytes(&self) -> usize {
            100 + 100 * self.0
        }
        fn encode_page(&self, _: &mut [u8]) -> crate::store::image::PageFill {
            unreachable!()
        }
        fn shed(&self) -> Option<Image> {
            (self.0 > 0).then(|| std::sync::Arc::new(Layered(self.0 - 1)) as Image)
        }
    }

    #[test]
    fn clock_sheds_parts_before_evicting_and_replace_keeps_the_slot_hot() {
        let c = Cache::new(4096, 512);
        c.insert(1, std::sync::Arc::new(Layered(30)), || true); // 3,100 bytes
        for pid in 10..30 {
            c.insert(pid, node(200), || true);
            assert!(c.used_bytes() <= 4096);
        }
        assert!(c.contains(1), "shed, not evicted");
        assert!(c.get(1).unwrap().charge_bytes() < 3100);
        // A replaced image is marked used: the hand's next pass spares it.
        c.replace(1, std::sync::Arc::new(Layered(0)), || true);
        c.insert(20, node(200), || true);
        assert!(c.contains(1));
        assert_eq!(c.get(1).unwrap().charge_bytes(), 100);
        c.replace(2, node(10), || false);
        assert!(!c.contains(2), "an invalid replace stores nothing");
    }

    /// An image of 300 bytes that asks for `.0` extra passes.
    struct Kept(u8);

    impl crate::store::image::NodeImage for Kept {
        fn charge_bytes(&self) -> usize {
            300
        }
        fn encode_page(&self, _: &mut [u8]) -> crate::store::image::PageFill {
            unreachable!()
        }
        fn keep_passes(&self) -> u8 {
            self.0
        }
    }

    #[test]
    fn images_asking_for_passes_outlive_plain_ones_but_not_forever() {
        let c = Cache::new(4096, 512);
        c.insert(1, std::sync::Arc::new(Kept(2)), || true);
        c.insert(2, std::sync::Arc::new(Kept(0)), || true);
        // 13 images fit; from pid 33 on the hand passes slot 0 once per 13
        // inserts: a plain image there would go at once.
        for pid in 10..40 {
            c.insert(pid, std::sync::Arc::new(Kept(0)), || true);
            assert!(c.used_bytes() <= 4096);
        }
        assert!(!c.contains(2), "a plain image goes on the first pass");
        assert!(c.contains(1), "two more passes for the kept image");
        for pid in 40..100 {
            c.insert(pid, std::sync::Arc::new(Kept(0)), || true);
        }
        assert!(!c.contains(1), "unreferenced, it goes after its passes");
    }

    #[test]
    fn a_reservation_shrinks_the_clean_budget_down_to_half() {
        let c = Cache::new(8192, 1024);
        assert_eq!(c.shards.len(), 1);
        for pid in 0..20 {
            c.insert(pid, node(300), || true);
        }
        let full = c.used_bytes();
        assert!(full > 6000 && full <= 8192, "{full}");
        assert!(c.reserve(3000) > 0, "evicted down to the new budget");
        assert!(c.used_bytes() <= 8192 - 3000);
        for pid in 20..40 {
            c.insert(pid, node(300), || true);
            assert!(c.used_bytes() <= 8192 - 3000, "inserts respect it");
        }
        c.reserve(1 << 20);
        assert!(
            c.used_bytes() <= 4096 && c.used_bytes() > 3000,
            "at least half"
        );
        assert_eq!(c.reserve(0), 0, "releasing evicts nothing");
        for pid in 40..80 {
            c.insert(pid, node(300), || true);
        }
        assert!(c.used_bytes() > 6000, "the whole budget again");
    }

    #[test]
    fn insert_refused_when_invalid() {
        let c = Cache::new(1 << 20, 4096);
        c.insert(5, node(10), || false);
        assert!(c.get(5).is_none());
        c.insert(5, node(10), || true);
        c.remove(5);
        assert!(c.get(5).is_none());
        assert_eq!(c.used_bytes(), 0);
    }

    #[test]
    fn read_ahead_pages_count_their_first_use_or_their_unused_eviction() {
        let c = Cache::new(4096, 512);
        c.insert_marked(1, node(300), true, || true);
        c.insert_marked(2, node(300), true, || true);
        c.insert(3, node(300), || true);
        assert!(c.contains(1) && c.contains(3));
        assert_eq!(
            c.ahead_hits.load(Ordering::Relaxed),
            0,
            "contains is no use"
        );
        c.get(1).unwrap();
        c.get(1).unwrap();
        c.get(3).unwrap();
        assert_eq!(c.ahead_hits.load(Ordering::Relaxed), 1);
        for pid in 10..40 {
            c.insert(pid, node(300), || true);
        }
        assert!(!c.contains(2));
        assert_eq!(
            c.ahead_unused.load(Ordering::Relaxed),
            1,
            "page 2 was never used"
        );
    }
}
