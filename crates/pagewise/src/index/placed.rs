//! Where a commit group's values that leave their trees are written, before
//! its log record (docs/design.md, "B-epsilon value extents", "B-epsilon
//! packed values"): B+tree overflow values and B-epsilon values whose entry
//! does not fit a page go to extents of their own; the other B-epsilon
//! values are packed, per tree, into value runs. All of them are written
//! back to back in one allocation of fresh pages (`Store::write_value_extents`).

use super::bepsilon::runs::{self, RunLayout};
use super::bepsilon::value::{self, Form, Packed};
use crate::error::Result;
use crate::log::Op;
use crate::store::extent::Extent;
use crate::store::Store;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Where a put's value goes ([`super::Index::out_of_line`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Out {
    /// Stays with its key.
    Inline,
    /// To an extent of its own.
    Extent,
    /// Into its tree's value run of the group.
    Packed,
}

/// Where a put's value was written, when it left its tree.
#[derive(Debug, Clone)]
pub enum Placed {
    Extent(Extent),
    /// The value's reference, and the run it lies in (registered in its
    /// tree's value table when the first of its values is applied).
    Packed(Packed, Arc<RunLayout>),
}

impl Placed {
    /// The extent of a value written to one of its own.
    pub fn extent(&self) -> Option<Extent> {
        match self {
            Placed::Extent(e) => Some(*e),
            Placed::Packed(..) => None,
        }
    }
}

/// Writes the values `outs` sends out of line in `batches` (per batch, per
/// op) to fresh pages in one run of writes: per batch, per op, where its
/// value went. Fresh pages are never referenced by the durable checkpoint,
/// so writing them before the log is safe.
pub fn place<T>(
    store: &Store<T>,
    batches: &[&[Op]],
    outs: &[Vec<Out>],
) -> Result<Vec<Vec<Option<Placed>>>> {
    assert_eq!(batches.len(), outs.len());
    let ps = store.page_size();
    let mut own: Vec<&[u8]> = Vec::new();
    let mut by_tree: BTreeMap<&str, Vec<(usize, usize)>> = BTreeMap::new();
    for (b, (ops, o)) in batches.iter().zip(outs).enumerate() {
        assert_eq!(ops.len(), o.len());
        for (i, (op, out)) in ops.iter().zip(o).enumerate() {
            match (op, out) {
                (Op::Put { value, .. }, Out::Extent) => own.push(value),
                (Op::Put { tree, .. }, Out::Packed) => {
                    by_tree.entry(tree).or_default().push((b, i))
                }
                _ => {}
            }
        }
    }
    let kv = |(b, i): (usize, usize)| match &batches[b][i] {
        Op::Put { key, value, .. } => (&key[..], &value[..]),
        _ => unreachable!("a packed op is a put"),
    };
    let packed: Vec<(Vec<u8>, RunLayout)> = by_tree
        .values()
        .flat_map(|at| runs::pack(&at.iter().map(|&x| kv(x)).collect::<Vec<_>>(), ps))
        .collect();
    let mut payloads = own.clone();
    payloads.extend(packed.iter().map(|(b, _)| &b[..]));
    let exts = store.write_value_extents(&payloads)?;
    let mut placed: Vec<Vec<Option<Placed>>> =
        batches.iter().map(|ops| vec![None; ops.len()]).collect();
    let mut own_exts = exts[..own.len()].iter();
    for (b, o) in outs.iter().enumerate() {
        for (i, _) in o.iter().enumerate().filter(|x| *x.1 == Out::Extent) {
            placed[b][i] = Some(Placed::Extent(
                *own_exts.next().expect("an extent per value"),
            ));
        }
    }
    let mut targets = by_tree.values().flatten();
    for ((_, mut run), ext) in packed.into_iter().zip(&exts[own.len()..]) {
        assert_eq!(ext.count_pages, run.count_pages);
        run.first_page = ext.first_page;
        for v in run.values.iter_mut() {
            v.1.first_page = ext.first_page;
        }
        let run = Arc::new(run);
        for &(_, r) in &run.values {
            let &(b, i) = targets.next().expect("a put per packed value");
            placed[b][i] = Some(Placed::Packed(r, run.clone()));
        }
    }
    assert!(targets.next().is_none() && own_exts.next().is_none());
    Ok(placed)
}

/// The stored bytes of the puts of `ops` on a tree of form `form`, in one
/// arena: tagged, or the reference to where its value was written
/// (`bepsilon/value.rs`); per op its span of the arena (None: a plain
/// tree's put, stored as given, or an op with no value).
pub fn stored_values(
    form: Form,
    ops: &[(&Op, Option<Placed>)],
) -> (Vec<u8>, Vec<Option<std::ops::Range<usize>>>) {
    let mut arena: Vec<u8> = Vec::new();
    let mut spans: Vec<Option<std::ops::Range<usize>>> = Vec::with_capacity(ops.len());
    if let Form::Tagged(_) = form {
        let need: usize = ops
            .iter()
            .map(|(op, placed)| match placed {
                Some(_) => value::STORED_REF_BYTES,
                None => op_value_bytes(op) + 1,
            })
            .sum();
        arena.reserve_exact(need);
    }
    for (op, placed) in ops {
        let at = arena.len();
        match (op, placed, form) {
            (Op::Put { .. }, Some(Placed::Extent(e)), Form::Tagged(_)) => {
                arena.extend_from_slice(&value::reference(e))
            }
            (Op::Put { .. }, Some(Placed::Packed(p, _)), Form::Tagged(_)) => {
                arena.extend_from_slice(&p.encode())
            }
            (Op::Put { value, .. }, None, Form::Tagged(_)) => {
                arena.push(value::TAG_INLINE);
                arena.extend_from_slice(value);
            }
            (Op::Put { .. }, Some(_), Form::Plain) => {
                unreachable!("a plain tree's value placed out of line")
            }
            _ => {}
        }
        spans.push((arena.len() > at).then_some(at..arena.len()));
    }
    assert_eq!(spans.len(), ops.len());
    (arena, spans)
}

/// The value bytes a put carries (0 for other ops).
fn op_value_bytes(op: &Op) -> usize {
    match op {
        Op::Put { value, .. } => value.len(),
        _ => 0,
    }
}
