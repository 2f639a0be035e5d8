//! Write transactions: reads see the transaction's own writes over its
//! snapshot, abort leaves no trace, commits are validated (a change to
//! anything read is a conflict and writes nothing), and random
//! interleavings of transactions and plain writes match a model that
//! decides each conflict independently.

mod common;

use common::Append;
use pagewise::{BEpsilonOptions, Db, Durability, Error, Options, TreeKind};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;

fn open(dir: &std::path::Path) -> Db {
    let opts = Options::default()
        .page_size(1024)
        .cache_bytes(256 << 10)
        .durability(Durability::Buffered)
        .direct_io(false)
        .wal_limit(64 << 10)
        .merge_operator(Arc::new(Append));
    let db = Db::create(dir.join("db"), opts).unwrap();
    let beps = BEpsilonOptions {
        node_bytes: 8 << 10,
        basement_bytes: 1 << 10,
        fanout: 4,
        ..BEpsilonOptions::default()
    };
    db.tree_with("e", TreeKind::BEpsilon(beps)).unwrap();
    db
}

fn kvs(it: impl Iterator<Item = pagewise::Result<(Vec<u8>, Vec<u8>)>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.map(Result::unwrap).collect()
}

fn kv(k: &str, v: &str) -> (Vec<u8>, Vec<u8>) {
    (k.as_bytes().to_vec(), v.as_bytes().to_vec())
}

#[test]
fn reads_see_own_writes_over_the_snapshot_both_kinds() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    for t in ["b", "e"] {
        let tree = db.tree(t).unwrap();
        for k in ["a", "c", "e", "g"] {
            tree.insert(k, "old").unwrap();
        }
    }
    let mut tx = db.transaction().unwrap();
    for t in ["b", "e"] {
        tx.insert(t, "b", "new");
        tx.insert(t, "c", "new");
        tx.remove(t, "e");
        assert_eq!(tx.get(t, "c").unwrap(), Some(b"new".to_vec()));
        assert_eq!(tx.get(t, "e").unwrap(), None);
        assert_eq!(tx.get(t, "a").unwrap(), Some(b"old".to_vec()));
        let want = vec![
            kv("a", "old"),
            kv("b", "new"),
            kv("c", "new"),
            kv("g", "old"),
        ];
        assert_eq!(kvs(tx.range(t, &b""[..]..).unwrap()), want);
        let mut rev = want.clone();
        rev.reverse();
        assert_eq!(kvs(tx.range(t, &b""[..]..).unwrap().rev()), rev);
        // From both ends at once: every entry once.
        let mut it = tx.range(t, &b"b"[..]..=&b"g"[..]).unwrap();
        let (f, b) = (
            it.next().unwrap().unwrap(),
            it.next_back().unwrap().unwrap(),
        );
        assert_eq!((f, b), (kv("b", "new"), kv("g", "old")));
        assert_eq!(kvs(it), vec![kv("c", "new")]);
    }
    tx.upsert("e", "a", "+1");
    tx.upsert("e", "z", "+2");
    assert_eq!(tx.get("e", "a").unwrap(), Some(b"old+1".to_vec()));
    assert_eq!(tx.get("e", "z").unwrap(), Some(b"^+2".to_vec()));
    assert_eq!(
        db.tree("b").unwrap().get("b").unwrap(),
        None,
        "nothing before commit"
    );
    tx.commit().unwrap();
    assert_eq!(
        db.tree("b").unwrap().get("b").unwrap(),
        Some(b"new".to_vec())
    );
    assert_eq!(
        db.tree("e").unwrap().get("a").unwrap(),
        Some(b"old+1".to_vec())
    );
    assert_eq!(db.tree("e").unwrap().get("e").unwrap(), None);
}

#[test]
fn an_aborted_transaction_leaves_no_trace() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let before = db.stats().wal.write_bytes;
    let mut tx = db.transaction().unwrap();
    tx.insert("b", "k", "v");
    tx.upsert("e", "k", "v");
    drop(tx);
    let mut tx = db.transaction().unwrap();
    tx.insert("b", "k2", "v");
    tx.abort();
    assert_eq!(db.stats().wal.write_bytes, before, "nothing logged");
    assert_eq!(db.tree("b").unwrap().get("k").unwrap(), None);
    assert!(db.tree_kind("b").is_none(), "not even the tree");
    drop(db);
    let db = Db::open(
        dir.path().join("db"),
        Options::default()
            .direct_io(false)
            .merge_operator(Arc::new(Append)),
    )
    .unwrap();
    assert!(db.tree_kind("b").is_none());
    assert_eq!(db.tree("e").unwrap().get("k").unwrap(), None);
}

#[test]
fn a_change_to_what_was_read_conflicts_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let t = db.tree("b").unwrap();
    for k in ["a", "c", "e"] {
        t.insert(k, "0").unwrap();
    }
    // A read key changed.
    let mut tx = db.transaction().unwrap();
    tx.get("b", "a").unwrap();
    tx.insert("b", "x", "1");
    t.insert("a", "2").unwrap();
    assert!(matches!(tx.commit(), Err(Error::Conflict { .. })));
    assert_eq!(t.get("x").unwrap(), None);
    // A key appeared in the consumed part of a range; one after it does not count.
    let mut tx = db.transaction().unwrap();
    let mut it = tx.range("b", &b"a"[..]..).unwrap();
    assert_eq!(it.next().unwrap().unwrap(), kv("a", "2"));
    assert_eq!(it.next().unwrap().unwrap(), kv("c", "0"));
    drop(it);
    tx.insert("b", "y", "1");
    t.insert("d", "new").unwrap();
    tx.commit().unwrap();
    let mut tx = db.transaction().unwrap();
    let _ = kvs(tx.range("b", &b"a"[..]..&b"c"[..]).unwrap());
    tx.insert("b", "y", "2");
    t.insert("b", "new").unwrap();
    assert!(matches!(tx.commit(), Err(Error::Conflict { .. })));
    assert_eq!(t.get("y").unwrap(), Some(b"1".to_vec()));
    // Write skew: each reads both and writes one; the second conflicts.
    let (mut t1, mut t2) = (db.transaction().unwrap(), db.transaction().unwrap());
    for tx in [&t1, &t2] {
        tx.get("b", "a").unwrap();
        tx.get("b", "c").unwrap();
    }
    t1.insert("b", "a", "t1");
    t2.insert("b", "c", "t2");
    t1.commit().unwrap();
    assert!(matches!(t2.commit(), Err(Error::Conflict { .. })));
    // Blind writes never conflict.
    let mut tx = db.transaction().unwrap();
    tx.insert("b", "a", "blind");
    t.insert("a", "other").unwrap();
    tx.commit().unwrap();
    assert_eq!(t.get("a").unwrap(), Some(b"blind".to_vec()));
}

/// Threads increment shared counters with read-modify-write transactions,
/// retrying conflicts: no increment is lost (serializable), none doubled.
#[test]
fn concurrent_increments_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (threads, each) = (4u64, 150u64);
    std::thread::scope(|s| {
        for th in 0..threads {
            let db = db.clone();
            s.spawn(move || {
                for i in 0..each {
                    let key = format!("c{}", (th + i) % 3);
                    for attempt in 0..10_000 {
                        let mut tx = db.transaction().unwrap();
                        let n = tx
                            .get("b", &key)
                            .unwrap()
                            .map_or(0, |v| u64::from_be_bytes(v.try_into().unwrap()));
                        tx.insert("b", &key, (n + 1).to_be_bytes());
                        match tx.commit() {
                            Ok(()) => break,
                            Err(Error::Conflict { .. }) => assert!(attempt < 9_999),
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
            });
        }
    });
    let t = db.tree("b").unwrap();
    let total: u64 = (0..3)
        .map(|c| u64::from_be_bytes(t.get(format!("c{c}")).unwrap().unwrap().try_into().unwrap()))
        .sum();
    assert_eq!(total, threads * each);
}

#[derive(Debug, Clone)]
enum Step {
    Begin,
    Get(usize, u8),
    Put(usize, u8, u8),
    Del(usize, u8),
    Scan(usize, u8, u8),
    Commit(usize),
    Abort(usize),
    Plain(u8, Option<u8>),
    Checkpoint,
}

fn step() -> impl Strategy<Value = Step> {
    let k = || 0u8..24;
    prop_oneof![
        2 => Just(Step::Begin),
        4 => (0usize..3, k()).prop_map(|(i, a)| Step::Get(i, a)),
        4 => (0usize..3, k(), any::<u8>()).prop_map(|(i, a, v)| Step::Put(i, a, v)),
        1 => (0usize..3, k()).prop_map(|(i, a)| Step::Del(i, a)),
        1 => (0usize..3, k(), k()).prop_map(|(i, a, b)| Step::Scan(i, a.min(b), a.max(b))),
        2 => (0usize..3).prop_map(Step::Commit),
        1 => (0usize..3).prop_map(Step::Abort),
        3 => (k(), prop::option::of(any::<u8>())).prop_map(|(a, v)| Step::Plain(a, v)),
        1 => Just(Step::Checkpoint),
    ]
}

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

/// A transaction in the model: the state it began from, its writes, and
/// the keys and key ranges it read (the model's own conflict rule).
struct Open {
    tx: pagewise::Transaction,
    begin: Map,
    writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    read_keys: Vec<Vec<u8>>,
    read_ranges: Vec<(Vec<u8>, Vec<u8>)>,
}

fn key(a: u8) -> Vec<u8> {
    vec![b'k', a]
}

fn view(o: &Open) -> Map {
    let mut m = o.begin.clone();
    for (k, v) in &o.writes {
        match v {
            Some(v) => m.insert(k.clone(), v.clone()),
            None => m.remove(k),
        };
    }
    m
}

fn changed(o: &Open, now: &Map) -> bool {
    let keys = o.read_keys.iter().any(|k| o.begin.get(k) != now.get(k));
    let ranges = o.read_ranges.iter().any(|(a, b)| {
        let r = |m: &Map| {
            m.range(a.clone()..=b.clone())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<Vec<_>>()
        };
        r(&o.begin) != r(now)
    });
    keys || ranges
}

fn run(tree: &str, steps: Vec<Step>) {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let t = db.tree(tree).unwrap();
    let mut model = Map::new();
    let mut open_txs: Vec<Open> = Vec::new();
    for st in steps {
        match st {
            Step::Begin if open_txs.len() < 3 => open_txs.push(Open {
                tx: db.transaction().unwrap(),
                begin: model.clone(),
                writes: BTreeMap::new(),
                read_keys: Vec::new(),
                read_ranges: Vec::new(),
            }),
            Step::Get(i, a) if i < open_txs.len() => {
                let o = &mut open_txs[i];
                let got = o.tx.get(tree, key(a)).unwrap();
                assert_eq!(got.as_ref(), view(o).get(&key(a)));
                if !o.writes.contains_key(&key(a)) {
                    o.read_keys.push(key(a));
                }
            }
            Step::Put(i, a, v) if i < open_txs.len() => {
                let o = &mut open_txs[i];
                o.tx.insert(tree, key(a), [v]);
                o.writes.insert(key(a), Some(vec![v]));
            }
            Step::Del(i, a) if i < open_txs.len() => {
                let o = &mut open_txs[i];
                o.tx.remove(tree, key(a));
                o.writes.insert(key(a), None);
            }
            Step::Scan(i, a, b) if i < open_txs.len() => {
                let o = &mut open_txs[i];
                let got = kvs(o.tx.range(tree, key(a)..=key(b)).unwrap());
                let want: Vec<_> = view(o)
                    .range(key(a)..=key(b))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(got, want);
                o.read_ranges.push((key(a), key(b)));
            }
            Step::Commit(i) if i < open_txs.len() => {
                let o = open_txs.remove(i);
                // A transaction without writes commits at its snapshot.
                let conflict = !o.writes.is_empty() && changed(&o, &model);
                let r = o.tx.commit();
                assert_eq!(matches!(r, Err(Error::Conflict { .. })), conflict, "{r:?}");
                if !conflict {
                    r.unwrap();
                    for (k, v) in o.writes {
                        match v {
                            Some(v) => model.insert(k, v),
                            None => model.remove(&k),
                        };
                    }
                }
            }
            Step::Abort(i) if i < open_txs.len() => drop(open_txs.remove(i)),
            Step::Plain(a, v) => {
                match v {
                    Some(v) => {
                        t.insert(key(a), [v]).unwrap();
                        model.insert(key(a), vec![v]);
                    }
                    None => {
                        t.remove(key(a)).unwrap();
                        model.remove(&key(a));
                    }
                };
            }
            Step::Checkpoint => db.checkpoint().unwrap(),
            _ => {}
        }
    }
    drop(open_txs);
    let got = kvs(t.iter());
    let want: Vec<_> = model.into_iter().collect();
    assert_eq!(got, want);
    assert!(db.check().unwrap().is_ok());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn transactions_match_the_model_btree(steps in prop::collection::vec(step(), 1..200)) {
        run("b", steps);
    }

    #[test]
    fn transactions_match_the_model_bepsilon(steps in prop::collection::vec(step(), 1..200)) {
        run("e", steps);
    }
}
