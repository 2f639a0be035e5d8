//! Paired flushes (docs/design.md, "B-epsilon nodes", paired flushes): a
//! batch's root over its budget flushes its two heaviest buffers at once,
//! the second on another thread. Default-sized nodes (1 MiB, so buffers pass
//! the 64 KiB a pair needs) under batches of puts, overwrites, removes and
//! upserts, against a BTreeMap model: every key and full scans both ways
//! while flushes pair, a snapshot taken before more pairs, `check`, a
//! reopen, and the events that show pairs happened at more than one height.

mod common;
use common::{check_clean, Append};
use pagewise::{BEpsilonOptions, Batch, Db, Durability, Event, EventListener, Options, TreeKind};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Heights of the nodes whose flushes paired, and of all flushes.
#[derive(Default)]
struct Flushes(Mutex<(Vec<u32>, u64)>);

impl EventListener for Flushes {
    fn on_event(&self, e: &Event) {
        if let Event::FlushBegin { height, paired } = *e {
            let mut g = self.0.lock().unwrap();
            g.1 += 1;
            if paired {
                g.0.push(height);
            }
        }
    }
}

fn opts(listener: Arc<Flushes>) -> Options {
    Options::default()
        .durability(Durability::Buffered)
        .cache_bytes(64 << 20)
        .merge_operator(Arc::new(Append))
        .event_listener(listener)
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn verify(db: &Db, model: &Model, seed: u64) {
    let tree = db.tree("t").unwrap();
    for (k, v) in model {
        assert_eq!(
            tree.get(k).unwrap().as_ref(),
            Some(v),
            "seed {seed} key {k:?}"
        );
    }
    let all: Vec<(Vec<u8>, Vec<u8>)> = tree.iter().map(|r| r.unwrap()).collect();
    assert!(
        all.iter().map(|(k, v)| (k, v)).eq(model.iter()),
        "seed {seed}: forward scan"
    );
    let back: Vec<(Vec<u8>, Vec<u8>)> = tree.iter().rev().map(|r| r.unwrap()).collect();
    assert!(
        back.iter().map(|(k, v)| (k, v)).eq(model.iter().rev()),
        "seed {seed}: backward"
    );
}

/// One batch of 1,000 writes over `keys` keys: puts (values of 20 to 200
/// bytes), removes and upserts, applied to the model too.
fn batch(rng: &mut SmallRng, keys: u64, model: &mut Model, round: usize) -> Batch {
    let mut b = Batch::new();
    for i in 0..1000 {
        let k = format!("key{:08}", rng.gen_range(0..keys)).into_bytes();
        match rng.gen_range(0..20) {
            0 => {
                b.remove("t", &k);
                model.remove(&k);
            }
            1 => {
                let op = [b'a' + (i % 26) as u8];
                b.upsert("t", &k, op);
                let v = model.entry(k).or_insert_with(|| b"^".to_vec());
                v.extend_from_slice(&op);
            }
            _ => {
                let len = rng.gen_range(20..200);
                let v: Vec<u8> = (0..len).map(|j| (round + j + i) as u8).collect();
                b.insert("t", &k, &v);
                model.insert(k, v);
            }
        }
    }
    b
}

#[test]
fn paired_flushes_match_the_model() {
    let seed: u64 = rand::random();
    eprintln!("paired flush seed {seed}");
    let mut rng = SmallRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let flushes = Arc::new(Flushes::default());
    let db = Db::create(&path, opts(flushes.clone())).unwrap();
    let kind = TreeKind::BEpsilon(BEpsilonOptions::default().value_extent_bytes(None));
    db.tree_with("t", kind).unwrap();
    let mut model = Model::new();
    let (rounds, keys) = (220usize, 150_000u64);
    let mut snap = None;
    for round in 0..rounds {
        let b = batch(&mut rng, keys, &mut model, round);
        db.apply(b).unwrap();
        if round == rounds / 2 {
            snap = Some((db.snapshot().unwrap(), model.clone()));
        }
        if round % 80 == 79 {
            verify(&db, &model, seed);
        }
    }
    let (paired, all) = flushes.0.lock().unwrap().clone();
    let heights: std::collections::BTreeSet<u32> = paired.iter().copied().collect();
    eprintln!(
        "{} of {all} flushes paired, at heights {heights:?}",
        paired.len()
    );
    assert!(
        paired.len() >= 20,
        "seed {seed}: {} paired flushes",
        paired.len()
    );
    let (snap, at_half) = snap.unwrap();
    let st = snap.tree("t").unwrap();
    let seen: Vec<(Vec<u8>, Vec<u8>)> = st.iter().map(|r| r.unwrap()).collect();
    assert!(
        seen.iter().map(|(k, v)| (k, v)).eq(at_half.iter()),
        "seed {seed}: snapshot"
    );
    drop(st);
    drop(snap);
    verify(&db, &model, seed);
    check_clean(&db);
    drop(db);
    let db = Db::open(&path, opts(Arc::new(Flushes::default()))).unwrap();
    verify(&db, &model, seed);
    check_clean(&db);
}
