//! Ordered iteration over a B+tree: one leaf's entries at a time, the next
//! leaf found by re-descending with the separator bound, missing leaves read
//! together with their siblings (read-ahead).

use super::node::Node;
use super::node::Val;
use super::read::node;
use super::readahead::{self, Window};
use crate::error::Result;
use crate::index::bepsilon::read::Frozen;
use crate::index::resolved::{self, Value};
use crate::index::{Index, Lent, Trees};
use crate::store::extent::Extent;
use crate::store::page::Kind;
use crate::store::read::{NodeRef, Step, View};
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

fn below_hi(key: &[u8], hi: &Bound<Vec<u8>>) -> bool {
    match hi {
        Bound::Included(h) => key <= &h[..],
        Bound::Excluded(h) => key < &h[..],
        Bound::Unbounded => true,
    }
}

/// Whether a leaf whose keys are all below `upper` may hold keys above `lo`.
fn ends_above_lo(upper: &[u8], lo: &Bound<Vec<u8>>) -> bool {
    match lo {
        Bound::Included(l) | Bound::Excluded(l) => upper > &l[..],
        Bound::Unbounded => true,
    }
}

fn above_lo(key: &[u8], lo: &Bound<Vec<u8>>) -> bool {
    match lo {
        Bound::Included(l) => key >= &l[..],
        Bound::Excluded(l) => key > &l[..],
        Bound::Unbounded => true,
    }
}

/// An overflow value still to be read: its extent, and the reuse
/// generation its leaf was read under.
type Over = (Extent, u64);

/// Entries copied out of leaves and not returned yet.
type Resolved = resolved::Resolved<Over>;

/// Where one leaf's entries end.
struct Chunk {
    /// Bound for the next leaf in the direction of travel (None: last leaf).
    next: Option<Vec<u8>>,
    /// Whether the chunk reached the end of its leaf in the direction of travel.
    exhausted: bool,
}

/// What a step of the iterator found.
enum Visit {
    /// The tree is empty.
    End,
    /// The next leaf, and the bound for the one after it.
    Leaf(Arc<Node>, Option<Vec<u8>>),
    /// The next leaf is missing: read these nodes (it first) together.
    Fetch(Vec<NodeRef>),
}

/// Ordered cursor over a key range: each leaf is read at the moment the
/// cursor reaches it, from the live trees or from a snapshot's (`at`); keys
/// come out strictly ordered, and no lock is held between calls.
pub struct Cursor {
    tree: Arc<str>,
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    /// Entries in key order per direction: forward takes from the front
    /// of `front`, backward from the back of `back`.
    front: Resolved,
    back: Resolved,
    front_done: bool,
    back_done: bool,
    /// Read-ahead windows of the two directions.
    ahead_front: Window,
    ahead_back: Window,
    /// The value of the entry returned last when it is not in a queue's
    /// arena (an overflow value).
    value: Vec<u8>,
}

impl Cursor {
    pub fn new(tree: Arc<str>, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) -> Self {
        let empty = match (&lo, &hi) {
            (Bound::Included(a), Bound::Included(b)) => a > b,
            (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b))
            | (Bound::Excluded(a), Bound::Included(b)) => a >= b,
            _ => false,
        };
        Self {
            tree,
            lo,
            hi,
            front: Resolved::default(),
            back: Resolved::default(),
            front_done: empty,
            back_done: empty,
            ahead_front: Window::default(),
            ahead_back: Window::default(),
            value: Vec::new(),
        }
    }

    /// Descends to the next leaf in the direction of travel and copies out
    /// its entries in range. If that leaf is missing and `window` > 0, asks
    /// instead for it and up to `window` missing siblings to be read at once.
    fn visit(&self, v: &View<Trees>, forward: bool, window: usize) -> Step<Visit> {
        let Some(tm) = v.trees().btree(&self.tree).filter(|t| t.root != 0).copied() else {
            return Step::Done(Visit::End);
        };
        let (mut at, mut depth) = (NodeRef::unnamed(tm.root), 1);
        let mut next = None;
        let mut parent: Option<(Arc<Node>, usize)> = None;
        let leaf: Arc<Node> = loop {
            let Some(n) = node(v, at.pid) else {
                return match parent {
                    Some((p, i)) if depth == tm.height && window > 0 => {
                        self.fetch(v, &p, i, forward, window)
                    }
                    _ => Step::Miss(at),
                };
            };
            if n.is_leaf() {
                break n;
            }
            if depth >= tm.height {
                // Deeper than the height says: corrupt; `check` reports it.
                return Step::Done(Visit::End);
            }
            let i = self.child_towards(&n, forward);
            let sep = if forward { i + 1 } else { i };
            if sep > 0 && sep < n.len() {
                next = Some(n.key(sep).to_vec());
            }
            at = n.child_ref(i);
            depth += 1;
            parent = Some((n, i));
        };
        Step::Done(Visit::Leaf(leaf, next))
    }

    /// The child of branch `n` holding the next keys in the direction of travel.
    fn child_towards(&self, n: &Node, forward: bool) -> usize {
        if forward {
            return match &self.lo {
                Bound::Included(k) | Bound::Excluded(k) => n.child_index(k),
                Bound::Unbounded => 0,
            };
        }
        match &self.hi {
            Bound::Included(k) => n.child_index(k),
            Bound::Excluded(k) => n.child_index_lt(k),
            Bound::Unbounded => n.len() - 1,
        }
    }

    /// The missing leaf `parent.child(i)` plus the next `window` siblings
    /// that may hold keys in range and are not in memory.
    fn fetch(
        &self,
        v: &View<Trees>,
        parent: &Node,
        i: usize,
        forward: bool,
        window: usize,
    ) -> Step<Visit> {
        let leaf = parent.child_ref(i);
        // A sibling's keys start at its separator (forward) or end below the
        // next one (backward); past the bound, it holds nothing we want.
        let sibs: Vec<usize> = if forward {
            (i + 1..parent.len())
                .take(window)
                .take_while(|&j| below_hi(parent.key(j), &self.hi))
                .collect()
        } else {
            (0..i)
                .rev()
                .take(window)
                .take_while(|&j| ends_above_lo(parent.key(j + 1), &self.lo))
                .collect()
        };
        let mut refs = vec![leaf];
        refs.extend(
            sibs.into_iter()
                .map(|j| parent.child_ref(j))
                .filter(|r| !v.resident(r.pid)),
        );
        if refs.len() == 1 {
            return Step::Miss(leaf);
        }
        Step::Done(Visit::Fetch(refs))
    }

    /// Copies `leaf`'s entries in range into `out` (empty), in key order
    /// (a backward step takes them from the back), and says whether the
    /// range goes on past the leaf in the direction of travel.
    fn collect(
        &self,
        leaf: &Node,
        mut next: Option<Vec<u8>>,
        forward: bool,
        gen: u64,
        out: &mut Resolved,
    ) -> Chunk {
        debug_assert!(out.is_empty());
        let end = match &self.hi {
            Bound::Included(k) => leaf.search(k).map_or_else(|i| i, |i| i + 1),
            Bound::Excluded(k) => leaf.search(k).unwrap_or_else(|i| i),
            Bound::Unbounded => leaf.len(),
        };
        let start = match &self.lo {
            Bound::Included(k) => leaf.search(k).unwrap_or_else(|i| i),
            Bound::Excluded(k) => leaf.search(k).map_or_else(|i| i, |i| i + 1),
            Bound::Unbounded => 0,
        }
        .min(end);
        // A key of the leaf past the range's end in the direction of
        // travel: nothing further is in it.
        let exhausted = if forward {
            end == leaf.len()
        } else {
            start == 0
        };
        if !exhausted {
            next = None;
        }
        // Room for the entries at the leaf's mean entry size: the arena
        // is not grown a doubling at a time (each growth a copy).
        out.reserve(end - start, leaf.bytes() / leaf.len().max(1));
        for i in start..end {
            let k = leaf.key(i);
            debug_assert!(above_lo(k, &self.lo) && below_hi(k, &self.hi));
            push(out, k, leaf.val(i), gen);
        }
        Chunk { next, exhausted }
    }

    fn refill(&mut self, ix: &Index, at: Option<&Frozen>, forward: bool) -> Result<()> {
        let cap = readahead::cap_pages(ix);
        let mut window = self.window(forward).pages(cap);
        loop {
            let gen = ix.store.reuse_gen.load(Ordering::Acquire);
            let (leaf, next) = match ix.store.read_at(at, |v| self.visit(v, forward, window))? {
                Visit::Leaf(leaf, next) => (leaf, next),
                Visit::Fetch(refs) => {
                    readahead::read_ahead(ix, &refs, gen);
                    self.window(forward).grow(cap);
                    // The leaf now comes from the cache, or (if the batch
                    // failed or was evicted) from the normal read path.
                    window = 0;
                    continue;
                }
                Visit::End => {
                    self.front_done = true;
                    self.back_done = true;
                    return Ok(());
                }
            };
            self.window(forward).leaf_done();
            window = self.window(forward).pages(cap);
            // Called with this direction's queue drained.
            let mut buf = std::mem::take(self.queue(forward));
            buf.clear();
            let c = self.collect(&leaf, next, forward, gen, &mut buf);
            read_overflow(ix, at, &mut buf, gen);
            let got = !buf.is_empty();
            *self.queue(forward) = buf;
            match (c.exhausted, c.next) {
                (true, Some(sep)) => {
                    if forward {
                        self.lo = Bound::Included(sep);
                    } else {
                        self.hi = Bound::Excluded(sep);
                    }
                }
                // Everything left in the range is now buffered.
                _ => {
                    self.front_done = true;
                    self.back_done = true;
                    return Ok(());
                }
            }
            if got {
                return Ok(());
            }
        }
    }

    fn window(&mut self, forward: bool) -> &mut Window {
        if forward {
            &mut self.ahead_front
        } else {
            &mut self.ahead_back
        }
    }

    fn queue(&mut self, forward: bool) -> &mut Resolved {
        if forward {
            &mut self.front
        } else {
            &mut self.back
        }
    }

    fn done(&self, forward: bool) -> bool {
        if forward {
            self.front_done
        } else {
            self.back_done
        }
    }

    fn fail(&mut self) {
        self.front_done = true;
        self.back_done = true;
        self.front.clear();
        self.back.clear();
    }

    /// The next entry in the direction of travel (`forward` or backward),
    /// borrowed from the cursor until its next step.
    pub fn step(&mut self, ix: &Index, at: Option<&Frozen>, forward: bool) -> Lent<'_> {
        // Where the entry found lies: its queue, its key, and its value
        // (None: `self.value`); no borrow of the cursor outlives a pass.
        let (in_front, k, in_arena) = loop {
            let (in_front, (k, v)) = match self.queue(forward).pop(forward) {
                Some(e) => (forward, e),
                None if !self.done(forward) => {
                    if let Err(err) = self.refill(ix, at, forward) {
                        self.fail();
                        return Some(Err(err));
                    }
                    continue;
                }
                // The other end's queue holds the rest, in order.
                None => (!forward, self.queue(!forward).pop(forward)?),
            };
            let in_arena = match v {
                Value::At(r) => Some(r),
                Value::Owned(b) => {
                    self.value = b;
                    None
                }
                Value::Out(over) => {
                    let q = if in_front { &self.front } else { &self.back };
                    match read_out(ix, at, &self.tree, q.bytes(k.clone()), over) {
                        Ok(Some(b)) => {
                            self.value = b;
                            None
                        }
                        Ok(None) => continue,
                        Err(err) => {
                            self.fail();
                            return Some(Err(err));
                        }
                    }
                }
            };
            break (in_front, k, in_arena);
        };
        let q = if in_front { &self.front } else { &self.back };
        let value = match in_arena {
            Some(r) => q.bytes(r),
            None => &self.value[..],
        };
        Some(Ok((q.bytes(k), value)))
    }
}

/// Appends a leaf entry to `out`: its value's bytes, or its overflow
/// extent (the leaf read under reuse generation `gen`).
fn push(out: &mut Resolved, key: &[u8], val: Val<'_>, gen: u64) {
    match val {
        Val::Inline(b) => out.push(key, b),
        Val::Overflow(ext) => out.push_out(key, (ext, gen)),
    }
}

/// The overflow value `over` of `key`, read from its extent; if the extent
/// was reused since its leaf was read, the key looked up again (None: it
/// is gone).
fn read_out(
    ix: &Index,
    at: Option<&Frozen>,
    tree: &str,
    key: &[u8],
    (ext, gen): Over,
) -> Result<Option<Vec<u8>>> {
    let pinned = at.is_some_and(|fz| fz.pinned());
    match ix
        .store
        .read_extent_at(&ext, Kind::Overflow, (!pinned).then_some(gen))?
    {
        Some(v) => Ok(Some(v)),
        None => Ok(super::read::get(ix, at, tree, key)?.ok().flatten()),
    }
}

/// Reads the overflow values of the entries just buffered (a leaf's, read
/// under reuse generation `gen`) through one queue (`Pager::read_extents`),
/// so a scan over large values waits about once per queue depth instead of
/// once per value. A value whose extent may have been reused meanwhile, or
/// whose read failed, stays out: `read_out` reads it again and reports.
fn read_overflow(ix: &Index, at: Option<&Frozen>, entries: &mut Resolved, gen: u64) {
    let big = entries.out_next(true, usize::MAX);
    if big.len() < 2 {
        return; // one value: `read_out` reads it as before
    }
    let exts: Vec<Extent> = big.iter().map(|&(_, (ext, _))| ext).collect();
    let Ok(read) = ix.store.pager.read_extents(&exts, Kind::Overflow) else {
        return;
    };
    let trusted =
        at.is_some_and(|fz| fz.pinned()) || ix.store.reuse_gen.load(Ordering::Acquire) == gen;
    if !trusted {
        return;
    }
    for ((i, _), r) in big.into_iter().zip(read) {
        if let Ok(v) = r {
            entries.set(i, Value::Owned(v));
        }
    }
}
