//! `Db::check` for B+trees: read every node of a tree back from disk and
//! verify key order and ranges, leaf depth, overflow extents and the
//! catalog counters (docs/design.md, "Invariants").

use super::node::{Node, Val};
use super::{as_node, Meta};
use crate::index::Index;
use crate::store::claims::{Claims, Owner};
use crate::store::page::Kind;
use crate::store::read::NodeRef;
use crate::structure;

/// What the walk of one tree found.
#[derive(Debug, Default)]
pub struct Walked {
    /// The counters as the walk found them (compare with the catalog's).
    pub counted: Meta,
    pub pages_checked: u64,
    pub overflow_pages_checked: u64,
}

struct Walk<'a> {
    ix: &'a Index,
    claims: &'a mut Claims,
    height: u32,
    out: Walked,
}

/// Walks the tree `tm` describes, claiming its pages.
pub fn walk(ix: &Index, claims: &mut Claims, tm: &Meta) -> Walked {
    let mut w = Walk {
        ix,
        claims,
        height: tm.height,
        out: Walked::default(),
    };
    w.out.counted.root = tm.root;
    w.out.counted.height = tm.height;
    if tm.root != 0 {
        w.node(NodeRef::unnamed(tm.root), 1, None, None);
    }
    w.out
}

impl Walk<'_> {
    /// Checks node `at` at `depth` (1 = root), whose keys must lie in
    /// `[lo, hi)`, then its subtree. Recursion is bounded by the height.
    /// The node is read with the base its parent's entry names, so an entry
    /// that disagrees with the delta block is a problem naming the node.
    fn node(&mut self, at: NodeRef, depth: u32, lo: Option<&[u8]>, hi: Option<&[u8]>) {
        assert!(depth >= 1 && depth <= self.height);
        let pid = at.pid;
        if !self.claims.claim(pid, 1, Owner::Used, "node page") {
            return;
        }
        // The parent's entry says whether a base is named; the depth
        // whether a leaf is expected (a node that disagrees is a problem below).
        let shape = if depth == self.height {
            structure::BTREE_LEAF
        } else {
            structure::BTREE_BRANCH
        };
        let n = match self.ix.store.pager.read_node_ref(at) {
            Ok(img) => as_node(img),
            Err(e) => {
                let what = match at.named_base() {
                    Some(b) => format!("B+tree {shape} (delta block on base page {b}): {e}"),
                    None => format!("B+tree {shape}: {e}"),
                };
                return self.claims.problem(pid, what);
            }
        };
        self.out.pages_checked += 1;
        if let Some(base) = n.base_pid() {
            // Read and verified with its delta block (checksums, base crc).
            let what = format!("base page of delta block {pid}");
            if !self.claims.claim(base, 1, Owner::Used, &what) {
                return;
            }
            self.out.pages_checked += 1;
            self.claims
                .map_pages(pid, 1, &structure::btree_delta_block(shape));
            self.claims
                .map_pages(base, 1, &structure::btree_delta_base(shape));
        } else {
            self.claims.map_pages(pid, 1, &structure::btree_page(shape));
        }
        if depth > 1 && n.is_empty() {
            self.claims.problem(pid, "empty non-root node".into());
        }
        self.check_keys(pid, &n, lo, hi);
        if n.is_leaf() {
            return self.leaf(pid, &n, depth);
        }
        if depth >= self.height {
            let what = format!("branch at depth {depth}, tree height {}", self.height);
            return self.claims.problem(pid, what);
        }
        self.out.counted.branch_pages += 1;
        for i in 0..n.len() {
            let clo = if i == 0 {
                lo.map(<[u8]>::to_vec)
            } else {
                Some(n.key(i).to_vec())
            };
            let chi = if i + 1 < n.len() {
                Some(n.key(i + 1).to_vec())
            } else {
                hi.map(<[u8]>::to_vec)
            };
            self.node(n.child_ref(i), depth + 1, clo.as_deref(), chi.as_deref());
        }
    }

    /// Keys strictly increase and lie in `[lo, hi)` (a branch's first entry
    /// has no key).
    fn check_keys(&mut self, pid: u64, n: &Node, lo: Option<&[u8]>, hi: Option<&[u8]>) {
        let first = if n.is_leaf() { 0 } else { 1 };
        let mut prev: Option<&[u8]> = lo;
        for i in first..n.len() {
            let k = n.key(i);
            let ordered = match prev {
                None => true,
                Some(p) if i == first => k >= p,
                Some(p) => k > p,
            };
            if !ordered || hi.is_some_and(|h| k >= h) {
                let what = format!("key {i} ({k:02x?}) out of order or outside its parent's range");
                self.claims.problem(pid, what);
            }
            prev = Some(k);
        }
    }

    fn leaf(&mut self, pid: u64, n: &Node, depth: u32) {
        if depth != self.height {
            let what = format!("leaf at depth {depth}, tree height {}", self.height);
            self.claims.problem(pid, what);
        }
        self.out.counted.leaf_pages += 1;
        for i in 0..n.len() {
            self.out.counted.entries += 1;
            self.out.counted.leaf_bytes += n.entry_bytes(i) as u64;
            if let Val::Overflow(ext) = n.val(i) {
                self.overflow(pid, ext);
            }
        }
    }

    fn overflow(&mut self, leaf: u64, ext: crate::store::extent::Extent) {
        let what = format!("overflow extent of leaf {leaf}");
        if !self
            .claims
            .claim(ext.first_page, ext.count_pages, Owner::Used, &what)
        {
            return;
        }
        self.out.counted.overflow_pages += ext.count_pages;
        self.claims
            .map_pages(ext.first_page, ext.count_pages, structure::BTREE_OVERFLOW);
        match self.ix.store.pager.read_extent(&ext, Kind::Overflow) {
            Ok(_) => self.out.overflow_pages_checked += ext.count_pages,
            Err(e) => {
                let what = format!("overflow value of leaf {leaf}: {e}");
                self.claims.problem(ext.first_page, what)
            }
        }
    }
}
