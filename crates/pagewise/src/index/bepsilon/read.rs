//! Reads: the store's read protocol (docs/design.md, "Concurrency") with an
//! extent-addressed miss. A traversal runs under the shared state lock; a
//! missing node shell or partition is read with no lock held (only its
//! pages, `Pager::read_range`), cached as a new image of that node with the
//! partition loaded, and the traversal restarts. Pending messages on the path
//! are applied to what the basement holds, without dirtying anything. A get
//! skips a buffer that is not in memory when its key filter rules the key
//! out (docs/design.md, buffer key filters). Reads are counted by height
//! (`counters::ReadCounters`).

use super::counters::{level_of, READ_LEVELS};
use super::fetch::{corrupt, read_part, read_shell_counted};
pub use super::miss::{Miss, Step};
use super::node::{Node, Part};
use super::pending::{resolve, Pending, Values};
use super::slice::{Slice, Slices};
use super::value::Form;
use super::{format, Child, Meta};
use crate::error::Result;
use crate::index::{Index, Trees};
use crate::store::cache::PidMap;
use crate::store::extent::Extent;
use crate::store::image::{downcast, downcast_ref, Image};
use crate::store::page::Kind;
use crate::store::read::MAX_RESTARTS;

/// A snapshot's frozen state, for this kind's reads.
pub type Frozen = crate::store::read::Frozen<Trees>;
use crate::store::Epoch;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What a traversal sees: trees, dirty nodes, cached nodes and nodes it read.
pub struct View<'a> {
    epoch: &'a Epoch<Trees>,
    pub ix: &'a Index,
    pinned: &'a PidMap<Arc<Node>>,
    hits: std::cell::Cell<u64>,
    /// Buffer reads saved by key filters in this try, by height.
    skips: std::cell::Cell<[u32; READ_LEVELS]>,
    /// Buffers this read probed: (node's first page, partition, the
    /// probed key's messages).
    probed: &'a [(u64, usize, Arc<Part>)],
    /// Buffer segments this read's cursor read (`slice.rs`).
    slices: &'a [Slice],
    /// Times this read dropped what it had read (its extents were reused):
    /// a descent saved at another count must start again at the root.
    resets: u32,
}

impl<'a> View<'a> {
    /// A view for one key of a batch (`many`): its own probed buffers,
    /// the batch's pinned nodes.
    pub(super) fn of(
        epoch: &'a Epoch<Trees>,
        ix: &'a Index,
        pinned: &'a PidMap<Arc<Node>>,
        probed: &'a [(u64, usize, Arc<Part>)],
        resets: u32,
    ) -> View<'a> {
        View {
            epoch,
            ix,
            pinned,
            hits: std::cell::Cell::new(0),
            skips: std::cell::Cell::new([0; READ_LEVELS]),
            probed,
            slices: &[],
            resets,
        }
    }

    /// The cache hits and filter skips this view counted.
    pub(super) fn tallies(&self) -> (u64, [u32; READ_LEVELS]) {
        (self.hits.get(), self.skips.get())
    }
}

impl View<'_> {
    pub fn ix_merge(&self) -> Option<&dyn crate::options::MergeOperator> {
        self.ix.merge.as_deref()
    }

    /// How `tree` stores values (plain when it does not exist).
    pub fn form(&self, tree: &str) -> Form {
        self.meta(tree).map_or(Form::Plain, |m| m.opts.form())
    }

    pub fn meta(&self, tree: &str) -> Option<&Meta> {
        self.epoch.trees.bepsilon(tree)
    }

    /// The node behind `c`, or what to read.
    pub fn node(&self, c: Child) -> std::result::Result<Arc<Node>, Miss> {
        match c {
            Child::Dirty(id) => {
                let img = self
                    .epoch
                    .dirty
                    .get(id)
                    .expect("a dirty child is dirty")
                    .clone();
                Ok(downcast::<Node>(img).expect("a B-epsilon node"))
            }
            Child::Clean(ext) => {
                if let Some(n) = self.pinned.get(&ext.first_page) {
                    return Ok(n.clone());
                }
                let n = self.ix.store.cache.lookup(ext.first_page);
                self.hits.set(self.hits.get() + n.is_some() as u64);
                n.and_then(downcast::<Node>).ok_or(Miss::Shell(ext))
            }
        }
    }

    /// Runs `f` on the node behind `c` where it lies (dirty, read by this
    /// try, or under the cache shard's read lock: `Cache::with`, whose
    /// requirement `f` meets), taking no reference to it. When `f` answers
    /// None the node is returned (one reference, for the slower path that
    /// needs it), and `Err(None)` when the node is not in memory.
    #[inline]
    pub fn with_node<R>(
        &self,
        c: Child,
        f: impl FnOnce(&Node) -> Option<R>,
    ) -> std::result::Result<R, Option<Arc<Node>>> {
        let node = |img: &Image| downcast::<Node>(img.clone()).expect("a B-epsilon node");
        match c {
            Child::Dirty(id) => {
                let img = self.epoch.dirty.get(id).expect("a dirty child is dirty");
                let n = downcast_ref::<Node>(&**img).expect("a B-epsilon node");
                f(n).ok_or_else(|| Some(node(img)))
            }
            Child::Clean(ext) => {
                if let Some(n) = self.pinned.get(&ext.first_page) {
                    return f(n).ok_or_else(|| Some(n.clone()));
                }
                let r = self.ix.store.cache.with(ext.first_page, |img| {
                    let n = downcast_ref::<Node>(&**img).ok_or(None)?;
                    f(n).ok_or_else(|| Some(node(img)))
                });
                self.hits.set(self.hits.get() + r.is_some() as u64);
                r.unwrap_or(Err(None))
            }
        }
    }

    /// Whether the get of a key hashing to `h` (`filter::key_hash`) can
    /// pass buffer `i` of internal node `n` without it: not in memory, and
    /// its filter rules the key out (counted).
    pub fn filter_skips(&self, n: &Node, i: usize, h: u64) -> bool {
        if n.parts[i].is_some() || !ruled_out(n, i, h) {
            return false;
        }
        let mut s = self.skips.get();
        s[level_of(n.height)] += 1;
        self.skips.set(s);
        true
    }

    /// The segment `seg` of buffer `part` of the node at `first_page`, if
    /// this read's cursor read it.
    pub fn slice(&self, first_page: u64, part: usize, seg: usize) -> Option<&Slice> {
        self.slices
            .iter()
            .find(|s| s.first_page == first_page && s.part == part && s.seg == seg)
    }

    /// Partition `i` of `n` (reached through `c`), or what to read.
    pub fn part(&self, c: Child, n: &Arc<Node>, i: usize) -> std::result::Result<Arc<Part>, Miss> {
        match (&n.parts[i], c) {
            (Some(p), _) => {
                n.uses.mark(i);
                Ok(p.clone())
            }
            (None, Child::Clean(ext)) => {
                let probe = self
                    .probed
                    .iter()
                    .find(|p| p.0 == ext.first_page && p.1 == i);
                match probe {
                    Some(p) => Ok(p.2.clone()),
                    None => Err(Miss::Part(ext, i, n.clone())),
                }
            }
            (None, Child::Dirty(id)) => panic!("dirty node {id:#x} with a partition not loaded"),
        }
    }
}

/// Whether the stored key filter of buffer `i` of `n` rules out the key
/// hashing to `h` (`filter::key_hash`; only a clean internal node has
/// filters). A clean buffer never changes, so its filter holds every key
/// it has messages for, loaded or not.
fn ruled_out(n: &Node, i: usize, h: u64) -> bool {
    if n.is_leaf() {
        return false;
    }
    let f = n.dir.get(i).and_then(|d| d.filter.as_ref());
    f.is_some_and(|f| !f.may_contain_hash(h))
}

/// Runs `f` against consistent views of the live state (`at` None) or of a
/// snapshot's until it finishes, reading what it misses between tries
/// (`crate::store::read::Store::read_at` says when a snapshot trusts it).
/// `f` must be a pure function of the view.
pub fn read_at<R>(ix: &Index, at: Option<&Frozen>, f: impl FnMut(&View) -> Step<R>) -> Result<R> {
    read_keeping(ix, at, &mut Slices::default(), f)
}

/// [`read_at`] for a cursor: the buffer segments it reads (`Miss::Slice`)
/// are kept in `kept` for its later steps while they hold (`Slices`).
pub fn read_keeping<R>(
    ix: &Index,
    at: Option<&Frozen>,
    kept: &mut Slices,
    mut f: impl FnMut(&View) -> Step<R>,
) -> Result<R> {
    let store = &ix.store;
    let pinned_at = at.is_some_and(|fz| fz.pinned());
    let mut pinned: PidMap<Arc<Node>> = PidMap::default();
    let mut probed: Vec<(u64, usize, Arc<Part>)> = Vec::new();
    let mut resets = 0u32;
    for _ in 0..MAX_RESTARTS {
        if let Some(fz) = at {
            fz.check_age()?;
        }
        let gen = store.reuse_gen.load(Ordering::Acquire);
        // A pinned snapshot's extents are never reused under it.
        let tag = if pinned_at { u64::MAX } else { gen };
        if kept.gen != tag {
            kept.list.clear();
            kept.gen = tag;
        }
        let step = {
            let guard;
            let epoch = match at {
                Some(fz) => &fz.epoch,
                None => {
                    guard = store.state.read();
                    &*guard
                }
            };
            let view = View {
                epoch,
                ix,
                pinned: &pinned,
                hits: std::cell::Cell::new(0),
                skips: std::cell::Cell::new([0; READ_LEVELS]),
                probed: &probed,
                slices: &kept.list,
                resets,
            };
            let step = f(&view);
            store.cache.hits.add(view.hits.get());
            if let Step::Done(_) = step {
                ix.counters.bepsilon_reads.filter_skipped(&view.skips.get());
            }
            step
        };
        let miss = match step {
            Step::Done(r)
                if at.is_none_or(|fz| fz.trusts(gen, store.reuse_gen.load(Ordering::Acquire))) =>
            {
                return Ok(r)
            }
            Step::Done(_) => {
                drop_reads(&mut pinned, &mut probed, kept, &mut resets);
                continue;
            }
            Step::Miss(m) => m,
        };
        store.cache.count_miss();
        let still = || pinned_at || store.reuse_gen.load(Ordering::Acquire) == gen;
        if let Miss::Probe(ext, i, n, key) = miss {
            match probe(ix, &ext, &n, i, &key) {
                Ok(p) if still() => probed.push((ext.first_page, i, Arc::new(p))),
                _ if !still() => drop_reads(&mut pinned, &mut probed, kept, &mut resets),
                Ok(_) => unreachable!(),
                Err(e) => return Err(e),
            }
            assert!(probed.len() <= super::MAX_HEIGHT as usize + 1);
            continue;
        }
        if let Miss::Slice(ext, i, n, seg) = miss {
            match super::slice::read(ix, &ext, &n, i, seg) {
                Ok(s) if still() => kept.keep(s, tag),
                _ if !still() => drop_reads(&mut pinned, &mut probed, kept, &mut resets),
                Ok(_) => unreachable!(),
                Err(e) => return Err(e),
            }
            continue;
        }
        if let Miss::Batch(misses) = miss {
            if !super::fetch::read_misses(ix, misses, &mut pinned, (kept, tag), still)? {
                drop_reads(&mut pinned, &mut probed, kept, &mut resets);
            }
            continue;
        }
        let (ext, loaded) = load(ix, miss);
        match loaded {
            Ok(n) if still() => {
                let n = Arc::new(n);
                store
                    .cache
                    .replace(ext.first_page, n.clone() as Image, still);
                pinned.insert(ext.first_page, n);
            }
            // The extent was reused under us; its old content is gone. Retry.
            _ if !still() => drop_reads(&mut pinned, &mut probed, kept, &mut resets),
            Ok(_) => unreachable!(),
            Err(e) => return Err(e),
        }
    }
    panic!("a read restarted {MAX_RESTARTS} times: page reuse never settles");
}

/// Drops what a read has read (an extent it read was reused): the next
/// try starts again at the root.
fn drop_reads(
    pinned: &mut PidMap<Arc<Node>>,
    probed: &mut Vec<(u64, usize, Arc<Part>)>,
    kept: &mut Slices,
    resets: &mut u32,
) {
    pinned.clear();
    probed.clear();
    kept.list.clear();
    *resets += 1;
}

/// Reads what `miss` names, counted; returns the node's extent and its
/// next image.
fn load(ix: &Index, miss: Miss) -> (Extent, Result<Node>) {
    let (pager, counters) = (&ix.store.pager, &ix.counters.bepsilon_reads);
    match miss {
        Miss::Shell(ext) => {
            let r = read_shell_counted(pager, &ext);
            let r = r.map(|(n, reads, bytes)| {
                counters.shell_read(n.height, reads, bytes);
                n
            });
            (ext, r)
        }
        Miss::Part(ext, i, n) => {
            let d = &n.dir[i];
            if d.comp_bytes > 0 {
                let (_, pages) = ext.pages_of_range(d.offset as u64, d.comp_bytes as u64, pager.ps);
                counters.part_read(n.height, pages * pager.ps as u64);
            }
            let r = read_part(pager, &ext, &n, i).map(|p| n.with_part(i, p));
            (ext, r)
        }
        Miss::Probe(..) | Miss::Slice(..) | Miss::Batch(..) => {
            unreachable!("probes, slices and batches are not single loads")
        }
    }
}

/// What partition `i` of `n` (the node at `ext`) holds for `key`, read
/// and scanned without decoding or caching the partition (counted): a
/// buffer's messages for the key, or a basement's entry. A segmented
/// partition is read one segment: the one that would hold `key`, or none
/// when `key` sorts before them all (docs/design.md, segments).
fn probe(ix: &Index, ext: &Extent, n: &Node, i: usize, key: &[u8]) -> Result<Part> {
    let (pager, d) = (&ix.store.pager, &n.dir[i]);
    assert!(d.comp_bytes > 0, "probing an empty partition");
    let segs = super::segment::of(n.segs.as_deref(), i);
    let Some((off, len, seg)) = super::segment::locate(d, segs, key) else {
        return Ok(match n.is_leaf() {
            true => Part::Packed(super::packed::Packed::default()),
            false => Part::Buf(super::buffer::Buffer::new()),
        });
    };
    let at = d.offset as u64 + off;
    let (_, pages) = ext.pages_of_range(at, len, pager.ps);
    ix.counters
        .bepsilon_reads
        .probe_read(n.height, pages * pager.ps as u64);
    PROBE_BUFS.with(|bufs| {
        let (c, raw) = &mut *bufs.borrow_mut();
        pager.read_range_into(ext, Kind::BEpsilon, at, len, c)?;
        let part = match n.is_leaf() {
            true => format::probe_basement(n, (i, seg), c, raw, key).map(Part::Packed),
            false => format::probe_buffer(n, (i, seg), c, raw, key).map(Part::Buf),
        };
        if c.capacity() > KEEP_PROBE_BUF_BYTES || raw.capacity() > KEEP_PROBE_BUF_BYTES {
            (*c, *raw) = (Vec::new(), Vec::new());
        }
        part.map_err(|w| corrupt(pager, ext, format!("partition {i}: {w}")))
    })
}

/// The largest stored or raw buffer a thread keeps between probes (a
/// default node's buffers are up to about 1 MiB raw).
const KEEP_PROBE_BUF_BYTES: usize = 2 << 20;

thread_local! {
    /// This thread's probe buffers, kept between probes: the stored bytes
    /// read and the raw bytes decompressed (`probe`).
    static PROBE_BUFS: std::cell::RefCell<(Vec<u8>, Vec<u8>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

/// Partitions probed lately, by (first page, partition): a direct-mapped
/// table of ids, each slot keeping the last id hashed to it, with about
/// one slot per 16 KiB of cache (64 to 4,096 slots): it remembers about as
/// many partitions as the cache holds, as 2Q's ghost queue does. A
/// partition probed again while its id is still there would have been a
/// hit had it been cached: the second miss loads it (a full cache evicts
/// for it) instead of probing it again, so a skewed workload's partitions
/// enter a full cache while a uniform one's mostly do not (one miss in
/// `1 + partitions / slots` loads). Basements only: a buffer is up to
/// node bytes / fanout, and admitting buffers too let them push the leaf
/// shells out of a 5% cache (7.6k against 15.2k gets/s at 5M rows,
/// measured with `dfc4902`).
pub struct Probed {
    slots: Box<[std::sync::atomic::AtomicU64]>,
    bits: u32,
}

impl Probed {
    /// A table for a cache of `cache_bytes`.
    pub fn new(cache_bytes: usize) -> Probed {
        let n = (cache_bytes >> 14).clamp(64, 4096).next_power_of_two();
        let slots = (0..n).map(|_| Default::default()).collect();
        let out = Probed {
            slots,
            bits: n.trailing_zeros(),
        };
        assert!(out.slots.len() == 1 << out.bits && out.bits <= 13);
        out
    }

    /// Records a miss on partition `i` of the node at `first_page`; returns
    /// whether the table still held it from an earlier miss.
    /// Slots pair up in buckets of two, newest first, so two hot partitions
    /// hashed to one bucket do not push each other out (races between
    /// readers may lose a record: a later miss records it again).
    pub fn again(&self, first_page: u64, i: usize) -> bool {
        assert!(i < 1 << 16 && first_page < 1 << 47);
        let id = (first_page << 16 | i as u64) + 1; // 0 is an empty slot
        let h = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - self.bits);
        let b = (h as usize) & !1;
        let (newer, older) = (&self.slots[b], &self.slots[b + 1]);
        if newer.load(Ordering::Relaxed) == id || older.load(Ordering::Relaxed) == id {
            return true;
        }
        older.store(newer.swap(id, Ordering::Relaxed), Ordering::Relaxed);
        false
    }
}

/// Whether a get reads a cold partition (buffer or basement) as a probe
/// rather than loading it into the cache: when the node's cache shard has
/// no room for it with an eighth of its budget to spare (a full cache
/// would evict for it; an unfull one keeps it for later gets; a full shard
/// that has just evicted has room for a moment, and a load then decodes a
/// partition that is soon evicted again), unless it is a basement probed
/// lately ([`Probed`]: hot).
pub(super) fn probes_instead(v: &View, ext: &Extent, n: &Node, i: usize) -> bool {
    let d = &n.dir[i];
    let charge = n.part_bytes[i] + 12 * d.entries as usize; // arena, offsets, heads
    let cache = &v.ix.store.cache;
    let spare = cache.shard_budget_bytes() / 8;
    let full = d.comp_bytes > 0 && !cache.has_room(ext.first_page, charge + spare);
    full && !(n.is_leaf() && v.ix.bepsilon_probed.again(ext.first_page, i))
}

/// Where a get's descent met a miss: the clean node it missed (or missed a
/// partition of) and the pending messages above it, so the next try of the
/// same read resumes there instead of at the root. A clean node does not
/// change while its extent is not reused, and the read drops everything it
/// saved when one is (`View::resets`).
pub struct Resume {
    at: Child,
    path: Vec<Pending>,
    skips: [u32; READ_LEVELS],
    resets: u32,
    form: Form,
}

/// A key's stored value (`value.rs`; None: absent) and how its tree
/// stores values.
pub type Stored = (Option<Vec<u8>>, Form);

/// One descent toward `key`: the pending messages on the path (root first)
/// and the leaf's value, or a miss (saved in `resume` for the next try);
/// `Done(Ok(None))` when `tree` is not a B-epsilon tree (absent, or of
/// another kind). The descent stops at the first buffer holding a put or
/// delete of `key`: nothing below it is newer.
pub fn get_step(
    v: &View,
    tree: &str,
    key: &[u8],
    resume: &mut Option<Resume>,
) -> Step<Result<Option<Stored>>> {
    let (mut cur, mut path, form) = match resume.take() {
        Some(r) if r.resets == v.resets => {
            v.skips.set(r.skips);
            (r.at, r.path, r.form)
        }
        _ => match v.meta(tree) {
            Some(Meta {
                root: Some(root),
                opts,
                ..
            }) => (*root, Vec::new(), opts.form()),
            Some(_) => return Step::Done(Ok(Some((None, Form::Plain)))),
            None => return Step::Done(Ok(None)),
        },
    };
    let h = super::filter::key_hash(key);
    for _ in 0..=super::MAX_HEIGHT {
        // The common step reads the node where it lies (no reference
        // counts); a node or partition not in memory takes `visit`.
        let seen = match v.with_node(cur, |n| look(v, n, key, h)) {
            Ok(seen) => seen,
            Err(node) => match visit(v, cur, node, key, h) {
                Ok(seen) => seen,
                Err(miss) => {
                    let (skips, resets) = (v.skips.get(), v.resets);
                    *resume = Some(Resume {
                        at: cur,
                        path,
                        skips,
                        resets,
                        form,
                    });
                    return Step::Miss(miss);
                }
            },
        };
        match seen {
            Seen::Pass(child) => cur = child,
            Seen::Buffered(pend, child) => {
                let decided = pend.base.is_some();
                path.push(pend);
                if decided {
                    // A put or delete here is newer than every message
                    // below it (messages only move down), so it decides
                    // the value: the levels below are not read.
                    let r = resolve_path(v, tree, form, key, None, &path);
                    return Step::Done(r.map(|s| Some((s, form))));
                }
                cur = child;
            }
            Seen::Leaf(val) => {
                let r = resolve_path(v, tree, form, key, val, &path);
                return Step::Done(r.map(|s| Some((s, form))));
            }
        }
    }
    let root = v.meta(tree).map_or(0, |m| m.root_page());
    Step::Done(Err(v.ix.store.pager.corrupt(
        root,
        format!("B-epsilon tree {tree:?} deeper than {}", super::MAX_HEIGHT),
    )))
}

/// What a get finds at one node.
enum Seen {
    /// Nothing for the key here: on to this child.
    Pass(Child),
    /// The key's messages in this node's buffer, then this child.
    Buffered(Pending, Child),
    /// A basement's stored value of the key, before the path's messages.
    Leaf(Option<Vec<u8>>),
}

/// What node `n` says about `key` (hashing to `h`) when the partition
/// that may hold it is in memory, or None: [`visit`] reads or probes it.
/// A declined look counts nothing; a skip by a buffer filter and a use of
/// a loaded partition are counted once.
#[inline]
fn look(v: &View, n: &Node, key: &[u8], h: u64) -> Option<Seen> {
    let i = n.find(key);
    if v.filter_skips(n, i, h) {
        return Some(Seen::Pass(n.children[i]));
    }
    let p = n.parts[i].as_ref()?;
    // A loaded buffer the filter rules out is passed without its map
    // lookup, marked used as a lookup would be (the cache keeps it).
    n.uses.mark(i);
    if ruled_out(n, i, h) {
        return Some(Seen::Pass(n.children[i]));
    }
    Some(seen_in(n, i, p, key))
}

/// What partition `i` of `n`, `p`, holds for `key`.
fn seen_in(n: &Node, i: usize, p: &Part, key: &[u8]) -> Seen {
    match p {
        Part::Buf(b) => match b.get(key) {
            Some(pend) => Seen::Buffered(pend, n.children[i]),
            None => Seen::Pass(n.children[i]),
        },
        Part::Packed(b) => Seen::Leaf(b.get(key).map(<[u8]>::to_vec)),
    }
}

/// What the node behind `cur` (`node` if the caller has it) says about
/// `key` (hashing to `h`) as [`look`] does, reading the partition that may
/// hold it from a probe of this read, or what to read.
fn visit(
    v: &View,
    cur: Child,
    node: Option<Arc<Node>>,
    key: &[u8],
    h: u64,
) -> std::result::Result<Seen, Miss> {
    let n = match node {
        Some(n) => n,
        None => v.node(cur)?,
    };
    if let Some(seen) = look(v, &n, key, h) {
        return Ok(seen);
    }
    let i = n.find(key);
    match v.part(cur, &n, i) {
        Ok(p) => Ok(seen_in(&n, i, &p, key)),
        Err(Miss::Part(ext, i, n)) if probes_instead(v, &ext, &n, i) => {
            Err(Miss::Probe(ext, i, n, key.to_vec()))
        }
        Err(miss) => Err(miss),
    }
}

/// The value of `key` after the pending messages of `path` (root first,
/// each level newer than the ones below it), given `val` before them.
fn resolve_path(
    v: &View,
    tree: &str,
    form: Form,
    key: &[u8],
    mut val: Option<Vec<u8>>,
    path: &[Pending],
) -> Result<Option<Vec<u8>>> {
    assert!(path.len() <= super::MAX_HEIGHT as usize + 1);
    if path.is_empty() {
        return Ok(val); // the common get: nothing buffered for the key
    }
    let mut plain = |b: &[u8]| plain_value(v.ix, form, tree, b);
    let mut values = Values {
        form,
        plain: &mut plain,
    };
    for pend in path.iter().rev() {
        val = resolve(v.ix.merge.as_deref(), tree, key, val, pend, &mut values)?;
    }
    Ok(val)
}

/// The user's value of stored value `b` of `tree` (form `form`): a value
/// extent is read from disk. Requires: no page reuse can race with it (the
/// state lock held, or a pinned snapshot), or the caller discards the
/// result when `reuse_gen` moved (`read_at` does).
pub fn plain_value(ix: &Index, form: Form, tree: &str, b: &[u8]) -> Result<Vec<u8>> {
    let pager = &ix.store.pager;
    form.plain(b, pager, tree, &mut |r| super::value::read_value(pager, r))
}

/// The stored value of `key` (`value.rs`) and how `tree` stores values;
/// None when `tree` is not a B-epsilon tree.
pub fn get_stored(
    ix: &Index,
    at: Option<&Frozen>,
    tree: &str,
    key: &[u8],
) -> Result<Option<Stored>> {
    let mut resume = None;
    read_at(ix, at, |v| get_step(v, tree, key, &mut resume))?
}

/// What a stored value (`get_stored`) gives the user: the value, or the
/// value extent still to read.
pub enum Value {
    Ready(Option<Vec<u8>>),
    Extent(super::value::ValueRef),
}

/// The user's value of `stored` (a value of `tree`, stored in form
/// `form`), or the extent that holds it; reads nothing.
pub fn value_of(ix: &Index, tree: &str, stored: Option<Vec<u8>>, form: Form) -> Result<Value> {
    let Some(mut stored) = stored else {
        return Ok(Value::Ready(None));
    };
    if form == Form::Plain {
        return Ok(Value::Ready(Some(stored)));
    }
    if stored.first() == Some(&super::value::TAG_INLINE) {
        stored.remove(0); // the value follows its tag: no copy
        return Ok(Value::Ready(Some(stored)));
    }
    match form.value_ref(&stored, ix.store.pager.ps) {
        Some(ext) => Ok(Value::Extent(ext)),
        None => {
            // Inline (or damaged: `plain` says so); no read.
            let mut none = |_: &super::value::ValueRef| unreachable!("an inline value");
            let v = form.plain(&stored, &ix.store.pager, tree, &mut none)?;
            Ok(Value::Ready(Some(v)))
        }
    }
}

/// The value of `key`: its stored value, and a value extent read with no
/// lock held (looked up again if its pages were reused meanwhile); None
/// when `tree` is not a B-epsilon tree.
pub fn get(
    ix: &Index,
    at: Option<&Frozen>,
    tree: &str,
    key: &[u8],
) -> Result<Option<Option<Vec<u8>>>> {
    for _ in 0..MAX_RESTARTS {
        let gen = ix.store.reuse_gen.load(Ordering::Acquire);
        let Some((stored, form)) = get_stored(ix, at, tree, key)? else {
            return Ok(None);
        };
        let ext = match value_of(ix, tree, stored, form)? {
            Value::Ready(v) => return Ok(Some(v)),
            Value::Extent(ext) => ext,
        };
        let r = super::value::read_value(&ix.store.pager, &ext);
        let pinned = at.is_some_and(|fz| fz.pinned());
        if pinned || ix.store.reuse_gen.load(Ordering::Acquire) == gen {
            return Ok(Some(Some(r?)));
        }
        // The extent was reused since the message was read: look again.
    }
    panic!("a get restarted {MAX_RESTARTS} times: page reuse never settles");
}
