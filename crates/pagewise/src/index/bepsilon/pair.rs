//! Paired flushes (docs/design.md, "B-epsilon nodes", paired flushes): a
//! batch's root over its budget flushes its two heaviest buffers at once,
//! the second on a scoped thread, so a load's flushes (the bulk of its work
//! on the committing thread) use a second core. The two children's subtrees
//! are disjoint: the second thread's writer owns the dirty nodes of its
//! child's subtree, taken out of the dirty set before it starts and put
//! back after the join, and records the extents it frees; the root's own
//! changes (splits and merges of the two children) follow on the calling
//! thread, one child at a time. Nothing is written: the result is what two
//! flushes one after the other leave, under the same locks.

use super::node::{Buffer, Node};
use super::write::{Nodes, Writer};
use super::{Child, Meta};
use crate::error::Result;
use crate::events::{self, Event};
use crate::store::cache::PidMap;
use crate::store::image::Image;

impl Writer<'_> {
    /// Flushes buffers `c` and `d` of internal `parent` into their
    /// children, `c`'s on a second thread. Requires: the state write lock
    /// and the allocator (this writer's `alloc`), `c != d`. Effect: as
    /// [`Writer::flush_child`] of `c`, then of `d`; on an error the
    /// children are back in the dirty set (the caller poisons the Db).
    pub(super) fn flush_pair(
        &mut self,
        m: &mut Meta,
        parent: &mut Node,
        c: usize,
        d: usize,
    ) -> Result<()> {
        assert!(c != d && !parent.is_leaf() && self.alloc.is_some());
        self.check_operator(parent, c)?;
        self.check_operator(parent, d)?;
        let mut ids = [0u64; 2];
        for (slot, i) in ids.iter_mut().zip([c, d]) {
            *slot = self.make_dirty(parent.children[i])?;
            parent.children[i] = Child::Dirty(*slot);
        }
        let [idc, idd] = ids;
        let (height, t0) = (parent.height, std::time::Instant::now());
        for _ in 0..2 {
            events::tell(
                self.events,
                Event::FlushBegin {
                    height,
                    paired: true,
                },
            );
        }
        // A failed flush tells no end, as `flush_child`'s (the Db is poisoned).
        self.flush_pair_down(m, parent, (c, idc), (d, idd))?;
        let elapsed_us = events::elapsed_us(t0);
        for _ in 0..2 {
            events::tell(self.events, Event::FlushEnd { height, elapsed_us });
        }
        Ok(())
    }

    /// [`Writer::flush_pair`] once both children are dirty.
    fn flush_pair_down(
        &mut self,
        m: &mut Meta,
        parent: &mut Node,
        (c, idc): (usize, u64),
        (d, idd): (usize, u64),
    ) -> Result<()> {
        let (msgs_c, msgs_d) = (parent.take_buf(c), parent.take_buf(d));
        let (mut child_c, mut child_d) = (self.take(idc), self.take(idd));
        if child_c.height + 1 != parent.height || child_d.height + 1 != parent.height {
            self.put(idc, child_c);
            self.put(idd, child_d);
            return Err(self.corrupt_level(parent.height));
        }
        let r = self.push_pair(m, (&mut child_c, msgs_c), (&mut child_d, msgs_d));
        self.put(idc, child_c);
        self.put(idd, child_d);
        r?;
        self.settle_pair(m, parent, [idd, idc])
    }

    /// Pushes each batch into its child, `c`'s on a scoped thread whose
    /// writer owns `c`'s dirty subtree. Effect: the subtree's nodes, the
    /// thread's frees, drops and counts are this writer's again.
    fn push_pair(
        &mut self,
        m: &mut Meta,
        (child_c, msgs_c): (&mut Node, Buffer),
        (child_d, msgs_d): (&mut Node, Buffer),
    ) -> Result<()> {
        let own = self.take_subtree(child_c);
        let mut second = Writer {
            dirty: Nodes::Own(own),
            pager: self.pager,
            cache: self.cache,
            alloc: None,
            frees: Vec::new(),
            merge: self.merge,
            events: self.events,
            tree: self.tree,
            dropped: Vec::new(),
        };
        let base = m.clone();
        let mut mc = m.clone();
        let (rc, rd) = std::thread::scope(|s| {
            let (w, mcr) = (&mut second, &mut mc);
            let h = s.spawn(move || w.push_down(mcr, child_c, msgs_c));
            let rd = self.push_down(m, child_d, msgs_d);
            (h.join(), rd)
        });
        let rc = rc.unwrap_or_else(|p| std::panic::resume_unwind(p));
        assert!(
            mc.root == base.root && mc.height == base.height && mc.next_seq == base.next_seq,
            "a flush below the root leaves the tree's root alone"
        );
        m.entries = m
            .entries
            .wrapping_add(mc.entries.wrapping_sub(base.entries));
        m.nodes = m.nodes.wrapping_add(mc.nodes.wrapping_sub(base.nodes));
        let Nodes::Own(own) = second.dirty else {
            unreachable!("the second writer owns its nodes")
        };
        for (id, img) in own {
            self.dirty.insert(id, img);
        }
        for (first, count) in std::mem::take(&mut second.frees) {
            self.free_later(first, count);
        }
        self.dropped.append(&mut second.dropped);
        rc.and(rd)
    }

    /// The dirty nodes below `node`, taken out of this writer's dirty set
    /// (bounded by its size: each dirty node has one parent).
    fn take_subtree(&mut self, node: &Node) -> PidMap<Image> {
        let mut own = PidMap::default();
        let mut stack: Vec<u64> = dirty_children(node).collect();
        while let Some(id) = stack.pop() {
            let img = self.dirty.remove(id).expect("a dirty child is dirty");
            let n = crate::store::image::downcast::<Node>(img.clone()).expect("a B-epsilon node");
            stack.extend(dirty_children(&n));
            drop(n);
            assert!(own.insert(id, img).is_none(), "a dirty node has one parent");
        }
        own
    }

    /// The parent's side of a pair, child by child as [`Writer::move_down`]
    /// does: each child (by id, since splits shift positions) splits as its
    /// size requires, then each that stayed one node may merge with a
    /// neighbour (the other one among them).
    fn settle_pair(&mut self, m: &mut Meta, parent: &mut Node, ids: [u64; 2]) -> Result<()> {
        let at = |p: &Node, id: u64| p.children.iter().position(|x| *x == Child::Dirty(id));
        let mut single = [false; 2];
        for (k, &id) in ids.iter().enumerate() {
            let i = at(parent, id).expect("a flushed child is the parent's");
            let child = self.take(id);
            single[k] = self.put_split(m, parent, i, id, child);
        }
        for (k, &id) in ids.iter().enumerate() {
            // A merge of the first may have joined the second into it.
            if let (true, Some(i)) = (single[k], at(parent, id)) {
                self.maybe_merge(m, parent, i)?;
            }
        }
        Ok(())
    }
}

fn dirty_children(n: &Node) -> impl Iterator<Item = u64> + '_ {
    n.children.iter().filter_map(|c| match c {
        Child::Dirty(id) => Some(*id),
        Child::Clean(_) => None,
    })
}
