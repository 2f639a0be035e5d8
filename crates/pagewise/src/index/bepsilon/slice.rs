//! Slices: the part of a segmented buffer a scan reads when it does not
//! load the whole buffer. A scan needs every message buffered for the key
//! range it resolves, so a get's probe (one key's messages) will not do;
//! but a buffer of an internal node covers its whole child's key range (up
//! to node bytes / fanout, 128 KiB in a default tree), of which one scan
//! step resolves a basement's range or less. Where a get would probe
//! (`read::probes_instead`: the cache has no room for the buffer) and the
//! buffer is stored as segments, a scan reads the one segment holding its
//! position, decodes it whole ([`format::decode_segment`]) and resolves
//! only up to the segment's end; the cursor keeps its slices between steps
//! ([`Slices`]) so the next step reads the next segment, not this one again.

use super::buffer::Buffer;
use super::format;
use super::node::{Node, Part};
use super::segment::{self, Segs};
use crate::error::Result;
use crate::index::Index;
use crate::store::extent::Extent;
use crate::store::page::Kind;
use std::ops::Bound;
use std::sync::Arc;

/// Slices a cursor keeps at most: one per buffer on the path of a tree of
/// up to 9 levels (a step needs one slice per buffer it passes, and the
/// next step the same ones or the next segments). Each is about a
/// segment's raw bytes (a quarter of the tree's basement bytes, at least a
/// page: `segment::target_bytes`), so a cursor holds at most 8 of those
/// beside the cache.
const KEPT: usize = 8;

/// The messages of segment `seg` of buffer `part` of the clean node at
/// `first_page` (their key range: [`covered`]).
pub struct Slice {
    pub first_page: u64,
    pub part: usize,
    pub seg: usize,
    pub buf: Arc<Part>,
}

/// A cursor's slices, all read under one reuse generation `gen` (a clean
/// node's extent does not change until it is reused, so they hold while
/// the store's `reuse_gen` does, or under a pinned snapshot).
#[derive(Default)]
pub struct Slices {
    pub gen: u64,
    pub list: Vec<Slice>,
}

impl Slices {
    /// Keeps `s`, read under generation `gen`, in place of the slice of
    /// the same buffer it keeps (a cursor moves through a buffer one
    /// segment after the other): slices of another generation are dropped,
    /// then the oldest beyond [`KEPT`].
    pub fn keep(&mut self, s: Slice, gen: u64) {
        if self.gen != gen {
            self.list.clear();
            self.gen = gen;
        }
        self.list
            .retain(|k| !(k.first_page == s.first_page && k.part == s.part));
        if self.list.len() >= KEPT {
            self.list.remove(0);
        }
        self.list.push(s);
        assert!(self.list.len() <= KEPT);
    }
}

/// The segment of `segs` a cursor at `pos` moving `forward` resolves from:
/// the one holding `pos`'s key (forward), or the next key below it
/// (backward); the first (last) from an unbounded position. Keys below
/// segment 0's first key belong to segment 0.
pub fn segment_at(segs: &Segs, pos: &Bound<Vec<u8>>, forward: bool) -> usize {
    assert!(segs.len() >= 2);
    // Segments whose first key is at most (backward, excluded: below) the key.
    let upto = |k: &[u8], strict: bool| {
        let (mut lo, mut hi) = (0, segs.len());
        for _ in 0..usize::BITS {
            if lo >= hi {
                break;
            }
            let mid = (lo + hi) / 2;
            let f = segs.first_key(mid);
            if f < k || (!strict && f == k) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    };
    let n = match (pos, forward) {
        (Bound::Unbounded, true) => 1,
        (Bound::Unbounded, false) => segs.len(),
        (Bound::Included(k), _) | (Bound::Excluded(k), true) => upto(k, false),
        (Bound::Excluded(k), false) => upto(k, true),
    };
    let j = n.saturating_sub(1);
    assert!(j < segs.len());
    j
}

/// Where segment `seg` of buffer `i` of `n` is stored: (offset in the
/// node's extent, stored bytes).
pub fn range(n: &Node, i: usize, seg: usize) -> (u64, u64) {
    let (d, segs) = (&n.dir[i], segment::of(n.segs.as_deref(), i));
    assert!(!n.is_leaf() && seg < segs.len());
    let off: u64 = (0..seg).map(|x| segs.get(x).stored_bytes as u64).sum();
    let len = segs.get(seg).stored_bytes as u64;
    assert!(off + len <= d.comp_bytes as u64);
    (d.offset as u64 + off, len)
}

/// Reads segment `seg` of buffer `i` of the node `n` at `ext` and decodes
/// it ([`decode`]).
pub fn read(ix: &Index, ext: &Extent, n: &Node, i: usize, seg: usize) -> Result<Slice> {
    let (at, len) = range(n, i, seg);
    let c = ix.store.pager.read_range(ext, Kind::BEpsilon, at, len)?;
    decode(ix, ext, n, (i, seg), &c)
}

/// The slice of segment `seg` of buffer `i` of the node `n` at `ext`,
/// from its stored bytes `c` (counted as a probe of the node's height).
pub fn decode(
    ix: &Index,
    ext: &Extent,
    n: &Node,
    (i, seg): (usize, usize),
    c: &[u8],
) -> Result<Slice> {
    let pager = &ix.store.pager;
    let (at, len) = range(n, i, seg);
    assert_eq!(c.len() as u64, len);
    let (_, pages) = ext.pages_of_range(at, len, pager.ps);
    ix.counters
        .bepsilon_reads
        .probe_read(n.height, pages * pager.ps as u64);
    let buf: Buffer = format::decode_segment(n, i, seg, c).map_err(|w| {
        let what = format!("B-epsilon node: partition {i}: {w}");
        pager.corrupt(ext.first_page, what)
    })?;
    Ok(Slice {
        first_page: ext.first_page,
        part: i,
        seg,
        buf: Arc::new(Part::Buf(buf)),
    })
}

/// The key range segment `seg` of buffer `i` of `n` covers: from its
/// first key (None for segment 0: the partition's start) up to the next
/// segment's (None for the last: the partition's end).
pub fn covered(n: &Node, i: usize, seg: usize) -> (Option<&[u8]>, Option<&[u8]>) {
    let segs = segment::of(n.segs.as_deref(), i);
    assert!(seg < segs.len());
    let lo = (seg > 0).then(|| segs.first_key(seg));
    let hi = (seg + 1 < segs.len()).then(|| segs.first_key(seg + 1));
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::bepsilon::segment::{Segment, Table};

    fn table(keys: &[&[u8]]) -> Table {
        let plan: Vec<Segment> = keys
            .iter()
            .map(|k| Segment {
                stored_bytes: 10,
                raw_bytes: 10,
                crc: 0,
                first_key: (*k).into(),
            })
            .collect();
        Table::of_plans(&[plan])
    }

    #[test]
    fn a_position_picks_the_segment_holding_its_next_key() {
        let t = table(&[b"b", b"d", b"f"]);
        let segs = segment::of(Some(&t), 0);
        let inc = |k: &[u8]| Bound::Included(k.to_vec());
        let exc = |k: &[u8]| Bound::Excluded(k.to_vec());
        let fwd = |p| segment_at(&segs, &p, true);
        let back = |p| segment_at(&segs, &p, false);
        assert_eq!(fwd(Bound::Unbounded), 0);
        assert_eq!(fwd(inc(b"a")), 0, "below the first key: segment 0");
        assert_eq!(fwd(inc(b"b")), 0);
        assert_eq!(fwd(inc(b"c")), 0);
        assert_eq!(fwd(inc(b"d")), 1);
        assert_eq!(fwd(exc(b"d")), 1, "keys above d start in d's segment");
        assert_eq!(fwd(inc(b"z")), 2);
        assert_eq!(back(Bound::Unbounded), 2);
        assert_eq!(back(exc(b"d")), 0, "keys below d end in segment 0");
        assert_eq!(back(inc(b"d")), 1);
        assert_eq!(back(exc(b"e")), 1);
        assert_eq!(back(exc(b"a")), 0);
        assert_eq!(back(inc(b"z")), 2);
    }
}
