//! Stored values of a B-epsilon tree created with value extents
//! (`BEpsilonOptions::value_extent_bytes`; docs/design.md, "B-epsilon
//! value extents"): every value a put or a merge leaves is stored with a
//! one-byte tag, `0` then the value's bytes, or `1` then the extent
//! reference (16 bytes) of a value written once, at commit, to an extent of
//! its own. Messages and basements move the stored bytes as they are, so
//! a large value crosses the tree's levels as 17 bytes; the value itself is
//! read only by the reads that return it, and its extent is freed when the
//! message or basement entry naming it is dropped (replaced, deleted or
//! merged). Trees created without value extents store values untagged.

use super::layout::{packed_ref, stored};
use crate::error::Result;
use crate::store::extent::{page_payload_bytes, Extent, EXTENT_REF_BYTES};
use crate::store::page::{get_u32, get_u64, Kind};
use crate::store::pager::Pager;

/// A stored value that holds its bytes.
pub const TAG_INLINE: u8 = 0;
/// A stored value that names the extent holding its bytes.
pub const TAG_EXTENT: u8 = 1;
/// A stored value that names its bytes in a value run (format 10;
/// docs/design.md, "B-epsilon packed values").
pub const TAG_PACKED: u8 = 2;
/// Most pages of one value run (a commit group's values fill several runs
/// when they need more): page counts and offsets stay within their fields.
pub const MAX_RUN_PAGES: u64 = 4096;
/// Bytes of a stored extent reference: the tag and the reference.
pub const STORED_REF_BYTES: usize = stored::TAG.end() + EXTENT_REF_BYTES;
const _: () = assert!(packed_ref::LEN.end() == STORED_REF_BYTES);

/// How a tree stores its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// As given (trees created without value extents).
    Plain,
    /// Tagged, values of at least `.0` bytes out of the tree.
    Tagged(u32),
}

/// Where a packed value lies: `len` bytes at `offset` in the payload of
/// the value run whose first page is `first_page`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Packed {
    pub first_page: u64,
    pub offset: u32,
    pub len: u32,
}

/// Where a value's bytes lie: payload bytes `offset .. offset + len` of
/// `ext` (a whole extent of its own, or the pages of a run holding them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValueRef {
    pub ext: Extent,
    pub offset: u64,
    pub len: u64,
}

/// A stored value, read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored<'a> {
    Inline(&'a [u8]),
    Extent(Extent),
    Packed(Packed),
}

impl Packed {
    /// The 17 stored bytes of this reference (tag 2).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; STORED_REF_BYTES];
        b[packed_ref::TAG.at] = TAG_PACKED;
        b[packed_ref::FIRST_PAGE.at..packed_ref::FIRST_PAGE.end()]
            .copy_from_slice(&self.first_page.to_le_bytes());
        b[packed_ref::OFFSET.at..packed_ref::OFFSET.end()]
            .copy_from_slice(&self.offset.to_le_bytes());
        b[packed_ref::LEN.at..packed_ref::LEN.end()].copy_from_slice(&self.len.to_le_bytes());
        b
    }

    /// Reads [`Packed::encode`]'s bytes; None when they cannot name a
    /// value of a run (too short, a superblock page, an empty value, an
    /// offset with no room for the entry's header before it, or pages past
    /// a run's most).
    pub fn decode(b: &[u8], page_size: usize) -> Option<Packed> {
        if b.len() != STORED_REF_BYTES || b[packed_ref::TAG.at] != TAG_PACKED {
            return None;
        }
        let p = Packed {
            first_page: get_u64(b, packed_ref::FIRST_PAGE.at),
            offset: get_u32(b, packed_ref::OFFSET.at),
            len: get_u32(b, packed_ref::LEN.at),
        };
        let sane = p.first_page >= 2
            && p.len > 0
            && p.offset as usize >= super::layout::run_entry::KEY_AT
            && p.run_pages(page_size) <= MAX_RUN_PAGES
            && p.first_page.checked_add(MAX_RUN_PAGES).is_some();
        sane.then_some(p)
    }

    /// One past the value's last byte in the run's payload.
    pub fn end(&self) -> u64 {
        self.offset as u64 + self.len as u64
    }

    /// Pages of the run up to the one holding the value's last byte.
    pub fn run_pages(&self, page_size: usize) -> u64 {
        self.end().div_ceil(page_payload_bytes(page_size) as u64)
    }

    /// The indexes (within the run) of the pages holding the value's bytes.
    pub fn pages(&self, page_size: usize) -> std::ops::RangeInclusive<u64> {
        assert!(self.len > 0);
        let cap = page_payload_bytes(page_size) as u64;
        self.offset as u64 / cap..=(self.end() - 1) / cap
    }

    /// Where the value lies for a read: the run's pages up to its last one,
    /// every one full, so each page read is verified by its index.
    pub fn value_ref(&self, page_size: usize) -> ValueRef {
        let count_pages = self.run_pages(page_size);
        let cap = page_payload_bytes(page_size) as u64;
        let ext = Extent {
            first_page: self.first_page,
            count_pages,
            len_bytes: count_pages * cap,
        };
        let r = ValueRef {
            ext,
            offset: self.offset as u64,
            len: self.len as u64,
        };
        assert!(r.offset + r.len <= r.ext.len_bytes);
        r
    }
}

impl ValueRef {
    /// A whole extent of its own.
    pub fn whole(ext: Extent) -> ValueRef {
        ValueRef {
            ext,
            offset: 0,
            len: ext.len_bytes,
        }
    }
}

/// Reads the value at `r`: only the pages holding it, each verified.
pub fn read_value(pager: &Pager, r: &ValueRef) -> Result<Vec<u8>> {
    match r.len {
        0 => pager.read_extent(&r.ext, Kind::Overflow),
        _ => pager.read_range(&r.ext, Kind::Overflow, r.offset, r.len),
    }
}

/// Reads the values at `refs` through one queue (`Pager::read_ranges`):
/// per value its bytes or its failure; only a failure of the queue itself
/// is returned.
pub fn read_values(pager: &Pager, refs: &[ValueRef]) -> Result<Vec<Result<Vec<u8>>>> {
    let reqs: Vec<(Extent, u64, u64)> = refs
        .iter()
        .filter(|r| r.len > 0)
        .map(|r| (r.ext, r.offset, r.len))
        .collect();
    let mut read = pager.read_ranges(&reqs, Kind::Overflow)?.into_iter();
    let out: Vec<Result<Vec<u8>>> = refs
        .iter()
        .map(|r| match r.len {
            0 => read_value(pager, r),
            _ => read.next().expect("a read per value"),
        })
        .collect();
    assert!(read.next().is_none() && out.len() == refs.len());
    Ok(out)
}

impl Form {
    /// Whether a put of `len` bytes leaves the tree (packed, or to an
    /// extent of its own).
    pub fn out_of_line(self, len: usize) -> bool {
        matches!(self, Form::Tagged(min) if len >= min as usize)
    }

    /// The stored bytes of a value kept in the tree.
    pub fn inline(self, v: &[u8]) -> Vec<u8> {
        match self {
            Form::Plain => v.to_vec(),
            Form::Tagged(_) => {
                let mut b = Vec::with_capacity(1 + v.len());
                b.push(TAG_INLINE);
                b.extend_from_slice(v);
                b
            }
        }
    }

    /// `b` read back. A tagged value with an unknown tag, or a reference of
    /// the wrong size or out of the file's page range, is `None` (corrupt).
    pub fn parse(self, b: &[u8], page_size: usize) -> Option<Stored<'_>> {
        match self {
            Form::Plain => Some(Stored::Inline(b)),
            Form::Tagged(_) => match b.split_first()? {
                (&TAG_INLINE, v) => Some(Stored::Inline(v)),
                (&TAG_EXTENT, r) if r.len() == EXTENT_REF_BYTES => {
                    Extent::decode(r, page_size).map(Stored::Extent)
                }
                (&TAG_PACKED, _) => Packed::decode(b, page_size).map(Stored::Packed),
                _ => None,
            },
        }
    }

    /// Where the value a stored value names lies, if it names one (nothing
    /// for plain trees, inline values and damaged bytes: `check` reports
    /// those).
    pub fn value_ref(self, b: &[u8], page_size: usize) -> Option<ValueRef> {
        match self {
            Form::Tagged(_) if may_name_extent(b) => match self.parse(b, page_size)? {
                Stored::Extent(e) => Some(ValueRef::whole(e)),
                Stored::Packed(p) => Some(p.value_ref(page_size)),
                Stored::Inline(_) => None,
            },
            _ => None,
        }
    }

    /// `b` as the user's value: inline bytes copied, a value out of the
    /// tree read with `read`. A damaged stored value is `Error::Corrupt`
    /// naming `tree`.
    pub fn plain(
        self,
        b: &[u8],
        pager: &Pager,
        tree: &str,
        read: &mut dyn FnMut(&ValueRef) -> Result<Vec<u8>>,
    ) -> Result<Vec<u8>> {
        match self.parse(b, pager.ps) {
            Some(Stored::Inline(v)) => Ok(v.to_vec()),
            Some(Stored::Extent(e)) => read(&ValueRef::whole(e)),
            Some(Stored::Packed(p)) => read(&p.value_ref(pager.ps)),
            None => Err(pager.corrupt(
                0,
                format!(
                    "B-epsilon tree {tree:?}: a stored value of {} bytes has tag {:?}",
                    b.len(),
                    b.first()
                ),
            )),
        }
    }
}

/// Whether stored bytes `b` have the shape of a reference to a value out
/// of the tree (any tree's: the writer frees only what its tree's form
/// names).
pub fn may_name_extent(b: &[u8]) -> bool {
    b.len() == STORED_REF_BYTES && matches!(b[stored::TAG.at], TAG_EXTENT | TAG_PACKED)
}

/// The stored bytes of a value written to `ext`.
pub fn reference(ext: &Extent) -> Vec<u8> {
    let mut b = vec![0u8; STORED_REF_BYTES];
    b[stored::TAG.at] = TAG_EXTENT;
    ext.encode(&mut b[stored::TAG.end()..]);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_values_round_trip() {
        let f = Form::Tagged(100);
        assert!(!f.out_of_line(99) && f.out_of_line(100));
        assert!(!Form::Plain.out_of_line(1 << 30));
        assert_eq!(
            f.parse(&f.inline(b"abc"), 4096),
            Some(Stored::Inline(b"abc"))
        );
        assert_eq!(Form::Plain.inline(b"abc"), b"abc");
        let e = Extent::new(7, 5000, 4096);
        let r = reference(&e);
        assert_eq!(r.len(), STORED_REF_BYTES);
        assert_eq!(f.parse(&r, 4096), Some(Stored::Extent(e)));
        assert_eq!(f.value_ref(&r, 4096), Some(ValueRef::whole(e)));
        assert_eq!(Form::Plain.value_ref(&r, 4096), None);
        // An inline value of 16 bytes is 17 stored bytes too, tagged 0.
        assert_eq!(f.value_ref(&f.inline(&[1u8; 16]), 4096), None);
        assert_eq!(f.parse(&[2, 0], 4096), None);
        assert_eq!(f.parse(&[], 4096), None);
    }

    #[test]
    fn packed_references_by_hand() {
        // 4 KiB pages carry 4,064 payload bytes: a value of 100 bytes at
        // offset 4,000 lies on pages 0 and 1 of its run.
        let f = Form::Tagged(64);
        let p = Packed {
            first_page: 10,
            offset: 4000,
            len: 100,
        };
        let b = p.encode();
        assert_eq!(b.len(), 17);
        assert_eq!(b[0], TAG_PACKED);
        assert_eq!(&b[1..9], &10u64.to_le_bytes());
        assert_eq!(&b[9..13], &4000u32.to_le_bytes());
        assert_eq!(&b[13..17], &100u32.to_le_bytes());
        assert_eq!(f.parse(&b, 4096), Some(Stored::Packed(p)));
        assert!(may_name_extent(&b));
        assert_eq!(p.pages(4096), 0..=1);
        let r = f.value_ref(&b, 4096).unwrap();
        assert_eq!((r.ext.first_page, r.ext.count_pages), (10, 2));
        assert_eq!((r.ext.len_bytes, r.offset, r.len), (8128, 4000, 100));
        assert_eq!(r.ext.pages_of_range(r.offset, r.len, 4096), (0, 2));
        // Within one page: offset 4,100 (page 1 starts at 4,064).
        let q = Packed { offset: 4100, ..p };
        assert_eq!(q.pages(4096), 1..=1);
        assert_eq!(q.value_ref(4096).ext.count_pages, 2);
        // Damaged: a superblock page, an empty value, no room for a header.
        let bad = |x: Packed| f.parse(&x.encode(), 4096).is_none();
        assert!(bad(Packed { first_page: 1, ..p }));
        assert!(bad(Packed { len: 0, ..p }));
        assert!(bad(Packed { offset: 5, ..p }));
        assert!(bad(Packed {
            offset: u32::MAX,
            len: u32::MAX,
            ..p
        }));
        assert_eq!(f.parse(&b[..16], 4096), None);
    }
}
