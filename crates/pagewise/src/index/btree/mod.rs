//! The B+tree kind: fixed-size pages, copy-on-write per checkpoint epoch.
//! Node payload: docs/design.md, "B+tree node payload"; root descriptor:
//! "B+tree root descriptor".

pub mod check;
pub mod delta;
pub mod iter;
pub mod node;
pub mod prefetch;
pub mod read;
pub mod readahead;
pub mod write;

use crate::store::image::{self, Image};
use crate::store::page::{get_u32, get_u64, Kind};
use node::Node;
use std::sync::Arc;

/// Per-tree state: the root and the counters `check` verifies. Persisted as
/// the catalog entry's root descriptor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Meta {
    /// Root page id; 0 for an empty tree (pages 0 and 1 are superblocks).
    pub root: u64,
    /// Levels from root to leaf; 0 for an empty tree.
    pub height: u32,
    pub entries: u64,
    pub leaf_pages: u64,
    pub branch_pages: u64,
    pub overflow_pages: u64,
    /// Sum of encoded leaf entry sizes (for average fill).
    pub leaf_bytes: u64,
}

/// Encoded size of the root descriptor (the same bytes as a version-1
/// catalog entry's fixed part).
pub const DESC_BYTES: usize = root::LEAF_BYTES.end();

/// The root descriptor's fields (docs/design.md, "B+tree root descriptor").
#[allow(dead_code)] // every row of its table is named, read or not
pub mod root {
    use crate::store::layout::Field;
    pub const ROOT: Field = Field::new(0, 8);
    pub const HEIGHT: Field = Field::new(8, 4);
    pub const ENTRIES: Field = Field::new(12, 8);
    pub const LEAF_PAGES: Field = Field::new(20, 8);
    pub const BRANCH_PAGES: Field = Field::new(28, 8);
    pub const OVERFLOW_PAGES: Field = Field::new(36, 8);
    pub const LEAF_BYTES: Field = Field::new(44, 8);
}

/// The root descriptor's table in docs/design.md.
#[cfg(test)]
pub const ROOT_TABLE: crate::store::layout::Table = crate::store::layout::Table {
    heading: "B+tree root descriptor (52 bytes, the catalog entry's root)",
    index: 0,
    rows: &[
        ("root page id", root::ROOT),
        ("height", root::HEIGHT),
        ("entries", root::ENTRIES),
        ("leaf pages", root::LEAF_PAGES),
        ("branch pages", root::BRANCH_PAGES),
        ("overflow pages", root::OVERFLOW_PAGES),
        ("encoded leaf entry bytes", root::LEAF_BYTES),
    ],
};
/// Deepest tree accepted from disk: a descent is bounded by the height, and
/// no page size makes a real tree this deep (fanout >= 2 gives 2^64 leaves).
pub const MAX_HEIGHT: u32 = 64;

impl Meta {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(DESC_BYTES);
        b.extend_from_slice(&self.root.to_le_bytes());
        b.extend_from_slice(&self.height.to_le_bytes());
        for v in [
            self.entries,
            self.leaf_pages,
            self.branch_pages,
            self.overflow_pages,
            self.leaf_bytes,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        assert_eq!(b.len(), DESC_BYTES);
        b
    }

    pub fn decode(b: &[u8]) -> Result<Meta, String> {
        if b.len() != DESC_BYTES {
            return Err(format!(
                "B+tree root descriptor of {} bytes, expected {DESC_BYTES}",
                b.len()
            ));
        }
        let m = Meta {
            root: get_u64(b, root::ROOT.at),
            height: get_u32(b, root::HEIGHT.at),
            entries: get_u64(b, root::ENTRIES.at),
            leaf_pages: get_u64(b, root::LEAF_PAGES.at),
            branch_pages: get_u64(b, root::BRANCH_PAGES.at),
            overflow_pages: get_u64(b, root::OVERFLOW_PAGES.at),
            leaf_bytes: get_u64(b, root::LEAF_BYTES.at),
        };
        if (m.root == 0) != (m.height == 0) || m.height > MAX_HEIGHT || m.root == 1 {
            return Err(format!("B+tree root {} with height {}", m.root, m.height));
        }
        Ok(m)
    }
}

/// Page kinds of B+tree nodes.
pub const PAGE_KINDS: &[Kind] = &[Kind::Leaf, Kind::Branch, Kind::BranchBases];

/// Decodes a verified B+tree page payload.
pub fn decode_page(
    kind: Kind,
    count: usize,
    payload: &[u8],
    page_size: usize,
) -> Result<Image, String> {
    assert!(PAGE_KINDS.contains(&kind));
    let node = Node::decode(payload, kind, count, page_size)?;
    Ok(Arc::new(node))
}

/// The B+tree node in an image found under a B+tree page id, borrowed (no
/// reference count traffic: the cheap form for descents).
#[inline]
pub fn node_ref(img: &Image) -> &Node {
    image::downcast_ref::<Node>(&**img).expect("a B+tree page id holds a B+tree node")
}

/// A B+tree node from an image found under a B+tree page id.
#[inline]
pub fn as_node(img: Image) -> Arc<Node> {
    image::downcast::<Node>(img).expect("a B+tree page id holds a B+tree node")
}
