//! The engine's memory against its cache budget: a counting global
//! allocator records the highest live heap while a B-epsilon tree is filled
//! with puts, then takes counter upserts, with a cache far smaller than the
//! data. Clean nodes, dirty nodes and checkpoints together must stay within
//! `cache_bytes` plus [`OVERHEAD_BYTES`] (docs/design.md, "Buffer pool").
//! One test in this binary, so no other test's allocations are counted.

use pagewise::{
    BEpsilonOptions, Batch, Compression, Db, Durability, MergeOperator, Options, TreeKind,
};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};
use std::sync::Arc;

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

/// glibc malloc's chunk for a request: what the process really holds.
fn chunk(n: usize) -> isize {
    ((n + 8).next_multiple_of(16).max(32)) as isize
}

// SAFETY: every call forwards to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let now = LIVE.fetch_add(chunk(l.size()), Relaxed) + chunk(l.size());
        PEAK.fetch_max(now, Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(chunk(l.size()), Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        let now = LIVE.fetch_add(chunk(n) - chunk(l.size()), Relaxed) + chunk(n) - chunk(l.size());
        PEAK.fetch_max(now, Relaxed);
        System.realloc(p, l, n)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The engine's memory besides its cache budget: the log's write buffer
/// (flushed at 1 MiB), a node being encoded and compressed at a
/// checkpoint, the messages a flush moves, and small bookkeeping.
const OVERHEAD_BYTES: isize = 6 << 20;
const CACHE_BYTES: usize = 16 << 20;

/// Adds little-endian u64 operands to the value (the bench's counters).
struct CounterAdd;

impl MergeOperator for CounterAdd {
    fn name(&self) -> &str {
        "counter-add"
    }
    fn full_merge(&self, _key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Vec<u8> {
        let mut v = existing.map_or_else(|| vec![0u8; 8], <[u8]>::to_vec);
        v.resize(v.len().max(8), 0);
        let mut n = u64::from_le_bytes(v[..8].try_into().unwrap());
        for o in operands {
            let mut d = [0u8; 8];
            d[..o.len().min(8)].copy_from_slice(&o[..o.len().min(8)]);
            n = n.wrapping_add(u64::from_le_bytes(d));
        }
        v[..8].copy_from_slice(&n.to_le_bytes());
        v
    }
}

/// The i-th of `n` keys in a scattered order (16 bytes); a permutation of
/// `0..n` while `n` has no factor 1,000,003 (a prime).
fn key(i: u64, n: u64) -> [u8; 16] {
    let k = (i % n) * 1_000_003 % n;
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&k.to_be_bytes());
    out[8..].copy_from_slice(&(k ^ 0x5555).to_le_bytes());
    out
}

/// Commits `count` batches of 100 ops made by `op`.
fn run(db: &Db, count: u64, mut op: impl FnMut(&mut Batch, u64)) {
    for b in 0..count {
        let mut batch = Batch::new();
        for j in 0..100 {
            op(&mut batch, b * 100 + j);
        }
        db.apply(batch).unwrap();
    }
}

#[test]
fn bepsilon_fill_and_upserts_stay_within_the_cache_budget() {
    let dir = tempfile::tempdir().unwrap();
    let kind = TreeKind::BEpsilon(
        BEpsilonOptions::default()
            .node_bytes(256 << 10)
            .basement_bytes(16 << 10)
            .compression(Compression::Lz4),
    );
    let opts = Options::default()
        .cache_bytes(CACHE_BYTES)
        .durability(Durability::Buffered)
        .direct_io(false)
        .merge_operator(Arc::new(CounterAdd));
    let n: u64 = 200_000; // 23 MB of keys and values: above the cache
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    let db = Db::create(dir.path().join("db"), opts).unwrap();
    db.tree_with("t", kind).unwrap();
    let value = [7u8; 100];
    run(&db, n / 100, |b, i| b.insert("t", key(i, n), value));
    let fill_peak = PEAK.swap(LIVE.load(Relaxed), Relaxed) - base;
    let s = db.stats();
    assert!(
        s.checkpoints + s.write_backs >= 3,
        "the fill outgrew the dirty budget (checkpoints or leaf write-backs): {s:?}"
    );
    run(&db, n / 100, |b, i| {
        b.upsert("t", key(i * 7, n), 1u64.to_le_bytes())
    });
    // Every key took one increment (7 is prime to n).
    let upsert_peak = PEAK.load(Relaxed) - base;
    let t = db.tree("t").unwrap();
    let v = t.get(key(0, n)).unwrap().unwrap();
    assert_eq!(
        u64::from_le_bytes(v[..8].try_into().unwrap()),
        0x0707_0707_0707_0708
    );
    let limit = CACHE_BYTES as isize + OVERHEAD_BYTES;
    eprintln!("peak live heap: fill {fill_peak}, upserts {upsert_peak}, limit {limit}");
    assert!(
        fill_peak <= limit,
        "fill: {fill_peak} bytes live, limit {limit}"
    );
    assert!(
        upsert_peak <= limit,
        "upserts: {upsert_peak} bytes live, limit {limit}"
    );
    assert!(
        fill_peak > CACHE_BYTES as isize / 2,
        "the cache was used: {fill_peak}"
    );
}
