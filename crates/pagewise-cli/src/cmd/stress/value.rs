//! What the stress test writes: tree kinds, keys from a bounded key space,
//! self-describing values, and random batches.
//!
//! A value is `magic u32 | batch u64 | key_hash u32 | len u32 | crc u32`
//! (24 bytes) followed by padding derived from the batch and the key; the crc
//! (crc32c) covers the first 20 header bytes and the padding. A reader can
//! therefore tell, with no shared state, whether a value it read under a key
//! is genuine: written whole, by some batch, for exactly that key.

use rand::rngs::SmallRng;
use rand::Rng;

pub const HEADER_BYTES: usize = 24;
const MAGIC: u32 = 0x5657_5350;
/// Longest value written (a few overflow pages at 4 KiB, many at 512 B).
pub const MAX_VALUE_BYTES: usize = 64 * 1024;
/// Most operations in one batch.
pub const MAX_OPS: usize = 8;

/// A tree kind under test, by the engine's name for it. `delta` is the
/// B+tree in a Db opened with delta flushes (`Options::delta_flush`, a
/// setting of the Db, not of a tree: see [`Layout::delta`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kind {
    pub name: &'static str,
    /// The engine's kind: trees are created with `Db::tree_with`.
    pub engine: pagewise::TreeKind,
    /// Batches on its trees mix in upserts (merge operator [`StressMerge`]).
    pub upsert: bool,
    /// Asks for delta flushes on the Db's B+trees.
    pub delta: bool,
}

/// The kinds, in the order a Db's trees are laid out. The B-epsilon trees
/// are small enough that 2,000 keys make several levels: 16 KiB nodes and
/// leaves of 2 KiB basements, fanout 6, lz4. At 4 KiB pages buffers of two
/// pages and more are stored as segments; basements, under two pages, are
/// not (the crash simulation and the corruption sweep store them as
/// segments at 512-byte pages).
pub const KINDS: &[Kind] = &[
    Kind {
        name: "btree",
        engine: pagewise::TreeKind::BTree,
        upsert: false,
        delta: false,
    },
    Kind {
        name: "bepsilon",
        engine: pagewise::TreeKind::BEpsilon(pagewise::BEpsilonOptions {
            node_bytes: 16 << 10,
            leaf_bytes: None,
            basement_bytes: 2 << 10,
            fanout: 6,
            compression: pagewise::Compression::Lz4,
            level: 3,
            value_extent_bytes: Some(512),
        }),
        upsert: true,
        delta: false,
    },
    Kind {
        name: "delta",
        engine: pagewise::TreeKind::BTree,
        upsert: false,
        delta: true,
    },
];

/// Parses a comma-separated list of kind names (e.g. "btree").
pub fn parse_kinds(list: &str) -> Result<Vec<Kind>, String> {
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match KINDS.iter().find(|k| k.name == name) {
            Some(k) => out.push(*k),
            None => {
                let known: Vec<&str> = KINDS.iter().map(|k| k.name).collect();
                return Err(format!(
                    "unknown tree kind {name:?}; this build knows: {}",
                    known.join(", ")
                ));
            }
        }
    }
    if out.is_empty() {
        return Err("--kinds needs at least one tree kind (e.g. btree)".into());
    }
    Ok(out)
}

/// The trees, key space and writer partitioning shared by parent and child.
#[derive(Debug, Clone)]
pub struct Layout {
    /// Tree names, `KIND-I`; index in this list is the tree number in records.
    pub trees: Vec<(String, Kind)>,
    pub keys: u32,
    pub writers: u32,
    pub page_size: usize,
}

impl Layout {
    pub fn new(kinds: &[Kind], trees_per_kind: u32, keys: u32, writers: u32, ps: usize) -> Self {
        assert!(!kinds.is_empty() && trees_per_kind > 0);
        assert!(writers > 0 && keys >= writers);
        let trees = kinds
            .iter()
            .flat_map(|k| (0..trees_per_kind).map(move |i| (format!("{}-{i}", k.name), *k)))
            .collect();
        Self {
            trees,
            keys,
            writers,
            page_size: ps,
        }
    }
}

impl Layout {
    /// Whether a child's Db gets delta flushes: always when `delta` trees
    /// are listed without plain `btree` ones, as `coin` says when both are
    /// (the engine sets delta flushes per Db), never without `delta`.
    pub fn delta_flush(&self, coin: bool) -> bool {
        let has = |delta: bool| {
            self.trees
                .iter()
                .any(|(_, k)| k.delta == delta && k.engine == pagewise::TreeKind::BTree)
        };
        has(true) && (coin || !has(false))
    }
}

/// Key `idx`: `k` + 7 digits + 0..12 dashes (so key lengths vary).
pub fn key(idx: u32) -> Vec<u8> {
    let mut k = format!("k{idx:07}").into_bytes();
    k.extend(std::iter::repeat_n(b'-', (idx as usize * 7) % 13));
    k
}

/// The index of a key made by [`key`], or None for any other byte string.
pub fn key_index(k: &[u8]) -> Option<u32> {
    if k.len() < 8 || k[0] != b'k' || !k[1..8].iter().all(u8::is_ascii_digit) {
        return None;
    }
    let idx: u32 = std::str::from_utf8(&k[1..8]).ok()?.parse().ok()?;
    (key(idx) == k).then_some(idx)
}

pub fn key_hash(tree: u8, idx: u32) -> u32 {
    let mut b = [0u8; 5];
    b[0] = tree;
    b[1..].copy_from_slice(&idx.to_le_bytes());
    crc32c::crc32c(&b)
}

/// The value batch `batch` writes under (`tree`, `idx`), `len` bytes long.
pub fn value(batch: u64, tree: u8, idx: u32, len: u32) -> Vec<u8> {
    let len = len as usize;
    assert!((HEADER_BYTES..=MAX_VALUE_BYTES).contains(&len));
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(&MAGIC.to_le_bytes());
    v.extend_from_slice(&batch.to_le_bytes());
    v.extend_from_slice(&key_hash(tree, idx).to_le_bytes());
    v.extend_from_slice(&(len as u32).to_le_bytes());
    v.extend_from_slice(&[0; 4]);
    let mut x = batch ^ ((key_hash(tree, idx) as u64) << 32) ^ 0x9e37_79b9_7f4a_7c15;
    while v.len() < len {
        // splitmix64: cheap, deterministic padding.
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let take = (len - v.len()).min(8);
        v.extend_from_slice(&z.to_le_bytes()[..take]);
    }
    let crc = value_crc(&v);
    v[20..24].copy_from_slice(&crc.to_le_bytes());
    debug_assert_eq!(decode(&v, tree, idx), Ok((batch, len as u32)));
    v
}

fn value_crc(v: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&v[..20]), &v[HEADER_BYTES..])
}

/// Checks that `v`, read under (`tree`, `idx`), is a genuine value; returns
/// the batch that wrote it and its length.
pub fn decode(v: &[u8], tree: u8, idx: u32) -> Result<(u64, u32), String> {
    if v.len() < HEADER_BYTES {
        return Err(format!(
            "value of {} bytes is shorter than the 24-byte header",
            v.len()
        ));
    }
    let u32_at = |o: usize| u32::from_le_bytes(v[o..o + 4].try_into().unwrap());
    if u32_at(0) != MAGIC {
        return Err(format!(
            "value has no stress magic (first bytes {:02x?})",
            &v[..8]
        ));
    }
    let batch = u64::from_le_bytes(v[4..12].try_into().unwrap());
    if u32_at(12) != key_hash(tree, idx) {
        return Err(format!(
            "value of batch {batch} was written for another key"
        ));
    }
    if u32_at(16) as usize != v.len() {
        return Err(format!(
            "value of batch {batch} says {} bytes but {} were read",
            u32_at(16),
            v.len()
        ));
    }
    if u32_at(20) != value_crc(v) {
        return Err(format!("value of batch {batch} fails its checksum"));
    }
    Ok((batch, v.len() as u32))
}

/// One write of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// A value of this many bytes.
    Put(u32),
    Remove,
    /// An upsert operand adding this many bytes ([`upsert_len`]).
    Upsert(u32),
}

/// One write of a batch, on key `idx` of tree `tree`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op {
    pub tree: u8,
    pub idx: u32,
    pub write: Write,
}

/// Longest value upserts grow a key to (then it wraps around).
pub const UPSERT_MAX_BYTES: u32 = 4096;
/// Most bytes one upsert operand adds.
pub const UPSERT_ADD_MAX: u32 = 200;
/// Bytes of an operand: `tree u8 | batch u64 | add u32`.
const OPERAND_BYTES: usize = 13;

/// The length of a key's value after an upsert adding `add` bytes to a
/// value of `prev` bytes (0: absent): grows, and wraps around past
/// [`UPSERT_MAX_BYTES`], so every upsert changes the value.
pub fn upsert_len(prev: u32, add: u32) -> u32 {
    let next = prev.max(HEADER_BYTES as u32) + add;
    if next > UPSERT_MAX_BYTES {
        HEADER_BYTES as u32 + next % 256
    } else {
        next
    }
}

pub fn operand(tree: u8, batch: u64, add: u32) -> Vec<u8> {
    let mut o = Vec::with_capacity(OPERAND_BYTES);
    o.push(tree);
    o.extend_from_slice(&batch.to_le_bytes());
    o.extend_from_slice(&add.to_le_bytes());
    o
}

/// The stress test's merge operator: each operand `(tree, batch, add)`
/// turns the key's value into the genuine value of `batch` whose length is
/// [`upsert_len`] of the previous one, so an upserted value describes
/// itself like a put one, and the model knows what it must hold.
pub struct StressMerge;

impl pagewise::MergeOperator for StressMerge {
    fn name(&self) -> &str {
        "stress"
    }

    fn full_merge(&self, key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Vec<u8> {
        let (Some(idx), Some(first)) = (key_index(key), operands.first()) else {
            return existing.unwrap_or_default().to_vec(); // not ours: a reader rejects it
        };
        let tree = first.first().copied().unwrap_or(0);
        let mut len = existing
            .and_then(|v| decode(v, tree, idx).ok())
            .map_or(0, |(_, len)| len);
        let mut batch = None;
        for o in operands {
            if o.len() != OPERAND_BYTES || o[0] != tree {
                return existing.unwrap_or_default().to_vec();
            }
            batch = Some(u64::from_le_bytes(o[1..9].try_into().expect("8 bytes")));
            let add = u32::from_le_bytes(o[9..13].try_into().expect("4 bytes"));
            len = upsert_len(len, add.min(UPSERT_ADD_MAX));
        }
        value(batch.expect("an operand"), tree, idx, len)
    }
}

/// A value length: mostly small, some up to a quarter page, some overflow
/// values above a quarter page, a few large ones.
fn value_len(rng: &mut SmallRng, ps: usize) -> u32 {
    let quarter = (ps / 4).max(HEADER_BYTES + 1);
    let len = match rng.gen_range(0..100) {
        0..=59 => rng.gen_range(HEADER_BYTES..=120),
        60..=84 => rng.gen_range(HEADER_BYTES..=quarter),
        85..=96 => rng.gen_range(quarter + 1..=3 * ps),
        _ => rng.gen_range(3 * ps..=MAX_VALUE_BYTES.max(3 * ps + 1)),
    };
    len.min(MAX_VALUE_BYTES) as u32
}

/// A random batch for writer `w`: 1..=8 writes on distinct keys of its own
/// partition (keys with `idx % writers == w`), `remove_pct` percent removes.
/// On trees whose kind takes upserts, a third of the puts are upserts.
pub fn random_batch(rng: &mut SmallRng, lay: &Layout, w: u32, remove_pct: u32) -> Vec<Op> {
    assert!(w < lay.writers);
    let per_writer = (lay.keys - w).div_ceil(lay.writers);
    let n = rng.gen_range(1..=MAX_OPS);
    let mut ops: Vec<Op> = Vec::with_capacity(n);
    for _ in 0..n * 4 {
        if ops.len() == n {
            break;
        }
        let tree = rng.gen_range(0..lay.trees.len()) as u8;
        let idx = w + lay.writers * rng.gen_range(0..per_writer);
        if ops.iter().any(|o| o.tree == tree && o.idx == idx) {
            continue;
        }
        let write = if rng.gen_range(0..100) < remove_pct {
            Write::Remove
        } else if lay.trees[tree as usize].1.upsert && rng.gen_range(0..3) == 0 {
            Write::Upsert(rng.gen_range(1..=UPSERT_ADD_MAX))
        } else {
            Write::Put(value_len(rng, lay.page_size))
        };
        ops.push(Op { tree, idx, write });
    }
    assert!(!ops.is_empty() && ops.iter().all(|o| o.idx < lay.keys));
    ops
}

/// The engine batch for `ops`, written by batch number `batch`.
pub fn engine_batch(lay: &Layout, batch: u64, ops: &[Op]) -> pagewise::Batch {
    let mut b = pagewise::Batch::new();
    for o in ops {
        let name = &lay.trees[o.tree as usize].0;
        match o.write {
            Write::Put(len) => b.insert(name, key(o.idx), value(batch, o.tree, o.idx, len)),
            Write::Remove => b.remove(name, key(o.idx)),
            Write::Upsert(add) => b.upsert(name, key(o.idx), operand(o.tree, batch, add)),
        }
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn values_describe_themselves_and_damage_shows() {
        let v = value(42, 1, 7, 300);
        assert_eq!(decode(&v, 1, 7), Ok((42, 300)));
        assert!(decode(&v, 1, 8).is_err(), "another key's value passed");
        assert!(decode(&v, 0, 7).is_err(), "another tree's value passed");
        for at in [0, 5, 13, 17, 21, 100, 299] {
            let mut bad = v.clone();
            bad[at] ^= 0x10;
            assert!(decode(&bad, 1, 7).is_err(), "flip at {at} passed");
        }
        assert!(decode(&v[..299], 1, 7).is_err());
    }

    #[test]
    fn upserts_merge_into_the_values_the_model_predicts() {
        use pagewise::MergeOperator;
        let (k, m) = (key(7), StressMerge);
        let v = m.full_merge(&k, None, &[&operand(2, 5, 30)]);
        assert_eq!(upsert_len(0, 30), 54, "an absent key starts at the header");
        assert_eq!(decode(&v, 2, 7), Ok((5, 54)));
        let v2 = m.full_merge(&k, Some(&v), &[&operand(2, 6, 10), &operand(2, 9, 200)]);
        assert_eq!(decode(&v2, 2, 7), Ok((9, 264)));
        assert_eq!(
            upsert_len(4000, 200),
            24 + 4200 % 256,
            "wraps past the maximum"
        );
        assert_eq!(
            m.full_merge(&k, Some(&v), &[b"junk"]),
            v,
            "a foreign operand"
        );
        assert_eq!(m.full_merge(b"other", Some(&v), &[&operand(2, 6, 1)]), v);
    }

    #[test]
    fn keys_round_trip_and_others_are_rejected() {
        for idx in [0, 1, 12, 13, 999_999] {
            assert_eq!(key_index(&key(idx)), Some(idx));
        }
        assert_eq!(
            key_index(b"k0000012"),
            None,
            "dash count is part of the key"
        );
        assert_eq!(key_index(b"x0000000"), None);
    }

    #[test]
    fn batches_stay_in_the_writer_partition() {
        let lay = Layout::new(KINDS, 3, 100, 3, 4096);
        let mut rng = SmallRng::seed_from_u64(9);
        for _ in 0..200 {
            let ops = random_batch(&mut rng, &lay, 2, 30);
            assert!(ops
                .iter()
                .all(|o| o.idx % 3 == 2 && (o.tree as usize) < lay.trees.len()));
            // Upserts only on trees whose kind has a merge operator.
            assert!(ops.iter().all(
                |o| !matches!(o.write, Write::Upsert(_)) || lay.trees[o.tree as usize].1.upsert
            ));
        }
        assert!(parse_kinds("btree,betree").is_err());
        assert_eq!(parse_kinds("btree,bepsilon,delta").unwrap(), KINDS.to_vec());
    }
}
