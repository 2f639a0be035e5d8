//! B-epsilon trees against a BTreeMap model: random puts, removes, upserts
//! (an order-sensitive append operator), batches spanning both tree kinds,
//! ranges both ways with every bound kind, checkpoints and reopens, with
//! nodes and basements so small that flushes, splits and merges happen in
//! every case. Plus the typed errors: no merge operator, corrupt partition.

mod common;
use common::Append;
use pagewise::{BEpsilonOptions, Batch, Compression, Db, Durability, Options, Tree, TreeKind};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

type Model = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

#[derive(Debug, Clone)]
enum Op {
    Put(u8, Vec<u8>, usize),
    Del(u8, Vec<u8>),
    Up(u8, Vec<u8>, u8),
    Batch(Vec<(u8, Vec<u8>, u8)>),
    Range(u8, Vec<u8>, Vec<u8>, u8, bool),
    Reopen,
    Checkpoint,
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), 0u8..=255], 0..6)
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (0u8..3, key(), prop_oneof![4 => 0usize..40, 1 => 40usize..400]).prop_map(|(t, k, v)| Op::Put(t, k, v)),
        4 => (0u8..3, key()).prop_map(|(t, k)| Op::Del(t, k)),
        5 => (0u8..2, key(), any::<u8>()).prop_map(|(t, k, b)| Op::Up(t, k, b)),
        2 => prop::collection::vec((0u8..3, key(), any::<u8>()), 1..30).prop_map(Op::Batch),
        2 => (0u8..3, key(), key(), 0u8..9, any::<bool>()).prop_map(|(t, a, b, k, r)| Op::Range(t, a, b, k, r)),
        1 => Just(Op::Reopen),
        1 => Just(Op::Checkpoint),
    ]
}

/// Trees 0 and 1 are B-epsilon (tiny nodes), tree 2 a B+tree. Values of at
/// least 64 bytes (lz4 trees) or 200 (zstd) go to value extents, so puts
/// of 40..400 bytes cross the threshold both ways; uncompressed trees keep
/// every value in the tree (untagged, as files before value extents).
fn name(t: u8) -> String {
    format!("tree{t}")
}

fn bepsilon(comp: Compression) -> TreeKind {
    let extent_bytes = match comp {
        Compression::Lz4 => Some(64),
        Compression::Zstd => Some(200),
        Compression::None => None,
    };
    TreeKind::BEpsilon(
        BEpsilonOptions::default()
            .node_bytes(512)
            .basement_bytes(128)
            .fanout(4)
            .compression(comp)
            .value_extent_bytes(extent_bytes),
    )
}

/// The property tests' trees: [`bepsilon`], with leaves smaller than the
/// internal nodes (lz4) or larger (zstd).
fn bepsilon_leaves(comp: Compression) -> TreeKind {
    let TreeKind::BEpsilon(o) = bepsilon(comp) else {
        unreachable!("bepsilon makes B-epsilon trees")
    };
    TreeKind::BEpsilon(match comp {
        Compression::Lz4 => o.leaf_bytes(384),
        Compression::Zstd => o.leaf_bytes(1024),
        Compression::None => o,
    })
}

fn value(k: &[u8], len: usize, salt: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i + salt * 31 + k.len() * 7) as u8)
        .collect()
}

fn opts() -> Options {
    Options::default()
        .page_size(512)
        .cache_bytes(32 * 1024)
        .durability(Durability::Buffered)
        .direct_io(false)
        .wal_limit(pagewise::WAL_LIMIT_MIN_BYTES)
        .merge_operator(Arc::new(Append))
}

fn bound(k: &[u8], kind: u8) -> Bound<Vec<u8>> {
    match kind % 3 {
        0 => Bound::Included(k.to_vec()),
        1 => Bound::Excluded(k.to_vec()),
        _ => Bound::Unbounded,
    }
}

fn check_range(
    db: &Db,
    m: &BTreeMap<Vec<u8>, Vec<u8>>,
    t: u8,
    a: &[u8],
    b: &[u8],
    k: u8,
    rev: bool,
) {
    let (lo, hi) = (bound(a, k), bound(b, k / 3));
    let valid = match (&lo, &hi) {
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => x < y,
        _ => true,
    };
    if !valid {
        return;
    }
    let tree = db.tree(&name(t)).unwrap();
    let it = tree.range::<Vec<u8>, _>((lo.clone(), hi.clone()));
    let got: Vec<_> = if rev {
        it.rev().map(Result::unwrap).collect()
    } else {
        it.map(Result::unwrap).collect()
    };
    let mut want: Vec<_> = m
        .range((lo, hi))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if rev {
        want.reverse();
    }
    assert_eq!(got, want, "tree{t} range {a:?}..{b:?} kinds {k} rev {rev}");
}

fn verify_all(db: &Db, model: &Model) {
    for t in 0..3u8 {
        let tree = db.tree(&name(t)).unwrap();
        let empty = BTreeMap::new();
        let m = model.get(&name(t)).unwrap_or(&empty);
        let got: Vec<_> = tree.iter().map(Result::unwrap).collect();
        let want: Vec<_> = m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(got, want, "tree{t} contents");
        let back: Vec<_> = tree.iter().rev().map(Result::unwrap).collect();
        assert_eq!(back.len(), want.len(), "tree{t} backwards");
        assert_eq!(tree.len(), m.len() as u64);
        for (k, v) in m.iter().take(50) {
            assert_eq!(tree.get(k).unwrap().as_ref(), Some(v), "tree{t} get {k:?}");
        }
        assert_eq!(tree.first().unwrap(), want.first().cloned());
        assert_eq!(tree.last().unwrap(), want.last().cloned());
    }
}

fn apply_model(model: &mut Model, t: u8, k: &[u8], what: Option<Result<Vec<u8>, u8>>) {
    let m = model.entry(name(t)).or_default();
    match what {
        Some(Ok(v)) => {
            m.insert(k.to_vec(), v);
        }
        Some(Err(b)) => {
            let v = m.entry(k.to_vec()).or_insert_with(|| b"^".to_vec());
            v.push(b);
        }
        None => {
            m.remove(k);
        }
    }
}

fn run(ops: Vec<Op>, comp: Compression) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let mut db = Db::create(&path, opts()).unwrap();
    for t in 0..2 {
        db.tree_with(&name(t), bepsilon_leaves(comp)).unwrap();
    }
    let mut model = Model::new();
    for (salt, op) in ops.into_iter().enumerate() {
        match op {
            Op::Put(t, k, n) => {
                let v = value(&k, n, salt);
                db.tree(&name(t)).unwrap().insert(&k, &v).unwrap();
                apply_model(&mut model, t, &k, Some(Ok(v)));
            }
            Op::Del(t, k) => {
                db.tree(&name(t)).unwrap().remove(&k).unwrap();
                apply_model(&mut model, t, &k, None);
            }
            Op::Up(t, k, b) => {
                db.tree(&name(t)).unwrap().upsert(&k, [b]).unwrap();
                apply_model(&mut model, t, &k, Some(Err(b)));
            }
            Op::Batch(items) => {
                let mut batch = Batch::new();
                for (t, k, b) in &items {
                    match b % 4 {
                        0 => {
                            batch.remove(name(*t), k);
                            apply_model(&mut model, *t, k, None);
                        }
                        1 if *t < 2 => {
                            batch.upsert(name(*t), k, [*b]);
                            apply_model(&mut model, *t, k, Some(Err(*b)));
                        }
                        _ => {
                            let v = value(k, *b as usize % 50, salt);
                            batch.insert(name(*t), k, &v);
                            apply_model(&mut model, *t, k, Some(Ok(v)));
                        }
                    }
                }
                db.apply(batch).unwrap();
            }
            Op::Range(t, a, b, k, rev) => {
                let empty = BTreeMap::new();
                check_range(
                    &db,
                    model.get(&name(t)).unwrap_or(&empty),
                    t,
                    &a,
                    &b,
                    k,
                    rev,
                );
            }
            Op::Reopen => {
                drop(db);
                db = Db::open(&path, opts()).unwrap();
            }
            Op::Checkpoint => db.checkpoint().unwrap(),
        }
    }
    verify_all(&db, &model);
    let rep = db.check().unwrap();
    assert!(rep.is_ok(), "{:?}", rep.problems);
    drop(db);
    let db = Db::open(&path, opts()).unwrap();
    verify_all(&db, &model);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn bepsilon_matches_model(ops in prop::collection::vec(op(), 1..300), c in 0u8..3) {
        let comp = [Compression::None, Compression::Lz4, Compression::Zstd][c as usize];
        run(ops, comp);
    }
}

#[test]
fn many_keys_grow_and_shrink_the_tree() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::create(&path, opts()).unwrap();
    let t = db.tree_with("t", bepsilon(Compression::Lz4)).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..3000u32 {
        let k = format!("{:08}", (i * 7919) % 3000).into_bytes();
        if i % 3 == 0 {
            t.upsert(&k, [i as u8]).unwrap();
            model
                .entry(k)
                .or_insert_with(|| b"^".to_vec())
                .push(i as u8);
        } else {
            t.insert(&k, i.to_le_bytes()).unwrap();
            model.insert(k, i.to_le_bytes().to_vec());
        }
    }
    let (height, grown) = (db.stats().trees[0].height, db.stats().trees[0].nodes);
    assert!(height >= 2, "tiny nodes make a tall tree: {height}");
    for i in 0..3000u32 {
        if i % 5 != 0 {
            let k = format!("{i:08}").into_bytes();
            t.remove(&k).unwrap();
            model.remove(&k);
        }
    }
    let got: Vec<_> = t.iter().map(Result::unwrap).collect();
    assert_eq!(got, model.into_iter().collect::<Vec<_>>());
    let rep = db.check().unwrap();
    assert!(rep.is_ok(), "{:?}", rep.problems);
    let shrunk = db.stats().trees[0].nodes;
    assert!(shrunk < grown, "merges: {grown} nodes, then {shrunk}");
}

#[test]
fn upsert_needs_an_operator_and_a_bepsilon_tree() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::create(&path, opts()).unwrap();
    let e = db.tree("plain").unwrap().upsert(b"k", b"1").unwrap_err();
    assert!(matches!(e, pagewise::Error::Unsupported { .. }), "{e}");
    let t = db.tree_with("b", bepsilon(Compression::Lz4)).unwrap();
    t.upsert(b"k", b"1").unwrap();
    t.upsert(b"k", b"2").unwrap();
    db.sync().unwrap();
    // Crash-like: no close, so the log still holds the upserts.
    std::mem::forget(db);
    let mut no_op = opts();
    no_op.merge_operator = None;
    std::fs::remove_file(pagewise::lock_path(&path)).ok();
    match Db::open(&path, no_op.clone()) {
        Err(pagewise::Error::NoMergeOperator { tree }) => assert_eq!(tree, "b"),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("replay without the operator must fail"),
    }
}

/// Flips one byte inside partition 1 of a stored leaf and reseals the page
/// (so the page checksum passes): reads must report the node's first page
/// and the partition, never panic or return wrong data.
#[test]
fn corrupt_partition_is_a_typed_error_naming_node_and_partition() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let o = || opts().durability(Durability::Sync);
    let db = Db::create(&path, o()).unwrap();
    let kind = TreeKind::BEpsilon(
        BEpsilonOptions::default()
            .node_bytes(4096)
            .basement_bytes(256)
            .compression(Compression::None),
    );
    let t = db.tree_with("t", kind).unwrap();
    for i in 0..400u32 {
        t.insert(format!("key{i:05}"), [b'v'; 20]).unwrap();
    }
    db.close().unwrap();
    let (ps, cap) = (512usize, 480usize);
    let mut file = std::fs::read(&path).unwrap();
    let mut target = None;
    for pid in 2..file.len() / ps {
        let page = &file[pid * ps..(pid + 1) * ps];
        let payload = &page[32..];
        let first_of_leaf = page[4] == 7 && page[28..32] == [0; 4] && &payload[..4] == b"PWBE";
        if first_of_leaf && payload[4] == 2 && u16::from_le_bytes([payload[6], payload[7]]) >= 2 {
            let d = 64 + 24; // directory entry of partition 1
            let off = u32::from_le_bytes(payload[d..d + 4].try_into().unwrap()) as usize;
            target = Some((pid, off + 3));
            break;
        }
    }
    let (first, off) = target.expect("a stored leaf with two basements");
    let pid = first + off / cap;
    let at = pid * ps + 32 + off % cap;
    file[at] ^= 0x40;
    let crc = crc32c::crc32c(&file[pid * ps + 4..(pid + 1) * ps]);
    file[pid * ps..pid * ps + 4].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, &file).unwrap();
    let db = Db::open(&path, o()).unwrap();
    let t = db.tree("t").unwrap();
    let err = t
        .iter()
        .find_map(Result::err)
        .expect("the scan meets the bad partition");
    match &err {
        pagewise::Error::Corrupt { page, what, .. } => {
            assert_eq!(*page, first as u64, "names the node's first page: {err}");
            assert!(what.contains("partition 1"), "names the partition: {err}");
        }
        e => panic!("expected Error::Corrupt, got {e}"),
    }
    let rep = db.check().unwrap();
    assert!(!rep.is_ok(), "check reports it");
}

/// 64 KiB nodes of 1 KiB basements, uncompressed: read sizes are countable.
fn read_sized_kind() -> TreeKind {
    TreeKind::BEpsilon(
        BEpsilonOptions::default()
            .node_bytes(64 << 10)
            .basement_bytes(1024)
            .compression(Compression::None),
    )
}

/// A point read of a clean tree reads node shells and one partition per
/// level, not whole nodes.
#[test]
fn point_read_fetches_shells_and_one_basement() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let kind = read_sized_kind();
    let db = Db::create(&path, opts().cache_bytes(1 << 20)).unwrap();
    let t = db.tree_with("t", kind).unwrap();
    let mut b = Batch::new();
    for i in 0..6000u32 {
        b.insert("t", format!("key{i:06}"), [7u8; 24]);
    }
    db.apply(b).unwrap();
    db.close().unwrap();
    let db = Db::open(&path, opts().cache_bytes(1 << 20)).unwrap();
    let before = db.stats().pages.read_bytes;
    let t2 = db.tree("t").unwrap();
    assert_eq!(t2.get(b"key003001").unwrap(), Some(vec![7u8; 24]));
    let read = db.stats().pages.read_bytes - before;
    let s = &db.stats().trees[0];
    assert!(s.height >= 1 && s.nodes >= 3, "{s:?}");
    // Whole leaves hold about 40 KiB each; shells plus one 1 KiB basement
    // per level are a few pages of 512 bytes.
    eprintln!("one get read {read} bytes; tree {s:?}");
    assert!(
        read > 0 && read <= 24 * 512,
        "read {read} bytes for one get"
    );
    drop(t);
}

/// Partial eviction: under a cache that holds the node shells but not the
/// basements, clean basements are dropped from cached nodes before the
/// shells, so a random get reads about one basement, and values stay right.
#[test]
fn partial_eviction_keeps_shells_and_reads_one_basement_per_get() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let kind = read_sized_kind();
    let keys = 20_000u32;
    let db = Db::create(&path, opts().cache_bytes(4 << 20)).unwrap();
    let t = db.tree_with("t", kind).unwrap();
    for chunk in 0..keys / 1000 {
        let mut b = Batch::new();
        for i in chunk * 1000..(chunk + 1) * 1000 {
            b.insert("t", format!("key{i:06}"), value(&i.to_le_bytes(), 24, 0));
        }
        db.apply(b).unwrap();
    }
    drop(t);
    db.close().unwrap();
    // About 1.1 MiB of basements, 80 KiB of root buffers, 38 KiB of shells.
    let db = Db::open(&path, opts().cache_bytes(192 << 10)).unwrap();
    let t = db.tree("t").unwrap();
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % keys as u64) as u32
    };
    let get = |i: u32| {
        let got = t.get(format!("key{i:06}")).unwrap();
        assert_eq!(got, Some(value(&i.to_le_bytes(), 24, 0)), "key {i}");
    };
    for _ in 0..2000 {
        get(next());
    }
    let (reads0, bytes0) = (db.stats().pages.read_ops, db.stats().pages.read_bytes);
    let (base0, bufs0) = (level_part_bytes(&db, 0), buffer_reads(&db, 0));
    let gets = 2000u64;
    for _ in 0..gets {
        get(next());
    }
    let s = db.stats();
    let per_get = (s.pages.read_bytes - bytes0) as f64 / gets as f64;
    let reads = (s.pages.read_ops - reads0) as f64 / gets as f64;
    eprintln!(
        "per get: {reads:.2} reads, {per_get:.0} bytes; cache {} of {} bytes; tree {:?}",
        s.cache_bytes,
        192 << 10,
        s.trees[0]
    );
    assert!(s.cache_bytes <= 192 << 10, "the cache stays in budget");
    // Root buffers and leaf shells fit; basements do not (a tenth of them
    // is cached). Kept shells: under one read (a 1 KiB basement) per get.
    // Measured 0.91; 1.11 without shedding; before this change 1.02 with
    // the cache at 1.9x its budget (images larger than a shard's budget).
    assert!(reads <= 1.0, "{reads:.2} reads per get");
    // Basement bytes: about one 1 KiB basement per get. Root buffers are
    // probed (read whole, not cached) by the gets whose key one holds:
    // since buffers are packed the root is flushed by its
    // serialized bytes alone and holds four times the messages it did as
    // maps (its sequential fill in one 40 KiB buffer; a probe of it in 4%
    // of gets, 2.6 KiB per get in all, where it was under 1.5 KiB).
    let base = (level_part_bytes(&db, 0) - base0) as f64 / gets as f64;
    let probes = buffer_reads(&db, bufs0) as f64 / gets as f64;
    eprintln!("basement bytes per get {base:.0}, buffer reads per get {probes:.3}");
    assert!(base <= 1.5 * 1024.0, "{base:.0} basement bytes per get");
    assert!(probes <= 0.06, "{probes:.3} buffer reads per get");
}

/// Partition bytes read at `height` so far.
fn level_part_bytes(db: &Db, height: u32) -> u64 {
    let levels = db.stats().bepsilon_reads;
    let level = levels.iter().filter(|l| l.height == height);
    level.map(|l| l.part_bytes).sum()
}

/// Buffer reads (partitions read at height 1 and up) since `before`.
fn buffer_reads(db: &Db, before: u64) -> u64 {
    let now: u64 = db
        .stats()
        .bepsilon_reads
        .iter()
        .filter(|l| l.height >= 1)
        .map(|l| l.part_reads)
        .sum();
    now - before
}

/// 4 KiB nodes of 512-byte basements, fanout 8, uncompressed: a tree of
/// four levels at 20,000 keys whose internal buffers hold messages.
fn filtered_kind() -> TreeKind {
    TreeKind::BEpsilon(
        BEpsilonOptions::default()
            .node_bytes(4096)
            .basement_bytes(512)
            .fanout(8)
            .compression(Compression::None),
    )
}

/// Keys of [`overwritten_tree`].
const OVERWRITTEN_KEYS: u32 = 20_000;

/// A filtered tree "t" of `OVERWRITTEN_KEYS` keys (value salt 0) whose
/// every 97th key is overwritten (salt 1) by a last batch that stays in
/// buffers above the leaves, reopened with a cache too small for them.
fn overwritten_tree(path: &std::path::Path) -> Db {
    let db = Db::create(path, opts().cache_bytes(1 << 20)).unwrap();
    let t = db.tree_with("t", filtered_kind()).unwrap();
    let keys = OVERWRITTEN_KEYS;
    for chunk in 0..keys / 500 {
        let mut b = Batch::new();
        for i in chunk * 500..(chunk + 1) * 500 {
            b.insert("t", format!("key{i:06}"), value(&i.to_le_bytes(), 24, 0));
        }
        db.apply(b).unwrap();
    }
    let mut b = Batch::new();
    for i in (0..keys).step_by(97) {
        b.insert("t", format!("key{i:06}"), value(&i.to_le_bytes(), 24, 1));
    }
    db.apply(b).unwrap();
    drop(t);
    db.close().unwrap();
    Db::open(path, opts().cache_bytes(48 << 10)).unwrap()
}

/// Buffer key filters: under a cache too small for the internal buffers, a
/// get of a key no buffer holds reads no buffer (but for the filters'
/// false positives), while a get of a key a buffer holds reads it and
/// finds the buffered value. Without filters the absent-key gets read about
/// one buffer each: measured 0.99 per get, against 0.018 with filters.
#[test]
fn buffer_filters_skip_buffers_that_cannot_hold_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let keys = OVERWRITTEN_KEYS;
    let db = overwritten_tree(&dir.path().join("db"));
    let t = db.tree("t").unwrap();
    assert!(db.stats().trees[0].height >= 2, "{:?}", db.stats().trees[0]);
    let before = buffer_reads(&db, 0);
    let absent = 2000u32;
    for n in 0..absent {
        let i = n.wrapping_mul(7919) % keys;
        assert_eq!(t.get(format!("key{i:06}x")).unwrap(), None);
    }
    let skipped: u64 = db
        .stats()
        .bepsilon_reads
        .iter()
        .map(|l| l.filter_skips)
        .sum();
    let per_get = buffer_reads(&db, before) as f64 / absent as f64;
    eprintln!("absent keys: {per_get:.3} buffer reads per get, {skipped} skips");
    assert!(per_get <= 0.1, "{per_get:.3} buffer reads per absent get");
    assert!(skipped > 0, "filters were consulted");
    let before = buffer_reads(&db, 0);
    for i in (0..keys).step_by(97) {
        let want = value(&i.to_le_bytes(), 24, 1);
        assert_eq!(t.get(format!("key{i:06}")).unwrap(), Some(want), "key {i}");
    }
    assert!(
        buffer_reads(&db, before) > 0,
        "buffered keys are read from buffers"
    );
}

/// The largest stored buffer (compressed bytes of a directory entry) of any
/// internal node whose first page is in the file at `path` (512-byte pages).
fn largest_stored_buffer(path: &std::path::Path) -> usize {
    let file = std::fs::read(path).unwrap();
    let u32_at = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let mut most = 0;
    for page in file.chunks_exact(512).skip(2) {
        let payload = &page[32..];
        let first_of_node = page[4] == 7 && page[28..32] == [0; 4] && &payload[..4] == b"PWBE";
        if first_of_node && payload[4] == 1 {
            let count = u16::from_le_bytes([payload[6], payload[7]]) as usize;
            for i in (0..count).take_while(|i| 64 + 24 * (i + 1) <= payload.len()) {
                most = most.max(u32_at(payload, 64 + 24 * i + 4) as usize);
            }
        }
    }
    most
}

/// A Db at `path` with tree "t" of 32 KiB nodes of 1 KiB basements,
/// fanout 4, uncompressed: its buffers of more than 2 KiB are segmented.
fn segmented_db(path: &std::path::Path) -> Db {
    small_nodes_db(path, 32 << 10, 1 << 10)
}

/// A Db at `path` with a 1 MiB cache and one B-epsilon tree "t" of
/// `node_bytes` nodes, fanout 4, basements of `basement_bytes`, stored
/// uncompressed.
fn small_nodes_db(path: &std::path::Path, node_bytes: u32, basement_bytes: u32) -> Db {
    let kind = BEpsilonOptions::default()
        .node_bytes(node_bytes)
        .basement_bytes(basement_bytes)
        .fanout(4)
        .compression(Compression::None);
    let db = Db::create(path, opts().cache_bytes(1 << 20)).unwrap();
    db.tree_with("t", TreeKind::BEpsilon(kind)).unwrap();
    db
}

/// Buffer segments (docs/design.md): a get whose key a cold buffer's
/// filter admits reads one segment of about the basement bytes, not the
/// whole buffer, and finds its value there. Buffers here are stored up to
/// several KiB; a probe reads at most 2 KiB (a buffer under twice the
/// basement is one segment) plus the two pages a range may straddle.
#[test]
fn a_probe_reads_one_segment_of_a_large_buffer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = segmented_db(&path);
    let keys = 20_000u32;
    for (salt, step) in [(0usize, 1usize), (1, 7)] {
        for chunk in (0..keys).step_by(500 * step) {
            let mut b = Batch::new();
            for i in (chunk..(chunk + 500 * step as u32).min(keys)).step_by(step) {
                b.insert("t", format!("key{i:06}"), value(&i.to_le_bytes(), 24, salt));
            }
            db.apply(b).unwrap();
        }
    }
    db.close().unwrap();
    let largest = largest_stored_buffer(&path);
    let db = Db::open(&path, opts().cache_bytes(48 << 10)).unwrap();
    let t = db.tree("t").unwrap();
    let probes = |db: &Db| probes_where(db, |h| h >= 1);
    let (mut one_probe, mut most_bytes) = (0u32, 0u64);
    // Scattered, as in `a_get_reads_one_segment_of_a_cold_basement`.
    for i in (0..keys / 7).map(|n| n * 7919 % (keys / 7) * 7) {
        let (p0, b0) = probes(&db);
        let want = value(&i.to_le_bytes(), 24, 1);
        assert_eq!(t.get(format!("key{i:06}")).unwrap(), Some(want), "key {i}");
        let (p, b) = probes(&db);
        if p - p0 == 1 && buffer_reads(&db, 0) > 0 {
            one_probe += 1;
            most_bytes = most_bytes.max(b - b0);
        }
    }
    eprintln!("{one_probe} gets probed one buffer, at most {most_bytes} bytes; largest buffer {largest} bytes");
    assert!(one_probe >= 50, "{one_probe} gets probed one buffer");
    assert!(
        most_bytes <= (2 << 10) + 2 * 512,
        "{most_bytes} bytes in one probe"
    );
    assert!(
        largest >= 4 * most_bytes as usize,
        "buffers of {largest} bytes"
    );
}

/// Slices (docs/design.md, segments): under a cache with no room for the
/// internal buffers, a scan reads the segment of each cold buffer that
/// holds its position, not the whole buffer, and resolves up to the
/// segment's end, then reads the next one. Scans both ways over buffered
/// puts and removes match the model, and read per scan far fewer buffer
/// bytes than whole buffers: measured 3,041 bytes per 100-entry scan
/// against 20,920 when every cold buffer is loaded whole.
#[test]
fn scans_read_the_segments_of_cold_buffers_they_cross() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = segmented_db(&path);
    let keys = 20_000u32;
    let mut model = std::collections::BTreeMap::new();
    for chunk in (0..keys).step_by(500) {
        let mut b = Batch::new();
        for i in chunk..chunk + 500 {
            let (k, v) = (format!("key{i:06}"), value(&i.to_le_bytes(), 24, 0));
            b.insert("t", &k, &v);
            model.insert(k.into_bytes(), v);
        }
        db.apply(b).unwrap();
    }
    // Puts and removes that stay in the buffers above the leaves.
    for chunk in (0..keys).step_by(3500) {
        let mut b = Batch::new();
        for i in (chunk..(chunk + 3500).min(keys)).filter(|i| i % 7 == 0 || i % 11 == 0) {
            let k = format!("key{i:06}");
            if i % 7 == 0 {
                let v = value(&i.to_le_bytes(), 24, 1);
                b.insert("t", &k, &v);
                model.insert(k.into_bytes(), v);
            } else {
                b.remove("t", &k);
                model.remove(k.as_bytes());
            }
        }
        db.apply(b).unwrap();
    }
    db.close().unwrap();
    let largest = largest_stored_buffer(&path);
    let db = Db::open(&path, opts().cache_bytes(48 << 10)).unwrap();
    let t = db.tree("t").unwrap();
    let (probes0, _) = probes_where(&db, |h| h >= 1);
    let bytes = |db: &Db| {
        let l = db.stats().bepsilon_reads;
        let at = l.iter().filter(|l| l.height >= 1);
        at.map(|l| l.part_bytes).sum::<u64>()
    };
    let (bytes0, rounds0) = (bytes(&db), db.stats().node_read_rounds);
    let scans = 200u32;
    for n in 0..scans {
        let start = format!("key{:06}", n * 7919 % keys).into_bytes();
        scan_matches(&t, &model, &start, 100);
        let got: Vec<_> = t
            .range(..start.clone())
            .rev()
            .take(100)
            .map(Result::unwrap)
            .collect();
        let want: Vec<_> = model
            .range(..start.clone())
            .rev()
            .take(100)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(got, want, "backward from {start:?}");
    }
    let (probes, _) = probes_where(&db, |h| h >= 1);
    let per_scan = (bytes(&db) - bytes0) as f64 / (2 * scans) as f64;
    let rounds = (db.stats().node_read_rounds - rounds0) as f64 / (2 * scans) as f64;
    eprintln!(
        "{} segments read, {per_scan:.0} buffer bytes and {rounds:.2} read rounds per scan; largest buffer {largest} bytes",
        probes - probes0
    );
    assert!(probes - probes0 >= scans as u64, "scans read slices");
    assert!(
        per_scan <= largest as f64 / 4.0,
        "{per_scan:.0} bytes per scan"
    );
    // One-entry scans: a first step that misses several buffers and
    // nodes on its path reads them together (`Miss::Batch`).
    for n in 0..scans {
        let start = format!("key{:06}", n * 4099 % keys + 3).into_bytes();
        let got = t.range(start.clone()..).next().map(Result::unwrap);
        let want = model.range(start..).next();
        assert_eq!(got, want.map(|(k, v)| (k.clone(), v.clone())));
    }
    assert!(largest >= 4 << 10, "buffers of {largest} bytes");
    let all: Vec<_> = t.iter().map(Result::unwrap).collect();
    assert!(all.iter().map(|(k, v)| (k, v)).eq(model.iter()));
}

/// Basement segments (docs/design.md, format 6): a get whose basement is
/// not cached, with a cache too small to keep it, reads one segment of
/// about a quarter of the basement (plus the pages its range straddles)
/// without caching it, and finds its value or its absence there.
#[test]
fn a_get_reads_one_segment_of_a_cold_basement() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = small_nodes_db(&path, 64 << 10, 4 << 10);
    let keys = 20_000u32;
    for chunk in (0..keys).step_by(1000) {
        let mut b = Batch::new();
        for i in (chunk..chunk + 1000).filter(|i| i % 3 != 0) {
            b.insert("t", format!("key{i:06}"), value(&i.to_le_bytes(), 40, 0));
        }
        db.apply(b).unwrap();
    }
    db.close().unwrap();
    let db = Db::open(&path, opts().cache_bytes(64 << 10)).unwrap();
    let t = db.tree("t").unwrap();
    let leaf = |db: &Db| probes_where(db, |h| h == 0);
    let (mut one_probe, mut most_bytes) = (0u32, 0u64);
    // Scattered: in key order, gets would find each basement hot (probed
    // lately) and load it.
    for i in (0..keys / 5).map(|n| n * 7919 % keys) {
        let (p0, b0) = leaf(&db);
        let want = (i % 3 != 0).then(|| value(&i.to_le_bytes(), 40, 0));
        assert_eq!(t.get(format!("key{i:06}")).unwrap(), want, "key {i}");
        let (p, b) = leaf(&db);
        if p - p0 == 1 {
            one_probe += 1;
            most_bytes = most_bytes.max(b - b0);
        }
    }
    eprintln!("{one_probe} gets probed one basement, at most {most_bytes} bytes");
    assert!(one_probe >= 1000, "{one_probe} gets probed one basement");
    // A segment holds at least 1 KiB and under one 55-byte entry more, so
    // it spans at most 4 pages of 480 payload bytes (a whole basement read
    // up to 7: reading whole basements fails here).
    assert!(most_bytes <= 4 * 512, "{most_bytes} bytes in one probe");
    // A hot key under the same full cache: its basement is probed once,
    // loaded at its second miss, and then read from the cache.
    let reads = |db: &Db| db.stats().pages.read_ops;
    let mut per_get = Vec::new();
    for _ in 0..6 {
        let r0 = reads(&db);
        let want = value(&7u32.to_le_bytes(), 40, 0);
        assert_eq!(t.get("key000007").unwrap(), Some(want));
        per_get.push(reads(&db) - r0);
    }
    eprintln!("reads per get of one hot key: {per_get:?}");
    assert!(per_get[2..].iter().all(|&r| r == 0), "{per_get:?}");
    let r = db.check().unwrap();
    assert!(r.is_ok(), "{:?}", r.problems);
}

/// Scan read-ahead (docs/design.md, "Concurrency"): a forward scan step
/// that misses a basement reads the next basements of its leaf with it
/// through one queue (one once a step has ended its unit, doubling per
/// such step, up to 8), so long scans over cold leaves wait on fewer read
/// rounds than with `Options::read_ahead(0)`, and return the same entries.
/// The buffers are drained first: their slices take rounds of their own.
/// By hand: a 1,000-entry scan crosses about 40 basements (about 25
/// entries each after the drain) in 2 or 3 leaves: about 43 rounds without
/// read-ahead, and about 10 with it (per leaf a shell, then 1, 2, 4, 8, 8
/// basements ahead, windows cut at the leaf's end); measured 46 and 11.
#[test]
fn long_scans_read_the_next_basements_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = small_nodes_db(&path, 64 << 10, 2 << 10);
    let keys = 20_000u32;
    let mut model = std::collections::BTreeMap::new();
    for chunk in (0..keys).step_by(1000) {
        let mut b = Batch::new();
        for i in (chunk..chunk + 1000).map(|i| i * 7919 % keys) {
            let (k, v) = (format!("key{i:06}"), value(&i.to_le_bytes(), 40, 0));
            b.insert("t", &k, &v);
            model.insert(k.into_bytes(), v);
        }
        db.apply(b).unwrap();
    }
    db.drain().unwrap();
    db.close().unwrap();
    let mut rounds = Vec::new();
    for ahead in [0usize, 32] {
        // Read-ahead takes at most 1/16 of the cache a round: 64 KiB, 8
        // basements of about 2.3 KiB in memory.
        let db = Db::open(&path, opts().cache_bytes(1 << 20).read_ahead(ahead)).unwrap();
        let t = db.tree("t").unwrap();
        let r0 = db.stats().node_read_rounds;
        for n in 0..20 {
            let start = format!("key{:06}", n * 977 % keys).into_bytes();
            scan_matches(&t, &model, &start, 1000);
        }
        rounds.push(db.stats().node_read_rounds - r0);
        let r = db.check().unwrap();
        assert!(r.is_ok(), "{:?}", r.problems);
        db.close().unwrap();
    }
    eprintln!("read rounds of 20 scans of 1,000 entries: {rounds:?} (read_ahead 0, 32)");
    assert!(rounds[1] * 3 <= rounds[0], "{rounds:?}");
}

/// The first `n` entries of `t` from `start` forward are the model's.
fn scan_matches(t: &Tree, model: &BTreeMap<Vec<u8>, Vec<u8>>, start: &[u8], n: usize) {
    let got: Vec<_> = t
        .range(start.to_vec()..)
        .take(n)
        .map(Result::unwrap)
        .collect();
    let want: Vec<_> = model
        .range(start.to_vec()..)
        .take(n)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(got, want, "forward from {start:?}, {n} entries");
}

/// Probes and partition bytes read so far at the heights `at` admits.
fn probes_where(db: &Db, at: impl Fn(u32) -> bool) -> (u64, u64) {
    let levels = db.stats().bepsilon_reads;
    let l = levels.iter().filter(|l| at(l.height));
    (
        l.clone().map(|l| l.probes).sum(),
        l.map(|l| l.part_bytes).sum(),
    )
}

/// Basement reads at `height` 0 so far.
fn basement_reads(db: &Db) -> u64 {
    let levels = db.stats().bepsilon_reads;
    levels
        .iter()
        .filter(|l| l.height == 0)
        .map(|l| l.part_reads)
        .sum()
}

/// A get whose key an internal buffer holds a put for has its value there
/// (nothing below is newer), so it reads no basement: under a cache too
/// small for the basements, the gets of overwritten keys that read a buffer
/// read no basement after it (not one more for the leaf's stale value,
/// which the buffer's put overrides), and find the overwrite.
#[test]
fn a_buffered_put_decides_the_get_without_the_leaf() {
    let dir = tempfile::tempdir().unwrap();
    let keys = OVERWRITTEN_KEYS;
    let db = overwritten_tree(&dir.path().join("db"));
    let t = db.tree("t").unwrap();
    let (mut buffered, mut then_leaf) = (0u32, 0u32);
    for i in (0..keys).step_by(97) {
        let (bufs0, base0) = (buffer_reads(&db, 0), basement_reads(&db));
        let want = value(&i.to_le_bytes(), 24, 1);
        assert_eq!(t.get(format!("key{i:06}")).unwrap(), Some(want), "key {i}");
        if buffer_reads(&db, bufs0) > 0 {
            buffered += 1;
            then_leaf += (basement_reads(&db) > base0) as u32;
        }
    }
    eprintln!("{buffered} gets read a buffer, {then_leaf} of them a basement too");
    assert!(buffered >= 20, "overwrites are read from buffers");
    assert!(then_leaf * 20 <= buffered, "{then_leaf} of {buffered}");
}

/// A get that misses resumes its descent at the node it missed, which its
/// read then holds: a get whose only miss is one partition looks each node
/// of its path up in the cache once (plus the node again after a probe),
/// at most height + 2 lookups, where re-walking from the root looked the
/// path above the miss up twice (2 * height + 1 for a basement).
#[test]
fn a_get_resumes_at_the_node_it_missed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::create(&path, opts().cache_bytes(1 << 20)).unwrap();
    let t = db.tree_with("t", filtered_kind()).unwrap();
    let keys = 20_000u32;
    for chunk in 0..keys / 500 {
        let mut b = Batch::new();
        for i in chunk * 500..(chunk + 1) * 500 {
            b.insert("t", format!("key{i:06}"), value(&i.to_le_bytes(), 24, 0));
        }
        db.apply(b).unwrap();
    }
    drop(t);
    db.close().unwrap();
    let db = Db::open(&path, opts().cache_bytes(256 << 10)).unwrap();
    let t = db.tree("t").unwrap();
    let height = db.stats().trees[0].height as u64;
    assert!(height >= 3, "{:?}", db.stats().trees[0]);
    let (mut one_miss, mut most) = (0u32, 0u64);
    for n in 0..4000u32 {
        let i = n.wrapping_mul(7919) % keys;
        let s0 = db.stats();
        let want = value(&i.to_le_bytes(), 24, 0);
        assert_eq!(t.get(format!("key{i:06}")).unwrap(), Some(want), "key {i}");
        let s = db.stats();
        let shells: u64 = s.bepsilon_reads.iter().map(|l| l.shell_reads).sum();
        let shells0: u64 = s0.bepsilon_reads.iter().map(|l| l.shell_reads).sum();
        if n < 20 {
            eprintln!(
                "misses {} shells {}",
                s.cache_misses - s0.cache_misses,
                shells - shells0
            );
        }
        if s.cache_misses - s0.cache_misses == 1 && shells == shells0 {
            one_miss += 1;
            let hits = s.cache_hits - s0.cache_hits;
            most = most.max(hits);
            assert!(hits <= height + 2, "{hits} lookups at height {height}");
        }
    }
    eprintln!("{one_miss} gets with one partition miss, at most {most} lookups each");
    assert!(one_miss >= 100, "{one_miss} gets with one partition miss");
}

/// No false negative: with filters on, a tiny cache (buffers shed and read
/// back all the time) and puts, overwrites, removes and upserts spread over
/// checkpoints and reopens, every get equals a BTreeMap model's answer.
#[test]
fn filtered_gets_match_a_model_under_a_tiny_cache() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let o = || opts().cache_bytes(24 << 10);
    let mut db = Db::create(&path, o()).unwrap();
    db.tree_with("t", filtered_kind()).unwrap();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    for round in 0..12u64 {
        let mut b = Batch::new();
        for _ in 0..800 {
            let k = format!("k{:05}", rnd(6000)).into_bytes();
            match rnd(10) {
                0..=5 => {
                    let v = value(&k, 8 + rnd(40) as usize, round as usize);
                    b.insert("t", &k, &v);
                    model.insert(k, v);
                }
                6 | 7 => {
                    b.remove("t", &k);
                    model.remove(&k);
                }
                _ => {
                    let op = rnd(256) as u8;
                    b.upsert("t", &k, [op]);
                    model.entry(k).or_insert_with(|| b"^".to_vec()).push(op);
                }
            }
        }
        db.apply(b).unwrap();
        if round % 3 == 2 {
            drop(db);
            db = Db::open(&path, o()).unwrap();
        } else {
            db.checkpoint().unwrap();
        }
        let t = db.tree("t").unwrap();
        let every = if round == 11 { 1 } else { 5 };
        for i in (round % every..6000).step_by(every as usize) {
            let k = format!("k{i:05}").into_bytes();
            assert_eq!(
                t.get(&k).unwrap(),
                model.get(&k).cloned(),
                "round {round} key {i}"
            );
        }
    }
    let skipped: u64 = db
        .stats()
        .bepsilon_reads
        .iter()
        .map(|l| l.filter_skips)
        .sum();
    assert!(skipped > 0, "filters were consulted");
    let rep = db.check().unwrap();
    assert!(rep.is_ok(), "{:?}", rep.problems);
}

/// Flips one byte of the filter area of every stored internal node (live or
/// left over from an older checkpoint) and reseals the pages: a get through
/// a live one is `Error::Corrupt` naming the node's first page and the
/// filter, and `check` reports it.
#[test]
fn corrupt_filter_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::create(&path, opts()).unwrap();
    let t = db.tree_with("t", filtered_kind()).unwrap();
    for chunk in 0..30u32 {
        let mut b = Batch::new();
        for i in chunk * 100..(chunk + 1) * 100 {
            b.insert("t", format!("key{:05}", i * 7 % 3000), [b'v'; 20]);
        }
        db.apply(b).unwrap();
    }
    drop(t);
    db.close().unwrap();
    let (ps, cap) = (512usize, 480usize);
    let mut file = std::fs::read(&path).unwrap();
    let u32_at = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let mut targets = Vec::new();
    for pid in 2..file.len() / ps {
        let page = &file[pid * ps..(pid + 1) * ps];
        let payload = &page[32..];
        let first_of_node = page[4] == 7 && page[28..32] == [0; 4] && &payload[..4] == b"PWBE";
        if !first_of_node || payload[4] != 1 || payload[32] == 0 {
            continue; // not an internal node with filters
        }
        let count = u16::from_le_bytes([payload[6], payload[7]]) as usize;
        let total: usize = (0..count)
            .map(|i| u32_at(payload, 64 + 24 * i + 20) as usize)
            .sum();
        // The filter area ends where the segment area (header offset 40)
        // starts, at the end of the shell.
        let off = u32_at(payload, 12) as usize - u32_at(payload, 40) as usize - total;
        // The page holding the filter byte: still this extent's (same
        // checkpoint generation, its index), not reused by a later node.
        let Some(q) = file.get((pid + off / cap) * ps..(pid + off / cap + 1) * ps) else {
            continue;
        };
        let same = q[16..24] == page[16..24] && u32_at(q, 28) as usize == off / cap;
        if total > 0 && same {
            targets.push((pid, off));
        }
    }
    assert!(
        !targets.is_empty(),
        "a stored internal node with filter bytes"
    );
    for &(first, off) in &targets {
        let pid = first + off / cap;
        let at = pid * ps + 32 + off % cap;
        file[at] ^= 0x04;
        let crc = crc32c::crc32c(&file[pid * ps + 4..(pid + 1) * ps]);
        file[pid * ps..pid * ps + 4].copy_from_slice(&crc.to_le_bytes());
    }
    std::fs::write(&path, &file).unwrap();
    let db = Db::open(&path, opts()).unwrap();
    let t = db.tree("t").unwrap();
    let err = (0..3000u32)
        .find_map(|i| t.get(format!("key{i:05}")).err())
        .expect("a get passes through the damaged node");
    match &err {
        pagewise::Error::Corrupt { page, what, .. } => {
            let named = targets.iter().any(|&(first, _)| first as u64 == *page);
            assert!(named, "names a damaged node's first page: {err}");
            assert!(what.contains("filter checksum"), "names the filter: {err}");
        }
        e => panic!("expected Error::Corrupt, got {e}"),
    }
    assert!(!db.check().unwrap().is_ok(), "check reports it");
}

/// Large batches interleaving both B-epsilon trees and the B+tree, with a
/// key repeated inside a batch as put, upsert and remove in every order:
/// the keyed ops of each B-epsilon tree go into its root sorted in one run
/// (`Writer::apply_run`), which must equal applying them one by one (the
/// model), before and after a reopen.
#[test]
fn large_mixed_batches_match_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::create(&path, opts()).unwrap();
    for t in 0..2 {
        db.tree_with(&name(t), bepsilon(Compression::Lz4)).unwrap();
    }
    let mut model = Model::new();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for round in 0..40usize {
        let mut batch = Batch::new();
        for _ in 0..150 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let t = (x % 3) as u8;
            let k = format!("k{:03}", (x >> 8) % 97).into_bytes();
            let b = (x >> 20) as u8;
            match (x >> 28) % 5 {
                0 => {
                    batch.remove(name(t), &k);
                    apply_model(&mut model, t, &k, None);
                }
                1 | 2 if t < 2 => {
                    batch.upsert(name(t), &k, [b]);
                    apply_model(&mut model, t, &k, Some(Err(b)));
                }
                _ => {
                    let v = value(&k, b as usize % 40, round);
                    batch.insert(name(t), &k, &v);
                    apply_model(&mut model, t, &k, Some(Ok(v)));
                }
            }
        }
        db.apply(batch).unwrap();
        if round % 10 == 9 {
            verify_all(&db, &model);
        }
    }
    let height = db.stats().trees.iter().map(|t| t.height).max().unwrap();
    assert!(height >= 2, "the roots are internal: height {height}");
    db.check().unwrap();
    drop(db);
    let db = Db::open(&path, opts()).unwrap();
    verify_all(&db, &model);
    db.check().unwrap();
}

/// Scans that start inside large basements and stop after 1 to 1,000
/// entries: a forward step resolves at most a growing number of a
/// basement's entries (64, then twice as many), so scans cross those cuts
/// with buffered puts, removes and upserts above the basements, both ways
/// and with every bound kind, against the model.
#[test]
fn scans_cut_short_inside_a_basement_match_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let o = Options::default()
        .cache_bytes(8 << 20)
        .durability(Durability::Buffered)
        .direct_io(false)
        .merge_operator(Arc::new(Append));
    let db = Db::create(&path, o).unwrap();
    let kind = BEpsilonOptions::default()
        .node_bytes(256 << 10)
        .basement_bytes(32 << 10)
        .value_extent_bytes(Some(300));
    let t = db.tree_with(&name(0), TreeKind::BEpsilon(kind)).unwrap();
    let mut model = Model::new();
    let key = |i: u64| format!("k{:07}", i.wrapping_mul(2_654_435_761) % 1_000_000).into_bytes();
    for round in 0..6u64 {
        let mut batch = Batch::new();
        for i in 0..4000u64 {
            let k = key(round * 4000 + i);
            let v = value(&k, [20, 120, 400][(i % 3) as usize], i as usize);
            batch.insert(name(0), &k, &v);
            apply_model(&mut model, 0, &k, Some(Ok(v)));
        }
        db.apply(batch).unwrap();
    }
    db.checkpoint().unwrap();
    // Buffered messages above the basements: removes, puts and upserts.
    let mut batch = Batch::new();
    for i in (0..24_000u64).step_by(7) {
        let k = key(i);
        match i % 3 {
            0 => {
                batch.remove(name(0), &k);
                apply_model(&mut model, 0, &k, None);
            }
            1 => {
                batch.upsert(name(0), &k, [i as u8]);
                apply_model(&mut model, 0, &k, Some(Err(i as u8)));
            }
            _ => {
                let v = value(&k, 33, 5);
                batch.insert(name(0), &k, &v);
                apply_model(&mut model, 0, &k, Some(Ok(v)));
            }
        }
    }
    db.apply(batch).unwrap();
    let model = &model[&name(0)];
    let starts: Vec<Vec<u8>> = (0..40u64).map(|i| key(i * 577 + 3)).collect();
    for (n, start) in starts.iter().enumerate() {
        let len = [1usize, 63, 64, 65, 200, 1000][n % 6];
        scan_matches(&t, model, start, len);
        let lo = Bound::Excluded(start.clone());
        let hi = Bound::Included(key(n as u64 * 13 + 1).max(start.clone()));
        let got: Vec<_> = t
            .range::<Vec<u8>, _>((lo.clone(), hi.clone()))
            .rev()
            .take(len)
            .map(Result::unwrap)
            .collect();
        let want: Vec<_> = model
            .range((lo, hi))
            .rev()
            .take(len)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(got, want, "backward to {start:?}, {len} entries");
    }
    let all: Vec<_> = t.iter().map(Result::unwrap).collect();
    assert_eq!(all.len(), model.len());
    assert!(all
        .iter()
        .zip(model)
        .all(|(a, b)| a.0 == *b.0 && a.1 == *b.1));
}

/// Writes `rounds` random puts (small values and values in extents or
/// overflow pages), removes and, on a B-epsilon tree, upserts to tree `t`
/// and the model.
fn random_writes(
    db: &Db,
    t: &str,
    upserts: bool,
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
    rng: &mut rand::rngs::SmallRng,
    rounds: usize,
) {
    use rand::Rng;
    let tree = db.tree(t).unwrap();
    for salt in 0..rounds {
        let k = format!("k{:05}", rng.gen_range(0..6000)).into_bytes();
        match rng.gen_range(0..10) {
            0 => {
                tree.remove(&k).unwrap();
                model.remove(&k);
            }
            1 if upserts => {
                let op = [b'a' + (salt % 26) as u8];
                tree.upsert(&k, op).unwrap();
                let mut v = model.get(&k).cloned().unwrap_or_else(|| b"^".to_vec());
                v.extend_from_slice(&op);
                model.insert(k, v);
            }
            _ => {
                let len = match rng.gen_range(0..4) {
                    0 => rng.gen_range(40..400),
                    _ => rng.gen_range(0..40),
                };
                let v = value(&k, len, salt);
                tree.insert(&k, &v).unwrap();
                model.insert(k, v);
            }
        }
    }
}

/// `get_many` of random batches (duplicates, missing keys, empty) against
/// the model and against `get`, in the caller's order.
fn check_batches(
    tree: &pagewise::Tree,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    rng: &mut rand::rngs::SmallRng,
    seed: u64,
) {
    use rand::Rng;
    for round in 0..40 {
        let n = match round {
            0 => 0,
            1 => 700, // more than one chunk of the batch
            _ => rng.gen_range(1..80),
        };
        let keys: Vec<Vec<u8>> = (0..n)
            .map(|_| format!("k{:05}", rng.gen_range(0..6000)).into_bytes())
            .collect();
        let got = tree.get_many(&keys).unwrap();
        assert_eq!(got.len(), keys.len(), "seed {seed}");
        for (k, v) in keys.iter().zip(&got) {
            assert_eq!(v.as_ref(), model.get(k), "seed {seed} key {k:?}");
            assert_eq!(*v, tree.get(k).unwrap(), "seed {seed} key {k:?}");
        }
    }
}

/// `Tree::get_many` on both kinds answers as the model and as `get` does:
/// values in value extents and overflow pages, B-epsilon messages buffered
/// in clean nodes (read back after a reopen with a tiny cache, so the batch
/// misses) and in the dirty root, and in a snapshot taken before more
/// writes.
#[test]
fn get_many_matches_get_and_the_model() {
    use rand::SeedableRng;
    let seed: u64 = rand::random();
    eprintln!("get_many seed {seed}");
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::create(&path, opts()).unwrap();
    db.tree_with("be", bepsilon(Compression::Lz4)).unwrap();
    db.tree_with("bt", TreeKind::BTree).unwrap();
    let mut models = [BTreeMap::new(), BTreeMap::new()];
    for (m, t) in models.iter_mut().zip(["be", "bt"]) {
        random_writes(&db, t, t == "be", m, &mut rng, 3000);
    }
    db.close().unwrap();
    let db = Db::open(&path, opts()).unwrap();
    for (m, t) in models.iter_mut().zip(["be", "bt"]) {
        random_writes(&db, t, t == "be", m, &mut rng, 300);
    }
    db.checkpoint().unwrap();
    drop(db);
    let db = Db::open(&path, opts()).unwrap();
    for (m, t) in models.iter_mut().zip(["be", "bt"]) {
        check_batches(&db.tree(t).unwrap(), m, &mut rng, seed);
        random_writes(&db, t, t == "be", m, &mut rng, 200); // buffered, dirty
        check_batches(&db.tree(t).unwrap(), m, &mut rng, seed);
        let snap = db.snapshot().unwrap();
        let before = m.clone();
        random_writes(&db, t, t == "be", m, &mut rng, 200);
        let st = snap.tree(t).unwrap();
        let keys: Vec<Vec<u8>> = (0..300)
            .map(|_| format!("k{:05}", rand::Rng::gen_range(&mut rng, 0..6000)).into_bytes())
            .collect();
        let got = st.get_many(&keys).unwrap();
        for (k, v) in keys.iter().zip(&got) {
            assert_eq!(v.as_ref(), before.get(k), "seed {seed} snapshot key {k:?}");
        }
        check_batches(&db.tree(t).unwrap(), m, &mut rng, seed);
    }
}

/// Basements of about two hundred small entries under buffers holding
/// overwrites, removes and new keys: a cursor's first forward steps are
/// cut short inside a basement (16, then 32, 64 entries) and the next step
/// goes on from the merge it held (`iter.rs`, `Held`).
fn held_merge_tree(path: &std::path::Path, o: Options) -> (Db, BTreeMap<Vec<u8>, Vec<u8>>) {
    let kind = TreeKind::BEpsilon(
        BEpsilonOptions::default()
            .node_bytes(16 * 1024)
            .basement_bytes(4096)
            .fanout(8),
    );
    let db = Db::create(path, o.cache_bytes(8 << 20)).unwrap();
    let t = db.tree_with("t", kind).unwrap();
    let mut model = BTreeMap::new();
    let key = |i: u32| format!("k{i:06}").into_bytes();
    for i in (0..6000u32).step_by(2) {
        t.insert(key(i), i.to_le_bytes()).unwrap();
        model.insert(key(i), i.to_le_bytes().to_vec());
    }
    db.checkpoint().unwrap();
    // After the checkpoint: messages in the buffers above the basements.
    for i in 0..6000u32 {
        let v = (i * 3).to_le_bytes();
        match i % 10 {
            1 | 4 | 5 => {
                t.insert(key(i), v).unwrap();
                model.insert(key(i), v.to_vec());
            }
            6 => {
                t.remove(key(i)).unwrap();
                model.remove(&key(i));
            }
            _ => {}
        }
    }
    (db, model)
}

fn scan_counts(db: &Db) -> (u64, u64) {
    let s = db.stats();
    (s.bepsilon_scan_steps, s.bepsilon_scan_resumes)
}

/// The scans' starting keys: 44 spread over the keys.
fn scan_starts() -> impl Iterator<Item = (usize, u32)> {
    (0..6000u32).step_by(137).enumerate()
}

/// Entries lent from both ends in any order (`next_ref`, `next_back_ref`):
/// every entry of the range exactly once, the front's ascending and the
/// back's descending, as the model has them, and nothing from either end
/// after the ends meet. Over a B-epsilon tree's basements with messages
/// buffered above them (its cursor writes its bounds only when it reads
/// them), and a B+tree holding the same keys, every 50th value an overflow
/// extent.
#[test]
fn entries_lent_from_both_ends_in_any_order_match_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let (db, model) = held_merge_tree(&dir.path().join("db"), opts());
    let mut bt_model = model.clone();
    let bt = db.tree("bt").unwrap();
    for (i, (k, v)) in bt_model.iter_mut().enumerate() {
        if i % 50 == 0 {
            *v = vec![i as u8; 5000];
        }
        bt.insert(k, &v[..]).unwrap();
    }
    lent_from_both_ends(&db.tree("t").unwrap(), &model);
    lent_from_both_ends(&bt, &bt_model);
}

fn lent_from_both_ends(t: &pagewise::Tree, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let config = ProptestConfig {
        cases: 64,
        ..ProptestConfig::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let cases = (
        0u32..6000,
        0u32..1500,
        0u8..3,
        0u8..3,
        prop::collection::vec(any::<bool>(), 0..400),
    );
    runner
        .run(&cases, |(start, len, lk, hk, turns)| {
            let a = format!("k{start:06}").into_bytes();
            let b = format!("k{:06}", start + len).into_bytes();
            let (lo, hi) = (bound(&a, lk), bound(&b, hk));
            let inside = |k: &Vec<u8>| (lo.as_ref(), hi.as_ref()).contains(k);
            let want: Vec<_> = model
                .iter()
                .filter(|(k, _)| inside(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let mut it = t.range((lo.clone(), hi.clone()));
            let (mut front, mut back) = (Vec::new(), Vec::new());
            let mut turns = turns.into_iter().chain(std::iter::repeat(true));
            for _ in 0..want.len() + 2 {
                let forward = turns.next().unwrap();
                let got = if forward {
                    it.next_ref()
                } else {
                    it.next_back_ref()
                };
                let Some(got) = got else { break };
                let (k, v) = got.unwrap();
                let e = (k.to_vec(), v.to_vec());
                if forward {
                    front.push(e);
                } else {
                    back.push(e);
                }
            }
            prop_assert!(it.next_ref().is_none() && it.next_back_ref().is_none());
            back.reverse();
            front.extend(back);
            prop_assert_eq!(front, want);
            Ok(())
        })
        .unwrap();
}

#[test]
fn forward_steps_go_on_from_the_merge_they_hold() {
    let dir = tempfile::tempdir().unwrap();
    let (db, model) = held_merge_tree(&dir.path().join("db"), opts());
    let t = db.tree("t").unwrap();
    let got: Vec<_> = t.iter().map(Result::unwrap).collect();
    assert_eq!(got, model.clone().into_iter().collect::<Vec<_>>());
    // Short scans from every kind of bound, forward, backward and both
    // ends at once, against the model.
    let (steps0, resumes0) = scan_counts(&db);
    for (n, start) in scan_starts() {
        let a = format!("k{start:06}").into_bytes();
        let b = format!("k{:06}", start + 900).into_bytes();
        let (lo, hi) = (bound(&a, n as u8), bound(&b, (n / 3) as u8));
        let want: Vec<_> = model
            .range((lo.clone(), hi.clone()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let fwd: Vec<_> = t
            .range((lo.clone(), hi.clone()))
            .take(150)
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            fwd,
            want[..want.len().min(150)],
            "forward from {start}, kinds {n}"
        );
        let mut it = t.range((lo.clone(), hi.clone()));
        let (mut front, mut back) = (Vec::new(), Vec::new());
        for i in 0..2 * want.len() + 2 {
            // Forward steps borrow their entry (`next_ref`), backward ones own it.
            let got = if i % 5 == 4 {
                it.next_back()
            } else {
                it.next_ref()
                    .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
            };
            let Some(got) = got else { break };
            if i % 5 == 4 {
                back.push(got.unwrap());
            } else {
                front.push(got.unwrap());
            }
        }
        back.reverse();
        front.extend(back);
        assert_eq!(front, want, "both ends from {start}, kinds {n}");
    }
    let (steps, resumes) = scan_counts(&db);
    let (steps, resumes) = (steps - steps0, resumes - resumes0);
    eprintln!("44 short scans twice: {steps} steps, {resumes} of them resumed");
    // A 150-entry scan steps 16, 32, 64, 128 entries at most, each step
    // within one basement of about 200 entries (4 KiB of 19-byte
    // entries): most scans cut a step short and go on from it.
    assert!(resumes >= 2 * 44, "{resumes} of {steps} steps resumed");
}

#[test]
fn a_held_merge_returns_the_iterators_snapshot_across_writes_and_checkpoints() {
    // Pinned snapshots (no age bound) and snapshots whose page ids may be
    // reused once their epoch ends (a held merge then descends again).
    for age in [None, Some(std::time::Duration::from_secs(600))] {
        let dir = tempfile::tempdir().unwrap();
        let (db, mut model) = held_merge_tree(&dir.path().join("db"), opts().snapshot_max_age(age));
        let t = db.tree("t").unwrap();
        let (_, resumes0) = scan_counts(&db);
        for (s, start) in scan_starts() {
            let lo = format!("k{start:06}").into_bytes();
            let want: Vec<_> = model
                .range(lo.clone()..)
                .take(200)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let mut it = t.range(lo..);
            let mut got = Vec::new();
            for n in 0..200u32 {
                let Some(kv) = it.next() else { break };
                got.push(kv.unwrap());
                // Between steps: overwrite keys just ahead, remove some,
                // add new ones, and now and then end the epoch.
                if n % 7 == 0 {
                    let i = start + 2 * n + 20;
                    let (k, gone, new) = (
                        format!("k{i:06}").into_bytes(),
                        format!("k{:06}", i + 4).into_bytes(),
                        format!("k{:06}x", i + 1).into_bytes(),
                    );
                    t.insert(&k, b"overwritten").unwrap();
                    t.remove(&gone).unwrap();
                    t.insert(&new, b"new").unwrap();
                    model.insert(k, b"overwritten".to_vec());
                    model.remove(&gone);
                    model.insert(new, b"new".to_vec());
                }
                if n % 60 == 30 && s % 2 == 0 {
                    db.checkpoint().unwrap();
                }
            }
            assert_eq!(got, want, "scan from {start}, max age {age:?}");
        }
        let (_, resumes) = scan_counts(&db);
        eprintln!("max age {age:?}: {} steps resumed", resumes - resumes0);
        assert!(
            resumes > resumes0 + 20,
            "steps resumed: {}",
            resumes - resumes0
        );
        assert!(db.check().unwrap().is_ok());
    }
}

/// A scan bounded above takes no step past its bound: after its last
/// entry it does not go on basement by basement to the tree's end.
#[test]
fn a_bounded_scan_stops_at_its_upper_bound() {
    let dir = tempfile::tempdir().unwrap();
    let (db, model) = held_merge_tree(&dir.path().join("db"), opts());
    let t = db.tree("t").unwrap();
    for (lo, hi) in [("k000100", "k000140"), ("k003000", "k003001")] {
        for rev in [false, true] {
            let (steps0, _) = scan_counts(&db);
            let it = t.range(lo.as_bytes()..hi.as_bytes());
            let got: Vec<_> = match rev {
                false => it.map(Result::unwrap).collect(),
                true => it.rev().map(Result::unwrap).collect(),
            };
            let mut want: Vec<_> = model
                .range(lo.as_bytes().to_vec()..hi.as_bytes().to_vec())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if rev {
                want.reverse();
            }
            assert_eq!(got, want, "{lo}..{hi} rev {rev}");
            let steps = scan_counts(&db).0 - steps0;
            // One or two basements' entries (the tree has about 28).
            assert!(steps <= 3, "{lo}..{hi} rev {rev}: {steps} steps");
        }
    }
}
