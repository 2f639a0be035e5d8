//! Snapshot, transaction and backup costs (docs/benchmarks.md,
//! "Snapshots, transactions and backup"): one binary, each figure from
//! interleaved rounds in one run.
//!
//! ```sh
//! snapshots take DIR                 # take+drop: 1 thread, then 8 at once
//! snapshots gets DIR                 # cached gets: plain vs through a snapshot, both kinds
//! snapshots fill DIR KIND ROWS       # fillrandom without / with a snapshot held throughout
//! snapshots backup DIR ROWS          # backup of a ROWS-row Db during a fill
//! snapshots tx DIR                   # 10-read 10-write transactions vs the same work unchecked
//! ```
//! KIND: btree or bepsilon. Keys: random 16 bytes; values: 100 random bytes;
//! batches of 1,000; buffered log; direct I/O; 64 MiB cache (256 MiB for
//! the cached gets).

use pagewise::{Batch, Db, Durability, Options, TreeKind};
use rand::{rngs::SmallRng, RngCore, SeedableRng};
use std::path::Path;
use std::time::{Duration, Instant};

const BATCH: u64 = 1000;
const ROUNDS: usize = 5;

fn key(i: u64) -> [u8; 16] {
    let mut rng = SmallRng::seed_from_u64(i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 7);
    let mut k = [0u8; 16];
    rng.fill_bytes(&mut k);
    k
}

fn kind(name: &str) -> TreeKind {
    match name {
        "btree" => TreeKind::BTree,
        "bepsilon" => TreeKind::BEpsilon(Default::default()),
        other => panic!("kind {other:?}: btree or bepsilon"),
    }
}

fn create(path: &Path, cache_bytes: usize) -> Db {
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_file(pagewise::wal_path(path));
    let o = Options::default()
        .cache_bytes(cache_bytes)
        .durability(Durability::Buffered)
        .direct_io(true);
    Db::create(path, o).expect("create the Db")
}

/// Inserts keys `from..to` in batches; returns rows per second.
fn fill(db: &Db, tree: &str, from: u64, to: u64) -> f64 {
    let t0 = Instant::now();
    let mut v = [0u8; 100];
    let mut rng = SmallRng::seed_from_u64(from ^ 5);
    let mut b = from;
    while b < to {
        let mut batch = Batch::new();
        for i in b..(b + BATCH).min(to) {
            rng.fill_bytes(&mut v);
            batch.insert(tree, key(i), v);
        }
        db.apply(batch).expect("apply a batch");
        b += BATCH;
    }
    (to - from) as f64 / t0.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

/// Nanoseconds per take+drop on each of `threads` threads at once.
fn take_drop_ns(db: &Db, threads: usize, n: u64) -> f64 {
    let per: Vec<f64> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let t0 = Instant::now();
                    for _ in 0..n {
                        std::hint::black_box(db.snapshot().expect("snapshot"));
                    }
                    t0.elapsed().as_nanos() as f64 / n as f64
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    per.iter().sum::<f64>() / per.len() as f64
}

fn take(dir: &Path) {
    let db = create(&dir.join("take.pw"), 64 << 20);
    fill(&db, "main", 0, 100_000);
    for threads in [1usize, 8] {
        let r: Vec<f64> = (0..ROUNDS)
            .map(|_| take_drop_ns(&db, threads, 1_000_000))
            .collect();
        let (m, lo, hi) = median(r);
        println!("take+drop, {threads} thread(s): median {m:.0} ns (range {lo:.0}-{hi:.0}) per snapshot per thread");
    }
}

fn gets(dir: &Path) {
    let rows = 1_000_000u64;
    for k in ["btree", "bepsilon"] {
        let db = create(&dir.join("gets.pw"), 256 << 20);
        db.tree_with("main", kind(k)).expect("tree");
        fill(&db, "main", 0, rows);
        db.checkpoint().expect("checkpoint");
        let t = db.tree("main").expect("tree");
        for kv in t.iter() {
            kv.expect("warm scan");
        }
        let n = 1_000_000u64;
        let (mut plain, mut snap) = (Vec::new(), Vec::new());
        for round in 0..ROUNDS as u64 {
            let mut rng = SmallRng::seed_from_u64(round);
            let t0 = Instant::now();
            for _ in 0..n {
                std::hint::black_box(t.get(key(rng.next_u64() % rows)).expect("get"));
            }
            plain.push(n as f64 / t0.elapsed().as_secs_f64());
            let s = db.snapshot().expect("snapshot");
            let st = s.tree("main").expect("tree");
            let mut rng = SmallRng::seed_from_u64(round);
            let t0 = Instant::now();
            for _ in 0..n {
                std::hint::black_box(st.get(key(rng.next_u64() % rows)).expect("get"));
            }
            snap.push(n as f64 / t0.elapsed().as_secs_f64());
        }
        let ratios: Vec<f64> = snap.iter().zip(&plain).map(|(s, p)| s / p).collect();
        let ((p, ..), (s, ..), (r, rlo, rhi)) = (median(plain), median(snap), median(ratios));
        println!("{k}: cached gets plain {p:.0}/s, through a snapshot {s:.0}/s: {r:.3}x (range {rlo:.3}-{rhi:.3})");
        db.close().expect("close");
    }
}

fn allocated_bytes(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).map_or(0, |m| m.blocks() * 512)
}

fn fill_held(dir: &Path, k: &str, rows: u64) {
    for held in [false, true] {
        let path = dir.join("fill.pw");
        let db = create(&path, 64 << 20);
        db.tree_with("main", kind(k)).expect("tree");
        fill(&db, "main", 0, rows / 10);
        let snap = held.then(|| db.snapshot().expect("snapshot"));
        let rate = fill(&db, "main", rows / 10, rows);
        db.checkpoint().expect("checkpoint");
        let st = db.stats();
        let size = st.file_pages * st.page_size as u64;
        let (alloc, held_bytes) = (allocated_bytes(&path), st.snapshot_held_bytes);
        drop(snap);
        db.checkpoint().expect("checkpoint");
        let after = db.stats();
        // Enough writes afterwards to reuse what the snapshot held.
        let again = fill(&db, "main", rows, rows + rows / 5);
        db.checkpoint().expect("checkpoint");
        let end = db.stats();
        println!(
            "{k} fill of {rows} rows, snapshot held {held}: {rate:.0} rows/s; file {:.1} MB ({:.1} MB allocated, {:.1} MB held); after it ends: held {:.1} MB, free {:.1} MB; {} more rows at {again:.0}/s: file {:.1} MB ({:.1} MB allocated)",
            size as f64 / 1e6,
            alloc as f64 / 1e6,
            held_bytes as f64 / 1e6,
            after.snapshot_held_bytes as f64 / 1e6,
            (after.free_pages * after.page_size as u64) as f64 / 1e6,
            rows / 5,
            (end.file_pages * end.page_size as u64) as f64 / 1e6,
            allocated_bytes(&path) as f64 / 1e6,
        );
        db.close().expect("close");
    }
}

fn backup(dir: &Path, rows: u64) {
    let path = dir.join("src.pw");
    let db = create(&path, 64 << 20);
    db.tree_with("main", kind("bepsilon")).expect("tree");
    let load = fill(&db, "main", 0, rows);
    println!("loaded {rows} rows at {load:.0}/s");
    let before = fill(&db, "main", rows, rows + 200_000);
    let copy = dir.join("copy.pw");
    let _ = std::fs::remove_file(&copy);
    let _ = std::fs::remove_file(pagewise::wal_path(&copy));
    let done = std::sync::atomic::AtomicBool::new(false);
    let (report, during, filled) = std::thread::scope(|s| {
        let filler = s.spawn(|| {
            let t0 = Instant::now();
            let mut next = rows + 200_000;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                fill(&db, "main", next, next + 10_000);
                next += 10_000;
            }
            let n = next - rows - 200_000;
            (n as f64 / t0.elapsed().as_secs_f64(), n)
        });
        let report = db.backup(&copy).expect("backup");
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        let (rate, n) = filler.join().expect("filler");
        (report, rate, n)
    });
    let c = Db::open(&copy, Options::default()).expect("open the copy");
    let t0 = Instant::now();
    let check = c.check().expect("check");
    let entries = c.tree("main").expect("tree").len();
    println!(
        "backup: {} entries, {:.1} MB file, in {:.1} s; fill {before:.0} rows/s before, {during:.0}/s during ({filled} rows); copy check ok={} in {:.1} s, {entries} entries",
        report.entries,
        report.file_bytes as f64 / 1e6,
        report.elapsed.as_secs_f64(),
        check.is_ok(),
        t0.elapsed().as_secs_f64()
    );
    assert!(check.is_ok() && entries == report.entries);
    assert!(entries >= rows + 200_000, "the copy holds the load");
    let _ = Duration::ZERO;
}

/// One unit of the transaction workload on `db`: 10 reads and 10 writes of
/// uniform keys, as a transaction (`checked`) or as 10 plain gets and one
/// batch. Returns whether it committed.
fn tx_unit(db: &Db, rng: &mut SmallRng, rows: u64, checked: bool) -> bool {
    let keys: Vec<[u8; 16]> = (0..20).map(|_| key(rng.next_u64() % rows)).collect();
    let mut v = [0u8; 100];
    rng.fill_bytes(&mut v);
    if !checked {
        let t = db.tree("main").expect("tree");
        for k in &keys[..10] {
            std::hint::black_box(t.get(k).expect("get"));
        }
        let mut b = Batch::new();
        for k in &keys[10..] {
            b.insert("main", k, v);
        }
        db.apply(b).expect("batch");
        return true;
    }
    let mut tx = db.transaction().expect("begin");
    for k in &keys[..10] {
        std::hint::black_box(tx.get("main", k).expect("get"));
    }
    for k in &keys[10..] {
        tx.insert("main", k, v);
    }
    match tx.commit() {
        Ok(()) => true,
        Err(pagewise::Error::Conflict { .. }) => false,
        Err(e) => panic!("{e}"),
    }
}

/// Units per second on `threads` threads for `secs`, and the conflicts.
fn tx_rate(db: &Db, rows: u64, threads: u64, checked: bool, secs: f64) -> (f64, u64) {
    let r: Vec<(u64, u64)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|th| {
                s.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(th * 7 + checked as u64);
                    let t0 = Instant::now();
                    let (mut n, mut conflicts) = (0u64, 0u64);
                    while t0.elapsed().as_secs_f64() < secs {
                        if tx_unit(db, &mut rng, rows, checked) {
                            n += 1;
                        } else {
                            conflicts += 1;
                        }
                    }
                    (n, conflicts)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    (
        r.iter().map(|x| x.0).sum::<u64>() as f64 / secs,
        r.iter().map(|x| x.1).sum(),
    )
}

fn tx(dir: &Path) {
    let rows = 1_000_000u64;
    for k in ["btree", "bepsilon"] {
        let db = create(&dir.join("tx.pw"), 256 << 20);
        db.tree_with("main", kind(k)).expect("tree");
        fill(&db, "main", 0, rows);
        for threads in [1u64, 2] {
            let (mut on, mut off, mut conflicts) = (Vec::new(), Vec::new(), 0);
            for _ in 0..ROUNDS {
                let (r, c) = tx_rate(&db, rows, threads, true, 2.0);
                on.push(r);
                conflicts += c;
                off.push(tx_rate(&db, rows, threads, false, 2.0).0);
            }
            let ratios: Vec<f64> = on.iter().zip(&off).map(|(a, b)| a / b).collect();
            let ((a, alo, ahi), (b, ..), (r, rlo, rhi)) = (median(on), median(off), median(ratios));
            println!("{k}, {threads} thread(s): transactions {a:.0}/s (range {alo:.0}-{ahi:.0}), {conflicts} conflicts; unchecked gets+batch {b:.0}/s; ratio {r:.3} (range {rlo:.3}-{rhi:.3})");
        }
        db.close().expect("close");
    }
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let usage =
        "usage: snapshots take DIR | gets DIR | fill DIR KIND ROWS | backup DIR ROWS | tx DIR";
    match &a[1..] {
        [m, d] if m == "take" => take(Path::new(d)),
        [m, d] if m == "gets" => gets(Path::new(d)),
        [m, d, k, r] if m == "fill" => fill_held(Path::new(d), k, r.parse().expect(usage)),
        [m, d, r] if m == "backup" => backup(Path::new(d), r.parse().expect(usage)),
        [m, d] if m == "tx" => tx(Path::new(d)),
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
}
