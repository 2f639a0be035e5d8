//! Ordered iteration both ways, one basement at a time: each step reads the
//! basement holding the cursor position plus the ancestors' buffered
//! messages for its key range, resolves them, and keeps the result. No lock
//! is held between steps (not a snapshot, like B+tree iterators). Moving
//! forward, a step that its limit cut short keeps its merge (`Held`), and
//! the next step goes on from there instead of descending again.

use super::merge::{self, Merge};
use super::node::{Node, Part};
use super::packed::Packed;
use super::pending::{resolve, Pending, Values};
use super::pivots::Pivots;
use super::read::plain_value;
use super::read::{probes_instead, read_keeping, Frozen, Miss, Step, View};
use super::segment;
use super::slice::{self, segment_at, Slices};
use super::value::{read_values, ValueRef};
use super::value::{Form, TAG_INLINE};
use super::Child;
use crate::error::Result;
use crate::index::resolved;
use crate::index::{in_range, Index, Lent};
use std::ops::{Bound, Range};
use std::sync::{Arc, Weak};

/// Entries a step resolved, their values possibly still in extents.
type Resolved = resolved::Resolved<ValueRef>;
type Value = resolved::Value<ValueRef>;

/// Value extents a cursor reads through one queue: a 100-entry scan over
/// values in extents waits about four times, not once per value, and reads
/// no value past where it stops.
const VALUE_READS: usize = 32;

pub struct Cursor {
    tree: Arc<str>,
    /// What is left to return: shrinks from either end as entries are returned.
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    /// Where the next unit is fetched from, per direction (None: the end).
    fnext: Option<Bound<Vec<u8>>>,
    bnext: Option<Bound<Vec<u8>>>,
    /// Entries resolved and not returned, per direction (a cursor over a
    /// pinned snapshot reads value extents as entries are returned,
    /// [`VALUE_READS`] per queue).
    front: Resolved,
    back: Resolved,
    /// Entries a forward step resolves at most from one basement: starts
    /// at [`FIRST_UNIT`] and doubles after each step the limit cut short,
    /// so a short scan does not resolve the rest of the basement it starts
    /// in, and the entries resolved stay within about twice those taken (a
    /// step that ends with its basement leaves it: doubling there too had a
    /// 100-row scan resolve 350 entries, each a key and a value copied).
    limit: usize,
    /// Basements read ahead with a forward step's missed basement: 0 until
    /// a forward step ends its basement, then 1, doubling per basement
    /// ended up to `Options::read_ahead` ([`read_ahead`]).
    ahead: usize,
    /// Buffer segments read for this cursor's steps (`slice.rs`).
    slices: Slices,
    /// The last forward step's merge, when its limit cut it short.
    held: Option<Box<Held>>,
    /// The value of the entry returned last when it is not in a queue's
    /// arena (read from a value extent).
    value: Vec<u8>,
    /// Per direction (backward, forward), the key returned last, where its
    /// queue's arena holds it, not yet written into `hi` or `lo`
    /// ([`Cursor::settle`]): a step that returns an entry copies no key.
    last: [Option<Range<usize>>; 2],
    /// Per direction (backward, forward), whether it returned an entry: until both did, every
    /// entry a queue holds lies inside both bounds (resolved inside them,
    /// and only its own direction has moved its bound since, past keys
    /// behind it), so no entry taken is checked.
    returned: [bool; 2],
}

/// A forward step's merge, left where its limit cut it short: its inputs
/// and the place in each. The next forward step goes on from it, neither
/// descending nor searching, while every input is still alive unchanged
/// and no page id was reused since (`tag`: the values it has not resolved
/// may lie in extents). The inputs are held weakly: a writer changes a
/// part it alone holds in place (`Arc::make_mut`), which ends the weak
/// references instead of copying the part for a cursor, and the cache may
/// evict a clean part; either way the next step descends again. Its
/// entries are the basement's as its step found it, as a step's resolved
/// entries are: the cursor is not a snapshot.
struct Held {
    base: Weak<Part>,
    /// The path's buffer partitions, oldest (deepest) first.
    bufs: Vec<Weak<Part>>,
    place: merge::Place,
    /// Where the cursor goes once the merge ends: the unit's end.
    next: Option<Bound<Vec<u8>>>,
    /// [`reuse_tag`] when it was made.
    tag: u64,
}

/// Entries the first forward step resolves at most (then 2x after each
/// step the limit cut short).
const FIRST_UNIT: usize = 16;

/// Where the cursor goes next in its direction after one basement's
/// entries (or the first `limit` of them, moving forward); None: the end.
struct Unit {
    next: Option<Bound<Vec<u8>>>,
    /// The step stopped at its limit, not at its basement's end.
    cut: bool,
    /// What the cursor holds for the next step.
    keep: Keep,
    /// The step went on from the merge the step before held.
    resumed: bool,
}

/// What a cursor holds after a step for the next one in its direction.
enum Keep {
    /// Nothing: the step ended its basement, or moved backward.
    Nothing,
    /// A step's merge from a descent, cut short.
    New(Box<Held>),
    /// The held merge, gone on to here and cut short again.
    Moved(merge::Place),
}

/// What one step resolves: the position, the direction, the cursor's
/// bounds, whether value extents are left to the cursor, and how many
/// entries at most (forward).
struct Want<'a> {
    pos: &'a Bound<Vec<u8>>,
    forward: bool,
    bounds: (&'a Bound<Vec<u8>>, &'a Bound<Vec<u8>>),
    lazy: bool,
    limit: usize,
    /// Basements after the one a forward step misses to read with it
    /// (`Cursor::ahead`; 0: only when the position lies in the later half
    /// of its basement, one).
    ahead: usize,
}

impl Cursor {
    pub fn new(tree: Arc<str>, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) -> Self {
        Self {
            tree,
            fnext: Some(lo.clone()),
            bnext: Some(hi.clone()),
            lo,
            hi,
            front: Resolved::default(),
            back: Resolved::default(),
            limit: FIRST_UNIT,
            ahead: 0,
            slices: Slices::default(),
            held: None,
            value: Vec::new(),
            last: [None, None],
            returned: [false; 2],
        }
    }

    /// The next entry in the direction of travel, borrowed from the cursor
    /// until its next step.
    pub fn step(&mut self, ix: &Index, at: Option<&Frozen>, forward: bool) -> Lent<'_> {
        for _ in 0..u32::MAX {
            if let Some((k, v)) = self.queue_mut(forward).pop(forward) {
                if self.returned == [true; 2] && !self.inside(&k, forward) {
                    // The other end already returned it: everything is consumed.
                    (self.fnext, self.bnext) = (None, None);
                    (self.front, self.back) = (Resolved::default(), Resolved::default());
                    self.last = [None, None];
                    self.held = None;
                    return None;
                }
                let in_arena = match v {
                    Value::At(r) => Some(r),
                    Value::Owned(v) => {
                        self.value = v;
                        None
                    }
                    Value::Out(e) => match self.read_values(ix, e, forward) {
                        Ok(first) => {
                            self.value = first;
                            None
                        }
                        Err(e) => return Some(Err(e)),
                    },
                };
                self.returned[usize::from(forward)] = true;
                self.last[usize::from(forward)] = Some(k.clone());
                let queue = if forward { &self.front } else { &self.back };
                let key = queue.bytes(k);
                let value = match in_arena {
                    Some(r) => queue.bytes(r),
                    None => &self.value[..],
                };
                return Some(Ok((key, value)));
            }
            self.settle();
            let pos = if forward {
                self.fnext.clone()?
            } else {
                self.bnext.clone()?
            };
            if past(&pos, forward, (&self.lo, &self.hi)) {
                return None;
            }
            if let Err(e) = self.next_unit(ix, at, forward, &pos) {
                return Some(Err(e));
            }
        }
        None
    }

    /// Writes the keys returned last into the bounds they shrink (before
    /// the bounds are read: a descent, a check of an entry taken, `past`).
    /// Requires: each is still in its queue's arena (an arena is emptied
    /// only by a step in its direction, which settles first).
    fn settle(&mut self) {
        if let Some(r) = self.last[1].take() {
            set_excluded(&mut self.lo, self.front.bytes(r));
        }
        if let Some(r) = self.last[0].take() {
            set_excluded(&mut self.hi, self.back.bytes(r));
        }
    }

    /// The queue of entries resolved for direction `forward`.
    fn queue_mut(&mut self, forward: bool) -> &mut Resolved {
        if forward {
            &mut self.front
        } else {
            &mut self.back
        }
    }

    /// Whether the key at `k` of the queue in direction `forward` lies
    /// inside both bounds (once both ends returned entries, the other may
    /// have returned it already).
    fn inside(&mut self, k: &Range<usize>, forward: bool) -> bool {
        self.settle();
        let queue = if forward { &self.front } else { &self.back };
        in_range(queue.bytes(k.clone()), &self.lo, &self.hi)
    }

    /// Resolves the next unit from `pos` in the direction of travel into
    /// that direction's queue: going on with the held merge if it still
    /// stands, else descending.
    fn next_unit(
        &mut self,
        ix: &Index,
        at: Option<&Frozen>,
        forward: bool,
        pos: &Bound<Vec<u8>>,
    ) -> Result<()> {
        // Value extents are read as entries are returned only where
        // nothing can reuse them meanwhile (a pinned snapshot).
        let want = Want {
            pos,
            forward,
            bounds: (&self.lo, &self.hi),
            lazy: at.is_some_and(|fz| fz.pinned()),
            limit: if forward { self.limit } else { usize::MAX },
            ahead: self.ahead,
        };
        // The drained queue's arena holds the next unit's entries.
        let queue = if forward {
            &mut self.front
        } else {
            &mut self.back
        };
        let mut out = std::mem::take(queue);
        let held = if forward { self.held.take() } else { None };
        let kept = &mut self.slices;
        let unit = read_keeping(ix, at, kept, |v| {
            match held
                .as_ref()
                .and_then(|h| Some((h, h.inputs(reuse_tag(v, &want))?)))
            {
                Some((h, inputs)) => resume_step(v, &self.tree, h, inputs, &want, &mut out),
                None => unit_step(v, &self.tree, &want, &mut out),
            }
        })??;
        let counters = &ix.counters.bepsilon_reads;
        counters.scan_steps.add(1);
        if unit.resumed {
            counters.scan_resumes.add(1);
        }
        if !forward {
            self.bnext = unit.next;
            self.back = out;
            return Ok(());
        }
        if unit.cut {
            self.limit = self.limit.saturating_mul(2);
        } else if unit.next.is_some() {
            self.ahead = (self.ahead * 2).clamp(1, ix.read_ahead_pages.max(1));
        }
        self.fnext = unit.next;
        self.held = match unit.keep {
            Keep::Nothing => None,
            Keep::New(h) => Some(h),
            Keep::Moved(place) => held.map(|mut h| {
                h.place = place;
                h
            }),
        };
        self.front = out;
        Ok(())
    }

    /// The value in extent `first` (of the entry just taken in the
    /// direction of travel), reading it with the next entries' value
    /// extents in that direction through one queue, up to [`VALUE_READS`].
    fn read_values(&mut self, ix: &Index, first: ValueRef, forward: bool) -> Result<Vec<u8>> {
        let queue = self.queue_mut(forward);
        let next = queue.out_next(forward, VALUE_READS - 1);
        let mut exts = vec![first];
        exts.extend(next.iter().map(|&(_, e)| e));
        let mut read = read_values(&ix.store.pager, &exts)?.into_iter();
        let value = read.next().expect("the first extent")?;
        for ((i, _), r) in next.into_iter().zip(read) {
            // A failed read stays pending: it fails again, with its entry.
            if let Ok(v) = r {
                queue.set(i, Value::Owned(v));
            }
        }
        Ok(value)
    }
}

/// Sets `b` to exclude `k`, reusing its key's allocation (a step per entry).
fn set_excluded(b: &mut Bound<Vec<u8>>, k: &[u8]) {
    if let Bound::Excluded(old) = b {
        old.clear();
        old.extend_from_slice(k);
    } else {
        *b = Bound::Excluded(k.to_vec());
    }
}

/// Whether no key is left at or past `pos` in the direction of travel
/// within the cursor's `bounds`: a step there would resolve nothing and
/// go on to the next basement, to the tree's end.
fn past(pos: &Bound<Vec<u8>>, forward: bool, bounds: (&Bound<Vec<u8>>, &Bound<Vec<u8>>)) -> bool {
    let end = if forward { bounds.1 } else { bounds.0 };
    let (Some(k), Some(e)) = (key_of(&as_ref(pos)), key_of(&as_ref(end))) else {
        return false;
    };
    let beyond = if forward { k.cmp(e) } else { e.cmp(k) };
    match beyond {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Equal => {
            !matches!((pos, end), (Bound::Included(_), Bound::Included(_)))
        }
        std::cmp::Ordering::Less => false,
    }
}

impl Held {
    /// `path`: the partitions above the basement, root first (as a
    /// descent finds them; only buffers are merged).
    fn new(
        base: &Arc<Part>,
        path: &[Arc<Part>],
        place: merge::Place,
        next: Option<Bound<Vec<u8>>>,
        tag: u64,
    ) -> Self {
        Held {
            base: Arc::downgrade(base),
            bufs: oldest_buffers(path).map(Arc::downgrade).collect(),
            place,
            next,
            tag,
        }
    }

    /// Its inputs (basement, buffers oldest first), if each is alive and
    /// `tag` is still the reuse tag; else None: descend again.
    fn inputs(&self, tag: u64) -> Option<(Arc<Part>, Vec<Arc<Part>>)> {
        if tag != self.tag {
            return None;
        }
        let base = self.base.upgrade()?;
        let bufs = self
            .bufs
            .iter()
            .map(Weak::upgrade)
            .collect::<Option<Vec<_>>>()?;
        Some((base, bufs))
    }
}

/// The tag a held merge is valid under: the store's reuse generation, or
/// `u64::MAX` under a pinned snapshot (no page id it reads is reused while
/// it lives). Read under the state lock or the snapshot's pin (`View`).
fn reuse_tag(v: &View, want: &Want) -> u64 {
    if want.lazy {
        u64::MAX
    } else {
        v.ix.store
            .reuse_gen
            .load(std::sync::atomic::Ordering::Acquire)
    }
}

/// The partition of `pivots` a cursor at `pos` moving `forward` reads next.
fn pick(pivots: &Pivots, pos: &Bound<Vec<u8>>, forward: bool) -> usize {
    match (pos, forward) {
        (Bound::Unbounded, true) => 0,
        (Bound::Unbounded, false) => pivots.len(),
        (Bound::Included(k), _) | (Bound::Excluded(k), true) => pivots.find(k),
        (Bound::Excluded(k), false) => pivots.below(k),
    }
}

/// Fills `out` with the entries of the basement at `want.pos` (see
/// [`resolve_unit`]) and says where the cursor goes next. What the path
/// misses is asked for at once: past a buffer it misses (whose key range
/// its node's shell already tells) the descent goes on to the child, so
/// the buffers, the leaf's shell and the basement of one step are read
/// through one queue (`Miss::Batch`), not one round trip each.
fn unit_step(v: &View, tree: &str, want: &Want, out: &mut Resolved) -> Step<Result<Unit>> {
    out.clear();
    let empty = Unit {
        next: None,
        cut: false,
        keep: Keep::Nothing,
        resumed: false,
    };
    let Some(mut cur) = v.meta(tree).and_then(|m| m.root) else {
        return Step::Done(Ok(empty));
    };
    let mut unit: (Option<Vec<u8>>, Option<Vec<u8>>) = (None, None);
    let (mut bufs, mut misses) = (Vec::new(), Vec::new());
    for _ in 0..=super::MAX_HEIGHT {
        let n = match v.node(cur) {
            Ok(n) => n,
            Err(m) => return Step::Miss(Miss::batch(misses, m)),
        };
        let i = pick(&n.pivots, want.pos, want.forward);
        let lo = i.checked_sub(1).map(|p| &n.pivots[p]);
        narrow(&mut unit, lo, n.pivots.get(i));
        let part = match scan_part(v, cur, &n, i, want, &mut unit) {
            Ok(p) => p,
            Err(m) if n.is_leaf() => {
                read_ahead(v, (cur, &n, i), want, &mut misses);
                return Step::Miss(Miss::batch(misses, m));
            }
            Err(m) => {
                misses.push(m);
                cur = n.children[i];
                continue;
            }
        };
        if !n.is_leaf() {
            bufs.push(part);
            cur = n.children[i];
            continue;
        }
        if let Some(m) = misses.pop() {
            return Step::Miss(Miss::batch(misses, m));
        }
        let (ulo, uhi) = unit;
        let r = resolve_unit(
            v,
            tree,
            &part,
            &bufs,
            (ulo.as_deref(), uhi.as_deref()),
            want,
            out,
        );
        return Step::Done(r.map(|place| {
            let cut = place.is_some();
            let (next, keep) = match (want.forward, place) {
                (true, Some(place)) => {
                    let last = Bound::Excluded(out.last_key().expect("cut").to_vec());
                    let unit_end = uhi.map(Bound::Included);
                    let held = Held::new(&part, &bufs, place, unit_end, reuse_tag(v, want));
                    (Some(last), Keep::New(Box::new(held)))
                }
                (true, None) => (uhi.map(Bound::Included), Keep::Nothing),
                (false, _) => (ulo.map(Bound::Excluded), Keep::Nothing),
            };
            Unit {
                next,
                cut,
                keep,
                resumed: false,
            }
        }));
    }
    Step::Done(Ok(empty))
}

/// Adds to `misses` the basements after basement `i` of leaf `n` (behind
/// `c`) that a forward step missing basement `i` reads with it, through the
/// same queue: `want.ahead` of them, or one when the cursor has not ended a
/// basement yet and its position lies in the later half of basement `i`'s
/// key range (a scan that goes on needs it next); only basements not in
/// memory whose keys can lie inside the cursor's bounds, within the leaf
/// and 1/16 of the cache's bytes, and none when `Options::read_ahead` is 0.
fn read_ahead(
    v: &View,
    (c, n, i): (Child, &Arc<Node>, usize),
    want: &Want,
    misses: &mut Vec<Miss>,
) {
    let Child::Clean(ext) = c else {
        return; // a dirty leaf holds every basement
    };
    if !want.forward || v.ix.read_ahead_pages == 0 {
        return;
    }
    let count = match want.ahead {
        0 => usize::from(later_half(n, i, want.pos)),
        a => a.min(super::miss::MAX_AHEAD_BASEMENTS),
    };
    // As the B+tree's read-ahead: a round cannot evict much of the cache.
    let mut room_bytes = v.ix.store.cache.capacity() / 16;
    for j in i + 1..(i + 1 + count).min(n.parts.len()) {
        let first = &n.pivots[j - 1]; // basement j's lowest key
        let inside = match want.bounds.1 {
            Bound::Included(h) => first <= h.as_slice(),
            Bound::Excluded(h) => first < h.as_slice(),
            Bound::Unbounded => true,
        };
        if !inside {
            break;
        }
        if n.parts[j].is_none() && n.dir.get(j).is_some_and(|d| d.comp_bytes > 0) {
            let charge = n.part_bytes[j] + 12 * n.dir[j].entries as usize;
            if charge > room_bytes {
                break;
            }
            room_bytes -= charge;
            misses.push(Miss::Part(ext, j, n.clone()));
        }
    }
}

/// Whether `pos` lies in the later half of basement `i` of leaf `n`: by
/// the basement's segments when it is stored as several (their first keys
/// are in the shell; the segment holding `pos` ends past the middle), else
/// by its key range (a leaf's first basement is taken to start at the
/// empty key; its last has no next basement).
fn later_half(n: &Node, i: usize, pos: &Bound<Vec<u8>>) -> bool {
    let segs = segment::of(n.segs.as_deref(), i);
    if segs.len() >= 2 {
        return 2 * (segment_at(&segs, pos, true) + 1) > segs.len();
    }
    let (Some(p), Some(hi)) = (key_of(&as_ref(pos)), n.pivots.get(i)) else {
        return false;
    };
    let lo = i.checked_sub(1).map_or(&[][..], |j| &n.pivots[j]);
    past_middle(lo, hi, p)
}

/// Whether `p` lies at or past the middle of `[lo, hi)`, by the first eight
/// bytes where `lo` and `hi` differ, read as a big-endian number (shorter
/// keys padded with zeros): exact for fixed-width integer keys, and about
/// right for keys whose bytes spread evenly.
fn past_middle(lo: &[u8], hi: &[u8], p: &[u8]) -> bool {
    let common = lo.iter().zip(hi).take_while(|(a, b)| a == b).count();
    let word = |k: &[u8]| {
        let mut b = [0u8; 8];
        let tail = k.get(common..).unwrap_or(&[]);
        let m = tail.len().min(8);
        b[..m].copy_from_slice(&tail[..m]);
        u128::from(u64::from_be_bytes(b))
    };
    let (l, h, x) = (word(lo), word(hi), word(p));
    h > l && x >= l && 2 * (x - l) >= h - l
}

/// Narrows the unit `[lo, hi)` (None: unbounded) to `[lo2, hi2)` as well.
fn narrow(unit: &mut (Option<Vec<u8>>, Option<Vec<u8>>), lo2: Option<&[u8]>, hi2: Option<&[u8]>) {
    // Each bound's key is copied into the allocation it already has.
    let set = |slot: &mut Option<Vec<u8>>, k: &[u8]| match slot {
        Some(v) => {
            v.clear();
            v.extend_from_slice(k);
        }
        None => *slot = Some(k.to_vec()),
    };
    if let Some(l) = lo2 {
        if unit.0.as_deref().is_none_or(|u| u < l) {
            set(&mut unit.0, l);
        }
    }
    if let Some(h) = hi2 {
        if unit.1.as_deref().is_none_or(|u| u > h) {
            set(&mut unit.1, h);
        }
    }
}

/// Partition `i` of `n` (reached through `c`) for a step at `want.pos`, or
/// what to read: a buffer the cache has no room for, stored as segments,
/// is read one segment at a time (`slice.rs`), and the unit shrinks to the
/// segment's key range (known from the shell, read or not).
fn scan_part(
    v: &View,
    c: Child,
    n: &Arc<Node>,
    i: usize,
    want: &Want,
    unit: &mut (Option<Vec<u8>>, Option<Vec<u8>>),
) -> std::result::Result<Arc<Part>, Miss> {
    let (ext, n) = match v.part(c, n, i) {
        Err(Miss::Part(ext, _, n)) if !n.is_leaf() => (ext, n),
        got => return got,
    };
    let segs = segment::of(n.segs.as_deref(), i);
    if segs.len() < 2 || !probes_instead(v, &ext, &n, i) {
        return Err(Miss::Part(ext, i, n));
    }
    let seg = segment_at(&segs, want.pos, want.forward);
    let (lo, hi) = slice::covered(&n, i, seg);
    narrow(unit, lo, hi);
    match v.slice(ext.first_page, i, seg) {
        Some(s) => Ok(s.buf.clone()),
        None => Err(Miss::Slice(ext, i, n, seg)),
    }
}

/// The key of a bound (None: unbounded).
fn key_of<'a>(b: &Bound<&'a [u8]>) -> Option<&'a [u8]> {
    match b {
        Bound::Included(k) | Bound::Excluded(k) => Some(k),
        Bound::Unbounded => None,
    }
}

/// The tighter of two lower bounds (`hi`: of two upper bounds).
fn tighter<'a>(a: Bound<&'a [u8]>, b: Bound<&'a [u8]>, hi: bool) -> Bound<&'a [u8]> {
    let (Some(x), Some(y)) = (key_of(&a), key_of(&b)) else {
        return if key_of(&a).is_some() { a } else { b };
    };
    let a_wins = if hi { x < y } else { x > y };
    if a_wins || (x == y && matches!(a, Bound::Excluded(_))) {
        a
    } else {
        b
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    b.as_ref().map(Vec::as_slice)
}

/// Appends to `out` the entries of basement `base` within the unit's range `[lo, hi)` and
/// the cursor's bounds, with the buffered messages (root first in `bufs`)
/// applied: a merge of the basement's entries and each buffer's changes in
/// that range, all in key order, so nothing is sorted or looked up. Moving
/// forward it stops after `want.limit` entries and returns the merge to go
/// on from (then cut short; None: the unit is done).
/// Contract: the entries are in key order, inside both ranges, and each is
/// what a point read of its key returns at this view.
fn resolve_unit(
    v: &View,
    tree: &str,
    base: &Arc<Part>,
    bufs: &[Arc<Part>],
    unit: (Option<&[u8]>, Option<&[u8]>),
    want: &Want,
    out: &mut Resolved,
) -> Result<Option<merge::Place>> {
    let Part::Packed(packed) = &**base else {
        unreachable!("a leaf partition")
    };
    let unit_lo = unit.0.map_or(Bound::Unbounded, Bound::Included);
    let unit_hi = unit.1.map_or(Bound::Unbounded, Bound::Excluded);
    let lo = tighter(unit_lo, as_ref(want.bounds.0), false);
    let hi = tighter(unit_hi, as_ref(want.bounds.1), true);
    // A buffer's range is `[lo, hi)`: the cursor's excluded lower key and
    // included upper key are filtered below.
    let buf_hi = match hi {
        Bound::Excluded(k) => Some(k),
        _ => unit.1,
    };
    let streams = oldest_buffers(bufs).map(|p| p.buffer().range_changes(key_of(&lo), buf_hi));
    // Buffers start at `lo`'s key: an excluded one is skipped, so every key
    // merged lies above `lo` (the basement's range excludes it).
    let skip = match lo {
        Bound::Excluded(l) => Some(l),
        _ => None,
    };
    let mut merge = Merge::new(packed, packed.indices(lo, hi), streams, skip);
    let cut = run_merge(v, tree, &mut merge, packed, want, out)?;
    Ok(cut.then(|| merge.place()))
}

/// The buffer partitions of `path` (root first), the oldest (deepest)
/// first: a merge's streams, in its order.
fn oldest_buffers(path: &[Arc<Part>]) -> impl Iterator<Item = &Arc<Part>> {
    path.iter().rev().filter(|p| matches!(&***p, Part::Buf(_)))
}

/// The next forward step from `held`: its merge goes on where the last
/// step's limit cut it, with no descent and no search (`Held`).
fn resume_step(
    v: &View,
    tree: &str,
    held: &Held,
    (base, parts): (Arc<Part>, Vec<Arc<Part>>),
    want: &Want,
    out: &mut Resolved,
) -> Step<Result<Unit>> {
    assert!(want.forward, "only forward steps hold their merge");
    out.clear();
    let Part::Packed(packed) = &*base else {
        unreachable!("a leaf partition")
    };
    let mut merge = Merge::resume(packed, parts.iter().map(|p| p.buffer()), &held.place);
    let r = run_merge(v, tree, &mut merge, packed, want, out).map(|cut| {
        let (next, keep) = match cut {
            true => {
                let last = Bound::Excluded(out.last_key().expect("cut").to_vec());
                (Some(last), Keep::Moved(merge.place()))
            }
            false => (held.next.clone(), Keep::Nothing),
        };
        Unit {
            next,
            cut,
            keep,
            resumed: true,
        }
    });
    Step::Done(r)
}

/// Appends to `out` what `merge` returns within the cursor's upper bound,
/// the values turned into the user's, and stops after `want.limit`
/// entries (then `true`: cut short) or at the merge's end. `packed`: the
/// basement merged (its mean entry bytes size the arena).
fn run_merge(
    v: &View,
    tree: &str,
    merge: &mut Merge,
    packed: &Packed,
    want: &Want,
    out: &mut Resolved,
) -> Result<bool> {
    let form = v.form(tree);
    let mut plain = |b: &[u8]| plain_value(v.ix, form, tree, b);
    let mut values = Values {
        form,
        plain: &mut plain,
    };
    let mut resolver = |k: &[u8], old: Option<Vec<u8>>, p: &Pending| {
        resolve(v.ix_merge(), tree, k, old, p, &mut values)
    };
    // Room for what the step may resolve: at most its limit, and about the
    // basement's entries (buffered messages add to them).
    let mean_bytes = packed.bytes() / packed.len().max(1);
    out.reserve(want.limit.min(packed.len() + 16), mean_bytes);
    let hi = as_ref(want.bounds.1);
    let mut cut = false;
    // Entries whose stored value is not an inline one (`plain_values`).
    let mut rest: Vec<usize> = Vec::new();
    for _ in 0..u32::MAX {
        // The basement's entries before the next buffered change: copied
        // as one run, neither merged nor bound-checked one by one.
        let run = merge.base_run(want.limit - out.len());
        if !run.is_empty() {
            let end = below(packed, run.clone(), hi);
            push_run(out, packed, run.start..end, form, &mut rest);
            if end < run.end {
                break;
            }
            if out.len() >= want.limit {
                cut = true;
                break;
            }
        }
        let Some(next) = merge.next(&mut resolver) else {
            break;
        };
        let (k, val) = next?;
        // Keys ascend: past the cursor's upper bound (the merge's inputs
        // end at the unit's end, or at an excluded upper key), nothing
        // more is in range.
        if match hi {
            Bound::Included(h) => k > h,
            Bound::Excluded(h) => k >= h,
            Bound::Unbounded => false,
        } {
            break;
        }
        let Some(val) = val else { continue };
        debug_assert!(in_range(k, want.bounds.0, want.bounds.1));
        let value: &[u8] = match (form, val.split_first()) {
            (Form::Plain, _) => &val,
            (_, Some((&TAG_INLINE, plain))) => plain,
            _ => {
                rest.push(out.len());
                &val
            }
        };
        out.push(k, value);
        if out.len() >= want.limit {
            cut = true;
            break;
        }
    }
    if !rest.is_empty() {
        plain_values(v, form, tree, out, &rest, want.lazy)?;
    }
    Ok(cut)
}

/// Where entries `run` of `packed` pass the cursor's upper bound `hi`
/// (`run.end` if none does).
fn below(packed: &Packed, run: Range<usize>, hi: Bound<&[u8]>) -> usize {
    match hi {
        Bound::Included(h) => packed.count_in(run, h, true),
        Bound::Excluded(h) => packed.count_in(run, h, false),
        Bound::Unbounded => run.end,
    }
}

/// Appends entries `run` of `packed` to `out` in one copy, each value the
/// user's where it is stored inline; the index in `out` of each other
/// value goes to `rest` (`plain_values`), as `run_merge` does per entry.
fn push_run(
    out: &mut Resolved,
    packed: &Packed,
    run: Range<usize>,
    form: Form,
    rest: &mut Vec<usize>,
) {
    if run.is_empty() {
        return;
    }
    let first = out.len();
    let (bytes, spans) = packed.spans(run);
    let spans = spans.enumerate().map(|(i, (k, v))| {
        let inline = !v.is_empty() && bytes[v.start] == TAG_INLINE;
        match form {
            Form::Plain => (k, v),
            _ if inline => (k, v.start + 1..v.end),
            _ => {
                rest.push(first + i);
                (k, v)
            }
        }
    });
    out.push_spans(bytes, spans);
}

/// The entries at `rest` (ascending; each holds a stored value that is not
/// an inline one) with their values turned into the user's: the value
/// extents among them named for the cursor to read (`lazy`), or read here
/// through one queue (`Pager::read_extents`). The state lock or a pinned
/// snapshot holds the extents, else `read_at` discards the result when
/// `reuse_gen` moved. Any other stored value is reported as corrupt.
fn plain_values(
    v: &View,
    form: Form,
    tree: &str,
    entries: &mut Resolved,
    rest: &[usize],
    lazy: bool,
) -> Result<()> {
    let pager = &v.ix.store.pager;
    let at: Vec<(usize, ValueRef)> = rest
        .iter()
        .filter_map(|&i| Some((i, form.value_ref(entries.pushed(i), pager.ps)?)))
        .collect();
    if lazy {
        for &(i, e) in &at {
            entries.set(i, Value::Out(e));
        }
    }
    let exts: Vec<ValueRef> = if lazy {
        Vec::new()
    } else {
        at.iter().map(|a| a.1).collect()
    };
    let mut read = read_values(pager, &exts)?.into_iter();
    for &i in rest {
        if matches!(entries.value(i), Value::Out(_)) {
            continue;
        }
        let mut got = |_: &ValueRef| read.next().expect("one read per extent");
        let plain = form.plain(entries.pushed(i), pager, tree, &mut got)?;
        entries.set(i, Value::Owned(plain));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::past_middle;

    /// The middle by hand: after the common "k", [k\x10, k\x30) has its
    /// middle at k\x20; decimal digits are bytes too ("key1.." to "key3..":
    /// the middle is "key2..").
    #[test]
    fn past_middle_splits_a_range_by_its_differing_bytes() {
        assert!(!past_middle(b"k\x10", b"k\x30", b"k\x10"));
        assert!(!past_middle(b"k\x10", b"k\x30", b"k\x1f\xff"));
        assert!(past_middle(b"k\x10", b"k\x30", b"k\x20"));
        assert!(past_middle(b"k\x10", b"k\x30", b"k\x2f\x01"));
        let n = |i: u32| format!("key{i:03}").into_bytes();
        assert!(!past_middle(&n(100), &n(300), &n(199)));
        assert!(past_middle(&n(100), &n(300), &n(200)));
        let be = |x: u64| x.to_be_bytes().to_vec();
        assert!(!past_middle(&be(1000), &be(3000), &be(1999)));
        assert!(past_middle(&be(1000), &be(3000), &be(2000)));
        // From the empty key (a leaf's first basement): the middle of
        // [0, 0x80..) is 0x40...
        assert!(!past_middle(&[], &[0x80], &[0x3f, 0xff]));
        assert!(past_middle(&[], &[0x80], &[0x40]));
        // An empty or inverted range has no later half.
        assert!(!past_middle(&n(5), &n(5), &n(5)));
        assert!(!past_middle(&n(6), &n(5), &n(7)));
    }
}
