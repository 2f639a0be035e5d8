//! Draining a tree (`Db::drain`): every buffered message moves down to the
//! leaves. A B-epsilon tree drops a replaced or removed value's reference
//! only when the newer message reaches the level holding it, so until then
//! the value's pages stay allocated; a drain drops them all at once, at the
//! cost of rewriting every node that buffered something (docs/design.md,
//! "B-epsilon packed values", space).

use super::node::Node;
use super::write::{Nodes, Writer};
use super::{Child, Meta, MAX_HEIGHT};
use crate::error::Result;

impl crate::index::Index {
    /// Drains every B-epsilon tree ([`Writer::drain`]). Requires: the
    /// commit lock.
    pub fn drain_trees(&self) -> Result<()> {
        let mut st = self.store.state.write();
        let mut al = self.store.alloc.lock();
        let names: Vec<std::sync::Arc<str>> = st.trees.0.keys().cloned().collect();
        for name in names {
            let crate::store::Epoch { trees, dirty, .. } = &mut *st;
            let Some(crate::index::Desc::BEpsilon(m)) = trees.get_mut(&name) else {
                continue;
            };
            let mut w = Writer {
                dirty: Nodes::Shared(dirty),
                pager: &self.store.pager,
                cache: &self.store.cache,
                alloc: Some(&mut al),
                frees: Vec::new(),
                merge: self.merge.as_deref(),
                events: self.events.as_deref(),
                tree: &name,
                dropped: Vec::new(),
            };
            w.drain(m)?;
        }
        Ok(())
    }
}

impl Writer<'_> {
    /// Moves every message of the tree's buffers to its leaves. Requires:
    /// the state write lock and the allocator. Effect: in memory only; the
    /// references the leaves replace are freed as any drop is.
    pub fn drain(&mut self, m: &mut Meta) -> Result<()> {
        let r = self.drain_root(m);
        self.free_dropped(m);
        r
    }

    fn drain_root(&mut self, m: &mut Meta) -> Result<()> {
        let Some(root) = m.root else {
            return Ok(());
        };
        if m.height == 0 {
            return Ok(());
        }
        let id = self.make_dirty(root)?;
        m.root = Some(Child::Dirty(id));
        let mut node = self.take(id);
        let r = self.drain_node(m, &mut node, 0);
        self.put(id, node);
        r?;
        self.rebalance_root(m)
    }

    /// Flushes every buffer of internal node `node` (at recursion depth
    /// `depth`) into its child, then drains the child, splitting it as its
    /// size requires. Bounded by the children (which splits add to, at most
    /// a fanout's worth per child) and the height.
    fn drain_node(&mut self, m: &mut Meta, node: &mut Node, depth: u32) -> Result<()> {
        assert!(!node.is_leaf() && depth <= MAX_HEIGHT);
        let bound = 64 * (m.opts.fanout as usize + 8);
        for c in 0..bound {
            if c >= node.children.len() {
                break;
            }
            if node.part_bytes[c] > 0 {
                self.flush_child(m, node, c)?;
            }
            if c < node.children.len() && node.height > 1 {
                let cid = self.make_dirty(node.children[c])?;
                node.children[c] = Child::Dirty(cid);
                let mut child = self.take(cid);
                if let Err(e) = self.drain_node(m, &mut child, depth + 1) {
                    self.put(cid, child);
                    return Err(e);
                }
                // A child grown past its size splits, the pieces beside it.
                self.put_split(m, node, c, cid, child);
            }
        }
        assert!(node.part_bytes.len() == node.children.len());
        Ok(())
    }
}
