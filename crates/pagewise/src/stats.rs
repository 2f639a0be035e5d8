//! What `Db::stats` reports.

use crate::db::Db;
use crate::index::btree::node::capacity;
use crate::index::{Desc, TreeKind};
use crate::options::Durability;
use pagewise_io::IoStatsSnapshot;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

#[derive(Debug, Clone, serde::Serialize)]
pub struct TreeStats {
    pub name: String,
    pub kind: TreeKind,
    pub entries: u64,
    pub height: u32,
    pub leaf_pages: u64,
    pub branch_pages: u64,
    pub overflow_pages: u64,
    /// Encoded leaf entry bytes / (leaf pages x usable bytes per page).
    pub avg_leaf_fill: f64,
    /// Nodes of a B-epsilon tree (each one extent); 0 for B+trees.
    pub nodes: u64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Stats {
    pub page_size: usize,
    pub durability: Durability,
    pub direct_io: bool,
    /// I/O engine under the data file: "uring" when checkpoint writes and
    /// group prefetch reads go through an io_uring queue.
    pub io_engine: &'static str,
    /// I/O by category, counted at the backend: the write-ahead log, tree and
    /// overflow pages, superblocks and catalog.
    pub wal: IoStatsSnapshot,
    pub pages: IoStatsSnapshot,
    pub meta: IoStatsSnapshot,
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub cache_evictions: u64,
    pub cache_bytes: usize,
    pub cache_capacity: usize,
    pub cache_pages: usize,
    pub dirty_pages: usize,
    /// Memory the dirty pages and nodes hold (checkpoints start at a
    /// quarter of `cache_bytes`; the cache's clean images give it up).
    pub dirty_bytes: u64,
    pub file_pages: u64,
    pub free_pages: u64,
    pub pending_free_pages: u64,
    /// Snapshots live now (each iterator and transaction holds one);
    /// snapshots taken with no write between them share one frozen view,
    /// and once their epoch has ended they count as one.
    pub snapshots: u64,
    /// Age of the oldest live snapshot, in milliseconds: of the epoch
    /// (the commits between two checkpoints) it was taken in, from that
    /// epoch's first snapshot, so at most a checkpoint interval above its own.
    pub snapshot_oldest_age_ms: u64,
    /// Freed pages kept from reuse because a live snapshot may read them
    /// (docs/design.md, "Snapshots"), and their bytes.
    pub snapshot_held_pages: u64,
    pub snapshot_held_bytes: u64,
    pub commits: u64,
    pub commit_groups: u64,
    pub checkpoints: u64,
    /// Leaf write-backs between checkpoints (docs/design.md, "Checkpoints").
    pub write_backs: u64,
    /// Holes over freed extents the file system refused with an I/O error
    /// (docs/design.md, "Free space"); 0 normally.
    pub punch_errors: u64,
    pub replayed_records: u64,
    /// Queued read rounds of commit-group prefetch, and the pages they loaded.
    pub prefetch_rounds: u64,
    pub prefetched_pages: u64,
    /// Times a reader waited for node pages: each synchronous node or base
    /// page read, each B-epsilon node range read (a shell, a partition, a
    /// segment) and each queued batch of them (a miss on a delta block
    /// whose parent names its base is one round, docs/design.md "Delta
    /// blocks for B+tree pages").
    pub node_read_rounds: u64,
    /// Iterator read-ahead: batches read, sibling pages asked for, those
    /// later looked up, and those evicted before any lookup.
    pub readahead_rounds: u64,
    pub readahead_pages: u64,
    pub readahead_hits: u64,
    pub readahead_unused: u64,
    /// Delta flushes (docs/design.md, "Delta blocks for B+tree pages"):
    /// full pages kept as the base of a changed node, delta blocks carried
    /// into a changed node, and bases dropped by consolidation.
    pub delta_rebases: u64,
    pub delta_carries: u64,
    pub delta_consolidations: u64,
    /// Delta copies placed away from their base (docs/design.md, "Delta placement").
    pub delta_apart: u64,
    /// B-epsilon point and range reads by node height: shells and
    /// partitions read from the file (ops and bytes), buffer reads skipped
    /// by key filters (docs/design.md, buffer key filters).
    pub bepsilon_reads: Vec<LevelReads>,
    /// B-epsilon cursor steps (each resolves up to a basement's entries),
    /// and of them the forward steps that went on with the merge the step
    /// before left (no descent, no search; docs/design.md, "B-epsilon scans").
    pub bepsilon_scan_steps: u64,
    pub bepsilon_scan_resumes: u64,
    pub wal_bytes_since_checkpoint: u64,
    pub poisoned: Option<String>,
    pub trees: Vec<TreeStats>,
}

fn tree_stats(name: &str, desc: &Desc, page_size: usize) -> TreeStats {
    let t = match desc {
        Desc::BTree(t) => t,
        Desc::BEpsilon(m) => {
            return TreeStats {
                name: name.to_string(),
                kind: desc.kind(),
                entries: m.entries,
                height: m.height,
                leaf_pages: 0,
                branch_pages: 0,
                overflow_pages: 0,
                avg_leaf_fill: 0.0,
                nodes: m.nodes,
            }
        }
    };
    TreeStats {
        name: name.to_string(),
        kind: desc.kind(),
        entries: t.entries,
        height: t.height,
        leaf_pages: t.leaf_pages,
        branch_pages: t.branch_pages,
        overflow_pages: t.overflow_pages,
        avg_leaf_fill: if t.leaf_pages == 0 {
            0.0
        } else {
            t.leaf_bytes as f64 / (t.leaf_pages as f64 * capacity(page_size) as f64)
        },
        nodes: 0,
    }
}

impl Db {
    pub fn stats(&self) -> Stats {
        let i = &self.inner;
        let store = &i.ix.store;
        let ps = store.page_size();
        let (trees, dirty_pages, dirty_bytes, pins) = {
            let st = store.state.read();
            let shared = st.shared_view().map(|v| Arc::strong_count(v) - 1);
            let pins = store.pins.stats(&st.pin, shared);
            let trees = st
                .trees
                .0
                .iter()
                .map(|(n, d)| tree_stats(n, d, ps))
                .collect();
            (trees, st.dirty.len(), st.dirty.bytes(), pins)
        };
        let (file_pages, free_pages, pending_free_pages, held_pages) = {
            let a = store.alloc.lock();
            (a.hwm, a.free_pages(), a.pending_pages(), a.held_pages())
        };
        let (cache, ic) = (&store.cache, &i.ix.counters);
        Stats {
            page_size: ps,
            durability: i.durability,
            direct_io: i.direct,
            io_engine: store.pager.engine(),
            wal: i.io.wal.snapshot(),
            pages: i.io.pages.snapshot(),
            meta: i.io.meta.snapshot(),
            cache_hits: cache.hits.load(),
            cache_misses: cache.misses.load(Relaxed),
            cache_evictions: cache.evictions.load(Relaxed),
            cache_bytes: cache.used_bytes(),
            cache_capacity: cache.capacity(),
            cache_pages: cache.pages(),
            dirty_pages,
            dirty_bytes,
            file_pages,
            free_pages,
            pending_free_pages,
            snapshots: pins.live,
            snapshot_oldest_age_ms: pins.oldest_age.as_millis() as u64,
            snapshot_held_pages: held_pages,
            snapshot_held_bytes: held_pages * ps as u64,
            commits: i.counters.commits.load(Relaxed),
            commit_groups: i.counters.groups.load(Relaxed),
            checkpoints: i.counters.checkpoints.load(Relaxed),
            write_backs: i.counters.write_backs.load(Relaxed),
            punch_errors: i.ix.store.punch_errors.load(Relaxed),
            replayed_records: i.counters.replayed.load(Relaxed),
            prefetch_rounds: ic.prefetch_rounds.load(Relaxed),
            prefetched_pages: ic.prefetched_pages.load(Relaxed),
            node_read_rounds: store.pager.read_rounds.load(Relaxed),
            readahead_rounds: ic.readahead_rounds.load(Relaxed),
            readahead_pages: ic.readahead_pages.load(Relaxed),
            readahead_hits: cache.ahead_hits.load(Relaxed),
            readahead_unused: cache.ahead_unused.load(Relaxed),
            delta_rebases: ic.delta_rebases.load(Relaxed),
            delta_carries: ic.delta_carries.load(Relaxed),
            delta_consolidations: ic.delta_consolidations.load(Relaxed),
            delta_apart: ic.delta_apart.load(Relaxed),
            bepsilon_reads: ic.bepsilon_reads.snapshot(),
            bepsilon_scan_steps: ic.bepsilon_reads.scan_steps.load(),
            bepsilon_scan_resumes: ic.bepsilon_reads.scan_resumes.load(),
            wal_bytes_since_checkpoint: i.wal_bytes(),
            poisoned: i.poisoned(),
            trees,
        }
    }
}

/// Reads of one height of a Db's B-epsilon trees (`Stats::bepsilon_reads`):
/// node shells, partitions (basements at height 0, buffers above) and their
/// bytes as read from the file, and buffer reads a key filter saved. The
/// last height reported also counts every height above it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct LevelReads {
    pub height: u32,
    pub shell_reads: u64,
    pub shell_bytes: u64,
    /// Basements (height 0) or buffers (above) read.
    pub part_reads: u64,
    pub part_bytes: u64,
    /// Gets that skipped a buffer not in memory because its filter said
    /// the key cannot be there.
    pub filter_skips: u64,
    /// Of `part_reads`, buffers a get read as a probe (scanned for its key,
    /// not cached) because the cache had no room.
    pub probes: u64,
}
