//! A basement as its stored bytes plus an offset per entry: what readers,
//! the cache and dirty leaves keep (about 4 bytes per entry over the data,
//! where a map costs tens; plus 8 bytes of each key's head, see `heads`),
//! binary-searched in place. Dirty leaves change
//! it by merging a sorted batch into a new one (leaf.rs). Entry layout:
//! docs/design.md, basement entry.

use crate::index::entry;
use crate::index::head::{self, key_head};
use crate::store::page::{get_u16, get_u32};
use std::ops::{Bound, Range};

#[derive(Debug, Clone, Default)]
pub struct Packed {
    data: Vec<u8>,
    offs: Vec<u32>,
    /// `key_head` each entry's key: a search compares these (one array of
    /// 8 bytes per entry, a few cache lines) and reads a key in `data` only
    /// where heads tie, instead of reading a key per step.
    heads: Vec<u64>,
}

impl Packed {
    /// Indexes `raw` (a basement's entries), checking every length, the key
    /// order and that keys lie in `[lo, hi)`; sized for `entries` entries
    /// (the directory's count: a hint, bounded by what `raw` can hold, so a
    /// damaged count cannot make it allocate more).
    pub fn new(
        raw: Vec<u8>,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        entries: usize,
    ) -> Result<Packed, String> {
        let cap = entries.min(raw.len() / 6);
        let (mut offs, mut heads) = (Vec::with_capacity(cap), Vec::with_capacity(cap));
        let mut r = 0usize;
        let mut prev: Option<&[u8]> = None;
        while r < raw.len() {
            let (key, _, end) = checked_entry(&raw, r, prev, (lo, hi))?;
            prev = Some(key);
            offs.push(r as u32);
            heads.push(key_head(key));
            r = end;
        }
        debug_assert_eq!(offs.len(), heads.len());
        Ok(Packed {
            data: raw,
            offs,
            heads,
        })
    }

    /// An empty basement with room for `bytes` of entries.
    pub fn with_capacity(bytes: usize, entries: usize) -> Packed {
        Packed {
            data: Vec::with_capacity(bytes),
            offs: Vec::with_capacity(entries),
            heads: Vec::with_capacity(entries),
        }
    }

    /// Appends an entry. Requires: `k` above every key held.
    pub fn push(&mut self, k: &[u8], v: &[u8]) {
        debug_assert!(self.last_key().is_none_or(|l| l < k));
        assert!(k.len() <= u16::MAX as usize && self.data.len() < u32::MAX as usize);
        self.offs.push(self.data.len() as u32);
        self.heads.push(key_head(k));
        self.data.extend_from_slice(&(k.len() as u16).to_le_bytes());
        self.data.extend_from_slice(&(v.len() as u32).to_le_bytes());
        self.data.extend_from_slice(k);
        self.data.extend_from_slice(v);
    }

    /// Appends entries `from..to` of `src`. Requires: their keys above
    /// every key held.
    pub fn extend_from(&mut self, src: &Packed, from: usize, to: usize) {
        assert!(from <= to && to <= src.len());
        if from == to {
            return;
        }
        debug_assert!(self.last_key().is_none_or(|l| l < src.entry(from).0));
        let (lo, hi) = (src.offs[from] as usize, src.end_of(to - 1));
        let shift = self.data.len() as i64 - lo as i64;
        self.offs.extend(
            src.offs[from..to]
                .iter()
                .map(|&o| (o as i64 + shift) as u32),
        );
        self.data.extend_from_slice(&src.data[lo..hi]);
        self.heads.extend_from_slice(&src.heads[from..to]);
        debug_assert_eq!(self.offs.len(), self.heads.len());
    }

    /// Byte offset just past entry `i`.
    fn end_of(&self, i: usize) -> usize {
        self.offs
            .get(i + 1)
            .map_or(self.data.len(), |&o| o as usize)
    }

    /// Byte offset of entry `i` (the bytes of the entries before it).
    pub fn offset_of(&self, i: usize) -> usize {
        self.offs[i] as usize
    }

    /// Stored bytes of entry `i` (header, key and value).
    pub fn entry_bytes(&self, i: usize) -> usize {
        self.end_of(i) - self.offs[i] as usize
    }

    /// The keys of the entry before the one starting at byte `off` and of
    /// that entry, if one starts there (as `Buffer::keys_at_offset`).
    pub fn keys_at_offset(&self, off: u32) -> Option<(Option<&[u8]>, &[u8])> {
        let i = self.offs.binary_search(&off).ok()?;
        let prev = i.checked_sub(1).map(|p| self.entry(p).0);
        Some((prev, self.entry(i).0))
    }

    /// The value of `key` in the stored entries `raw` (a basement or a run
    /// of its entries, sorted), scanned in place up to the key, each
    /// length checked and keys required to increase and to lie in `[lo,
    /// hi)`: a point read of a basement segment that does not index or
    /// cache it.
    pub fn scan_for<'a>(
        raw: &'a [u8],
        key: &[u8],
        (lo, hi): (Option<&[u8]>, Option<&[u8]>),
    ) -> Result<Option<&'a [u8]>, String> {
        let (mut r, mut prev): (usize, Option<&[u8]>) = (0, None);
        while r < raw.len() {
            let (ek, ev, end) = checked_entry(raw, r, prev, (lo, hi))?;
            match ek.cmp(key) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => return Ok(Some(ev)),
                std::cmp::Ordering::Greater => return Ok(None),
            }
            prev = Some(ek);
            r = end;
        }
        Ok(None)
    }

    /// Releases spare capacity above an eighth of what is held (a merge
    /// reserves for the worst case).
    pub fn trim(&mut self) {
        if self.data.capacity() > self.data.len() + self.data.len() / 8 + 64 {
            self.data.shrink_to_fit();
        }
        if self.offs.capacity() > self.offs.len() + self.offs.len() / 8 + 16 {
            self.offs.shrink_to_fit();
            self.heads.shrink_to_fit();
        }
    }

    /// Index of the first entry whose key is not below `key`.
    pub fn lower_bound(&self, key: &[u8]) -> usize {
        self.lower(key)
    }

    /// Index of the first entry of `run` whose key is not below `key`
    /// (`at`: above it): `run.end` when there is none.
    pub fn count_in(&self, run: Range<usize>, key: &[u8], at: bool) -> usize {
        assert!(run.start <= run.end && run.end <= self.len());
        let heads = &self.heads[run.clone()];
        let i = run.start + head::count_below(heads, key, at, |i| self.key_at(run.start + i));
        debug_assert!(
            i == run.start || (self.key_at(i - 1) < key || (at && self.key_at(i - 1) == key))
        );
        i
    }

    /// Entries `run` as their stored bytes, one slice, and per entry where
    /// its key and its value lie in that slice, in key order.
    pub fn spans(
        &self,
        run: Range<usize>,
    ) -> (
        &[u8],
        impl Iterator<Item = (Range<usize>, Range<usize>)> + '_,
    ) {
        assert!(run.start < run.end && run.end <= self.len());
        let base = self.offs[run.start] as usize;
        let bytes = &self.data[base..self.end_of(run.end - 1)];
        let spans = self.offs[run].iter().map(move |&o| {
            let r = o as usize;
            let k = get_u16(&self.data, r + entry::KEY_LEN.at) as usize;
            let v = get_u32(&self.data, r + entry::VALUE_LEN.at) as usize;
            let key_at = r - base + entry::KEY_AT;
            (key_at..key_at + k, key_at + k..key_at + k + v)
        });
        (bytes, spans)
    }

    /// Entry `i`: key and value.
    pub fn at(&self, i: usize) -> (&[u8], &[u8]) {
        self.entry(i)
    }

    pub fn len(&self) -> usize {
        self.offs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.offs.is_empty()
    }

    pub fn bytes(&self) -> usize {
        self.data.len()
    }

    /// Heap bytes of its data, offsets and heads.
    pub fn heap_bytes(&self) -> usize {
        use super::heap::alloc_bytes;
        alloc_bytes(self.data.capacity())
            + alloc_bytes(4 * self.offs.capacity())
            + alloc_bytes(8 * self.heads.capacity())
    }

    pub fn raw(&self) -> &[u8] {
        &self.data
    }

    fn entry(&self, i: usize) -> (&[u8], &[u8]) {
        let r = self.offs[i] as usize;
        let (k, v) = (
            get_u16(&self.data, r + entry::KEY_LEN.at) as usize,
            get_u32(&self.data, r + entry::VALUE_LEN.at) as usize,
        );
        let key_at = r + entry::KEY_AT;
        (
            &self.data[key_at..key_at + k],
            &self.data[key_at + k..key_at + k + v],
        )
    }

    /// Key `i` alone.
    #[inline]
    fn key_at(&self, i: usize) -> &[u8] {
        let r = self.offs[i] as usize;
        let k = get_u16(&self.data, r + entry::KEY_LEN.at) as usize;
        &self.data[r + entry::KEY_AT..r + entry::KEY_AT + k]
    }

    /// Index of the first entry whose key is not below `key`
    /// ([`head::count_below`]).
    fn lower(&self, key: &[u8]) -> usize {
        assert_eq!(self.offs.len(), self.heads.len());
        let lo = head::count_below(&self.heads, key, false, |i| self.key_at(i));
        debug_assert!(lo == 0 || self.key_at(lo - 1) < key);
        lo
    }

    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        let i = self.lower(key);
        (i < self.len() && self.key_at(i) == key).then(|| self.entry(i).1)
    }

    pub fn first_key(&self) -> Option<&[u8]> {
        (!self.is_empty()).then(|| self.entry(0).0)
    }

    pub fn last_key(&self) -> Option<&[u8]> {
        (!self.is_empty()).then(|| self.entry(self.len() - 1).0)
    }

    /// Entries with keys in `(lo, hi)` bounds, in order.
    pub fn range<'a>(
        &'a self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
    ) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        self.indices(lo, hi).map(|i| self.entry(i))
    }

    /// The indices of the entries with keys in `(lo, hi)` bounds.
    pub fn indices(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Range<usize> {
        let at = |b: Bound<&[u8]>, upper: bool| match b {
            Bound::Included(k) | Bound::Excluded(k) => {
                let i = self.lower(k);
                let past = matches!(b, Bound::Excluded(_)) != upper;
                i + (past && i < self.len() && self.key_at(i) == k) as usize
            }
            Bound::Unbounded if upper => self.len(),
            Bound::Unbounded => 0,
        };
        let (start, end) = (at(lo, false), at(hi, true));
        debug_assert!(end <= self.len());
        start..end.max(start)
    }
}

/// The entry of `raw` at byte `r` (key, value, the offset past it), its
/// lengths checked against `raw` and its key against the key before it
/// (`prev`) and the basement's pivots `[lo, hi)`.
fn checked_entry<'a>(
    raw: &'a [u8],
    r: usize,
    prev: Option<&[u8]>,
    (lo, hi): (Option<&[u8]>, Option<&[u8]>),
) -> Result<(&'a [u8], &'a [u8], usize), String> {
    let h = raw
        .get(r..r + entry::KEY_AT)
        .ok_or("entry header overruns the basement")?;
    let k = get_u16(h, entry::KEY_LEN.at) as usize;
    let v = get_u32(h, entry::VALUE_LEN.at) as usize;
    let end = r + entry::KEY_AT + k + v;
    let e = raw
        .get(r + entry::KEY_AT..end)
        .ok_or("entry overruns the basement")?;
    let (key, value) = e.split_at(k);
    let inside = lo.is_none_or(|l| key >= l) && hi.is_none_or(|h| key < h);
    if !inside || prev.is_some_and(|p| p >= key) {
        return Err("basement keys out of order or outside the pivots".into());
    }
    assert!(end <= raw.len());
    Ok((key, value, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_and_ranges_match_a_map() {
        let mut raw = Vec::new();
        let keys: Vec<Vec<u8>> = (0..50u8).map(|i| vec![b'k', i * 2]).collect();
        for k in &keys {
            raw.extend_from_slice(&(k.len() as u16).to_le_bytes());
            raw.extend_from_slice(&3u32.to_le_bytes());
            raw.extend_from_slice(k);
            raw.extend_from_slice(b"val");
        }
        let p = Packed::new(raw.clone(), None, None, 0).unwrap();
        assert_eq!(p.len(), 50);
        assert_eq!(p.get(&[b'k', 10]), Some(&b"val"[..]));
        assert_eq!(p.get(&[b'k', 11]), None);
        let r: Vec<_> = p
            .range(
                Bound::Excluded(&[b'k', 10][..]),
                Bound::Included(&[b'k', 16][..]),
            )
            .map(|e| e.0.to_vec())
            .collect();
        assert_eq!(r, vec![vec![b'k', 12], vec![b'k', 14], vec![b'k', 16]]);
        assert!(
            Packed::new(raw, Some(&[b'k', 1][..]), None, 50).is_err(),
            "key below lo"
        );
    }

    /// Keys that share heads (long common prefixes, prefixes of each
    /// other, zero bytes where heads pad) are found as a map finds them,
    /// in a basement built by `new`, by `push` and by `extend_from`.
    #[test]
    fn heads_that_tie_still_order_by_key() {
        let mut keys: Vec<Vec<u8>> = Vec::new();
        for i in 0..40u8 {
            keys.push(vec![b'p'; 1 + (i % 12) as usize]);
            keys.push([&b"prefix--"[..], &[i, i]].concat());
            keys.push(vec![i / 3, 0, 0]);
            keys.push(vec![i / 3]);
        }
        keys.sort();
        keys.dedup();
        let mut raw = Vec::new();
        let mut pushed = Packed::default();
        for k in &keys {
            raw.extend_from_slice(&(k.len() as u16).to_le_bytes());
            raw.extend_from_slice(&1u32.to_le_bytes());
            raw.extend_from_slice(k);
            raw.push(k.len() as u8);
            pushed.push(k, &[k.len() as u8]);
        }
        let built = Packed::new(raw, None, None, keys.len()).unwrap();
        let mut joined = Packed::default();
        joined.extend_from(&built, 0, keys.len() / 2);
        joined.extend_from(&pushed, keys.len() / 2, keys.len());
        let mut probes = keys.clone();
        probes.extend(keys.iter().map(|k| [&k[..], &[0][..]].concat()));
        probes.extend([vec![], vec![0], vec![255; 9], b"prefix-".to_vec()]);
        for p in [&built, &pushed, &joined] {
            assert_eq!(p.raw(), built.raw());
            for q in &probes {
                let want = keys.partition_point(|k| k < q);
                assert_eq!(p.lower_bound(q), want, "{q:?}");
                let found = keys.binary_search(q).is_ok();
                assert_eq!(p.get(q), found.then_some(&[q.len() as u8][..]), "{q:?}");
            }
        }
    }
}
