//! Engine benchmark for docs/benchmarks.md: fill N random 16-byte keys with
//! 100-byte values, then random point reads with the whole Db cached and with
//! a cache of 5% of the Db (direct I/O), at 1 and T threads.
//!
//! cargo run --release -p pagewise --example engine_bench -- \
//!     --dir /var/tmp/pwbench --keys 1000000 --page-size 4096 --threads 8 \
//!     --read-engine sync   # or ring: how the read phases read pages

use pagewise::{Db, Durability, Options};
use rand::{rngs::SmallRng, Rng, RngCore, SeedableRng};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

struct Args {
    dir: PathBuf,
    keys: usize,
    page_size: usize,
    threads: usize,
    read_secs: f64,
    cache_frac: f64,
    fill_cache_mib: usize,
    wal_limit_mib: u64,
}

fn args() -> Args {
    let mut a = Args {
        dir: PathBuf::from("/var/tmp/pwbench"),
        keys: 1_000_000,
        page_size: 4096,
        threads: 8,
        read_secs: 10.0,
        cache_frac: 0.05,
        fill_cache_mib: 1024,
        wal_limit_mib: 256,
    };
    let v: Vec<String> = std::env::args().skip(1).collect();
    for w in v.chunks(2) {
        let val = w.get(1).cloned().unwrap_or_default();
        match w[0].as_str() {
            "--dir" => a.dir = val.into(),
            "--keys" => a.keys = val.parse().expect("--keys N"),
            "--page-size" => a.page_size = val.parse().expect("--page-size N"),
            "--threads" => a.threads = val.parse().expect("--threads N"),
            "--read-secs" => a.read_secs = val.parse().expect("--read-secs S"),
            "--cache-frac" => a.cache_frac = val.parse().expect("--cache-frac F"),
            "--fill-cache-mib" => a.fill_cache_mib = val.parse().expect("--fill-cache-mib N"),
            "--wal-limit-mib" => a.wal_limit_mib = val.parse().expect("--wal-limit-mib N"),
            x => panic!("unknown argument {x}"),
        }
    }
    a
}

fn keys(n: usize) -> Vec<[u8; 16]> {
    let mut rng = SmallRng::seed_from_u64(42);
    (0..n)
        .map(|_| {
            let mut k = [0u8; 16];
            rng.fill_bytes(&mut k);
            k
        })
        .collect()
}

/// CPU time of the calling thread, in microseconds.
fn thread_cpu_us() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e6 + ts.tv_nsec as f64 / 1e3
}

static CPU_NS: AtomicU64 = AtomicU64::new(0);
static OPS: AtomicU64 = AtomicU64::new(0);
static RAW_CPU_NS: AtomicU64 = AtomicU64::new(0);
static RAW_OPS: AtomicU64 = AtomicU64::new(0);
/// Every measurement slice draws fresh random keys/offsets (no repeats the
/// host could have cached).
static SEED: AtomicU64 = AtomicU64::new(1000);

fn next_seed() -> u64 {
    SEED.fetch_add(1, Ordering::Relaxed)
}

/// Random gets over `keys` from `threads` threads for `secs`; returns ops/s.
fn read_rate(db: &Db, keys: &[[u8; 16]], threads: usize, secs: f64) -> f64 {
    let done = AtomicU64::new(0);
    let stop = Instant::now() + Duration::from_secs_f64(secs);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for th in 0..threads {
            let tree = db.tree("bench").unwrap();
            let done = &done;
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(next_seed() + th as u64);
                let cpu0 = thread_cpu_us();
                let mut n = 0u64;
                while !n.is_multiple_of(256) || Instant::now() < stop {
                    let k = &keys[rng.gen_range(0..keys.len())];
                    let v = tree.get(k).unwrap().expect("key present");
                    assert_eq!(v.len(), 100);
                    n += 1;
                }
                done.fetch_add(n, Ordering::Relaxed);
                CPU_NS.fetch_add(((thread_cpu_us() - cpu0) * 1e3) as u64, Ordering::Relaxed);
                OPS.fetch_add(n, Ordering::Relaxed);
            });
        }
    });
    done.load(Ordering::Relaxed) as f64 / t0.elapsed().as_secs_f64()
}

/// Raw random page reads over the data file (O_DIRECT) from `threads`
/// threads, one read in flight each: the drive's rate at this page size
/// measured next to the engine's run, in reads/s.
fn raw_reads(path: &std::path::Path, ps: usize, threads: usize, secs: f64) -> f64 {
    use pagewise_io::{AlignedBuf, Backend, DirectMode, OpenOptions};
    let o = OpenOptions {
        direct: DirectMode::On,
        ..Default::default()
    };
    let f = pagewise_io::open(path, &o).expect("open for raw reads");
    let pages = f.size().unwrap() / ps as u64;
    let done = AtomicU64::new(0);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            let (f, done) = (&f, &done);
            s.spawn(move || {
                let mut buf = AlignedBuf::new(ps, 4096);
                let mut rng = SmallRng::seed_from_u64(next_seed());
                let cpu0 = thread_cpu_us();
                let mut n = 0u64;
                while t0.elapsed().as_secs_f64() < secs {
                    f.read_at(&mut buf, rng.gen_range(2..pages) * ps as u64)
                        .unwrap();
                    n += 1;
                }
                if threads == 1 {
                    let cpu = ((thread_cpu_us() - cpu0) * 1e3) as u64;
                    RAW_CPU_NS.fetch_add(cpu, Ordering::Relaxed);
                    RAW_OPS.fetch_add(n, Ordering::Relaxed);
                }
                done.fetch_add(n, Ordering::Relaxed);
            });
        }
    });
    done.load(Ordering::Relaxed) as f64 / t0.elapsed().as_secs_f64()
}

fn main() {
    let a = args();
    std::fs::create_dir_all(&a.dir).unwrap();
    let path = a.dir.join(format!("bench-{}-{}.pw", a.keys, a.page_size));
    for p in [
        path.clone(),
        pagewise::wal_path(&path),
        pagewise::lock_path(&path),
    ] {
        let _ = std::fs::remove_file(p);
    }
    let ks = keys(a.keys);
    let base = Options::default().page_size(a.page_size).direct_io(true);

    // Fill: one insert per commit, Buffered (no fsync per op), final checkpoint.
    let db = Db::create(
        &path,
        base.clone()
            .cache_bytes(a.fill_cache_mib << 20)
            .durability(Durability::Buffered)
            .wal_limit(a.wal_limit_mib << 20),
    )
    .unwrap();
    let tree = db.tree("bench").unwrap();
    let mut rng = SmallRng::seed_from_u64(1);
    let mut val = [0u8; 100];
    let t0 = Instant::now();
    for k in &ks {
        rng.fill_bytes(&mut val);
        tree.insert(k, val).unwrap();
    }
    db.checkpoint().unwrap();
    let fill_s = t0.elapsed().as_secs_f64();
    let s = db.stats();
    let t = &s.trees[0];
    let file_bytes = std::fs::metadata(&path).unwrap().len();
    let user = a.keys as f64 * 116.0;
    println!(
        "fill (cache {} MiB): {} keys ps={} in {:.1}s = {:.0} ops/s; file {:.1} MiB, height {}, leaf fill {:.1}%, {} leaves; written wal {:.1} MiB pages {:.1} MiB meta {:.1} MiB (WA {:.2}); {} checkpoints",
        a.fill_cache_mib,
        a.keys,
        a.page_size,
        fill_s,
        a.keys as f64 / fill_s,
        file_bytes as f64 / 1048576.0,
        t.height,
        t.avg_leaf_fill * 100.0,
        t.leaf_pages,
        s.wal.write_bytes as f64 / 1048576.0,
        s.pages.write_bytes as f64 / 1048576.0,
        s.meta.write_bytes as f64 / 1048576.0,
        (s.wal.write_bytes + s.pages.write_bytes + s.meta.write_bytes) as f64 / user,
        s.checkpoints
    );
    drop(tree);
    db.close().unwrap();

    // Whole Db cached: warm it with a full scan, then random gets.
    let db = Db::open(&path, base.clone().cache_bytes((file_bytes * 2) as usize)).unwrap();
    let n = db.tree("bench").unwrap().iter().count();
    assert_eq!(n, a.keys);
    let c1 = read_rate(&db, &ks, 1, a.read_secs);
    let ct = read_rate(&db, &ks, a.threads, a.read_secs);
    let s = db.stats();
    println!(
        "cached reads: 1 thread {:.0} gets/s, {} threads {:.0} gets/s (cache misses {} of {} lookups)",
        c1, a.threads, ct, s.cache_misses, s.cache_hits + s.cache_misses
    );
    db.close().unwrap();

    // Cache of cache_frac of the Db, direct I/O.
    let cache = (file_bytes as f64 * a.cache_frac) as usize;
    let db = Db::open(&path, base.clone().cache_bytes(cache)).unwrap();
    read_rate(&db, &ks, a.threads, 2.0); // warm the cache
                                         // Alternate 1-second slices of raw device reads, engine gets on 1 thread
                                         // and on T threads, so all three see the same background load; compare
                                         // medians.
    let s0 = db.stats();
    let (mut raw, mut raw_t) = (Vec::new(), Vec::new());
    let (mut one, mut many) = (Vec::new(), Vec::new());
    let slices = (a.read_secs as usize).max(3);
    let (mut cpu1, mut ops1) = (0u64, 0u64);
    let (mut cpu_t, mut ops_t) = (0u64, 0u64);
    for _ in 0..slices {
        raw.push(raw_reads(&path, a.page_size, 1, 1.0));
        raw_t.push(raw_reads(&path, a.page_size, a.threads, 1.0));
        let (c, o) = (CPU_NS.load(Ordering::Relaxed), OPS.load(Ordering::Relaxed));
        one.push(read_rate(&db, &ks, 1, 1.0));
        cpu1 += CPU_NS.load(Ordering::Relaxed) - c;
        ops1 += OPS.load(Ordering::Relaxed) - o;
        let (c, o) = (CPU_NS.load(Ordering::Relaxed), OPS.load(Ordering::Relaxed));
        many.push(read_rate(&db, &ks, a.threads, 1.0));
        cpu_t += CPU_NS.load(Ordering::Relaxed) - c;
        ops_t += OPS.load(Ordering::Relaxed) - o;
    }
    let s1 = db.stats();
    // Each slice lasts about 1 s, so the rates sum to the gets done.
    let gets: f64 = one.iter().chain(&many).sum();
    let per_get = (s1.pages.read_ops - s0.pages.read_ops) as f64 / gets;
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|x, y| x.partial_cmp(y).unwrap());
        v[v.len() / 2]
    };
    let (raw_m, raw_tm) = (median(&mut raw), median(&mut raw_t));
    let (u1, ut) = (median(&mut one), median(&mut many));
    println!(
        "{:.0}% cache ({:.1} MiB, direct={}), {slices} alternating 1 s slices, medians: raw QD1 {}-byte reads {:.0}/s (range {:.0}..{:.0}); engine 1 thread {:.0} gets/s = {:.0}% of raw; {} threads {:.0} gets/s = {:.2}x one thread; {:.2} page reads per get",
        a.cache_frac * 100.0,
        cache as f64 / 1048576.0,
        s1.direct_io,
        a.page_size,
        raw_m,
        raw[0],
        raw[raw.len() - 1],
        u1,
        100.0 * u1 / raw_m,
        a.threads,
        ut,
        ut / u1,
        per_get
    );
    println!(
        "   raw {} threads x QD1: {:.0} reads/s = {:.2}x raw QD1; engine {} threads = {:.0}% of raw {} threads",
        a.threads,
        raw_tm,
        raw_tm / raw_m,
        a.threads,
        100.0 * ut / raw_tm,
        a.threads
    );
    println!(
        "   CPU per operation (thread CPU time): raw read {:.1} us, engine get (1 thread) {:.1} us, ({} threads) {:.1} us",
        RAW_CPU_NS.load(Ordering::Relaxed) as f64 / 1e3 / RAW_OPS.load(Ordering::Relaxed) as f64,
        cpu1 as f64 / 1e3 / ops1 as f64,
        a.threads,
        cpu_t as f64 / 1e3 / ops_t as f64
    );
    db.close().unwrap();
}
