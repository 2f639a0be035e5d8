//! `Db::check` for B-epsilon trees: reads every node extent from disk,
//! verifies pages, partition checksums, key order and ranges (messages and
//! basement entries inside the range their ancestors assign), levels, and
//! recounts the descriptor's counters; every buffered key must pass its
//! buffer's key filter.

use super::buffer::Kind as MsgKind;
use super::node::{Buffer, Node, Part};
use super::value::{read_value, Packed, Stored};
use super::{format, Child, Meta};
use crate::index::Index;
use crate::store::claims::{Claims, Owner};
use crate::store::extent::Extent;
use crate::store::page::{Kind, HDR};
use crate::structure;
use std::collections::BTreeMap;

pub struct Walk {
    pub counted: Meta,
    pub pages_checked: u64,
    /// Pages of value extents read and verified.
    pub value_pages_checked: u64,
    /// Per run page (run's first page, index in the run), the packed
    /// references whose value lies on it: by run, since a freed page of a
    /// run still in the table may be reused by a later run.
    pub packed_refs: BTreeMap<(u64, u64), u64>,
}

pub fn walk(ix: &Index, claims: &mut Claims, m: &Meta) -> Walk {
    let mut w = Walk {
        counted: Meta {
            entries: 0,
            nodes: 0,
            ..m.clone()
        },
        pages_checked: 0,
        value_pages_checked: 0,
        packed_refs: BTreeMap::new(),
    };
    match m.root {
        Some(Child::Clean(ext)) => visit(ix, claims, &mut w, &ext, m.height, (None, None)),
        Some(Child::Dirty(_)) => claims.problem(0, "root not placed at check time".into()),
        None => {}
    }
    super::runs_check::check_table(ix, claims, m, &w.packed_refs);
    w
}

fn visit(
    ix: &Index,
    claims: &mut Claims,
    w: &mut Walk,
    ext: &Extent,
    height: u32,
    range: (Option<&[u8]>, Option<&[u8]>),
) {
    let shape = if height == 0 { "leaf" } else { "internal node" };
    let what = format!("B-epsilon {shape} extent");
    if !claims.claim(ext.first_page, ext.count_pages, Owner::Used, &what) {
        return;
    }
    w.pages_checked += ext.count_pages;
    let pager = &ix.store.pager;
    let read = pager.read_extent(ext, Kind::BEpsilon).and_then(|b| {
        let n = format::decode_full(&b, pager.ps)
            .map_err(|e| pager.corrupt(ext.first_page, format!("B-epsilon node: {e}")))?;
        Ok((b, n))
    });
    let node = match read {
        Ok((b, n)) => {
            map_node(claims, ext, pager.ps, &b, &n);
            n
        }
        Err(e) => {
            let what = format!("B-epsilon {shape} extent of {} pages: {e}", ext.count_pages);
            return claims.problem(ext.first_page, what);
        }
    };
    w.counted.nodes += 1;
    if node.height != height {
        let what = format!("node at height {} where {height} was expected", node.height);
        return claims.problem(ext.first_page, what);
    }
    if let Some(bad) = out_of_range(&node, range) {
        return claims.problem(ext.first_page, bad);
    }
    for (i, p) in node.parts.iter().enumerate() {
        match p.as_deref() {
            Some(Part::Packed(b)) => {
                w.counted.entries += b.len() as u64;
                for (_, v) in b.range(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded) {
                    check_value(ix, claims, w, ext, v);
                }
            }
            Some(Part::Buf(b)) => {
                for m in b.messages().filter(|m| m.kind == MsgKind::Put) {
                    check_value(ix, claims, w, ext, m.val);
                }
                if let Some(k) = filter_misses(&node, i, b) {
                    let what = format!("buffer {i}: key {k:?} is not in its filter");
                    claims.problem(ext.first_page, what);
                }
                let lo = if i == 0 {
                    range.0
                } else {
                    Some(&node.pivots[i - 1])
                };
                let hi = node.pivots.get(i).or(range.1);
                let Child::Clean(c) = node.children[i] else {
                    unreachable!("decoded children are extents")
                };
                visit(ix, claims, w, &c, height - 1, (lo, hi));
            }
            None => unreachable!("decode_full loads every partition"),
        }
    }
}

/// Checks stored value `v` of the node at `node` against the tree's form:
/// a tagged value must parse, and a value extent is claimed (no other
/// owner) and read (page checksums, kind, length).
fn check_value(ix: &Index, claims: &mut Claims, w: &mut Walk, node: &Extent, v: &[u8]) {
    let (form, ps) = (w.counted.opts.form(), ix.store.pager.ps);
    let ext = match form.parse(v, ps) {
        Some(Stored::Inline(_)) => return,
        Some(Stored::Extent(e)) => e,
        Some(Stored::Packed(p)) => return check_packed(ix, claims, w, node, &p),
        None => {
            let what = format!(
                "a stored value of {} bytes with tag {:?}",
                v.len(),
                v.first()
            );
            return claims.problem(node.first_page, what);
        }
    };
    let what = format!("value extent named by node {}", node.first_page);
    if !claims.claim(ext.first_page, ext.count_pages, Owner::Used, &what) {
        return;
    }
    claims.map_pages(
        ext.first_page,
        ext.count_pages,
        structure::BEPSILON_VALUE_EXTENT,
    );
    match ix.store.pager.read_extent(&ext, Kind::Overflow) {
        Ok(_) => w.value_pages_checked += ext.count_pages,
        Err(e) => claims.problem(ext.first_page, format!("{what}: {e}")),
    }
}

/// Checks packed reference `p` of the node at `node`: its run is in the
/// tree's value table, its value reads back (pages verified); counts it on
/// the pages it lies on (the table's counts are compared after the walk).
fn check_packed(ix: &Index, claims: &mut Claims, w: &mut Walk, node: &Extent, p: &Packed) {
    let ps = ix.store.pager.ps;
    let pages = w.counted.values.runs.runs.get(&p.first_page);
    if pages.is_none_or(|pages| *p.pages(ps).end() >= pages.len() as u64) {
        let what = format!(
            "node {} names a packed value in run {} that the value table does not hold",
            node.first_page, p.first_page
        );
        return claims.problem(p.first_page, what);
    }
    for k in p.pages(ps) {
        *w.packed_refs.entry((p.first_page, k)).or_default() += 1;
    }
    match read_value(&ix.store.pager, &p.value_ref(ps)) {
        Ok(v) if v.len() == p.len as usize => w.value_pages_checked += p.pages(ps).count() as u64,
        Ok(_) => claims.problem(p.first_page, "packed value of the wrong length".into()),
        Err(e) => claims.problem(p.first_page, format!("packed value: {e}")),
    }
}

/// Records the structure of every byte of the node extent `ext` (stored
/// bytes `b`, decoded `node`) when the walk maps the file.
fn map_node(claims: &mut Claims, ext: &Extent, ps: usize, b: &[u8], node: &Node) {
    if claims.map.is_none() {
        return;
    }
    let shape = if node.is_leaf() {
        structure::BEPSILON_LEAF
    } else {
        structure::BEPSILON_INTERNAL
    };
    claims.map_pages(
        ext.first_page,
        ext.count_pages,
        &structure::bepsilon_part(shape, structure::PAGE_TAIL),
    );
    let (cap, hdr) = ((ps - HDR) as u64, HDR as u64);
    for page in ext.first_page..ext.first_page + ext.count_pages {
        claims.map_bytes(
            page * ps as u64,
            hdr,
            &structure::bepsilon_part(shape, structure::PAGE_HEADER),
        );
    }
    for (r, part) in format::regions(b, node) {
        let what = structure::bepsilon_part(shape, part);
        let (mut at, end) = (r.start as u64, r.end as u64);
        while at < end {
            let (page, within) = (ext.first_page + at / cap, at % cap);
            let len = (cap - within).min(end - at);
            claims.map_bytes(page * ps as u64 + hdr + within, len, &what);
            at += len;
        }
    }
}

/// A key buffer `i` of `node` holds that its stored filter rules out (a
/// get would miss its messages), if any.
fn filter_misses<'a>(node: &Node, i: usize, b: &'a Buffer) -> Option<&'a [u8]> {
    let f = node.dir.get(i)?.filter.as_ref()?;
    b.keys().find(|k| !f.may_contain(k))
}

/// A key of `node` (pivot, message or entry) outside `range`, described.
fn out_of_range(node: &Node, range: (Option<&[u8]>, Option<&[u8]>)) -> Option<String> {
    let inside = |k: &[u8]| range.0.is_none_or(|l| k >= l) && range.1.is_none_or(|h| k < h);
    let mut keys: Vec<&[u8]> = node.pivots.iter().collect();
    if let Some(Some(p)) = node.parts.first() {
        keys.extend(first_key(p));
    }
    if let Some(Some(p)) = node.parts.last() {
        keys.extend(last_key(p));
    }
    let bad = keys.into_iter().find(|k| !inside(k))?;
    Some(format!(
        "key {bad:?} outside the range {range:?} its ancestors assign"
    ))
}

fn first_key(p: &Part) -> Option<&[u8]> {
    match p {
        Part::Buf(b) => b.first_key(),
        Part::Packed(b) => b.first_key(),
    }
}

fn last_key(p: &Part) -> Option<&[u8]> {
    match p {
        Part::Buf(b) => b.last_key(),
        Part::Packed(b) => b.last_key(),
    }
}
