//! Checkpoint placement of dirty nodes (docs/design.md, "B-epsilon nodes",
//! node placement): height by height from the leaves, each node is encoded
//! with its children's new extents and compressed (on several threads,
//! ordered.rs), then allocated and written to a fresh extent in a fixed
//! order; then the placed nodes leave the dirty set for the cache and the
//! roots point at their extents.

use super::node::Node;
use super::{format, ordered, Child, MAX_HEIGHT};
use crate::error::Result;
use crate::index::Desc;
use crate::index::Index;
use crate::store::cache::PidMap;
use crate::store::extent::Extent;
use crate::store::image::{downcast, Image};
use crate::store::page::Kind;
use std::sync::Arc;

/// A tree's dirty nodes, collected under the state lock.
pub(super) struct Work {
    pub(super) tree: Arc<str>,
    pub(super) root: u64,
    pub(super) opts: super::BEpsilonOptions,
    pub(super) nodes: PidMap<Arc<Node>>,
}

/// Encoded nodes waiting to be written, per placing thread: enough that a
/// worker rarely waits for the writer, few enough that the encoded bytes
/// held (1 MiB nodes by default) stay small beside the dirty budget.
const WINDOW_PER_THREAD: usize = 2;

/// Levels of fewer serialized bytes are encoded on the checkpointing thread.
const PARALLEL_MIN_BYTES: usize = 256 << 10;

/// A node ready to encode: its children placed.
struct Ready {
    id: u64,
    node: Node,
    opts: super::BEpsilonOptions,
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
        let mut exts = PidMap::default();
        for level in by_height(&work) {
            self.place_level(&work, &level, gen, &mut exts, &mut placed)?;
        }
        let roots: Vec<(Arc<str>, Extent)> = work
            .iter()
            .map(|w| (w.tree.clone(), exts[&w.root]))
            .collect();
        assert_eq!(
            placed.len(),
            work.iter().map(|w| w.nodes.len()).sum::<usize>()
        );
        let mut st = self.store.state.write();
        for (id, ext, node) in placed {
            let img = st.dirty.remove(id).expect("a collected node is dirty");
            assert!(downcast::<Node>(img).is_some(), "a B-epsilon node");
            self.store.cache.remove(ext.first_page);
            self.store
                .cache
                .insert(ext.first_page, node as Image, || true);
        }
        for (tree, ext) in roots {
            let Some(Desc::BEpsilon(m)) = st.trees.get_mut(&tree) else {
                panic!("placed tree {tree:?} vanished");
            };
            m.root = Some(Child::Clean(ext));
        }
        Ok(())
    }

    pub(super) fn collect_dirty(&self) -> Vec<Work> {
        let st = self.store.state.read();
        let mut out = Vec::new();
        for (name, d) in st.trees.0.iter() {
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

    /// Places the dirty nodes of one height. Requires: every dirty child of
    /// them is in `exts`. Effect: each is encoded (in parallel), allocated
    /// and written in `level`'s order, and recorded in `exts` and `placed`.
    pub(super) fn place_level(
        &self,
        work: &[Work],
        level: &[(usize, u64)],
        gen: u64,
        exts: &mut PidMap<Extent>,
        placed: &mut Vec<(u64, Extent, Arc<Node>)>,
    ) -> Result<()> {
        let ready: Vec<Ready> = level
            .iter()
            .map(|&(wi, id)| {
                let mut node: Node = (*work[wi].nodes[&id]).clone();
                for c in node.children.iter_mut() {
                    if let Child::Dirty(d) = *c {
                        *c = Child::Clean(*exts.get(&d).expect("children are placed first"));
                    }
                }
                let opts = work[wi].opts;
                Ready { id, node, opts }
            })
            .collect();
        let pager = &self.store.pager;
        // Threads pay for themselves on large levels only (the crash
        // simulation's tiny nodes checkpoint every few commits).
        let level_bytes: usize = ready
            .iter()
            .map(|r| r.node.part_bytes.iter().sum::<usize>())
            .sum();
        let threads = if level_bytes < PARALLEL_MIN_BYTES {
            1
        } else {
            crate::store::cores::available()
        };
        let encode = |r: &Ready| {
            let segment_bytes = super::segment::target_bytes(r.opts.basement_bytes, pager.ps);
            let bytes = format::encode(&r.node, r.opts.compression, r.opts.level, segment_bytes);
            let shell = format::decode_shell(&bytes, bytes.len() as u64, pager.ps)
                .expect("a node just encoded decodes");
            (bytes, shell)
        };
        ordered::map_ordered(
            &ready,
            threads,
            threads * WINDOW_PER_THREAD,
            encode,
            |i, (bytes, shell)| {
                let r = &ready[i];
                let count = pager.extent_pages(bytes.len());
                let first = self.store.alloc.lock().alloc_written(count);
                let ext = Extent::new(first, bytes.len() as u64, pager.ps);
                assert_eq!(ext.count_pages, count);
                pager.write_extent(&ext, Kind::BEpsilon, &bytes, gen)?;
                let mut clean = r.node.clone();
                (clean.dir, clean.segs, clean.comp) = (shell.dir, shell.segs, shell.comp);
                exts.insert(r.id, ext);
                placed.push((r.id, ext, Arc::new(clean)));
                Ok(())
            },
        )
    }
}

/// The dirty nodes of every tree grouped by height, leaves first; within a
/// height, trees in catalog order and each tree's nodes in post-order (the
/// order the single-threaded placement wrote them).
pub(super) fn by_height(work: &[Work]) -> Vec<Vec<(usize, u64)>> {
    let mut levels: Vec<Vec<(usize, u64)>> = Vec::new();
    for (wi, w) in work.iter().enumerate() {
        // (id, next child index to visit); depth bounded by the tree height.
        let mut stack: Vec<(u64, usize)> = vec![(w.root, 0)];
        let mut visits = 0usize;
        while let Some((id, k)) = stack.pop() {
            visits += 1;
            assert!(visits <= 2 * w.nodes.len() * (MAX_HEIGHT as usize + 1));
            let n = &w.nodes[&id];
            let next = n.children[k.min(n.children.len())..]
                .iter()
                .position(|c| matches!(c, Child::Dirty(_)))
                .map(|p| k + p);
            match next {
                Some(j) => {
                    let Child::Dirty(c) = n.children[j] else {
                        unreachable!()
                    };
                    stack.push((id, j + 1));
                    stack.push((c, 0));
                    assert!(
                        stack.len() <= MAX_HEIGHT as usize + 1,
                        "dirty nodes deeper than any tree"
                    );
                }
                None => {
                    let h = n.height as usize;
                    if levels.len() <= h {
                        levels.resize_with(h + 1, Vec::new);
                    }
                    levels[h].push((wi, id));
                }
            }
        }
    }
    levels
}
