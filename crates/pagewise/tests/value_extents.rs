//! B-epsilon value extents (docs/design.md, "B-epsilon value extents"):
//! values of every size across the threshold read back through gets,
//! iterators, snapshots and merges; the space of replaced and removed
//! values comes back (the file settles near the live data, `check` finds
//! no leaked or doubly owned page); a snapshot keeps the values it reads.

mod common;
use common::{check_clean, Append};
use pagewise::{BEpsilonOptions, Batch, Db, Durability, Options, Tree, TreeKind};
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
        4049,
        4050, // the largest packed value under an 8-byte key: 6 + 8 + 4050 = 4064
        4051,
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
        // Values of at least 512 bytes (the default) leave the tree: the
        // value pages read are at least the 7 of 2,032 bytes and more.
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

/// Small nodes and a low threshold: values from 200 bytes are packed.
fn packed_kind() -> TreeKind {
    TreeKind::BEpsilon(
        BEpsilonOptions::default()
            .node_bytes(16 << 10)
            .basement_bytes(2 << 10)
            .fanout(4)
            .value_extent_bytes(Some(200)),
    )
}

/// Puts `(key, value)` of `items` in batches of `per` keys.
fn put_batches(db: &Db, t: &Tree, items: &[(u64, Vec<u8>)], per: usize) {
    for chunk in items.chunks(per) {
        let mut b = Batch::new();
        for (k, v) in chunk {
            b.insert(t, key(*k), v);
        }
        db.apply(b).unwrap();
    }
}

#[test]
fn packed_values_across_sizes_updates_and_removes() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("db");
    let sizes = [
        0usize,
        63,
        64,
        199,
        200,
        1000,
        4049,
        4050,
        4051,
        9000,
        2 << 20,
    ];
    let mut model = BTreeMap::new();
    {
        let db = Db::create(&p, opts()).unwrap();
        let t = db.tree_with("t", packed_kind()).unwrap();
        for round in 0..3u64 {
            let items: Vec<(u64, Vec<u8>)> = (0..400u64)
                .filter(|k| round == 0 || k % (round + 1) == 0)
                .map(|k| {
                    (
                        k,
                        value(k, round, sizes[(k + round) as usize % sizes.len()]),
                    )
                })
                .collect();
            put_batches(&db, &t, &items, 37);
            model.extend(items);
            for k in (round..400).step_by(7) {
                t.remove(key(k)).unwrap();
                model.remove(&k);
            }
            verify(&t, &model);
            db.checkpoint().unwrap();
            check_clean(&db);
        }
    }
    let db = Db::open(&p, opts()).unwrap();
    let t = db.tree("t").unwrap();
    verify(&t, &model);
    check_clean(&db);
}

#[test]
fn space_of_packed_values_comes_back() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::create(d.path().join("db"), opts()).unwrap();
    let t = db.tree_with("t", packed_kind()).unwrap();
    let n = 6000u64;
    let mut model = BTreeMap::new();
    for round in 0..2u64 {
        let items: Vec<(u64, Vec<u8>)> = (0..n)
            .map(|i| (i * 7919 % n, value(i * 7919 % n, round, 1000)))
            .collect();
        put_batches(&db, &t, &items, 100);
        model.extend(items);
        db.checkpoint().unwrap();
    }
    let mut b = Batch::new();
    for i in (0..n).step_by(2) {
        b.remove(&t, key(i));
        model.remove(&i);
    }
    db.apply(b).unwrap();
    // The removes and the second round's references reach the leaves; the
    // checkpoints collect the runs they left sparse.
    db.drain().unwrap();
    for _ in 0..3 {
        db.checkpoint().unwrap();
    }
    verify(&t, &model);
    let live: u64 = model.values().map(|v| v.len() as u64 + 8).sum();
    let ratio = space_over_live(&db, live);
    check_clean(&db);
    assert!(ratio < 1.5, "file holds {ratio:.2}x the live data");
}

/// A run whose first page's values all died while a later page's live on:
/// every packed reference names its run by that first page, so the page
/// must stay allocated until the run's last page is freed. Were it freed,
/// a later run could start there and the two runs' references (and their
/// counts) would mix: `check` finds the lost count.
#[test]
fn a_run_keeps_its_first_page_while_any_page_lives() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("db");
    let db = Db::create(&p, opts()).unwrap();
    let t = db.tree_with("t", packed_kind()).unwrap();
    // Entry of 2 + 4 + 8 + len bytes: the first value fills page 0's
    // payload exactly, the second lies on page 1 alone.
    let payload = PS - 32;
    let first = value(1, 0, payload - 14);
    let second = value(2, 0, 1000);
    let mut model = BTreeMap::new();
    put_batches(&db, &t, &[(1, first.clone()), (2, second.clone())], 2);
    model.insert(2u64, second);
    t.remove(key(1)).unwrap(); // page 0 of the run dies, page 1 lives
    db.drain().unwrap();
    db.checkpoint().unwrap(); // pages freed before it may be reused now
    check_clean(&db);
    // Single-value groups take fresh runs, each one page, many of them
    // where freed pages were.
    for k in 100..164u64 {
        let v = value(k, 1, 900);
        put_batches(&db, &t, &[(k, v.clone())], 1);
        model.insert(k, v);
        if k % 8 == 0 {
            db.checkpoint().unwrap();
            check_clean(&db);
        }
    }
    verify(&t, &model);
    check_clean(&db);
    drop((t, db));
    let db = Db::open(&p, opts()).unwrap();
    let t = db.tree("t").unwrap();
    verify(&t, &model);
    check_clean(&db);
}
