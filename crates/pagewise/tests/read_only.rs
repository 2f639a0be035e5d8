//! Read-only opens write nothing, refuse writes, and refuse to skip recovery;
//! a read-write Db closed without writing leaves its files untouched.

use pagewise::{wal_path, Db, Durability, Error, Options};
use std::path::Path;

fn opts() -> Options {
    Options::default()
        .page_size(512)
        .cache_bytes(64 * 1024)
        .direct_io(false)
}

fn files(p: &Path) -> (Vec<u8>, Vec<u8>) {
    (
        std::fs::read(p).unwrap(),
        std::fs::read(wal_path(p)).unwrap(),
    )
}

fn key(i: u32) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

fn filled(p: &Path, n: u32) {
    let db = Db::create(p, opts()).unwrap();
    let t = db.tree("t").unwrap();
    for i in 0..n {
        t.insert(key(i), format!("v{i}")).unwrap();
    }
    db.close().unwrap();
}

#[test]
fn read_only_reads_everything_and_writes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("db");
    filled(&p, 3000);
    let before = files(&p);
    let db = Db::open(&p, opts().read_only(true)).unwrap();
    assert!(db.is_read_only());
    let t = db.tree("t").unwrap();
    for i in (0..3000).step_by(7) {
        assert_eq!(t.get(key(i)).unwrap().unwrap(), format!("v{i}").as_bytes());
    }
    assert_eq!(t.iter().count(), 3000);
    assert!(matches!(t.insert(b"x", b"y"), Err(Error::ReadOnly { .. })));
    assert!(matches!(t.remove(key(1)), Err(Error::ReadOnly { .. })));
    assert!(matches!(db.checkpoint(), Err(Error::ReadOnly { .. })));
    db.sync().unwrap();
    drop(t);
    db.close().unwrap();
    assert!(files(&p) == before, "a read-only open changed the files");
}

#[test]
fn clean_read_write_close_writes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("db");
    filled(&p, 500);
    let db = Db::open(&p, opts()).unwrap();
    // Opening checkpoints (a fresh log run); closing after no commit must not.
    let after_open = files(&p);
    assert_eq!(db.tree("t").unwrap().len(), 500);
    db.close().unwrap();
    assert!(files(&p) == after_open, "closing a clean Db wrote");
    // And one commit does make close write.
    let db = Db::open(&p, opts()).unwrap();
    let after_open = files(&p);
    db.tree("t").unwrap().insert(b"new", b"1").unwrap();
    db.close().unwrap();
    assert!(files(&p) != after_open);
    let db = Db::open(&p, opts().read_only(true)).unwrap();
    assert_eq!(db.tree("t").unwrap().get(b"new").unwrap().unwrap(), b"1");
}

#[test]
fn read_only_refuses_a_log_that_needs_replay() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("db");
    filled(&p, 100);
    let db = Db::open(&p, opts().durability(Durability::Sync)).unwrap();
    db.tree("t").unwrap().insert(b"logged", b"only").unwrap();
    // Copy the files as a crash would leave them: the commit is in the log,
    // not yet in the data file.
    let c = d.path().join("copy");
    std::fs::copy(&p, &c).unwrap();
    std::fs::copy(wal_path(&p), wal_path(&c)).unwrap();
    drop(db);
    match Db::open(&c, opts().read_only(true)) {
        Err(Error::NeedsRecovery { records: 1, .. }) => {}
        other => panic!("expected NeedsRecovery with 1 record, got {other:?}"),
    }
    let db = Db::open(&c, opts()).unwrap();
    assert_eq!(
        db.tree("t").unwrap().get(b"logged").unwrap().unwrap(),
        b"only"
    );
    db.close().unwrap();
    let db = Db::open(&c, opts().read_only(true)).unwrap();
    assert_eq!(db.tree("t").unwrap().len(), 101);
}
