//! Instruction counts before and after the cleanup (issue 29): the bench's
//! fillrandom shape (random 16-byte keys, 100-byte values, batches of 1,000,
//! buffered log, direct I/O, 64 MiB cache) into a tree of KIND (btree or
//! bepsilon, default options), then a reopen with a 2 GiB cache, a warming
//! scan and GETS random point gets. Uses only API both commits have; the
//! B-epsilon options type is named by the alias below (sed per commit).
//!
//! fill_get_kind fill DIR KIND KEYS ; fill_get_kind get DIR KIND KEYS GETS

use pagewise::{Batch, Db, Durability, Options, Tree, TreeKind};
use rand::{rngs::SmallRng, RngCore, SeedableRng};

type BOpts = pagewise::BEpsilonOptions;
const BATCH: u64 = 1000;

fn key(i: u64) -> [u8; 16] {
    let mut rng = SmallRng::seed_from_u64(i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 7);
    let mut k = [0u8; 16];
    rng.fill_bytes(&mut k);
    k
}

fn kind(k: &str) -> TreeKind {
    match k {
        "btree" => TreeKind::BTree,
        "bepsilon" => TreeKind::BEpsilon(BOpts::default()),
        _ => panic!("KIND: btree or bepsilon"),
    }
}

fn fill(path: &std::path::Path, k: &str, keys: u64) {
    let o = Options::default()
        .cache_bytes(64 << 20)
        .durability(Durability::Buffered)
        .direct_io(true);
    let db = Db::open_or_create(path, o).expect("create the Db");
    db.tree_with("main", kind(k)).expect("create the tree");
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

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let usage = "fill_get_kind fill DIR KIND KEYS | fill_get_kind get DIR KIND KEYS GETS";
    let (mode, dir, k, keys) = match &a[..] {
        [_, m, d, k, n, ..] => (m.as_str(), std::path::PathBuf::from(d), k.clone(), n.parse::<u64>().expect(usage)),
        _ => panic!("{usage}"),
    };
    let path = dir.join("db.pw");
    if mode == "fill" {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create DIR");
        fill(&path, &k, keys);
        return;
    }
    let n: u64 = a.get(5).and_then(|s| s.parse().ok()).expect(usage);
    let o = Options::default()
        .cache_bytes(2 << 30)
        .durability(Durability::Buffered)
        .direct_io(true);
    let db = Db::open_or_create(&path, o).expect("open the Db");
    let t = db.tree_with("main", kind(&k)).expect("tree main");
    let warm = t.iter().try_fold(0u64, |n, kv| kv.map(|_| n + 1)).expect("scan");
    println!("warm {warm} found {}", gets(&t, keys, n));
}
