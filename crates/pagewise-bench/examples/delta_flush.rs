//! Delta-flushed vs whole-page B+tree flushes (issue 11), one binary, one
//! run: for each configuration (page size, whole pages or delta flushes with
//! threshold T and block bytes), fillrandom then iiBench into fresh Dbs on
//! the engine's emulated compressing drive (`CompressingFs`, every written
//! 4 KiB block lz4-compressed, exact), then readrandom on the fillrandom Db
//! reopened with a cache of 5% of the loaded user bytes (the same cache for
//! every configuration). Reports, per phase:
//! - WA device: bytes the engine wrote (log + pages + superblocks/catalog,
//!   O_DIRECT, so what the drive receives) / user bytes (key + value);
//! - WA pages: the page part of that;
//! - WA CSD: bytes the compressing drive stores / user bytes;
//! - readrandom gets/s, data-file reads per get and node read rounds per
//!   get (`Stats::node_read_rounds`: waits for node pages; a delta block
//!   read with the base its parent names is one) (median of `rounds`,
//!   configurations interleaved round by round).
//!
//! cargo run --release -p pagewise-bench --example delta_flush -- \
//!   DIR ROWS CACHE_MIB ROUNDS CONFIG...      CONFIG = 8k:whole | 16k:delta:T[:BLOCK]
//!
//! `ROUNDS` 0 skips readrandom; `DELTA_PHASES=fill` skips iiBench;
//! `DELTA_II_ROWS` sets iiBench's rows (default ROWS; each row is 4 puts).

use pagewise::{Batch, Db, DeltaFlush, Durability, Options};
use pagewise_bench::iibench::Row;
use pagewise_bench::keys::{encode_key, Permutation};
use pagewise_bench::values::{Compressibility, ValueGen};
use pagewise_io::{CompressingFs, CompressionMeter, RealFs};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

const BATCH: u64 = 1000;
const SEED: u64 = 11;

#[derive(Clone, Copy)]
struct Config {
    page_size: usize,
    delta: Option<DeltaFlush>,
}

impl Config {
    fn parse(s: &str) -> Config {
        let parts: Vec<&str> = s.split(':').collect();
        let page_size = parts[0]
            .trim_end_matches('k')
            .parse::<usize>()
            .expect("page size")
            << 10;
        let delta = match parts.get(1).copied() {
            Some("whole") => None,
            Some("delta") => Some(DeltaFlush {
                threshold_bytes: parts[2].parse().expect("threshold"),
                block_bytes: parts
                    .get(3)
                    .map_or(4096, |b| b.parse().expect("block bytes")),
            }),
            _ => panic!("config {s}: PAGEk:whole or PAGEk:delta:T[:BLOCK]"),
        };
        Config { page_size, delta }
    }

    fn name(&self) -> String {
        match self.delta {
            None => format!("{}k whole", self.page_size >> 10),
            Some(d) => format!(
                "{}k delta T={} B={}",
                self.page_size >> 10,
                d.threshold_bytes,
                d.block_bytes
            ),
        }
    }

    fn options(&self, cache: usize, drive: Arc<CompressingFs<RealFs>>) -> Options {
        Options::default()
            .page_size(self.page_size)
            .cache_bytes(cache)
            .durability(Durability::Buffered)
            .delta_flush(self.delta)
            .fs(drive)
    }
}

struct Fill {
    rows: u64,
    user_bytes: u64,
    engine_bytes: u64,
    page_bytes: u64,
    stored_bytes: u64,
    secs: f64,
    file_bytes: u64,
    consolidations: u64,
}

fn fresh(path: &Path) {
    for suffix in ["", "-wal", "-lock"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

/// Loads `rows` through `write` (one call per batch, returning user bytes),
/// checkpoints, and measures what was written.
fn fill(
    path: &Path,
    c: Config,
    cache: usize,
    rows: u64,
    tables: &[&str],
    write: impl Fn(&Db, u64) -> u64,
) -> Fill {
    fresh(path);
    let drive = Arc::new(CompressingFs::with_meter(RealFs, CompressionMeter::new(1)));
    let db = Db::create(path, c.options(cache, drive.clone())).unwrap();
    for t in tables {
        db.tree(t).unwrap();
    }
    db.checkpoint().unwrap();
    let (s0, m0) = (db.stats(), drive.stats());
    let t0 = Instant::now();
    let mut user_bytes = 0;
    for b in 0..rows.div_ceil(BATCH) {
        user_bytes += write(&db, b);
    }
    db.checkpoint().unwrap();
    let secs = t0.elapsed().as_secs_f64();
    let (s1, m1) = (db.stats(), drive.stats());
    let w = |a: &pagewise_io::IoStatsSnapshot, b: &pagewise_io::IoStatsSnapshot| {
        b.write_bytes - a.write_bytes
    };
    let page_bytes = w(&s0.pages, &s1.pages);
    eprintln!(
        "delta copies: {} rebased, {} carried, {} consolidated, {} placed apart from their base",
        s1.delta_rebases, s1.delta_carries, s1.delta_consolidations, s1.delta_apart
    );
    db.close().unwrap();
    Fill {
        rows,
        user_bytes,
        engine_bytes: w(&s0.wal, &s1.wal) + page_bytes + w(&s0.meta, &s1.meta),
        page_bytes,
        stored_bytes: m1.physical_bytes_written - m0.physical_bytes_written,
        secs,
        file_bytes: std::fs::metadata(path).unwrap().len(),
        consolidations: s1.delta_consolidations,
    }
}

fn fillrandom(path: &Path, c: Config, cache: usize, rows: u64) -> Fill {
    let perm = Permutation::new(rows, SEED);
    let vals = ValueGen::new(Compressibility::Random, 100, SEED);
    fill(path, c, cache, rows, &["t"], |db, b| {
        let mut batch = Batch::new();
        let mut bytes = 0;
        for i in b * BATCH..((b + 1) * BATCH).min(rows) {
            let n = perm.apply(i);
            let (k, v) = (encode_key(n, 16), vals.value(n, 0));
            bytes += (k.len() + v.len()) as u64;
            batch.insert("t", &k, &v);
        }
        db.apply(batch).unwrap();
        bytes
    })
}

const II_TABLES: [&str; 4] = [
    "purchases",
    "ix_price_customer",
    "ix_register",
    "ix_price_date",
];

fn iibench(path: &Path, c: Config, cache: usize, rows: u64) -> Fill {
    let pad = ValueGen::new(Compressibility::Random, 76, SEED);
    fill(path, c, cache, rows, &II_TABLES, |db, b| {
        let mut batch = Batch::new();
        let mut bytes = 0;
        for id in b * BATCH..((b + 1) * BATCH).min(rows) {
            for op in Row::generate(id, SEED).ops([0, 1, 2, 3], &pad) {
                bytes += op.user_bytes();
                if let pagewise_bench::WriteOp::Put { table, key, value } = op {
                    batch.insert(II_TABLES[table], &key, &value);
                }
            }
        }
        db.apply(batch).unwrap();
        bytes
    })
}

/// Random gets on the fillrandom Db reopened with a cache of 5% of the user
/// bytes loaded: (gets/s, data-file reads per get, read rounds per get) over
/// `gets` after as many warm-up gets.
fn readrandom(path: &Path, c: Config, rows: u64, gets: u64, round: u64) -> (f64, f64, f64) {
    let cache = (rows * 116 / 20) as usize;
    let drive = Arc::new(CompressingFs::with_meter(RealFs, CompressionMeter::new(1)));
    let db = Db::open(path, c.options(cache, drive)).unwrap();
    let t = db.tree("t").unwrap();
    let mut rng = SmallRng::seed_from_u64(SEED + round);
    for _ in 0..gets {
        t.get(encode_key(rng.gen_range(0..rows), 16))
            .unwrap()
            .expect("loaded key");
    }
    let s0 = db.stats();
    let t0 = Instant::now();
    for _ in 0..gets {
        t.get(encode_key(rng.gen_range(0..rows), 16))
            .unwrap()
            .expect("loaded key");
    }
    let secs = t0.elapsed().as_secs_f64();
    let s1 = db.stats();
    let reads = s1.pages.read_ops - s0.pages.read_ops;
    let waits = s1.node_read_rounds - s0.node_read_rounds;
    if round == 0 {
        eprintln!("{}: io engine {}", c.name(), s1.io_engine);
    }
    db.close().unwrap();
    let per_get = |n: u64| n as f64 / gets as f64;
    (gets as f64 / secs, per_get(reads), per_get(waits))
}

fn print_fill(phase: &str, c: &Config, f: &Fill) {
    let u = f.user_bytes as f64;
    println!(
        "| {phase} | {} | {:.2} | {:.2} | {:.2} | {:.0} | {:.0} | {} |",
        c.name(),
        f.engine_bytes as f64 / u,
        f.page_bytes as f64 / u,
        f.stored_bytes as f64 / u,
        f.rows as f64 / f.secs.max(1e-9),
        f.file_bytes as f64 / (1 << 20) as f64,
        f.consolidations,
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 6 {
        eprintln!("usage: delta_flush DIR ROWS CACHE_MIB ROUNDS CONFIG...");
        std::process::exit(2);
    }
    let dir = PathBuf::from(&args[1]);
    std::fs::create_dir_all(&dir).unwrap();
    let rows: u64 = args[2].parse().unwrap();
    let cache = args[3].parse::<usize>().unwrap() << 20;
    let rounds: u64 = args[4].parse().unwrap();
    let configs: Vec<Config> = args[5..].iter().map(|s| Config::parse(s)).collect();
    println!(
        "rows {rows}, cache {} MiB, 16 B keys, 100 B random values, batches of {BATCH}, Buffered",
        cache >> 20
    );
    println!("| phase | config | WA device | WA pages | WA CSD (lz4) | rows/s | file MiB | consolidations |");
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    let with_ii = std::env::var("DELTA_PHASES").map_or(true, |p| p.contains("ii"));
    let ii_rows = std::env::var("DELTA_II_ROWS").map_or(rows, |r| r.parse().unwrap());
    println!("iiBench: {ii_rows} rows (4 puts each: the row, 3 secondary index entries)");
    for (i, c) in configs.iter().enumerate() {
        if with_ii {
            let ii = iibench(&dir.join(format!("ii-{i}.pw")), *c, cache, ii_rows);
            print_fill("iiBench", c, &ii);
            fresh(&dir.join(format!("ii-{i}.pw")));
        }
        let f = fillrandom(&dir.join(format!("fill-{i}.pw")), *c, cache, rows);
        print_fill("fillrandom", c, &f);
    }
    let gets = (rows / 10).clamp(10_000, 100_000);
    let mut read: Vec<Vec<(f64, f64, f64)>> = vec![Vec::new(); configs.len()];
    for round in 0..rounds {
        for (i, c) in configs.iter().enumerate() {
            read[i].push(readrandom(
                &dir.join(format!("fill-{i}.pw")),
                *c,
                rows,
                gets,
                round,
            ));
        }
    }
    println!("\n| config | readrandom gets/s (median of {rounds}) | all rounds | data-file reads per get | read rounds per get |");
    println!("| --- | ---: | --- | ---: | ---: |");
    for (i, c) in configs.iter().enumerate() {
        let mut r: Vec<f64> = read[i].iter().map(|x| x.0).collect();
        let all = r
            .iter()
            .map(|x| format!("{x:.0}"))
            .collect::<Vec<_>>()
            .join(", ");
        r.sort_by(f64::total_cmp);
        if r.is_empty() {
            continue;
        }
        println!(
            "| {} | {:.0} | {all} | {:.2} | {:.2} |",
            c.name(),
            r[r.len() / 2],
            read[i][0].1,
            read[i][0].2
        );
    }
    for i in 0..configs.len() {
        fresh(&dir.join(format!("fill-{i}.pw")));
    }
}
