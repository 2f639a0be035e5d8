use crate::error::{Error, Result};
use crate::events::EventListener;
use pagewise_io::{Fs, RealFs};
use std::sync::Arc;

/// When a write is acknowledged relative to its durability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// A commit returns after its log record is written and fsync'd
    /// (group commit: concurrent committers share one fsync).
    Sync,
    /// A commit returns at once; it becomes durable at the next
    /// `Db::sync`, checkpoint, or clean close. A crash may lose it, but never
    /// half of a batch and never an earlier synced write.
    Buffered,
}

/// Settings for [`crate::Db::create`] and [`crate::Db::open`].
#[derive(Debug, Clone)]
pub struct Options {
    /// Page size in bytes: a power of two in 512..=65536, at least the device's
    /// logical block size. Fixed at creation; `open` reads it from the file.
    pub page_size: usize,
    /// Memory for node images, in bytes: cached clean pages and nodes (their
    /// decoded in-memory size, about one page each for B+tree pages, their
    /// heap bytes for B-epsilon nodes) and the dirty ones changed since the
    /// last checkpoint, together. Clean images give up what the dirty ones
    /// hold; the dirty ones reaching [`Options::dirty_percent`] of this (at
    /// least 16 pages) triggers a checkpoint. The process holds about this
    /// plus a few MiB (docs/design.md, "Buffer pool").
    pub cache_bytes: usize,
    /// Percent of `cache_bytes` the images changed since the last checkpoint
    /// may hold before they trigger one; clean images keep the rest. In
    /// [10, 90]. Larger means fewer, larger checkpoints: each one rewrites
    /// every changed node however little changed, so write amplification
    /// falls, while fewer clean images stay cached during writes.
    /// [`DIRTY_PERCENT_DEFAULT`], chosen by measurement (docs/benchmarks.md,
    /// "Memory").
    pub dirty_percent: u8,
    pub durability: Durability,
    /// Use O_DIRECT (falls back to buffered I/O where the filesystem refuses it).
    pub direct_io: bool,
    /// Most sibling leaves a B+tree iterator reads together with a leaf it
    /// misses (the window starts at 2 and doubles per batch up to this, and
    /// to 1/16 of the cache's pages), and most basements of the same leaf a
    /// B-epsilon cursor reads with a basement it misses (up to 8 and 1/16
    /// of the cache's bytes: one from the later half of its first basement,
    /// then doubling per basement it ends); 0 turns iterator read-ahead off.
    pub read_ahead: usize,
    /// Checkpoint when the write-ahead log holds this many bytes (at least
    /// [`WAL_LIMIT_MIN_BYTES`], 64 KiB). Recovery replays at most about this much log; the log file
    /// keeps about this length until a clean close punches it out. Larger
    /// means fewer checkpoints, each rewriting every changed node whole:
    /// [`WAL_LIMIT_DEFAULT`], chosen by measurement (docs/benchmarks.md,
    /// "B-epsilon tree").
    pub wal_limit: u64,
    /// Sparse redo log: every log flush starts in a fresh 4 KiB block and
    /// zero-pads it instead of rewriting the partly filled last block, so a
    /// drive with in-storage compression stores only the new bytes
    /// (docs/design.md, "Write-ahead log"; measured in docs/benchmarks.md).
    pub sparse_log: bool,
    /// Delta flushes for the Db's B+trees: a checkpoint writes a changed
    /// node as a small delta block on its unchanged base page while its
    /// changes stay under a threshold (docs/design.md, "Delta blocks for
    /// B+tree pages"). None (the default): every changed node is written whole.
    /// Costs: a read that misses such a node reads two pages, one after the
    /// other, and the file grows by up to a page per node with a delta
    /// (docs/benchmarks.md, "Delta-flushed pages").
    pub delta_flush: Option<DeltaFlush>,
    /// Fraction of a B+tree page that an append at a tree's right edge (a
    /// load in key order) leaves in the full page it splits, like a B-tree
    /// fill factor: 1.0 (the default) packs loaded pages full; 0.69 leaves
    /// them as full as random inserts would. In [0.5, 1.0]; other splits
    /// (inserts inside the key range) always split at the byte midpoint.
    /// Not stored in the file: it applies to the writes of this open.
    pub append_fill: f64,
    /// Open without writing anything: files are opened read-only, writes and
    /// checkpoints return [`Error::ReadOnly`], and opening a Db whose log
    /// holds records to replay returns [`Error::NeedsRecovery`] (recovery
    /// writes). Ignored by `create`.
    pub read_only: bool,
    /// Where files come from: the real filesystem, or a simulated one in tests.
    pub fs: Arc<dyn Fs>,
    /// How `Tree::upsert` operands combine with a value (B-epsilon trees);
    /// register the same operator every time a Db holding upserts is opened
    /// (docs/design.md, "B-epsilon nodes", merge operator).
    pub merge_operator: Option<Arc<dyn MergeOperator>>,
    /// Told of checkpoints, leaf write-backs and B-epsilon buffer flushes as
    /// they happen ([`crate::Event`]; contract on [`crate::EventListener`]).
    /// None (the default): nothing is told. Not stored in the file.
    pub event_listener: Option<Arc<dyn EventListener>>,
    /// Longest a snapshot (and a transaction's, and an iterator's) keeps
    /// the pages it reads from reuse: older, its reads fail with
    /// [`Error::SnapshotTooOld`] and the next checkpoint reuses what only
    /// it held (docs/design.md, "Snapshots"). None (the default): no bound.
    /// Not stored in the file.
    pub snapshot_max_age: Option<std::time::Duration>,
    /// Most pages of B-epsilon value runs one checkpoint reads to collect
    /// (docs/design.md, "B-epsilon packed values", collection): pages at
    /// most half live are read, their live values written again packed and
    /// the pages freed once the tree no longer names them. 0: never
    /// collect. Not stored in the file.
    pub value_collect_pages: usize,
    /// A value run page is collected when the values its tree still names
    /// fill at most this share (percent) of its payload: higher keeps the
    /// file closer to the live data, at more bytes rewritten per page
    /// freed.
    /// Not stored in the file.
    pub value_collect_live_pct: u8,
}

/// The default [`Options::value_collect_pages`]: 4 MiB of 4 KiB pages read
/// per checkpoint at most, beside the megabytes a checkpoint writes.
pub const VALUE_COLLECT_PAGES_DEFAULT: usize = 1024;

/// The default [`Options::value_collect_live_pct`]: pages at most 70%
/// full of live values are collected, so the pages kept hold at least 70% live values
/// (about 1.4x the live bytes at worst), for at most 2.3 bytes rewritten
/// per byte freed.
pub const VALUE_COLLECT_LIVE_PCT_DEFAULT: u8 = 70;

/// Combines upsert operands with a key's value, like RocksDB's merge
/// operator without partial merges.
///
/// Contract: `full_merge(key, existing, operands)` gets the value before the
/// first operand (`None` when the key is absent or was deleted) and the
/// operands in the order they were committed (oldest first), and returns the
/// new value. It is always called with operands in commit order, so it need
/// not be associative; it must be deterministic (replay calls it again) and
/// must not panic on operands it did not expect (return something instead).
pub trait MergeOperator: Send + Sync + 'static {
    /// A name for messages and stats.
    fn name(&self) -> &str;
    fn full_merge(&self, key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Vec<u8>;
}

impl std::fmt::Debug for dyn MergeOperator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MergeOperator({:?})", self.name())
    }
}

impl Default for Options {
    fn default() -> Self {
        Self {
            page_size: 4096,
            cache_bytes: 64 << 20,
            dirty_percent: DIRTY_PERCENT_DEFAULT,
            durability: Durability::Sync,
            direct_io: true,
            read_ahead: READ_AHEAD_DEFAULT_PAGES,
            wal_limit: WAL_LIMIT_DEFAULT,
            sparse_log: false,
            delta_flush: None,
            append_fill: 1.0,
            read_only: false,
            fs: Arc::new(RealFs),
            merge_operator: None,
            event_listener: None,
            snapshot_max_age: None,
            value_collect_pages: VALUE_COLLECT_PAGES_DEFAULT,
            value_collect_live_pct: VALUE_COLLECT_LIVE_PCT_DEFAULT,
        }
    }
}

/// Delta-flush settings (docs/design.md, "Delta blocks for B+tree pages").
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeltaFlush {
    /// A node's change records since its base page may take this many bytes
    /// before the node is written whole again (consolidation).
    pub threshold_bytes: usize,
    /// Unit a delta block is written in: a power of two, at least 512 and
    /// the device block, at most the page size.
    pub block_bytes: usize,
}

impl Default for DeltaFlush {
    /// Chosen by measurement: docs/benchmarks.md, "Delta-flushed pages".
    fn default() -> Self {
        Self {
            threshold_bytes: 2048,
            block_bytes: 4096,
        }
    }
}

impl DeltaFlush {
    /// Checks the settings against the page size and device block.
    pub(crate) fn validate(&self, page_size: usize, device_block: usize) -> Result<()> {
        let lo = device_block.max(512);
        let b = self.block_bytes;
        if !b.is_power_of_two() || b < lo || b > page_size {
            return Err(Error::Options(format!(
                "delta block bytes {b} must be a power of two between {lo} and the page size {page_size}"
            )));
        }
        if self.threshold_bytes == 0 {
            return Err(Error::Options(
                "delta threshold must be at least 1 byte".into(),
            ));
        }
        Ok(())
    }
}

/// The least [`Options::wal_limit`]: 64 KiB (below it the log would force a
/// checkpoint every few commits).
pub const WAL_LIMIT_MIN_BYTES: u64 = 64 << 10;

/// The default [`Options::wal_limit`]: 256 MiB.
pub const WAL_LIMIT_DEFAULT: u64 = 256 << 20;

/// The default [`Options::dirty_percent`]: 75. At 80 a 5M-row iiBench of
/// B-epsilon trees held 274-280 MiB at its peak under a 256 MiB cache
/// (glibc's partly used pages beside the charged bytes); at 75, 266-267
/// MiB, for fill WA 2.88 against 2.81 (docs/benchmarks.md, "Memory").
pub const DIRTY_PERCENT_DEFAULT: u8 = 75;

/// The default [`Options::read_ahead`]: at most 32 sibling leaves read with
/// one an iterator misses.
pub const READ_AHEAD_DEFAULT_PAGES: usize = 32;

fn validate_dirty_percent(percent: u8) -> Result<()> {
    if (10..=90).contains(&percent) {
        return Ok(());
    }
    Err(Error::Options(format!(
        "dirty percent {percent} must be between 10 and 90 (the share of cache_bytes that changed nodes may hold before a checkpoint)"
    )))
}

/// Checks `Options::append_fill`.
fn validate_append_fill(fraction: f64) -> Result<()> {
    if (0.5..=1.0).contains(&fraction) {
        return Ok(());
    }
    Err(Error::Options(format!(
        "append fill {fraction} must be between 0.5 and 1.0 (the fraction of a page a load in key order leaves filled)"
    )))
}

pub const MIN_PAGE_SIZE: usize = 512;
pub const MAX_PAGE_SIZE: usize = 65536;

impl Options {
    /// Sets [`Options::dirty_percent`] (checked at create and open).
    pub fn dirty_percent(mut self, percent: u8) -> Self {
        self.dirty_percent = percent;
        self
    }

    pub fn page_size(mut self, ps: usize) -> Self {
        self.page_size = ps;
        self
    }
    pub fn cache_bytes(mut self, n: usize) -> Self {
        self.cache_bytes = n;
        self
    }
    pub fn durability(mut self, d: Durability) -> Self {
        self.durability = d;
        self
    }
    pub fn direct_io(mut self, on: bool) -> Self {
        self.direct_io = on;
        self
    }
    pub fn read_ahead(mut self, pages: usize) -> Self {
        self.read_ahead = pages;
        self
    }
    pub fn wal_limit(mut self, n: u64) -> Self {
        self.wal_limit = n;
        self
    }
    pub fn sparse_log(mut self, on: bool) -> Self {
        self.sparse_log = on;
        self
    }
    pub fn delta_flush(mut self, d: Option<DeltaFlush>) -> Self {
        self.delta_flush = d;
        self
    }
    pub fn append_fill(mut self, fraction: f64) -> Self {
        self.append_fill = fraction;
        self
    }
    pub fn read_only(mut self, on: bool) -> Self {
        self.read_only = on;
        self
    }
    pub fn fs(mut self, fs: Arc<dyn Fs>) -> Self {
        self.fs = fs;
        self
    }
    pub fn merge_operator(mut self, op: Arc<dyn MergeOperator>) -> Self {
        self.merge_operator = Some(op);
        self
    }

    pub fn event_listener(mut self, l: Arc<dyn EventListener>) -> Self {
        self.event_listener = Some(l);
        self
    }

    pub fn snapshot_max_age(mut self, age: Option<std::time::Duration>) -> Self {
        self.snapshot_max_age = age;
        self
    }

    /// Most value run pages a checkpoint collects (0: none).
    pub fn value_collect_pages(mut self, pages: usize) -> Self {
        self.value_collect_pages = pages;
        self
    }

    /// The live share (percent, 1 to 99) at or under which a value run
    /// page is collected.
    pub fn value_collect_live_pct(mut self, pct: u8) -> Self {
        self.value_collect_live_pct = pct;
        self
    }

    /// Checks the settings that need no file or device: dirty percent,
    /// append fill and log limit, each with a message naming its range.
    /// `Db::create` and `Db::open` call it; they check the page size and
    /// delta flushes against the file and the device.
    pub fn validate(&self) -> Result<()> {
        validate_dirty_percent(self.dirty_percent)?;
        validate_append_fill(self.append_fill)?;
        if self.wal_limit < WAL_LIMIT_MIN_BYTES {
            return Err(Error::Options(format!(
                "wal limit {} bytes must be at least {} KiB (the log bytes that start a checkpoint)",
                self.wal_limit,
                WAL_LIMIT_MIN_BYTES >> 10
            )));
        }
        if !(1..=99).contains(&self.value_collect_live_pct) {
            return Err(Error::Options(format!(
                "value collect live percent {} must be between 1 and 99",
                self.value_collect_live_pct
            )));
        }
        if self.snapshot_max_age.is_some_and(|a| a.is_zero()) {
            return Err(Error::Options(
                "snapshot max age must be positive (None: no bound)".into(),
            ));
        }
        Ok(())
    }

    pub(crate) fn validate_page_size(ps: usize) -> Result<()> {
        if !ps.is_power_of_two() || !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&ps) {
            return Err(Error::Options(format!(
                "page size {ps} must be a power of two between {MIN_PAGE_SIZE} and {MAX_PAGE_SIZE}"
            )));
        }
        Ok(())
    }
}
