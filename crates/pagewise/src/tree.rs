//! Named trees: point operations and ordered iteration.

use crate::batch::Op;
use crate::db::Inner;
use crate::error::Result;
use crate::node::Node;
use crate::read::{Owned, Step, View};
use crate::readahead::Window;
use std::collections::VecDeque;
use std::ops::{Bound, RangeBounds};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A named, ordered map from byte keys to byte values.
#[derive(Clone)]
pub struct Tree {
    inner: Arc<Inner>,
    name: Arc<str>,
}

impl AsRef<str> for Tree {
    fn as_ref(&self) -> &str {
        &self.name
    }
}

impl std::fmt::Debug for Tree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tree({:?})", self.name)
    }
}

impl Tree {
    pub(crate) fn new(inner: Arc<Inner>, name: Arc<str>) -> Self {
        Self { inner, name }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.inner.get(&self.name, key.as_ref())
    }

    pub fn contains(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        let key = key.as_ref();
        self.inner.read(|v| {
            let Some(tm) = v.tree(&self.name).filter(|t| t.root != 0) else {
                return Step::Done(false);
            };
            match crate::read::find_leaf(v, tm.root, key) {
                Step::Done(leaf) => Step::Done(leaf.search(key).is_ok()),
                Step::Miss(p) => Step::Miss(p),
            }
        })
    }

    /// Sets `key` to `value` (one-operation batch).
    pub fn insert(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.inner.commit(vec![Op {
            tree: self.name.clone(),
            key: key.as_ref().to_vec(),
            val: Some(value.as_ref().to_vec()),
        }])
    }

    /// Removes `key` if present.
    pub fn remove(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.inner.commit(vec![Op {
            tree: self.name.clone(),
            key: key.as_ref().to_vec(),
            val: None,
        }])
    }

    /// Number of entries.
    pub fn len(&self) -> u64 {
        self.inner
            .state
            .read()
            .trees
            .get(&*self.name)
            .map_or(0, |t| t.entries)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entries with keys in `range`, in key order; `.rev()` for descending.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter {
        let own = |b: Bound<&K>| match b {
            Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
            Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
            Bound::Unbounded => Bound::Unbounded,
        };
        Iter::new(
            self.inner.clone(),
            self.name.clone(),
            own(range.start_bound()),
            own(range.end_bound()),
        )
    }

    /// All entries in key order.
    pub fn iter(&self) -> Iter {
        Iter::new(
            self.inner.clone(),
            self.name.clone(),
            Bound::Unbounded,
            Bound::Unbounded,
        )
    }

    /// Entries whose key starts with `prefix`.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Iter {
        let p = prefix.as_ref().to_vec();
        let hi = match prefix_successor(&p) {
            Some(s) => Bound::Excluded(s),
            None => Bound::Unbounded,
        };
        Iter::new(
            self.inner.clone(),
            self.name.clone(),
            Bound::Included(p),
            hi,
        )
    }

    pub fn first(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.iter().next().transpose()
    }

    pub fn last(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.iter().next_back().transpose()
    }
}

/// The smallest key greater than every key starting with `p`.
fn prefix_successor(p: &[u8]) -> Option<Vec<u8>> {
    let mut s = p.to_vec();
    while let Some(last) = s.pop() {
        if last < 0xff {
            s.push(last + 1);
            return Some(s);
        }
    }
    None
}

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
    /// The next leaf is missing: read these pages (it first) together.
    Fetch(Vec<u64>),
}

/// Ordered iterator over a key range. It does not hold a snapshot: each leaf
/// is read at the moment the iterator reaches it, keys come out strictly
/// ordered, and no lock is held between calls.
pub struct Iter {
    inner: Arc<Inner>,
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

impl Iter {
    fn new(inner: Arc<Inner>, tree: Arc<str>, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) -> Self {
        let empty = match (&lo, &hi) {
            (Bound::Included(a), Bound::Included(b)) => a > b,
            (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b))
            | (Bound::Excluded(a), Bound::Included(b)) => a >= b,
            _ => false,
        };
        Self {
            inner,
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
    fn visit(&self, v: &View, forward: bool, window: usize) -> Step<Visit> {
        let Some(tm) = v.tree(&self.tree).filter(|t| t.root != 0) else {
            return Step::Done(Visit::End);
        };
        let (mut pid, mut depth) = (tm.root, 1);
        let mut next = None;
        let mut parent: Option<(Arc<Node>, usize)> = None;
        let leaf: Arc<Node> = loop {
            let Some(n) = v.node(pid) else {
                return match parent {
                    Some((p, i)) if depth == tm.height && window > 0 => {
                        self.fetch(v, &p, i, forward, window)
                    }
                    _ => Step::Miss(pid),
                };
            };
            if n.is_leaf() {
                break n;
            }
            let i = self.child_towards(&n, forward);
            let sep = if forward { i + 1 } else { i };
            if sep > 0 && sep < n.len() {
                next = Some(n.key(sep).to_vec());
            }
            pid = n.child(i);
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
        v: &View,
        parent: &Node,
        i: usize,
        forward: bool,
        window: usize,
    ) -> Step<Visit> {
        let leaf = parent.child(i);
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
        let mut pids = vec![leaf];
        pids.extend(
            sibs.into_iter()
                .map(|j| parent.child(j))
                .filter(|&p| !v.resident(p)),
        );
        if pids.len() == 1 {
            return Step::Miss(leaf);
        }
        Step::Done(Visit::Fetch(pids))
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

    fn refill(&mut self, forward: bool) -> Result<()> {
        let cap = self.inner.read_ahead_cap();
        let mut window = self.window(forward).pages(cap);
        loop {
            let gen = self.inner.reuse_gen.load(Ordering::Acquire);
            let c = match self.inner.read(|v| self.visit(v, forward, window))? {
                Visit::Leaf(c) => c,
                Visit::Fetch(pids) => {
                    self.inner.read_ahead(&pids, gen);
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
            buf.extend(c.entries.into_iter().map(|(k, v)| (k, v, gen)));
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

    fn resolve(&mut self, e: Entry) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        match e.1 {
            Owned::Inline(v) => Ok(Some((e.0, v))),
            Owned::Overflow { pid, len } => match self.inner.read_overflow(pid, len, e.2)? {
                Some(v) => Ok(Some((e.0, v))),
                // The extent was reused since the leaf was read: look again.
                None => Ok(self.inner.get(&self.tree, &e.0)?.map(|v| (e.0, v))),
            },
        }
    }

    fn fail(&mut self) {
        self.front_done = true;
        self.back_done = true;
        self.front.clear();
        self.back.clear();
    }

    fn step(&mut self, forward: bool) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
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
                        if let Err(err) = self.refill(forward) {
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
            match self.resolve(e) {
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

impl Iterator for Iter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.step(true)
    }
}

impl DoubleEndedIterator for Iter {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.step(false)
    }
}
