//! What the store keeps in memory for a node: a decoded image of any tree
//! kind, behind one trait, so the cache, the dirty set and the checkpoint
//! writer handle every kind alike without knowing its format.
//!
//! A tree kind registers its page kinds and decoder with [`NodeCodec`]; the
//! store verifies the page header (docs/design.md, "Page header") before the
//! decoder sees a byte, and a tree kind gets its own type back with
//! [`downcast`].

use super::page::Kind;
use std::any::Any;
use std::sync::Arc;

/// A decoded node of some tree kind.
pub trait NodeImage: Any + Send + Sync {
    /// Heap bytes the image holds: charged against the cache budget.
    fn charge_bytes(&self) -> usize;
    /// Writes the page payload after the 32-byte header into `page` (one
    /// page) and returns the header fields that describe it.
    fn encode_page(&self, page: &mut [u8]) -> PageFill;
    /// Bytes of its page a checkpoint writes: the whole page, or for a delta
    /// block (kind 6) its length, which `encode_page` then fills.
    fn written_bytes(&self, page_size: usize) -> usize {
        page_size
    }
    /// Partial eviction: a smaller image of the same node without the parts
    /// no reader used since the last call (whose use marks it clears), or
    /// None when nothing can go. The cache calls it where its CLOCK hand
    /// passes, before it would evict the whole image.
    fn shed(&self) -> Option<Image> {
        None
    }
    /// Extra passes of the CLOCK hand an unreferenced image survives before
    /// eviction (at most [`MAX_KEEP_PASSES`]): images that are cheap to keep
    /// and cost a dependent read when missing (B-epsilon node shells) stay
    /// while the parts around them are shed. 0: plain second chance.
    fn keep_passes(&self) -> u8 {
        0
    }
}

/// Most extra passes [`NodeImage::keep_passes`] may ask for (bounds the
/// cache's eviction loop).
pub const MAX_KEEP_PASSES: u8 = 4;

/// Header fields a node image sets when it is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageFill {
    pub kind: Kind,
    pub count: u16,
    pub used_bytes: u32,
}

/// A shared node image.
pub type Image = Arc<dyn NodeImage>;

/// How the store turns a verified page payload into an image.
#[derive(Clone, Copy)]
pub struct NodeCodec {
    /// Page kinds that hold nodes: a page of another kind is corrupt.
    pub kinds: &'static [Kind],
    /// (page kind, entry count, payload, page size) to an image, or what
    /// is wrong.
    pub decode: fn(Kind, usize, &[u8], usize) -> Result<Image, String>,
    /// Kinds with delta blocks (page kind 6, docs/design.md "Delta blocks
    /// for B+tree pages"): rebuilds a node from its verified base page and
    /// delta block. None: a delta block is corrupt.
    pub apply_delta: Option<ApplyDelta>,
}

/// Rebuilds a node from a delta block and its base page, or says what is wrong.
pub type ApplyDelta = fn(&DeltaPages) -> Result<Image, String>;

/// A verified delta block and the verified base page it names.
pub struct DeltaPages<'a> {
    pub base_kind: Kind,
    pub base_count: usize,
    pub base_payload: &'a [u8],
    /// crc32c of `base_payload`, from the pass that verified the base page.
    pub base_payload_crc: u32,
    /// The delta block's header entry count and payload.
    pub count: usize,
    pub payload: &'a [u8],
    pub page_size: usize,
}

/// The concrete node type of `image`, or None if it is another kind's.
#[inline]
pub fn downcast<N: NodeImage>(image: Image) -> Option<Arc<N>> {
    let any: Arc<dyn Any + Send + Sync> = image;
    any.downcast::<N>().ok()
}

/// A shared reference to the concrete node type of `image`.
pub fn downcast_ref<N: NodeImage>(image: &dyn NodeImage) -> Option<&N> {
    let any: &dyn Any = image;
    any.downcast_ref::<N>()
}

/// Makes the image in `slot` uniquely owned (cloning it if shared) and
/// returns it as `N`. Panics if `slot` holds another kind's image: a tree
/// kind only ever finds its own nodes under its own page ids.
pub fn make_mut<N: NodeImage + Clone>(slot: &mut Image) -> &mut N {
    if Arc::get_mut(slot).is_none() {
        let copy: N = downcast_ref::<N>(&**slot)
            .expect("node image of another tree kind")
            .clone();
        *slot = Arc::new(copy);
    }
    let unique: &mut dyn NodeImage = Arc::get_mut(slot).expect("uniquely owned after the copy");
    let any: &mut dyn Any = unique;
    any.downcast_mut::<N>()
        .expect("node image of another tree kind")
}

#[cfg(test)]
pub mod testing {
    //! A minimal image for the store's own tests.
    use super::*;

    #[derive(Clone, Debug)]
    pub struct Blob(pub Vec<u8>);

    impl NodeImage for Blob {
        fn charge_bytes(&self) -> usize {
            96 + self.0.capacity()
        }
        fn encode_page(&self, page: &mut [u8]) -> PageFill {
            page[32..32 + self.0.len()].copy_from_slice(&self.0);
            PageFill {
                kind: Kind::Leaf,
                count: 0,
                used_bytes: self.0.len() as u32,
            }
        }
    }

    pub fn blob(n: usize) -> Image {
        Arc::new(Blob(vec![7u8; n]))
    }

    #[test]
    fn downcast_and_make_mut_copy_on_share() {
        let mut a = blob(10);
        let b = a.clone();
        make_mut::<Blob>(&mut a).0.push(1);
        assert_eq!(downcast_ref::<Blob>(&*a).unwrap().0.len(), 11);
        assert_eq!(
            downcast_ref::<Blob>(&*b).unwrap().0.len(),
            10,
            "the shared copy is untouched"
        );
        assert!(downcast::<Blob>(b).is_some());
    }
}
