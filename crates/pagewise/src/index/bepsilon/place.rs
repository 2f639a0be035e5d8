//! Checkpoint placement of dirty nodes (docs/design.md, "B-epsilon nodes",
//! node placement): bottom-up, each node is encoded with its children's new
//! extents, compressed, written to a fresh extent; then the placed nodes
//! leave the dirty set for the cache and the roots point at their extents.

use super::node::Node;
use super::{format, Child};
use crate::error::Result;
use crate::index::Desc;
use crate::index::Index;
use crate::store::cache::PidMap;
use crate::store::extent::Extent;
use crate::store::image::{downcast, Image};
use crate::store::page::Kind;
use std::sync::Arc;

/// A tree's dirty nodes, collected under the state lock.
struct Work {
    tree: Arc<str>,
    root: u64,
    opts: super::BEpsOptions,
    nodes: PidMap<Arc<Node>>,
}

impl Index {
    /// Places every dirty B-epsilon node. Requires: the commit lock (nothing
    /// changes the trees meanwhile; readers continue). Effect: the nodes are
    /// written to fresh extents (never referenced by the durable
    /// checkpoint), then, under the state write lock, become clean cached
    /// images and the descriptors point at the new roots.
    pub fn place_extents(&self, gen: u64) -> Result<()> {
        let work = self.collect_dirty();
        let mut placed: Vec<(u64, Extent, Arc<Node>)> = Vec::new();
        let mut roots = Vec::new();
        for w in &work {
            let ext = self.place_node(w, w.root, gen, &mut placed, 0)?;
            roots.push((w.tree.clone(), ext));
        }
        let mut st = self.store.state.write();
        for (id, ext, node) in placed {
            let img = st.dirty.remove(id).expect("a collected node is dirty");
            let was = downcast::<Node>(img).expect("a B-epsilon node");
            st.dirty.extra_bytes -= was.heap_bytes() as u64;
            self.store.cache.remove(ext.first_page);
            self.store
                .cache
                .insert(ext.first_page, node as Image, || true);
        }
        for (tree, ext) in roots {
            let Some(Desc::BEpsilon(m)) = st.trees.0.get_mut(&tree) else {
                panic!("placed tree {tree:?} vanished");
            };
            m.root = Some(Child::Clean(ext));
        }
        super::trace::report(gen);
        Ok(())
    }

    fn collect_dirty(&self) -> Vec<Work> {
        let st = self.store.state.read();
        let mut out = Vec::new();
        for (name, d) in &st.trees.0 {
            let Desc::BEpsilon(m) = d else { continue };
            let Some(Child::Dirty(root)) = m.root else {
                continue;
            };
            let mut nodes = PidMap::default();
            let mut stack = vec![root];
            while let Some(id) = stack.pop() {
                let img = st.dirty.get(id).expect("a dirty child is dirty").clone();
                let n = downcast::<Node>(img).expect("a B-epsilon node");
                stack.extend(n.children.iter().filter_map(|c| match c {
                    Child::Dirty(c) => Some(*c),
                    Child::Clean(_) => None,
                }));
                nodes.insert(id, n);
            }
            out.push(Work {
                tree: name.clone(),
                root,
                opts: m.opts,
                nodes,
            });
        }
        out
    }

    /// Writes node `id` after its dirty children; returns its extent.
    fn place_node(
        &self,
        w: &Work,
        id: u64,
        gen: u64,
        placed: &mut Vec<(u64, Extent, Arc<Node>)>,
        depth: u32,
    ) -> Result<Extent> {
        assert!(
            depth <= super::MAX_HEIGHT,
            "dirty nodes deeper than any tree"
        );
        let mut clean: Node = (*w.nodes[&id]).clone();
        for i in 0..clean.children.len() {
            if let Child::Dirty(c) = clean.children[i] {
                let ext = self.place_node(w, c, gen, placed, depth + 1)?;
                clean.children[i] = Child::Clean(ext);
            }
        }
        let bytes = format::encode(&clean, w.opts.compression, w.opts.level);
        let pager = &self.store.pager;
        let count = pager.extent_pages(bytes.len());
        let first = self.store.alloc.lock().alloc(count);
        let ext = Extent::new(first, bytes.len() as u64, pager.ps);
        assert_eq!(ext.count_pages, count);
        pager.write_extent(&ext, Kind::BEps, &bytes, gen)?;
        super::trace::node_written(clean.height, bytes.len());
        let shell = format::decode_shell(&bytes, ext.len_bytes, pager.ps)
            .expect("a node just encoded decodes");
        (clean.dir, clean.comp) = (shell.dir, shell.comp);
        placed.push((id, ext, Arc::new(clean)));
        Ok(ext)
    }
}
