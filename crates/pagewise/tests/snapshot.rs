//! Snapshots against a model: random writes on both tree kinds (B+trees
//! with and without delta flushes, B-epsilon trees with upserts), snapshots
//! taken and dropped at random moments across checkpoints, every read
//! through a live snapshot checked against the model's state at its
//! moment; at the end nothing is held and `check` accounts for every page.

mod common;

use common::Append;
use pagewise::{
    BEpsilonOptions, Compression, Db, DeltaFlush, Durability, Options, Snapshot, TreeKind,
};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;

type Model = Vec<BTreeMap<Vec<u8>, Vec<u8>>>;
const TREES: usize = 3;

#[derive(Debug, Clone)]
enum Step {
    Put(usize, Vec<u8>, usize),
    Del(usize, Vec<u8>),
    Upsert(Vec<u8>, u8),
    Take,
    Drop(usize),
    Get(usize, usize, Vec<u8>),
    Scan(usize, usize, bool),
    Checkpoint,
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), 0u8..=255], 1..8)
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        12 => (0..TREES, key(), 0usize..400).prop_map(|(t, k, n)| Step::Put(t, k, n)),
        4 => (0..TREES, key()).prop_map(|(t, k)| Step::Del(t, k)),
        3 => (key(), any::<u8>()).prop_map(|(k, b)| Step::Upsert(k, b)),
        2 => Just(Step::Take),
        1 => (0usize..4).prop_map(Step::Drop),
        3 => (0usize..4, 0..TREES, key()).prop_map(|(s, t, k)| Step::Get(s, t, k)),
        1 => (0usize..4, 0..TREES, any::<bool>()).prop_map(|(s, t, r)| Step::Scan(s, t, r)),
        1 => Just(Step::Checkpoint),
    ]
}

fn name(t: usize) -> String {
    format!("t{t}")
}

fn value(k: &[u8], n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + k.len() + n) as u8).collect()
}

/// Trees 0 and 2: B+trees; tree 1: a B-epsilon tree of small nodes (many
/// levels, flushes and frees at a few hundred keys).
fn open(dir: &std::path::Path, delta: bool) -> Db {
    let mut opts = Options::default()
        .page_size(1024)
        .cache_bytes(256 << 10)
        .durability(Durability::Buffered)
        .direct_io(false)
        .wal_limit(64 << 10)
        .merge_operator(Arc::new(Append));
    if delta {
        opts = opts.delta_flush(Some(DeltaFlush {
            threshold_bytes: 200,
            block_bytes: 512,
        }));
    }
    let db = Db::create(dir.join("db"), opts).unwrap();
    let beps = BEpsilonOptions {
        node_bytes: 8 << 10,
        leaf_bytes: None,
        basement_bytes: 1 << 10,
        fanout: 4,
        compression: Compression::Lz4,
        level: 0,
        value_extent_bytes: Some(128),
    };
    db.tree_with(&name(1), TreeKind::BEpsilon(beps)).unwrap();
    db
}

fn check_scan(s: &Snapshot, m: &Model, t: usize, rev: bool) {
    let tree = s.tree(&name(t)).unwrap();
    let got: Vec<(Vec<u8>, Vec<u8>)> = if rev {
        tree.iter().rev().map(Result::unwrap).collect()
    } else {
        tree.iter().map(Result::unwrap).collect()
    };
    let mut want: Vec<(Vec<u8>, Vec<u8>)> =
        m[t].iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    if rev {
        want.reverse();
    }
    assert_eq!(got.len(), want.len(), "tree {t}: entries in the snapshot");
    assert!(
        got == want,
        "tree {t}: a snapshot scan differs from its moment"
    );
    assert_eq!(tree.len(), want.len() as u64);
}

fn run(steps: Vec<Step>, delta: bool) {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), delta);
    let mut model: Model = vec![BTreeMap::new(); TREES];
    let mut snaps: Vec<(Snapshot, Model)> = Vec::new();
    for st in steps {
        match st {
            Step::Put(t, k, n) => {
                let v = value(&k, n);
                db.tree(&name(t)).unwrap().insert(&k, &v).unwrap();
                model[t].insert(k, v);
            }
            Step::Del(t, k) => {
                db.tree(&name(t)).unwrap().remove(&k).unwrap();
                model[t].remove(&k);
            }
            Step::Upsert(k, b) => {
                db.tree(&name(1)).unwrap().upsert(&k, [b]).unwrap();
                let v = model[1].entry(k).or_insert_with(|| b"^".to_vec());
                v.push(b);
            }
            Step::Take if snaps.len() < 4 => snaps.push((db.snapshot().unwrap(), model.clone())),
            Step::Take => {}
            Step::Drop(i) if i < snaps.len() => drop(snaps.remove(i)),
            Step::Drop(_) => {}
            Step::Get(i, t, k) => {
                if let Some((s, m)) = snaps.get(i) {
                    let got = s.tree(&name(t)).unwrap().get(&k).unwrap();
                    assert_eq!(
                        got.as_ref(),
                        m[t].get(&k),
                        "tree {t} key {k:?} in snapshot {i}"
                    );
                }
            }
            Step::Scan(i, t, rev) => {
                if let Some((s, m)) = snaps.get(i) {
                    check_scan(s, m, t, rev);
                }
            }
            Step::Checkpoint => db.checkpoint().unwrap(),
        }
    }
    for (s, m) in &snaps {
        for t in 0..TREES {
            check_scan(s, m, t, false);
        }
    }
    // Snapshots taken with no write between them share one frozen view.
    let live = db.stats().snapshots;
    assert!(
        live <= snaps.len() as u64 && (live > 0) != snaps.is_empty(),
        "live snapshots {live}"
    );
    assert!(db.check().unwrap().is_ok(), "check with snapshots live");
    drop(snaps);
    db.checkpoint().unwrap();
    db.checkpoint().unwrap();
    let st = db.stats();
    assert_eq!(
        (st.snapshots, st.snapshot_held_pages),
        (0, 0),
        "nothing held"
    );
    let report = db.check().unwrap();
    assert!(report.is_ok(), "check: {report:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn snapshots_see_their_moment(steps in prop::collection::vec(step(), 1..600), delta in any::<bool>()) {
        run(steps, delta);
    }
}

/// A snapshot held across a fill that frees and rewrites most pages: it
/// reads its moment after many checkpoints, the freed pages it pins are
/// reused once it ends, and the file then stops growing.
#[test]
fn a_snapshot_held_across_checkpoints_pins_then_frees() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), false);
    let t = db.tree("t0").unwrap();
    for i in 0..3000u32 {
        t.insert(i.to_be_bytes(), value(&i.to_be_bytes(), 40))
            .unwrap();
    }
    let snap = db.snapshot().unwrap();
    for round in 1..4usize {
        for i in 0..3000u32 {
            t.insert(i.to_be_bytes(), value(&i.to_be_bytes(), 40 + round))
                .unwrap();
        }
    }
    let st = db.stats();
    assert!(st.checkpoints >= 3 && st.snapshot_held_pages > 0, "{st:?}");
    let old = snap.tree("t0").unwrap();
    for i in (0..3000u32).step_by(97) {
        assert_eq!(
            old.get(i.to_be_bytes()).unwrap(),
            Some(value(&i.to_be_bytes(), 40))
        );
    }
    assert_eq!(old.iter().count(), 3000);
    drop((old, snap));
    db.checkpoint().unwrap();
    let st = db.stats();
    assert_eq!(st.snapshot_held_pages, 0);
    let pages_before = st.file_pages;
    for round in 4..8usize {
        for i in 0..3000u32 {
            t.insert(i.to_be_bytes(), value(&i.to_be_bytes(), 40 + round))
                .unwrap();
        }
    }
    let grown = db.stats().file_pages - pages_before;
    assert!(
        grown * 10 < pages_before,
        "the file grew by {grown} pages from {pages_before}"
    );
    assert!(db.check().unwrap().is_ok());
}

/// A backup taken while another thread fills two trees of both kinds, one
/// batch per key across both: the copy opens, passes `check`, and holds
/// one committed state (keys 0..m in both trees for one m), key by key.
#[test]
fn backup_under_a_concurrent_fill_is_one_committed_state() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), false);
    let n = 20_000u32;
    let stop = std::sync::atomic::AtomicBool::new(false);
    let report = std::thread::scope(|s| {
        let filler = s.spawn(|| {
            for i in 0..n {
                let mut b = pagewise::Batch::new();
                let k = i.to_be_bytes();
                b.insert("t0", k, value(&k, 30));
                b.insert("t1", k, value(&k, 50));
                db.apply(b).unwrap();
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    return i;
                }
            }
            n
        });
        while db.tree("t0").unwrap().len() < 3000 {
            std::thread::yield_now();
        }
        let report = db.backup(dir.path().join("copy")).unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let filled = filler.join().unwrap();
        assert!(filled >= 3000);
        report
    });
    let copy = Db::open(dir.path().join("copy"), Options::default().direct_io(false)).unwrap();
    assert!(copy.check().unwrap().is_ok());
    let m = copy.tree("t0").unwrap().len();
    assert!(m >= 3000 && m <= n as u64, "{m} keys");
    assert_eq!(report.entries, 2 * m);
    assert_eq!(
        copy.tree_kind("t1"),
        db.tree_kind("t1"),
        "the same kind and options"
    );
    for t in ["t0", "t1"] {
        let len = if t == "t0" { 30 } else { 50 };
        let got: Vec<_> = copy.tree(t).unwrap().iter().map(Result::unwrap).collect();
        assert_eq!(got.len() as u64, m, "tree {t}");
        for (i, (k, v)) in got.into_iter().enumerate() {
            let want = (i as u32).to_be_bytes();
            assert_eq!((k.as_slice(), v), (&want[..], value(&want, len)));
        }
    }
}

/// `Options::snapshot_max_age`: past it a snapshot's reads fail with a
/// typed error, and the next checkpoint reuses what only it held.
#[test]
fn a_snapshot_past_its_max_age_fails_and_holds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .page_size(1024)
        .direct_io(false)
        .durability(Durability::Buffered)
        .snapshot_max_age(Some(std::time::Duration::from_millis(1500)));
    let db = Db::create(dir.path().join("db"), opts).unwrap();
    let t = db.tree("t").unwrap();
    for i in 0..2000u32 {
        t.insert(i.to_be_bytes(), [1u8; 40]).unwrap();
    }
    db.checkpoint().unwrap();
    let snap = db.snapshot().unwrap();
    let old = snap.tree("t").unwrap();
    assert_eq!(old.get(7u32.to_be_bytes()).unwrap(), Some(vec![1u8; 40]));
    for i in 0..2000u32 {
        t.insert(i.to_be_bytes(), [2u8; 40]).unwrap();
    }
    db.checkpoint().unwrap();
    assert!(db.stats().snapshot_held_pages > 0, "held while young");
    std::thread::sleep(std::time::Duration::from_millis(1600));
    let e = old.get(7u32.to_be_bytes()).unwrap_err();
    assert!(matches!(e, pagewise::Error::SnapshotTooOld { .. }), "{e}");
    assert!(old.iter().next().unwrap().is_err());
    t.insert(b"x", b"y").unwrap();
    db.checkpoint().unwrap();
    let st = db.stats();
    assert_eq!(
        (st.snapshots, st.snapshot_held_pages),
        (1, 0),
        "expired: alive but holding nothing"
    );
    assert!(db.check().unwrap().is_ok());
    assert!(Options::default()
        .snapshot_max_age(Some(std::time::Duration::ZERO))
        .validate()
        .is_err());
}
