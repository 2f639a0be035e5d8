//! How long recovery takes when the log is full: a child process loads
//! random 16-byte keys with 100-byte values (batches of 1,000, buffered log,
//! direct I/O, 256 MiB cache, default `wal_limit`) into a B-epsilon tree or a
//! B+tree until the log since the last checkpoint holds `FILL_PCT` percent
//! of `wal_limit`, syncs, and exits without closing (what a crash after the
//! last sync leaves). The parent then times `Db::open`, which replays that
//! log (docs/benchmarks.md, "B-epsilon tree": recovery time with leaf
//! write-back).
//!
//! ```sh
//! recovery_time DIR bepsilon|btree [FILL_PCT]          # prints one JSON line
//! recovery_time DIR bepsilon|btree FILL_PCT --cold     # log read cold (root)
//! ```

use pagewise::{BEpsilonOptions, Batch, Db, Durability, Options, TreeKind};
use rand::{rngs::SmallRng, RngCore, SeedableRng};
use std::path::Path;
use std::time::Instant;

const BATCH: u64 = 1000;
/// Bounds the child's load (5M rows at most).
const MAX_BATCHES: u64 = 5000;

fn opts() -> Options {
    Options::default()
        .cache_bytes(256 << 20)
        .durability(Durability::Buffered)
        .direct_io(true)
}

fn kind(name: &str) -> TreeKind {
    match name {
        "bepsilon" => TreeKind::BEpsilon(BEpsilonOptions::default()),
        "btree" => TreeKind::BTree,
        other => panic!("tree kind {other:?}: use bepsilon or btree"),
    }
}

/// The child: loads until the log holds `fill_pct` of its limit, syncs and
/// exits with no close checkpoint.
fn load(path: &Path, kind: TreeKind, fill_pct: u64) -> ! {
    let o = opts();
    let limit_bytes = o.wal_limit;
    let db = Db::create(path, o).expect("create the Db");
    let tree = db.tree_with("main", kind).expect("create the tree");
    drop(tree);
    let (mut rng, mut k, mut v) = (SmallRng::seed_from_u64(11), [0u8; 16], [0u8; 100]);
    for _ in 0..MAX_BATCHES {
        let mut batch = Batch::new();
        for _ in 0..BATCH {
            rng.fill_bytes(&mut k);
            rng.fill_bytes(&mut v);
            batch.insert("main", k, v);
        }
        db.apply(batch).expect("apply a batch");
        if db.stats().wal_bytes_since_checkpoint * 100 >= limit_bytes * fill_pct {
            break;
        }
    }
    db.sync().expect("sync the log");
    let s = db.stats();
    println!(
        "{{\"loaded_rows\":{},\"log_bytes\":{},\"checkpoints\":{},\"write_backs\":{}}}",
        s.commits * BATCH,
        s.wal_bytes_since_checkpoint,
        s.checkpoints,
        s.write_backs
    );
    std::process::exit(0); // no destructor runs: no close checkpoint
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: recovery_time DIR bepsilon|btree [FILL_PCT [--cold]]";
    let (dir, kind_name) = (
        Path::new(args.get(1).expect(usage)),
        args.get(2).expect(usage),
    );
    let fill_pct: u64 = args.get(3).map_or(95, |p| p.parse().expect(usage));
    let path = dir.join("recovery.pw");
    if args.get(4).map(String::as_str) == Some("--child") {
        load(&path, kind(kind_name), fill_pct);
    }
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(pagewise::wal_path(&path));
    let out = std::process::Command::new(&args[0])
        .args([&args[1], &args[2], &fill_pct.to_string(), "--child"])
        .output()
        .expect("run the loading child");
    assert!(out.status.success(), "the loading child failed: {out:?}");
    let loaded = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if args.get(4).map(String::as_str) == Some("--cold") {
        // Cold: the log is read from the drive, as after a power cut (root only).
        std::fs::write("/proc/sys/vm/drop_caches", "3").expect("drop the page cache (needs root)");
    }
    let t0 = Instant::now();
    let db = Db::open(&path, opts()).expect("recover the Db");
    let open_s = t0.elapsed().as_secs_f64();
    let s = db.stats();
    println!(
        "{{\"tree\":\"{kind_name}\",\"child\":{loaded},\"open_s\":{open_s:.3},\"replayed_records\":{},\"replayed_rows\":{}}}",
        s.replayed_records,
        s.replayed_records * BATCH
    );
}
