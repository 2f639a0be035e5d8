//! A clean basement as its stored bytes plus an offset per entry: what
//! readers and the cache keep (about 4 bytes per entry over the data, where
//! a map costs tens), binary-searched in place. Dirty nodes unpack it into a
//! map (`Node::unpack`). Entry layout: docs/design.md, basement entry.

use super::node::Basement;
use crate::store::page::{get_u16, get_u32};
use std::ops::Bound;

#[derive(Debug, Clone, Default)]
pub struct Packed {
    data: Vec<u8>,
    offs: Vec<u32>,
}

impl Packed {
    /// Indexes `raw` (a basement's entries), checking every length, the key
    /// order and that keys lie in `[lo, hi)`.
    pub fn new(raw: Vec<u8>, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<Packed, String> {
        let mut offs = Vec::new();
        let mut r = 0usize;
        let mut prev: Option<&[u8]> = None;
        while r < raw.len() {
            let h = raw
                .get(r..r + 6)
                .ok_or("entry header overruns the basement")?;
            let (k, v) = (get_u16(h, 0) as usize, get_u32(h, 2) as usize);
            let end = r + 6 + k + v;
            if end > raw.len() {
                return Err("entry overruns the basement".into());
            }
            let key = &raw[r + 6..r + 6 + k];
            let inside = lo.is_none_or(|l| key >= l) && hi.is_none_or(|h| key < h);
            if !inside || prev.is_some_and(|p| p >= key) {
                return Err("basement keys out of order or outside the pivots".into());
            }
            prev = Some(key);
            offs.push(r as u32);
            r = end;
        }
        Ok(Packed { data: raw, offs })
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

    /// Heap bytes of its data and offsets.
    pub fn heap_bytes(&self) -> usize {
        use super::heap::alloc_bytes;
        alloc_bytes(self.data.capacity()) + alloc_bytes(4 * self.offs.capacity())
    }

    pub fn raw(&self) -> &[u8] {
        &self.data
    }

    fn entry(&self, i: usize) -> (&[u8], &[u8]) {
        let r = self.offs[i] as usize;
        let (k, v) = (
            get_u16(&self.data, r) as usize,
            get_u32(&self.data, r + 2) as usize,
        );
        (
            &self.data[r + 6..r + 6 + k],
            &self.data[r + 6 + k..r + 6 + k + v],
        )
    }

    /// Index of the first entry whose key is not below `key`.
    fn lower(&self, key: &[u8]) -> usize {
        let (mut lo, mut hi) = (0, self.offs.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.entry(mid).0 < key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        let i = self.lower(key);
        (i < self.len() && self.entry(i).0 == key).then(|| self.entry(i).1)
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
        hi: Bound<&'a [u8]>,
    ) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        let start = match lo {
            Bound::Included(k) => self.lower(k),
            Bound::Excluded(k) => {
                let i = self.lower(k);
                i + (i < self.len() && self.entry(i).0 == k) as usize
            }
            Bound::Unbounded => 0,
        };
        (start..self.len())
            .map(|i| self.entry(i))
            .take_while(move |(k, _)| match hi {
                Bound::Included(h) => *k <= h,
                Bound::Excluded(h) => *k < h,
                Bound::Unbounded => true,
            })
    }

    pub fn to_map(&self) -> Basement {
        (0..self.len())
            .map(|i| {
                let (k, v) = self.entry(i);
                (k.to_vec(), v.to_vec())
            })
            .collect()
    }
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
        let p = Packed::new(raw.clone(), None, None).unwrap();
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
        assert_eq!(p.to_map().len(), 50);
        assert!(
            Packed::new(raw, Some(&[b'k', 1][..]), None).is_err(),
            "key below lo"
        );
    }
}
