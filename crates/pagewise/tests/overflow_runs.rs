//! B+tree overflow values written in runs: a commit group's large values go
//! to back-to-back extents, written as several 1 MiB runs (queued through
//! the ring where there is one, in buffers reused from earlier runs). Each
//! value reads back, after overwrites of other sizes, a checkpoint, a
//! replay of the log and a reopen, and `check` finds every overflow page
//! sealed and owned once.

mod common;
use common::check_clean;
use pagewise::{Batch, Db, Durability, Options, Tree};
use std::collections::BTreeMap;

fn opts() -> Options {
    Options::default()
        .page_size(4096)
        .cache_bytes(4 << 20)
        .durability(Durability::Buffered)
        .direct_io(false)
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

/// Sizes across the page payload (4,064 bytes), some runs' worth, and one
/// longer than a run (an extent written alone).
const SIZES: [usize; 7] = [4065, 16_000, 9000, 70_000, 16_001, 1_300_000, 40_000];

/// One batch setting keys `0..count` to values of `SIZES` shifted by
/// `round`, salted by `round`; the model follows.
fn fill(db: &Db, count: u64, round: u64, model: &mut BTreeMap<u64, Vec<u8>>) {
    let mut b = Batch::new();
    for i in 0..count {
        let len = SIZES[((i + round) % SIZES.len() as u64) as usize];
        let v = value(i, round, len);
        b.insert("t", key(i), v.clone());
        model.insert(i, v);
    }
    db.apply(b).unwrap();
}

fn verify(t: &Tree, model: &BTreeMap<u64, Vec<u8>>) {
    for (k, v) in model {
        let got = t.get(key(*k)).unwrap();
        assert!(got.as_deref() == Some(&v[..]), "key {k}");
    }
    let got: Vec<Vec<u8>> = t.iter().map(|r| r.unwrap().1).collect();
    assert!(got.iter().eq(model.values()), "iteration differs");
}

#[test]
fn a_group_of_large_values_written_in_runs_reads_back_after_replay() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("db");
    let mut model = BTreeMap::new();
    let count = 60;
    {
        let db = Db::create(&p, opts()).unwrap();
        let t = db.tree("t").unwrap();
        fill(&db, count, 0, &mut model);
        verify(&t, &model);
        db.checkpoint().unwrap();
        // Every value here takes at least two pages.
        assert!(check_clean(&db) >= 2 * count);
        // Overwrites of other sizes: the runs' buffers held other layouts.
        fill(&db, count, 1, &mut model);
        fill(&db, count / 2, 2, &mut model);
        verify(&t, &model);
        // No checkpoint: the reopen replays these groups from the log.
    }
    let db = Db::open(&p, opts()).unwrap();
    let t = db.tree("t").unwrap();
    verify(&t, &model);
    db.checkpoint().unwrap();
    let pages = check_clean(&db);
    let want: u64 = model.values().map(|v| v.len().div_ceil(4064) as u64).sum();
    assert_eq!(pages, want, "one extent per live value, nothing more");
    drop((t, db));
    let db = Db::open(&p, opts()).unwrap();
    verify(&db.tree("t").unwrap(), &model);
}
