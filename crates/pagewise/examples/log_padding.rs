//! Packed vs sparse redo log (`Options::sparse_log`), back to back on the same
//! drive: Sync commits of one 16-byte key and 100-byte value each, from 1 and
//! from 4 threads, with a cache and `wal_limit` large enough that no
//! checkpoint runs while the commits are timed, so the bytes written are the
//! log's. Reports commits/s, bytes written to the log file and the bytes a
//! drive with per-4-KiB-block compression would store (lz4, exact).
//!
//! cargo run --release -p pagewise --example log_padding -- DIR [COMMITS] [ROUNDS]

use pagewise::{Db, Durability, Options};
use pagewise_io::{CompressingFs, CompressionMeter, RealFs};
use std::sync::Arc;
use std::time::Instant;

struct Row {
    commits_per_s: f64,
    log_bytes: u64,
    stored_bytes: u64,
}

fn run(dir: &std::path::Path, sparse: bool, threads: usize, commits: usize) -> Row {
    let path = dir.join(format!("padding-{sparse}-{threads}.pw"));
    for suffix in ["", "-wal", "-lock"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let drive = Arc::new(CompressingFs::with_meter(RealFs, CompressionMeter::new(1)));
    let opts = Options::default()
        .page_size(4096)
        .cache_bytes(256 << 20)
        .wal_limit(1 << 30)
        .durability(Durability::Sync)
        .sparse_log(sparse)
        .fs(drive.clone());
    let db = Db::create(&path, opts).unwrap();
    let (s0, m0) = (db.stats(), drive.stats());
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let tree = db.tree("t").unwrap();
            s.spawn(move || {
                for i in (t..commits).step_by(threads) {
                    let key = format!("{:016}", (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                    let value: Vec<u8> = (0..100).map(|j| (i * 31 + j) as u8).collect();
                    tree.insert(key, value).unwrap();
                }
            });
        }
    });
    let secs = t0.elapsed().as_secs_f64();
    let (s1, m1) = (db.stats(), drive.stats());
    assert_eq!(
        s1.checkpoints, s0.checkpoints,
        "a checkpoint ran while timing"
    );
    let row = Row {
        commits_per_s: commits as f64 / secs,
        log_bytes: s1.wal.write_bytes - s0.wal.write_bytes,
        stored_bytes: m1.physical_bytes_written - m0.physical_bytes_written,
    };
    db.close().unwrap();
    row
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = std::path::PathBuf::from(
        args.get(1)
            .expect("usage: log_padding DIR [COMMITS] [ROUNDS]"),
    );
    let commits: usize = args.get(2).map_or(20_000, |s| s.parse().expect("COMMITS"));
    let rounds: usize = args.get(3).map_or(2, |s| s.parse().expect("ROUNDS"));
    std::fs::create_dir_all(&dir).unwrap();
    let user = commits as f64 * 116.0;
    println!("| round | threads | log | commits/s | log bytes written | per commit | drive stores | per commit | stored / user bytes |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for round in 1..=rounds {
        for threads in [1, 4] {
            for sparse in [false, true] {
                let r = run(&dir, sparse, threads, commits);
                println!(
                    "| {round} | {threads} | {} | {:.0} | {:.1} MiB | {:.0} B | {:.1} MiB | {:.0} B | {:.2} |",
                    if sparse { "sparse" } else { "packed" },
                    r.commits_per_s,
                    r.log_bytes as f64 / 1048576.0,
                    r.log_bytes as f64 / commits as f64,
                    r.stored_bytes as f64 / 1048576.0,
                    r.stored_bytes as f64 / commits as f64,
                    r.stored_bytes as f64 / user
                );
            }
        }
    }
}
