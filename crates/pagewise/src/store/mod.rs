//! The node store: pages and extents in one data file, the allocator, the
//! cache of node images, the epoch's dirty set and deferred frees, the
//! superblock and the catalog. It knows node formats only through
//! [`image::NodeImage`] and [`image::NodeCodec`], and tree state only as the
//! opaque `T` it guards; it imports nothing from the index layer.

pub mod alloc;
pub mod cache;
pub mod catalog;
pub mod claims;
pub mod cores;
pub mod crc;
pub mod dirty;
pub mod extent;
pub mod image;
pub mod layout;
pub mod page;
pub mod pager;
pub mod pin;
pub mod read;
pub mod read_mostly;
pub mod superblock;
pub mod tally;
pub mod trim;

use alloc::Alloc;
use cache::Cache;
use crossbeam_utils::sync::{ShardedLockReadGuard, ShardedLockWriteGuard};
use dirty::Dirty;
use extent::Extent;
use page::Kind;
use pager::Pager;
use parking_lot::Mutex;
use pin::{Pin, Pins};
use read::Frozen;
use read_mostly::ReadMostly;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What the state lock guards: the trees' in-memory descriptors (`T`, owned
/// by the index layer) and the dirty images they point into. One lock, so a
/// reader sees roots and pages of the same moment. A snapshot is a frozen
/// copy of it ([`Epoch::freeze`]).
pub struct Epoch<T> {
    pub trees: T,
    pub dirty: Dirty,
    /// The pin snapshots taken in this epoch hold.
    pub pin: Arc<Pin>,
    /// A frozen copy of this state that snapshots without an age bound
    /// share until the next write ([`StateLock::write`] clears it): taking
    /// one is then one pointer copy.
    view: std::sync::OnceLock<Arc<Frozen<T>>>,
}

impl<T> Epoch<T> {
    pub fn new(trees: T, pin: Arc<Pin>) -> Self {
        Epoch {
            trees,
            dirty: Dirty::default(),
            pin,
            view: std::sync::OnceLock::new(),
        }
    }

    /// The shared frozen copy, if one was made since the last write.
    pub fn shared_view(&self) -> Option<&Arc<Frozen<T>>> {
        self.view.get()
    }
}

impl<T: Clone> Epoch<T> {
    /// The state as it is now, for a snapshot taken at `now_ns` (cheap:
    /// `T` is expected to share its contents, the dirty set does).
    pub fn freeze(&self, now_ns: u64) -> Epoch<T> {
        self.pin.taken(now_ns);
        Epoch::new_frozen(self.trees.clone(), self.dirty.freeze(), self.pin.clone())
    }

    fn new_frozen(trees: T, dirty: Dirty, pin: Arc<Pin>) -> Self {
        Epoch {
            trees,
            dirty,
            pin,
            view: std::sync::OnceLock::new(),
        }
    }

    /// A snapshot of the state now: the shared frozen copy when there is no
    /// age bound (made by the first snapshot after a write), else a copy of
    /// its own (its age counts from now).
    pub fn snapshot(&self, now_ns: u64, max_age: Option<std::time::Duration>) -> Arc<Frozen<T>> {
        let make = || {
            Arc::new(Frozen {
                epoch: self.freeze(now_ns),
                taken_ns: now_ns,
                max_age,
            })
        };
        match max_age {
            None => self.view.get_or_init(make).clone(),
            Some(_) => make(),
        }
    }
}

/// The state lock: a reader-writer lock over [`Epoch`] whose write side
/// drops the shared frozen view (a write changes what it froze). Every get
/// takes it shared, so it is a [`ReadMostly`] lock: readers on two cores
/// write no common cache line; writers take it once per commit group or
/// checkpoint step.
pub struct StateLock<T>(ReadMostly<Epoch<T>>);

impl<T> StateLock<T> {
    pub fn new(epoch: Epoch<T>) -> Self {
        StateLock(ReadMostly::new(epoch))
    }

    #[inline]
    pub fn read(&self) -> ShardedLockReadGuard<'_, Epoch<T>> {
        self.0.read()
    }

    #[inline]
    pub fn write(&self) -> ShardedLockWriteGuard<'_, Epoch<T>> {
        let mut g = self.0.write();
        g.view.take();
        g
    }
}

pub struct Store<T> {
    pub pager: Pager,
    pub cache: Cache,
    pub state: StateLock<T>,
    pub alloc: Mutex<Alloc>,
    /// Bumped whenever freed page ids become reusable (end of a checkpoint):
    /// a page read without locks is trusted only if it did not change.
    pub reuse_gen: AtomicU64,
    /// Holes the file system refused with an I/O error (`Db::stats`).
    pub punch_errors: AtomicU64,
    /// Pins of ended epochs that snapshots still hold.
    pub pins: Pins,
}

/// `ranges` sorted, with touching ones joined.
fn coalesce(mut ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    ranges.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (s, n) in ranges {
        match out.last_mut() {
            Some(last) if last.0 + last.1 == s => last.1 += n,
            _ => out.push((s, n)),
        }
    }
    out
}

/// Released extents at least this long are punched out of the file: the
/// B-epsilon tree's node extents (a freed 1 MiB node), not single B+tree
/// pages, whose holes would cost a file-system extent each and be reused
/// within an epoch or two.
pub const PUNCH_MIN_BYTES: u64 = 64 << 10;

impl<T> Store<T> {
    /// A store over `pager` whose allocator starts from the durable
    /// checkpoint's page count and free list.
    pub fn new(
        pager: Pager,
        cache: Cache,
        trees: T,
        count_pages: u64,
        free: &[(u64, u64)],
    ) -> Self {
        assert!(count_pages >= 2);
        let mut alloc = Alloc::new(count_pages, free);
        alloc.publish_to(pager.limit_pages());
        Self {
            pager,
            cache,
            state: StateLock::new(Epoch::new(trees, Arc::new(Pin::new(1)))),
            alloc: Mutex::new(alloc),
            reuse_gen: AtomicU64::new(0),
            punch_errors: AtomicU64::new(0),
            pins: Pins::default(),
        }
    }

    pub fn page_size(&self) -> usize {
        self.pager.ps
    }

    /// Writes each of `values` to a fresh extent of its own, the extents
    /// back to back in one allocation, so a commit group's values take one
    /// I/O per MiB. Fresh pages are never referenced by the durable
    /// checkpoint, so writing them before the log is safe.
    pub fn write_value_extents(&self, values: &[&[u8]]) -> crate::error::Result<Vec<Extent>> {
        if values.is_empty() {
            return Ok(Vec::new());
        }
        let counts: Vec<u64> = values
            .iter()
            .map(|v| self.pager.extent_pages(v.len()))
            .collect();
        let mut at = self.alloc.lock().alloc_written(counts.iter().sum());
        let exts: Vec<Extent> = values
            .iter()
            .zip(&counts)
            .map(|(v, &n)| {
                let e = Extent::new(at, v.len() as u64, self.pager.ps);
                assert_eq!(e.count_pages, n);
                at += n;
                e
            })
            .collect();
        self.pager.write_extent_run(&exts, Kind::Overflow, values)?;
        Ok(exts)
    }

    /// Called once a checkpoint is durable: the written images become clean
    /// cache entries, pages freed in the epoch and earlier ones that no
    /// live snapshot (younger than `snapshot_max_age`) may read become
    /// reusable (and leave the cache), and readers holding page ids from
    /// before are told to re-check.
    pub fn finish_epoch(
        &self,
        written: Vec<(u64, image::Image)>,
        snapshot_max_age: Option<Duration>,
    ) {
        let mut epoch = self.state.write();
        for (pid, node) in written {
            epoch.dirty.remove(pid);
            self.cache.remove(pid);
            self.cache.insert(pid, node, || true);
        }
        assert!(
            epoch.dirty.is_empty(),
            "dirty pages appeared during a checkpoint"
        );
        let ended = epoch.pin.epoch;
        let pin = std::mem::replace(&mut epoch.pin, Arc::new(Pin::new(ended + 1)));
        let live = self.pins.retire(pin, snapshot_max_age);
        let (released, was_held) = {
            let mut al = self.alloc.lock();
            assert_eq!(
                al.epoch(),
                ended,
                "the allocator and the pins count epochs alike"
            );
            al.release_pending(&live)
        };
        self.reuse_gen.fetch_add(1, Ordering::AcqRel);
        for &(s, n) in released.iter().chain(&was_held) {
            for p in s..s + n {
                self.cache.remove(p);
            }
        }
        self.punch_released(&released);
        // Frees a snapshot held: often many pages at once (a fill during
        // a long snapshot); their runs are punched as freed extents are.
        self.punch_released(&coalesce(was_held));
    }

    /// Punches a hole over each released extent of at least
    /// [`PUNCH_MIN_BYTES`] (docs/design.md, "Free space"), after
    /// `reuse_gen` moved, so a reader still holding such a page restarts as
    /// it would for a reused one. Advisory: a failed punch leaves the pages
    /// allocated in the file and free in the allocator, nothing else.
    fn punch_released(&self, released: &[(u64, u64)]) {
        let min_pages = (PUNCH_MIN_BYTES / self.pager.ps as u64).max(1);
        for &(s, n) in released.iter().filter(|r| r.1 >= min_pages) {
            if self.pager.punch(s, n).is_err() {
                self.punch_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}
