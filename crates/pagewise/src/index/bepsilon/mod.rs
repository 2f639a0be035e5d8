//! The B-epsilon (fractal) tree kind: large variable-size nodes whose
//! internal nodes buffer messages per child and flush them down in batches.
//! Formats: docs/design.md, "B-epsilon nodes" (parameters, root descriptor,
//! node header, partition directory, message and basement entries, node
//! placement, merge operator).

pub mod buffer;
pub mod check;
pub mod collect;
pub mod counters;
pub mod directory;
pub mod drain;
pub mod fetch;
pub mod filter;
pub mod format;
pub mod heap;
pub mod iter;
pub mod layout;
pub mod leaf;
pub mod many;
pub mod merge;
pub mod miss;
pub mod node;
pub mod ordered;
pub mod packed;
pub mod pair;
pub mod pending;
pub mod pivots;
pub mod place;
pub mod read;
pub mod runs;
pub mod runs_check;
pub mod segment;
pub mod slice;
pub mod tables;
pub mod value;
pub mod write;
pub mod writeback;

use crate::store::extent::{Extent, EXTENT_REF_BYTES};
use crate::store::page::{get_u16, get_u32, get_u64};
use layout::{params, root};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Longest key of a B-epsilon tree.
pub const MAX_KEY_BYTES: usize = 8192;
/// Deepest tree accepted from disk (bounds every descent).
pub const MAX_HEIGHT: u32 = 64;
/// Largest node (and leaf) bytes an option accepts.
pub const MAX_NODE_BYTES: u32 = 64 << 20;
/// Bytes of the catalog parameters.
pub const PARAMS_BYTES: usize = params::LEVEL.end();
/// Catalog parameter bytes with the optional leaf bytes field.
pub const PARAMS_LEAF_BYTES: usize = params::LEAF_BYTES.end();
/// Catalog parameter bytes with the value extent field.
pub const PARAMS_VALUE_BYTES: usize = params::VALUE_EXTENT_BYTES.end();
/// Least `value_extent_bytes` an option accepts: a smaller value gains
/// nothing from an extent of its own (its reference is 17 bytes).
pub const MIN_VALUE_EXTENT_BYTES: u32 = 64;
/// Bytes of the root descriptor.
pub const DESC_BYTES: usize = root::VALUE_TABLE.end();
/// Bytes of a root descriptor written before value tables (format 9 and
/// older): a tree without packed values.
pub const OLD_DESC_BYTES: usize = root::NEXT_SEQ.end();
const _: () = assert!(root::EXTENT.bytes == EXTENT_REF_BYTES);
/// Provisional ids of dirty nodes have this bit set: never a page id.
pub const PROVISIONAL_BIT: u64 = 1 << 62;

static NEXT_PROVISIONAL: AtomicU64 = AtomicU64::new(PROVISIONAL_BIT);

/// A fresh provisional id (unique in this process).
pub fn provisional_id() -> u64 {
    let id = NEXT_PROVISIONAL.fetch_add(1, Ordering::Relaxed);
    assert!(id & PROVISIONAL_BIT != 0);
    id
}

/// How partitions are compressed on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    None,
    Lz4,
    Zstd,
}

impl Compression {
    pub fn code(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Lz4 => 1,
            Compression::Zstd => 2,
        }
    }

    pub fn from_code(c: u8) -> Option<Self> {
        Some(match c {
            0 => Compression::None,
            1 => Compression::Lz4,
            2 => Compression::Zstd,
            _ => return None,
        })
    }
}

/// Creation parameters of a B-epsilon tree (the catalog's parameters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct BEpsilonOptions {
    /// Target node bytes before compression (a node above it flushes or splits).
    pub node_bytes: u32,
    /// Target bytes of a leaf before compression (a leaf above it splits,
    /// below a quarter of it merges); None: the node bytes. Internal nodes
    /// flush and split by `node_bytes`.
    pub leaf_bytes: Option<u32>,
    /// Target bytes of one leaf basement before compression.
    pub basement_bytes: u32,
    /// Most children of an internal node.
    pub fanout: u16,
    pub compression: Compression,
    /// zstd level (ignored by the others).
    pub level: u8,
    /// Values of at least this many bytes are written once, at commit, to
    /// an extent of their own, and the tree moves a 17-byte reference to it
    /// (docs/design.md, "B-epsilon value extents"); None: every value is
    /// stored in the tree's messages and leaves. Stored in the file.
    pub value_extent_bytes: Option<u32>,
}

impl Default for BEpsilonOptions {
    /// 1 MiB nodes of 16 KiB basements, fanout 8, lz4: at the dev VM's
    /// half-bandwidth point (about 1 MiB per random read) a flush moves a
    /// node's worth of messages per child read. Basements: a point read
    /// outside the cache reads one; the advisor's rule (transfer at most a
    /// quarter of the setup: 8 KiB on this disk) bounds it from above for
    /// I/O, and the CPU of loading a basement into a cached leaf grows with
    /// the basements per leaf; measured at a 5% cache, 8 and 16 KiB tie in
    /// median latency, 16 KiB with fewer shell bytes, 32 and 64 KiB lose.
    /// Fully cached 5M-row trees read about 1.6x faster with 64 KiB
    /// basements (one unpaired run): a trade not settled yet
    /// (docs/benchmarks.md, "B-epsilon tree").
    /// Leaves of 512 KiB under 1 MiB internal nodes: a flush moves about as
    /// many bytes into a leaf half the size, so a leaf is rewritten about
    /// half as often per byte it holds. At 5M rows the fill's device WA fell
    /// from 6.05 to 5.04 (leaves 3.46 to 1.99, height 1 1.27 to 1.65) for
    /// about 7% more reads per get at a 5% cache; 256 KiB leaves reach 4.78
    /// but read about 25% more per get (more height-1 nodes, fewer cached)
    /// (docs/benchmarks.md, "B-epsilon tree").
    /// Fanout 8 rather than 16: each buffer is twice as large, so a
    /// flush moves twice the bytes per child written; at 5M rows the fill's
    /// device WA fell from 4.05 to 3.60 and its rate rose by about a tenth,
    /// with point reads within the runs' spread. Fanout 4 reaches 3.40 but
    /// serves cached gets about 25% slower and holds more memory in the
    /// fill (docs/benchmarks.md, "B-epsilon tree").
    fn default() -> Self {
        Self {
            node_bytes: 1 << 20,
            leaf_bytes: Some(512 << 10),
            basement_bytes: 16 << 10,
            fanout: 8,
            compression: Compression::Lz4,
            level: 3,
            value_extent_bytes: Some(DEFAULT_VALUE_EXTENT_BYTES),
        }
    }
}

/// The default `value_extent_bytes`: values of 512 bytes and more leave
/// the tree, packed into value runs (several to a page) when their entry
/// fits a page. Measured at 500k rows of 1,000-byte values (64 MiB cache,
/// direct I/O, two rounds): the fill ran at 137-168k rows/s at WA 2.05
/// against 32-42k at WA 4.59 with the values in the tree (RocksDB
/// 110-115k at 3.56), for 100-row scans at 0.25-0.45x (each value a
/// random page read) and 5%-cache gets within the rounds' spread
/// (docs/design.md, "B-epsilon value extents", threshold).
pub const DEFAULT_VALUE_EXTENT_BYTES: u32 = 512;

impl BEpsilonOptions {
    /// Sets the node bytes, and leaves of the same size: call
    /// [`Self::leaf_bytes`] after it to set them apart.
    pub fn node_bytes(mut self, n: u32) -> Self {
        self.node_bytes = n;
        self.leaf_bytes = None;
        self
    }
    /// Leaves split at `n` bytes instead of the node bytes.
    pub fn leaf_bytes(mut self, n: u32) -> Self {
        self.leaf_bytes = Some(n);
        self
    }
    pub fn basement_bytes(mut self, n: u32) -> Self {
        self.basement_bytes = n;
        self
    }
    pub fn fanout(mut self, n: u16) -> Self {
        self.fanout = n;
        self
    }
    pub fn compression(mut self, c: Compression) -> Self {
        self.compression = c;
        self
    }
    /// Values of at least `n` bytes go to extents of their own; None: all
    /// values stay in the tree.
    pub fn value_extent_bytes(mut self, n: Option<u32>) -> Self {
        self.value_extent_bytes = n;
        self
    }

    /// How the tree stores values.
    pub fn form(&self) -> value::Form {
        match self.value_extent_bytes {
            Some(n) => value::Form::Tagged(n),
            None => value::Form::Plain,
        }
    }

    /// The target bytes of a leaf: `leaf_bytes`, else the node bytes.
    pub fn leaf_target_bytes(&self) -> u32 {
        self.leaf_bytes.unwrap_or(self.node_bytes)
    }

    /// The target bytes of a node at `height` (0: a leaf).
    pub fn target_bytes(&self, height: u32) -> usize {
        if height == 0 {
            self.leaf_target_bytes() as usize
        } else {
            self.node_bytes as usize
        }
    }

    /// What is wrong with these options, if anything.
    pub fn validate(&self) -> Result<(), String> {
        for (what, n) in [
            ("node", self.node_bytes),
            ("leaf", self.leaf_target_bytes()),
        ] {
            if !(256..=MAX_NODE_BYTES).contains(&n) {
                return Err(format!("{what} bytes {n} must be between 256 and 64 MiB"));
            }
        }
        let leaf = self.leaf_target_bytes();
        if self.basement_bytes < 64 || self.basement_bytes > leaf / 2 {
            return Err(format!(
                "basement bytes {} must be between 64 and half the leaf bytes ({})",
                self.basement_bytes,
                leaf / 2
            ));
        }
        if !(3..=1024).contains(&self.fanout) {
            return Err(format!("fanout {} must be between 3 and 1024", self.fanout));
        }
        if let Some(n) = self.value_extent_bytes {
            if n < MIN_VALUE_EXTENT_BYTES {
                return Err(format!(
                    "value extent bytes {n} must be at least {MIN_VALUE_EXTENT_BYTES}"
                ));
            }
        }
        Ok(())
    }

    /// The catalog parameters: [`PARAMS_BYTES`], plus the leaf bytes
    /// ([`PARAMS_LEAF_BYTES`] in all) when set, plus the value extent bytes
    /// ([`PARAMS_VALUE_BYTES`], the leaf field 0 when unset) when set, so
    /// trees without them keep the format older files have (docs/design.md,
    /// "B-epsilon nodes").
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(PARAMS_VALUE_BYTES);
        b.extend_from_slice(&self.node_bytes.to_le_bytes());
        b.extend_from_slice(&self.basement_bytes.to_le_bytes());
        b.extend_from_slice(&self.fanout.to_le_bytes());
        b.push(self.compression.code());
        b.push(self.level);
        assert_eq!(b.len(), PARAMS_BYTES);
        if self.leaf_bytes.is_some() || self.value_extent_bytes.is_some() {
            b.extend_from_slice(&self.leaf_bytes.unwrap_or(0).to_le_bytes());
        }
        if let Some(n) = self.value_extent_bytes {
            b.extend_from_slice(&n.to_le_bytes());
        }
        assert!([PARAMS_BYTES, PARAMS_LEAF_BYTES, PARAMS_VALUE_BYTES].contains(&b.len()));
        b
    }

    /// Reads [`Self::encode`]'s bytes; 12 bytes (no leaf field): leaves
    /// split at the node bytes; under 20 (no value extent field): values
    /// stay in the tree.
    pub fn decode(b: &[u8]) -> Result<Self, String> {
        if ![PARAMS_BYTES, PARAMS_LEAF_BYTES, PARAMS_VALUE_BYTES].contains(&b.len()) {
            return Err(format!("B-epsilon parameters of {} bytes", b.len()));
        }
        let field = |f: crate::store::layout::Field| (b.len() >= f.end()).then(|| get_u32(b, f.at));
        if b.len() == PARAMS_LEAF_BYTES && field(params::LEAF_BYTES) == Some(0) {
            // `encode` writes the leaf field alone only for a leaf size:
            // these bytes would read back as the 12-byte form.
            return Err("B-epsilon parameters of 16 bytes with a leaf size of 0".into());
        }
        let o = Self {
            node_bytes: get_u32(b, params::NODE_BYTES.at),
            leaf_bytes: field(params::LEAF_BYTES).filter(|&n| n != 0),
            value_extent_bytes: field(params::VALUE_EXTENT_BYTES),
            basement_bytes: get_u32(b, params::BASEMENT_BYTES.at),
            fanout: get_u16(b, params::FANOUT.at),
            compression: Compression::from_code(b[params::COMPRESSION.at])
                .ok_or_else(|| format!("unknown compression {}", b[params::COMPRESSION.at]))?,
            level: b[params::LEVEL.at],
        };
        o.validate()?;
        Ok(o)
    }
}

/// Where a child (or the root) lives: on disk, or in the dirty set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Child {
    Clean(Extent),
    Dirty(u64),
}

/// A tree's value table (runs.rs): in memory, and where the durable copy
/// lies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValueTable {
    pub runs: Arc<runs::Runs>,
    /// The extent the table was last written to (None: none, or empty).
    pub ext: Option<Extent>,
    /// Changed since it was last written.
    pub changed: bool,
}

/// Per-tree state, persisted as the root descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    pub opts: BEpsilonOptions,
    /// None: empty tree.
    pub root: Option<Child>,
    /// Levels above the leaves of the root.
    pub height: u32,
    /// Entries in basements (not counting messages above them).
    pub entries: u64,
    pub nodes: u64,
    pub next_seq: u64,
    /// Packed values' runs and their live counts.
    pub values: ValueTable,
}

impl Meta {
    pub fn new(opts: BEpsilonOptions) -> Self {
        Self {
            opts,
            root: None,
            height: 0,
            entries: 0,
            nodes: 0,
            next_seq: 1,
            values: ValueTable::default(),
        }
    }

    /// The root's first page (0 when empty or not yet placed).
    pub fn root_page(&self) -> u64 {
        match self.root {
            Some(Child::Clean(e)) => e.first_page,
            _ => 0,
        }
    }

    /// Requires: the root and the value table are placed (a checkpoint
    /// placed them before the catalog is encoded).
    pub fn encode(&self) -> Vec<u8> {
        assert!(
            !self.values.changed,
            "value table encoded before it was placed"
        );
        let mut b = vec![0u8; DESC_BYTES];
        match self.root {
            None => {}
            Some(Child::Clean(e)) => e.encode(&mut b[root::EXTENT.at..root::EXTENT.end()]),
            Some(Child::Dirty(id)) => panic!("root {id:#x} encoded before it was placed"),
        }
        b[root::HEIGHT.at..root::HEIGHT.end()].copy_from_slice(&self.height.to_le_bytes());
        b[root::ENTRIES.at..root::ENTRIES.end()].copy_from_slice(&self.entries.to_le_bytes());
        b[root::NODES.at..root::NODES.end()].copy_from_slice(&self.nodes.to_le_bytes());
        b[root::NEXT_SEQ.at..root::NEXT_SEQ.end()].copy_from_slice(&self.next_seq.to_le_bytes());
        if let Some(e) = self.values.ext {
            e.encode(&mut b[root::VALUE_TABLE.at..root::VALUE_TABLE.end()]);
        }
        b
    }

    pub fn decode(params: &[u8], b: &[u8], page_size: usize) -> Result<Self, String> {
        let opts = BEpsilonOptions::decode(params)?;
        if b.len() != DESC_BYTES && b.len() != OLD_DESC_BYTES {
            return Err(format!("B-epsilon descriptor of {} bytes", b.len()));
        }
        let table = match b.get(root::VALUE_TABLE.at..root::VALUE_TABLE.end()) {
            Some(t) if t.iter().any(|&x| x != 0) => Some(
                Extent::decode(t, page_size).ok_or("B-epsilon value table extent out of range")?,
            ),
            _ => None,
        };
        let root = if root::EXTENT.of(b).iter().all(|&x| x == 0) {
            None
        } else {
            let e = Extent::decode(root::EXTENT.of(b), page_size)
                .ok_or("B-epsilon root extent out of range")?;
            Some(Child::Clean(e))
        };
        let m = Self {
            opts,
            root,
            height: get_u32(b, root::HEIGHT.at),
            entries: get_u64(b, root::ENTRIES.at),
            nodes: get_u64(b, root::NODES.at),
            next_seq: get_u64(b, root::NEXT_SEQ.at),
            values: ValueTable {
                ext: table,
                ..ValueTable::default()
            },
        };
        let plain_with_table = table.is_some() && m.opts.value_extent_bytes.is_none();
        if m.height > MAX_HEIGHT
            || (m.root.is_none() && (m.nodes != 0 || m.entries != 0))
            || plain_with_table
        {
            return Err(format!("B-epsilon descriptor {m:?} is inconsistent"));
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_and_descriptor_round_trip() {
        let o = BEpsilonOptions::default().compression(Compression::Zstd);
        assert_eq!(BEpsilonOptions::decode(&o.encode()).unwrap(), o);
        let e = Extent::new(9, 5000, 4096);
        let m = Meta {
            root: Some(Child::Clean(e)),
            height: 2,
            entries: 77,
            nodes: 5,
            next_seq: 1234,
            ..Meta::new(o)
        };
        assert_eq!(Meta::decode(&o.encode(), &m.encode(), 4096).unwrap(), m);
        // A format-9 descriptor (44 bytes): no value table.
        let old = Meta::decode(&o.encode(), &m.encode()[..OLD_DESC_BYTES], 4096).unwrap();
        assert_eq!(old, m);
        let t = Meta {
            values: ValueTable {
                ext: Some(Extent::new(30, 100, 4096)),
                ..ValueTable::default()
            },
            ..m.clone()
        };
        assert_eq!(Meta::decode(&o.encode(), &t.encode(), 4096).unwrap(), t);
        let empty = Meta::new(o);
        assert_eq!(
            Meta::decode(&o.encode(), &empty.encode(), 4096).unwrap(),
            empty
        );
        assert!(BEpsilonOptions::decode(&o.basement_bytes(1 << 30).encode()).is_err());
    }

    #[test]
    fn leaf_bytes_round_trip_and_old_params() {
        let o = BEpsilonOptions::default()
            .leaf_bytes(128 << 10)
            .fanout(8)
            .value_extent_bytes(None);
        let b = o.encode();
        assert_eq!(b.len(), PARAMS_LEAF_BYTES);
        assert_eq!(BEpsilonOptions::decode(&b).unwrap(), o);
        assert_eq!(o.target_bytes(0), 128 << 10);
        assert_eq!(o.target_bytes(1), 1 << 20);
        // Parameters written before the field: leaves at the node bytes.
        let old = BEpsilonOptions::decode(&b[..PARAMS_BYTES]).unwrap();
        assert_eq!(old.leaf_bytes, None);
        assert_eq!(old.target_bytes(0), old.node_bytes as usize);
        let same = BEpsilonOptions::default()
            .node_bytes(1 << 20)
            .value_extent_bytes(None);
        assert_eq!(same.encode().len(), PARAMS_BYTES);
        assert_eq!(BEpsilonOptions::default().target_bytes(0), 512 << 10);
        // Bad leaf bytes: too small, or below twice the basement bytes.
        assert!(BEpsilonOptions::decode(&o.leaf_bytes(100).encode()).is_err());
        assert!(BEpsilonOptions::decode(&o.leaf_bytes(16 << 10).encode()).is_err());
        assert!(BEpsilonOptions::decode(&b[..PARAMS_BYTES + 2]).is_err());
    }

    #[test]
    fn a_leaf_field_of_zero_alone_is_refused() {
        let o = BEpsilonOptions {
            leaf_bytes: None,
            ..BEpsilonOptions::default().value_extent_bytes(None)
        };
        let mut b = o.encode();
        assert_eq!(b.len(), PARAMS_BYTES);
        b.extend_from_slice(&0u32.to_le_bytes());
        assert!(BEpsilonOptions::decode(&b).is_err());
        b[PARAMS_BYTES] = 1;
        let back = BEpsilonOptions::decode(&b);
        assert!(back.is_err() || back.unwrap().encode() == b);
    }

    #[test]
    fn value_extent_bytes_round_trip() {
        let d = BEpsilonOptions::default();
        assert_eq!(d.value_extent_bytes, Some(DEFAULT_VALUE_EXTENT_BYTES));
        let b = d.encode();
        assert_eq!(b.len(), PARAMS_VALUE_BYTES);
        assert_eq!(get_u32(&b, 16), DEFAULT_VALUE_EXTENT_BYTES);
        assert_eq!(BEpsilonOptions::decode(&b).unwrap(), d);
        // Without leaf bytes the leaf field is written as 0 (none).
        let n = BEpsilonOptions::default().node_bytes(1 << 20);
        let nb = n.encode();
        assert_eq!((nb.len(), get_u32(&nb, 12)), (PARAMS_VALUE_BYTES, 0));
        assert_eq!(BEpsilonOptions::decode(&nb).unwrap(), n);
        assert_eq!(n.form(), value::Form::Tagged(DEFAULT_VALUE_EXTENT_BYTES));
        assert_eq!(d.value_extent_bytes(None).form(), value::Form::Plain);
        let low = d.value_extent_bytes(Some(MIN_VALUE_EXTENT_BYTES - 1));
        assert!(low.validate().is_err());
        assert!(BEpsilonOptions::decode(&low.encode()).is_err());
    }
}
