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

use super::layout::stored;
use crate::error::Result;
use crate::store::extent::{Extent, EXTENT_REF_BYTES};
use crate::store::pager::Pager;

/// A stored value that holds its bytes.
pub const TAG_INLINE: u8 = 0;
/// A stored value that names the extent holding its bytes.
pub const TAG_EXTENT: u8 = 1;
/// Bytes of a stored extent reference: the tag and the reference.
pub const STORED_REF_BYTES: usize = stored::TAG.end() + EXTENT_REF_BYTES;

/// How a tree stores its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// As given (trees created without value extents).
    Plain,
    /// Tagged, values of at least `.0` bytes in extents of their own.
    Tagged(u32),
}

/// A stored value, read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored<'a> {
    Inline(&'a [u8]),
    Extent(Extent),
}

impl Form {
    /// Whether a put of `len` bytes goes to an extent of its own.
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
                _ => None,
            },
        }
    }

    /// The extent a stored value names, if it names one (nothing for plain
    /// trees, inline values and damaged bytes: `check` reports those).
    pub fn extent_of(self, b: &[u8], page_size: usize) -> Option<Extent> {
        match self {
            Form::Tagged(_) if may_name_extent(b) => match self.parse(b, page_size)? {
                Stored::Extent(e) => Some(e),
                Stored::Inline(_) => None,
            },
            _ => None,
        }
    }

    /// `b` as the user's value: inline bytes copied, an extent read with
    /// `read`. A damaged stored value is `Error::Corrupt` naming `tree`.
    pub fn plain(
        self,
        b: &[u8],
        pager: &Pager,
        tree: &str,
        read: &mut dyn FnMut(&Extent) -> Result<Vec<u8>>,
    ) -> Result<Vec<u8>> {
        match self.parse(b, pager.ps) {
            Some(Stored::Inline(v)) => Ok(v.to_vec()),
            Some(Stored::Extent(e)) => read(&e),
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

/// Whether stored bytes `b` have the shape of an extent reference (any
/// tree's: the writer frees only what its tree's form names).
pub fn may_name_extent(b: &[u8]) -> bool {
    b.len() == STORED_REF_BYTES && b[stored::TAG.at] == TAG_EXTENT
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
        assert_eq!(f.extent_of(&r, 4096), Some(e));
        assert_eq!(Form::Plain.extent_of(&r, 4096), None);
        // An inline value of 16 bytes is 17 stored bytes too, tagged 0.
        assert_eq!(f.extent_of(&f.inline(&[1u8; 16]), 4096), None);
        assert_eq!(f.parse(&[2, 0], 4096), None);
        assert_eq!(f.parse(&[], 4096), None);
    }
}
