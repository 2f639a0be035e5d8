//! The public API against hand-computed expectations.

use pagewise::{Batch, Db, Durability, Error, Options};
use std::collections::BTreeMap;
use std::ops::Bound;

fn opts(ps: usize) -> Options {
    Options::default()
        .page_size(ps)
        .cache_bytes(256 * 1024)
        .direct_io(false)
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

#[test]
fn put_get_remove_reopen() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("db");
    let db = Db::create(&p, opts(512)).unwrap();
    let t = db.tree("t").unwrap();
    for i in 0..2000 {
        t.insert(key(i), format!("v{i}")).unwrap();
    }
    for i in (0..2000).step_by(3) {
        t.remove(key(i)).unwrap();
    }
    assert_eq!(t.len(), 2000 - 667);
    assert_eq!(t.get(key(1)).unwrap().unwrap(), b"v1");
    assert_eq!(t.get(key(3)).unwrap(), None);
    assert!(t.contains(key(5)).unwrap());
    let s = db.stats();
    assert!(s.trees[0].height >= 3, "{:?}", s.trees);
    drop(t);
    db.close().unwrap();
    let db = Db::open(&p, opts(4096)).unwrap();
    assert_eq!(db.page_size(), 512, "page size comes from the file");
    let t = db.tree("t").unwrap();
    assert_eq!(t.len(), 1333);
    assert_eq!(t.get(key(1999)).unwrap().unwrap(), b"v1999");
    let r = db.check().unwrap();
    assert!(r.is_ok(), "{:?}", r.problems);
    assert_eq!(r.entries, 1333);
}

#[test]
fn ranges_of_every_bound_kind_both_directions() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::create(d.path().join("db"), opts(512)).unwrap();
    let t = db.tree("r").unwrap();
    let mut model = BTreeMap::new();
    for i in (0..600).map(|i| i * 2) {
        t.insert(key(i), key(i + 1)).unwrap();
        model.insert(key(i), key(i + 1));
    }
    let pts = [0u32, 1, 2, 3, 250, 251, 599, 1000, 1197, 1198, 1199, 5000];
    let mut bounds = vec![Bound::Unbounded];
    for &p in &pts {
        bounds.push(Bound::Included(key(p)));
        bounds.push(Bound::Excluded(key(p)));
    }
    for lo in &bounds {
        for hi in &bounds {
            let bad = match (lo, hi) {
                (
                    Bound::Included(a) | Bound::Excluded(a),
                    Bound::Included(b) | Bound::Excluded(b),
                ) => {
                    a > b
                        || (a == b && !matches!((lo, hi), (Bound::Included(_), Bound::Included(_))))
                }
                _ => false,
            };
            if bad {
                // BTreeMap panics on these; we return nothing.
                assert_eq!(t.range((lo.clone(), hi.clone())).count(), 0);
                continue;
            }
            let want: Vec<_> = model
                .range((lo.clone(), hi.clone()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let got: Vec<_> = t
                .range((lo.clone(), hi.clone()))
                .map(Result::unwrap)
                .collect();
            assert_eq!(got, want, "{lo:?}..{hi:?}");
            let rev: Vec<_> = t
                .range((lo.clone(), hi.clone()))
                .rev()
                .map(Result::unwrap)
                .collect();
            let mut w = want.clone();
            w.reverse();
            assert_eq!(rev, w, "rev {lo:?}..{hi:?}");
            // Alternate ends: every element exactly once.
            let mut it = t.range((lo.clone(), hi.clone()));
            let mut seen = Vec::new();
            let mut flip = false;
            loop {
                // Backward steps borrow their entry (`next_back_ref`), forward ones own it.
                let x = if flip {
                    it.next_back_ref()
                        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
                } else {
                    it.next()
                };
                flip = !flip;
                match x {
                    Some(kv) => seen.push(kv.unwrap()),
                    None => break,
                }
            }
            seen.sort();
            assert_eq!(seen, want, "mixed {lo:?}..{hi:?}");
        }
    }
    assert_eq!(t.first().unwrap().unwrap().0, key(0));
    assert_eq!(t.last().unwrap().unwrap().0, key(1198));
    let pre: Vec<_> = t.prefix(b"key0000011").map(|kv| kv.unwrap().0).collect();
    assert_eq!(pre, (110..120).step_by(2).map(key).collect::<Vec<_>>());
    assert_eq!(db.tree("missing").unwrap().first().unwrap(), None);
}

#[test]
fn large_values_use_overflow_and_space_is_reused() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("db");
    let db = Db::create(&p, opts(4096)).unwrap();
    let t = db.tree("blobs").unwrap();
    let big: Vec<u8> = (0..16 << 20)
        .map(|i: u32| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    t.insert(b"big", &big).unwrap();
    t.insert(b"mid", vec![7u8; 5000]).unwrap();
    assert_eq!(t.get(b"big").unwrap().unwrap(), big);
    drop(t);
    db.close().unwrap();
    let db = Db::open(&p, opts(4096)).unwrap();
    let t = db.tree("blobs").unwrap();
    assert_eq!(t.get(b"big").unwrap().unwrap(), big);
    assert_eq!(t.get(b"mid").unwrap().unwrap(), vec![7u8; 5000]);
    // Rewrite and delete repeatedly: after the first round (whose new extent
    // cannot reuse pages the durable checkpoint still references) the file
    // must not grow.
    let mut after_first = 0;
    for round in 0..6u8 {
        if round == 1 {
            after_first = db.stats().file_pages;
        }
        t.insert(b"big", vec![round; 4 << 20]).unwrap();
        db.checkpoint().unwrap();
        t.remove(b"big").unwrap();
        db.checkpoint().unwrap();
    }
    let s = db.stats();
    assert!(
        s.file_pages <= after_first + 16,
        "file grew from {after_first} to {} pages",
        s.file_pages
    );
    assert!(db.check().unwrap().is_ok());
}

#[test]
fn delete_and_reinsert_does_not_grow_the_file() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::create(d.path().join("db"), opts(512)).unwrap();
    let t = db.tree("t").unwrap();
    let mut sizes = Vec::new();
    for round in 0..8 {
        let mut b = Batch::new();
        for i in 0..3000 {
            b.insert(&t, key(i), vec![round as u8; 40]);
        }
        db.apply(b).unwrap();
        db.checkpoint().unwrap();
        let mut b = Batch::new();
        for i in 0..3000 {
            b.remove(&t, key(i));
        }
        db.apply(b).unwrap();
        db.checkpoint().unwrap();
        sizes.push(db.stats().file_pages);
    }
    assert!(t.is_empty());
    assert!(sizes[7] <= sizes[1] + 8, "file keeps growing: {sizes:?}");
    let r = db.check().unwrap();
    assert!(r.is_ok(), "{:?}", r.problems);
}

#[test]
fn batch_is_atomic_across_trees_and_survives_reopen() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("db");
    let db = Db::create(&p, opts(1024)).unwrap();
    let mut b = Batch::new();
    b.insert("a", b"x", b"1");
    b.insert("b", b"y", b"2");
    b.remove("a", b"nothing");
    db.apply(b).unwrap();
    // Crash-like: no checkpoint; the log must replay.
    std::mem::forget(db);
    // The lock is held by the forgotten handle within this process, so copy.
    let p2 = d.path().join("copy");
    std::fs::copy(&p, &p2).unwrap();
    std::fs::copy(pagewise::wal_path(&p), pagewise::wal_path(&p2)).unwrap();
    let db = Db::open(&p2, opts(1024)).unwrap();
    assert_eq!(db.tree("a").unwrap().get(b"x").unwrap().unwrap(), b"1");
    assert_eq!(db.tree("b").unwrap().get(b"y").unwrap().unwrap(), b"2");
    assert_eq!(db.stats().replayed_records, 1);
    let mut names = db.tree_names();
    names.sort();
    assert_eq!(names, vec!["a", "b"]);
}

#[test]
fn second_open_is_refused_with_a_lock_error() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("db");
    let db = Db::create(&p, opts(4096)).unwrap();
    match Db::open(&p, opts(4096)) {
        Err(Error::Locked { .. }) => {}
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("second open succeeded"),
    }
    drop(db);
    Db::open(&p, opts(4096)).unwrap();
}

#[test]
fn limits_and_bad_options_are_typed_errors() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::create(d.path().join("db"), opts(512)).unwrap();
    let t = db.tree("t").unwrap();
    assert_eq!(db.max_key_len(), 98);
    t.insert(vec![1u8; 98], b"ok").unwrap();
    match t.insert(vec![1u8; 99], b"no") {
        Err(Error::KeyTooLarge {
            len: 99,
            max: 98,
            page_size: 512,
        }) => {}
        r => panic!("{r:?}"),
    }
    assert!(matches!(db.tree(""), Err(Error::TreeName { .. })));
    for bad in [0, 100, 256, 1 << 17] {
        assert!(matches!(
            Db::create(d.path().join(format!("x{bad}")), opts(bad)),
            Err(Error::Options(_))
        ));
    }
    assert!(matches!(
        Db::create(d.path().join("db"), opts(512)),
        Err(Error::AlreadyExists { .. })
    ));
    assert!(matches!(
        Db::open(d.path().join("nope"), opts(512)),
        Err(Error::NotFound { .. })
    ));
}

#[test]
fn buffered_mode_sync_and_stats_categories() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::create(
        d.path().join("db"),
        opts(4096).durability(Durability::Buffered),
    )
    .unwrap();
    let t = db.tree("t").unwrap();
    let before = db.stats();
    for i in 0..100 {
        t.insert(key(i), b"v").unwrap();
    }
    // Nothing reached the log file yet in buffered mode.
    assert_eq!(db.stats().wal.write_bytes, before.wal.write_bytes);
    db.sync().unwrap();
    let s = db.stats();
    assert!(s.wal.write_bytes > before.wal.write_bytes);
    assert_eq!(s.wal.syncs, before.wal.syncs + 1);
    db.checkpoint().unwrap();
    let s2 = db.stats();
    assert!(s2.pages.write_bytes > s.pages.write_bytes);
    assert!(s2.meta.write_bytes >= s.meta.write_bytes + 4096);
    assert_eq!(s2.trees[0].entries, 100);
    assert!(s2.trees[0].avg_leaf_fill > 0.0 && s2.trees[0].avg_leaf_fill <= 1.0);
}

#[test]
fn a_stale_log_from_another_database_is_never_replayed() {
    use pagewise_io::{Fs, SimFs};
    use std::sync::Arc;
    let sim = SimFs::new();
    let o = || opts(1024).fs(Arc::new(sim.clone()));
    let p = std::path::Path::new("/db");
    let db = Db::create(p, o()).unwrap();
    // Same generation and LSN as the new database below will have.
    db.checkpoint().unwrap();
    db.tree("t").unwrap().insert(b"old", b"data").unwrap();
    // Keep the log as it is (no checkpoint), then throw the database away.
    let stale = sim.contents(&pagewise::wal_path(p)).unwrap();
    std::mem::forget(db);
    let sim2 = SimFs::new();
    let o2 = || opts(1024).fs(Arc::new(sim2.clone()));
    let db = Db::create(p, o2()).unwrap();
    drop(db);
    // Put the old log back, as if it had been left next to the new file.
    let w = sim2
        .open(
            &pagewise::wal_path(p),
            &pagewise_io::OpenOptions {
                write: true,
                ..Default::default()
            },
        )
        .unwrap();
    w.write_at(&stale, 0).unwrap();
    w.sync().unwrap();
    drop(w);
    let db = Db::open(p, o2()).unwrap();
    assert_eq!(db.tree("t").unwrap().get(b"old").unwrap(), None);
    assert_eq!(db.stats().replayed_records, 0);
}

/// A load in key order leaves leaves `append_fill` full (a fill factor), the
/// contents are the same whatever the fill, and an out-of-range fill is a
/// typed error naming the option.
#[test]
fn append_fill_sets_the_fill_of_a_load_in_key_order() {
    let d = tempfile::tempdir().unwrap();
    let mut fills = Vec::new();
    for (i, fill) in [1.0, 0.69, 0.5].into_iter().enumerate() {
        let p = d.path().join(format!("db{i}"));
        let db = Db::create(&p, opts(4096).append_fill(fill)).unwrap();
        let t = db.tree("t").unwrap();
        for chunk in 0..20 {
            let mut b = Batch::new();
            for i in chunk * 1000..(chunk + 1) * 1000 {
                b.insert("t", key(i), [i as u8; 100]);
            }
            db.apply(b).unwrap();
        }
        let st = db.stats().trees.into_iter().next().unwrap();
        // Every leaf but the last is filled to within one entry of the target.
        let entry_fraction = 130.0 / 4096.0;
        assert!(
            st.avg_leaf_fill <= fill + 0.001 && st.avg_leaf_fill >= fill - entry_fraction - 0.01,
            "fill {fill}: average leaf fill {}",
            st.avg_leaf_fill
        );
        fills.push((st.leaf_pages, st.height));
        for i in (0..20_000).step_by(97) {
            assert_eq!(t.get(key(i)).unwrap(), Some(vec![i as u8; 100]));
        }
        assert_eq!(t.len(), 20_000);
        db.check().unwrap();
        db.close().unwrap();
    }
    // Leaf pages grow as the fill falls: 1 / 0.69 and 1 / 0.5 times as many.
    let ratio = |k: usize| fills[k].0 as f64 / fills[0].0 as f64;
    assert!((ratio(1) - 1.0 / 0.69).abs() < 0.06, "{fills:?}");
    assert!((ratio(2) - 2.0).abs() < 0.08, "{fills:?}");
    let p = d.path().join("bad");
    match Db::create(&p, opts(4096).append_fill(0.3)) {
        Err(Error::Options(m)) => assert!(m.contains("append fill 0.3"), "{m}"),
        other => panic!("append fill 0.3 accepted: {:?}", other.map(|_| ())),
    }
}

/// The dirty budget (`Options::dirty_percent`) sets how often random inserts
/// into a tree larger than the cache checkpoint: four times the budget takes
/// at most a third of the checkpoints and writes fewer page bytes, with the
/// same contents; a percent outside 10..=90 is a typed error naming it.
#[test]
fn dirty_percent_sets_the_checkpoint_rate() {
    let d = tempfile::tempdir().unwrap();
    let mut seen = Vec::new();
    for percent in [20u8, 80] {
        let p = d.path().join(format!("db{percent}"));
        let o = opts(4096)
            .cache_bytes(1 << 20)
            .wal_limit(1 << 30)
            .dirty_percent(percent);
        let db = Db::create(&p, o).unwrap();
        let t = db.tree("t").unwrap();
        let mut model = BTreeMap::new();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..2000 {
            let mut b = Batch::new();
            for _ in 0..10 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let k = key((x % 1_000_000) as u32);
                b.insert("t", k.clone(), [x as u8; 100]);
                model.insert(k, vec![x as u8; 100]);
            }
            db.apply(b).unwrap();
        }
        let s = db.stats();
        seen.push((s.checkpoints, s.pages.write_bytes));
        let got: BTreeMap<Vec<u8>, Vec<u8>> =
            t.range::<&[u8], _>(..).map(|kv| kv.unwrap()).collect();
        assert_eq!(got, model, "dirty percent {percent}");
        db.check().unwrap();
    }
    println!("(checkpoints, page bytes written) at 20% and 80%: {seen:?}");
    let ((few_ckpt, few_bytes), (many_ckpt, many_bytes)) = (seen[1], seen[0]);
    assert!(few_ckpt >= 1 && few_ckpt * 3 <= many_ckpt, "{seen:?}");
    assert!(few_bytes < many_bytes, "{seen:?}");
    match Db::create(d.path().join("bad"), opts(4096).dirty_percent(95)) {
        Err(Error::Options(m)) => assert!(m.contains("dirty percent 95"), "{m}"),
        other => panic!("dirty percent 95 accepted: {:?}", other.map(|_| ())),
    }
}

/// A log limit below the floor is refused by create and open, with the
/// floor in the message; the floor itself is accepted.
#[test]
fn a_log_limit_below_the_floor_is_refused() {
    use pagewise::WAL_LIMIT_MIN_BYTES;
    let d = tempfile::tempdir().unwrap();
    let small = || opts(4096).wal_limit(WAL_LIMIT_MIN_BYTES - 1);
    match Db::create(d.path().join("small"), small()) {
        Err(Error::Options(m)) => assert!(m.contains("at least 64 KiB"), "{m}"),
        other => panic!("a tiny log limit accepted: {:?}", other.map(|_| ())),
    }
    let path = d.path().join("db");
    Db::create(&path, opts(4096).wal_limit(WAL_LIMIT_MIN_BYTES))
        .unwrap()
        .close()
        .unwrap();
    assert!(matches!(Db::open(&path, small()), Err(Error::Options(_))));
    assert!(small().validate().is_err() && opts(4096).validate().is_ok());
}
