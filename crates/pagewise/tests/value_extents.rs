//! B-epsilon value extents (docs/design.md, "B-epsilon value extents"):
//! values of every size across the threshold read back through gets,
//! iterators, snapshots and merges; the space of replaced and removed
//! values comes back (the file settles near the live data, `check` finds
//! no leaked or doubly owned page); a snapshot keeps the values it reads.

mod common;
use common::Append;
use pagewise::{BEpsilonOptions, Db, Durability, Options, Tree, TreeKind};
use std::collections::BTreeMap;
use std::sync::Arc;

const PS: usize = 4096;

fn opts() -> Options {
    Options::default()
        .page_size(PS)
        .cache_bytes(4 << 20)
        .durability(Durability::Buffered)
        .direct_io(false)
        .merge_operator(Arc::new(Append))
}

/// Default options but small nodes, so values cross several levels.
fn kind() -> TreeKind {
    TreeKind::BEpsilon(
        BEpsilonOptions::default()
            .node_bytes(64 << 10)
            .basement_bytes(4 << 10)
            .fanout(4),
    )
}

/// `len` bytes that name `key` and `salt` at every position.
fn value(key: u64, salt: u64, len: usize) -> Vec<u8> {
    let seed = key.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ salt;
    (0..len as u64)
        .map(|i| (seed.wrapping_add(i * 31) >> 3) as u8)
        .collect()
}

fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

fn verify(t: &Tree, model: &BTreeMap<u64, Vec<u8>>) {
    for (k, v) in model {
        assert_eq!(t.get(key(*k)).unwrap().as_deref(), Some(&v[..]), "key {k}");
    }
    let got: Vec<(Vec<u8>, Vec<u8>)> = t.iter().map(Result::unwrap).collect();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model
        .iter()
        .map(|(k, v)| (key(*k).to_vec(), v.clone()))
        .collect();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "iteration differs from the model");
    let back: Vec<Vec<u8>> = t.iter().rev().map(|r| r.unwrap().1).collect();
    assert!(back.iter().rev().eq(want.iter().map(|w| &w.1)), "reverse");
}

fn check_clean(db: &Db) -> u64 {
    let r = db.check().unwrap();
    assert!(r.problems.is_empty(), "check: {:?}", r.problems);
    r.overflow_pages_checked
}

#[test]
fn values_of_every_size_read_back_and_reopen() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("db");
    let sizes = [
        0usize,
        1,
        63,
        64,
        2031,
        2032,
        2033,
        4064,
        4065,
        9000,
        100_000,
        3 << 20,
    ];
    let mut model = BTreeMap::new();
    {
        let db = Db::create(&p, opts()).unwrap();
        let t = db.tree_with("t", kind()).unwrap();
        for (i, &len) in sizes.iter().enumerate() {
            let v = value(i as u64, 1, len);
            t.insert(key(i as u64), &v).unwrap();
            model.insert(i as u64, v);
        }
        verify(&t, &model);
        db.checkpoint().unwrap();
        verify(&t, &model);
        // Values of at least 2032 bytes are in extents: 7 of the 12.
        assert!(check_clean(&db) >= 7);
    }
    let db = Db::open(&p, opts()).unwrap();
    let t = db.tree("t").unwrap();
    verify(&t, &model);
    // A merge over a value in an extent reads it; the result stays inline.
    for i in [5u64, 10, 2] {
        t.upsert(key(i), b"+x").unwrap();
        model.get_mut(&i).unwrap().extend_from_slice(b"+x");
    }
    verify(&t, &model);
    db.checkpoint().unwrap();
    verify(&t, &model);
    check_clean(&db);
}

/// The bytes the file holds that are not free, over the live bytes.
fn space_over_live(db: &Db, live_bytes: u64) -> f64 {
    let s = db.stats();
    let used = (s.file_pages - s.free_pages - s.pending_free_pages) * PS as u64;
    used as f64 / live_bytes as f64
}

#[test]
fn space_of_replaced_and_removed_values_comes_back() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::create(d.path().join("db"), opts()).unwrap();
    let t = db.tree_with("t", kind()).unwrap();
    let (n, len) = (1500u64, 3000usize);
    let mut model = BTreeMap::new();
    for round in 0..2u64 {
        for i in 0..n {
            let k = (i * 7919) % n; // every key, in a scattered order
            let v = value(k, round, len);
            t.insert(key(k), &v).unwrap();
            model.insert(k, v);
        }
        db.checkpoint().unwrap();
    }
    for i in (0..n).step_by(2) {
        t.remove(key(i)).unwrap();
        model.remove(&i);
    }
    db.checkpoint().unwrap();
    db.checkpoint().unwrap();
    verify(&t, &model);
    let live: u64 = model.values().map(|v| v.len() as u64 + 8).sum();
    let ratio = space_over_live(&db, live);
    // One page per 3,000-byte value (1.37x) plus the tree's nodes.
    assert!(ratio < 1.5, "file holds {ratio:.2}x the live data");
    let pages = check_clean(&db);
    assert_eq!(pages, model.len() as u64, "one extent page per value");
}

#[test]
fn a_snapshot_keeps_the_values_it_reads() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::create(d.path().join("db"), opts()).unwrap();
    let t = db.tree_with("t", kind()).unwrap();
    let mut before = BTreeMap::new();
    for k in 0..300u64 {
        let v = value(k, 0, 2500 + k as usize);
        t.insert(key(k), &v).unwrap();
        before.insert(k, v);
    }
    db.checkpoint().unwrap();
    let snap = db.snapshot().unwrap();
    for k in 0..300u64 {
        if k % 3 == 0 {
            t.remove(key(k)).unwrap();
        } else {
            t.insert(key(k), value(k, 1, 3000)).unwrap();
        }
    }
    // Two checkpoints: the replaced extents would be reused by now.
    db.checkpoint().unwrap();
    for k in 1000..1300u64 {
        t.insert(key(k), value(k, 2, 2600)).unwrap();
    }
    db.checkpoint().unwrap();
    let st = snap.tree("t").unwrap();
    for (k, v) in &before {
        assert_eq!(st.get(key(*k)).unwrap().as_deref(), Some(&v[..]), "key {k}");
    }
    let got: Vec<Vec<u8>> = st.iter().map(|r| r.unwrap().1).collect();
    assert!(got.iter().eq(before.values()), "snapshot iteration");
    assert!(db.stats().snapshot_held_pages >= 200);
    drop((st, snap));
    db.checkpoint().unwrap();
    assert_eq!(db.stats().snapshot_held_pages, 0);
    check_clean(&db);
}
