//! A deterministic fill-then-get workload for instruction counts
//! (docs/benchmarks.md, "Engine against peers (5M rows)": the engine's
//! seam, measured in instructions): the bench's
//! fillrandom shape (random 16-byte keys, 100-byte values, batches of 1,000,
//! buffered log, direct I/O, 64 MiB cache), then a reopen with a 2 GiB cache,
//! a full scan to warm it, and `GETS` random point gets.
//!
//! ```sh
//! fill_get fill DIR KEYS [bepsilon|bepsilon-inline]   # builds DIR/db.pw: a B+tree, or a default
//!                                        # B-epsilon tree (inline: without value extents)
//! fill_get get DIR KEYS GETS             # warm scan, then GETS gets
//! fill_get scan DIR KEYS SCANS LEN       # warm scan, then SCANS range scans of LEN
//! fill_get bscan DIR KEYS SCANS LEN      # the same over ranges bounded above, each
//!                                        # holding about LEN keys
//! valgrind --tool=cachegrind fill_get get DIR 1000000 300000   # minus a GETS=0 run
//! ```
//!
//! The source uses only API that predates the seam, so the same file builds
//! against an older checkout for a before/after comparison.

use pagewise::{BEpsilonOptions, Batch, Db, Durability, Options, Tree, TreeKind};
use rand::{rngs::SmallRng, RngCore, SeedableRng};

const BATCH: u64 = 1000;

fn key(i: u64) -> [u8; 16] {
    let mut rng = SmallRng::seed_from_u64(i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 7);
    let mut k = [0u8; 16];
    rng.fill_bytes(&mut k);
    k
}

fn fill(path: &std::path::Path, keys: u64, kind: Option<TreeKind>) {
    let o = Options::default()
        .cache_bytes(64 << 20)
        .durability(Durability::Buffered)
        .direct_io(true);
    let db = Db::open_or_create(path, o).expect("create the Db");
    if let Some(kind) = kind {
        db.tree_with("main", kind).expect("create the tree");
    }
    let mut v = [0u8; 100];
    let mut rng = SmallRng::seed_from_u64(5);
    for b in 0..keys.div_ceil(BATCH) {
        let mut batch = Batch::new();
        for i in b * BATCH..((b + 1) * BATCH).min(keys) {
            rng.fill_bytes(&mut v);
            batch.insert("main", key(i), v);
        }
        db.apply(batch).expect("apply a batch");
    }
    db.close().expect("close");
}

#[inline(never)]
fn gets(t: &Tree, keys: u64, n: u64) -> u64 {
    let mut rng = SmallRng::seed_from_u64(99);
    (0..n)
        .filter(|_| t.get(key(rng.next_u64() % keys)).expect("get").is_some())
        .count() as u64
}

/// A uniform random 16-byte key: where a scan starts.
fn random_key(rng: &mut SmallRng) -> [u8; 16] {
    let mut k = [0u8; 16];
    rng.fill_bytes(&mut k);
    k
}

#[inline(never)]
fn scans(t: &Tree, n: u64, len: usize) -> u64 {
    let mut rng = SmallRng::seed_from_u64(98);
    let mut seen = 0u64;
    for _ in 0..n {
        let start = random_key(&mut rng);
        let mut entries = t.range(&start[..]..);
        for _ in 0..len {
            let Some(entry) = entries.next_ref() else {
                break;
            };
            seen += entry.expect("scan").1.len() as u64;
        }
    }
    seen
}

/// `n` scans of ranges from a random key to one about `len` keys above
/// it (keys are uniform over 16 bytes), each read to its end.
#[inline(never)]
fn bounded_scans(t: &Tree, n: u64, keys: u64, len: usize) -> u64 {
    let mut rng = SmallRng::seed_from_u64(98);
    let width = u128::MAX / u128::from(keys) * len as u128;
    let mut seen = 0u64;
    for _ in 0..n {
        let start = random_key(&mut rng);
        let end = u128::from_be_bytes(start)
            .saturating_add(width)
            .to_be_bytes();
        for kv in t.range(start.to_vec()..end.to_vec()) {
            seen += kv.expect("scan").0.len() as u64 / 16;
        }
    }
    seen
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let usage = "usage: fill_get fill DIR KEYS [bepsilon] | fill_get get DIR KEYS GETS | fill_get scan|bscan DIR KEYS SCANS LEN";
    let (mode, dir, keys) = match &a[..] {
        [_, m, d, k, ..] => (m.as_str(), std::path::PathBuf::from(d), k.parse::<u64>()),
        _ => panic!("{usage}"),
    };
    let keys = keys.expect(usage);
    let path = dir.join("db.pw");
    if mode == "fill" {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create DIR");
        let o = BEpsilonOptions::default();
        let kind = match a.get(4).map(String::as_str) {
            Some("bepsilon") => Some(TreeKind::BEpsilon(o)),
            Some("bepsilon-inline") => Some(TreeKind::BEpsilon(o.value_extent_bytes(None))),
            _ => None,
        };
        fill(&path, keys, kind);
        return;
    }
    let n: u64 = a.get(4).and_then(|s| s.parse().ok()).expect(usage);
    let o = Options::default()
        .cache_bytes(2 << 30)
        .durability(Durability::Buffered)
        .direct_io(true);
    let db = Db::open_or_create(&path, o).expect("open the Db");
    let t = db.tree("main").expect("tree main");
    let warm = t
        .iter()
        .try_fold(0u64, |n, kv| kv.map(|_| n + 1))
        .expect("scan");
    if mode == "scan" || mode == "bscan" {
        let len: usize = a.get(5).and_then(|s| s.parse().ok()).expect(usage);
        match mode {
            "scan" => println!("warm {warm} value bytes {}", scans(&t, n, len)),
            _ => println!("warm {warm} keys {}", bounded_scans(&t, n, keys, len)),
        }
        return;
    }
    println!("warm {warm} found {}", gets(&t, keys, n));
}
