//! A B-epsilon node in memory: pivots, child references (internal nodes)
//! and partitions (message buffers or basements), each loaded or not, with
//! its serialized size kept per partition so budgets cost nothing to check.

use super::Child;
use crate::store::image::{Image, NodeImage, PageFill};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

/// Node header bytes (docs/design.md, "B-epsilon nodes").
pub const HEADER_BYTES: usize = 64;
pub const DIR_ENTRY_BYTES: usize = 24;
/// Fixed bytes of a message entry and of a basement entry.
pub const MSG_FIXED_BYTES: usize = 15;
pub const BASEMENT_FIXED_BYTES: usize = 6;

/// A put or delete with its sequence number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Base {
    Put(u64, Vec<u8>),
    Delete(u64),
}

/// The buffered messages of one key, collapsed: the newest put or delete,
/// then the upsert operands that came after it, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pending {
    pub base: Option<Base>,
    pub ops: Vec<(u64, Vec<u8>)>,
}

impl Pending {
    /// Serialized bytes of its messages for a key of `key_len` bytes.
    pub fn bytes(&self, key_len: usize) -> usize {
        let base = match &self.base {
            Some(Base::Put(_, v)) => MSG_FIXED_BYTES + key_len + v.len(),
            Some(Base::Delete(_)) => MSG_FIXED_BYTES + key_len,
            None => 0,
        };
        base + self
            .ops
            .iter()
            .map(|o| MSG_FIXED_BYTES + key_len + o.1.len())
            .sum::<usize>()
    }

    pub fn count(&self) -> usize {
        self.base.is_some() as usize + self.ops.len()
    }

    /// Folds `newer` (later messages of the same key) into self.
    pub fn absorb(&mut self, newer: Pending) {
        if newer.base.is_some() {
            *self = newer;
        } else {
            self.ops.extend(newer.ops);
        }
    }

    pub fn max_seq(&self) -> u64 {
        let b = match &self.base {
            Some(Base::Put(s, _)) | Some(Base::Delete(s)) => *s,
            None => 0,
        };
        self.ops.iter().map(|o| o.0).max().unwrap_or(0).max(b)
    }
}

pub type Buffer = BTreeMap<Vec<u8>, Pending>;
pub type Basement = BTreeMap<Vec<u8>, Vec<u8>>;

/// One partition: an internal node's buffer for one child, or a basement.
#[derive(Debug, Clone)]
pub enum Part {
    Buf(Buffer),
    /// A basement being changed (dirty nodes).
    Base(Basement),
    /// A clean basement as stored (read or just written).
    Packed(super::packed::Packed),
}

impl Part {
    pub fn entries(&self) -> usize {
        match self {
            Part::Buf(b) => b.values().map(Pending::count).sum(),
            Part::Base(b) => b.len(),
            Part::Packed(p) => p.len(),
        }
    }

    /// Serialized bytes.
    pub fn bytes(&self) -> usize {
        match self {
            Part::Buf(b) => b.iter().map(|(k, p)| p.bytes(k.len())).sum(),
            Part::Base(b) => b.iter().map(|(k, v)| entry_bytes(k, v)).sum(),
            Part::Packed(p) => p.bytes(),
        }
    }
}

pub fn entry_bytes(k: &[u8], v: &[u8]) -> usize {
    BASEMENT_FIXED_BYTES + k.len() + v.len()
}

/// Where a partition lies in a stored node (docs/design.md, partition
/// directory), and the key filter of a stored buffer (None: the node has no
/// filters, or the partition is a basement).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DirEntry {
    pub offset: u32,
    pub comp_bytes: u32,
    pub raw_bytes: u32,
    pub crc: u32,
    pub entries: u32,
    pub filter: Option<super::filter::Filter>,
}

#[derive(Debug, Clone)]
pub struct Node {
    /// Levels above the leaves (0: leaf).
    pub height: u32,
    /// P - 1 keys; partition i holds `[pivots[i-1], pivots[i])`.
    pub pivots: Vec<Vec<u8>>,
    /// P children (internal nodes), empty for leaves.
    pub children: Vec<Child>,
    /// P partitions, `None` while not loaded (clean nodes only).
    pub parts: Vec<Option<Arc<Part>>>,
    /// Serialized (uncompressed) bytes of each partition.
    pub part_bytes: Vec<usize>,
    /// Directory of the stored node (empty for dirty nodes).
    pub dir: Vec<DirEntry>,
    /// Compression code of the stored partitions (stored nodes only).
    pub comp: u8,
    /// Which loaded partitions reads used since the cache last looked
    /// (clean cached nodes; partial eviction, [`NodeImage::shed`]).
    pub uses: UseMarks,
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
            pivots: Vec::new(),
            children: Vec::new(),
            parts: vec![Some(Arc::new(Part::Base(Basement::new())))],
            part_bytes: vec![0],
            dir: Vec::new(),
            comp: 0,
            uses: UseMarks::default(),
        }
    }

    pub fn is_leaf(&self) -> bool {
        self.height == 0
    }

    /// The partition whose key range holds `key`.
    pub fn find(&self, key: &[u8]) -> usize {
        self.pivots.partition_point(|p| p.as_slice() <= key)
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
            + self.pivots.iter().map(|p| 2 + p.len()).sum::<usize>()
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

    pub fn all_loaded(&self) -> bool {
        self.parts.iter().all(Option::is_some)
    }

    /// Partition `i` for changing. Requires: loaded (dirty nodes always are).
    pub fn part_mut(&mut self, i: usize) -> &mut Part {
        Arc::make_mut(self.parts[i].as_mut().expect("dirty partitions are loaded"))
    }

    /// Buffers `p` for `key` in partition `i`, after what is there.
    pub fn buf_add(&mut self, i: usize, key: Vec<u8>, p: Pending) {
        assert!(!self.is_leaf() && i < self.parts.len());
        let klen = key.len();
        let Part::Buf(buf) = self.part_mut(i) else {
            panic!("internal node partition is not a buffer")
        };
        let (before, after) = match buf.entry(key) {
            std::collections::btree_map::Entry::Occupied(mut o) => {
                let before = o.get().bytes(klen);
                o.get_mut().absorb(p);
                (before, o.get().bytes(klen))
            }
            std::collections::btree_map::Entry::Vacant(v) => (0, v.insert(p).bytes(klen)),
        };
        self.part_bytes[i] = self.part_bytes[i] + after - before;
    }

    /// Empties buffer `i` and returns what it held.
    pub fn take_buf(&mut self, i: usize) -> Buffer {
        let old = std::mem::replace(self.part_mut(i), Part::Buf(Buffer::new()));
        self.part_bytes[i] = 0;
        match old {
            Part::Buf(b) => b,
            Part::Base(_) | Part::Packed(_) => panic!("take_buf on a leaf"),
        }
    }

    /// Sets (`Some`) or removes (`None`) `key` in its basement; returns the
    /// change in entries (-1, 0 or 1).
    pub fn base_set(&mut self, key: &[u8], value: Option<Vec<u8>>) -> i64 {
        assert!(self.is_leaf());
        let i = self.find(key);
        let Part::Base(b) = self.part_mut(i) else {
            panic!("leaf partition is not a basement")
        };
        let has = value.is_some();
        let old = match value {
            Some(v) => {
                let add = entry_bytes(key, &v);
                let old = b.insert(key.to_vec(), v);
                self.part_bytes[i] += add;
                old
            }
            None => b.remove(key),
        };
        if let Some(o) = &old {
            self.part_bytes[i] -= entry_bytes(key, o);
        }
        has as i64 - old.is_some() as i64
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
            dir: Vec::new(),
            comp: 0,
            uses: UseMarks::default(),
        };
        self.dir.clear();
        debug_assert_eq!(self.pivots.len() + 1, self.parts.len());
        (self, sep, right)
    }

    /// `left` then `right`, separated by `sep` (their parent's pivot).
    pub fn concat(mut left: Node, sep: Vec<u8>, right: Node) -> Node {
        assert_eq!(left.height, right.height);
        left.pivots.push(sep);
        left.pivots.extend(right.pivots);
        left.children.extend(right.children);
        left.parts.extend(right.parts);
        left.part_bytes.extend(right.part_bytes);
        left.dir.clear();
        assert_eq!(left.pivots.len() + 1, left.parts.len());
        left
    }

    /// Leaves: splits basements above `basement_bytes` at their byte
    /// midpoint and joins neighbours that together fill at most half of it
    /// (or of which one is empty). Bounded by the entries.
    pub fn fix_basements(&mut self, basement_bytes: usize) {
        assert!(self.is_leaf() && self.all_loaded());
        let mut i = 0;
        while i < self.parts.len() {
            let big = self.part_bytes[i] > basement_bytes;
            match self.parts[i].as_deref() {
                Some(Part::Base(b)) if big && b.len() >= 2 => self.split_basement(i),
                _ => i += 1,
            }
        }
        let mut i = 0;
        while i + 1 < self.parts.len() {
            let sum = self.part_bytes[i] + self.part_bytes[i + 1];
            let empty = self.part_bytes[i] == 0 || self.part_bytes[i + 1] == 0;
            if empty || sum <= basement_bytes / 2 {
                let Some(Part::Base(mut right)) = self.parts.remove(i + 1).map(unwrap_part) else {
                    panic!("leaf partition is not a basement")
                };
                let rb = self.part_bytes.remove(i + 1);
                self.pivots.remove(i);
                let Part::Base(left) = self.part_mut(i) else {
                    panic!("leaf partition is not a basement")
                };
                left.append(&mut right);
                self.part_bytes[i] += rb;
            } else {
                i += 1;
            }
        }
        debug_assert_eq!(self.pivots.len() + 1, self.parts.len());
    }

    fn split_basement(&mut self, i: usize) {
        let total = self.part_bytes[i];
        let Part::Base(b) = self.part_mut(i) else {
            panic!("leaf partition is not a basement")
        };
        let last = b.len() - 1;
        let mut acc = 0;
        let mut mid = None;
        for (n, (k, v)) in b.iter().enumerate() {
            if n > 0 && (acc >= total / 2 || n == last) {
                mid = Some(k.clone());
                break;
            }
            acc += entry_bytes(k, v);
        }
        let mid = mid.expect("a basement of two entries or more splits");
        let right = b.split_off(&mid);
        let rb = total - acc;
        self.part_bytes[i] = acc;
        self.parts.insert(i + 1, Some(Arc::new(Part::Base(right))));
        self.part_bytes.insert(i + 1, rb);
        self.pivots.insert(i, mid);
        debug_assert_eq!(self.parts[i].as_ref().unwrap().bytes(), acc);
    }

    /// Packed basements as maps, for changing (a clean node becoming dirty).
    pub fn unpack(&mut self) {
        for p in self.parts.iter_mut().flatten() {
            if let Part::Packed(b) = &**p {
                *p = Arc::new(Part::Base(b.to_map()));
            }
        }
    }

    /// A copy with partition `i` loaded.
    /// A cached clean node's next image: partition `i` loaded, and the
    /// loaded partitions no read marked since the cache last looked dropped,
    /// so an image grows only by what reads use (partial eviction).
    pub fn with_part(&self, i: usize, p: Part) -> Node {
        let mut n = self.clone();
        let marked = n.uses.len() == n.parts.len() && n.dir.len() == n.parts.len();
        if marked && (n.is_leaf() || shed_buffers()) {
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
/// (`NodeImage::keep_passes`; `PAGEWISE_BEPS_SHELL_PASSES` overrides it for
/// comparisons, 0 being the plain second chance of the B+tree's pages).
pub const SHELL_KEEP_PASSES: u8 = 2;

/// Whether the cache's CLOCK hand sheds internal nodes' unused buffers
/// (default on; `PAGEWISE_BEPS_SHED_BUFFERS=off` keeps them with their node,
/// the behaviour before session 6, for back-to-back comparisons).
fn shed_buffers() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("PAGEWISE_BEPS_SHED_BUFFERS").as_deref() != Ok("off"))
}

/// The partition itself, copied if shared.
pub fn unwrap_part(p: Arc<Part>) -> Part {
    Arc::try_unwrap(p).unwrap_or_else(|a| (*a).clone())
}

impl NodeImage for Node {
    fn charge_bytes(&self) -> usize {
        let loaded: usize = self
            .parts
            .iter()
            .zip(&self.part_bytes)
            .filter(|(p, _)| p.is_some())
            .map(|(p, b)| match p.as_deref() {
                Some(Part::Packed(x)) => b + 4 * x.len(),
                p => b + 48 * p.map_or(0, Part::entries),
            })
            .sum();
        256 + self.shell_bytes() + self.filter_bytes() + loaded
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
        if !self.is_leaf() && !shed_buffers() {
            return None; // PAGEWISE_BEPS_SHED_BUFFERS=off: buffers go with their node
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
        static PASSES: std::sync::OnceLock<u8> = std::sync::OnceLock::new();
        *PASSES.get_or_init(|| {
            std::env::var("PAGEWISE_BEPS_SHELL_PASSES")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(SHELL_KEEP_PASSES)
        })
    }

    fn encode_page(&self, _page: &mut [u8]) -> PageFill {
        panic!("B-epsilon nodes are written as extents by their placement, never as pages")
    }
}
