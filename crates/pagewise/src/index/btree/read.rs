//! B+tree point reads over the store's read protocol ([`crate::store::read`]).

use super::node::{Node, Val};
use super::{as_node, node_ref, Meta};
use crate::error::Result;
use crate::index::{Desc, Index};

/// A get found the tree, but it is not a B+tree.
#[derive(Debug, Clone, Copy)]
pub struct NotBTree;
use crate::store::extent::Extent;
use crate::store::image::Image;
use crate::store::page::Kind;
use crate::store::read::{NodeRef, Step, View, MAX_RESTARTS};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A value copied out of a leaf: bytes, or where its overflow extent is.
#[derive(Debug, Clone)]
pub enum Owned {
    Inline(Vec<u8>),
    Overflow(Extent),
}

impl Owned {
    pub fn from_val(v: Val<'_>) -> Owned {
        match v {
            Val::Inline(b) => Owned::Inline(b.to_vec()),
            Val::Overflow(ext) => Owned::Overflow(ext),
        }
    }
}

/// A node the view holds, as a B+tree node.
#[inline]
pub fn node<T>(v: &View<T>, pid: u64) -> Option<Arc<Node>> {
    v.node(pid).map(as_node)
}

/// Descends to the leaf whose range holds `key`: at most `height` steps.
/// A tree whose levels disagree with its height (corruption the checksums
/// did not catch) ends at the deepest node reached: the lookup then finds
/// nothing rather than looping; `check` reports the damage. Returns the
/// image (a B+tree node: read it with [`node_ref`]).
#[inline]
pub fn find_leaf<T>(v: &View<T>, tm: &Meta, key: &[u8]) -> Step<Image> {
    find_leaf_with(v, tm, key, Image::clone)
}

/// [`find_leaf`], running `at_leaf` on the leaf's image where it lies
/// instead of returning a reference to it: no level takes a reference
/// count (`View::with_node`), so readers on two cores write no shared
/// cache line. `at_leaf` must be short and take no cache lock.
#[inline]
pub fn find_leaf_with<T, R>(
    v: &View<T>,
    tm: &Meta,
    key: &[u8],
    at_leaf: impl FnOnce(&Image) -> R,
) -> Step<R> {
    assert!(tm.root != 0 && tm.height >= 1);
    let mut at_leaf = Some(at_leaf);
    let mut leaf = |img: &Image| (at_leaf.take().expect("one leaf per descent"))(img);
    // The root descriptor names no base; every child comes with its entry's.
    let mut at = NodeRef::unnamed(tm.root);
    for _ in 1..tm.height {
        let next = v.with_node(at.pid, |img| {
            let n = node_ref(img);
            if n.is_leaf() {
                Err(leaf(img))
            } else {
                Ok(n.child_ref(n.child_index(key)))
            }
        });
        match next {
            None => return Step::Miss(at),
            Some(Err(r)) => return Step::Done(r),
            Some(Ok(child)) => at = child,
        }
    }
    match v.with_node(at.pid, leaf) {
        Some(r) => Step::Done(r),
        None => Step::Miss(at),
    }
}

/// The value of `key`, if present (an overflow value as its extent).
#[inline]
pub fn get_step<T>(v: &View<T>, tm: &Meta, key: &[u8]) -> Step<Option<Owned>> {
    if tm.root == 0 {
        return Step::Done(None);
    }
    find_leaf_with(v, tm, key, |img| {
        let leaf = node_ref(img);
        if !leaf.is_leaf() {
            return None;
        }
        leaf.search(key).ok().map(|i| Owned::from_val(leaf.val(i)))
    })
}

/// Whether `key` is present.
#[inline]
pub fn contains_step<T>(v: &View<T>, tm: &Meta, key: &[u8]) -> Step<bool> {
    if tm.root == 0 {
        return Step::Done(false);
    }
    find_leaf_with(v, tm, key, |img| {
        let leaf = node_ref(img);
        leaf.is_leaf() && leaf.search(key).is_ok()
    })
}

/// The value of `key` in B+tree `tree`, overflow values read in full;
/// `Err(NotBTree)` inside `Ok` when `tree` is a tree of another kind (the
/// caller dispatches: one lock acquisition for the common B+tree get).
pub fn get(
    ix: &Index,
    at: Option<&crate::index::bepsilon::read::Frozen>,
    tree: &str,
    key: &[u8],
) -> Result<std::result::Result<Option<Vec<u8>>, NotBTree>> {
    for _ in 0..MAX_RESTARTS {
        let gen = ix.store.reuse_gen.load(Ordering::Acquire);
        let found = ix.store.read_at(at, |v| match v.trees().get(tree) {
            Some(Desc::BTree(tm)) => match get_step(v, tm, key) {
                Step::Done(f) => Step::Done(Ok(f)),
                Step::Miss(p) => Step::Miss(p),
            },
            Some(_) => Step::Done(Err(NotBTree)),
            None => Step::Done(Ok(None)),
        })?;
        match found {
            Err(e) => return Ok(Err(e)),
            Ok(None) => return Ok(Ok(None)),
            Ok(Some(Owned::Inline(v))) => return Ok(Ok(Some(v))),
            Ok(Some(Owned::Overflow(ext))) => {
                let gen = (!at.is_some_and(|fz| fz.pinned())).then_some(gen);
                if let Some(v) = ix.store.read_extent_at(&ext, Kind::Overflow, gen)? {
                    return Ok(Ok(Some(v)));
                }
                // The extent was reused since the leaf was read: look again.
            }
        }
    }
    panic!("a get restarted {MAX_RESTARTS} times: page reuse never settles");
}
