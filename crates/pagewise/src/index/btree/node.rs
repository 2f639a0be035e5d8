//! B+tree nodes: the in-memory form and its page encoding (docs/design.md,
//! "B+tree node payload"). Overflow references are [`Extent`]s.

use super::delta::{Change, ChangeRef, Changes};
use crate::index::entry;
use crate::index::head::{self, key_head};
use crate::store::extent::{Extent, EXTENT_REF_BYTES};
use crate::store::image::{DeltaPages, Image, NodeImage, PageFill};
use crate::store::page::{get_u16, get_u32, get_u64, put_u16, put_u32, put_u64, Kind, HDR};
use crate::store::read::{NodeRef, BASE_UNNAMED};
use std::sync::Arc;

pub const LEAF_ENT: usize = entry::KEY_AT;

/// A branch payload's fields (docs/design.md, "B+tree node payload"): the
/// prefix naming child 0, then per entry `separator length | separator |
/// child | base`, the ids at offsets from the separator's end. A kind-3
/// branch has no base fields.
pub mod branch {
    use crate::store::layout::Field;
    pub const CHILD0: Field = Field::new(0, 8);
    pub const BASE0: Field = Field::new(8, 8);
    pub const SEPARATOR_LEN: Field = Field::new(0, 2);
    pub const SEPARATOR_AT: usize = SEPARATOR_LEN.end();
    /// After the separator.
    pub const CHILD: Field = Field::new(0, 8);
    pub const BASE: Field = Field::new(8, 8);
    // Child 0's ids lie as an entry's lie after its separator, so one loop
    // writes both.
    const _: () = assert!(CHILD.at == CHILD0.at && BASE.at == BASE0.at);
}

/// Branch entry bytes beside the separator, and before the first separator:
/// kind 8 (`klen | key | child | base`, `child0 | base0`) and kind 3 (no bases).
pub const BRANCH_ENT: usize = branch::SEPARATOR_AT + branch::BASE.end();
pub const BRANCH_BASE: usize = branch::BASE0.end();
pub const BRANCH_ENT_V3: usize = branch::SEPARATOR_AT + branch::CHILD.end();
pub const BRANCH_BASE_V3: usize = branch::CHILD0.end();

/// The branch tables of docs/design.md.
#[cfg(test)]
pub const BRANCH_PREFIX_TABLE: crate::store::layout::Table = crate::store::layout::Table {
    heading: "B+tree node payload (after the page header; kind 2 leaf, 3 branch)",
    index: 1,
    rows: &[("child 0", branch::CHILD0), ("base page id", branch::BASE0)],
};
#[cfg(test)]
pub const BRANCH_ENTRY_TABLE: crate::store::layout::Table = crate::store::layout::Table {
    heading: "B+tree node payload (after the page header; kind 2 leaf, 3 branch)",
    index: 2,
    rows: &[("separator length", branch::SEPARATOR_LEN)],
};
pub const OVF_REF: usize = EXTENT_REF_BYTES;
const OVF_BIT: u32 = 1 << 31;

/// Payload bytes available in a page.
pub fn capacity(page_size: usize) -> usize {
    page_size - HDR
}

/// Largest encoded entry: a quarter page, so a split always yields two halves
/// that fit and every node holds at least two entries.
pub fn max_entry(page_size: usize) -> usize {
    capacity(page_size) / 4
}

/// The documented key-length limit for a page size.
pub fn max_key(page_size: usize) -> usize {
    max_entry(page_size) - LEAF_ENT - OVF_REF
}

/// Whether a key/value pair is stored in the leaf (else in overflow pages).
pub fn fits_inline(page_size: usize, klen: usize, vlen: usize) -> bool {
    LEAF_ENT + klen + vlen <= max_entry(page_size)
}

/// A value as stored in a leaf.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Val<'a> {
    Inline(&'a [u8]),
    Overflow(Extent),
}

impl Val<'_> {
    pub fn stored_len(&self) -> usize {
        match self {
            Val::Inline(v) => v.len(),
            Val::Overflow(_) => OVF_REF,
        }
    }
}

/// Where an entry's key and value lie in the node's `data`: 12 bytes (a
/// node's memory charge counts them). A key or value is at most a page's
/// payload (under 64 KiB), so its length fits 16 bits; `data` stays far
/// below 2^31 bytes, so the key offset's top bit says the value is an
/// overflow reference.
#[derive(Clone, Copy, Debug)]
struct Ent {
    k_ovf: u32,
    v: u32,
    kl: u16,
    vl: u16,
}

/// [`Ent::k_ovf`]'s overflow bit.
const ENT_OVF: u32 = 1 << 31;

impl Ent {
    fn new(k: u32, kl: usize, v: u32, vl: usize, ovf: bool) -> Ent {
        assert!(k < ENT_OVF && v < ENT_OVF, "node data past 2 GiB");
        let (kl, vl) = (u16::try_from(kl), u16::try_from(vl));
        let (Ok(kl), Ok(vl)) = (kl, vl) else {
            panic!("an entry's key or value longer than a page");
        };
        Ent {
            k_ovf: k | if ovf { ENT_OVF } else { 0 },
            v,
            kl,
            vl,
        }
    }
    #[inline]
    fn k(&self) -> usize {
        (self.k_ovf & !ENT_OVF) as usize
    }
    #[inline]
    fn kl(&self) -> usize {
        self.kl as usize
    }
    #[inline]
    fn v(&self) -> usize {
        self.v as usize
    }
    #[inline]
    fn vl(&self) -> usize {
        self.vl as usize
    }
    #[inline]
    fn ovf(&self) -> bool {
        self.k_ovf & ENT_OVF != 0
    }
    #[inline]
    fn key_range(&self) -> std::ops::Range<usize> {
        self.k()..self.k() + self.kl()
    }
    #[inline]
    fn val_range(&self) -> std::ops::Range<usize> {
        self.v()..self.v() + self.vl()
    }
}

#[derive(Clone, Debug)]
pub struct Node {
    /// Page size of the database: sizes overflow extents.
    page_size: u32,
    leaf: bool,
    data: Vec<u8>,
    ents: Vec<Ent>,
    kids: Vec<u64>,
    /// Per entry, the first 8 bytes of its key (a branch: its separator)
    /// as a big-endian integer ([`key_head`]), so a search compares
    /// integers in one small array and reads a key's bytes only when heads
    /// tie.
    heads: Vec<u64>,
    /// Branch: per child, its base as the entry names it (`NodeRef::base`).
    bases: Vec<u64>,
    /// Branch: written as kind 8 (entries name bases), else kind 3.
    names_bases: bool,
    bytes: usize,
    garbage: usize,
    /// The base page and the changes since it, when the node is written as
    /// a delta block (docs/design.md, "Delta blocks for B+tree pages").
    changes: Option<Box<Changes>>,
}

impl Node {
    pub fn new_leaf(page_size: usize) -> Self {
        assert!(page_size.is_power_of_two() && page_size > HDR);
        Self {
            page_size: page_size as u32,
            leaf: true,
            data: Vec::new(),
            ents: Vec::new(),
            kids: Vec::new(),
            heads: Vec::new(),
            bases: Vec::new(),
            names_bases: false,
            bytes: 0,
            garbage: 0,
            changes: None,
        }
    }

    /// A kind-8 branch with one child.
    pub fn new_branch(page_size: usize, child0: u64, base0: u64) -> Self {
        let mut n = Self::new_leaf(page_size);
        n.leaf = false;
        n.names_bases = true;
        n.bases.push(base0);
        n.ents.push(Ent::new(0, 0, 0, 0, false));
        n.heads.push(0);
        n.kids.push(child0);
        n.bytes = BRANCH_BASE;
        n
    }

    pub fn is_leaf(&self) -> bool {
        self.leaf
    }
    pub fn len(&self) -> usize {
        self.ents.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ents.is_empty()
    }
    /// Encoded payload size in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Approximate heap footprint, charged against the cache budget.
    pub fn mem_size(&self) -> usize {
        let changes = self.changes.as_ref().map_or(0, |c| c.charge_bytes());
        let kids = (self.kids.capacity() + self.bases.capacity() + self.heads.capacity()) * 8;
        96 + self.data.capacity() + self.ents.capacity() * size_of::<Ent>() + kids + changes
    }

    /// The changes since the base page, if the node has a base.
    pub fn changes(&self) -> Option<&Changes> {
        self.changes.as_deref()
    }

    /// The base page the node's delta applies to, if any.
    pub fn base_pid(&self) -> Option<u64> {
        self.changes.as_ref().map(|c| c.base_pid)
    }

    /// Sets (or drops) the base and change set; returns the previous one.
    pub fn set_changes(&mut self, c: Option<Changes>) -> Option<Changes> {
        std::mem::replace(&mut self.changes, c.map(Box::new)).map(|b| *b)
    }

    /// Sets the unit the node's delta block is written in.
    pub fn set_block_bytes(&mut self, block_bytes: usize) {
        if let Some(c) = self.changes.as_mut() {
            c.block_bytes = block_bytes as u32;
        }
    }

    /// crc32c of the node's page payload as `encode` writes it (what a delta
    /// on this node as its base records).
    pub fn payload_crc(&self) -> u32 {
        let mut page = vec![0u8; self.page_size as usize];
        let used = self.encode(&mut page);
        crc32c::crc32c(&page[HDR..HDR + used])
    }

    /// Records `key`'s new state in the change set, if the node has a base.
    fn log(&mut self, key: &[u8], change: impl FnOnce() -> Change) {
        if let Some(c) = self.changes.as_mut() {
            c.record(key, change());
        }
    }

    fn log_put(&mut self, key: &[u8], val: Val<'_>) {
        self.log(key, || match val {
            Val::Inline(b) => Change::Put {
                val: b.to_vec(),
                overflow: false,
            },
            Val::Overflow(ext) => {
                let mut r = vec![0u8; OVF_REF];
                ext.encode(&mut r);
                Change::Put {
                    val: r,
                    overflow: true,
                }
            }
        });
    }

    /// Branch: logs child `i`'s entry under its separator (child 0: the
    /// empty key): `child | base` on a kind-8 branch, the child alone on
    /// kind 3 (docs/design.md, the delta block's records).
    fn log_child(&mut self, i: usize) {
        let key = if i == 0 {
            Vec::new()
        } else {
            self.key(i).to_vec()
        };
        let mut val = self.kids[i].to_le_bytes().to_vec();
        if self.names_bases {
            val.extend_from_slice(&self.bases[i].to_le_bytes());
        }
        self.log(&key, || Change::Put {
            val,
            overflow: false,
        });
    }

    /// Branch: whether it is written as kind 8 (its entries name bases).
    pub fn names_bases(&self) -> bool {
        self.names_bases
    }

    /// Bytes of a branch entry with a `klen`-byte separator, and before the
    /// first separator, in this branch's layout.
    fn branch_ent(&self, klen: usize) -> usize {
        klen + if self.names_bases {
            BRANCH_ENT
        } else {
            BRANCH_ENT_V3
        }
    }
    fn branch_base(&self) -> usize {
        if self.names_bases {
            BRANCH_BASE
        } else {
            BRANCH_BASE_V3
        }
    }

    /// Converts a kind-3 branch without a base to kind 8 if it still fits a
    /// page with 8 more bytes per entry (docs/design.md, "B+tree node
    /// payload"); entries it read from kind 3 stay "not named".
    pub fn upgrade_if_fits(&mut self) -> bool {
        if self.leaf || self.names_bases {
            return false;
        }
        assert!(
            self.changes.is_none(),
            "a converted branch is written whole"
        );
        let bytes = self.bytes + 8 * self.len();
        if bytes > capacity(self.page_size as usize) {
            return false;
        }
        self.names_bases = true;
        self.bytes = bytes;
        debug_assert_eq!(self.bases.len(), self.len());
        true
    }

    pub fn key(&self, i: usize) -> &[u8] {
        let e = &self.ents[i];
        &self.data[e.key_range()]
    }

    pub fn val(&self, i: usize) -> Val<'_> {
        let e = &self.ents[i];
        let b = &self.data[e.val_range()];
        if e.ovf() {
            // Validated when the page was decoded (see `decode`).
            Val::Overflow(Extent::decode(b, self.page_size as usize).expect("checked at decode"))
        } else {
            Val::Inline(b)
        }
    }

    /// Encoded size of leaf entry i.
    pub fn entry_bytes(&self, i: usize) -> usize {
        let e = &self.ents[i];
        if self.leaf {
            LEAF_ENT + e.kl() + e.vl()
        } else {
            self.branch_ent(e.kl())
        }
    }

    /// Leaf: position of `key`, or where it would be inserted: one binary
    /// search on the heads, reading an entry's key only where its head ties
    /// with `key`'s (the one read of a found key's bytes). Its own search,
    /// not `head::count_below` and an equality check: that reads a found
    /// key twice, 2,039 instructions per cached get against 1,906
    /// (callgrind, `fill_get get`, 1M keys).
    pub fn search(&self, key: &[u8]) -> Result<usize, usize> {
        debug_assert!(self.leaf && self.heads.len() == self.ents.len());
        let head = key_head(key);
        let (mut lo, mut hi) = (0, self.ents.len());
        for _ in 0..=usize::BITS {
            if lo >= hi {
                break;
            }
            let mid = lo + (hi - lo) / 2;
            let h = self.heads[mid];
            let order = if h != head {
                h.cmp(&head)
            } else {
                self.key(mid).cmp(key)
            };
            match order {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        debug_assert!(lo == hi);
        Err(lo)
    }

    /// Branch: the child whose range holds `key`.
    pub fn child_index(&self, key: &[u8]) -> usize {
        self.count_below(key, true)
    }

    /// Branch: the child holding the largest keys below `key`.
    pub fn child_index_lt(&self, key: &[u8]) -> usize {
        self.count_below(key, false)
    }

    /// Branch: how many separators are below `key` (or equal to it, with
    /// `or_equal`): one binary search on the heads, reading a separator's
    /// bytes only where its head ties with `key`'s (`key_head`: unequal
    /// heads order as the keys do).
    fn count_below(&self, key: &[u8], or_equal: bool) -> usize {
        debug_assert!(!self.leaf && self.heads.len() == self.ents.len());
        // Separator 0 is the leftmost child's (no key): search from 1.
        let sep = |i: usize| &self.data[self.ents[i + 1].key_range()];
        let n = head::count_below(&self.heads[1..], key, or_equal, sep);
        assert!(n < self.ents.len());
        n
    }

    /// Every head is its key's (tests of the upkeep).
    #[cfg(test)]
    fn heads_match(&self) -> bool {
        self.heads.len() == self.ents.len()
            && (0..self.len()).all(|i| self.heads[i] == key_head(self.key(i)))
    }

    #[cfg(test)]
    pub fn child(&self, i: usize) -> u64 {
        self.kids[i]
    }
    /// Branch: child `i` with the base its entry names.
    pub fn child_ref(&self, i: usize) -> NodeRef {
        NodeRef {
            pid: self.kids[i],
            base: self.bases[i],
        }
    }
    #[cfg(test)]
    pub fn children(&self) -> &[u64] {
        &self.kids
    }
    /// Branch: points entry `i` at `pid` with base `base` (0: whole page).
    pub fn set_child(&mut self, i: usize, pid: u64, base: u64) {
        assert!(pid >= 2 && base != pid);
        if self.kids[i] != pid || self.bases[i] != base {
            self.kids[i] = pid;
            self.bases[i] = base;
            self.log_child(i);
        }
    }

    fn push_bytes(&mut self, b: &[u8]) -> u32 {
        let at = self.data.len();
        self.data.extend_from_slice(b);
        at as u32
    }

    fn make_ent(&mut self, key: &[u8], val: Val<'_>) -> Ent {
        let k = self.push_bytes(key);
        let (v, vl, ovf) = match val {
            Val::Inline(b) => (self.push_bytes(b), b.len(), false),
            Val::Overflow(ext) => {
                let mut r = [0u8; OVF_REF];
                ext.encode(&mut r);
                (self.push_bytes(&r), OVF_REF, true)
            }
        };
        Ent::new(k, key.len(), v, vl, ovf)
    }

    /// Leaf: inserts a new entry at position `i`.
    pub fn insert_at(&mut self, i: usize, key: &[u8], val: Val<'_>) {
        debug_assert!(self.leaf);
        let e = self.make_ent(key, val);
        self.ents.insert(i, e);
        self.heads.insert(i, key_head(key));
        self.bytes += LEAF_ENT + key.len() + val.stored_len();
        self.log_put(key, val);
    }

    /// Leaf: replaces the value of entry `i`.
    pub fn replace_at(&mut self, i: usize, val: Val<'_>) {
        if self.changes.is_some() {
            let key = self.key(i).to_vec();
            self.log_put(&key, val);
        }
        let old = self.ents[i];
        let e = self.make_ent(&[], val);
        self.ents[i] = Ent::new(old.k() as u32, old.kl(), e.v, e.vl(), e.ovf());
        self.garbage += old.vl();
        self.bytes = self.bytes + val.stored_len() - old.vl();
        self.maybe_compact();
    }

    /// Leaf: removes entry `i`.
    pub fn remove_at(&mut self, i: usize) {
        if self.changes.is_some() {
            let key = self.key(i).to_vec();
            self.log(&key, || Change::Remove);
        }
        let old = self.ents.remove(i);
        self.heads.remove(i);
        self.garbage += old.kl() + old.vl();
        self.bytes -= LEAF_ENT + old.kl() + old.vl();
        self.maybe_compact();
    }

    /// Branch: inserts separator `sep` with child `pid` (base `base`) at
    /// position `i` (>= 1).
    pub fn insert_child(&mut self, i: usize, sep: &[u8], pid: u64, base: u64) {
        debug_assert!(!self.leaf && i >= 1);
        let e = self.make_ent(sep, Val::Inline(&[]));
        self.ents.insert(i, e);
        self.heads.insert(i, key_head(sep));
        self.kids.insert(i, pid);
        self.bases.insert(i, base);
        self.bytes += self.branch_ent(sep.len());
        self.log_child(i);
    }

    /// Branch: removes child `i` (and its separator; removing child 0 drops
    /// child 1's separator, which is still a valid lower bound).
    pub fn remove_child(&mut self, i: usize) {
        let idx = if i == 0 { 1 } else { i };
        if self.changes.is_some() {
            // As a map: separator idx goes; child 0 becomes child 1's pointer.
            let key = self.key(idx).to_vec();
            self.log(&key, || Change::Remove);
        }
        let old = self.ents.remove(idx);
        self.heads.remove(idx);
        self.kids.remove(i);
        self.bases.remove(i);
        self.garbage += old.kl();
        self.bytes -= self.branch_ent(old.kl());
        if i == 0 {
            self.log_child(0);
        }
        self.maybe_compact();
    }

    fn maybe_compact(&mut self) {
        if self.garbage > 256 && self.garbage * 2 > self.data.len() {
            let mut n = self.rebuilt_empty();
            for i in 0..self.len() {
                n.push_from(self, i);
            }
            n.changes = self.changes.take();
            *self = n;
        }
    }

    fn rebuilt_empty(&self) -> Node {
        let mut n = Node::new_leaf(self.page_size as usize);
        n.leaf = self.leaf;
        n.names_bases = self.names_bases;
        n.data.reserve(self.data.len() - self.garbage);
        n
    }

    /// Appends entry `i` of `src` (keys must stay ordered).
    fn push_from(&mut self, src: &Node, i: usize) {
        if self.leaf {
            let e = self.make_ent(src.key(i), src.val(i));
            self.ents.push(e);
            self.heads.push(src.heads[i]);
        } else {
            let key = if self.ents.is_empty() {
                &[][..]
            } else {
                src.key(i)
            };
            let e = self.make_ent(key, Val::Inline(&[]));
            self.ents.push(e);
            self.heads.push(key_head(key));
            self.kids.push(src.kids[i]);
            self.bases.push(src.bases[i]);
        }
        self.recount_last();
    }

    fn recount_last(&mut self) {
        let i = self.ents.len() - 1;
        if self.leaf {
            self.bytes += self.entry_bytes(i);
        } else if i == 0 {
            self.bytes += self.branch_base();
        } else {
            self.bytes += self.entry_bytes(i);
        }
    }

    /// Splits an overfull node. `at` forces the split point (1..len); else the
    /// byte midpoint. Returns the separator and the right half.
    pub fn split(&mut self, at: Option<usize>) -> (Vec<u8>, Node) {
        let n = self.len();
        assert!(n >= 2, "split of a node with {n} entries");
        assert!(self.changes.is_none(), "a split node is written whole");
        let m = at.unwrap_or_else(|| self.byte_midpoint()).clamp(1, n - 1);
        let mut left = self.rebuilt_empty();
        let mut right = self.rebuilt_empty();
        for i in 0..m {
            left.push_from(self, i);
        }
        let sep = if self.leaf {
            shortest_separator(self.key(m - 1), self.key(m))
        } else {
            self.key(m).to_vec()
        };
        for i in m..n {
            right.push_from(self, i);
        }
        // A kind-3 branch is converted at its split (the halves are written whole).
        left.upgrade_if_fits();
        right.upgrade_if_fits();
        *self = left;
        (sep, right)
    }

    /// Split point of an append split: the most leading entries whose
    /// entry bytes stay within `fill` of `cap`, at least one and leaving at
    /// least one for the right. With `fill` 1.0 it
    /// is `len - 1`: everything but the appended entry stays left.
    pub fn fill_point(&self, fill: f64, cap: usize) -> usize {
        let n = self.len();
        assert!(n >= 2 && (0.5..=1.0).contains(&fill));
        if fill >= 1.0 {
            return n - 1;
        }
        let budget = (cap as f64 * fill) as usize;
        let mut acc = 0;
        let mut at = 0;
        // Bounded by the entry count.
        while at < n - 1 && acc + self.entry_bytes(at) <= budget {
            acc += self.entry_bytes(at);
            at += 1;
        }
        let at = at.max(1);
        assert!(at >= 1 && at < n);
        at
    }

    fn byte_midpoint(&self) -> usize {
        let total: usize = (0..self.len()).map(|i| self.entry_bytes(i)).sum();
        let mut acc = 0;
        for i in 0..self.len() {
            acc += self.entry_bytes(i);
            if acc * 2 >= total {
                // Put entry i left or right, whichever balances better.
                let left_with = acc;
                let left_without = acc - self.entry_bytes(i);
                return if left_with * 2 - total <= total - left_without * 2 {
                    i + 1
                } else {
                    i
                };
            }
        }
        self.len() / 2
    }

    /// Size after merging `right` into `self` under separator `sep` (in
    /// `self`'s layout, which the merged node keeps).
    pub fn merged_bytes(&self, sep: &[u8], right: &Node) -> usize {
        if self.leaf {
            return self.bytes + right.bytes;
        }
        let seps: usize = (1..right.len()).map(|i| right.key(i).len()).sum();
        self.bytes + self.branch_ent(sep.len()) + seps + (right.len() - 1) * self.branch_ent(0)
    }

    /// Appends all of `right` (whose keys are all >= `sep`).
    pub fn merge_from(&mut self, sep: &[u8], right: &Node) {
        assert!(self.changes.is_none(), "a merged node is written whole");
        for i in 0..right.len() {
            if !self.leaf && i == 0 {
                let e = self.make_ent(sep, Val::Inline(&[]));
                self.ents.push(e);
                self.heads.push(key_head(sep));
                self.kids.push(right.kids[0]);
                self.bases.push(right.bases[0]);
                self.bytes += self.branch_ent(sep.len());
            } else {
                self.push_from(right, i);
            }
        }
    }

    /// Applies a delta block's records to this freshly decoded base branch
    /// (nothing is logged): a put replaces or inserts a child, a remove drops
    /// one (a leaf merges them as it decodes, [`Node::decode_with`]). Bad
    /// records and a result that does not fit a page are errors.
    pub fn replay(&mut self, changes: &Changes) -> Result<(), String> {
        assert!(!self.leaf, "a leaf merges its records in decode_with");
        assert!(
            self.changes.is_none(),
            "replay onto a node with a change set"
        );
        for (key, change) in changes.iter() {
            if !self.replay_branch(key, change) {
                return Err(format!("record for key {key:02x?} does not fit this node"));
            }
        }
        self.check_fits()
    }

    /// After a replay or merge: the node must fit a page.
    fn check_fits(&self) -> Result<(), String> {
        let cap = capacity(self.page_size as usize);
        if self.bytes > cap {
            let what = format!(
                "{} payload bytes after replay, a page holds {cap}",
                self.bytes
            );
            return Err(what);
        }
        Ok(())
    }

    /// A branch record's value: `child | base` on kind 8, the child alone
    /// (base not named) on kind 3; None if malformed.
    fn branch_val(&self, val: &[u8]) -> Option<(u64, u64)> {
        let (pid, base) = match (val.len(), self.names_bases) {
            (16, true) => (
                get_u64(val, branch::CHILD.at),
                get_u64(val, branch::BASE.at),
            ),
            (8, false) => (get_u64(val, branch::CHILD.at), BASE_UNNAMED),
            _ => return None,
        };
        (pid >= 2 && base != pid).then_some((pid, base))
    }

    fn replay_branch(&mut self, key: &[u8], change: ChangeRef<'_>) -> bool {
        let kid = match change {
            ChangeRef::Put {
                val,
                overflow: false,
            } => match self.branch_val(val) {
                Some(kid) => Some(kid),
                None => return false,
            },
            ChangeRef::Remove if !key.is_empty() => None,
            _ => return false,
        };
        if key.is_empty() {
            (self.kids[0], self.bases[0]) = kid.expect("checked above");
            return true;
        }
        let pos = self.ents[1..].binary_search_by(|e| self.data[e.key_range()].cmp(key));
        let fits = self.branch_ent(key.len()) <= max_entry(self.page_size as usize);
        match (pos, kid) {
            (Ok(j), Some(kid)) => (self.kids[j + 1], self.bases[j + 1]) = kid,
            (Err(j), Some((pid, base))) if fits => self.insert_child(j + 1, key, pid, base),
            (Err(_), Some(_)) => return false,
            (Ok(j), None) => self.remove_child(j + 1),
            (Err(_), None) => {}
        }
        true
    }

    /// Writes the payload after the page header; returns bytes used.
    pub fn encode(&self, page: &mut [u8]) -> usize {
        let mut at = HDR;
        if self.leaf {
            for (i, e) in self.ents.iter().enumerate() {
                put_u16(page, at + entry::KEY_LEN.at, e.kl);
                let vl = e.vl() as u32 | if e.ovf() { OVF_BIT } else { 0 };
                put_u32(page, at + entry::VALUE_LEN.at, vl);
                at += LEAF_ENT;
                let k = self.key(i);
                page[at..at + k.len()].copy_from_slice(k);
                at += k.len();
                let v = &self.data[e.val_range()];
                page[at..at + v.len()].copy_from_slice(v);
                at += v.len();
            }
        } else {
            for i in 0..self.len() {
                if i > 0 {
                    let k = self.key(i);
                    put_u16(page, at + branch::SEPARATOR_LEN.at, k.len() as u16);
                    at += branch::SEPARATOR_AT;
                    page[at..at + k.len()].copy_from_slice(k);
                    at += k.len();
                }
                put_u64(page, at + branch::CHILD.at, self.kids[i]);
                at += branch::CHILD.bytes;
                if self.names_bases {
                    put_u64(page, at, self.bases[i]);
                    at += branch::BASE.bytes;
                }
            }
        }
        let used = at - HDR;
        debug_assert_eq!(used, self.bytes, "node byte count drifted");
        used
    }

    /// Parses a payload of page kind `kind` (leaf, kind-3 or kind-8 branch)
    /// written by [`Node::encode`]. Every length is checked against the
    /// payload before use; a bad one is an error, never a panic.
    pub fn decode(
        payload: &[u8],
        kind: Kind,
        count: usize,
        page_size: usize,
    ) -> Result<Node, String> {
        let (mut n, at) = match kind {
            Kind::Leaf => Self::decode_leaf(payload, count, page_size)?,
            Kind::Branch => Self::decode_branch(payload, count, page_size, false)?,
            Kind::BranchBases => Self::decode_branch(payload, count, page_size, true)?,
            _ => return Err(format!("page kind {kind:?} is not a B+tree node")),
        };
        all_read(payload, at, count)?;
        n.bytes = at;
        debug_assert_eq!(n.len(), count);
        Ok(n)
    }

    fn decode_leaf(
        payload: &[u8],
        count: usize,
        page_size: usize,
    ) -> Result<(Node, usize), String> {
        let mut n = Node::new_leaf(page_size);
        n.data.reserve(payload.len());
        n.ents.reserve_exact(count.min(payload.len() / LEAF_ENT));
        n.heads.reserve_exact(n.ents.capacity());
        let mut at = 0;
        for i in 0..count {
            let e = leaf_entry(payload, at, page_size, i)?;
            n.push_entry(&payload[e.k_at..e.v_at], &payload[e.v_at..e.end], e.ovf);
            at = e.end;
        }
        Ok((n, at))
    }

    /// Decodes a base page's payload with a delta's changes applied: a leaf
    /// in one merge of its entries with the records (requires: the records
    /// are checked and in key order, as `Changes::decode` leaves them), a
    /// branch by [`Node::replay`]. Bad records and a result that does not
    /// fit a page are errors.
    pub fn decode_with(
        payload: &[u8],
        kind: Kind,
        count: usize,
        page_size: usize,
        changes: &Changes,
    ) -> Result<Node, String> {
        if kind != Kind::Leaf {
            let mut n = Self::decode(payload, kind, count, page_size)?;
            n.replay(changes)?;
            return Ok(n);
        }
        let mut n = Node::new_leaf(page_size);
        n.data.reserve(payload.len() + changes.bytes());
        n.ents
            .reserve_exact(count.min(payload.len() / LEAF_ENT) + changes.count_keys());
        n.heads.reserve_exact(n.ents.capacity());
        let mut records = changes.iter().peekable();
        let mut at = 0;
        for i in 0..count {
            let e = leaf_entry(payload, at, page_size, i)?;
            let key = &payload[e.k_at..e.v_at];
            // One key comparison per base entry, and one per record merged.
            let mut replaced = false;
            while let Some(ord) = records.peek().map(|(k, _)| (*k).cmp(key)) {
                if ord == std::cmp::Ordering::Greater {
                    break;
                }
                let (k, c) = records.next().expect("peeked");
                n.merge_record(k, c)?;
                if ord == std::cmp::Ordering::Equal {
                    replaced = true;
                    break;
                }
            }
            if !replaced {
                n.push_entry(key, &payload[e.v_at..e.end], e.ovf);
            }
            at = e.end;
        }
        all_read(payload, at, count)?;
        for (k, c) in records {
            n.merge_record(k, c)?;
        }
        n.check_fits()?;
        Ok(n)
    }

    /// Leaf, merging: appends a record's put (a remove appends nothing).
    fn merge_record(&mut self, key: &[u8], change: ChangeRef<'_>) -> Result<(), String> {
        let ChangeRef::Put { val, overflow } = change else {
            return Ok(());
        };
        if LEAF_ENT + key.len() + val.len() > max_entry(self.page_size as usize) {
            return Err(format!("record for key {key:02x?} does not fit this node"));
        }
        self.push_entry(key, val, overflow);
        Ok(())
    }

    /// Leaf: appends an entry of stored value bytes (keys must stay ordered;
    /// a page read from disk is trusted for that as before: `Db::check`
    /// verifies it, and bad input must not panic here).
    fn push_entry(&mut self, key: &[u8], val: &[u8], ovf: bool) {
        debug_assert!(self.leaf && (!ovf || val.len() == OVF_REF));
        let k = self.push_bytes(key);
        let v = self.push_bytes(val);
        self.ents.push(Ent::new(k, key.len(), v, val.len(), ovf));
        self.heads.push(key_head(key));
        self.bytes += LEAF_ENT + key.len() + val.len();
    }

    /// A branch payload: kind 8 when `named` (entries carry a base), else
    /// kind 3 (every base "not named").
    fn decode_branch(
        payload: &[u8],
        count: usize,
        page_size: usize,
        named: bool,
    ) -> Result<(Node, usize), String> {
        let ids = if named { BRANCH_BASE } else { BRANCH_BASE_V3 };
        if count == 0 || payload.len() < ids {
            return Err("branch without children".into());
        }
        let short = || format!("entry runs past the payload ({} bytes)", payload.len());
        let child0 = get_u64(payload, branch::CHILD0.at);
        let mut n = Node::new_branch(page_size, child0, BASE_UNNAMED);
        n.names_bases = named;
        if named {
            n.bases[0] = get_u64(payload, branch::BASE0.at);
        }
        let mut at = ids;
        for _ in 1..count {
            if at + branch::SEPARATOR_AT > payload.len() {
                return Err(short());
            }
            let kl = get_u16(payload, at + branch::SEPARATOR_LEN.at) as usize;
            at += branch::SEPARATOR_AT;
            if at + kl + ids > payload.len() {
                return Err(short());
            }
            let k = n.push_bytes(&payload[at..at + kl]);
            n.heads.push(key_head(&payload[at..at + kl]));
            n.ents.push(Ent::new(k, kl, 0, 0, false));
            at += kl;
            n.kids.push(get_u64(payload, at + branch::CHILD.at));
            n.bases.push(if named {
                get_u64(payload, at + branch::BASE.at)
            } else {
                BASE_UNNAMED
            });
            at += ids;
        }
        n.check_bases()?;
        Ok((n, at))
    }

    /// Every child is a node page id and no entry names its child as its base.
    fn check_bases(&self) -> Result<(), String> {
        for (i, (&pid, &base)) in self.kids.iter().zip(&self.bases).enumerate() {
            if pid < 2 || base == pid {
                return Err(format!("entry {i} names child {pid} with base {base}"));
            }
        }
        Ok(())
    }
}

impl NodeImage for Node {
    fn charge_bytes(&self) -> usize {
        self.mem_size()
    }

    fn encode_page(&self, page: &mut [u8]) -> PageFill {
        assert_eq!(page.len(), self.page_size as usize);
        let kind = match (self.leaf, self.names_bases) {
            (true, _) => Kind::Leaf,
            (false, true) => Kind::BranchBases,
            (false, false) => Kind::Branch,
        };
        let (kind, used) = match &self.changes {
            Some(c) => (Kind::Delta, c.encode(page)),
            None => (kind, self.encode(page)),
        };
        PageFill {
            kind,
            count: self.len() as u16,
            used_bytes: used as u32,
        }
    }

    fn written_bytes(&self, page_size: usize) -> usize {
        match &self.changes {
            Some(c) => c.block_len(page_size),
            None => page_size,
        }
    }
}

/// A payload's `count` entries ended at `at`: nothing may follow them.
fn all_read(payload: &[u8], at: usize, count: usize) -> Result<(), String> {
    if at != payload.len() {
        let trailing = payload.len() - at;
        return Err(format!("{trailing} trailing bytes after {count} entries"));
    }
    Ok(())
}

/// A leaf entry's byte ranges in a payload.
struct LeafEntry {
    k_at: usize,
    v_at: usize,
    end: usize,
    ovf: bool,
}

/// Parses leaf entry `i` at `at`; every length is checked against the
/// payload, and an overflow reference must name a valid extent.
fn leaf_entry(payload: &[u8], at: usize, page_size: usize, i: usize) -> Result<LeafEntry, String> {
    let short = || format!("entry runs past the payload ({} bytes)", payload.len());
    if at + LEAF_ENT > payload.len() {
        return Err(short());
    }
    let kl = get_u16(payload, at + entry::KEY_LEN.at) as usize;
    let raw = get_u32(payload, at + entry::VALUE_LEN.at);
    let (vl, ovf) = ((raw & !OVF_BIT) as usize, raw & OVF_BIT != 0);
    let k_at = at + LEAF_ENT;
    if k_at + kl + vl > payload.len() || (ovf && vl != OVF_REF) {
        return Err(short());
    }
    let v_at = k_at + kl;
    if ovf && Extent::decode(&payload[v_at..v_at + OVF_REF], page_size).is_none() {
        return Err(format!("entry {i} holds an invalid overflow reference"));
    }
    Ok(LeafEntry {
        k_at,
        v_at,
        end: v_at + vl,
        ovf,
    })
}

/// The shortest key s with left < s <= right.
pub fn shortest_separator(left: &[u8], right: &[u8]) -> Vec<u8> {
    debug_assert!(left < right);
    let common = left.iter().zip(right).take_while(|(a, b)| a == b).count();
    right[..(common + 1).min(right.len())].to_vec()
}

/// Rebuilds a node from its base page and delta block (the store verified
/// both pages' checksums and ids): checks the base crc, merges the base's
/// entries with the records, and checks the result's entry count and size.
pub fn apply_delta(d: &DeltaPages) -> Result<Image, String> {
    let changes = Changes::decode(d.payload, d.page_size)?;
    let crc = d.base_payload_crc;
    debug_assert_eq!(crc, crc32c::crc32c(d.base_payload));
    if crc != changes.base_crc {
        return Err(format!(
            "the base's payload crc32c is {crc:#010x}, the delta expects {:#010x} \
             (a stale delta or a reused base page)",
            changes.base_crc
        ));
    }
    let mut node = Node::decode_with(
        d.base_payload,
        d.base_kind,
        d.base_count,
        d.page_size,
        &changes,
    )
    .map_err(|e| format!("base page and delta: {e}"))?;
    if node.len() != d.count {
        return Err(format!(
            "{} entries after replay, the delta says {}",
            node.len(),
            d.count
        ));
    }
    node.set_changes(Some(changes));
    Ok(Arc::new(node))
}

#[cfg(test)]
mod tests {
    /// Heads order keys as the keys do wherever they differ, and the branch
    /// search with heads finds what a plain search of the separators finds,
    /// through inserts, removes, splits, merges, a compaction and a decode.
    #[test]
    fn branch_heads_keep_up_and_search_as_the_keys_do() {
        use rand::{rngs::SmallRng, Rng, SeedableRng};
        let mut rng = SmallRng::seed_from_u64(21);
        let key = |rng: &mut SmallRng| -> Vec<u8> {
            let len = rng.gen_range(0..12);
            (0..len)
                .map(|_| [0u8, 1, 7, 255][rng.gen_range(0..4)])
                .collect()
        };
        for _ in 0..2000 {
            let (a, b) = (key(&mut rng), key(&mut rng));
            if key_head(&a) < key_head(&b) {
                assert!(a < b, "{a:?} {b:?}");
            }
        }
        let mut b = Node::new_branch(4096, 10, 0);
        let mut seps: Vec<Vec<u8>> = Vec::new();
        for step in 0..600u64 {
            let k = key(&mut rng);
            let j = seps.partition_point(|s| *s < k);
            if seps.get(j) == Some(&k) || (!seps.is_empty() && rng.gen_bool(0.3)) {
                let r = rng.gen_range(0..seps.len());
                b.remove_child(r + 1);
                seps.remove(r);
            } else {
                b.insert_child(j + 1, &k, 11 + step, 0);
                seps.insert(j, k);
            }
            assert!(b.heads_match());
            let probe = key(&mut rng);
            let plain = seps.partition_point(|s| s.as_slice() <= probe.as_slice());
            assert_eq!(b.child_index(&probe), plain, "{probe:?} in {seps:?}");
            let lt = seps.partition_point(|s| s.as_slice() < probe.as_slice());
            assert_eq!(b.child_index_lt(&probe), lt);
        }
        let mut page = vec![0u8; 4096];
        if b.len() >= 2 {
            let (sep, right) = b.split(None);
            assert!(b.heads_match() && right.heads_match());
            b.merge_from(&sep, &right);
            assert!(b.heads_match());
        }
        let fill = b.encode_page(&mut page);
        let payload = &page[HDR..HDR + fill.used_bytes as usize];
        let back = Node::decode(payload, fill.kind, b.len(), 4096).unwrap();
        assert!(back.heads_match());
    }

    /// A leaf's search with heads finds what a plain binary search of its
    /// keys finds (found: the position; absent: where it would go), with
    /// keys that share 8-byte heads, are prefixes of each other or empty,
    /// through inserts, replaces, removes, a split, a merge, compactions and
    /// a decode.
    #[test]
    fn leaf_heads_keep_up_and_search_as_the_keys_do() {
        use rand::{rngs::SmallRng, Rng, SeedableRng};
        let mut rng = SmallRng::seed_from_u64(22);
        let key = |rng: &mut SmallRng| -> Vec<u8> {
            let len = rng.gen_range(0..12);
            (0..len)
                .map(|_| [0u8, 1, 255][rng.gen_range(0..3)])
                .collect()
        };
        let mut n = Node::new_leaf(4096);
        let mut keys: Vec<Vec<u8>> = Vec::new();
        for step in 0..3000u32 {
            let k = key(&mut rng);
            let plain = keys.binary_search(&k);
            assert_eq!(n.search(&k), plain, "{k:?} in {keys:?}");
            match plain {
                Ok(i) if rng.gen_bool(0.5) => {
                    n.remove_at(i);
                    keys.remove(i);
                }
                Ok(i) => n.replace_at(i, Val::Inline(&step.to_le_bytes())),
                Err(i) if n.bytes() + LEAF_ENT + k.len() + 4 < 4096 - HDR => {
                    n.insert_at(i, &k, Val::Inline(&step.to_le_bytes()));
                    keys.insert(i, k);
                }
                Err(_) => {}
            }
            assert!(n.heads_match());
        }
        assert!(n.len() >= 2, "the walk keeps a few dozen keys");
        let (sep, right) = n.split(None);
        assert!(n.heads_match() && right.heads_match());
        for k in &keys {
            let (i, side) = if k.as_slice() < sep.as_slice() {
                (n.search(k), &n)
            } else {
                (right.search(k), &right)
            };
            assert_eq!(
                side.key(i.expect("a key stays found after the split")),
                k.as_slice()
            );
        }
        n.merge_from(&sep, &right);
        assert!(n.heads_match());
        let mut page = vec![0u8; 4096];
        let fill = n.encode_page(&mut page);
        let payload = &page[HDR..HDR + fill.used_bytes as usize];
        let back = Node::decode(payload, fill.kind, n.len(), 4096).unwrap();
        assert!(back.heads_match());
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(back.search(k), Ok(i));
        }
    }

    use super::*;

    fn leaf_with(keys: &[&[u8]]) -> Node {
        let mut n = Node::new_leaf(4096);
        for (i, k) in keys.iter().enumerate() {
            n.insert_at(i, k, Val::Inline(b"value"));
        }
        n
    }

    #[test]
    fn leaf_roundtrip_and_split() {
        let keys: Vec<Vec<u8>> = (0..40u32)
            .map(|i| format!("key{i:04}").into_bytes())
            .collect();
        let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
        let mut n = leaf_with(&refs);
        n.insert_at(40, b"zz", Val::Overflow(Extent::new(77, 1 << 20, 4096)));
        let mut page = vec![0u8; 4096];
        let used = n.encode(&mut page);
        let d = Node::decode(&page[HDR..HDR + used], Kind::Leaf, n.len(), 4096).unwrap();
        assert_eq!(d.len(), 41);
        assert_eq!(d.val(40), Val::Overflow(Extent::new(77, 1 << 20, 4096)));
        assert_eq!(d.key(3), b"key0003");
        let total = n.bytes();
        let (sep, right) = n.split(None);
        assert_eq!(n.bytes() + right.bytes(), total);
        assert!(n.key(n.len() - 1) < &sep[..] && &sep[..] <= right.key(0));
        assert!(n.bytes().abs_diff(right.bytes()) < 40);
    }

    #[test]
    fn branch_routing_split_merge() {
        let mut b = Node::new_branch(4096, 10, 0);
        for i in 1..10u64 {
            b.insert_child(i as usize, format!("k{i}").as_bytes(), 10 + i, 0);
        }
        assert_eq!(b.child(b.child_index(b"a")), 10);
        assert_eq!(b.child(b.child_index(b"k1")), 11);
        assert_eq!(b.child(b.child_index(b"k15")), 11);
        assert_eq!(b.child(b.child_index_lt(b"k1")), 10);
        let before = b.bytes();
        let (sep, right) = b.split(Some(4));
        assert_eq!(sep, b"k4");
        assert_eq!(right.child(0), 14);
        let mut left = b;
        assert_eq!(left.merged_bytes(&sep, &right), before);
        left.merge_from(&sep, &right);
        assert_eq!(left.bytes(), before);
        assert_eq!(left.child(left.child_index(b"k5")), 15);
        let mut page = vec![0u8; 4096];
        let used = left.encode(&mut page);
        let d = Node::decode(&page[HDR..HDR + used], Kind::BranchBases, left.len(), 4096).unwrap();
        assert_eq!(d.children(), left.children());
        left.remove_child(0);
        assert_eq!(left.child(0), 11);
        assert_eq!(left.bytes(), left.encode(&mut page));
    }

    /// A kind-3 branch payload by hand: child0 10, then "k1" -> 11.
    fn kind3_payload() -> Vec<u8> {
        let mut p = 10u64.to_le_bytes().to_vec();
        p.extend(2u16.to_le_bytes());
        p.extend(b"k1");
        p.extend(11u64.to_le_bytes());
        p
    }

    #[test]
    fn kind_3_branch_reads_unnamed_and_converts_to_kind_8() {
        let p = kind3_payload();
        let mut n = Node::decode(&p, Kind::Branch, 2, 4096).unwrap();
        assert!(!n.names_bases());
        let unnamed = |pid| NodeRef {
            pid,
            base: BASE_UNNAMED,
        };
        assert_eq!(n.child_ref(1), unnamed(11));
        // Hand count: 8 (child0) + 2 + 2 ("k1") + 8 (child).
        assert_eq!(n.bytes(), 20);
        let mut page = vec![0u8; 4096];
        assert_eq!(n.encode(&mut page), 20);
        assert_eq!(&page[HDR..HDR + 20], &p[..], "kind 3 re-encodes as read");
        assert!(n.upgrade_if_fits());
        // Kind 8: 16 (child0 | base0) + 2 + 2 + 16.
        assert_eq!(n.bytes(), 36);
        n.set_child(1, 12, 40);
        let used = n.encode(&mut page);
        assert_eq!(used, 36);
        let d = Node::decode(&page[HDR..HDR + used], Kind::BranchBases, 2, 4096).unwrap();
        assert_eq!(d.child_ref(0), unnamed(10));
        assert_eq!(d.child_ref(1), NodeRef { pid: 12, base: 40 });
        // An entry naming its child as its own base is malformed.
        page[HDR + 28..HDR + 36].copy_from_slice(&12u64.to_le_bytes());
        assert!(Node::decode(&page[HDR..HDR + used], Kind::BranchBases, 2, 4096).is_err());
    }

    #[test]
    fn a_full_kind_3_branch_stays_kind_3_until_it_splits() {
        let mut n = Node::decode(&kind3_payload(), Kind::Branch, 2, 512).unwrap();
        // 20 + 32 entries of 10 + 4 bytes = 468 of 480 as kind 3; kind 8
        // would add 8 per child (34 children).
        for i in 2..34u64 {
            n.insert_child(i as usize, format!("k1{i:02}").as_bytes(), 10 + i, 0);
        }
        assert_eq!(n.bytes(), 468);
        assert!(n.bytes() <= capacity(512) && n.bytes() + 8 * n.len() > capacity(512));
        assert!(!n.upgrade_if_fits() && !n.names_bases());
        let (_, right) = n.split(None);
        assert!(
            n.names_bases() && right.names_bases(),
            "both halves convert"
        );
        let mut page = vec![0u8; 512];
        assert_eq!(right.encode(&mut page), right.bytes());
    }

    #[test]
    fn branch_records_carry_the_base_on_kind_8_only() {
        let mut base = Node::new_branch(4096, 10, 0);
        base.insert_child(1, b"k1", 11, 0);
        let put = |ids: &[u64]| Change::Put {
            val: ids.iter().flat_map(|x| x.to_le_bytes()).collect(),
            overflow: false,
        };
        let mut c = Changes::new(5, 0, 4096);
        c.record(b"k1", put(&[12, 40]));
        let mut n = base.clone();
        n.replay(&c).unwrap();
        assert_eq!(n.child_ref(1), NodeRef { pid: 12, base: 40 });
        let mut short = Changes::new(5, 0, 4096);
        short.record(b"k1", put(&[12]));
        assert!(
            base.clone().replay(&short).is_err(),
            "kind 8 needs the base"
        );
        let mut legacy = Node::decode(&kind3_payload(), Kind::Branch, 2, 4096).unwrap();
        legacy.replay(&short).unwrap();
        assert_eq!(legacy.child_ref(1).base, BASE_UNNAMED);
        assert!(legacy.clone().replay(&c).is_err(), "kind 3 holds no base");
        // A change to a kind-8 branch logs child and base.
        base.set_changes(Some(Changes::new(5, 0, 4096)));
        base.set_child(1, 13, 41);
        let logged: Vec<_> = base
            .changes()
            .unwrap()
            .iter()
            .map(|(_, c)| c.to_owned())
            .collect();
        assert_eq!(logged, vec![put(&[13, 41])]);
    }

    proptest::proptest! {
        /// A leaf decoded with a delta's records merged in equals a BTreeMap
        /// model of the base with the changes applied: keys, values, payload
        /// bytes and the page it encodes to.
        #[test]
        fn merged_leaf_decode_matches_the_model(
            base in proptest::collection::btree_map(0u8..40, 0usize..30, 0..40),
            changes in proptest::collection::btree_map(0u8..40, proptest::option::of(0usize..30), 0..20),
        ) {
            use std::collections::BTreeMap;
            let key = |k: u8| vec![b'k', k];
            let val = |k: u8, len: usize| vec![k; len];
            let mut node = Node::new_leaf(4096);
            let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
            for (i, (&k, &len)) in base.iter().enumerate() {
                node.insert_at(i, &key(k), Val::Inline(&val(k, len)));
                model.insert(key(k), val(k, len));
            }
            let mut page = vec![0u8; 4096];
            let used = node.encode(&mut page);
            let mut c = Changes::new(5, 0, 4096);
            for (&k, len) in &changes {
                match len {
                    Some(len) => {
                        let v = val(k ^ 0x80, *len);
                        model.insert(key(k), v.clone());
                        c.record(&key(k), Change::Put { val: v, overflow: false });
                    }
                    None => {
                        model.remove(&key(k));
                        c.record(&key(k), Change::Remove);
                    }
                }
            }
            // Through a delta block, as a read finds the records.
            let mut block = vec![0u8; 4096];
            let c_used = c.encode(&mut block);
            let read = Changes::decode(&block[HDR..HDR + c_used], 4096).unwrap();
            let payload = &page[HDR..HDR + used];
            let merged = Node::decode_with(payload, Kind::Leaf, node.len(), 4096, &read).unwrap();
            let got: Vec<_> = (0..merged.len())
                .map(|i| match merged.val(i) {
                    Val::Inline(v) => (merged.key(i).to_vec(), v.to_vec()),
                    Val::Overflow(_) => unreachable!(),
                })
                .collect();
            let want: Vec<_> = model.into_iter().collect();
            proptest::prop_assert_eq!(&got, &want);
            // The same entries inserted one by one encode to the same page.
            let mut built = Node::new_leaf(4096);
            for (i, (k, v)) in want.iter().enumerate() {
                built.insert_at(i, k, Val::Inline(v));
            }
            proptest::prop_assert_eq!(merged.bytes(), built.bytes());
            let (mut a, mut b) = (vec![0u8; 4096], vec![0u8; 4096]);
            proptest::prop_assert_eq!(merged.encode(&mut a), built.encode(&mut b));
            proptest::prop_assert_eq!(a, b);
        }
    }

    #[test]
    fn separators() {
        assert_eq!(shortest_separator(b"abc", b"abd"), b"abd");
        assert_eq!(shortest_separator(b"ab", b"abzz"), b"abz");
        assert_eq!(shortest_separator(b"a", b"b123"), b"b");
    }

    #[test]
    fn limits() {
        assert_eq!(max_key(512), 98);
        assert_eq!(max_key(4096), 994);
        assert_eq!(max_key(65536), 16354);
    }
}
