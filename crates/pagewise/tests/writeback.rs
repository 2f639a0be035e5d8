//! Leaf write-back (docs/design.md, "Checkpoints", leaf write-back): with a
//! log limit no run reaches, the dirty budget alone paces the work, so the
//! B-epsilon tree's dirty leaves are written to fresh extents between
//! checkpoints. Every case checks the tree against a BTreeMap model, and
//! after each write-back the power is cut in every crash mode: recovery must
//! give the model (Sync commits), so a written-back extent can never have
//! overwritten anything the durable checkpoint references. Prints its seed;
//! PAGEWISE_WRITEBACK_SEED reruns one.

mod common;
use common::Append;
use pagewise::{BEpsilonOptions, Batch, Db, Durability, Options, TreeKind};
use pagewise_io::{CrashMode, Fs, SimFs};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

const PATH: &str = "/db/wb";
type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn opts(fs: Arc<dyn Fs>) -> Options {
    Options::default()
        .page_size(512)
        .cache_bytes(96 * 1024)
        .durability(Durability::Sync)
        .direct_io(true)
        .wal_limit(64 << 20)
        .merge_operator(Arc::new(Append))
        .fs(fs)
}

fn kind() -> TreeKind {
    TreeKind::BEpsilon(
        BEpsilonOptions::default()
            .node_bytes(1024)
            .basement_bytes(128)
            .fanout(4),
    )
}

fn seed() -> u64 {
    std::env::var("PAGEWISE_WRITEBACK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_0B0C)
}

/// A batch of puts, removes and upserts on random keys, applied to `model`.
fn batch(rng: &mut SmallRng, model: &mut Model) -> Batch {
    let mut b = Batch::new();
    for _ in 0..rng.gen_range(1..40) {
        let k = format!("{:06}", rng.gen_range(0..4000u32)).into_bytes();
        match rng.gen_range(0..10) {
            0 => {
                b.remove("t", &k);
                model.remove(&k);
            }
            1 => {
                let op = [rng.gen::<u8>()];
                b.upsert("t", &k, op);
                model.entry(k).or_insert_with(|| b"^".to_vec()).push(op[0]);
            }
            _ => {
                let v = vec![rng.gen::<u8>(); rng.gen_range(1..60)];
                b.insert("t", &k, &v);
                model.insert(k, v);
            }
        }
    }
    b
}

fn contents(db: &Db) -> Model {
    let t = db.tree("t").unwrap();
    t.iter().map(Result::unwrap).collect()
}

/// Reopens a power-cut image of `sim` and checks it holds `model`.
fn recover(sim: &SimFs, seed: u64, mode: CrashMode, model: &Model, what: &str) {
    let img = sim.crash(seed, mode);
    let db = Db::open(PATH, opts(Arc::new(img)))
        .unwrap_or_else(|e| panic!("{what} {mode:?}: reopen: {e}"));
    assert!(
        &contents(&db) == model,
        "{what} {mode:?}: recovered tree differs from the model"
    );
    let rep = db.check().unwrap();
    assert!(rep.is_ok(), "{what} {mode:?}: {:?}", rep.problems);
}

#[test]
fn written_back_leaves_match_a_model_through_power_cuts() {
    let seed = seed();
    eprintln!("write-back seed {seed} (rerun: PAGEWISE_WRITEBACK_SEED={seed})");
    let mut rng = SmallRng::seed_from_u64(seed);
    let sim = SimFs::with_alignment(512);
    sim.create_dir_all(Path::new("/db")).unwrap();
    let db = Db::create(PATH, opts(Arc::new(sim.clone()))).unwrap();
    db.tree_with("t", kind()).unwrap();
    let mut model = Model::new();
    let (mut cuts, mut last_write_backs) = (0u64, 0u64);
    for i in 0..1500u64 {
        db.apply(batch(&mut rng, &mut model)).unwrap();
        let s = db.stats();
        if s.write_backs > last_write_backs {
            last_write_backs = s.write_backs;
            // Just after a write-back that no checkpoint followed: its leaves
            // are on disk, named only by dirty parents in memory.
            let mode = CrashMode::ALL[(cuts % 3) as usize];
            recover(&sim, seed ^ i, mode, &model, &format!("batch {i}"));
            cuts += 1;
        }
        if i % 100 == 99 {
            assert!(
                contents(&db) == model,
                "batch {i}: tree differs from the model"
            );
        }
    }
    let s = db.stats();
    eprintln!(
        "{} write-backs, {} checkpoints, {cuts} power cuts after write-backs",
        s.write_backs, s.checkpoints
    );
    assert!(
        s.write_backs >= 10 && s.write_backs > s.checkpoints && cuts >= 10,
        "the dirty budget should pace the run by write-backs: {} write-backs, {} checkpoints, {cuts} cuts",
        s.write_backs,
        s.checkpoints
    );
    let rep = db.check().unwrap();
    assert!(rep.is_ok(), "{:?}", rep.problems);
    db.close().unwrap();
    let db = Db::open(PATH, opts(Arc::new(sim.clone()))).unwrap();
    assert!(contents(&db) == model, "after a clean reopen");
}

/// A Db of B+trees only has no leaves to write back: the dirty budget
/// checkpoints as before, and no write-back is counted.
#[test]
fn a_btree_only_db_checkpoints_at_the_dirty_budget() {
    let sim = SimFs::with_alignment(512);
    sim.create_dir_all(Path::new("/db")).unwrap();
    let db = Db::create(PATH, opts(Arc::new(sim.clone()))).unwrap();
    let t = db.tree("b").unwrap();
    for i in 0..4000u32 {
        t.insert(
            format!("{:08}", i.wrapping_mul(2_654_435_761) % 100_000),
            [7u8; 40],
        )
        .unwrap();
    }
    let s = db.stats();
    assert!(s.checkpoints > 0, "the dirty budget must checkpoint");
    assert_eq!(s.write_backs, 0);
}
