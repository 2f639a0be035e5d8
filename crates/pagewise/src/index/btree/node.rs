//! B+tree nodes: the in-memory form and its page encoding (docs/design.md,
//! "B+tree node payload"). Overflow references are [`Extent`]s.

use super::delta::{Change, Changes};
use crate::store::extent::{Extent, EXTENT_REF_BYTES};
use crate::store::image::{NodeImage, PageFill};
use crate::store::page::{get_u16, get_u32, get_u64, put_u16, put_u32, put_u64, Kind, HDR};

pub const LEAF_ENT: usize = 6;
pub const BRANCH_ENT: usize = 10;
pub const BRANCH_BASE: usize = 8;
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

#[derive(Clone, Copy, Debug)]
struct Ent {
    k: u32,
    kl: u32,
    v: u32,
    vl: u32,
    ovf: bool,
}

#[derive(Clone, Debug)]
pub struct Node {
    /// Page size of the database: sizes overflow extents.
    page_size: u32,
    leaf: bool,
    data: Vec<u8>,
    ents: Vec<Ent>,
    kids: Vec<u64>,
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
            bytes: 0,
            garbage: 0,
            changes: None,
        }
    }

    pub fn new_branch(page_size: usize, child0: u64) -> Self {
        let mut n = Self::new_leaf(page_size);
        n.leaf = false;
        n.ents.push(Ent {
            k: 0,
            kl: 0,
            v: 0,
            vl: 0,
            ovf: false,
        });
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
        96 + self.data.capacity() + self.ents.capacity() * 20 + self.kids.capacity() * 8 + changes
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

    /// Branch: logs child `i`'s pointer under its separator (child 0: the
    /// empty key).
    fn log_child(&mut self, i: usize) {
        let key = if i == 0 {
            Vec::new()
        } else {
            self.key(i).to_vec()
        };
        let pid = self.kids[i];
        self.log(&key, || Change::Put {
            val: pid.to_le_bytes().to_vec(),
            overflow: false,
        });
    }

    pub fn key(&self, i: usize) -> &[u8] {
        let e = &self.ents[i];
        &self.data[e.k as usize..(e.k + e.kl) as usize]
    }

    pub fn val(&self, i: usize) -> Val<'_> {
        let e = &self.ents[i];
        let b = &self.data[e.v as usize..(e.v + e.vl) as usize];
        if e.ovf {
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
            LEAF_ENT + (e.kl + e.vl) as usize
        } else {
            BRANCH_ENT + e.kl as usize
        }
    }

    /// Leaf: position of `key`, or where it would be inserted.
    pub fn search(&self, key: &[u8]) -> Result<usize, usize> {
        self.ents
            .binary_search_by(|e| self.data[e.k as usize..(e.k + e.kl) as usize].cmp(key))
    }

    /// Branch: the child whose range holds `key`.
    pub fn child_index(&self, key: &[u8]) -> usize {
        self.ents[1..].partition_point(|e| &self.data[e.k as usize..(e.k + e.kl) as usize] <= key)
    }

    /// Branch: the child holding the largest keys below `key`.
    pub fn child_index_lt(&self, key: &[u8]) -> usize {
        self.ents[1..].partition_point(|e| &self.data[e.k as usize..(e.k + e.kl) as usize] < key)
    }

    pub fn child(&self, i: usize) -> u64 {
        self.kids[i]
    }
    #[cfg(test)]
    pub fn children(&self) -> &[u64] {
        &self.kids
    }
    pub fn set_child(&mut self, i: usize, pid: u64) {
        if self.kids[i] != pid {
            self.kids[i] = pid;
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
            Val::Inline(b) => (self.push_bytes(b), b.len() as u32, false),
            Val::Overflow(ext) => {
                let mut r = [0u8; OVF_REF];
                ext.encode(&mut r);
                (self.push_bytes(&r), OVF_REF as u32, true)
            }
        };
        Ent {
            k,
            kl: key.len() as u32,
            v,
            vl,
            ovf,
        }
    }

    /// Leaf: inserts a new entry at position `i`.
    pub fn insert_at(&mut self, i: usize, key: &[u8], val: Val<'_>) {
        debug_assert!(self.leaf);
        let e = self.make_ent(key, val);
        self.ents.insert(i, e);
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
        let mut e = self.make_ent(&[], val);
        e.k = old.k;
        e.kl = old.kl;
        self.ents[i] = e;
        self.garbage += old.vl as usize;
        self.bytes = self.bytes + val.stored_len() - old.vl as usize;
        self.maybe_compact();
    }

    /// Leaf: removes entry `i`.
    pub fn remove_at(&mut self, i: usize) {
        if self.changes.is_some() {
            let key = self.key(i).to_vec();
            self.log(&key, || Change::Remove);
        }
        let old = self.ents.remove(i);
        self.garbage += (old.kl + old.vl) as usize;
        self.bytes -= LEAF_ENT + (old.kl + old.vl) as usize;
        self.maybe_compact();
    }

    /// Branch: inserts separator `sep` with child `pid` at position `i` (>= 1).
    pub fn insert_child(&mut self, i: usize, sep: &[u8], pid: u64) {
        debug_assert!(!self.leaf && i >= 1);
        let e = self.make_ent(sep, Val::Inline(&[]));
        self.ents.insert(i, e);
        self.kids.insert(i, pid);
        self.bytes += BRANCH_ENT + sep.len();
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
        self.kids.remove(i);
        self.garbage += old.kl as usize;
        self.bytes -= BRANCH_ENT + old.kl as usize;
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
        n.data.reserve(self.data.len() - self.garbage);
        n
    }

    /// Appends entry `i` of `src` (keys must stay ordered).
    fn push_from(&mut self, src: &Node, i: usize) {
        if self.leaf {
            let e = self.make_ent(src.key(i), src.val(i));
            self.ents.push(e);
        } else {
            let key = if self.ents.is_empty() {
                &[][..]
            } else {
                src.key(i)
            };
            let e = self.make_ent(key, Val::Inline(&[]));
            self.ents.push(e);
            self.kids.push(src.kids[i]);
        }
        self.recount_last();
    }

    fn recount_last(&mut self) {
        let i = self.ents.len() - 1;
        if self.leaf {
            self.bytes += self.entry_bytes(i);
        } else if i == 0 {
            self.bytes += BRANCH_BASE;
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
        *self = left;
        (sep, right)
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

    /// Size after merging `right` into `self` under separator `sep`.
    pub fn merged_bytes(&self, sep: &[u8], right: &Node) -> usize {
        if self.leaf {
            self.bytes + right.bytes
        } else {
            self.bytes + right.bytes - BRANCH_BASE + BRANCH_ENT + sep.len()
        }
    }

    /// Appends all of `right` (whose keys are all >= `sep`).
    pub fn merge_from(&mut self, sep: &[u8], right: &Node) {
        assert!(self.changes.is_none(), "a merged node is written whole");
        for i in 0..right.len() {
            if !self.leaf && i == 0 {
                let e = self.make_ent(sep, Val::Inline(&[]));
                self.ents.push(e);
                self.kids.push(right.kids[0]);
                self.bytes += BRANCH_ENT + sep.len();
            } else {
                self.push_from(right, i);
            }
        }
    }

    /// Applies a delta block's records to this freshly decoded base image
    /// (nothing is logged). A put replaces or inserts; a remove of a key the
    /// base lacks is nothing (the key was put and removed since the base).
    /// Bad records and a result that does not fit a page are errors.
    pub fn replay(&mut self, changes: &Changes) -> Result<(), String> {
        assert!(
            self.changes.is_none(),
            "replay onto a node with a change set"
        );
        for (key, change) in changes.iter() {
            let fits = if self.leaf {
                self.replay_leaf(key, change)
            } else {
                self.replay_branch(key, change)
            };
            if !fits {
                return Err(format!("record for key {key:02x?} does not fit this node"));
            }
        }
        let cap = capacity(self.page_size as usize);
        if self.bytes > cap {
            return Err(format!(
                "{} payload bytes after replay, a page holds {cap}",
                self.bytes
            ));
        }
        Ok(())
    }

    fn replay_leaf(&mut self, key: &[u8], change: &Change) -> bool {
        let ps = self.page_size as usize;
        let pos = self.search(key);
        let Change::Put { val, overflow } = change else {
            if let Ok(i) = pos {
                self.remove_at(i);
            }
            return true;
        };
        let v = if *overflow {
            match Extent::decode(val, ps) {
                Some(ext) => Val::Overflow(ext),
                None => return false,
            }
        } else {
            Val::Inline(val)
        };
        if LEAF_ENT + key.len() + v.stored_len() > max_entry(ps) {
            return false;
        }
        match pos {
            Ok(i) => self.replace_at(i, v),
            Err(i) => self.insert_at(i, key, v),
        }
        true
    }

    fn replay_branch(&mut self, key: &[u8], change: &Change) -> bool {
        let pid = match change {
            Change::Put {
                val,
                overflow: false,
            } if val.len() == 8 => Some(get_u64(val, 0)),
            Change::Remove if !key.is_empty() => None,
            _ => return false,
        };
        if key.is_empty() {
            self.kids[0] = pid.expect("checked above");
            return true;
        }
        let pos = self.ents[1..]
            .binary_search_by(|e| self.data[e.k as usize..(e.k + e.kl) as usize].cmp(key));
        match (pos, pid) {
            (Ok(j), Some(pid)) => self.kids[j + 1] = pid,
            (Err(j), Some(pid)) if BRANCH_ENT + key.len() <= max_entry(self.page_size as usize) => {
                self.insert_child(j + 1, key, pid)
            }
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
                put_u16(page, at, e.kl as u16);
                put_u32(page, at + 2, e.vl | if e.ovf { OVF_BIT } else { 0 });
                at += LEAF_ENT;
                let k = self.key(i);
                page[at..at + k.len()].copy_from_slice(k);
                at += k.len();
                let v = &self.data[e.v as usize..(e.v + e.vl) as usize];
                page[at..at + v.len()].copy_from_slice(v);
                at += v.len();
            }
        } else {
            put_u64(page, at, self.kids[0]);
            at += BRANCH_BASE;
            for i in 1..self.len() {
                let k = self.key(i);
                put_u16(page, at, k.len() as u16);
                at += 2;
                page[at..at + k.len()].copy_from_slice(k);
                at += k.len();
                put_u64(page, at, self.kids[i]);
                at += 8;
            }
        }
        let used = at - HDR;
        debug_assert_eq!(used, self.bytes, "node byte count drifted");
        used
    }

    /// Parses a payload written by [`Node::encode`]. Every length is checked
    /// against the payload before use; a bad one is an error, never a panic.
    pub fn decode(
        payload: &[u8],
        leaf: bool,
        count: usize,
        page_size: usize,
    ) -> Result<Node, String> {
        let (mut n, at) = if leaf {
            Self::decode_leaf(payload, count, page_size)?
        } else {
            Self::decode_branch(payload, count, page_size)?
        };
        if at != payload.len() {
            let trailing = payload.len() - at;
            return Err(format!("{trailing} trailing bytes after {count} entries"));
        }
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
        let short = || format!("entry runs past the payload ({} bytes)", payload.len());
        let mut at = 0;
        for i in 0..count {
            if at + LEAF_ENT > payload.len() {
                return Err(short());
            }
            let kl = get_u16(payload, at) as usize;
            let raw = get_u32(payload, at + 2);
            let (vl, ovf) = ((raw & !OVF_BIT) as usize, raw & OVF_BIT != 0);
            at += LEAF_ENT;
            if at + kl + vl > payload.len() || (ovf && vl != OVF_REF) {
                return Err(short());
            }
            let v_at = at + kl;
            if ovf && Extent::decode(&payload[v_at..v_at + OVF_REF], page_size).is_none() {
                return Err(format!("entry {i} holds an invalid overflow reference"));
            }
            let k = n.push_bytes(&payload[at..v_at]);
            let v = n.push_bytes(&payload[v_at..v_at + vl]);
            let (kl, vl) = (kl as u32, vl as u32);
            n.ents.push(Ent { k, kl, v, vl, ovf });
            at = v_at + vl as usize;
        }
        Ok((n, at))
    }

    fn decode_branch(
        payload: &[u8],
        count: usize,
        page_size: usize,
    ) -> Result<(Node, usize), String> {
        if count == 0 || payload.len() < BRANCH_BASE {
            return Err("branch without children".into());
        }
        let short = || format!("entry runs past the payload ({} bytes)", payload.len());
        let mut n = Node::new_branch(page_size, get_u64(payload, 0));
        let mut at = BRANCH_BASE;
        for _ in 1..count {
            if at + 2 > payload.len() {
                return Err(short());
            }
            let kl = get_u16(payload, at) as usize;
            at += 2;
            if at + kl + 8 > payload.len() {
                return Err(short());
            }
            let k = n.push_bytes(&payload[at..at + kl]);
            let (kl, v, vl, ovf) = (kl as u32, 0, 0, false);
            n.ents.push(Ent { k, kl, v, vl, ovf });
            n.kids.push(get_u64(payload, at + kl as usize));
            at += kl as usize + 8;
        }
        Ok((n, at))
    }
}

impl NodeImage for Node {
    fn charge_bytes(&self) -> usize {
        self.mem_size()
    }

    fn encode_page(&self, page: &mut [u8]) -> PageFill {
        assert_eq!(page.len(), self.page_size as usize);
        let (kind, used) = match &self.changes {
            Some(c) => (Kind::Delta, c.encode(page)),
            None => (
                if self.leaf { Kind::Leaf } else { Kind::Branch },
                self.encode(page),
            ),
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

/// The shortest key s with left < s <= right.
pub fn shortest_separator(left: &[u8], right: &[u8]) -> Vec<u8> {
    debug_assert!(left < right);
    let common = left.iter().zip(right).take_while(|(a, b)| a == b).count();
    right[..(common + 1).min(right.len())].to_vec()
}

#[cfg(test)]
mod tests {
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
        let d = Node::decode(&page[HDR..HDR + used], true, n.len(), 4096).unwrap();
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
        let mut b = Node::new_branch(4096, 10);
        for i in 1..10u64 {
            b.insert_child(i as usize, format!("k{i}").as_bytes(), 10 + i);
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
        let d = Node::decode(&page[HDR..HDR + used], false, left.len(), 4096).unwrap();
        assert_eq!(d.children(), left.children());
        left.remove_child(0);
        assert_eq!(left.child(0), 11);
        assert_eq!(left.bytes(), left.encode(&mut page));
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
