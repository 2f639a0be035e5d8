//! Leaf write-back between checkpoints (docs/design.md, "Checkpoints",
//! leaf write-back): when the dirty set reaches its budget, the dirty
//! leaves are written to fresh extents and leave it, and their parents (which
//! stay dirty) point at those extents. A flush rewrites a whole leaf, and a
//! leaf rarely takes two flushes in one epoch, so writing it now costs about
//! what the checkpoint would; in exchange the dirty budget is spent on
//! internal nodes, whose buffers absorb messages for as long as they stay
//! dirty, and checkpoints (each rewrites every dirty internal node whole)
//! come less often.

use super::node::Node;
use super::Child;
use crate::error::Result;
use crate::events::{self, Event};
use crate::index::Index;
use crate::store::cache::PidMap;
use crate::store::extent::Extent;
use crate::store::image::{downcast, Image};
use std::sync::Arc;

/// What one write-back did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct WriteBack {
    pub count_leaves: usize,
    /// Dirty-set bytes (heap charge) before and after.
    pub dirty_before_bytes: u64,
    pub dirty_after_bytes: u64,
}

impl Index {
    /// Writes every dirty leaf of every B-epsilon tree that is not a root.
    /// Requires: the commit lock (no writer changes the trees meanwhile;
    /// readers continue). Effect: each leaf is encoded, written to a fresh
    /// extent (never referenced by the durable checkpoint, so a crash leaves
    /// it unreferenced free space: the checkpoint rules hold) and becomes a
    /// clean cached image; each parent, still dirty, names the extent. `gen`
    /// is the next checkpoint's, the one that will publish the extents.
    pub fn write_back_leaves(&self, gen: u64) -> Result<WriteBack> {
        let dirty_before_bytes = self.store.state.read().dirty.bytes();
        let work = self.collect_dirty();
        let parents = leaf_parents(&work);
        let leaves: Vec<(usize, u64)> = super::place::by_height(&work)
            .into_iter()
            .next()
            .unwrap_or_default()
            .into_iter()
            .filter(|(_, id)| parents.contains_key(id))
            .collect();
        let t0 = std::time::Instant::now();
        let events = self.events.as_deref();
        if !leaves.is_empty() {
            let dirty_bytes = dirty_before_bytes;
            events::tell(events, Event::WriteBackBegin { dirty_bytes });
        }
        let mut exts = PidMap::default();
        let mut placed: Vec<(u64, Extent, Arc<Node>)> = Vec::new();
        self.place_level(&work, &leaves, gen, &mut exts, &mut placed)?;
        assert_eq!(placed.len(), leaves.len());
        let mut st = self.store.state.write();
        let mut by_parent: PidMap<Vec<(u64, Extent)>> = PidMap::default();
        for (id, ext, node) in placed {
            let img = st.dirty.remove(id).expect("a collected leaf is dirty");
            assert!(downcast::<Node>(img).is_some_and(|n| n.is_leaf()));
            self.store.cache.remove(ext.first_page);
            self.store
                .cache
                .insert(ext.first_page, shell_only(node), || true);
            by_parent.entry(parents[&id]).or_default().push((id, ext));
        }
        for (pid, moved) in by_parent {
            let img = st.dirty.remove(pid).expect("a leaf's parent is dirty");
            let parent = downcast::<Node>(img).expect("a B-epsilon node");
            let mut parent = Arc::try_unwrap(parent).unwrap_or_else(|a| (*a).clone());
            for (id, ext) in moved {
                let at = parent.children.iter().position(|c| *c == Child::Dirty(id));
                parent.children[at.expect("the parent names its dirty leaf")] = Child::Clean(ext);
            }
            st.dirty.insert(pid, Arc::new(parent) as Image);
        }
        let dirty_after_bytes = st.dirty.bytes();
        assert!(dirty_after_bytes <= dirty_before_bytes || leaves.is_empty());
        if !leaves.is_empty() {
            let (leaves, elapsed_us) = (leaves.len() as u64, events::elapsed_us(t0));
            events::tell(events, Event::WriteBackEnd { leaves, elapsed_us });
        }
        Ok(WriteBack {
            count_leaves: leaves.len(),
            dirty_before_bytes,
            dirty_after_bytes,
        })
    }
}

/// The parent of every dirty leaf below a dirty internal node.
fn leaf_parents(work: &[super::place::Work]) -> PidMap<u64> {
    let mut out = PidMap::default();
    for w in work {
        for (&id, n) in &w.nodes {
            if n.height != 1 {
                continue;
            }
            for c in &n.children {
                if let Child::Dirty(leaf) = *c {
                    assert!(
                        w.nodes[&leaf].is_leaf(),
                        "a height-1 node's child is a leaf"
                    );
                    out.insert(leaf, id);
                }
            }
        }
    }
    out
}

/// The cached image of a leaf just written back: its shell, the basements
/// dropped. A written-back leaf is cold (the flush that dirtied it moved
/// everything its parent buffered for it), and its basements, about a
/// leaf's bytes of heap, would otherwise sit in the cache until evicted,
/// where the allocator keeps their memory as fragments beside the growing
/// internal buffers (docs/benchmarks.md, "Memory").
fn shell_only(leaf: Arc<Node>) -> Image {
    assert!(leaf.is_leaf() && leaf.dir.len() == leaf.parts.len());
    let mut n = Arc::try_unwrap(leaf).unwrap_or_else(|a| (*a).clone());
    n.parts.iter_mut().for_each(|p| *p = None);
    Arc::new(n) as Image
}
