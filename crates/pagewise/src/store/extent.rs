//! The one reference type for stored bytes: a run of contiguous pages and
//! the payload bytes it holds. Overflow values point at one today; B-epsilon
//! nodes and delta blocks will too (docs/design.md, "Extent reference").

use super::page::HDR;

/// Payload bytes in `first_page .. first_page + count_pages`, each page
/// carrying its own 32-byte header and checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Extent {
    pub first_page: u64,
    pub count_pages: u64,
    pub len_bytes: u64,
}

/// Encoded size of an extent reference: `first_page u64 | len_bytes u64`
/// (the page count follows from the length and the page size).
pub const EXTENT_REF_BYTES: usize = extent_ref::LEN_BYTES.end();

/// An extent reference's fields (docs/design.md, "Extent reference").
#[allow(dead_code)] // every row of its table is named, read or not
pub mod extent_ref {
    use crate::store::layout::Field;
    pub const FIRST_PAGE: Field = Field::new(0, 8);
    pub const LEN_BYTES: Field = Field::new(8, 8);
}

/// The extent reference's table in docs/design.md.
#[cfg(test)]
pub const TABLE: crate::store::layout::Table = crate::store::layout::Table {
    heading: "Extent reference",
    index: 0,
    rows: &[
        ("first page", extent_ref::FIRST_PAGE),
        ("length in bytes", extent_ref::LEN_BYTES),
    ],
};

/// Payload bytes one page of an extent carries.
pub fn page_payload_bytes(page_size: usize) -> usize {
    assert!(page_size > HDR, "page size {page_size} leaves no payload");
    page_size - HDR
}

/// Pages an extent of `len_bytes` needs (at least one).
pub fn pages_for(len_bytes: u64, page_size: usize) -> u64 {
    len_bytes
        .div_ceil(page_payload_bytes(page_size) as u64)
        .max(1)
}

impl Extent {
    /// The extent of `len_bytes` starting at `first_page`.
    pub fn new(first_page: u64, len_bytes: u64, page_size: usize) -> Self {
        let e = Self {
            first_page,
            count_pages: pages_for(len_bytes, page_size),
            len_bytes,
        };
        assert!(e.count_pages >= 1 && first_page >= 2, "extent {e:?}");
        e
    }

    /// One past the last page.
    pub fn end_page(&self) -> u64 {
        self.first_page + self.count_pages
    }

    pub fn encode(&self, out: &mut [u8]) {
        out[extent_ref::FIRST_PAGE.at..extent_ref::FIRST_PAGE.end()]
            .copy_from_slice(&self.first_page.to_le_bytes());
        out[extent_ref::LEN_BYTES.at..extent_ref::LEN_BYTES.end()]
            .copy_from_slice(&self.len_bytes.to_le_bytes());
    }

    /// Decodes a reference written by [`Extent::encode`]; None if it cannot
    /// point into a database file (page 0 and 1 are superblocks).
    pub fn decode(b: &[u8], page_size: usize) -> Option<Self> {
        let field = |f: super::layout::Field| b.get(f.at..f.end())?.try_into().ok();
        let first_page = u64::from_le_bytes(field(extent_ref::FIRST_PAGE)?);
        let len_bytes = u64::from_le_bytes(field(extent_ref::LEN_BYTES)?);
        if first_page < 2 || len_bytes > u64::MAX / 2 {
            return None;
        }
        let e = Self::new(first_page, len_bytes, page_size);
        e.first_page.checked_add(e.count_pages)?;
        Some(e)
    }

    /// The pages holding payload bytes `offset .. offset + len`, as
    /// (first page index within the extent, page count).
    pub fn pages_of_range(&self, offset: u64, len: u64, page_size: usize) -> (u64, u64) {
        assert!(
            len > 0 && offset + len <= self.len_bytes,
            "range outside {self:?}"
        );
        let cap = page_payload_bytes(page_size) as u64;
        let first = offset / cap;
        let last = (offset + len - 1) / cap;
        assert!(last < self.count_pages);
        (first, last - first + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_ranges_by_hand() {
        // 512-byte pages carry 480 payload bytes each.
        let e = Extent::new(10, 1000, 512);
        assert_eq!((e.count_pages, e.end_page()), (3, 13));
        assert_eq!(e.pages_of_range(0, 480, 512), (0, 1));
        assert_eq!(e.pages_of_range(479, 2, 512), (0, 2));
        assert_eq!(e.pages_of_range(960, 40, 512), (2, 1));
        assert_eq!(Extent::new(5, 0, 4096).count_pages, 1);
        let mut b = [0u8; 16];
        e.encode(&mut b);
        assert_eq!(Extent::decode(&b, 512), Some(e));
        assert_eq!(
            Extent::decode(&[0u8; 16], 512),
            None,
            "page 0 is a superblock"
        );
    }
}
