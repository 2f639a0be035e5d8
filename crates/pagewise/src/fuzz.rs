//! Fuzz entry points: one per decoder of bytes read from disk (the targets
//! of `fuzz/`, docs/reliability.md "Fuzzing"). Each decodes arbitrary
//! bytes, and when they decode, encodes the result and decodes it again:
//! a decoder must answer bad bytes with an error, never a panic or an
//! unbounded allocation, and what it accepts must survive its encoder.
//! Context a decoder needs (page size, page kind, entry count, key bounds)
//! comes from the input's first bytes, each bounded to a value the engine
//! can meet. A panic here is a bug found; the cases kept under
//! `tests/fuzz_cases/<target>/` are replayed by this module's tests.

use crate::index::bepsilon::runs::{self, Runs};
use crate::index::bepsilon::value::{Packed as PackedRef, MAX_RUN_PAGES, STORED_REF_BYTES};
use crate::index::bepsilon::{self, buffer::Buffer, format, packed::Packed, segment};
use crate::index::btree::{self, delta::Changes, node::Node};
use crate::index::{TreeKind, Trees};
use crate::log::{ops, record};
use crate::store::catalog::Catalog;
use crate::store::extent::{Extent, EXTENT_REF_BYTES};
use crate::store::page::{self, get_u32, get_u64, hdr, Kind, HDR};
use crate::store::superblock::{self, Superblock, FORMAT_VERSION};
use std::path::Path;

/// A fuzz target: its name (the file in `fuzz/fuzz_targets/`, the folder
/// of its corpus and kept cases) and its entry.
pub type Target = (&'static str, fn(&[u8]));

/// Every target.
pub const TARGETS: &[Target] = &[
    ("page", page),
    ("catalog", catalog),
    ("descriptors", descriptors),
    ("btree_node", btree_node),
    ("btree_delta", btree_delta),
    ("bepsilon_node", bepsilon_node),
    ("bepsilon_part", bepsilon_part),
    ("log_record", log_record),
    ("log_ops", log_ops),
    ("value_table", value_table),
];

/// The fuzz input read front to back; past its end every read is zero.
struct Input<'a> {
    b: &'a [u8],
}

impl<'a> Input<'a> {
    fn u8(&mut self) -> u8 {
        self.take(1).first().copied().unwrap_or(0)
    }
    fn u16(&mut self) -> u16 {
        let mut x = [0u8; 2];
        let t = self.take(2);
        x[..t.len()].copy_from_slice(t);
        u16::from_le_bytes(x)
    }
    /// Up to `n` bytes.
    fn take(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.b.split_at(n.min(self.b.len()));
        self.b = rest;
        head
    }
    /// A page size the engine accepts: 512 B to 64 KiB.
    fn page_size(&mut self) -> usize {
        crate::MIN_PAGE_SIZE << (self.u8() % 8)
    }
    fn rest(&mut self) -> &'a [u8] {
        self.take(self.b.len())
    }
}

/// Page kinds in code order.
const KINDS: [Kind; 8] = [
    Kind::Meta,
    Kind::Leaf,
    Kind::Branch,
    Kind::Overflow,
    Kind::Blob,
    Kind::Delta,
    Kind::BEpsilon,
    Kind::BranchBases,
];

/// A page's header check (`page::verify`, `page::verify_base`), then what
/// its kind holds: a superblock, a B+tree node or a delta block. Input:
/// flags (bit 0: reseal the checksum first; bits 1..: kinds accepted, all
/// when none), page size code, then the page (zero-padded).
pub fn page(data: &[u8]) {
    let mut inp = Input { b: data };
    let flags = inp.u8();
    let ps = inp.page_size();
    let body = inp.rest();
    let mut pg = vec![0u8; ps];
    let n = body.len().min(ps);
    pg[..n].copy_from_slice(&body[..n]);
    if flags & 1 != 0 {
        page::reseal_any(&mut pg);
    }
    let mask = flags >> 1;
    let want: Vec<Kind> = (0..KINDS.len())
        .filter(|&i| mask == 0 || mask & (1 << (i % 7)) != 0)
        .map(|i| KINDS[i])
        .collect();
    let pid = get_u64(&pg, hdr::PID.at);
    let path = Path::new("fuzz");
    let (h, (h2, payload_crc)) = match (
        page::verify(&pg, pid, &want, path, 0),
        page::verify_base(&pg, pid, &want, path, 0),
    ) {
        (Ok(h), Ok(b)) => (h, b),
        (Err(a), Err(b)) => return assert_eq!(a.to_string(), b.to_string()),
        (a, b) => panic!("verify {a:?} and verify_base {b:?} disagree"),
    };
    assert_eq!(format!("{h:?}"), format!("{h2:?}"));
    let payload = &pg[HDR..HDR + h.used as usize];
    assert_eq!(payload_crc, crc32c::crc32c(payload));
    let mut again = pg.clone();
    page::seal(&mut again, pid, h);
    let h3 = page::verify(&again, pid, &want, path, 0).expect("a sealed page verifies");
    assert_eq!(format!("{h:?}"), format!("{h3:?}"));
    match h.kind {
        Kind::Meta => superblock_round_trip(&pg),
        Kind::Leaf | Kind::Branch | Kind::BranchBases => {
            if let Ok(img) = btree::decode_page(h.kind, h.count as usize, payload, ps) {
                node_round_trip(btree::node_ref(&img), payload, h.kind, ps);
            }
        }
        Kind::Delta => {
            if let Ok(c) = Changes::decode(payload, ps) {
                delta_round_trip(&c, payload, ps);
            }
        }
        _ => {}
    }
}

/// A verified meta page as `Db::open` reads it: sniffed, decoded, its
/// catalog extent judged; written back when it is of this format.
fn superblock_round_trip(pg: &[u8]) {
    let sniffed = superblock::sniff(pg);
    let Ok(sb) = Superblock::decode(pg) else {
        return;
    };
    assert_eq!(sniffed, Some((sb.version, sb.page_size)));
    if sb.page_size as usize != pg.len() {
        return; // `Db::open` refuses it before looking further
    }
    let sane = sb.catalog_is_sane();
    if sb.version != FORMAT_VERSION || sb.count_pages < 2 {
        return;
    }
    let mut out = vec![0u8; pg.len()];
    sb.encode(&mut out);
    let back = Superblock::decode(&out).expect("an encoded superblock decodes");
    assert_eq!(back, sb);
    assert_eq!(back.catalog_is_sane(), sane);
}

/// The catalog (`Catalog::decode`) and its entries' descriptors
/// (`Trees::from_catalog`). Input: page size code, then the catalog bytes.
pub fn catalog(data: &[u8]) {
    let mut inp = Input { b: data };
    let ps = inp.page_size();
    let Ok(c) = Catalog::decode(inp.rest()) else {
        return;
    };
    let mut end = 2u64;
    for &(s, n) in &c.free {
        assert!(n > 0 && s >= end, "free list not sorted: {:?}", c.free);
        end = s.checked_add(n).expect("a free extent past 2^64 pages");
    }
    if let Ok(trees) = Trees::from_catalog(c.trees.clone(), ps) {
        let entries = trees.to_catalog();
        let again = Trees::from_catalog(entries.clone(), ps).expect("re-encoded entries");
        assert_eq!(again.to_catalog(), entries);
    }
    let mut canonical = c.clone();
    canonical.free = coalesced(&c.free);
    let enc = canonical.encode();
    assert_eq!(Catalog::decode(&enc), Ok(canonical));
}

/// Free extents with touching neighbours merged.
fn coalesced(free: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(free.len());
    for &(s, n) in free {
        match out.last_mut() {
            Some((ls, ln)) if *ls + *ln == s => *ln += n,
            _ => out.push((s, n)),
        }
    }
    out
}

/// The catalog's small records: the B+tree root descriptor, B-epsilon
/// parameters and root descriptor, a tree kind, an extent reference. Input:
/// selector, page size code, then the record (for a B-epsilon root
/// descriptor: the parameters of 12 or 16 bytes by the selector's bit 3,
/// then the descriptor).
pub fn descriptors(data: &[u8]) {
    let mut inp = Input { b: data };
    let sel = inp.u8();
    let ps = inp.page_size();
    match sel % 4 {
        0 => {
            let b = inp.rest();
            if let Ok(m) = btree::Meta::decode(b) {
                assert_eq!(m.encode(), b);
            }
        }
        1 => {
            let code = inp.u8();
            let b = inp.rest();
            if let Ok(o) = bepsilon::BEpsilonOptions::decode(b) {
                assert_eq!(o.encode(), b);
            }
            if let Ok(k) = TreeKind::decode(code, b) {
                assert_eq!(TreeKind::decode(k.code(), &k.params()).ok(), Some(k));
            }
        }
        2 => {
            let params = inp.take(if sel & 8 != 0 { 16 } else { 12 });
            let b = inp.rest();
            if let Ok(m) = bepsilon::Meta::decode(params, b, ps) {
                // A 44-byte descriptor (format 9) is written back as 60
                // bytes, the value table field all zero.
                let mut want = b.to_vec();
                want.resize(bepsilon::DESC_BYTES, 0);
                assert_eq!(m.encode(), want);
            }
        }
        _ => {
            let b = inp.rest();
            if let Some(e) = Extent::decode(b, ps) {
                let mut out = [0u8; EXTENT_REF_BYTES];
                e.encode(&mut out);
                assert_eq!(&out[..], &b[..EXTENT_REF_BYTES]);
                assert_eq!(Extent::decode(&out, ps), Some(e));
            }
        }
    }
}

/// Context of a B+tree node payload: page size code, kind (leaf, kind-3 or
/// kind-8 branch), entry count; returns (page size, kind, count).
fn node_context(inp: &mut Input) -> (usize, Kind, usize) {
    let ps = inp.page_size();
    let kind = [Kind::Leaf, Kind::Branch, Kind::BranchBases][inp.u8() as usize % 3];
    (ps, kind, inp.u16() as usize)
}

/// A B+tree node payload (`Node::decode`). Input: page size code, kind,
/// entry count (u16), then the payload (cut to the page).
pub fn btree_node(data: &[u8]) {
    let mut inp = Input { b: data };
    let (ps, kind, count) = node_context(&mut inp);
    let payload = inp.take(ps - HDR);
    if let Ok(n) = Node::decode(payload, kind, count, ps) {
        node_round_trip(&n, payload, kind, ps);
    }
}

/// `n`, decoded from `payload`, encodes to the same bytes and decodes again.
fn node_round_trip(n: &Node, payload: &[u8], kind: Kind, ps: usize) {
    let mut pg = vec![0u8; ps];
    let used = n.encode(&mut pg);
    let enc = &pg[HDR..HDR + used];
    assert_eq!(enc, payload, "a decoded node re-encodes to its bytes");
    let again = Node::decode(enc, kind, n.len(), ps).expect("an encoded node decodes");
    let mut pg2 = vec![0u8; ps];
    assert_eq!(again.encode(&mut pg2), used);
    assert_eq!(pg2, pg);
}

/// A delta block (`Changes::decode`) and its base with the changes applied
/// (`Node::decode_with`). Input: page size code, base kind, base entry
/// count (u16), base payload length (u16), the base payload, then the delta
/// block payload.
pub fn btree_delta(data: &[u8]) {
    let mut inp = Input { b: data };
    let (ps, kind, count) = node_context(&mut inp);
    let base_len = (inp.u16() as usize).min(ps - HDR);
    let base = inp.take(base_len);
    let payload = inp.take(ps - HDR);
    let Ok(c) = Changes::decode(payload, ps) else {
        return;
    };
    delta_round_trip(&c, payload, ps);
    if let Ok(n) = Node::decode_with(base, kind, count, ps, &c) {
        let mut pg = vec![0u8; ps];
        let used = n.encode(&mut pg);
        node_round_trip(&n, &pg[HDR..HDR + used], kind, ps);
    }
}

/// Decoded changes `c` encode to their `payload` and decode again.
fn delta_round_trip(c: &Changes, payload: &[u8], ps: usize) {
    let records: Vec<_> = c
        .iter()
        .map(|(k, ch)| (k.to_vec(), ch.to_owned()))
        .collect();
    assert_eq!(records.len(), c.count_keys());
    let mut pg = vec![0u8; HDR + payload.len()];
    let used = c.encode(&mut pg);
    assert_eq!(&pg[HDR..HDR + used], payload);
    let again = Changes::decode(&pg[HDR..], ps).expect("encoded changes decode");
    let back: Vec<_> = again
        .iter()
        .map(|(k, ch)| (k.to_vec(), ch.to_owned()))
        .collect();
    assert_eq!(back, records);
}

/// A whole B-epsilon node (`format::decode_full`: header, directory,
/// pivots, child references, filters, segment lists, partitions); written
/// back whole and cut into segments, each decoding to the same contents.
/// Input: flags (bit 0: reseal the partitions' checksums first), segment
/// size code, page size code, then the node's bytes.
pub fn bepsilon_node(data: &[u8]) {
    let mut inp = Input { b: data };
    let flags = inp.u8();
    let segment_bytes = 64usize << (inp.u8() % 8);
    let ps = inp.page_size();
    let mut b = inp.rest().to_vec();
    if flags & 1 != 0 {
        reseal_partitions(&mut b);
    }
    let Ok(n) = format::decode_full(&b, ps) else {
        return;
    };
    let comp = bepsilon::Compression::from_code(n.comp).expect("checked at decode");
    let want = contents(&n);
    for seg in [0, segment_bytes] {
        let enc = format::encode(&n, comp, 1, seg);
        let back = format::decode_full(&enc, ps)
            .unwrap_or_else(|e| panic!("an encoded node decodes: {e}"));
        assert_eq!(contents(&back), want, "segments of {seg} bytes");
    }
}

/// What a B-epsilon node holds: height, pivots, children and each
/// partition's raw bytes.
fn contents(n: &bepsilon::node::Node) -> (u32, Vec<Vec<u8>>, String, Vec<Vec<u8>>) {
    let parts = n
        .parts
        .iter()
        .map(|p| match p.as_deref() {
            Some(bepsilon::node::Part::Packed(b)) => b.raw().to_vec(),
            Some(bepsilon::node::Part::Buf(b)) => {
                let mut out = Vec::new();
                b.encode_into(&mut out);
                out
            }
            None => panic!("a fully decoded node has every partition"),
        })
        .collect();
    let pivots = n.pivots.iter().map(<[u8]>::to_vec).collect();
    (n.height, pivots, format!("{:?}", n.children), parts)
}

/// Rewrites each directory entry's checksum to match the bytes it names
/// (where they lie inside `b`), so mutations reach the partition decoders.
fn reseal_partitions(b: &mut [u8]) {
    use bepsilon::layout::{dir, header};
    use bepsilon::node::{DIR_ENTRY_BYTES, HEADER_BYTES};
    if b.len() < HEADER_BYTES {
        return;
    }
    let count = page::get_u16(b, header::PARTS.at) as usize;
    for i in 0..count {
        let d = HEADER_BYTES + i * DIR_ENTRY_BYTES;
        if d + DIR_ENTRY_BYTES > b.len() {
            return;
        }
        let at = get_u32(b, d + dir::OFFSET.at) as usize;
        let len = get_u32(b, d + dir::STORED_BYTES.at) as usize;
        if let Some(stored) = at.checked_add(len).and_then(|end| b.get(at..end)) {
            let crc = crc32c::crc32c(stored);
            page::put_u32(b, d + dir::CRC.at, crc);
        }
    }
}

/// One B-epsilon partition's raw bytes: a buffer (`Buffer::decode`) or a
/// basement (`Packed::new`) between two pivots, and a segment list for it
/// (`segment::decode_area`, `segment::check_cuts`). Input: flags (bit 0:
/// basement; bit 1: with a segment list), low pivot (u8 length, bytes),
/// high pivot (likewise, 0: none), entry count hint (u16), segment list
/// length (u16) and bytes when flagged, then the raw partition.
pub fn bepsilon_part(data: &[u8]) {
    let mut inp = Input { b: data };
    let flags = inp.u8();
    let lo_len = inp.u8() as usize;
    let lo = inp.take(lo_len);
    let hi_len = inp.u8() as usize;
    let hi = (hi_len > 0).then(|| inp.take(hi_len));
    let lo = (lo_len > 0).then_some(lo);
    let entries = inp.u16() as usize;
    let area = if flags & 2 != 0 {
        let n = inp.u16() as usize;
        Some(inp.take(n))
    } else {
        None
    };
    let raw = inp.rest();
    let part = if flags & 1 != 0 {
        Packed::new(raw.to_vec(), lo, hi, entries).map(|p| {
            basement_round_trip(&p, raw, (lo, hi));
            bepsilon::node::Part::Packed(p)
        })
    } else {
        Buffer::decode(raw.to_vec(), lo, hi, entries).map(|b| {
            let mut out = Vec::new();
            b.encode_into(&mut out);
            assert_eq!(out, raw);
            bepsilon::node::Part::Buf(b)
        })
    };
    if let (Some(area), Ok(part)) = (area, part) {
        segments_of(area, raw, &part);
    }
}

/// A decoded basement keeps its bytes, and a scan of them in place finds
/// what its index finds.
fn basement_round_trip(p: &Packed, raw: &[u8], bounds: (Option<&[u8]>, Option<&[u8]>)) {
    assert_eq!(p.raw(), raw);
    // Bounded: the first and last few entries.
    let n = p.len();
    for i in (0..n.min(4)).chain(n.saturating_sub(4)..n) {
        let (k, v) = p.at(i);
        assert_eq!(p.get(k), Some(v));
        let scanned = Packed::scan_for(raw, k, bounds).expect("checked bytes scan");
        assert_eq!(scanned, Some(v));
    }
}

/// The segment list `area` for a partition of raw bytes `raw`, checked
/// against the decoded partition.
fn segments_of(area: &[u8], raw: &[u8], part: &bepsilon::node::Part) {
    let d = bepsilon::directory::DirEntry {
        offset: 0,
        comp_bytes: raw.len() as u32,
        raw_bytes: raw.len() as u32,
        crc: crc32c::crc32c(raw),
        entries: part.entries() as u32,
        filter: None,
    };
    let Ok(t) = segment::decode_area(area, crc32c::crc32c(area), std::slice::from_ref(&d)) else {
        return;
    };
    let segs = segment::of(Some(&t), 0);
    let _ = match part {
        bepsilon::node::Part::Packed(p) => segment::check_cuts(p, segs),
        bepsilon::node::Part::Buf(b) => segment::check_cuts(b, segs),
    };
}

/// Log record framing (`record::scan_bytes`, what `Db::open` replays) of
/// the run the input's first record header names; the records it returns
/// framed again scan the same, and their payloads decode as ops.
pub fn log_record(data: &[u8]) {
    if data.len() < record::REC_HDR {
        return;
    }
    let first = record::RecordId {
        epoch: get_u64(data, record::rec::EPOCH.at),
        db_id: get_u32(data, record::rec::DB_ID.at),
        lsn: get_u64(data, record::rec::LSN.at),
    };
    let Ok(records) = record::scan_bytes(data, first) else {
        return;
    };
    let mut out = Vec::new();
    for (i, (lsn, payload)) in records.iter().enumerate() {
        assert_eq!(*lsn, first.lsn + i as u64, "LSNs are consecutive");
        let at = out.len();
        out.resize(at + record::REC_HDR + payload.len(), 0);
        let id = record::RecordId { lsn: *lsn, ..first };
        record::frame(&mut out[at..], id, 0, payload);
        let _ = ops::decode(payload);
    }
    let again = record::scan_bytes(&out, first).expect("framed records scan");
    assert_eq!(again, records);
}

/// A log record's payload (`ops::decode`, both layouts); the ops encoded
/// again (compact layout) decode to the same ops.
pub fn log_ops(data: &[u8]) {
    let Ok(decoded) = ops::decode(data) else {
        return;
    };
    let mut out = Vec::new();
    ops::encode(&decoded, &mut out);
    assert_eq!(ops::decode(&out), Ok(decoded));
}

/// A B-epsilon tree's packed values: the value table (`Runs::decode`,
/// canonical: what decodes encodes to the same bytes), a packed reference
/// (`value::Packed::decode`, the same bytes back) released against such a
/// table as a drop from a damaged tree would be (`Runs::release`), and run
/// entries parsed from an offset as the collector parses a page
/// (`runs::entries_from`). Input: selector, page size code, then for 0 a
/// table; for 1 a 17-byte reference and a table; for 2 a u16 offset and
/// a run's payload.
pub fn value_table(data: &[u8]) {
    let mut inp = Input { b: data };
    let sel = inp.u8();
    let ps = inp.page_size();
    match sel % 3 {
        0 => {
            let b = inp.rest();
            if let Ok(t) = Runs::decode(b) {
                assert_eq!(t.encode(), b);
                let pages: u64 = t.runs.values().map(|p| p.len() as u64).sum();
                assert!(t.held_pages() <= pages);
            }
        }
        1 => {
            let r = inp.take(STORED_REF_BYTES);
            let b = inp.rest();
            let Some(p) = PackedRef::decode(r, ps) else {
                return;
            };
            assert_eq!(p.encode(), r);
            assert!(*p.pages(ps).end() < p.run_pages(ps));
            let Ok(mut t) = Runs::decode(b) else {
                return;
            };
            for page in t.release(&p, ps) {
                assert!((p.first_page..p.first_page + MAX_RUN_PAGES).contains(&page));
            }
            assert_eq!(Runs::decode(&t.encode()), Ok(t));
        }
        _ => {
            let from = inp.u16() as usize;
            let b = inp.rest();
            for (at, key, voff, vlen) in runs::entries_from(b, from) {
                let key_at = at + bepsilon::layout::run_entry::KEY_AT;
                assert!(at >= from && key_at + key.len() == voff && voff + vlen <= b.len());
            }
        }
    }
}

#[cfg(test)]
mod tests;
