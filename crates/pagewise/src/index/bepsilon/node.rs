//! A B-epsilon node in memory: pivots, child references (internal nodes)
//! and partitions (message buffers or basements), each loaded or not, with
//! its serialized size kept per partition so budgets cost nothing to check.

pub use super::buffer::Buffer;
use super::buffer::Message;
pub use super::directory::DirEntry;
use super::heap::{alloc_bytes, arc_bytes};
use super::packed::Packed;
use super::pivots::Pivots;
use super::Child;
use crate::store::image::{Image, NodeImage, PageFill};
use std::mem::size_of;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

/// Node header bytes (docs/design.md, "B-epsilon nodes").
pub const HEADER_BYTES: usize = super::layout::header::RESERVED_END.end();
pub const DIR_ENTRY_BYTES: usize = super::layout::dir::FILTER_BYTES.end();
/// One partition: an internal node's buffer for one child, or a basement.
#[derive(Debug, Clone)]
pub enum Part {
    Buf(Buffer),
    /// A basement as stored: clean (read or just written) or dirty.
    Packed(Packed),
}

impl Part {
    pub fn entries(&self) -> usize {
        match self {
            Part::Buf(b) => b.count(),
            Part::Packed(p) => p.len(),
        }
    }

    /// Serialized bytes.
    pub fn bytes(&self) -> usize {
        match self {
            Part::Buf(b) => b.bytes(),
            Part::Packed(p) => p.bytes(),
        }
    }

    /// The buffer of an internal node's partition. Panics on a basement.
    pub fn buffer(&self) -> &Buffer {
        match self {
            Part::Buf(b) => b,
            Part::Packed(_) => panic!("a basement where a buffer partition was expected"),
        }
    }
}

impl Part {
    /// Heap bytes it holds.
    pub fn heap_bytes(&self) -> usize {
        match self {
            Part::Buf(b) => b.heap_bytes(),
            Part::Packed(p) => p.heap_bytes(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Node {
    /// Levels above the leaves (0: leaf).
    pub height: u32,
    /// P - 1 keys; partition i holds `[pivots[i-1], pivots[i])`. Shared by
    /// the images of a clean node (pivots.rs).
    pub pivots: Pivots,
    /// P children (internal nodes), empty for leaves.
    pub children: Vec<Child>,
    /// P partitions, `None` while not loaded (clean nodes only).
    pub parts: Vec<Option<Arc<Part>>>,
    /// Serialized (uncompressed) bytes of each partition.
    pub part_bytes: Vec<usize>,
    /// Directory of the stored node (empty for dirty nodes); shared by the
    /// images of a clean node.
    pub dir: Arc<[DirEntry]>,
    /// Segments of the stored node's buffers (None: no buffer is cut, or
    /// not a stored node); shared by the images of a clean node.
    pub segs: Option<Arc<super::segment::Table>>,
    /// Compression code of the stored partitions (stored nodes only).
    pub comp: u8,
    /// Which loaded partitions reads used since the cache last looked
    /// (clean cached nodes; partial eviction, [`NodeImage::shed`]).
    pub uses: UseMarks,
}

/// The directory of a node not stored (dirty), which allocates nothing.
pub fn no_dir() -> Arc<[DirEntry]> {
    Arc::default()
}

/// Heap bytes of a shared directory of `len` entries (its counts and
/// entries in one allocation; an empty one is static).
fn dir_bytes(len: usize) -> usize {
    if len == 0 {
        0
    } else {
        alloc_bytes(16 + len * size_of::<DirEntry>())
    }
}

/// One mark per partition, set by a read that used it and cleared when the
/// cache's CLOCK hand passes the node: a loaded partition found unmarked is
/// dropped from the cached image while the shell stays (partial eviction).
/// Shared by the images of one node, so a reader's mark is seen whichever
/// image the cache holds by then.
#[derive(Debug, Clone, Default)]
pub struct UseMarks(Arc<[AtomicBool]>);

impl UseMarks {
    pub fn new(count: usize) -> Self {
        Self((0..count).map(|_| AtomicBool::new(false)).collect())
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    /// Notes a use of partition `i` (no-op without marks: uncached nodes).
    #[inline]
    pub fn mark(&self, i: usize) {
        if let Some(m) = self.0.get(i) {
            if !m.load(Relaxed) {
                m.store(true, Relaxed);
            }
        }
    }

    fn is_marked(&self, i: usize) -> bool {
        self.0.get(i).is_some_and(|m| m.load(Relaxed))
    }

    /// Whether partition `i` was used since the last call (and clears it).
    fn take(&self, i: usize) -> bool {
        self.0.get(i).is_some_and(|m| m.swap(false, Relaxed))
    }
}

impl Node {
    pub fn new_leaf() -> Self {
        Self {
            height: 0,
            pivots: Pivots::new(),
            children: Vec::new(),
            parts: vec![Some(Arc::new(Part::Packed(Packed::default())))],
            part_bytes: vec![0],
            dir: no_dir(),
            segs: None,
            comp: 0,
            uses: UseMarks::default(),
        }
    }

    pub fn is_leaf(&self) -> bool {
        self.height == 0
    }

    /// The partition whose key range holds `key`.
    pub fn find(&self, key: &[u8]) -> usize {
        self.pivots.find(key)
    }

    /// Bytes of header, directory, pivots and child references.
    pub fn shell_bytes(&self) -> usize {
        let refs = if self.is_leaf() {
            0
        } else {
            16 * self.children.len()
        };
        HEADER_BYTES
            + DIR_ENTRY_BYTES * self.parts.len()
            + 2 * self.pivots.len()
            + self.pivots.key_bytes()
            + refs
    }

    /// Bytes of the stored buffer filters (clean internal nodes).
    pub fn filter_bytes(&self) -> usize {
        self.dir
            .iter()
            .filter_map(|d| d.filter.as_ref())
            .map(|f| f.bytes().len())
            .sum()
    }

    /// Serialized bytes before compression: what budgets are measured in.
    pub fn bytes(&self) -> usize {
        self.shell_bytes() + self.part_bytes.iter().sum::<usize>()
    }

    /// Heap bytes of the node in memory, loaded partitions included: what
    /// the cache and the dirty set charge for it (heap.rs).
    pub fn heap_bytes(&self) -> usize {
        let vecs = alloc_bytes(self.children.capacity() * size_of::<Child>())
            + alloc_bytes(self.parts.capacity() * size_of::<Option<Arc<Part>>>())
            + alloc_bytes(self.part_bytes.capacity() * size_of::<usize>())
            + dir_bytes(self.dir.len())
            + alloc_bytes(16 + self.uses.len());
        arc_bytes::<Node>() + vecs + self.pivots.heap_bytes() + self.parts_heap_bytes()
    }

    /// Heap bytes of the loaded partitions.
    pub fn parts_heap_bytes(&self) -> usize {
        let parts = self.parts.iter().flatten();
        parts.map(|p| arc_bytes::<Part>() + p.heap_bytes()).sum()
    }

    pub fn all_loaded(&self) -> bool {
        self.parts.iter().all(Option::is_some)
    }

    /// Partition `i` for changing. Requires: loaded (dirty nodes always are).
    pub fn part_mut(&mut self, i: usize) -> &mut Part {
        Arc::make_mut(self.parts[i].as_mut().expect("dirty partitions are loaded"))
    }

    /// Buffers `m` in partition `i`, after what its key holds there; the
    /// stored values of the puts it replaces that may name value extents
    /// go to `dropped`.
    pub fn buf_add(&mut self, i: usize, m: Message, dropped: &mut Vec<Vec<u8>>) {
        assert!(!self.is_leaf() && i < self.parts.len());
        let Part::Buf(buf) = self.part_mut(i) else {
            panic!("internal node partition is not a buffer")
        };
        buf.add(m);
        dropped.extend(buf.take_dropped());
        let bytes = buf.bytes();
        self.part_bytes[i] = bytes;
        debug_assert!(bytes >= m.bytes());
    }

    /// Buffers `batch` (sorted by key, equal keys oldest first, all of
    /// child `i`'s range) in partition `i` at once (`Buffer::add_sorted`).
    /// The puts it replaces go to `dropped` as in [`Node::buf_add`].
    pub fn buf_add_sorted(&mut self, i: usize, batch: &[Message], dropped: &mut Vec<Vec<u8>>) {
        assert!(!self.is_leaf() && i < self.parts.len());
        debug_assert!(batch.iter().all(|m| self.find(m.key) == i));
        let Part::Buf(buf) = self.part_mut(i) else {
            panic!("internal node partition is not a buffer")
        };
        buf.add_sorted(batch);
        dropped.extend(buf.take_dropped());
        self.part_bytes[i] = buf.bytes();
    }

    /// Buffers the messages of `p` for `key` in partition `i`.
    #[cfg(test)]
    pub fn buf_add_pending(&mut self, i: usize, key: Vec<u8>, p: super::pending::Pending) {
        let Part::Buf(buf) = self.part_mut(i) else {
            panic!("internal node partition is not a buffer")
        };
        buf.add_pending(&key, &p);
        self.part_bytes[i] = buf.bytes();
    }

    /// Empties buffer `i` and returns what it held.
    pub fn take_buf(&mut self, i: usize) -> Buffer {
        let old = std::mem::replace(self.part_mut(i), Part::Buf(Buffer::new()));
        self.part_bytes[i] = 0;
        match old {
            Part::Buf(b) => b,
            Part::Packed(_) => panic!("take_buf on a leaf"),
        }
    }

    /// Splits before partition `s` (1..P): (left, separator, right).
    pub fn split_at(mut self, s: usize) -> (Node, Vec<u8>, Node) {
        assert!(s >= 1 && s < self.parts.len());
        let mut rp = self.pivots.split_off(s - 1);
        let sep = rp.remove(0);
        let right = Node {
            height: self.height,
            pivots: rp,
            children: if self.is_leaf() {
                Vec::new()
            } else {
                self.children.split_off(s)
            },
            parts: self.parts.split_off(s),
            part_bytes: self.part_bytes.split_off(s),
            dir: no_dir(),
            segs: None,
            comp: 0,
            uses: UseMarks::default(),
        };
        (self.dir, self.segs) = (no_dir(), None);
        debug_assert_eq!(self.pivots.len() + 1, self.parts.len());
        (self, sep, right)
    }

    /// `left` then `right`, separated by `sep` (their parent's pivot).
    pub fn concat(mut left: Node, sep: Vec<u8>, right: Node) -> Node {
        assert_eq!(left.height, right.height);
        left.pivots.push(&sep);
        left.pivots.extend(&right.pivots);
        left.children.extend(right.children);
        left.parts.extend(right.parts);
        left.part_bytes.extend(right.part_bytes);
        (left.dir, left.segs) = (no_dir(), None);
        assert_eq!(left.pivots.len() + 1, left.parts.len());
        left
    }

    /// A copy with partition `i` loaded.
    /// A cached clean node's next image: partition `i` loaded, and the
    /// loaded partitions no read marked since the cache last looked dropped,
    /// so an image grows only by what reads use (partial eviction).
    pub fn with_part(&self, i: usize, p: Part) -> Node {
        let mut n = self.clone();
        let marked = n.uses.len() == n.parts.len() && n.dir.len() == n.parts.len();
        if marked {
            for j in 0..n.parts.len() {
                if j != i && n.parts[j].is_some() && !n.uses.is_marked(j) {
                    n.parts[j] = None;
                }
            }
        } else if !marked {
            n.uses = UseMarks::new(n.parts.len());
        }
        n.parts[i] = Some(Arc::new(p));
        n.uses.mark(i);
        n
    }
}

/// Extra CLOCK passes an unreferenced B-epsilon node image survives
/// (`NodeImage::keep_passes`; 0 would be the plain second chance of the
/// B+tree's pages).
pub const SHELL_KEEP_PASSES: u8 = 2;

impl NodeImage for Node {
    fn charge_bytes(&self) -> usize {
        // Heap bytes of the partitions and shell (heap.rs), plus the buffer
        // key filters and segment lists the shell carries.
        let segs = self.segs.as_ref().map_or(0, |t| t.heap_bytes());
        self.heap_bytes() + self.filter_bytes() + segs
    }

    /// Requires: a clean node (its directory names every partition on disk).
    /// Effect: drops the loaded partitions (basements, and buffers of
    /// internal nodes) no read marked since the last call, clearing the
    /// marks of the rest; the shell (with its buffer filters) stays cached,
    /// so a cold buffer is re-read only by a get its filter lets through.
    fn shed(&self) -> Option<Image> {
        if self.dir.len() != self.parts.len() {
            return None; // not a stored node: nothing could be read back
        }
        let mut drop: Vec<usize> = Vec::new();
        for (i, p) in self.parts.iter().enumerate() {
            if p.is_some() && !self.uses.take(i) {
                drop.push(i);
            }
        }
        if drop.is_empty() {
            return None;
        }
        let mut n = self.clone();
        for i in drop {
            n.parts[i] = None;
        }
        if n.uses.len() != n.parts.len() {
            n.uses = UseMarks::new(n.parts.len());
        }
        debug_assert!(n.charge_bytes() <= self.charge_bytes());
        Some(Arc::new(n))
    }

    /// A missing shell costs a dependent read before the partition a get
    /// needs (and a leaf shell is small next to its basements), so shells
    /// outlive the partitions shed around them: [`SHELL_KEEP_PASSES`].
    fn keep_passes(&self) -> u8 {
        SHELL_KEEP_PASSES
    }

    fn encode_page(&self, _page: &mut [u8]) -> PageFill {
        panic!("B-epsilon nodes are written as extents by their placement, never as pages")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::bepsilon::heap::counting::live;
    use crate::index::bepsilon::pending::{Base, Pending};
    use crate::index::bepsilon::PROVISIONAL_BIT;
    use crate::store::image::downcast;

    /// A 16-byte key in a scattered order.
    fn key(i: u64) -> Vec<u8> {
        format!("{:016x}", i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).into_bytes()
    }

    fn internal(count: usize) -> Node {
        Node {
            height: 1,
            pivots: (1..count).map(|i| vec![(i * 256 / count) as u8]).collect(),
            children: (0..count as u64)
                .map(|i| Child::Dirty(PROVISIONAL_BIT | i))
                .collect(),
            parts: (0..count)
                .map(|_| Some(Arc::new(Part::Buf(Buffer::new()))))
                .collect(),
            part_bytes: vec![0; count],
            dir: no_dir(),
            segs: None,
            comp: 0,
            uses: UseMarks::default(),
        }
    }

    /// The tracked heap bytes of every partition equal a recount.
    fn assert_tracked(n: &Node) {
        for p in n.parts.iter().flatten() {
            match &**p {
                Part::Buf(b) => b.assert_counts(),
                Part::Packed(_) => {}
            }
        }
    }

    /// Builds a node with `fill` on this thread; returns it and the heap
    /// bytes that stayed allocated.
    fn measured(fill: impl FnOnce() -> Node) -> (Arc<Node>, usize) {
        let before = live();
        let n = Arc::new(fill());
        (n.clone(), (live() - before) as usize)
    }

    fn assert_close(what: &str, n: &Node, heap: usize) {
        let charge = n.charge_bytes();
        let ratio = charge as f64 / heap as f64;
        eprintln!(
            "{what}: charged {charge}, measured {heap}, serialized {}",
            n.bytes()
        );
        assert!(
            (0.85..1.2).contains(&ratio),
            "{what}: charged {charge}, measured {heap} (serialized {})",
            n.bytes()
        );
    }

    /// A dirty node's charge is its heap bytes within 15-20%, for buffers
    /// of puts, of single upserts and of repeated upserts, and for leaves
    /// (packed basements); packed buffers take 1.2 times their serialized
    /// bytes at most for 100-byte puts, 1.5 for 8-byte upserts.
    #[test]
    fn charge_tracks_the_measured_heap() {
        let puts = |n: &mut Node, i: u64| {
            let p = Pending {
                base: Some(Base::Put(i, vec![i as u8; 100])),
                ops: Vec::new(),
            };
            let k = key(i);
            n.buf_add_pending(n.find(&k), k, p);
        };
        let upsert = |n: &mut Node, i: u64, k: Vec<u8>| {
            let p = Pending {
                base: None,
                ops: vec![(i, 1u64.to_le_bytes().to_vec())],
            };
            n.buf_add_pending(n.find(&k), k, p);
        };
        let (n, heap) = measured(|| {
            let mut n = internal(16);
            (0..20_000).for_each(|i| puts(&mut n, i));
            n
        });
        assert_close("puts", &n, heap);
        assert!(
            heap < n.bytes() * 7 / 5,
            "packed: about the serialized bytes"
        );
        assert_tracked(&n);
        let (n, heap) = measured(|| {
            let mut n = internal(16);
            (0..20_000).for_each(|i| upsert(&mut n, i, key(i)));
            n
        });
        assert_close("upserts", &n, heap);
        assert!(
            heap < n.bytes() * 3 / 2,
            "small messages: 12 bytes more each"
        );
        let (n, heap) = measured(|| {
            let mut n = internal(16);
            (0..20_000).for_each(|i| upsert(&mut n, i, key(i % 3000)));
            (0..1000).for_each(|i| puts(&mut n, i));
            n
        });
        assert_close("repeated upserts, then puts over some", &n, heap);
        assert_tracked(&n);
        let (n, heap) = measured(|| {
            let mut n = Node::new_leaf();
            for i in 0..20_000 {
                n.base_set(&key(i), Some(vec![i as u8; 100]));
                if i % 256 == 0 {
                    n.fix_basements(16 << 10);
                }
            }
            for i in 0..5000 {
                n.base_set(&key(i * 3), None);
                n.base_set(&key(i * 3 + 1), Some(vec![1; 50]));
            }
            n.fix_basements(16 << 10);
            n
        });
        assert!(n.parts.len() > 50, "basements split and joined");
        assert_close("leaf", &n, heap);
        assert_tracked(&n);
    }

    /// A clean node's next images (`with_part`, `shed`) share its pivots
    /// and directory with it, keep them equal to its own, and hold the same
    /// partitions by reference.
    #[test]
    fn images_share_the_shell() {
        let mut n = Node::new_leaf();
        for i in 0..4000 {
            n.base_set(&key(i), Some(vec![i as u8; 100]));
            if i % 256 == 0 {
                n.fix_basements(16 << 10);
            }
        }
        n.fix_basements(16 << 10);
        let count = n.parts.len();
        assert!(count > 4, "basements split");
        n.dir = (0..count).map(|_| DirEntry::default()).collect();
        let first = n.parts[1].clone().expect("loaded");
        let mut clean = n.clone();
        clean.parts.iter_mut().for_each(|p| *p = None);
        let img = clean.with_part(1, (*first).clone());
        assert!(img.pivots.shares(&clean.pivots) && Arc::ptr_eq(&img.dir, &clean.dir));
        assert_eq!(img.pivots, n.pivots);
        let img = Arc::new(img.with_part(2, (*n.parts[2].clone().unwrap()).clone()));
        assert!(
            img.parts[1].is_some() && img.parts[2].is_some(),
            "both used"
        );
        img.uses.take(1);
        let shed = img.shed().expect("partition 1 was not used since");
        let shed = downcast::<Node>(shed).expect("a node");
        assert!(shed.parts[1].is_none() && shed.parts[2].is_some());
        assert!(Arc::ptr_eq(
            shed.parts[2].as_ref().unwrap(),
            img.parts[2].as_ref().unwrap()
        ));
        assert_eq!(shed.pivots, n.pivots);
        assert!(shed.pivots.shares(&img.pivots) && shed.charge_bytes() < img.charge_bytes());
    }

    /// Taking a buffer, splitting and joining nodes keep the charge a
    /// function of what the node holds.
    #[test]
    fn tracked_bytes_survive_take_split_and_concat() {
        let mut n = internal(8);
        for i in 0..4000 {
            let k = key(i);
            let p = Pending {
                base: None,
                ops: vec![(i, vec![1; 8])],
            };
            n.buf_add_pending(n.find(&k), k, p);
        }
        let parts = |n: &Node| -> usize { n.parts.iter().flatten().map(|p| p.heap_bytes()).sum() };
        let whole = parts(&n);
        let taken = n.take_buf(3);
        assert!(taken.heap_bytes() > 0 && !taken.is_empty());
        assert_eq!(parts(&n) + taken.heap_bytes(), whole);
        assert_eq!(n.part_bytes[3], 0);
        let (l, sep, r) = n.split_at(4);
        assert_tracked(&l);
        assert_tracked(&r);
        assert_eq!(parts(&l) + parts(&r) + taken.heap_bytes(), whole);
        let joined = Node::concat(l, sep, r);
        assert_eq!(joined.parts.len(), 8);
        assert_tracked(&joined);
    }
}
