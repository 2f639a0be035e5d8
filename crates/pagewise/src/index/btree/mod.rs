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
pub const DESC_BYTES: usize = 52;
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
        let v: Vec<u64> = (0..5).map(|i| get_u64(b, 12 + 8 * i)).collect();
        let m = Meta {
            root: get_u64(b, 0),
            height: get_u32(b, 8),
            entries: v[0],
            leaf_pages: v[1],
            branch_pages: v[2],
            overflow_pages: v[3],
            leaf_bytes: v[4],
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
