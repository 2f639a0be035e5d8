//! Freed node extents are punched out of the file (docs/design.md, "Free
//! space"): a B-epsilon fill far larger than its cache frees old node
//! extents at every checkpoint; afterwards the file holds fewer allocated
//! bytes than its length, every key reads back as a BTreeMap model says,
//! `check` passes, and the same holds after reopening.

use pagewise::{BEpsilonOptions, Batch, Compression, Db, Durability, Options, TreeKind};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;

fn key(i: u64) -> [u8; 16] {
    let k = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&k.to_be_bytes());
    out[8..].copy_from_slice(&i.to_le_bytes());
    out
}

fn value(i: u64) -> Vec<u8> {
    // xorshift64: incompressible, so nodes keep their size under lz4.
    let mut x = i.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1;
    (0..100)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn verify(db: &Db, model: &BTreeMap<[u8; 16], Vec<u8>>) {
    let t = db.tree("t").unwrap();
    for (k, v) in model {
        assert_eq!(t.get(k).unwrap().as_deref(), Some(&v[..]), "key {k:?}");
    }
    let all: Vec<_> = t.range::<&[u8], _>(..).map(|e| e.unwrap().0).collect();
    assert_eq!(all.len(), model.len());
    db.check().unwrap();
}

#[test]
fn freed_node_extents_become_holes_and_nothing_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let kind = TreeKind::BEpsilon(
        BEpsilonOptions::default()
            .node_bytes(256 << 10)
            .compression(Compression::Lz4),
    );
    // A 2 MiB log limit: checkpoints (which release freed extents) come
    // every 2 MiB of log, as leaf write-backs keep the dirty set in budget.
    let opts = Options::default()
        .cache_bytes(4 << 20)
        .durability(Durability::Buffered)
        .direct_io(false)
        .wal_limit(2 << 20);
    let db = Db::create(&path, opts.clone()).unwrap();
    db.tree_with("t", kind).unwrap();
    let mut model = BTreeMap::new();
    for b in 0..300u64 {
        let mut batch = Batch::new();
        for j in 0..200 {
            let i = b * 200 + j;
            batch.insert("t", key(i), value(i));
            model.insert(key(i), value(i));
        }
        db.apply(batch).unwrap();
    }
    let s = db.stats();
    assert!(
        s.checkpoints >= 3,
        "the fill checkpointed at least 3 times: {s:?}"
    );
    assert_eq!(s.punch_errors, 0);
    verify(&db, &model);
    db.close().unwrap();
    let m = std::fs::metadata(&path).unwrap();
    let (len, allocated) = (m.len(), m.blocks() * 512);
    // ext4, xfs, btrfs and tmpfs punch holes; a file system that cannot
    // would leave allocated == len and fail here, naming it.
    assert!(
        allocated + (64 << 10) <= len,
        "no holes: {allocated} bytes allocated of {len} (does this file system punch holes?)"
    );
    let db = Db::open(&path, opts).unwrap();
    verify(&db, &model);
}

#[test]
fn a_clean_close_punches_the_log_past_its_last_run() {
    long_then_short_run(true);
}

#[test]
fn dropping_the_last_handle_punches_the_log_too() {
    long_then_short_run(false);
}

/// A long log run, a checkpoint, a short run, then `Db::close` (or a drop):
/// the whole log becomes a hole and every key reads back after reopening.
fn long_then_short_run(close: bool) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let wal = dir.path().join("db-wal");
    let opts = Options::default()
        .cache_bytes(64 << 20)
        .durability(Durability::Buffered)
        .direct_io(false);
    let db = Db::create(&path, opts.clone()).unwrap();
    let mut model = BTreeMap::new();
    // One long run (about 3 MB of records), a checkpoint, then a short one.
    for round in 0..2u64 {
        // The short run spans several 4 KiB blocks (about 13 KB).
        let n = if round == 0 { 20_000 } else { 100 };
        let mut batch = Batch::new();
        for i in round * 100_000..round * 100_000 + n {
            batch.insert("t", key(i), value(i));
            model.insert(key(i), value(i));
        }
        db.apply(batch).unwrap();
        if round == 0 {
            db.checkpoint().unwrap();
        } else {
            db.sync().unwrap(); // the short run reaches the log file
        }
    }
    let long_bytes = std::fs::metadata(&wal).unwrap().len();
    assert!(long_bytes > 2 << 20, "the long run: {long_bytes} bytes");
    if close {
        db.close().unwrap();
    } else {
        drop(db);
    }
    let m = std::fs::metadata(&wal).unwrap();
    assert_eq!(m.len(), long_bytes, "the log keeps its length");
    // A second, empty close checkpoint leaves no run a fallback replays,
    // so even the short run is punched (a run a fallback could replay is kept).
    assert!(
        m.blocks() * 512 <= 4096,
        "{} bytes of the log still allocated",
        m.blocks() * 512
    );
    let db = Db::open(&path, opts).unwrap();
    let t = db.tree("t").unwrap();
    for (k, v) in &model {
        assert_eq!(t.get(k).unwrap().as_deref(), Some(&v[..]));
    }
    db.check().unwrap();
}
