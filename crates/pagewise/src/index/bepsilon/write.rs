//! The write path: messages enter the root's buffers; a node over its budget
//! flushes the child with the most buffered bytes one level down in one
//! batch; nodes split and merge by serialized size (docs/design.md,
//! "B-epsilon nodes"). Dirty nodes live in the store's dirty set under
//! provisional ids, charged by their heap bytes (heap.rs).

use super::buffer::{Kind as MsgKind, Message};
use super::node::{no_dir, Buffer, Node, Part};
use super::pending::{resolve, Change, Pending, Values};
use super::pivots::Pivots;
use super::value::Stored;
use super::{format, provisional_id, BEpsilonOptions, Child, Meta, MAX_HEIGHT};
use crate::error::{Error, Result};
use crate::events::{self, Event, EventListener};
use crate::options::MergeOperator;
use crate::store::alloc::Alloc;
use crate::store::cache::{Cache, PidMap};
use crate::store::dirty::Dirty;
use crate::store::extent::Extent;
use crate::store::image::{downcast, Image};
use crate::store::page::Kind;
use crate::store::pager::Pager;
use std::sync::Arc;

/// One logged operation on a B-epsilon tree.
#[derive(Clone, Copy)]
pub enum Msg<'a> {
    Put(&'a [u8]),
    Delete,
    Upsert(&'a [u8]),
}

pub struct Writer<'a> {
    pub dirty: Nodes<'a>,
    pub pager: &'a Pager,
    pub cache: &'a Cache,
    /// None on a paired flush's second thread: its frees wait in `frees`.
    pub alloc: Option<&'a mut Alloc>,
    /// Extents (first page, pages) freed while `alloc` is None, for the
    /// thread that joins this writer to free in this order.
    pub frees: Vec<(u64, u64)>,
    pub merge: Option<&'a dyn MergeOperator>,
    pub events: Option<&'a dyn EventListener>,
    pub tree: &'a str,
    /// Stored values that left the tree during this apply and may name
    /// value extents; [`Writer::free_dropped`] frees those that do.
    pub dropped: Vec<Vec<u8>>,
}

/// Where a writer's dirty nodes live: the epoch's dirty set, or, for a
/// paired flush's second thread (pair.rs), the dirty nodes of one subtree
/// taken out of it for the flush's length.
pub enum Nodes<'a> {
    Shared(&'a mut Dirty),
    Own(PidMap<Image>),
}

impl Nodes<'_> {
    fn get(&self, id: u64) -> Option<&Image> {
        match self {
            Nodes::Shared(d) => d.get(id),
            Nodes::Own(o) => o.get(&id),
        }
    }

    pub(super) fn remove(&mut self, id: u64) -> Option<Image> {
        match self {
            Nodes::Shared(d) => d.remove(id),
            Nodes::Own(o) => o.remove(&id),
        }
    }

    pub(super) fn insert(&mut self, id: u64, img: Image) {
        match self {
            Nodes::Shared(d) => d.insert(id, img),
            Nodes::Own(o) => {
                o.insert(id, img);
            }
        }
    }
}

impl Msg<'_> {
    fn kind_val(&self) -> (MsgKind, &[u8]) {
        match self {
            Msg::Put(v) => (MsgKind::Put, v),
            Msg::Delete => (MsgKind::Delete, &[][..]),
            Msg::Upsert(v) => (MsgKind::Upsert, v),
        }
    }
}

impl Writer<'_> {
    /// Applies the messages of one batch on this tree, in order: as
    /// [`Writer::apply`] one at a time would. Requires: the state write
    /// lock and the allocator. Effect: in memory only; with an internal
    /// root, the messages (sequence numbers in batch order) enter the
    /// root's buffers sorted, each child's run in one pass, and the root
    /// flushes once afterwards.
    pub fn apply_run(&mut self, m: &mut Meta, run: &[(&[u8], Msg)]) -> Result<()> {
        let r = self.apply_run_inner(m, run);
        self.free_dropped(m);
        r
    }

    /// Frees the value extents named by the stored values that left the
    /// tree (`dropped`), and the run pages whose last packed value left
    /// (the value table's counts, runs.rs), as pages the durable checkpoint
    /// may reference: reusable after the next checkpoint, and once no
    /// snapshot may read them (docs/design.md, "B-epsilon value extents",
    /// "B-epsilon packed values").
    pub(super) fn free_dropped(&mut self, m: &mut Meta) {
        let (form, ps) = (m.opts.form(), self.pager.ps);
        assert!(self.frees.is_empty(), "a joined writer's frees were taken");
        if form == super::value::Form::Plain {
            self.dropped.clear();
            return;
        }
        for b in std::mem::take(&mut self.dropped) {
            if !super::value::may_name_extent(&b) {
                continue;
            }
            match form.parse(&b, ps) {
                Some(Stored::Extent(e)) => self.free_later(e.first_page, e.count_pages),
                Some(Stored::Packed(p)) => {
                    m.values.changed = true;
                    let runs = Arc::make_mut(&mut m.values.runs);
                    for page in runs.release(&p, ps) {
                        self.free_later(page, 1);
                    }
                }
                _ => {}
            }
        }
        assert!(self.dropped.is_empty());
    }

    fn apply_run_inner(&mut self, m: &mut Meta, run: &[(&[u8], Msg)]) -> Result<()> {
        let root = match m.root {
            Some(c) if m.height > 0 && run.len() > 1 => c,
            _ => {
                return run
                    .iter()
                    .try_for_each(|(k, msg)| self.apply_one(m, k, *msg))
            }
        };
        if self.merge.is_none() && run.iter().any(|(_, x)| matches!(x, Msg::Upsert(_))) {
            return Err(Error::NoMergeOperator {
                tree: self.tree.to_string(),
            });
        }
        let first_seq = m.next_seq;
        m.next_seq += run.len() as u64;
        let mut order: Vec<usize> = (0..run.len()).collect();
        order.sort_by(|&a, &b| run[a].0.cmp(run[b].0)); // stable: equal keys in batch order
        let msgs: Vec<Message> = order
            .iter()
            .map(|&i| {
                let (kind, val) = run[i].1.kind_val();
                let seq = first_seq + i as u64;
                let key = run[i].0;
                Message {
                    kind,
                    seq,
                    key,
                    val,
                }
            })
            .collect();
        let root_id = self.make_dirty(root)?;
        m.root = Some(Child::Dirty(root_id));
        let mut node = self.take(root_id);
        add_runs(&mut node, &msgs, &mut self.dropped);
        let r = self.flush_until_fits(m, &mut node, true);
        self.put(root_id, node);
        r?;
        self.rebalance_root(m)
    }

    /// Applies one message. Requires: the state write lock and the
    /// allocator (held by the caller's borrows). Effect: in memory only.
    fn apply_one(&mut self, m: &mut Meta, key: &[u8], msg: Msg) -> Result<()> {
        if matches!(msg, Msg::Upsert(_)) && self.merge.is_none() {
            return Err(Error::NoMergeOperator {
                tree: self.tree.to_string(),
            });
        }
        let seq = m.next_seq;
        m.next_seq += 1;
        let (kind, val) = msg.kind_val();
        let message = Message {
            kind,
            seq,
            key,
            val,
        };
        let root_id = match m.root {
            None => {
                let id = provisional_id();
                self.put(id, Node::new_leaf());
                (m.nodes, m.height) = (1, 0);
                id
            }
            Some(c) => self.make_dirty(c)?,
        };
        m.root = Some(Child::Dirty(root_id));
        let mut root = self.take(root_id);
        let r = if root.is_leaf() {
            let change = match message.kind {
                MsgKind::Put => Change::Put(val),
                MsgKind::Delete => Change::Delete,
                MsgKind::Upsert => {
                    let mut p = Pending::default();
                    p.push(&message);
                    Change::Merge(p)
                }
            };
            let r = self.leaf_apply(m, &mut root, &[(key, change)]);
            root.fix_basements(m.opts.basement_bytes as usize);
            r
        } else {
            let i = root.find(key);
            root.buf_add(i, message, &mut self.dropped);
            self.flush_until_fits(m, &mut root, false)
        };
        self.put(root_id, root);
        r?;
        self.rebalance_root(m)
    }

    /// Splits an oversized root under a new root, or collapses a root with
    /// one child; bounded by the height.
    pub(super) fn rebalance_root(&mut self, m: &mut Meta) -> Result<()> {
        for _ in 0..2 * MAX_HEIGHT + 2 {
            let Some(Child::Dirty(id)) = m.root else {
                return Ok(());
            };
            let root = self.take(id);
            let height = root.height;
            let mut pieces = split(root, &m.opts, &mut m.nodes);
            if pieces.len() > 1 {
                let top = self.adopt(height + 1, pieces);
                m.nodes += 1;
                m.height = height + 1;
                let tid = provisional_id();
                self.put(tid, top);
                m.root = Some(Child::Dirty(tid));
                continue;
            }
            let mut root = pieces.pop().expect("one piece").1;
            if root.is_leaf() || root.children.len() > 1 {
                self.put(id, root);
                return Ok(());
            }
            if root.part_bytes[0] > 0 {
                let r = self.flush_child(m, &mut root, 0);
                self.put(id, root);
                r?;
                continue;
            }
            m.root = Some(root.children[0]);
            m.nodes -= 1;
            m.height = height - 1;
        }
        panic!("rebalancing the root did not settle");
    }

    /// A new internal node over `pieces` (with empty buffers).
    fn adopt(&mut self, height: u32, pieces: Vec<(Option<Vec<u8>>, Node)>) -> Node {
        assert!(pieces.len() >= 2 && height >= 1);
        let mut top = Node {
            height,
            pivots: Pivots::new(),
            children: Vec::new(),
            parts: Vec::new(),
            part_bytes: Vec::new(),
            dir: no_dir(),
            segs: None,
            comp: 0,
            uses: super::node::UseMarks::default(),
        };
        for (sep, n) in pieces {
            let id = provisional_id();
            self.put(id, n);
            if let Some(s) = sep {
                top.pivots.push(&s);
            }
            top.children.push(Child::Dirty(id));
            top.parts.push(Some(Arc::new(Part::Buf(Buffer::new()))));
            top.part_bytes.push(0);
        }
        assert_eq!(top.pivots.len() + 1, top.children.len());
        top
    }

    /// Flushes the buffer chosen by [`flush_choice`] while `node` is over
    /// its budget: its node bytes serialized, or [`HEAP_FACTOR`] times them
    /// in heap (small messages held as maps). With `pairs` (a batch's
    /// root), the buffer [`pair_choice`] names beside it flushes at the same
    /// time on a second thread (pair.rs).
    fn flush_until_fits(&mut self, m: &mut Meta, node: &mut Node, pairs: bool) -> Result<()> {
        assert!(!node.is_leaf());
        let bound = 4 * m.opts.fanout as usize + 8;
        let budget = m.opts.node_bytes as usize;
        for _ in 0..bound {
            if node.bytes() <= budget && node.parts_heap_bytes() <= HEAP_FACTOR * budget {
                break;
            }
            let Some(c) = flush_choice(node) else {
                break;
            };
            match pair_choice(node, c).filter(|_| pairs && self.alloc.is_some()) {
                Some(d) => self.flush_pair(m, node, c, d)?,
                None => self.flush_child(m, node, c)?,
            }
        }
        Ok(())
    }

    /// [`Writer::move_down`], told to the event listener.
    pub(super) fn flush_child(&mut self, m: &mut Meta, parent: &mut Node, c: usize) -> Result<()> {
        let height = parent.height;
        events::tell(
            self.events,
            Event::FlushBegin {
                height,
                paired: false,
            },
        );
        let t0 = std::time::Instant::now();
        self.move_down(m, parent, c)?;
        let elapsed_us = events::elapsed_us(t0);
        events::tell(self.events, Event::FlushEnd { height, elapsed_us });
        Ok(())
    }

    /// Moves every message of buffer `c` into child `c` (one batch), then
    /// splits the child or merges it with a sibling as its size requires.
    fn move_down(&mut self, m: &mut Meta, parent: &mut Node, c: usize) -> Result<()> {
        self.check_operator(parent, c)?;
        let id = self.make_dirty(parent.children[c])?;
        parent.children[c] = Child::Dirty(id);
        let msgs = parent.take_buf(c);
        let mut child = self.take(id);
        if child.height + 1 != parent.height {
            self.put(id, child);
            return Err(self.corrupt_level(parent.height));
        }
        let r = self.push_down(m, &mut child, msgs);
        if let Err(e) = r {
            self.put(id, child);
            return Err(e);
        }
        if self.put_split(m, parent, c, id, child) {
            self.maybe_merge(m, parent, c)?;
        }
        Ok(())
    }

    /// Err(NoMergeOperator) when buffer `c` of `parent` holds an upsert
    /// and the Db has no merge operator to flush it with.
    pub(super) fn check_operator(&self, parent: &Node, c: usize) -> Result<()> {
        let has_ops = matches!(parent.parts[c].as_deref(), Some(Part::Buf(b)) if b.has_ops());
        if has_ops && self.merge.is_none() {
            return Err(Error::NoMergeOperator {
                tree: self.tree.to_string(),
            });
        }
        Ok(())
    }

    /// Puts `child` (dirty node `id`, child `c` of `parent`) back, split as
    /// its size requires, the pieces after the first inserted after it in
    /// `parent` with empty buffers. Returns whether it stayed one node.
    pub(super) fn put_split(
        &mut self,
        m: &mut Meta,
        parent: &mut Node,
        c: usize,
        id: u64,
        child: Node,
    ) -> bool {
        let mut pieces = split(child, &m.opts, &mut m.nodes).into_iter();
        self.put(id, pieces.next().expect("one piece").1);
        let single = pieces.len() == 0;
        for (at, (sep, n)) in (c + 1..).zip(pieces) {
            let nid = provisional_id();
            self.put(nid, n);
            parent.pivots.insert(at - 1, &sep.expect("a separator"));
            parent.children.insert(at, Child::Dirty(nid));
            parent
                .parts
                .insert(at, Some(Arc::new(Part::Buf(Buffer::new()))));
            parent.part_bytes.insert(at, 0);
        }
        single
    }

    pub(super) fn push_down(&mut self, m: &mut Meta, child: &mut Node, msgs: Buffer) -> Result<()> {
        if child.is_leaf() {
            let batch: Vec<(&[u8], Change)> = msgs.changes().collect();
            let r = self.leaf_apply(m, child, &batch);
            child.fix_basements(m.opts.basement_bytes as usize);
            return r;
        }
        let all: Vec<Message> = msgs.messages().collect();
        add_runs(child, &all, &mut self.dropped);
        self.flush_until_fits(m, child, false)
    }

    /// Merges `batch` (sorted by key) into the leaf's packed basements.
    fn leaf_apply(
        &mut self,
        m: &mut Meta,
        leaf: &mut Node,
        batch: &[(&[u8], Change)],
    ) -> Result<()> {
        let (merge, tree, pager) = (self.merge, self.tree, self.pager);
        let form = m.opts.form();
        // A merge over a value extent reads it under the state lock: no
        // page can be reused meanwhile (rare: upserts over large values).
        let mut plain =
            |b: &[u8]| form.plain(b, pager, tree, &mut |e| super::value::read_value(pager, e));
        let mut values = Values {
            form,
            plain: &mut plain,
        };
        let mut res = |key: &[u8], existing: Option<&[u8]>, p: &Pending| {
            // A put or delete ignores the value before it: no copy.
            let before = if p.ops.is_empty() {
                None
            } else {
                existing.map(<[u8]>::to_vec)
            };
            resolve(merge, tree, key, before, p, &mut values)
        };
        let d = leaf.apply_sorted(batch, &mut res, &mut self.dropped)?;
        m.entries = m.entries.checked_add_signed(d).expect("entry count");
        Ok(())
    }

    /// Joins child `c` with a neighbour when it fell below a quarter of the
    /// budget and the pair fits one node.
    pub(super) fn maybe_merge(&mut self, m: &mut Meta, parent: &mut Node, c: usize) -> Result<()> {
        let n = parent.children.len();
        if n < 2 {
            return Ok(());
        }
        let me = self.shell_of(parent.children[c])?;
        let budget = m.opts.target_bytes(me.height);
        if me.bytes() >= budget / 4 {
            return Ok(());
        }
        let (l, r) = if c + 1 < n { (c, c + 1) } else { (c - 1, c) };
        let other = self.shell_of(parent.children[if l == c { r } else { l }])?;
        let fan = me.children.len() + other.children.len();
        if me.bytes() + other.bytes() > budget || fan > m.opts.fanout as usize {
            return Ok(());
        }
        let lid = self.make_dirty(parent.children[l])?;
        let rid = self.make_dirty(parent.children[r])?;
        let (left, right) = (self.take(lid), self.take(rid));
        let sep = parent.pivots.remove(l);
        parent.children.remove(r);
        let rbuf = parent.take_buf(r);
        parent.parts.remove(r);
        parent.part_bytes.remove(r);
        for msg in rbuf.messages() {
            parent.buf_add(l, msg, &mut self.dropped);
        }
        let mut joined = Node::concat(left, sep, right);
        if joined.is_leaf() {
            joined.fix_basements(m.opts.basement_bytes as usize);
        }
        m.nodes -= 1;
        parent.children[l] = Child::Dirty(lid);
        self.put(lid, joined);
        Ok(())
    }

    /// The node behind `c` (its shell at least) for its size and fanout.
    fn shell_of(&mut self, c: Child) -> Result<Arc<Node>> {
        match c {
            Child::Dirty(id) => Ok(self.dirty_node(id)),
            Child::Clean(ext) => {
                if let Some(n) = self.cache.lookup(ext.first_page).and_then(downcast::<Node>) {
                    return Ok(n);
                }
                let n = Arc::new(super::fetch::read_shell(self.pager, &ext)?);
                self.cache
                    .insert(ext.first_page, n.clone() as Image, || true);
                Ok(n)
            }
        }
    }

    fn dirty_node(&self, id: u64) -> Arc<Node> {
        let img = self.dirty.get(id).expect("dirty node").clone();
        downcast::<Node>(img).expect("a B-epsilon node")
    }

    /// The provisional id of `c`, copying a clean node into the dirty set
    /// (its extent is freed once the next checkpoint is durable).
    pub(super) fn make_dirty(&mut self, c: Child) -> Result<u64> {
        let ext = match c {
            Child::Dirty(id) => return Ok(id),
            Child::Clean(ext) => ext,
        };
        let mut node = self.load_full(&ext)?;
        (node.dir, node.segs) = (no_dir(), None); // basements stay packed (leaf.rs merges into them)
                                                  // No lookup reaches the clean image again (its parent now names the
                                                  // dirty copy), and it would keep the partitions the copy changes
                                                  // alive beside theirs: both charged, both held.
        self.cache.remove(ext.first_page);
        self.free_later(ext.first_page, ext.count_pages);
        let id = provisional_id();
        self.put(id, node);
        Ok(id)
    }

    /// Frees an extent the durable checkpoint may reference (reusable
    /// after the next one), or records it for the joining thread.
    pub(super) fn free_later(&mut self, first_page: u64, count_pages: u64) {
        match self.alloc.as_deref_mut() {
            Some(a) => a.free_later(first_page, count_pages),
            None => self.frees.push((first_page, count_pages)),
        }
    }

    fn load_full(&self, ext: &Extent) -> Result<Node> {
        if let Some(n) = self.cache.lookup(ext.first_page).and_then(downcast::<Node>) {
            if n.all_loaded() {
                return Ok((*n).clone());
            }
        }
        let b = self.pager.read_extent(ext, Kind::BEpsilon)?;
        format::decode_full(&b, self.pager.ps).map_err(|w| {
            self.pager
                .corrupt(ext.first_page, format!("B-epsilon node: {w}"))
        })
    }

    pub(super) fn corrupt_level(&self, height: u32) -> Error {
        let what = format!(
            "B-epsilon tree {:?}: a child of a node at height {height} is not one level below",
            self.tree
        );
        self.pager.corrupt(0, what)
    }

    /// Removes dirty node `id` for changing; `put` returns it.
    pub(super) fn take(&mut self, id: u64) -> Node {
        let img = self.dirty.remove(id).expect("dirty node");
        let n = downcast::<Node>(img).expect("a B-epsilon node");
        Arc::try_unwrap(n).unwrap_or_else(|a| (*a).clone())
    }

    /// Puts `n` into the dirty set, charged at its heap bytes.
    pub(super) fn put(&mut self, id: u64, n: Node) {
        debug_assert!(n.all_loaded() && n.pivots.len() + 1 == n.parts.len());
        self.dirty.insert(id, Arc::new(n) as Image);
    }
}

/// Adds `msgs` (sorted by key, equal keys oldest first, newer than what
/// `node` buffers) to internal `node`: each child's run is contiguous and
/// goes into its buffer in one pass (bounded by the fanout).
fn add_runs(node: &mut Node, msgs: &[Message], dropped: &mut Vec<Vec<u8>>) {
    assert!(!node.is_leaf());
    let mut start = 0;
    for _ in 0..node.children.len() {
        let Some(first) = msgs.get(start) else {
            break;
        };
        let i = node.find(first.key);
        let end = start + msgs[start..].partition_point(|x| node.find(x.key) == i);
        node.buf_add_sorted(i, &msgs[start..end], dropped);
        start = end;
    }
    assert_eq!(start, msgs.len(), "every message placed");
}

/// An internal node flushes once its heap bytes pass this many times its
/// node bytes, even while its serialized bytes fit. Packed buffers take
/// about their serialized bytes (plus dead messages up to half the live:
/// buffer.rs; docs/design.md, "Memory charge"), so the serialized budget
/// decides; this bound keeps a node image within a cache shard
/// (`SHARD_UNIT_BYTES`) whatever the messages.
pub const HEAP_FACTOR: usize = 3;

/// A dirty child's buffer counts this many times its bytes when choosing
/// which buffer to flush: the child is written once at the next checkpoint
/// however many flushes it takes, while flushing into a clean child costs a
/// whole node read and write.
pub const DIRTY_CHILD_WEIGHT: usize = 16;

/// The buffer of internal node `n` to flush: the heaviest, a dirty child's
/// bytes weighted by [`DIRTY_CHILD_WEIGHT`]; None when every buffer is empty.
pub fn flush_choice(n: &Node) -> Option<usize> {
    assert!(!n.is_leaf() && n.children.len() == n.part_bytes.len());
    let best = (0..n.part_bytes.len()).max_by_key(|&i| flush_score(n, i))?;
    (n.part_bytes[best] > 0).then_some(best)
}

/// Buffer `i`'s weight in [`flush_choice`].
fn flush_score(n: &Node, i: usize) -> usize {
    match n.children[i] {
        Child::Dirty(_) => n.part_bytes[i] * DIRTY_CHILD_WEIGHT,
        Child::Clean(_) => n.part_bytes[i],
    }
}

/// Bytes each of two buffers holds at least for them to flush side by side
/// (pair.rs): a thread costs tens of microseconds, a flush of this many
/// bytes about a millisecond. Nodes of the crash simulation's sizes never
/// pair, so its faults, counted per I/O, replay by seed.
pub const PAIR_MIN_BYTES: usize = 64 << 10;

/// The buffer to flush beside [`flush_choice`]'s `c` on a second thread:
/// the next by the same weight, when a second core exists and both hold at
/// least [`PAIR_MIN_BYTES`], the second at least half the first. The node
/// then falls about two buffers below its budget, so the next batch or so
/// flushes nothing: the same flushes as one at a time, two at once.
pub fn pair_choice(n: &Node, c: usize) -> Option<usize> {
    assert!(!n.is_leaf() && c < n.part_bytes.len());
    if n.part_bytes[c] < PAIR_MIN_BYTES || crate::store::cores::available() < 2 {
        return None;
    }
    let d = (0..n.part_bytes.len())
        .filter(|&i| i != c)
        .max_by_key(|&i| flush_score(n, i))?;
    let big = n.part_bytes[d] >= PAIR_MIN_BYTES && 2 * n.part_bytes[d] >= n.part_bytes[c];
    big.then_some(d)
}

/// Whether `n` must split: over the byte budget of its height (leaf or
/// node bytes; and divisible) or over the fanout.
fn needs_split(n: &Node, o: &BEpsilonOptions) -> bool {
    let over_fan = !n.is_leaf() && n.children.len() > o.fanout as usize;
    n.parts.len() >= 2 && (n.bytes() > o.target_bytes(n.height) || over_fan)
}

/// Splits `n` into pieces that fit (each with the separator before it),
/// counting the new nodes in `nodes`.
pub fn split(n: Node, o: &BEpsilonOptions, nodes: &mut u64) -> Vec<(Option<Vec<u8>>, Node)> {
    let mut todo = vec![(None, n)];
    let mut out = Vec::new();
    for _ in 0..1 << 20 {
        let Some((sep, n)) = todo.pop() else {
            return out;
        };
        if !needs_split(&n, o) {
            out.push((sep, n));
            continue;
        }
        let at = split_point(&n, o);
        let (l, s, r) = n.split_at(at);
        *nodes += 1;
        todo.push((Some(s), r));
        todo.push((sep, l));
    }
    panic!("a split did not settle");
}

/// The partition index to split before: the byte midpoint, or the middle
/// child when only the fanout is exceeded.
fn split_point(n: &Node, o: &BEpsilonOptions) -> usize {
    let count = n.parts.len();
    if n.bytes() <= o.target_bytes(n.height) {
        return count / 2;
    }
    let total: usize = n.part_bytes.iter().sum::<usize>() + n.pivots.key_bytes();
    let mut acc = 0;
    for i in 0..count {
        acc += n.part_bytes[i] + n.pivots.get(i).map_or(0, <[u8]>::len);
        if acc >= total / 2 {
            return (i + 1).clamp(1, count - 1);
        }
    }
    count - 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::bepsilon::PROVISIONAL_BIT;

    /// An internal node over `children` with buffers of `bytes`.
    fn internal(children: Vec<Child>, bytes: Vec<usize>) -> Node {
        let n = children.len();
        Node {
            height: 1,
            pivots: (1..n).map(|i| vec![i as u8]).collect(),
            children,
            parts: (0..n)
                .map(|_| Some(Arc::new(Part::Buf(Buffer::new()))))
                .collect(),
            part_bytes: bytes,
            dir: no_dir(),
            segs: None,
            comp: 0,
            uses: Default::default(),
        }
    }

    #[test]
    fn flush_choice_weighs_dirty_children() {
        let clean = Child::Clean(Extent::new(100, 4096, 4096));
        let dirty = Child::Dirty(PROVISIONAL_BIT | 7);
        let w = DIRTY_CHILD_WEIGHT;
        // A dirty child's buffer wins over a clean one up to w times larger.
        let n = internal(vec![clean, dirty, clean], vec![10 * w - 1, 10, 5]);
        assert_eq!(flush_choice(&n), Some(1));
        let n = internal(vec![clean, dirty, clean], vec![10 * w + 1, 10, 5]);
        assert_eq!(flush_choice(&n), Some(0));
        // Without dirty children: the heaviest; empty buffers: none.
        let n = internal(vec![clean, clean, clean], vec![3, 9, 4]);
        assert_eq!(flush_choice(&n), Some(1));
        let n = internal(vec![dirty, clean], vec![0, 0]);
        assert_eq!(flush_choice(&n), None);
    }

    /// A leaf of `keys` 30-byte entries in 256-byte basements.
    fn leaf_of(keys: u32) -> Node {
        let mut n = Node::new_leaf();
        for k in 0..keys {
            n.base_set(&k.to_be_bytes(), Some(vec![7; 22]));
        }
        n.fix_basements(256);
        n
    }

    #[test]
    fn a_leaf_splits_at_its_own_bytes() {
        let leaf = leaf_of(400);
        let bytes = leaf.bytes();
        assert!(bytes > 8192 && bytes < 16384, "{bytes}");
        let o = BEpsilonOptions::default()
            .node_bytes(16384)
            .basement_bytes(256);
        // Without leaf bytes the leaf fits the node bytes: one piece.
        let mut nodes = 0;
        assert_eq!(split(leaf_of(400), &o, &mut nodes).len(), 1);
        assert_eq!(nodes, 0);
        // With 2 KiB leaf bytes every piece fits 2 KiB, and about bytes / 2 KiB
        // to twice that many pieces come out.
        let pieces = split(leaf, &o.leaf_bytes(2048), &mut nodes);
        assert!(pieces.iter().all(|(_, n)| n.bytes() <= 2048));
        assert!(pieces.len() >= bytes / 2048 && pieces.len() <= 2 * bytes / 1024);
        assert_eq!(nodes as usize, pieces.len() - 1);
        assert!(pieces[0].0.is_none() && pieces[1..].iter().all(|(s, _)| s.is_some()));
        // An internal node still splits by the node bytes, not the leaf bytes.
        let inner = internal(vec![Child::Dirty(PROVISIONAL_BIT | 1); 4], vec![1000; 4]);
        let mut nodes = 0;
        assert_eq!(split(inner, &o.leaf_bytes(2048), &mut nodes).len(), 1);
    }
}
