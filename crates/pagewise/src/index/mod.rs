//! The index layer: the tree kinds over the node store, behind one set of
//! operations (apply a logged op, get, iterate both ways, prefetch, check,
//! stats) that `db` calls without knowing any kind. One folder per kind;
//! the B+tree ([`btree`]) and the B-epsilon tree ([`bepsilon`]).

pub mod bepsilon;
pub mod btree;
pub mod entry;
pub mod head;
pub mod placed;
pub mod resolved;

use placed::{Out, Placed};

use crate::error::{Error, Result};
use crate::log::Op;
use crate::store::alloc::Alloc;
use crate::store::catalog::{CatalogEntry, KIND_BEPSILON, KIND_BTREE};
use crate::store::claims::Claims;
use crate::store::extent::Extent;
use crate::store::image::{Image, NodeCodec};
use crate::store::page::Kind;
use crate::store::{Epoch, Store};

/// A snapshot's frozen state of every tree.
pub use bepsilon::read::Frozen;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// The kind of a named tree, fixed when it is created. The default, a
/// B+tree, is the kind a tree gets when a plain put creates it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum TreeKind {
    /// A B+tree of fixed-size pages (the database's page size).
    #[default]
    BTree,
    /// A B-epsilon (fractal) tree of large, compressed, variable-size nodes
    /// with message buffers (docs/design.md, "B-epsilon nodes"). The options
    /// of an existing tree are the ones it was created with.
    BEpsilon(bepsilon::BEpsilonOptions),
}

impl TreeKind {
    /// The catalog's and the log's byte for this kind.
    pub fn code(self) -> u8 {
        match self {
            TreeKind::BTree => KIND_BTREE,
            TreeKind::BEpsilon(_) => KIND_BEPSILON,
        }
    }

    /// The kind of a code (a B-epsilon tree with default options: the
    /// parameters travel separately, see [`TreeKind::params`]).
    pub fn from_code(code: u8) -> Option<TreeKind> {
        match code {
            KIND_BTREE => Some(TreeKind::BTree),
            KIND_BEPSILON => Some(TreeKind::BEpsilon(Default::default())),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            TreeKind::BTree => "btree",
            TreeKind::BEpsilon(_) => "bepsilon",
        }
    }

    /// The creation parameters logged and stored in the catalog.
    pub fn params(self) -> Vec<u8> {
        match self {
            TreeKind::BTree => Vec::new(),
            TreeKind::BEpsilon(o) => o.encode(),
        }
    }

    /// The kind a code and its creation parameters name (a create-tree op's
    /// or a catalog entry's).
    pub fn decode(code: u8, params: &[u8]) -> Result<TreeKind> {
        let kind = TreeKind::from_code(code).ok_or_else(|| Error::Unsupported {
            what: format!("tree kind {code}"),
        })?;
        match kind {
            TreeKind::BEpsilon(_) => bepsilon::BEpsilonOptions::decode(params)
                .map(TreeKind::BEpsilon)
                .map_err(Error::Options),
            k => Ok(k),
        }
    }

    /// Whether a tree of this kind takes upserts (a typed error naming
    /// `tree` and what to do otherwise).
    pub fn check_upsert(self, tree: &str) -> Result<()> {
        match self {
            TreeKind::BEpsilon(_) => Ok(()),
            TreeKind::BTree => Err(Error::Unsupported {
                what: format!(
                    "upsert on {} tree {tree:?}: only B-epsilon trees take upserts (create it with Db::tree_with)",
                    self.name()
                ),
            }),
        }
    }

    /// Whether the options are usable (an `Error::Options` otherwise).
    pub fn validate(self) -> Result<()> {
        match self {
            TreeKind::BTree => Ok(()),
            TreeKind::BEpsilon(o) => o.validate().map_err(Error::Options),
        }
    }
}

/// A tree's in-memory state, by kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Desc {
    BTree(btree::Meta),
    BEpsilon(bepsilon::Meta),
}

impl Desc {
    pub fn kind(&self) -> TreeKind {
        match self {
            Desc::BTree(_) => TreeKind::BTree,
            Desc::BEpsilon(m) => TreeKind::BEpsilon(m.opts),
        }
    }

    /// The page the tree's root lives in (0 when empty).
    pub fn root_page(&self) -> u64 {
        match self {
            Desc::BTree(m) => m.root,
            Desc::BEpsilon(m) => m.root_page(),
        }
    }

    /// Entries in the tree (B-epsilon: in its basements, without the
    /// messages still buffered above them).
    pub fn entries(&self) -> u64 {
        match self {
            Desc::BTree(m) => m.entries,
            Desc::BEpsilon(m) => m.entries,
        }
    }
}

/// Every tree by name: the `T` of the store's state lock. Shared, so a
/// snapshot's copy is one pointer; a writer copies the map (a few
/// descriptors) the first time it changes it while a snapshot shares it.
#[derive(Debug, Default, Clone)]
pub struct Trees(pub Arc<BTreeMap<Arc<str>, Desc>>);

impl Trees {
    /// The descriptors for changing (copied if a snapshot shares them).
    pub fn map_mut(&mut self) -> &mut BTreeMap<Arc<str>, Desc> {
        Arc::make_mut(&mut self.0)
    }

    pub fn get_mut(&mut self, name: &str) -> Option<&mut Desc> {
        self.map_mut().get_mut(name)
    }

    pub fn get(&self, name: &str) -> Option<&Desc> {
        self.0.get(name)
    }

    /// The state of `name` if it is a B+tree.
    pub fn btree(&self, name: &str) -> Option<&btree::Meta> {
        match self.0.get(name)? {
            Desc::BTree(m) => Some(m),
            Desc::BEpsilon(_) => None,
        }
    }

    /// The state of `name` if it is a B-epsilon tree.
    pub fn bepsilon(&self, name: &str) -> Option<&bepsilon::Meta> {
        match self.0.get(name)? {
            Desc::BEpsilon(m) => Some(m),
            Desc::BTree(_) => None,
        }
    }

    /// From the catalog's entries; an unknown kind or a bad descriptor is
    /// corruption (described, for the caller to wrap with the file).
    pub fn from_catalog(
        entries: Vec<CatalogEntry>,
        page_size: usize,
    ) -> std::result::Result<Trees, String> {
        let mut trees = BTreeMap::new();
        for e in entries {
            let desc = match TreeKind::from_code(e.kind) {
                Some(TreeKind::BTree) => Desc::BTree(btree::Meta::decode(&e.root)?),
                Some(TreeKind::BEpsilon(_)) => {
                    let m = bepsilon::Meta::decode(&e.params, &e.root, page_size);
                    Desc::BEpsilon(m.map_err(|w| format!("tree {:?}: {w}", e.name))?)
                }
                None => return Err(format!("tree {:?} has unknown kind {}", e.name, e.kind)),
            };
            if trees.insert(Arc::from(e.name.as_str()), desc).is_some() {
                return Err(format!("tree {:?} is listed twice", e.name));
            }
        }
        Ok(Trees(Arc::new(trees)))
    }

    pub fn to_catalog(&self) -> Vec<CatalogEntry> {
        self.0
            .iter()
            .map(|(name, d)| CatalogEntry {
                name: name.to_string(),
                kind: d.kind().code(),
                params: d.kind().params(),
                root: match d {
                    Desc::BTree(m) => m.encode(),
                    Desc::BEpsilon(m) => m.encode(),
                },
            })
            .collect()
    }
}

/// Counters of the kinds' read and write helpers, for `Db::stats`.
#[derive(Default)]
pub struct Counters {
    /// Group prefetch: queued read rounds, and the pages they loaded.
    pub prefetch_rounds: AtomicU64,
    pub prefetched_pages: AtomicU64,
    /// Iterator read-ahead: batches read, and sibling pages they asked for.
    pub readahead_rounds: AtomicU64,
    pub readahead_pages: AtomicU64,
    /// Delta flushes: clean full pages kept as a dirty copy's base, clean
    /// delta blocks whose base and changes a dirty copy carried on, and
    /// bases dropped (the node written whole again).
    pub delta_rebases: AtomicU64,
    pub delta_carries: AtomicU64,
    pub delta_consolidations: AtomicU64,
    /// Dirty copies with a base placed away from it (no page beside it free):
    /// a miss on them reads base and delta in two requests.
    pub delta_apart: AtomicU64,
    /// B-epsilon reads by height: shells, partitions, filter skips.
    pub bepsilon_reads: bepsilon::counters::ReadCounters,
}

/// The kind a tree handle last found its tree to be (a hint, never
/// trusted: a wrong one costs a second read): a live get of a B-epsilon
/// tree then takes the state lock once, not once as a B+tree first.
#[derive(Debug, Default)]
pub struct KindHint(AtomicBool);

impl KindHint {
    pub fn bepsilon(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    pub fn set_bepsilon(&self, b: bool) {
        if self.bepsilon() != b {
            self.0.store(b, Ordering::Relaxed); // no shared write per get
        }
    }
}

impl Clone for KindHint {
    fn clone(&self) -> Self {
        KindHint(AtomicBool::new(self.bepsilon()))
    }
}

/// The index layer's context: the store and what the kinds share.
pub struct Index {
    pub store: Store<Trees>,
    pub counters: Counters,
    /// `Options::read_ahead`: most pages of one iterator read-ahead batch.
    pub read_ahead_pages: usize,
    /// `Options::delta_flush`: B+tree nodes flushed as delta blocks.
    pub delta: Option<crate::options::DeltaFlush>,
    /// `Options::append_fill`: what a right-edge append split leaves filled.
    pub append_fill: f64,
    /// `Options::merge_operator`: resolves B-epsilon upserts.
    pub merge: Option<Arc<dyn crate::options::MergeOperator>>,
    /// `Options::event_listener`: told of flushes, write-backs, checkpoints.
    pub events: Option<Arc<dyn crate::events::EventListener>>,
    /// B-epsilon partitions probed lately: a second miss on one loads it
    /// into a full cache instead of probing it again.
    pub bepsilon_probed: bepsilon::read::Probed,
    /// `Options::value_collect_pages`: most value run pages a checkpoint
    /// collects.
    pub value_collect_pages: usize,
    /// `Options::value_collect_live_pct`.
    pub value_collect_live_pct: u8,
}

/// How the store decodes node pages of every kind.
pub const CODEC: NodeCodec = NodeCodec {
    kinds: btree::PAGE_KINDS,
    decode: decode_page,
    apply_delta: Some(btree::node::apply_delta),
};

fn decode_page(
    kind: Kind,
    count: usize,
    payload: &[u8],
    page_size: usize,
) -> std::result::Result<Image, String> {
    btree::decode_page(kind, count, payload, page_size)
}

/// Whether `k` lies between `lo` and `hi`.
pub fn in_range(k: &[u8], lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    let above = match lo {
        Bound::Included(l) => k >= l.as_slice(),
        Bound::Excluded(l) => k > l.as_slice(),
        Bound::Unbounded => true,
    };
    let below = match hi {
        Bound::Included(h) => k <= h.as_slice(),
        Bound::Excluded(h) => k < h.as_slice(),
        Bound::Unbounded => true,
    };
    above && below
}

/// Longest key a tree of `kind` accepts with `page_size` pages.
pub fn max_key_bytes(kind: TreeKind, page_size: usize) -> usize {
    match kind {
        TreeKind::BTree => btree::node::max_key(page_size),
        TreeKind::BEpsilon(_) => bepsilon::MAX_KEY_BYTES,
    }
}

/// Whether a value is stored with its key (else in an extent of its own).
fn fits_inline(kind: TreeKind, page_size: usize, key_bytes: usize, value_bytes: usize) -> bool {
    match kind {
        TreeKind::BTree => btree::node::fits_inline(page_size, key_bytes, value_bytes),
        TreeKind::BEpsilon(_) => true,
    }
}

/// Ops of one batch between two reservations of the dirty set's memory in
/// the cache (eviction does no I/O): a batch of 1,000 random inserts on 16
/// KiB pages dirties about 26 MB, which without them sat beside a full
/// cache until the batch ended (the bench's memory cgroup killed such fills
/// with a 48 MiB cache).
const RESERVE_EVERY_OPS: usize = 64;

/// Keys of a `get_many` warmed and got at a time: a batch's paths then
/// stay well inside a 5% cache of a small Db (256 keys of a 4-level
/// B+tree are at most 1,024 pages), and every warm round is capped at a
/// quarter of the cache as well.
pub const GET_MANY_CHUNK_KEYS: usize = 256;

impl Index {
    /// The index's context over `store`, with the settings of `opts` that
    /// the tree kinds use.
    pub fn new(store: Store<Trees>, opts: &crate::options::Options) -> Index {
        Index {
            store,
            counters: Counters::default(),
            read_ahead_pages: opts.read_ahead,
            delta: opts.delta_flush,
            append_fill: opts.append_fill,
            merge: opts.merge_operator.clone(),
            events: opts.event_listener.clone(),
            bepsilon_probed: bepsilon::read::Probed::new(opts.cache_bytes),
            value_collect_pages: opts.value_collect_pages,
            value_collect_live_pct: opts.value_collect_live_pct,
        }
    }

    /// Where the puts of `ops` store their value: on a B+tree, in an
    /// extent of its own when its entry would not fit a page; on a
    /// B-epsilon tree, out of the tree when it reaches the tree's
    /// `value_extent_bytes`, packed when its run entry fits a page's
    /// payload, else in an extent of its own.
    pub fn out_of_line(&self, ops: &[Op]) -> Vec<Out> {
        let least = bepsilon::MIN_VALUE_EXTENT_BYTES as usize;
        let could = |op: &Op| matches!(op, Op::Put { value, .. } if value.len() >= least);
        // The common case, small values: no lookup of trees.
        if !ops.iter().any(could) {
            return vec![Out::Inline; ops.len()];
        }
        let ps = self.store.page_size();
        let forms = self.value_forms(ops);
        let out: Vec<Out> = ops
            .iter()
            .zip(forms)
            .map(|(op, form)| match (op, form) {
                (Op::Put { key, value, .. }, Some(f)) if f.out_of_line(value.len()) => {
                    match bepsilon::runs::fits(key.len(), value.len(), ps) {
                        true => Out::Packed,
                        false => Out::Extent,
                    }
                }
                (Op::Put { key, value, .. }, None)
                    if !fits_inline(TreeKind::BTree, ps, key.len(), value.len()) =>
                {
                    Out::Extent
                }
                _ => Out::Inline,
            })
            .collect();
        assert_eq!(out.len(), ops.len());
        out
    }

    /// Per op, how its tree stores values when it is (or is created in
    /// `ops` as) a B-epsilon tree; None for a B+tree.
    fn value_forms(&self, ops: &[Op]) -> Vec<Option<bepsilon::value::Form>> {
        let st = self.store.state.read();
        let mut created: Vec<(Arc<str>, Option<bepsilon::value::Form>)> = Vec::new();
        let mut out = Vec::with_capacity(ops.len());
        let mut last: Option<(&Arc<str>, Option<bepsilon::value::Form>)> = None;
        for op in ops {
            // A batch's ops mostly name one tree: looked up once per run.
            if let Some((t, f)) = last {
                if t == op.tree() && !matches!(op, Op::CreateTree { .. }) {
                    out.push(f);
                    continue;
                }
            }
            let form = match st.trees.get(op.tree()) {
                Some(Desc::BEpsilon(m)) => Some(m.opts.form()),
                Some(Desc::BTree(_)) => None,
                None => {
                    if let Op::CreateTree { tree, kind, params } = op {
                        if !created.iter().any(|c| &c.0 == tree) {
                            let f = (*kind == KIND_BEPSILON).then(|| {
                                bepsilon::BEpsilonOptions::decode(params)
                                    .map_or(bepsilon::value::Form::Plain, |o| o.form())
                            });
                            created.push((tree.clone(), f));
                        }
                    }
                    created.iter().find(|c| &c.0 == op.tree()).and_then(|c| c.1)
                }
            };
            last = Some((op.tree(), form));
            out.push(form);
        }
        out
    }

    /// Applies one batch in memory. Requires: the state write lock
    /// (`epoch`) and the allocator; `placed` holds, per op, the fresh extent
    /// of a value [`Index::out_of_line`] named. Keyed ops on B-epsilon trees
    /// wait and go in per tree, each tree's in batch order (trees are
    /// independent and a batch is applied whole under the lock).
    pub fn apply_batch(
        &self,
        epoch: &mut Epoch<Trees>,
        alloc: &mut Alloc,
        ops: &[Op],
        placed: Vec<Option<Placed>>,
    ) -> Result<()> {
        assert_eq!(ops.len(), placed.len());
        let mut runs: Vec<(&Op, Option<Placed>)> = Vec::new();
        for (k, (op, ext)) in ops.iter().zip(placed).enumerate() {
            if self.is_bepsilon_keyed(&epoch.trees, op) {
                runs.push((op, ext));
                continue;
            }
            self.apply(epoch, alloc, op, ext.and_then(|p| p.extent()))?;
            if k % RESERVE_EVERY_OPS == RESERVE_EVERY_OPS - 1 {
                epoch.dirty.recharge();
                self.store.cache.reserve(epoch.dirty.bytes() as usize);
            }
        }
        runs.sort_by(|a, b| a.0.tree().cmp(b.0.tree())); // stable
        for run in runs.chunk_by(|a, b| a.0.tree() == b.0.tree()) {
            self.apply_bepsilon_run(epoch, alloc, run[0].0.tree(), run)?;
        }
        Ok(())
    }

    /// Whether `op` changes a key of a B-epsilon tree (its tree exists with
    /// that kind; kinds never change): such ops can be applied per tree
    /// with [`Index::apply_bepsilon_run`].
    fn is_bepsilon_keyed(&self, trees: &Trees, op: &Op) -> bool {
        op.key().is_some() && matches!(trees.0.get(op.tree()), Some(Desc::BEpsilon(_)))
    }

    /// Applies the keyed ops `ops` of one batch, all on B-epsilon tree
    /// `tree`, in order (`bepsilon::write::Writer::apply_run`), each put
    /// with the extent [`Index::out_of_line`] had its value written to, if
    /// any. Requires: the state write lock and the allocator.
    fn apply_bepsilon_run(
        &self,
        epoch: &mut Epoch<Trees>,
        alloc: &mut Alloc,
        tree: &str,
        ops: &[(&Op, Option<Placed>)],
    ) -> Result<()> {
        let Epoch { trees, dirty, .. } = epoch;
        let Some(Desc::BEpsilon(m)) = trees.get_mut(tree) else {
            panic!("apply_bepsilon_run on a tree that is not B-epsilon");
        };
        let form = m.opts.form();
        register_runs(m, ops, self.store.page_size());
        let (arena, spans) = placed::stored_values(form, ops);
        let stored: Vec<&[u8]> = ops
            .iter()
            .zip(&spans)
            .map(|((op, _), span)| match (op, span) {
                (_, Some(r)) => &arena[r.clone()],
                (Op::Put { value, .. }, None) => &value[..],
                _ => &[][..],
            })
            .collect();
        let run: Vec<(&[u8], bepsilon::write::Msg)> = ops
            .iter()
            .zip(&stored)
            .map(|((op, _), st)| {
                assert_eq!(&**op.tree(), tree);
                let msg = match op {
                    Op::Put { .. } => bepsilon::write::Msg::Put(st),
                    Op::Upsert { operand, .. } => bepsilon::write::Msg::Upsert(operand),
                    _ => bepsilon::write::Msg::Delete,
                };
                (op.key().expect("a keyed op"), msg)
            })
            .collect();
        let mut w = bepsilon::write::Writer {
            dirty: bepsilon::write::Nodes::Shared(dirty),
            pager: &self.store.pager,
            cache: &self.store.cache,
            alloc: Some(alloc),
            frees: Vec::new(),
            merge: self.merge.as_deref(),
            events: self.events.as_deref(),
            tree,
            dropped: Vec::new(),
        };
        w.apply_run(m, &run)
    }

    /// Applies one logged op. Requires: the state write lock (`epoch`) and
    /// the allocator held; `placed` is the fresh extent holding a put's value
    /// when it does not fit inline. Effect: the tree changes in memory only.
    pub fn apply(
        &self,
        epoch: &mut Epoch<Trees>,
        alloc: &mut Alloc,
        op: &Op,
        placed: Option<Extent>,
    ) -> Result<()> {
        if self.is_bepsilon_keyed(&epoch.trees, op) {
            let placed = placed.map(Placed::Extent);
            return self.apply_bepsilon_run(epoch, alloc, op.tree(), &[(op, placed)]);
        }
        let Epoch { trees, dirty, .. } = epoch;
        let tree = op.tree();
        let desc = match op {
            Op::CreateTree { kind, params, .. } => return create(trees, tree, *kind, params),
            // A version-1 log has no create-tree ops: a put creates a B+tree
            // (the name is cloned only then).
            Op::Put { .. } if !trees.0.contains_key(tree) => trees
                .map_mut()
                .entry(tree.clone())
                .or_insert(Desc::BTree(btree::Meta::default())),
            _ => match trees.get_mut(tree) {
                Some(d) => d,
                None => return Ok(()),
            },
        };
        let tm = match desc {
            Desc::BTree(tm) => tm,
            Desc::BEpsilon(_) => unreachable!("keyed B-epsilon ops go to apply_bepsilon_run"),
        };
        let mut w = btree::write::Writer {
            dirty,
            pager: &self.store.pager,
            cache: &self.store.cache,
            alloc,
            delta: self.delta,
            append_fill: self.append_fill,
            counters: &self.counters,
        };
        match op {
            Op::Put { key, value, .. } => {
                let val = match &placed {
                    Some(ext) => btree::node::Val::Overflow(*ext),
                    None => btree::node::Val::Inline(value),
                };
                w.put(tm, key, val)
            }
            Op::Remove { key, .. } => w.delete(tm, key),
            Op::Upsert { .. } => Err(Error::Unsupported {
                what: format!("upsert on tree {tree:?}: B+trees have no merge operator"),
            }),
            Op::CreateTree { .. } => unreachable!("handled above"),
        }
    }

    /// Best-effort load of the pages the group's ops will descend through.
    pub fn prefetch<'a>(&self, ops: impl Iterator<Item = &'a Op>) -> Result<()> {
        let keys: Vec<(&Arc<str>, &[u8])> =
            ops.filter_map(|op| Some((op.tree(), op.key()?))).collect();
        btree::prefetch::prefetch_group(self, keys)
    }

    /// The value of `key` in `tree`, live (`at` None) or in a snapshot. A
    /// live get reads first as the kind `hint` last saw the tree to be (one
    /// state lock for the common get of either kind) and corrects the hint
    /// when the tree is of the other kind; a snapshot knows its trees.
    pub fn get(
        &self,
        at: Option<&Frozen>,
        tree: &str,
        key: &[u8],
        hint: &KindHint,
    ) -> Result<Option<Vec<u8>>> {
        if self.seems_bepsilon(at, tree, hint) {
            if let Some(found) = bepsilon::read::get(self, at, tree, key)? {
                return Ok(found);
            }
            hint.set_bepsilon(false); // not (or no longer) a B-epsilon tree
        }
        match btree::read::get(self, at, tree, key)? {
            Ok(found) => Ok(found),
            Err(btree::read::NotBTree) => {
                hint.set_bepsilon(true);
                Ok(bepsilon::read::get(self, at, tree, key)?.flatten())
            }
        }
    }

    /// Whether to read `tree` as a B-epsilon tree first: a snapshot's kind,
    /// or the live tree's kind as `hint` last saw it.
    fn seems_bepsilon(&self, at: Option<&Frozen>, tree: &str, hint: &KindHint) -> bool {
        match at {
            Some(fz) => fz.epoch.trees.bepsilon(tree).is_some(),
            None => hint.bepsilon(),
        }
    }

    /// The values of `keys` in `tree` (live, or in the snapshot `at`), in
    /// the caller's order: for every key the answer [`Index::get`] gives
    /// (duplicates and missing keys allowed). The batch is split into
    /// chunks of at most [`GET_MANY_CHUNK_KEYS`], and each chunk reads what
    /// it misses through one queue per tree level: a B-epsilon tree's keys
    /// descend together (`bepsilon::many`); a B+tree's pages are read by a
    /// warm pass (`btree::prefetch::warm_gets`) and then each key is got as
    /// by `get`, so a page evicted in between costs a read, never a
    /// different answer.
    pub fn get_many(
        &self,
        at: Option<&Frozen>,
        tree: &str,
        keys: &[&[u8]],
    ) -> Result<Vec<Option<Vec<u8>>>> {
        let mut out = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(GET_MANY_CHUNK_KEYS) {
            if self.is_bepsilon(at, tree) {
                out.extend(bepsilon::many::get_many(self, at, tree, chunk)?);
                continue;
            }
            btree::prefetch::warm_gets(self, at, tree, chunk)?;
            for key in chunk {
                out.push(self.get(at, tree, key, &KindHint::default())?);
            }
        }
        assert_eq!(out.len(), keys.len());
        Ok(out)
    }

    fn is_bepsilon(&self, at: Option<&Frozen>, tree: &str) -> bool {
        match at {
            Some(fz) => fz.epoch.trees.bepsilon(tree).is_some(),
            None => self.store.state.read().trees.bepsilon(tree).is_some(),
        }
    }

    /// A snapshot of every tree now ([`Frozen`]): one read of the state
    /// lock and, without an age bound, one shared pointer copied
    /// (`Epoch::snapshot`).
    pub fn freeze(&self, max_age: Option<std::time::Duration>) -> Arc<Frozen> {
        let taken_ns = crate::store::pin::now_ns().max(1);
        self.store.state.read().snapshot(taken_ns, max_age)
    }

    /// Whether `key` is in `tree` (live, or in the snapshot `at`), the kind
    /// chosen as by [`Index::get`].
    pub fn contains(
        &self,
        at: Option<&Frozen>,
        tree: &str,
        key: &[u8],
        hint: &KindHint,
    ) -> Result<bool> {
        use crate::store::read::Step;
        if self.seems_bepsilon(at, tree, hint) {
            if let Some((stored, _)) = bepsilon::read::get_stored(self, at, tree, key)? {
                return Ok(stored.is_some());
            }
            hint.set_bepsilon(false);
        }
        // One read for a B+tree; a tree of another kind answers `None`.
        let found = self.store.read_at(at, |v| match v.trees().get(tree) {
            Some(Desc::BTree(tm)) => match btree::read::contains_step(v, tm, key) {
                Step::Done(b) => Step::Done(Some(b)),
                Step::Miss(p) => Step::Miss(p),
            },
            Some(_) => Step::Done(None),
            None => Step::Done(Some(false)),
        })?;
        match found {
            Some(b) => Ok(b),
            None => {
                hint.set_bepsilon(true);
                let found = bepsilon::read::get_stored(self, at, tree, key)?;
                Ok(found.is_some_and(|(stored, _)| stored.is_some()))
            }
        }
    }

    /// Walks tree `desc` for `Db::check`.
    pub fn check_tree(&self, claims: &mut Claims, desc: &Desc) -> (Desc, u64, u64) {
        match desc {
            Desc::BTree(tm) => {
                let w = btree::check::walk(self, claims, tm);
                (
                    Desc::BTree(w.counted),
                    w.pages_checked,
                    w.overflow_pages_checked,
                )
            }
            Desc::BEpsilon(m) => {
                let w = bepsilon::check::walk(self, claims, m);
                (
                    Desc::BEpsilon(w.counted),
                    w.pages_checked,
                    w.value_pages_checked,
                )
            }
        }
    }
}

/// An entry a cursor lends its caller until its next step (None: no more
/// in its direction).
pub type Lent<'a> = Option<Result<(&'a [u8], &'a [u8])>>;

/// An iterator's position in a tree of either kind, live or in a snapshot
/// (`at` names the same state on every call).
pub enum Cursor {
    BTree(btree::iter::Cursor),
    BEpsilon(bepsilon::iter::Cursor),
}

impl Cursor {
    pub fn new(
        ix: &Index,
        at: Option<&Frozen>,
        tree: Arc<str>,
        lo: std::ops::Bound<Vec<u8>>,
        hi: std::ops::Bound<Vec<u8>>,
    ) -> Self {
        if ix.is_bepsilon(at, &tree) {
            Cursor::BEpsilon(bepsilon::iter::Cursor::new(tree, lo, hi))
        } else {
            Cursor::BTree(btree::iter::Cursor::new(tree, lo, hi))
        }
    }

    /// The next entry in the direction of travel, borrowed from the cursor
    /// until its next step.
    pub fn step(&mut self, ix: &Index, at: Option<&Frozen>, forward: bool) -> Lent<'_> {
        match self {
            Cursor::BTree(c) => c.step(ix, at, forward),
            Cursor::BEpsilon(c) => c.step(ix, at, forward),
        }
    }
}

/// Registers in `m`'s value table the runs of the packed values of `ops`
/// not registered yet: a run counts all its values at once, when the first
/// of them is applied (values of one group's batches share runs, and a
/// batch's drops must not free a page a later batch's value lies on). A
/// run found registered is this group's: a registered run's first page is
/// never free (`Runs::release`), so no fresh run can start on it.
fn register_runs(m: &mut bepsilon::Meta, ops: &[(&Op, Option<Placed>)], page_size: usize) {
    for (_, p) in ops {
        if let Some(Placed::Packed(_, run)) = p {
            match m.values.runs.runs.get(&run.first_page) {
                Some(pages) => assert_eq!(
                    pages.len() as u64,
                    run.count_pages,
                    "run {} is registered already as another run",
                    run.first_page
                ),
                None => {
                    Arc::make_mut(&mut m.values.runs).register(run, page_size);
                    m.values.changed = true;
                }
            }
        }
    }
}

/// Applies a create-tree op: a new empty tree, or nothing if it exists with
/// that kind (the op was validated before it was logged).
fn create(trees: &mut Trees, name: &Arc<str>, kind: u8, params: &[u8]) -> Result<()> {
    let Some(kind) = TreeKind::from_code(kind) else {
        return Err(Error::Unsupported {
            what: format!("tree {name:?} of kind {kind}: this build does not know that kind"),
        });
    };
    let desc = match kind {
        TreeKind::BTree if params.is_empty() => Desc::BTree(btree::Meta::default()),
        TreeKind::BTree => {
            return Err(Error::Unsupported {
                what: format!("tree {name:?}: B+trees take no creation parameters in this build"),
            })
        }
        TreeKind::BEpsilon(_) => {
            let o = bepsilon::BEpsilonOptions::decode(params).map_err(|w| Error::Unsupported {
                what: format!("tree {name:?}: B-epsilon parameters: {w}"),
            })?;
            Desc::BEpsilon(bepsilon::Meta::new(o))
        }
    };
    match trees.0.get(name) {
        Some(d) if d.kind().code() == kind.code() => Ok(()),
        Some(d) => Err(Error::TreeKind {
            name: name.to_string(),
            found: d.kind(),
            wanted: kind,
        }),
        None => {
            trees.map_mut().insert(name.clone(), desc);
            Ok(())
        }
    }
}
