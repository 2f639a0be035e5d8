//! The pagewise engine: one Db file with a tree per bench table. Sync off maps
//! to `Durability::Buffered` (acknowledged at once, durable at `sync`), every
//! batch to `Durability::Sync` (group-committed fsync of the log). All of its
//! files sit on an emulated in-storage-compression drive (`CompressingFs`,
//! each 4 KiB block lz4-compressed on its own), so results carry the bytes
//! such a drive would store beside the engine's own per-category accounting.
//! The emulation costs CPU, counted in pagewise's throughput, so the meter
//! samples: it lz4-compresses about one non-zero 4 KiB block in
//! [`DRIVE_SAMPLE_ONE_IN`] and scales (results say `sample_one_in`; exact
//! zero-block and block counts are kept).
//!
//! `pagewise-bepsilon` is the same Db with every table a B-epsilon tree (the
//! engine's default options, or the node, leaf and basement sizes and the
//! fanout of [`Settings`]: `--bepsilon-node`, `--bepsilon-leaf`,
//! `--bepsilon-basement`, `--bepsilon-fanout`; with the node size set and not
//! the leaf size, leaves are node-sized). Its engine stats add the page reads
//! of the phase and the B-epsilon reads by height (`bepsilon_reads`).
//!
//! `pagewise-delta` is the B+tree Db with `Options::delta_flush` on (the
//! documented defaults; `--delta-threshold` sets the threshold): a changed
//! page is flushed as a delta block beside its base until its changes outgrow
//! the threshold (docs/design.md, "Delta blocks for B+tree pages").
//!
//! `--wal-limit` sets every pagewise engine's `Options::wal_limit`. The
//! engine stats record the options chosen (`options`) and each tree's kind
//! with its parameters (`trees`).

use crate::engine::{
    add_counter, Engine, ReadView, Settings, SyncPolicy, TxnDone, TxnWrites, Visit, WriteOp,
    COUNTER_BYTES,
};
use crate::{BenchError, Result};
use pagewise::{
    Batch, Db, DeltaFlush, Durability, MergeOperator, Options, Snapshot, SnapshotTree, Tree,
    TreeKind,
};
use pagewise_io::{CompressingFs, CompressionMeter, RealFs};
use std::cell::OnceCell;
use std::path::Path;
use std::sync::Arc;

const NAME: &str = "pagewise";
/// One block in this many is compressed by the emulated drive's meter.
pub const DRIVE_SAMPLE_ONE_IN: u64 = 8;

pub struct PagewiseEngine {
    name: &'static str,
    /// Every table is a B-epsilon tree, which takes blind upserts.
    upserts: bool,
    db: Db,
    trees: Vec<Tree>,
    names: Vec<String>,
    drive: Arc<CompressingFs<RealFs>>,
    /// The Db options the settings chose, for the engine stats.
    options: serde_json::Value,
}

fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError::engine(NAME, e)
}

pub fn open(dir: &Path, s: &Settings, tables: &[&str]) -> Result<Box<dyn Engine>> {
    open_kind(dir, s, tables, TreeKind::BTree, None)
}

/// B+trees whose changed pages are flushed as delta blocks.
pub fn open_delta(dir: &Path, s: &Settings, tables: &[&str]) -> Result<Box<dyn Engine>> {
    open_kind(dir, s, tables, TreeKind::BTree, Some(s.delta_flush()?))
}

/// Every table a B-epsilon tree.
pub fn open_bepsilon(dir: &Path, s: &Settings, tables: &[&str]) -> Result<Box<dyn Engine>> {
    open_kind(
        dir,
        s,
        tables,
        TreeKind::BEpsilon(s.bepsilon_options()?),
        None,
    )
}

fn open_kind(
    dir: &Path,
    s: &Settings,
    tables: &[&str],
    kind: TreeKind,
    delta: Option<DeltaFlush>,
) -> Result<Box<dyn Engine>> {
    let meter = CompressionMeter::sampled(1, DRIVE_SAMPLE_ONE_IN);
    let drive = Arc::new(CompressingFs::with_meter(RealFs, meter));
    let opts = Options::default()
        .page_size(s.page_size.unwrap_or(4096))
        .cache_bytes(s.cache_bytes as usize)
        .durability(match s.sync {
            SyncPolicy::Off => Durability::Buffered,
            SyncPolicy::EveryBatch => Durability::Sync,
        })
        .direct_io(s.direct_io)
        .merge_operator(Arc::new(CounterAdd))
        .delta_flush(delta)
        .fs(drive.clone());
    let opts = match s.wal_limit()? {
        Some(n) => opts.wal_limit(n),
        None => opts,
    };
    let opts = match s.dirty_percent()? {
        Some(p) => opts.dirty_percent(p),
        None => opts,
    };
    let options = serde_json::json!({
        "wal_limit_bytes": opts.wal_limit,
        "dirty_percent": opts.dirty_percent,
        "delta_flush": delta.map(|d| serde_json::json!({
            "threshold_bytes": d.threshold_bytes,
            "block_bytes": d.block_bytes,
        })),
    });
    let db = Db::open_or_create(dir.join("bench.pw"), opts).map_err(err)?;
    let trees = tables
        .iter()
        .map(|t| db.tree_with(t, kind))
        .collect::<std::result::Result<_, _>>()
        .map_err(err)?;
    Ok(Box::new(PagewiseEngine {
        name: match (kind, delta) {
            (TreeKind::BTree, None) => NAME,
            (TreeKind::BTree, Some(_)) => "pagewise-delta",
            _ => "pagewise-bepsilon",
        },
        upserts: matches!(kind, TreeKind::BEpsilon(_)),
        db,
        trees,
        names: tables.iter().map(|t| t.to_string()).collect(),
        drive,
        options,
    }))
}

/// A pagewise snapshot; each table's tree is looked up on its first read.
struct PagewiseView<'a> {
    snap: Snapshot,
    names: &'a [String],
    trees: Vec<OnceCell<SnapshotTree>>,
}

impl ReadView for PagewiseView<'_> {
    fn get(&self, table: usize, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let tree = match self.trees[table].get() {
            Some(t) => t,
            None => {
                let t = self.snap.tree(&self.names[table]).map_err(err)?;
                self.trees[table].get_or_init(|| t)
            }
        };
        tree.get(key).map_err(err)
    }
}

/// The `incrandom` workload's merge operator: each operand is an 8-byte
/// little-endian delta added with [`add_counter`], so a blind upsert ends
/// where the other engines' read-modify-write does.
struct CounterAdd;

impl MergeOperator for CounterAdd {
    fn name(&self) -> &str {
        "bench-counter-add"
    }

    fn full_merge(&self, _key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Vec<u8> {
        let delta = operands.iter().fold(0u64, |sum, op| {
            let mut d = [0u8; COUNTER_BYTES];
            let n = op.len().min(COUNTER_BYTES);
            d[..n].copy_from_slice(&op[..n]);
            sum.wrapping_add(u64::from_le_bytes(d))
        });
        add_counter(existing, delta)
    }
}

impl Engine for PagewiseEngine {
    fn name(&self) -> &'static str {
        self.name
    }

    fn version(&self) -> String {
        format!(
            "pagewise {} (page size {})",
            env!("CARGO_PKG_VERSION"),
            self.db.page_size()
        )
    }

    fn write_batch(&self, ops: Vec<WriteOp>) -> Result<()> {
        // The ops' bytes move into the batch (`pagewise::IntoBytes`).
        let mut b = Batch::new();
        for op in ops {
            match op {
                WriteOp::Put { table, key, value } => b.insert(&self.names[table], key, value),
                WriteOp::Delete { table, key } => b.remove(&self.names[table], key),
            }
        }
        self.db.apply(b).map_err(err)
    }

    fn get(&self, table: usize, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.trees[table].get(key).map_err(err)
    }

    /// `Tree::get_many`: the batch's misses read through one queue per level.
    fn multi_get(&self, table: usize, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        self.trees[table].get_many(keys).map_err(err)
    }

    /// B-epsilon trees take blind upserts (no read); B+trees read-modify-write.
    fn increment(&self, table: usize, keys: &[Vec<u8>], delta: u64) -> Result<()> {
        if !self.upserts {
            return crate::engine::increment_by_rmw(self, table, keys, delta);
        }
        let mut b = Batch::new();
        for k in keys {
            b.upsert(&self.names[table], k, delta.to_le_bytes());
        }
        self.db.apply(b).map_err(err)
    }

    fn read_view(&self) -> Result<Box<dyn ReadView + '_>> {
        Ok(Box::new(PagewiseView {
            snap: self.db.snapshot().map_err(err)?,
            names: &self.names,
            trees: (0..self.names.len()).map(|_| OnceCell::new()).collect(),
        }))
    }

    /// `Db::transaction`, run again after each `Error::Conflict`.
    fn transact(&self, table: usize, reads: &[Vec<u8>], writes: &TxnWrites) -> Result<TxnDone> {
        let name = &self.names[table];
        let mut conflicts = 0;
        loop {
            let mut tx = self.db.transaction().map_err(err)?;
            let mut found = 0;
            for k in reads {
                found += u64::from(tx.get(name, k).map_err(err)?.is_some());
            }
            for (k, v) in writes {
                tx.insert(name, k, v);
            }
            match tx.commit() {
                Ok(()) => return Ok(TxnDone { found, conflicts }),
                Err(pagewise::Error::Conflict { .. }) => conflicts += 1,
                Err(e) => return Err(err(e)),
            }
        }
    }

    fn scan(&self, table: usize, start: &[u8], limit: usize, visit: Visit) -> Result<usize> {
        let mut n = 0;
        let mut entries = self.trees[table].range(start..);
        while n < limit {
            let Some(entry) = entries.next_ref() else {
                break;
            };
            let (k, v) = entry.map_err(err)?;
            n += 1;
            if !visit(k, v) {
                break;
            }
        }
        Ok(n)
    }

    fn sync(&self) -> Result<()> {
        self.db.sync().map_err(err)
    }

    fn close(self: Box<Self>) -> Result<Option<serde_json::Value>> {
        // Checkpoint first so the engine's own accounting includes the page
        // writes that close would otherwise do after the stats were taken.
        self.db.checkpoint().map_err(err)?;
        let stats = self.db.stats();
        let this = *self;
        drop(this.trees);
        this.db.close().map_err(err)?;
        Ok(Some(serde_json::json!({
            "page_size": stats.page_size,
            "wal_bytes_written": stats.wal.write_bytes,
            "page_bytes_written": stats.pages.write_bytes,
            "meta_bytes_written": stats.meta.write_bytes,
            "wal_syncs": stats.wal.syncs,
            "cache_hits": stats.cache_hits,
            "cache_misses": stats.cache_misses,
            "page_read_ops": stats.pages.read_ops,
            "page_read_bytes": stats.pages.read_bytes,
            "bepsilon_reads": stats.bepsilon_reads,
            "checkpoints": stats.checkpoints,
            "write_backs": stats.write_backs,
            "commit_groups": stats.commit_groups,
            "io_engine": stats.io_engine,
            "prefetch_rounds": stats.prefetch_rounds,
            "prefetched_pages": stats.prefetched_pages,
            "delta_rebases": stats.delta_rebases,
            "delta_carries": stats.delta_carries,
            "delta_consolidations": stats.delta_consolidations,
            "delta_apart": stats.delta_apart,
            "node_read_rounds": stats.node_read_rounds,
            "options": this.options,
            "trees": stats.trees,
            "compressing_drive": this.drive.stats(),
            "compressing_drive_sample_one_in": DRIVE_SAMPLE_ONE_IN,
        })))
    }
}
