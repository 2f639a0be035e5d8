//! Bad input gives typed errors naming what and where, never a panic.

use pagewise::{Db, Error, Options};
use std::io::{Seek, SeekFrom, Write};

fn opts() -> Options {
    Options::default()
        .page_size(4096)
        .cache_bytes(1 << 20)
        .direct_io(false)
}

fn filled(dir: &std::path::Path) -> std::path::PathBuf {
    let p = dir.join("db");
    let db = Db::create(&p, opts()).unwrap();
    let mut b = pagewise::Batch::new();
    for i in 0..3000u32 {
        b.insert("t", format!("k{i:06}"), vec![i as u8; 50]);
    }
    db.apply(b).unwrap();
    db.close().unwrap();
    p
}

#[test]
fn not_a_database() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("junk");
    std::fs::write(
        &p,
        (0..100_000u32).map(|i| (i * 7) as u8).collect::<Vec<_>>(),
    )
    .unwrap();
    match Db::open(&p, opts()) {
        Err(Error::NotADatabase { path }) => assert_eq!(path, p),
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("opened junk"),
    }
    std::fs::write(&p, b"").unwrap();
    assert!(matches!(
        Db::open(&p, opts()),
        Err(Error::NotADatabase { .. })
    ));
}

#[test]
fn newer_format_version() {
    let d = tempfile::tempdir().unwrap();
    let p = filled(d.path());
    let mut f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    for slot in 0..2u64 {
        f.seek(SeekFrom::Start(slot * 4096 + 40)).unwrap();
        f.write_all(&99u32.to_le_bytes()).unwrap();
    }
    drop(f);
    let e = Db::open(&p, opts()).expect_err("opened a newer format");
    assert!(
        matches!(
            e,
            Error::NewerVersion {
                found: 99,
                supported: 10,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("newer"), "{e}");
}

#[test]
fn truncated_file() {
    let d = tempfile::tempdir().unwrap();
    let p = filled(d.path());
    let len = std::fs::metadata(&p).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let e = Db::open(&p, opts()).expect_err("opened a truncated file");
    match &e {
        Error::Truncated {
            expected, actual, ..
        } => {
            assert_eq!(*expected, len);
            assert_eq!(*actual, len / 2);
        }
        _ => panic!("wrong error {e}"),
    }
    std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(4096)
        .unwrap();
    assert!(matches!(Db::open(&p, opts()), Err(Error::Truncated { .. })));
}

#[test]
fn bad_checksum_page_is_named_by_reads_and_check() {
    let d = tempfile::tempdir().unwrap();
    let p = filled(d.path());
    let mut bytes = std::fs::read(&p).unwrap();
    // Find a leaf page (kind byte 2 at offset 4) and flip one payload byte.
    let pid = (2..bytes.len() / 4096)
        .find(|&i| bytes[i * 4096 + 4] == 2 && bytes[i * 4096 + 24] > 0)
        .expect("a leaf page");
    bytes[pid * 4096 + 100] ^= 0x40;
    std::fs::write(&p, &bytes).unwrap();
    let db = Db::open(&p, opts()).unwrap();
    let t = db.tree("t").unwrap();
    let err = t.iter().find_map(|r| r.err()).expect("a read error");
    match &err {
        Error::Checksum {
            page, offset, path, ..
        } => {
            assert_eq!(*page, pid as u64);
            assert_eq!(*offset, pid as u64 * 4096);
            assert_eq!(path, &p);
        }
        e => panic!("wrong error {e}"),
    }
    let r = db.check().unwrap();
    assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    assert!(
        r.problems[0].contains(&format!("page {pid}")),
        "{:?}",
        r.problems
    );
    assert!(r.problems[0].contains("checksum"), "{:?}", r.problems);
}

#[test]
fn damaged_newest_superblock_falls_back_to_the_other_slot() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("db");
    let db = Db::create(&p, opts()).unwrap();
    db.tree("t").unwrap().insert(b"k", b"v").unwrap();
    drop(db);
    // A torn superblock write: its second half never reached the disk.
    let mut bytes = std::fs::read(&p).unwrap();
    let g0 = u64::from_le_bytes(bytes[48..56].try_into().unwrap());
    let g1 = u64::from_le_bytes(bytes[4096 + 48..4096 + 56].try_into().unwrap());
    let newest = if g0 > g1 { 0 } else { 1 };
    bytes[newest * 4096 + 2048..newest * 4096 + 4096].fill(0xAB);
    // Make the log hold the write again so the older checkpoint plus the log
    // is the state (as it is when a checkpoint's superblock write tears).
    std::fs::write(&p, &bytes).unwrap();
    let e = Db::open(&p, opts());
    // The older slot is valid, so open succeeds (the data since that
    // checkpoint is what a torn write costs; here the log was already reset).
    assert!(e.is_ok(), "{:?}", e.err());
}

/// A newest superblock damaged after it was durable (bit rot, not a torn
/// write) must not roll the Db back silently to the older slot: the log
/// already continues the newer checkpoint, so open says the file is corrupt.
#[test]
fn rotten_newest_superblock_is_reported_not_rolled_back() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("db");
    let db = Db::create(&p, opts()).unwrap();
    let t = db.tree("t").unwrap();
    t.insert(b"k1", b"v").unwrap();
    db.checkpoint().unwrap();
    t.insert(b"k2", b"v").unwrap();
    db.checkpoint().unwrap();
    t.insert(b"k3", b"v").unwrap(); // in the log run of the newest checkpoint
    std::mem::forget((t, db)); // the process dies: no close
    let bytes = std::fs::read(&p).unwrap();
    let gen = |slot: usize| {
        u64::from_le_bytes(
            bytes[slot * 4096 + 48..slot * 4096 + 56]
                .try_into()
                .unwrap(),
        )
    };
    let newest = if gen(0) > gen(1) { 0 } else { 1 };
    let mut damaged = bytes.clone();
    damaged[newest * 4096 + 700] ^= 1;
    let copy = d.path().join("copy");
    std::fs::write(&copy, &damaged).unwrap();
    std::fs::copy(pagewise::wal_path(&p), pagewise::wal_path(&copy)).unwrap();
    let e = Db::open(&copy, opts()).expect_err("opened a rolled-back checkpoint");
    assert!(
        matches!(e, Error::Corrupt { page, .. } if page == newest as u64),
        "{e}"
    );
    assert!(e.to_string().contains("newest superblock"), "{e}");
    // Undamaged, the same files open with all three keys.
    std::fs::write(&copy, &bytes).unwrap();
    let db = Db::open(&copy, opts()).unwrap();
    assert!(db.tree("t").unwrap().get(b"k3").unwrap().is_some());
}

/// A log record damaged after it was durable (bit rot, not a torn tail) is
/// reported when a later record proves it was synced, instead of recovery
/// stopping there and dropping the acknowledged records after it.
#[test]
fn rotten_durable_log_record_is_reported_not_dropped() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("db");
    let db = Db::create(&p, opts().durability(pagewise::Durability::Sync)).unwrap();
    let t = db.tree("t").unwrap();
    for k in [b"k1", b"k2", b"k3"] {
        t.insert(k, b"value").unwrap(); // one synced record each
    }
    std::mem::forget((t, db));
    let wal = std::fs::read(pagewise::wal_path(&p)).unwrap();
    let copy = d.path().join("copy");
    std::fs::copy(&p, &copy).unwrap();
    let mut damaged = wal.clone();
    damaged[60] ^= 1; // inside the first record's payload
    std::fs::write(pagewise::wal_path(&copy), &damaged).unwrap();
    let e = Db::open(&copy, opts()).expect_err("dropped acknowledged records silently");
    assert!(matches!(e, Error::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains("log record"), "{e}");
    // The last record has no later witness: its damage reads as a torn tail.
    let last = wal.iter().rposition(|&b| b != 0).unwrap();
    let mut tail = wal.clone();
    tail[last] ^= 1;
    std::fs::write(pagewise::wal_path(&copy), &tail).unwrap();
    let db = Db::open(&copy, opts()).unwrap();
    let t = db.tree("t").unwrap();
    assert!(t.get(b"k2").unwrap().is_some() && t.get(b"k3").unwrap().is_none());
}
