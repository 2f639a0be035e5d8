//! Ordered iteration over a B+tree: one leaf's entries at a time, the next
//! leaf found by re-descending with the separator bound, missing leaves read
//! together with their siblings (read-ahead).

use super::node::Node;
use super::read::{node, Owned};
use super::readahead::{self, Window};
use crate::error::Result;
use crate::index::bepsilon::read::Frozen;
use crate::index::{Index, Trees};
use crate::store::page::Kind;
use crate::store::read::{NodeRef, Step, View};
use std::collections::VecDeque;
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

type Entry = (Vec<u8>, Owned, u64);

/// One leaf's worth of entries plus where to continue.
struct Chunk {
    entries: Vec<(Vec<u8>, Owned)>,
    /// Bound for the next leaf in the direction of travel (None: last leaf).
    next: Option<Vec<u8>>,
    /// Whether the chunk reached the end of its leaf in the direction of travel.
    exhausted: bool,
}

/// What a step of the iterator found.
enum Visit {
    /// The tree is empty.
    End,
    Leaf(Chunk),
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
    front: VecDeque<Entry>,
    back: VecDeque<Entry>,
    front_done: bool,
    back_done: bool,
    /// Read-ahead windows of the two directions.
    ahead_front: Window,
    ahead_back: Window,
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
            front: VecDeque::new(),
            back: VecDeque::new(),
            front_done: empty,
            back_done: empty,
            ahead_front: Window::default(),
            ahead_back: Window::default(),
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
        let chunk = if forward {
            self.collect_forward(&leaf, next)
        } else {
            self.collect_backward(&leaf, next)
        };
        Step::Done(Visit::Leaf(chunk))
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

    fn collect_forward(&self, leaf: &Node, mut next: Option<Vec<u8>>) -> Chunk {
        let start = match &self.lo {
            Bound::Included(k) => leaf.search(k).unwrap_or_else(|i| i),
            Bound::Excluded(k) => leaf.search(k).map_or_else(|i| i, |i| i + 1),
            Bound::Unbounded => 0,
        };
        let mut entries = Vec::new();
        let mut exhausted = true;
        for i in start..leaf.len() {
            let k = leaf.key(i);
            if !below_hi(k, &self.hi) {
                exhausted = false;
                next = None;
                break;
            }
            entries.push((k.to_vec(), Owned::from_val(leaf.val(i))));
        }
        Chunk {
            entries,
            next,
            exhausted,
        }
    }

    fn collect_backward(&self, leaf: &Node, mut next: Option<Vec<u8>>) -> Chunk {
        let end = match &self.hi {
            Bound::Included(k) => leaf.search(k).map_or_else(|i| i, |i| i + 1),
            Bound::Excluded(k) => leaf.search(k).unwrap_or_else(|i| i),
            Bound::Unbounded => leaf.len(),
        };
        let mut entries = Vec::new();
        let mut exhausted = true;
        for i in (0..end).rev() {
            let k = leaf.key(i);
            if !above_lo(k, &self.lo) {
                exhausted = false;
                next = None;
                break;
            }
            entries.push((k.to_vec(), Owned::from_val(leaf.val(i))));
        }
        Chunk {
            entries,
            next,
            exhausted,
        }
    }

    fn refill(&mut self, ix: &Index, at: Option<&Frozen>, forward: bool) -> Result<()> {
        let cap = readahead::cap_pages(ix);
        let mut window = self.window(forward).pages(cap);
        loop {
            let gen = ix.store.reuse_gen.load(Ordering::Acquire);
            let c = match ix.store.read_at(at, |v| self.visit(v, forward, window))? {
                Visit::Leaf(c) => c,
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
            let got = !c.entries.is_empty();
            let buf = if forward {
                &mut self.front
            } else {
                &mut self.back
            };
            let from = buf.len();
            buf.extend(c.entries.into_iter().map(|(k, v)| (k, v, gen)));
            read_overflow(ix, at, buf.range_mut(from..), gen);
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

    fn resolve(
        &mut self,
        ix: &Index,
        at: Option<&Frozen>,
        e: Entry,
    ) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        match e.1 {
            Owned::Inline(v) => Ok(Some((e.0, v))),
            Owned::Overflow(ext) => match ix.store.read_extent_at(
                &ext,
                Kind::Overflow,
                (!at.is_some_and(|fz| fz.pinned())).then_some(e.2),
            )? {
                Some(v) => Ok(Some((e.0, v))),
                // The extent was reused since the leaf was read: look again.
                None => Ok(super::read::get(ix, at, &self.tree, &e.0)?
                    .ok()
                    .flatten()
                    .map(|v| (e.0, v))),
            },
        }
    }

    fn fail(&mut self) {
        self.front_done = true;
        self.back_done = true;
        self.front.clear();
        self.back.clear();
    }

    /// The next entry in the direction of travel (`forward` or backward).
    pub fn step(
        &mut self,
        ix: &Index,
        at: Option<&Frozen>,
        forward: bool,
    ) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        loop {
            let e = if forward {
                self.front.pop_front()
            } else {
                self.back.pop_front()
            };
            let e = match e {
                Some(e) => e,
                None => {
                    let done = if forward {
                        self.front_done
                    } else {
                        self.back_done
                    };
                    if !done {
                        if let Err(err) = self.refill(ix, at, forward) {
                            self.fail();
                            return Some(Err(err));
                        }
                        continue;
                    }
                    // The other end's buffer holds the rest, in order.
                    if forward {
                        self.back.pop_back()?
                    } else {
                        self.front.pop_back()?
                    }
                }
            };
            match self.resolve(ix, at, e) {
                Ok(Some(kv)) => return Some(Ok(kv)),
                Ok(None) => continue,
                Err(err) => {
                    self.fail();
                    return Some(Err(err));
                }
            }
        }
    }
}

/// Reads the overflow values of the entries just buffered (a leaf's, read
/// under reuse generation `gen`) through one queue (`Pager::read_extents`),
/// so a scan over large values waits about once per queue depth instead of
/// once per value. A value whose extent may have been reused meanwhile, or
/// whose read failed, stays an extent: `resolve` reads it again and reports.
fn read_overflow<'a>(
    ix: &Index,
    at: Option<&Frozen>,
    entries: impl Iterator<Item = &'a mut Entry>,
    gen: u64,
) {
    let mut big: Vec<&mut Entry> = entries
        .filter(|e| matches!(e.1, Owned::Overflow(_)))
        .collect();
    let exts: Vec<crate::store::extent::Extent> = big
        .iter()
        .map(|e| match e.1 {
            Owned::Overflow(x) => x,
            Owned::Inline(_) => unreachable!("filtered"),
        })
        .collect();
    if exts.len() < 2 {
        return; // one value: `resolve` reads it as before
    }
    let Ok(read) = ix.store.pager.read_extents(&exts, Kind::Overflow) else {
        return;
    };
    let trusted =
        at.is_some_and(|fz| fz.pinned()) || ix.store.reuse_gen.load(Ordering::Acquire) == gen;
    if !trusted {
        return;
    }
    for (e, r) in big.iter_mut().zip(read) {
        if let Ok(v) = r {
            e.1 = Owned::Inline(v);
        }
    }
}
