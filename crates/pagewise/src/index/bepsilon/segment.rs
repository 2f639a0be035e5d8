//! Segments: a large partition stored as consecutive segments, each
//! compressed and checksummed alone, so a get reads one segment, not the
//! whole partition: a buffer of an internal node whose filter admits the
//! key (format 5), or a leaf's basement read without caching it (format
//! 6). Format (the segment area at the end of the shell, header offsets 40
//! and 44): docs/design.md, "B-epsilon nodes", segments.

use super::buffer::Buffer;
use super::directory::DirEntry;
use super::layout;
use super::packed::Packed;
use super::MAX_KEY_BYTES;
use crate::store::page::{get_u16, get_u32, put_u16, put_u32};

/// Fixed bytes of a segment entry (before its first key).
pub const ENTRY_FIXED_BYTES: usize = layout::segment::KEY_LEN.end();
/// Most segments one buffer may declare (a count is a u16).
pub const MAX_SEGMENTS: usize = u16::MAX as usize;

/// One stored segment of a buffer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Segment {
    /// Stored bytes (equal to `raw_bytes`: stored as is).
    pub stored_bytes: u32,
    pub raw_bytes: u32,
    /// crc32c of the stored bytes.
    pub crc: u32,
    /// Key of the segment's first message.
    pub first_key: Box<[u8]>,
}

/// Segments per basement: a point read of an uncached basement, or of a
/// buffer its filter admits, reads about a quarter basement
/// (docs/benchmarks.md, "B-epsilon tree", segments).
pub const SEGMENTS_PER_BASEMENT: u32 = 4;

/// Target raw bytes of a segment (of a buffer or a basement) for a tree of
/// `basement_bytes` in a file of `page_size` pages: a quarter basement, and
/// at least a page (a smaller segment saves no read, and its entry in the
/// shell costs cache).
pub fn target_bytes(basement_bytes: u32, page_size: usize) -> usize {
    ((basement_bytes / SEGMENTS_PER_BASEMENT) as usize).max(page_size)
}

/// Where `buf` is cut: each segment's first key and raw bytes (stored bytes
/// and checksum still 0). Empty when the buffer stays one segment: under
/// twice `target` raw bytes, `target` 0, or no cut between two keys.
/// Cuts fall only between keys, after at least `target` bytes.
pub fn plan(buf: &Buffer, target: usize) -> Vec<Segment> {
    plan_items(
        buf.messages().map(|m| (m.key, m.bytes())),
        buf.bytes(),
        target,
    )
}

/// Where basement `b` is cut, as [`plan`] cuts a buffer (its keys are
/// unique, so any entry may start a segment).
pub fn plan_basement(b: &Packed, target: usize) -> Vec<Segment> {
    let entries = (0..b.len()).map(|i| (b.at(i).0, b.entry_bytes(i)));
    plan_items(entries, b.bytes(), target)
}

/// Cuts items (key, raw bytes), in key order, `total` bytes in all.
fn plan_items<'a>(
    items: impl Iterator<Item = (&'a [u8], usize)>,
    total: usize,
    target: usize,
) -> Vec<Segment> {
    if target == 0 || total < 2 * target {
        return Vec::new();
    }
    let mut segs: Vec<Segment> = Vec::new();
    let (mut acc, mut prev): (usize, Option<&[u8]>) = (0, None);
    for (key, bytes) in items {
        let cut = prev != Some(key) && (segs.is_empty() || acc >= target);
        if cut && segs.len() < MAX_SEGMENTS {
            if let Some(last) = segs.last_mut() {
                last.raw_bytes = acc as u32;
            }
            segs.push(Segment {
                first_key: key.into(),
                ..Segment::default()
            });
            acc = 0;
        }
        acc += bytes;
        prev = Some(key);
    }
    if let Some(last) = segs.last_mut() {
        last.raw_bytes = acc as u32;
    }
    if segs.len() < 2 {
        return Vec::new();
    }
    debug_assert_eq!(
        segs.iter().map(|s| s.raw_bytes as usize).sum::<usize>(),
        total
    );
    segs
}

/// Bytes of the segment area for these plans (0 when no buffer is cut).
pub fn area_bytes(plans: &[Vec<Segment>]) -> usize {
    if plans.iter().all(Vec::is_empty) {
        return 0;
    }
    let entries: usize = plans
        .iter()
        .flatten()
        .map(|s| ENTRY_FIXED_BYTES + s.first_key.len())
        .sum();
    layout::segment_area::COUNT.end() * plans.len() + entries
}

/// Writes the segment area of `plans` into `out` (exactly
/// [`area_bytes`] long); returns its crc32c.
pub fn encode_area(plans: &[Vec<Segment>], out: &mut [u8]) -> u32 {
    assert_eq!(out.len(), area_bytes(plans));
    assert!(!out.is_empty());
    let mut w = 0;
    for segs in plans {
        put_u16(out, w + layout::segment_area::COUNT.at, segs.len() as u16);
        w += layout::segment_area::COUNT.end();
        for s in segs {
            put_u32(out, w + layout::segment::STORED_BYTES.at, s.stored_bytes);
            put_u32(out, w + layout::segment::RAW_BYTES.at, s.raw_bytes);
            put_u32(out, w + layout::segment::CRC.at, s.crc);
            put_u16(
                out,
                w + layout::segment::KEY_LEN.at,
                s.first_key.len() as u16,
            );
            let k = w + ENTRY_FIXED_BYTES;
            out[k..k + s.first_key.len()].copy_from_slice(&s.first_key);
            w = k + s.first_key.len();
        }
    }
    assert_eq!(w, out.len());
    crc32c::crc32c(out)
}

/// The decoded segment area of a stored node: each buffer's segments,
/// their first keys back to back in one allocation.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Table {
    /// Segments of partition i: `entries[starts[i]..starts[i + 1]]`.
    starts: Box<[u32]>,
    entries: Box<[Entry]>,
    /// First keys; entry g's ends at `entries[g].key_end`, starts where
    /// entry g - 1's ends (0 for g = 0).
    keys: Box<[u8]>,
}

/// One segment of a [`Table`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Entry {
    pub stored_bytes: u32,
    pub raw_bytes: u32,
    pub crc: u32,
    key_end: u32,
}

/// The segments of one buffer (empty: stored whole).
#[derive(Clone, Copy)]
pub struct Segs<'a> {
    table: Option<&'a Table>,
    lo: usize,
    hi: usize,
}

impl Table {
    /// The table an encoder's `plans` (one list per partition) decode to.
    #[cfg(test)]
    pub fn of_plans(plans: &[Vec<Segment>]) -> Table {
        let (mut starts, mut entries, mut keys) = (vec![0u32], Vec::new(), Vec::new());
        for p in plans {
            for s in p {
                keys.extend_from_slice(&s.first_key);
                let key_end = keys.len() as u32;
                let (stored_bytes, raw_bytes, crc) = (s.stored_bytes, s.raw_bytes, s.crc);
                entries.push(Entry {
                    stored_bytes,
                    raw_bytes,
                    crc,
                    key_end,
                });
            }
            starts.push(entries.len() as u32);
        }
        Table {
            starts: starts.into(),
            entries: entries.into(),
            keys: keys.into(),
        }
    }

    /// Heap bytes (charged with the node's shell).
    pub fn heap_bytes(&self) -> usize {
        use super::heap::alloc_bytes;
        alloc_bytes(self.starts.len() * 4)
            + alloc_bytes(self.entries.len() * size_of::<Entry>())
            + alloc_bytes(self.keys.len())
    }
}

/// The segments of partition `i` in `table` (None: no buffer is cut).
pub fn of(table: Option<&Table>, i: usize) -> Segs<'_> {
    match table {
        Some(t) => {
            assert!(i + 1 < t.starts.len());
            let (lo, hi) = (t.starts[i] as usize, t.starts[i + 1] as usize);
            Segs { table, lo, hi }
        }
        None => Segs {
            table: None,
            lo: 0,
            hi: 0,
        },
    }
}

impl<'a> Segs<'a> {
    pub fn len(&self) -> usize {
        self.hi - self.lo
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Segment `j`.
    pub fn get(&self, j: usize) -> Entry {
        assert!(j < self.len());
        self.table.expect("non-empty").entries[self.lo + j]
    }

    /// First key of segment `j`.
    pub fn first_key(&self, j: usize) -> &'a [u8] {
        assert!(j < self.len());
        let t = self.table.expect("non-empty");
        let g = self.lo + j;
        let start = if g == 0 { 0 } else { t.entries[g - 1].key_end };
        &t.keys[start as usize..t.entries[g].key_end as usize]
    }

    fn iter(&self) -> impl Iterator<Item = Entry> + '_ {
        (0..self.len()).map(|j| self.get(j))
    }
}

/// The segment area `area` (crc `stored_crc`) decoded for a node of
/// directory `dir`, each list verified against its entry (docs/design.md,
/// segments).
pub fn decode_area(area: &[u8], stored_crc: u32, dir: &[DirEntry]) -> Result<Table, String> {
    let crc = crc32c::crc32c(area);
    if crc != stored_crc {
        return Err(format!(
            "segment area checksum {crc:#010x}, stored {stored_crc:#010x}"
        ));
    }
    let (mut starts, mut entries, mut keys) = (vec![0u32], Vec::new(), Vec::new());
    let mut r = 0;
    for _ in dir {
        let count_field = layout::segment_area::COUNT;
        let count = area
            .get(r..r + count_field.end())
            .ok_or("segment area too short")?;
        let count = get_u16(count, count_field.at);
        r += count_field.end();
        for _ in 0..count {
            let h = area
                .get(r..r + ENTRY_FIXED_BYTES)
                .ok_or("segment entries overrun the area")?;
            let k = get_u16(h, layout::segment::KEY_LEN.at) as usize;
            let key = area
                .get(r + ENTRY_FIXED_BYTES..r + ENTRY_FIXED_BYTES + k)
                .filter(|_| k <= MAX_KEY_BYTES)
                .ok_or("segment key overruns the area")?;
            keys.extend_from_slice(key);
            entries.push(Entry {
                stored_bytes: get_u32(h, layout::segment::STORED_BYTES.at),
                raw_bytes: get_u32(h, layout::segment::RAW_BYTES.at),
                crc: get_u32(h, layout::segment::CRC.at),
                key_end: keys.len() as u32,
            });
            r += ENTRY_FIXED_BYTES + k;
        }
        starts.push(entries.len() as u32);
    }
    if r != area.len() {
        return Err(format!(
            "segment area of {} bytes, lists end at {r}",
            area.len()
        ));
    }
    let t = Table {
        starts: starts.into(),
        entries: entries.into(),
        keys: keys.into(),
    };
    for (i, d) in dir.iter().enumerate() {
        check_list(d, of(Some(&t), i)).map_err(|w| format!("partition {i}: {w}"))?;
    }
    Ok(t)
}

/// Whether `segs` describes `d`'s stored partition: sums of stored and raw
/// bytes, each segment stored no larger than raw, first keys increasing.
fn check_list(d: &DirEntry, segs: Segs) -> Result<(), String> {
    if segs.is_empty() {
        return Ok(());
    }
    let stored: u64 = segs.iter().map(|s| s.stored_bytes as u64).sum();
    let raw: u64 = segs.iter().map(|s| s.raw_bytes as u64).sum();
    if segs.len() < 2 || stored != d.comp_bytes as u64 || raw != d.raw_bytes as u64 {
        return Err(format!(
            "{} segments of {stored} stored and {raw} raw bytes, directory says {} and {}",
            segs.len(),
            d.comp_bytes,
            d.raw_bytes
        ));
    }
    if segs
        .iter()
        .any(|s| s.stored_bytes > s.raw_bytes || s.raw_bytes == 0)
    {
        return Err("a segment stored larger than raw, or empty".into());
    }
    if (1..segs.len()).any(|j| segs.first_key(j - 1) >= segs.first_key(j)) {
        return Err("segment first keys are not increasing".into());
    }
    Ok(())
}

/// Where a get of `key` reads in the stored partition `d` cut as `segs`:
/// (offset within the partition, stored bytes, segment index; None: the
/// whole partition), or None when the segments show no message can be for
/// `key` (it sorts before the first).
pub fn locate(d: &DirEntry, segs: Segs, key: &[u8]) -> Option<(u64, u64, Option<usize>)> {
    if segs.is_empty() {
        return Some((0, d.comp_bytes as u64, None));
    }
    let (mut lo, mut hi) = (0, segs.len());
    while lo < hi {
        // The first segment whose first key is above `key`.
        let mid = (lo + hi) / 2;
        if segs.first_key(mid) <= key {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    let j = lo.checked_sub(1)?;
    let off: u64 = (0..j).map(|x| segs.get(x).stored_bytes as u64).sum();
    let s = segs.get(j);
    assert!(off + s.stored_bytes as u64 <= d.comp_bytes as u64);
    Some((off, s.stored_bytes as u64, Some(j)))
}

/// A decoded partition, as its segments are checked against it.
pub trait Cut {
    /// The keys of the message or entry before the one starting at raw
    /// byte `off` and of that one, if one starts there.
    fn keys_at_offset(&self, off: u32) -> Option<(Option<&[u8]>, &[u8])>;
    /// Raw bytes of the partition.
    fn raw_bytes(&self) -> usize;
}

impl Cut for Buffer {
    fn keys_at_offset(&self, off: u32) -> Option<(Option<&[u8]>, &[u8])> {
        Buffer::keys_at_offset(self, off)
    }
    fn raw_bytes(&self) -> usize {
        self.bytes()
    }
}

impl Cut for Packed {
    fn keys_at_offset(&self, off: u32) -> Option<(Option<&[u8]>, &[u8])> {
        Packed::keys_at_offset(self, off)
    }
    fn raw_bytes(&self) -> usize {
        self.bytes()
    }
}

/// Checks a decoded buffer or basement against its segments: a message or
/// entry of each segment's first key starts where the segment does, and
/// the one before it is of another key (no key's messages straddle two
/// segments; a basement's keys are unique). A whole load, after the
/// checksum; the raw sizes' sum was checked with the list.
pub fn check_cuts(part: &impl Cut, segs: Segs) -> Result<(), String> {
    let mut cut = 0u64;
    for j in 0..segs.len() {
        let at = u32::try_from(cut).map_err(|_| "segments past 4 GiB")?;
        let (prev, key) = part
            .keys_at_offset(at)
            .ok_or_else(|| format!("an entry crosses the start of segment {j}"))?;
        if key != segs.first_key(j) {
            return Err(format!("segment {j} does not start at its first key"));
        }
        if prev == Some(key) {
            return Err(format!(
                "messages of a key straddle segments {} and {j}",
                j - 1
            ));
        }
        cut += segs.get(j).raw_bytes as u64;
    }
    assert!(segs.is_empty() || cut == part.raw_bytes() as u64);
    Ok(())
}
