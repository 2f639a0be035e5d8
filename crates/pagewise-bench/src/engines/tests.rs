//! The same read-back test against every adapter compiled in, checked against
//! a BTreeMap model: batches across tables, overwrites, deletes, point reads,
//! scans from arbitrary start keys, and the same again after close + reopen.

use crate::engine::{
    add_counter, compiled_engines, open_engine, open_engine_for, OpenFor, Settings, SyncPolicy,
    WriteOp,
};
use crate::keys::encode_key;
use crate::values::{Compressibility, ValueGen};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

const TABLES: [&str; 3] = ["alpha", "beta", "gamma"];
type Model = Vec<BTreeMap<Vec<u8>, Vec<u8>>>;

fn check(engine: &dyn crate::Engine, model: &Model, rng: &mut SmallRng, name: &str) {
    for (t, m) in model.iter().enumerate() {
        for (k, v) in m {
            let got = engine
                .get(t, k)
                .unwrap_or_else(|e| panic!("{name}: get: {e}"));
            assert_eq!(got.as_ref(), Some(v), "{name}: table {t} key {k:?}");
        }
        assert_eq!(
            engine.get(t, b"\xffnot-there").unwrap(),
            None,
            "{name}: absent key found"
        );
        for _ in 0..20 {
            let start = encode_key(rng.gen_range(0..1200), 16);
            let limit = rng.gen_range(1..50);
            let want: Vec<_> = m
                .range(start.clone()..)
                .take(limit)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let mut got = Vec::new();
            let n = engine
                .scan(t, &start, limit, &mut |k, v| {
                    got.push((k.to_vec(), v.to_vec()));
                    true
                })
                .unwrap_or_else(|e| panic!("{name}: scan: {e}"));
            assert_eq!(n, want.len(), "{name}: scan count from {start:?}");
            assert_eq!(got, want, "{name}: scan contents from {start:?}");
        }
        // From the very start (an empty start key), as readseq and warm-up do.
        let mut all = 0;
        engine
            .scan(t, b"", usize::MAX, &mut |_, _| {
                all += 1;
                true
            })
            .unwrap_or_else(|e| panic!("{name}: scan from the empty key: {e}"));
        assert_eq!(all, m.len(), "{name}: full scan of table {t}");
        let keys: Vec<Vec<u8>> = m
            .keys()
            .take(10)
            .cloned()
            .chain([b"zz-missing".to_vec()])
            .collect();
        let got = engine.multi_get(t, &keys).unwrap();
        assert_eq!(got.len(), keys.len());
        assert_eq!(
            got.last().unwrap(),
            &None,
            "{name}: multi_get of a missing key"
        );
        for (k, g) in keys.iter().zip(&got).take(keys.len() - 1) {
            assert_eq!(g.as_ref(), m.get(k), "{name}: multi_get {k:?}");
        }
    }
}

fn exercise(name: &str, sync: SyncPolicy, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let settings = Settings {
        cache_bytes: 4 << 20,
        sync,
        ..Settings::default()
    };
    let mut rng = SmallRng::seed_from_u64(seed);
    let values = ValueGen::new(Compressibility::Text, 120, seed);
    let mut model: Model = vec![BTreeMap::new(); TABLES.len()];
    let engine = open_engine(name, dir.path(), &settings, &TABLES)
        .unwrap_or_else(|e| panic!("{name}: open: {e}"));
    for round in 0..30u64 {
        let mut ops = Vec::new();
        for _ in 0..rng.gen_range(1..60) {
            let table = rng.gen_range(0..TABLES.len());
            let n = rng.gen_range(0..1000u64);
            let key = encode_key(n, 16);
            if rng.gen_ratio(1, 6) {
                model[table].remove(&key);
                ops.push(WriteOp::Delete { table, key });
            } else {
                // Empty values too: iiBench index entries have none.
                let value = if n % 17 == 0 {
                    Vec::new()
                } else {
                    values.value(n, round)
                };
                model[table].insert(key.clone(), value.clone());
                ops.push(WriteOp::Put { table, key, value });
            }
        }
        engine
            .write_batch(ops)
            .unwrap_or_else(|e| panic!("{name}: write_batch: {e}"));
    }
    check(engine.as_ref(), &model, &mut rng, name);
    engine.sync().unwrap();
    engine.close().unwrap();
    let engine = open_engine(name, dir.path(), &settings, &TABLES)
        .unwrap_or_else(|e| panic!("{name}: reopen: {e}"));
    check(
        engine.as_ref(),
        &model,
        &mut rng,
        &format!("{name} after reopen"),
    );
    engine.close().unwrap();
}

#[test]
fn every_adapter_reads_back_what_it_wrote() {
    let seed = 0x5eed_0001;
    for name in compiled_engines().into_iter().chain(["btreemap"]) {
        for sync in [SyncPolicy::Off, SyncPolicy::EveryBatch] {
            eprintln!("adapter {name} sync {sync:?} seed {seed:#x}");
            exercise(name, sync, seed);
        }
    }
}

/// Counter increments (the `incrandom` workload) end where the model's
/// [`add_counter`] does on every adapter, blind upserts and
/// read-modify-write alike: repeats in a batch add up, absent keys start at
/// the delta, longer values keep their tail; also after a reopen.
#[test]
fn every_adapter_increments_counters_like_the_model() {
    let seed = 0x5eed_0002;
    for name in compiled_engines().into_iter().chain(["btreemap"]) {
        eprintln!("adapter {name} seed {seed:#x}");
        let dir = tempfile::tempdir().unwrap();
        let settings = Settings {
            cache_bytes: 4 << 20,
            ..Settings::default()
        };
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let engine = open_engine(name, dir.path(), &settings, &TABLES).unwrap();
        let fill: Vec<WriteOp> = (0..200u64)
            .map(|n| {
                let (key, value) = (encode_key(n, 16), vec![n as u8; 3 + (n as usize % 40)]);
                model.insert(key.clone(), value.clone());
                WriteOp::Put {
                    table: 1,
                    key,
                    value,
                }
            })
            .collect();
        engine.write_batch(fill).unwrap();
        for _ in 0..40 {
            // Keys 0..300: a third absent at first; repeats within a batch.
            let keys: Vec<Vec<u8>> = (0..rng.gen_range(1..50))
                .map(|_| encode_key(rng.gen_range(0..300u64), 16))
                .collect();
            let delta = rng.gen_range(1..1u64 << 40);
            for k in &keys {
                let v = add_counter(model.get(k).map(Vec::as_slice), delta);
                model.insert(k.clone(), v);
            }
            engine
                .increment(1, &keys, delta)
                .unwrap_or_else(|e| panic!("{name}: increment: {e}"));
        }
        let check = |e: &dyn crate::Engine, when: &str| {
            for (k, v) in &model {
                assert_eq!(
                    e.get(1, k).unwrap().as_ref(),
                    Some(v),
                    "{name} {when}: {k:?}"
                );
            }
        };
        check(engine.as_ref(), "before close");
        engine.sync().unwrap();
        engine.close().unwrap();
        let engine = open_engine(name, dir.path(), &settings, &TABLES).unwrap();
        check(engine.as_ref(), "after reopen");
        engine.close().unwrap();
    }
}

#[test]
fn add_counter_adds_into_the_first_8_bytes_and_keeps_the_rest() {
    assert_eq!(add_counter(None, 5), 5u64.to_le_bytes().to_vec());
    assert_eq!(add_counter(Some(b"abc"), 7), 7u64.to_le_bytes().to_vec());
    let mut v = 250u64.to_le_bytes().to_vec();
    v.extend_from_slice(b"tail");
    let mut want = 260u64.to_le_bytes().to_vec();
    want.extend_from_slice(b"tail");
    assert_eq!(add_counter(Some(&v), 10), want);
    assert_eq!(
        add_counter(Some(&u64::MAX.to_le_bytes()), 2),
        1u64.to_le_bytes().to_vec(),
        "wraps"
    );
}

#[test]
fn unknown_and_missing_engines_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let e = open_engine("nosuch", dir.path(), &Settings::default(), &TABLES)
        .err()
        .unwrap();
    assert!(e.to_string().contains("unknown engine"), "{e}");
    if !cfg!(feature = "rocksdb") {
        let e = open_engine("rocksdb", dir.path(), &Settings::default(), &TABLES)
            .err()
            .unwrap();
        assert!(e.to_string().contains("--features"), "{e}");
    }
}

/// Files of `dir` this process holds open (from /proc/self/fd).
#[cfg(feature = "heed")]
fn open_files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter(|p| p.starts_with(dir))
        .collect()
}

#[cfg(feature = "heed")]
#[test]
fn an_lmdb_engine_dropped_without_close_releases_its_files() {
    // A phase stopped by Ctrl-C drops the engine; its mount must not stay busy.
    let dir = tempfile::tempdir().unwrap();
    let settings = Settings::default();
    let e = open_engine("lmdb", dir.path(), &settings, &TABLES).unwrap();
    let op = WriteOp::Put {
        table: 0,
        key: encode_key(1, 16),
        value: vec![7; 100],
    };
    e.write_batch(vec![op]).unwrap();
    assert!(
        !open_files_under(dir.path()).is_empty(),
        "open while in use"
    );
    drop(e);
    assert_eq!(
        open_files_under(dir.path()),
        Vec::<std::path::PathBuf>::new()
    );
}

fn small_cache() -> Settings {
    Settings {
        cache_bytes: 4 << 20,
        ..Settings::default()
    }
}

/// Keys 0..100 of table 1 with values "v{n}", written by one batch.
fn put_hundred(engine: &dyn crate::Engine, round: u8) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let model: BTreeMap<Vec<u8>, Vec<u8>> = (0..100u64)
        .map(|n| (encode_key(n, 16), format!("v{n}-{round}").into_bytes()))
        .collect();
    let ops: Vec<WriteOp> = model
        .iter()
        .map(|(k, v)| WriteOp::Put {
            table: 1,
            key: k.clone(),
            value: v.clone(),
        })
        .collect();
    engine.write_batch(ops).unwrap();
    model
}

/// A read view sees the Db as it was when taken on every adapter: not the
/// overwrites, deletes and inserts committed after it; a later view does.
#[test]
fn every_adapter_reads_a_view_as_of_when_it_was_taken() {
    for name in compiled_engines().into_iter().chain(["btreemap"]) {
        eprintln!("adapter {name}");
        let dir = tempfile::tempdir().unwrap();
        let settings = small_cache();
        let engine = open_engine(name, dir.path(), &settings, &TABLES).unwrap();
        let before = put_hundred(engine.as_ref(), 0);
        let view = engine
            .read_view()
            .unwrap_or_else(|e| panic!("{name}: view: {e}"));
        let after = put_hundred(engine.as_ref(), 1);
        let gone = encode_key(7, 16);
        let new = encode_key(500, 16);
        engine
            .write_batch(vec![
                WriteOp::Delete {
                    table: 1,
                    key: gone.clone(),
                },
                WriteOp::Put {
                    table: 1,
                    key: new.clone(),
                    value: b"new".to_vec(),
                },
            ])
            .unwrap();
        for (k, v) in &before {
            assert_eq!(view.get(1, k).unwrap().as_ref(), Some(v), "{name}: {k:?}");
        }
        assert_eq!(
            view.get(1, &new).unwrap(),
            None,
            "{name}: later insert seen"
        );
        assert_eq!(view.get(0, &new).unwrap(), None, "{name}: other table");
        drop(view);
        let later = engine.read_view().unwrap();
        assert_eq!(
            later.get(1, &gone).unwrap(),
            None,
            "{name}: delete not seen"
        );
        assert_eq!(later.get(1, &new).unwrap().as_deref(), Some(&b"new"[..]));
        let k = encode_key(8, 16);
        assert_eq!(later.get(1, &k).unwrap().as_ref(), after.get(&k));
        drop(later);
        engine.close().unwrap();
    }
}

/// Transactions read what is there (absent keys count as not found) and
/// their writes land, on every adapter opened for transactions; also after
/// a reopen.
#[test]
fn every_adapter_commits_transactions_like_the_model() {
    for name in compiled_engines().into_iter().chain(["btreemap"]) {
        eprintln!("adapter {name}");
        let dir = tempfile::tempdir().unwrap();
        let settings = small_cache();
        let open = || {
            open_engine_for(name, dir.path(), &settings, &TABLES, OpenFor::Transactions).unwrap()
        };
        let engine = open();
        let mut model = put_hundred(engine.as_ref(), 0);
        let mut rng = SmallRng::seed_from_u64(0x5eed_0003);
        for round in 0..30u64 {
            // Keys 0..150: a third absent at first.
            let reads: Vec<Vec<u8>> = (0..10)
                .map(|_| encode_key(rng.gen_range(0..150u64), 16))
                .collect();
            let writes: Vec<(Vec<u8>, Vec<u8>)> = (0..10)
                .map(|i| {
                    let k = encode_key(rng.gen_range(0..150u64), 16);
                    (k, format!("t{round}-{i}").into_bytes())
                })
                .collect();
            let want = reads.iter().filter(|k| model.contains_key(*k)).count() as u64;
            let done = engine
                .transact(1, &reads, &writes)
                .unwrap_or_else(|e| panic!("{name}: transact: {e}"));
            assert_eq!(done.found, want, "{name}: round {round} reads");
            assert_eq!(done.conflicts, 0, "{name}: one thread, no conflict");
            model.extend(writes);
        }
        let check = |e: &dyn crate::Engine, when: &str| {
            for (k, v) in &model {
                assert_eq!(e.get(1, k).unwrap().as_ref(), Some(v), "{name} {when}");
            }
        };
        check(engine.as_ref(), "before close");
        engine.close().unwrap();
        let engine = open();
        check(engine.as_ref(), "after reopen");
        engine.close().unwrap();
    }
}
