//! Format version 1 files (the fixture was written by the version-1 engine:
//! 512 B pages, three trees, an overflow value, and a log holding batches not
//! yet checkpointed) open, read and upgrade to the current version in place. A power
//! cut at any write or sync of the upgrading open leaves a file that opens
//! with the same contents. docs/design.md, "Format versions".

use pagewise::{Db, Error, Options, TreeKind, FORMAT_VERSION};
use pagewise_io::{
    AlignedBuf, CrashMode, FaultInjector, FaultKinds, Faulty, Fs, OpenOptions, SimFs,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

const DATA: &[u8] = include_bytes!("fixtures/v1/v1.pw");
const WAL: &[u8] = include_bytes!("fixtures/v1/v1.pw-wal");

type Contents = BTreeMap<(String, Vec<u8>), Vec<u8>>;

/// What the version-1 generator wrote, computed independently of any file.
fn expected() -> Contents {
    let mut m = Contents::new();
    let mut put = |t: &str, k: &[u8], v: &[u8]| m.insert((t.to_string(), k.to_vec()), v.to_vec());
    for i in 0..300u32 {
        if i % 7 != 0 && i != 1 {
            let v = format!("value-{i}-{}", "x".repeat((i % 40) as usize));
            put("alpha", format!("a{i:05}").as_bytes(), v.as_bytes());
        }
    }
    let big: Vec<u8> = (0..3000u32).map(|i| (i * 7 % 251) as u8).collect();
    put("alpha", b"big", &big);
    for i in 0..50u32 {
        if i != 7 {
            put(
                "beta",
                format!("b{i:03}").as_bytes(),
                i.to_string().as_bytes(),
            );
        }
    }
    for i in 0..20u32 {
        put(
            "alpha",
            format!("log{i:03}").as_bytes(),
            format!("logged-{i}").as_bytes(),
        );
    }
    put("gamma", b"g1", b"only in the log");
    m
}

fn read_all(db: &Db) -> Contents {
    let mut m = Contents::new();
    for name in db.tree_names() {
        for kv in db.tree(&name).unwrap().iter() {
            let (k, v) = kv.unwrap();
            m.insert((name.clone(), k), v);
        }
    }
    m
}

/// (version, generation) of each superblock slot (512 B pages).
fn slot_versions(data: &[u8]) -> [(u32, u64); 2] {
    let at = |slot: usize, off: usize, n: usize| {
        let b = &data[slot * 512 + off..slot * 512 + off + n];
        b.iter().rev().fold(0u64, |acc, &x| acc << 8 | x as u64)
    };
    [0, 1].map(|s| (at(s, 40, 4) as u32, at(s, 48, 8)))
}

#[test]
fn fixture_is_version_1() {
    let [a, b] = slot_versions(DATA);
    assert_eq!(
        (a.0, b.0),
        (1, 1),
        "both slots of the fixture are version 1"
    );
    assert_eq!(FORMAT_VERSION, 5);
}

#[test]
fn version_1_file_upgrades_on_its_first_read_write_open() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("v1.pw");
    std::fs::write(&p, DATA).unwrap();
    std::fs::write(d.path().join("v1.pw-wal"), WAL).unwrap();
    let ro = Options::default().direct_io(false).read_only(true);
    match Db::open(&p, ro) {
        Err(Error::NeedsRecovery { records, .. }) => assert!(records >= 20, "{records}"),
        other => panic!("read-only open of a log with records: {other:?}"),
    }
    let db = Db::open(&p, Options::default().direct_io(false)).unwrap();
    assert_eq!(read_all(&db), expected());
    for t in ["alpha", "beta", "gamma"] {
        assert_eq!(db.tree_kind(t), Some(TreeKind::BTree));
    }
    assert!(db.check().unwrap().is_ok());
    db.tree("delta")
        .unwrap()
        .insert(b"new", b"after the upgrade")
        .unwrap();
    db.close().unwrap();
    let data = std::fs::read(&p).unwrap();
    let newest = slot_versions(&data)
        .into_iter()
        .max_by_key(|s| s.1)
        .unwrap();
    assert_eq!(
        newest.0, FORMAT_VERSION,
        "the newest superblock is the current version"
    );
    let db = Db::open(&p, Options::default().direct_io(false).read_only(true)).unwrap();
    let mut want = expected();
    want.insert(
        ("delta".into(), b"new".to_vec()),
        b"after the upgrade".to_vec(),
    );
    assert_eq!(read_all(&db), want);
    assert!(db.check().unwrap().is_ok());
}

const PATH: &str = "/db/v1.pw";

fn fixture_on(sim: &SimFs) {
    sim.create_dir_all(Path::new("/db")).unwrap();
    for (path, bytes) in [(PATH.to_string(), DATA), (format!("{PATH}-wal"), WAL)] {
        let o = OpenOptions {
            write: true,
            create: true,
            ..Default::default()
        };
        let f = sim.open(Path::new(&path), &o).unwrap();
        let mut buf = AlignedBuf::new(bytes.len(), 4096);
        buf.copy_from_slice(bytes);
        f.write_at(&buf, 0).unwrap();
        f.sync().unwrap();
    }
}

/// Opens the fixture through a power cut after `fail_at` writes and syncs
/// (0: none), then returns the image the drive keeps.
fn upgrade_with_cut(fail_at: u64, mode: CrashMode, seed: u64) -> (SimFs, u64) {
    let sim = SimFs::with_alignment(512);
    fixture_on(&sim);
    let kinds = FaultKinds {
        reads: false,
        writes: true,
        syncs: true,
    };
    let injector = FaultInjector::new(kinds, 0);
    injector.set_sticky(true);
    if fail_at > 0 {
        injector.arm(fail_at);
    }
    let fs: Arc<dyn Fs> = Arc::new(Faulty::new(sim.clone(), injector.clone()));
    if let Ok(db) = Db::open(PATH, Options::default().direct_io(false).fs(fs)) {
        let _ = db.close();
    }
    (sim.crash(seed, mode), injector.seen())
}

/// Every write or sync of the upgrading open is a possible power cut, in
/// each crash mode; the contents survive every one.
#[test]
fn a_power_cut_anywhere_in_the_upgrade_loses_nothing() {
    let (_, total) = upgrade_with_cut(0, CrashMode::DropUnsynced, 0);
    assert!(total > 5, "the upgrade wrote {total} times");
    let mut cases = 0;
    for fail_at in 1..=total {
        for (m, mode) in CrashMode::ALL.into_iter().enumerate() {
            let seed = fail_at * 3 + m as u64;
            let (img, _) = upgrade_with_cut(fail_at, mode, seed);
            let o = Options::default().direct_io(false).fs(Arc::new(img));
            let db = Db::open(PATH, o)
                .unwrap_or_else(|e| panic!("seed {seed} cut at {fail_at} {mode:?}: {e}"));
            assert_eq!(
                read_all(&db),
                expected(),
                "seed {seed} cut at {fail_at} {mode:?}"
            );
            let r = db.check().unwrap();
            assert!(
                r.is_ok(),
                "seed {seed} cut at {fail_at} {mode:?}: {:?}",
                r.problems
            );
            cases += 1;
        }
    }
    eprintln!("{cases} power cuts during the upgrade of the version-1 fixture: all recovered");
}

/// A key and its new value, or None for a remove.
type Change = (Vec<u8>, Option<Vec<u8>>);

/// The version-3 fixture's history: phases of (key, value or None for a
/// remove), a checkpoint after each (applied in batches of 100 by
/// `tests/v3_fixture_gen.rs` at the commit that added the fixture, the last
/// one of format 3). Tree "t", 512 B pages, delta flushes
/// with T = 200 and 512 B blocks, so the last checkpoints leave delta blocks
/// on leaves and on branches.
fn v3_script() -> Vec<Vec<Change>> {
    let k = |i: u32| format!("k{i:05}").into_bytes();
    let load = (0..2000u32)
        .map(|n| {
            let i = n * 7919 % 2000;
            (k(i), Some(format!("v{i}-a").into_bytes()))
        })
        .collect();
    let update = (0..2000u32)
        .step_by(13)
        .map(|i| (k(i), Some(format!("v{i}-b").into_bytes())))
        .collect();
    let remove = (0..2000u32).step_by(29).map(|i| (k(i), None)).collect();
    let add = (0..2000u32)
        .step_by(101)
        .map(|i| {
            let mut key = k(i);
            key.push(b'x');
            (key, Some(format!("new {i}").into_bytes()))
        })
        .collect();
    vec![load, update, remove, add]
}

/// What the version-3 fixture holds, computed from the script alone.
fn v3_expected() -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut m = BTreeMap::new();
    for (key, val) in v3_script().into_iter().flatten() {
        match val {
            Some(v) => m.insert(key, v),
            None => m.remove(&key),
        };
    }
    m
}

const V3_DATA: &[u8] = include_bytes!("fixtures/v3/v3.pw");

fn v3_opts() -> Options {
    Options::default().page_size(512).direct_io(false)
}

fn v3_read(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.tree("t").unwrap().iter().map(Result::unwrap).collect()
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Page kinds of the bases of the file's delta blocks (live or not), and
/// whether any page is a kind-8 branch.
fn v3_kinds(data: &[u8]) -> (Vec<u8>, bool) {
    let pages: Vec<&[u8]> = data.chunks(512).collect();
    let bases = pages
        .iter()
        .filter(|p| p[4] == 6)
        .filter_map(|p| pages.get(le_u64(p, 32) as usize).map(|b| b[4]))
        .collect();
    (bases, pages.iter().any(|p| p[4] == 8))
}

/// A version-3 file with delta blocks on leaves and on (kind-3) branches
/// reads read-only without a write, then read-write with delta flushes:
/// changed branches are converted to kind 8, the rest still read, `check`
/// passes throughout, and the superblock says the current version.
#[test]
fn version_3_file_with_delta_blocks_reads_and_converts_its_branches() {
    let [a, b] = slot_versions(V3_DATA);
    assert_eq!(
        (a.0, b.0),
        (3, 3),
        "both slots of the fixture are version 3"
    );
    let (bases, kind8) = v3_kinds(V3_DATA);
    assert!(
        bases.contains(&2) && bases.contains(&3) && !kind8,
        "{bases:?}"
    );
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("v3.pw");
    std::fs::write(&p, V3_DATA).unwrap();
    std::fs::write(d.path().join("v3.pw-wal"), b"").unwrap();
    let ro = Db::open(&p, v3_opts().read_only(true)).unwrap();
    assert_eq!(v3_read(&ro), v3_expected());
    assert!(ro.check().unwrap().is_ok());
    ro.close().unwrap();
    assert!(
        std::fs::read(&p).unwrap() == V3_DATA,
        "a read-only open writes nothing"
    );
    let delta = pagewise::DeltaFlush {
        threshold_bytes: 200,
        block_bytes: 512,
    };
    let db = Db::open(&p, v3_opts().delta_flush(Some(delta))).unwrap();
    let t = db.tree("t").unwrap();
    let mut want = v3_expected();
    for i in (0..2000u32).step_by(17) {
        let (k, v) = (format!("k{i:05}"), format!("v{i}-c"));
        t.insert(&k, &v).unwrap();
        want.insert(k.into_bytes(), v.into_bytes());
    }
    db.checkpoint().unwrap();
    assert_eq!(v3_read(&db), want);
    let r = db.check().unwrap();
    assert!(r.is_ok(), "{:?}", r.problems);
    db.close().unwrap();
    let data = std::fs::read(&p).unwrap();
    let newest = slot_versions(&data)
        .into_iter()
        .max_by_key(|s| s.1)
        .unwrap();
    assert_eq!(newest.0, FORMAT_VERSION);
    assert!(v3_kinds(&data).1, "changed branches are written as kind 8");
    let db = Db::open(&p, v3_opts().read_only(true)).unwrap();
    assert_eq!(v3_read(&db), want);
    assert!(db.check().unwrap().is_ok());
}

const V3_PATH: &str = "/db/v3.pw";

/// The keys the version-3 tests change, and their new values.
fn v3_updates() -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..2000u32)
        .step_by(17)
        .map(|i| {
            let k = format!("k{i:05}").into_bytes();
            (k, format!("v{i}-c").into_bytes())
        })
        .collect()
}

/// Opens the version-3 fixture with delta flushes, commits `v3_updates` in
/// one batch and checkpoints, through a power cut after `fail_at` writes and
/// syncs (0: none). Returns the image the drive keeps, the writes and syncs
/// seen, and whether the batch was acknowledged.
fn v3_upgrade_with_cut(fail_at: u64, mode: CrashMode, seed: u64) -> (SimFs, u64, bool) {
    let sim = SimFs::with_alignment(512);
    sim.create_dir_all(Path::new("/db")).unwrap();
    let o = OpenOptions {
        write: true,
        create: true,
        ..Default::default()
    };
    let f = sim.open(Path::new(V3_PATH), &o).unwrap();
    let mut buf = AlignedBuf::new(V3_DATA.len(), 4096);
    buf.copy_from_slice(V3_DATA);
    f.write_at(&buf, 0).unwrap();
    f.sync().unwrap();
    sim.open(Path::new(&format!("{V3_PATH}-wal")), &o).unwrap();
    let kinds = FaultKinds {
        reads: false,
        writes: true,
        syncs: true,
    };
    let injector = FaultInjector::new(kinds, 0);
    injector.set_sticky(true);
    if fail_at > 0 {
        injector.arm(fail_at);
    }
    let fs: Arc<dyn Fs> = Arc::new(Faulty::new(sim.clone(), injector.clone()));
    let delta = pagewise::DeltaFlush {
        threshold_bytes: 200,
        block_bytes: 512,
    };
    let mut acked = false;
    if let Ok(db) = Db::open(V3_PATH, v3_opts().delta_flush(Some(delta)).fs(fs)) {
        let mut b = pagewise::Batch::new();
        for (k, v) in v3_updates() {
            b.insert("t", k, v);
        }
        acked = db.apply(b).is_ok();
        let _ = db.checkpoint();
        let _ = db.close();
    }
    (sim.crash(seed, mode), injector.seen(), acked)
}

/// A power cut at any write or sync while a version-3 file is upgraded and
/// its branches converted leaves either the old contents or, once the batch
/// was acknowledged, the new ones; `check` passes on every image.
#[test]
fn a_power_cut_anywhere_in_a_version_3_upgrade_loses_nothing() {
    let (_, total, acked) = v3_upgrade_with_cut(0, CrashMode::DropUnsynced, 0);
    assert!(acked && total > 5, "the upgrade wrote {total} times");
    let old = v3_expected();
    let mut new = old.clone();
    new.extend(v3_updates());
    let mut cases = [0u32; 2];
    for fail_at in 1..=total {
        for (m, mode) in CrashMode::ALL.into_iter().enumerate() {
            let seed = fail_at * 3 + m as u64;
            let (img, _, acked) = v3_upgrade_with_cut(fail_at, mode, seed);
            let case = format!("seed {seed} cut at {fail_at} {mode:?}");
            let db = Db::open(V3_PATH, v3_opts().fs(Arc::new(img)))
                .unwrap_or_else(|e| panic!("{case}: {e}"));
            let got = v3_read(&db);
            assert!(
                got == new || (!acked && got == old),
                "{case}: acked {acked}"
            );
            let r = db.check().unwrap();
            assert!(r.is_ok(), "{case}: {:?}", r.problems);
            cases[(got == new) as usize] += 1;
        }
    }
    assert!(cases[0] > 0 && cases[1] > 0, "old / new images: {cases:?}");
}
