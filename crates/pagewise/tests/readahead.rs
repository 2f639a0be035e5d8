//! Iterator read-ahead: long scans over a cache far smaller than the tree
//! return exactly the model's entries and use the pages read ahead; short
//! ranges read nothing ahead; failed read-ahead reads never yield wrong data.

use pagewise::{Db, Options, Stats};
use pagewise_io::{FaultInjector, FaultKinds, Faulty, Fs, SimFs};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(i: u32) -> Vec<u8> {
    format!("k{i:09}").into_bytes()
}

fn val(i: u32) -> Vec<u8> {
    let mut v = format!("v{i}-").into_bytes();
    v.resize(100, b'a' + (i % 26) as u8);
    v
}

/// 6000 entries of ~110 bytes: ~190 leaves of 4 KiB, written and checkpointed.
fn fill(db: &Db) -> Model {
    let t = db.tree("t").unwrap();
    let mut model = Model::new();
    let mut b = pagewise::Batch::new();
    for i in 0..6000u32 {
        // Spread the insert order so leaves end up in no particular file order.
        let k = (i * 2897) % 6000;
        b.insert("t", key(k), val(k));
        model.insert(key(k), val(k));
    }
    db.apply(b).unwrap();
    db.checkpoint().unwrap();
    assert_eq!(t.len(), 6000);
    model
}

/// A cache of 64 pages of 4 KiB: read-ahead batches of at most 4 siblings.
fn small_cache(o: Options) -> Options {
    o.page_size(4096).cache_bytes(64 * 4096)
}

fn ahead(s: &Stats) -> (u64, u64, u64) {
    (s.readahead_rounds, s.readahead_pages, s.readahead_hits)
}

fn collect(
    it: impl Iterator<Item = pagewise::Result<(Vec<u8>, Vec<u8>)>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.map(|kv| kv.unwrap()).collect()
}

fn want(model: &Model, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .range((lo, hi))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[test]
fn long_scans_on_a_tiny_cache_match_the_model_and_use_their_read_ahead() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("db");
    let model = fill(&Db::create(&p, small_cache(Options::default())).unwrap());
    let db = Db::open(&p, small_cache(Options::default())).unwrap();
    let t = db.tree("t").unwrap();
    assert_eq!(db.stats().cache_capacity / 4096, 64);

    let before = ahead(&db.stats());
    let got = collect(t.iter());
    assert_eq!(got, want(&model, Bound::Unbounded, Bound::Unbounded));
    let (rounds, pages, hits) = ahead(&db.stats());
    let (rounds, pages, hits) = (rounds - before.0, pages - before.1, hits - before.2);
    eprintln!("forward: {rounds} rounds, {pages} pages, {hits} hits");
    assert!(
        pages > 0,
        "a full scan of ~190 uncached leaves read nothing ahead"
    );
    assert!(
        pages <= 4 * rounds,
        "batches exceed 1/16 of the cache: {pages} in {rounds}"
    );
    assert!(
        2 * hits >= pages,
        "only {hits} of {pages} read-ahead pages used"
    );

    let before = ahead(&db.stats());
    let got = collect(t.iter().rev());
    let mut all = want(&model, Bound::Unbounded, Bound::Unbounded);
    all.reverse();
    assert_eq!(got, all);
    let s = db.stats();
    let (pages, hits) = (s.readahead_pages - before.1, s.readahead_hits - before.2);
    eprintln!("reverse: {pages} pages, {hits} hits");
    assert!(pages > 0 && 2 * hits >= pages, "{hits} of {pages} used");

    // Bounded both ways, mixed directions from both ends.
    let (lo, hi) = (Bound::Excluded(key(1234)), Bound::Included(key(4321)));
    let got = collect(t.range::<Vec<u8>, _>((lo.clone(), hi.clone())));
    assert_eq!(got, want(&model, lo.clone(), hi.clone()));
    // Alternate ends: the two windows and buffers must meet exactly.
    let mut it = t.range::<Vec<u8>, _>((lo.clone(), hi.clone()));
    let (mut front, mut back) = (vec![], vec![]);
    while let Some(kv) = it.next() {
        front.push(kv.unwrap());
        match it.next_back() {
            Some(kv) => back.push(kv.unwrap()),
            None => break,
        }
    }
    back.reverse();
    front.extend(back);
    assert_eq!(front, want(&model, lo, hi));
}

#[test]
fn a_range_inside_one_leaf_reads_nothing_ahead() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("db");
    let model = fill(&Db::create(&p, small_cache(Options::default())).unwrap());
    let db = Db::open(&p, small_cache(Options::default())).unwrap();
    let t = db.tree("t").unwrap();
    for start in [0u32, 2000, 5990] {
        let (lo, hi) = (Bound::Included(key(start)), Bound::Excluded(key(start + 3)));
        let got = collect(t.range::<Vec<u8>, _>((lo.clone(), hi.clone())));
        assert_eq!(got, want(&model, lo.clone(), hi.clone()));
        let got = collect(t.range::<Vec<u8>, _>((lo.clone(), hi.clone())).rev());
        assert_eq!(got.len(), 3);
    }
    // A forward and a reverse walk of a few entries with no end bound stay
    // in their first leaf too.
    assert_eq!(t.range(key(3000)..).take(5).count(), 5);
    assert_eq!(t.range(..key(3000)).rev().take(5).count(), 5);
    let s = db.stats();
    assert_eq!(ahead(&s), (0, 0, 0), "short ranges read ahead");
    assert!(s.cache_misses > 0, "the leaves were not cold");
}

/// Every read of a scan (read-ahead batches included) failing in turn: each
/// scan yields a prefix of the model's entries, then at most a clean error.
/// Some runs must survive an injected fault in a read-ahead batch (the error
/// is dropped and the leaf read again) and still return everything.
#[test]
fn failed_read_ahead_reads_never_yield_wrong_entries() {
    let sim = SimFs::with_alignment(512);
    sim.create_dir_all(Path::new("/d")).unwrap();
    let o = |fs: Arc<dyn Fs>| small_cache(Options::default()).direct_io(true).fs(fs);
    let model = fill(&Db::create("/d/db", o(Arc::new(sim.clone()))).unwrap());
    let all = want(&model, Bound::Unbounded, Bound::Unbounded);
    let mut survived = 0;
    let mut failed = 0;
    for n in (1..260).step_by(3) {
        for reverse in [false, true] {
            let inj = FaultInjector::new(FaultKinds::READS, 0);
            let fs: Arc<dyn Fs> = Arc::new(Faulty::new(sim.clone(), inj.clone()));
            let db = Db::open("/d/db", o(fs)).unwrap();
            let t = db.tree("t").unwrap();
            inj.arm(n);
            let it: Box<dyn Iterator<Item = _>> = if reverse {
                Box::new(t.iter().rev())
            } else {
                Box::new(t.iter())
            };
            let mut got = Vec::new();
            let mut err = None;
            for kv in it {
                match kv {
                    Ok(kv) => got.push(kv),
                    Err(e) => {
                        err = Some(e);
                        break;
                    }
                }
            }
            let wanted: Vec<_> = if reverse {
                all.iter().rev().take(got.len()).cloned().collect()
            } else {
                all.iter().take(got.len()).cloned().collect()
            };
            assert_eq!(got, wanted, "n={n} reverse={reverse}: wrong entries");
            match err {
                Some(e) => {
                    assert!(e.to_string().contains("injected"), "n={n}: {e}");
                    failed += 1;
                }
                None => {
                    assert_eq!(got.len(), all.len(), "n={n} reverse={reverse}");
                    if inj.injected() > 0 && db.stats().readahead_pages > 0 {
                        survived += 1;
                    }
                }
            }
        }
    }
    eprintln!("{survived} scans survived a fault, {failed} failed cleanly");
    assert!(survived > 5, "no scan survived a failed read-ahead read");
    assert!(failed > 0, "no fault in a demand read reached the caller");
}

/// Forward and reverse scans racing a writer whose checkpoints free and reuse
/// pages: read-ahead batches read under an old `reuse_gen` must never be
/// served, so each scan sees every key once, in order, with a value written
/// for that key.
#[test]
fn scans_racing_checkpoints_see_only_real_entries() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let d = tempfile::tempdir().unwrap();
    let o = small_cache(Options::default())
        .durability(pagewise::Durability::Buffered)
        .wal_limit(256 * 1024);
    let db = Db::create(d.path().join("db"), o).unwrap();
    const KEYS: u32 = 3000;
    let value = |k: u32, round: u32| {
        let mut v = format!("{k:09}/{round:06}/").into_bytes();
        v.resize(100, b'.');
        v
    };
    let write = |round: u32| {
        let mut b = pagewise::Batch::new();
        for k in (0..KEYS).filter(|k| !(k + round).is_multiple_of(3)) {
            b.insert("t", key(k), value(k, round));
        }
        db.apply(b).unwrap();
    };
    write(0);
    write(1);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for reverse in [false, true] {
            let (db, stop) = (&db, &stop);
            s.spawn(move || {
                let t = db.tree("t").unwrap();
                let mut n = 0;
                while !stop.load(Ordering::Acquire) || n < 3 {
                    n += 1;
                    let mut all: Vec<_> = if reverse {
                        t.iter().rev().map(Result::unwrap).collect()
                    } else {
                        t.iter().map(Result::unwrap).collect()
                    };
                    if reverse {
                        all.reverse();
                    }
                    // Every key was written by rounds 0 and 1, none is removed.
                    assert_eq!(all.len() as u32, KEYS, "reverse={reverse}");
                    for (i, (k, v)) in all.iter().enumerate() {
                        assert_eq!(k, &key(i as u32), "reverse={reverse}");
                        assert_eq!(&v[..10], format!("{i:09}/").as_bytes());
                    }
                }
            });
        }
        for round in 2..40 {
            write(round);
        }
        stop.store(true, Ordering::Release);
    });
    let s = db.stats();
    assert!(s.checkpoints > 3, "only {} checkpoints", s.checkpoints);
    assert!(s.readahead_pages > 0, "the scans read nothing ahead");
    assert!(db.check().unwrap().is_ok());
}

#[test]
fn the_read_ahead_option_bounds_or_disables_batches() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("db");
    let model = fill(&Db::create(&p, small_cache(Options::default())).unwrap());
    let all = want(&model, Bound::Unbounded, Bound::Unbounded);
    for (pages, most) in [(0, 0), (1, 1), (3, 3)] {
        let db = Db::open(&p, small_cache(Options::default()).read_ahead(pages)).unwrap();
        let t = db.tree("t").unwrap();
        assert_eq!(collect(t.iter()), all, "read_ahead({pages})");
        let (rounds, issued, _) = ahead(&db.stats());
        assert!(
            issued <= most * rounds,
            "read_ahead({pages}): {issued} in {rounds}"
        );
        assert_eq!(issued > 0, pages > 0, "read_ahead({pages}): {issued} pages");
    }
}
