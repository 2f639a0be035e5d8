//! Ordered iteration both ways, one basement at a time: each step reads the
//! basement holding the cursor position plus the ancestors' buffered
//! messages for its key range, resolves them, and keeps the result. No lock
//! is held between steps (not a snapshot, like B+tree iterators).

use super::node::Part;
use super::pending::{resolve, Values};
use super::pivots::Pivots;
use super::read::plain_value;
use super::read::{read_at, Frozen, Step, View};
use super::value::Form;
use crate::error::Result;
use crate::index::{in_range, Index};
use crate::store::extent::Extent;
use crate::store::page::Kind;
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

type Kv = (Vec<u8>, Vec<u8>);
/// A resolved entry: key, value, and the extent its value is still to be
/// read from (the value then empty): a cursor over a pinned snapshot reads
/// value extents as entries are returned, [`VALUE_READS`] per queue.
type Entry = (Vec<u8>, Vec<u8>, Option<Extent>);

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
    front: VecDeque<Entry>,
    back: VecDeque<Entry>,
}

/// One basement's resolved entries and the key range it covers.
struct Unit {
    entries: Vec<Entry>,
    lo: Option<Vec<u8>>,
    hi: Option<Vec<u8>>,
}

impl Cursor {
    pub fn new(tree: Arc<str>, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) -> Self {
        Self {
            tree,
            fnext: Some(lo.clone()),
            bnext: Some(hi.clone()),
            lo,
            hi,
            front: VecDeque::new(),
            back: VecDeque::new(),
        }
    }

    pub fn step(&mut self, ix: &Index, at: Option<&Frozen>, forward: bool) -> Option<Result<Kv>> {
        for _ in 0..u32::MAX {
            let got = if forward {
                self.front.pop_front()
            } else {
                self.back.pop_back()
            };
            if let Some((k, mut v, ext)) = got {
                if !in_range(&k, &self.lo, &self.hi) {
                    // The other end already returned it: everything is consumed.
                    (self.fnext, self.bnext) = (None, None);
                    (self.front, self.back) = (VecDeque::new(), VecDeque::new());
                    return None;
                }
                if let Some(e) = ext {
                    match self.read_values(ix, e, forward) {
                        Ok(first) => v = first,
                        Err(e) => return Some(Err(e)),
                    }
                }
                if forward {
                    self.lo = Bound::Excluded(k.clone());
                } else {
                    self.hi = Bound::Excluded(k.clone());
                }
                return Some(Ok((k, v)));
            }
            let pos = if forward {
                self.fnext.clone()?
            } else {
                self.bnext.clone()?
            };
            // Value extents are read as entries are returned only where
            // nothing can reuse them meanwhile (a pinned snapshot).
            let lazy = at.is_some_and(|fz| fz.pinned());
            let unit = match read_at(ix, at, |v| {
                unit_step(v, &self.tree, &pos, forward, (&self.lo, &self.hi), lazy)
            }) {
                Ok(Ok(u)) => u,
                Ok(Err(e)) | Err(e) => return Some(Err(e)),
            };
            if forward {
                self.fnext = unit.hi.map(Bound::Included);
                self.front = unit.entries.into();
            } else {
                self.bnext = unit.lo.map(Bound::Excluded);
                self.back = unit.entries.into();
            }
        }
        None
    }

    /// The value in extent `first` (of the entry just taken in the
    /// direction of travel), reading it with the next entries' value
    /// extents in that direction through one queue, up to [`VALUE_READS`].
    fn read_values(&mut self, ix: &Index, first: Extent, forward: bool) -> Result<Vec<u8>> {
        let queue = if forward {
            &mut self.front
        } else {
            &mut self.back
        };
        let n = queue.len();
        let next: Vec<usize> = (0..n)
            .map(|i| if forward { i } else { n - 1 - i })
            .filter(|&i| queue[i].2.is_some())
            .take(VALUE_READS - 1)
            .collect();
        let mut exts = vec![first];
        exts.extend(next.iter().map(|&i| queue[i].2.expect("filtered")));
        let mut read = ix
            .store
            .pager
            .read_extents(&exts, Kind::Overflow)?
            .into_iter();
        let value = read.next().expect("the first extent")?;
        for (i, r) in next.into_iter().zip(read) {
            // A failed read stays pending: it fails again, with its entry.
            if let Ok(v) = r {
                queue[i].1 = v;
                queue[i].2 = None;
            }
        }
        Ok(value)
    }
}

/// The partition of `pivots` a cursor at `pos` moving `forward` reads next.
fn pick(pivots: &Pivots, pos: &Bound<Vec<u8>>, forward: bool) -> usize {
    match (pos, forward) {
        (Bound::Unbounded, true) => 0,
        (Bound::Unbounded, false) => pivots.len(),
        (Bound::Included(k), _) | (Bound::Excluded(k), true) => pivots.find(k),
        (Bound::Excluded(k), false) => pivots.partition_point(|p| p < k.as_slice()),
    }
}

fn unit_step(
    v: &View,
    tree: &str,
    pos: &Bound<Vec<u8>>,
    forward: bool,
    (lo, hi): (&Bound<Vec<u8>>, &Bound<Vec<u8>>),
    lazy: bool,
) -> Step<Result<Unit>> {
    let empty = Unit {
        entries: Vec::new(),
        lo: None,
        hi: None,
    };
    let Some(mut cur) = v.meta(tree).and_then(|m| m.root) else {
        return Step::Done(Ok(empty));
    };
    let (mut ulo, mut uhi): (Option<Vec<u8>>, Option<Vec<u8>>) = (None, None);
    let mut bufs = Vec::new();
    for _ in 0..=super::MAX_HEIGHT {
        let n = match v.node(cur) {
            Ok(n) => n,
            Err(m) => return Step::Miss(m),
        };
        let i = pick(&n.pivots, pos, forward);
        if i > 0 && ulo.as_deref().is_none_or(|l| l < &n.pivots[i - 1]) {
            ulo = Some(n.pivots[i - 1].to_vec());
        }
        if let Some(p) = n.pivots.get(i) {
            if uhi.as_deref().is_none_or(|h| h > p) {
                uhi = Some(p.to_vec());
            }
        }
        let part = match v.part(cur, &n, i) {
            Ok(p) => p,
            Err(m) => return Step::Miss(m),
        };
        if !matches!(&*part, Part::Buf(_)) {
            let r = resolve_unit(v, tree, &part, &bufs, (&ulo, &uhi), (lo, hi), lazy);
            return Step::Done(r.map(|entries| Unit {
                entries,
                lo: ulo,
                hi: uhi,
            }));
        }
        bufs.push(part);
        cur = n.children[i];
    }
    Step::Done(Ok(empty))
}

/// The entries of basement `base` within the unit's range and the cursor's
/// bounds, with the buffered messages (root first in `bufs`) applied.
fn resolve_unit(
    v: &View,
    tree: &str,
    base: &Part,
    bufs: &[Arc<Part>],
    unit: (&Option<Vec<u8>>, &Option<Vec<u8>>),
    bounds: (&Bound<Vec<u8>>, &Bound<Vec<u8>>),
    lazy: bool,
) -> Result<Vec<Entry>> {
    let range = (
        unit.0
            .as_ref()
            .map_or(Bound::Unbounded, |l| Bound::Included(l.clone())),
        unit.1
            .as_ref()
            .map_or(Bound::Unbounded, |h| Bound::Excluded(h.clone())),
    );
    let keep = |k: &[u8]| in_range(k, bounds.0, bounds.1);
    let form = v.form(tree);
    let mut plain = |b: &[u8]| plain_value(v.ix, form, tree, b);
    let mut values = Values {
        form,
        plain: &mut plain,
    };
    let mut out: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
    match base {
        Part::Packed(b) => {
            let lo = range.0.as_ref().map(Vec::as_slice);
            let hi = range.1.as_ref().map(Vec::as_slice);
            for (k, val) in b.range(lo, hi).filter(|e| keep(e.0)) {
                out.insert(k.to_vec(), Some(val.to_vec()));
            }
        }
        Part::Buf(_) => unreachable!("a leaf partition"),
    }
    for buf in bufs.iter().rev() {
        let Part::Buf(b) = &**buf else { continue };
        for (k, p) in b
            .range(unit.0.as_deref(), unit.1.as_deref())
            .filter(|e| keep(e.0))
        {
            let old = out.get(k).cloned().flatten();
            let new = resolve(v.ix_merge(), tree, k, old, &p, &mut values)?;
            out.insert(k.to_vec(), new);
        }
    }
    let entries: Vec<Entry> = out
        .into_iter()
        .filter_map(|(k, v)| Some((k, v?, None)))
        .collect();
    match form {
        super::value::Form::Plain => Ok(entries),
        _ => plain_values(v, form, tree, entries, lazy),
    }
}

/// `entries` with their stored values turned into the user's: the value
/// extents among them named for the cursor to read (`lazy`), or read here
/// through one queue (`Pager::read_extents`). The state lock or a pinned
/// snapshot holds the extents, else `read_at` discards the result when
/// `reuse_gen` moved.
fn plain_values(
    v: &View,
    form: Form,
    tree: &str,
    mut entries: Vec<Entry>,
    lazy: bool,
) -> Result<Vec<Entry>> {
    let pager = &v.ix.store.pager;
    let at: Vec<(usize, Extent)> = entries
        .iter()
        .enumerate()
        .filter_map(|(i, (_, s, _))| Some((i, form.extent_of(s, pager.ps)?)))
        .collect();
    if lazy {
        for &(i, e) in &at {
            entries[i].1 = Vec::new();
            entries[i].2 = Some(e);
        }
    }
    let exts: Vec<Extent> = if lazy {
        Vec::new()
    } else {
        at.iter().map(|a| a.1).collect()
    };
    let mut read = pager.read_extents(&exts, Kind::Overflow)?.into_iter();
    for (i, (_, s, pending)) in entries.iter_mut().enumerate() {
        if pending.is_some() {
            continue;
        }
        if at.binary_search_by_key(&i, |a| a.0).is_ok() {
            let mut got = |_: &Extent| read.next().expect("one read per extent");
            *s = form.plain(s, pager, tree, &mut got)?;
        } else if s.first() == Some(&super::value::TAG_INLINE) {
            s.remove(0); // the value follows its tag: no copy to a new vector
        } else {
            *s = form.plain(s, pager, tree, &mut |_| unreachable!("not an extent"))?;
        }
    }
    Ok(entries)
}
