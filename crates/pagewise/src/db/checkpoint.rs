//! Checkpoints: copy-on-write per epoch (docs/design.md, "Checkpoints").

use super::{CommitState, Inner};
use crate::error::Result;
use crate::events::{self, Event};
use crate::store::catalog::Catalog;
use crate::store::extent::Extent;
use crate::store::page::Kind;
use crate::store::superblock::{Superblock, FORMAT_VERSION};
use std::sync::atomic::Ordering;

/// Most collection rounds of one `Db::drain`.
const DRAIN_COLLECT_ROUNDS: usize = 16;

impl Inner {
    pub fn sync(&self) -> Result<()> {
        self.check_open()?;
        if self.read_only {
            return Ok(()); // nothing was written, so everything is durable
        }
        let mut cs = self.commit.lock();
        self.check_poison()?;
        let r = cs.wal.flush().and_then(|_| cs.wal.sync());
        if let Err(e) = &r {
            self.poison(format!("log sync failed: {e}"));
        }
        r
    }

    pub fn checkpoint(&self) -> Result<()> {
        let mut cs = self.commit.lock();
        self.checkpoint_locked(&mut cs)
    }

    /// `Db::drain`: under the commit lock, every B-epsilon tree's buffers
    /// move to its leaves, sparse value runs are collected and the
    /// collection's messages drained as well, then a checkpoint.
    pub fn drain(&self) -> Result<()> {
        let mut cs = self.commit.lock();
        self.check_writable()?;
        self.check_poison()?;
        let r = self.drain_and_collect();
        if let Err(e) = r {
            self.poison(format!("drain failed: {e}"));
            return Err(e);
        }
        self.checkpoint_locked(&mut cs)
    }

    /// Drains, then collects and drains again while collection moves
    /// values, at most [`DRAIN_COLLECT_ROUNDS`] times (each round collects
    /// at most `Options::value_collect_pages`). Requires: the commit lock.
    fn drain_and_collect(&self) -> Result<()> {
        self.ix.drain_trees()?;
        for _ in 0..DRAIN_COLLECT_ROUNDS {
            if self.ix.collect_values()? == 0 {
                break;
            }
            self.ix.drain_trees()?;
        }
        Ok(())
    }

    pub(super) fn checkpoint_locked(&self, cs: &mut CommitState) -> Result<()> {
        self.check_writable()?;
        self.check_poison()?;
        let r = self.write_checkpoint(cs);
        if let Err(e) = &r {
            self.poison(format!("checkpoint failed: {e}"));
        }
        r
    }

    /// The checkpoint of a clean close: skipped when read-only or when no
    /// commit happened since the last checkpoint (nothing dirty, no log).
    pub(super) fn close_checkpoint(&self) -> Result<()> {
        let mut cs = self.commit.lock();
        self.close_checkpoints(&mut cs)
    }

    /// Requires the commit lock, at a clean close. Effect: checkpoints what
    /// is dirty; then, if the log still holds the run a fallback to the
    /// older superblock slot would replay, a second checkpoint with nothing
    /// dirty, so both slots name the same state and no run is replayable;
    /// then the whole log becomes a hole (docs/design.md, "Free space").
    pub(super) fn close_checkpoints(&self, cs: &mut CommitState) -> Result<()> {
        self.checkpoint_if_dirty(cs)?;
        if !self.read_only && cs.wal.bytes == 0 && cs.wal.has_replayable_prev_run() {
            self.checkpoint_locked(cs)?;
            assert!(!cs.wal.has_replayable_prev_run(), "an empty run follows");
        }
        self.punch_log(cs);
        Ok(())
    }

    pub(super) fn checkpoint_if_dirty(&self, cs: &mut CommitState) -> Result<()> {
        if self.read_only || self.is_clean(cs) {
            return Ok(());
        }
        self.checkpoint_locked(cs)
    }

    /// No commit since the last checkpoint and no dirty page.
    pub(super) fn is_clean(&self, cs: &CommitState) -> bool {
        cs.lsn == cs.ckpt_lsn && self.ix.store.state.read().dirty.is_empty()
    }

    /// Requires the commit lock (no commit runs; readers continue). Effect:
    /// writes the dirty pages to their fresh locations, then the catalog,
    /// syncs, writes the superblock into the older slot, syncs again; only
    /// then are pages freed this epoch released for reuse and a new log run
    /// started. A failure before the second sync leaves the durable
    /// checkpoint untouched.
    fn write_checkpoint(&self, cs: &mut CommitState) -> Result<()> {
        let store = &self.ix.store;
        let ps = store.page_size();
        let gen = cs.gen + 1;
        let t0 = std::time::Instant::now();
        self.tell_checkpoint_begin(cs, gen);
        // Glibc's free pages go back before the placement's buffers come.
        crate::store::trim::release_free_heap(self.dirty_limit_bytes);
        // Sparse value runs: their live values are put again, packed.
        self.ix.collect_values()?;
        // Variable-size nodes first: they leave the dirty set for extents.
        self.ix.place_extents(gen)?;
        self.ix.place_value_tables(gen)?;
        let (nodes, trees) = {
            let st = store.state.read();
            (st.dirty.sorted(), st.trees.to_catalog())
        };
        store.pager.write_nodes(&nodes, gen)?;
        let (catalog, bytes, count_pages) = self.place_catalog(
            cs,
            Catalog {
                trees,
                free: Vec::new(),
            },
        );
        store
            .pager
            .write_extent(&catalog, Kind::Blob, &bytes, gen)?;
        if store.pager.size()? < count_pages * ps as u64 {
            store.pager.set_len(count_pages * ps as u64)?;
        }
        store.pager.sync()?;
        let sb = Superblock {
            version: FORMAT_VERSION,
            page_size: ps as u32,
            gen,
            lsn: cs.lsn,
            count_pages,
            catalog,
            db_id: cs.wal.db_id(),
            flags: store.pager.flags(),
        };
        assert!(sb.catalog_is_sane());
        store.pager.write_superblock(&sb)?;
        store.pager.sync()?;
        // Durable: publish the new epoch.
        cs.gen = gen;
        cs.ckpt_lsn = cs.lsn;
        cs.catalog = Some(catalog);
        cs.wal.reset(gen);
        store.finish_epoch(nodes, self.snapshot_max_age);
        store.cache.reserve(0); // the dirty set is empty
                                // The replaced dirty parts and the images evicted for the placed ones.
        crate::store::trim::release_free_heap(self.dirty_limit_bytes);
        self.counters.checkpoints.fetch_add(1, Ordering::Relaxed);
        let (generation, elapsed_us) = (gen, events::elapsed_us(t0));
        let end = Event::CheckpointEnd {
            generation,
            elapsed_us,
        };
        events::tell(self.ix.events.as_deref(), end);
        Ok(())
    }

    /// Tells the event listener that checkpoint `gen` begins.
    fn tell_checkpoint_begin(&self, cs: &mut CommitState, gen: u64) {
        let Some(listener) = self.ix.events.as_deref() else {
            return;
        };
        let now = self
            .ix
            .counters
            .delta_consolidations
            .load(Ordering::Relaxed);
        let consolidations = now - cs.consolidations_at_ckpt;
        cs.consolidations_at_ckpt = now;
        listener.on_event(&Event::CheckpointBegin {
            generation: gen,
            dirty_bytes: self.dirty_bytes(),
            consolidations,
        });
    }

    /// Frees the previous catalog (later), allocates the new one's extent
    /// and encodes it with the free list it must record. Returns the extent,
    /// the bytes and the file's page count after the allocation.
    fn place_catalog(&self, cs: &CommitState, mut catalog: Catalog) -> (Extent, Vec<u8>, u64) {
        let store = &self.ix.store;
        let ps = store.page_size();
        let mut al = store.alloc.lock();
        if let Some(old) = cs.catalog {
            al.free_later(old.first_page, old.count_pages);
        }
        // Taking the extent can split one merged free range in two: +16 bytes.
        catalog.free = al.durable_free_list();
        let estimate_bytes = catalog.encode().len() + 16;
        let count = store.pager.extent_pages(estimate_bytes);
        let first = al.alloc(count);
        catalog.free = al.durable_free_list();
        let bytes = catalog.encode();
        let ext = Extent {
            first_page: first,
            count_pages: count,
            len_bytes: bytes.len() as u64,
        };
        assert!(
            store.pager.extent_pages(bytes.len()) <= count,
            "catalog outgrew its extent"
        );
        assert!(ext.end_page() <= al.hwm && ps > 0);
        (ext, bytes, al.hwm)
    }
}

/// What `Db::check` walks: the durable checkpoint's trees and pages.
pub(crate) struct CheckSnapshot {
    pub trees: Vec<(String, crate::index::Desc)>,
    pub catalog: Option<Extent>,
    pub count_pages: u64,
    pub free: Vec<(u64, u64)>,
}

impl Inner {
    /// Checkpoints, then returns the commit guard (held: no writes and no page
    /// reuse while `check` walks) and what to walk.
    pub(crate) fn check_begin(&self) -> Result<(impl Drop + '_, CheckSnapshot)> {
        let mut cs = self.commit.lock();
        // Everything must be on disk to be verified there; a read-only Db
        // has nothing in memory that is not.
        if !self.read_only && !self.is_clean(&cs) {
            self.checkpoint_locked(&mut cs)?;
        }
        let store = &self.ix.store;
        let trees = store
            .state
            .read()
            .trees
            .0
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        let al = store.alloc.lock();
        let snap = CheckSnapshot {
            trees,
            catalog: cs.catalog,
            count_pages: al.hwm,
            free: al.durable_free_list(),
        };
        drop(al);
        Ok((cs, snap))
    }
}
