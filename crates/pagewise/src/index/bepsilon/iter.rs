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

pub struct Cursor {
    tree: Arc<str>,
    /// What is left to return: shrinks from either end as entries are returned.
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    /// Where the next unit is fetched from, per direction (None: the end).
    fnext: Option<Bound<Vec<u8>>>,
    bnext: Option<Bound<Vec<u8>>>,
    front: VecDeque<Kv>,
    back: VecDeque<Kv>,
}

/// One basement's resolved entries and the key range it covers.
struct Unit {
    entries: Vec<Kv>,
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
            if let Some((k, v)) = got {
                if !in_range(&k, &self.lo, &self.hi) {
                    // The other end already returned it: everything is consumed.
                    (self.fnext, self.bnext) = (None, None);
                    (self.front, self.back) = (VecDeque::new(), VecDeque::new());
                    return None;
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
            let unit = match read_at(ix, at, |v| {
                unit_step(v, &self.tree, &pos, forward, &self.lo, &self.hi)
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
    lo: &Bound<Vec<u8>>,
    hi: &Bound<Vec<u8>>,
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
            let r = resolve_unit(v, tree, &part, &bufs, (&ulo, &uhi), (lo, hi));
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
) -> Result<Vec<Kv>> {
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
    let entries: Vec<Kv> = out.into_iter().filter_map(|(k, v)| Some((k, v?))).collect();
    match form {
        super::value::Form::Plain => Ok(entries),
        _ => plain_values(v, form, tree, entries),
    }
}

/// `entries` with their stored values turned into the user's: the value
/// extents among them read through one queue (`Pager::read_extents`). The
/// state lock or a pinned snapshot holds the extents, else `read_at`
/// discards the result when `reuse_gen` moved.
fn plain_values(v: &View, form: Form, tree: &str, mut entries: Vec<Kv>) -> Result<Vec<Kv>> {
    let pager = &v.ix.store.pager;
    let at: Vec<(usize, Extent)> = entries
        .iter()
        .enumerate()
        .filter_map(|(i, (_, s))| Some((i, form.extent_of(s, pager.ps)?)))
        .collect();
    let exts: Vec<Extent> = at.iter().map(|a| a.1).collect();
    let mut read = pager.read_extents(&exts, Kind::Overflow)?.into_iter();
    for (i, (_, s)) in entries.iter_mut().enumerate() {
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
